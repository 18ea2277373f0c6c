"""The sanitizer, after the event loop: every access checked at once from the event log.

The loop leaves, per executed instance, the step it started at, the step it completed at and
its vector clock. That is all happens-before needs: ``a`` happens before ``b`` when ``b``'s
clock has seen ``a``'s epoch (its own entry in its own clock). Each check is a vectorised pass:

- **races**: every pair of a write and another queue's access whose ranges really overlap and that neither
  orders. Happens-before is monotone along a queue, so those are found per window of the tables (a write and a
  group of another queue's accesses of one footprint) in the range the write is unordered with, a few accesses a
  pass (``Windows``, ``pair_checks``): linear in the accesses, where every overlapping pair is quadratic in a
  loop's trip count. The hazard follows
  program order on one core and, across cores, the order the bytes were really touched in (a
  read samples at its start, a write lands at its completion), except that a read of bytes no
  write had landed on yet, and what follows it on its core, was meant to follow the write (a
  missing READY reads RAW); the finding belongs to the later of the two;
- **uninitialised reads**: bytes of no input that no write landed on before the read started;
- **bounds**: a traced slot choice outside its candidates;
- **event ids** outside the chip's range, and the **small-tile rule** on the M queue;
- **reordered pairs**: two conflicting accesses of one core that sync ordered against program order (the
  later instruction ran first). Not a finding: the device is right, but the data plane traces a core in
  program order and must compute the two the other way round (``pair_checks``; ``_order.emit_order``).

Each check returns candidate finding rows: ``(valid, kind, inst, other, a, b, step)`` arrays,
``step`` being the event that raised it (``_log`` keeps the first per kind and site).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ..core import N_CORES, RAW, SMALL_TILE, WAR, WAW, Finding
from ._machine import END, START, Event, Machine, Plan, heads, ids_ok
from ._tables import NARROW_SPAN, Static

BIG = jnp.iinfo(jnp.int32).max
#: a BOUNDS row's detail ``b``: 0 / 1 a read / write operand's slot choice, ``FAULT_DETAIL + i`` a traced operand
#: (``core.BOUNDS_WHAT[i]``) past its limit
FAULT_DETAIL = 2


def rows(valid, kind, inst, other, a, b, step) -> dict:
    """Candidate finding rows, every field broadcast to one length."""
    valid = jnp.asarray(valid, bool)
    shape = valid.shape
    cast = lambda x: jnp.broadcast_to(jnp.asarray(x, jnp.int32), shape)
    return dict(valid=valid, kind=cast(kind), inst=cast(inst), other=cast(other), a=cast(a), b=cast(b), step=cast(step))


#: The static list each check's rows follow (its padded length is the group's number of rows).
_GROUP_LISTS = {"races": "race_inst", "small_tile": "m_list", "sync_events": "sync_inst", "event_ids": "id_inst",
                "uninitialised": "uninit_reads", "bounds": "bound_accs", "faults": "fault_inst"}  # fmt: skip


def no_rows(st: Static, group: str) -> dict:
    """A check's rows when it has nothing to check: its shape, none valid (the compiled program drops it)."""
    n = getattr(st, _GROUP_LISTS[group]).shape[0]
    return rows(jnp.zeros(n, bool), -1, -1, -1, -1, -1, -1)


class Log:
    """Per instance, from the events: the step it started and completed at (-1: never), the cycles, its
    clock; and the sync finding each of its two events raised."""

    def __init__(self, st: Static, events: Event):
        n = st.n_instances
        steps = jnp.arange(events.kind.shape[0], dtype=jnp.int32)

        def step_of(kind):  # one scatter of one column per event kind; the rest is gathered from the events
            at = jnp.where(events.kind == kind, events.inst, n)  # n: dropped
            return jnp.full((n,), -1, jnp.int32).at[at].set(steps, mode="drop")

        self.start_step, self.end_step = step_of(START), step_of(END)
        s, e = jnp.clip(self.start_step, 0), jnp.clip(self.end_step, 0)
        self.start_t = jnp.where(self.start_step >= 0, events.t[s], -1)
        self.end_t = jnp.where(self.end_step >= 0, events.t[e], -1)
        self.clock = events.clock[s]
        self.start_finding = jnp.where(self.start_step[:, None] >= 0, events.finding[s], -1)
        self.end_finding = jnp.where(self.end_step[:, None] >= 0, events.finding[e], -1)
        self.source = jnp.where(self.start_step >= 0, events.source[s], -1)
        self.epoch = jnp.take_along_axis(self.clock, st.queue[:, None], axis=1)[:, 0]
        self.started = self.start_step >= 0
        self.completed = self.end_step >= 0


class Accesses:
    """Every used access slot of the tables' list, as this scenario ran it: its atom run, whether it happened,
    and the step it touched its bytes at (a read at its start, a write at its completion)."""

    def __init__(self, st: Static, op, log: Log):
        flat, inst = st.acc_flat, st.acc_inst
        field = lambda name: jnp.concatenate([op[f"rd_{name}"].reshape(-1), op[f"wr_{name}"].reshape(-1)])[flat]
        self.lo, self.hi, self.ok = field("lo"), field("hi"), field("ok")
        self.c0, self.c1 = field("c0"), field("c1")  # the columns a GM window touches of each row (else all)
        self.step = jnp.where(st.acc_write, log.end_step[inst], log.start_step[inst])
        self.on = field("on") & (self.step >= 0) & st.acc_valid  # a real slot, on, and its instance got that far
        self.live = self.on & self.ok


class Windows:
    """The part of each window's group (``_tables._windows``) that the pair checks look at in this scenario's run.

    Happens-before is monotone along a queue: the accesses of a queue ordered before a write are a prefix of its
    places (the write's clock counts them), those ordered after it a suffix (from the first whose clock has seen the
    write's epoch). What lies between is unordered with the write, and a window's range is the part of its group there;
    on one core it also reaches the write's place in program order, so that it holds the accesses sync ran against
    program order. The ranges are looked at ``win_width`` accesses a pass, ``passes`` passes in all: one on a correct
    kernel, more where a missing sync leaves a write unordered with much of a queue."""

    def __init__(self, st: Static, op, pl: Plan, log: Log, acc: Accesses):
        live = st.win_valid & acc.live[st.win_write]  # a write that never landed: nothing to look at
        if st.whole_windows:  # each window's slots hold it whole: one pass over all of it
            self.lo, self.hi = jnp.zeros_like(st.win_length), jnp.where(live, st.win_length, 0)
            self.passes = jnp.int32(1)
            return
        n, length = st.n_instances, pl.qlist.shape[1]
        enabled = (st.qlist >= 0) & op["enable"][jnp.clip(st.qlist, 0)]
        place = (jnp.cumsum(enabled, axis=1) - enabled).astype(jnp.int32)  # the enabled instances before it
        place = jnp.zeros(n, jnp.int32).at[jnp.where(st.qlist >= 0, st.qlist, n)].set(place, mode="drop")
        wi = st.acc_inst[st.win_write]
        qw, qo = st.queue[wi], st.win_queue

        def group_place(i):  # the queue place of the group's i-th access
            last = jnp.maximum(st.win_length - 1, 0)
            return place[st.acc_inst[st.win_acc[st.win_start + jnp.clip(i, 0, last)]]]

        def seen(i):  # what the instance at the group's i-th access's place has seen of the write's queue (BIG: it
            # has not run); a disabled access's place is that of the queue's next enabled instance
            h = pl.qlist[qo, jnp.clip(group_place(i), 0, length - 1)]
            ran = (h >= 0) & log.started[jnp.clip(h, 0)]
            return jnp.where(ran, log.clock[jnp.clip(h, 0), qw], BIG)

        # the accesses ordered before the write (places its clock counts), and from where they are ordered after it
        lo, hi = _lower_bounds([(group_place, log.clock[wi, qo]), (seen, log.epoch[wi])], st.win_length,
                               st.win_acc.shape[0])  # fmt: skip
        same_core = st.win_split >= 0
        lo = jnp.where(same_core, jnp.minimum(lo, st.win_split), lo)
        hi = jnp.where(same_core, jnp.maximum(hi, st.win_split), hi)
        self.lo = lo
        self.hi = jnp.where(live, hi, lo)
        width = jnp.maximum(st.win_width, 1)
        self.passes = jnp.max(jax.lax.div(self.hi - self.lo + width - 1, width))

    def pairs(self, st: Static, log: Log, acc: Accesses, k) -> Pairs:
        """The candidate pairs of pass ``k``: each window's next ``win_width`` accesses of its range."""
        t = st.slot_win
        i = self.lo[t] + k * st.win_width[t] + st.slot_place
        o = st.win_acc[st.win_start[t] + jnp.clip(i, 0, jnp.maximum(st.win_length[t] - 1, 0))]
        w = st.win_write[t]
        valid = st.slot_valid & (i < self.hi[t]) & (~st.acc_write[o] | (w < o))  # a write-write pair once
        return Pairs(st, log, acc, w, o, valid)


def _lower_bounds(searches: list, n, n_max: int) -> list:
    """For each ``(value, target)``, per row the first ``i`` in ``[0, n)`` with ``value(i) >= target`` (``n`` where
    none), ``value`` being non-decreasing in ``i``: binary searches of ``n_max.bit_length()`` steps, side by side."""

    def step(_, bounds):
        out = []
        for (value, target), (lo, hi) in zip(searches, bounds):
            mid = jax.lax.div(lo + hi, 2)  # non-negative: no floor-division corrections
            less = value(mid) < target
            active = lo < hi
            out.append((jnp.where(active & less, mid + 1, lo), jnp.where(active & ~less, mid, hi)))
        return out

    start = [(jnp.zeros_like(n), n)] * len(searches)
    return [lo for lo, _ in jax.lax.fori_loop(0, max(int(n_max), 1).bit_length(), step, start)]


class Pairs:
    """Candidate pairs (``w`` a write access, ``o`` an access of another queue; ``valid``), as this scenario ran them:
    their instances, whether both happened on overlapping bytes, and which one happens-before the other (neither: a
    race)."""

    def __init__(self, st: Static, log: Log, acc: Accesses, w, o, valid):
        wi, oi = st.acc_inst[w], st.acc_inst[o]
        self.o_writes = st.acc_write[o]
        self.w, self.o, self.wi, self.oi = w, o, wi, oi
        overlap = jnp.maximum(acc.lo[w], acc.lo[o]) < jnp.minimum(acc.hi[w], acc.hi[o])
        overlap &= jnp.maximum(acc.c0[w], acc.c0[o]) < jnp.minimum(acc.c1[w], acc.c1[o])
        self.conflict = valid & acc.live[w] & acc.live[o] & overlap
        self.w_before_o = log.clock[oi, st.queue[wi]] >= log.epoch[wi]  # the other's clock has seen the write's epoch
        self.o_before_w = log.clock[wi, st.queue[oi]] >= log.epoch[oi]
        self.race = self.conflict & ~self.w_before_o & ~self.o_before_w
        self.same_core = st.core[wi] == st.core[oi]


#: Padded access counts up to which a pair's place in the order (reporter's event, write, other access) packs into
#: one int32 key: one scatter-min per pass instead of two.
PACKED_ACCESSES = 1 << 14


def pair_checks(st: Static, log: Log, acc: Accesses, win: Windows, landed=None, races: bool = True):
    """``(races' rows or None, reordered)`` from every window's range, pass by pass.

    **Races** (``races``): per instance of a window, its first race (the earliest of its events that found one). The
    hazard follows program order on one core and, across cores, the order the bytes were touched in, except that a
    read of bytes of no input that no write had landed on yet, and what follows it on its core, was meant to follow
    the write (a missing READY reads RAW); the finding belongs to the later of the two. Per reporter its earliest
    event first (a start precedes its own completion); then a read names the latest write it is unordered with (the
    one whose data it wanted: a K chain's closing mmad, not its first) and a write the first pair in the order
    (write, other access).
    ``landed``: per atom, the first step a write landed on it (``first_landed``); ``None`` where no read can touch
    bytes of no input. Those fresh reads are found in passes of their own, before the races' (where a window
    crosses cores: on one core program order decides).

    **Reordered**: the first pair, in that order, of conflicting accesses of one core that happens-before orders against
    program order: ``(the instance that ran first though later in program order, the earlier one)``, or ``(-1, -1)``.
    """
    n_acc = st.acc_inst.shape[0]
    packed = n_acc <= PACKED_ACCESSES

    def over_passes(body, init):
        if st.whole_windows:
            return body(win.pairs(st, log, acc, jnp.int32(0)), init)

        def step(carry):
            k, x = carry
            return k + 1, body(win.pairs(st, log, acc, k), x)

        return jax.lax.while_loop(lambda carry: carry[0] < win.passes, step, (jnp.int32(0), init))[1]

    first = None
    if races and landed is not None and st.cross_windows:  # per write and reading core, its first fresh read

        def fresh(p: Pairs, first):
            safe = jnp.clip(jnp.maximum(acc.lo[p.w], acc.lo[p.o]), 0, st.n_atoms - 1)
            hit = p.race & ~p.o_writes & ~st.atom_init[safe] & (landed[safe] > acc.step[p.o])
            return first.at[p.wi * N_CORES + st.core[p.oi]].min(jnp.where(hit, st.pidx[p.oi], BIG))

        first = over_passes(fresh, jnp.full((st.n_instances * N_CORES,), BIG, jnp.int32))

    def write_first(wi, oi, w, o):  # the write is the earlier of the two
        same_core = st.core[wi] == st.core[oi]
        before = jnp.where(same_core, st.pidx[wi] < st.pidx[oi], acc.step[w] < acc.step[o])
        if first is None:
            return before
        return before | (~same_core & (st.pidx[oi] >= first[wi * N_CORES + st.core[oi]]))

    def body(p: Pairs, carry):
        best, reorder = carry
        if races:
            w_first = write_first(p.wi, p.oi, p.w, p.o)
            at_end = ~w_first | p.o_writes  # the reporter's event is a completion (its write landing)
            # a read names the latest write it is unordered with (the one whose data it wanted), a write the first pair
            key = jnp.where(p.race, jnp.where(at_end, n_acc + p.w, _latest(p.w, n_acc)), BIG)
            # the reporter is the later of the two: two scatters at indices a taken-whole window leaves static (a
            # vmap then scatters rows, not one scenario's elements at a time)
            best = _least(best, st.race_place[p.oi], jnp.where(w_first, key, BIG), p.o, n_acc)
            best = _least(best, st.race_place[p.wi], jnp.where(w_first, BIG, key), p.o, n_acc)
        write_ran_first = p.w_before_o & (st.pidx[p.oi] < st.pidx[p.wi])
        hit = p.conflict & p.same_core & (write_ran_first | (p.o_before_w & (st.pidx[p.wi] < st.pidx[p.oi])))
        # which of the two ran first rides in the second key's lowest bit: read back after the loop, it would be a
        # gather from every instance's clock, which a sweep's vmap lays out again whole (40 ms at 1,024 scenarios)
        return best, _least(reorder, None, jnp.where(hit, p.w, BIG), 2 * p.o + write_ran_first, 2 * n_acc)

    none = lambda *shape: (jnp.full(shape, BIG, jnp.int32),) * (1 if packed else 2)  # noqa: E731
    best, reorder = over_passes(body, (none(st.race_inst.shape[0]), none()))

    w, o = _keys(reorder, 2 * n_acc)
    write_ran_first = jax.lax.rem(o, 2) == 1
    o = jax.lax.div(o, 2)
    found = w < BIG
    w, o = jnp.where(found, w, 0), jnp.where(found, o, 0)
    wi, oi = st.acc_inst[w], st.acc_inst[o]
    reordered = jnp.where(found, jnp.where(write_ran_first, jnp.stack([wi, oi]), jnp.stack([oi, wi])), -1)
    if not races:
        return None, reordered.astype(jnp.int32)
    key, o = _keys(best, n_acc)
    hit = key < BIG
    w = jax.lax.rem(key, n_acc)
    w, o = jnp.where(hit, jnp.where(key >= n_acc, w, _latest(w, n_acc)), 0), jnp.where(hit, o, 0)
    wi, oi, o_writes = st.acc_inst[w], st.acc_inst[o], st.acc_write[o]
    w_first = write_first(wi, oi, w, o)
    inst = st.race_inst
    hazard = jnp.where(o_writes, WAW, jnp.where(w_first, RAW, WAR))
    step_at = jnp.where(hit & (key >= n_acc), log.end_step[inst], log.start_step[inst])
    atom = jnp.maximum(acc.lo[w], acc.lo[o])
    found_rows = rows(hit, Finding.RACE, inst, jnp.where(w_first, wi, oi), atom, hazard, step_at)
    return found_rows, reordered.astype(jnp.int32)


def _latest(access, n: int):
    """A write access's index as a read's race key holds it, and back: the later in the record's order, the smaller."""
    return n - 1 - access


def _least(best: tuple, at, key, second, n: int) -> tuple:
    """``best`` (per place: the least ``key`` and, among its holders, the least ``second`` < ``n``) with
    ``(key, second)`` at the places ``at`` taken in (``key`` BIG: nothing; ``at`` None: one place, scalars). One
    array of ``key * n + second`` where that fits (``PACKED_ACCESSES``), else the two keys apart."""
    if len(best) == 1:
        both = jnp.where(key < BIG, key * n + second, BIG)
        return (jnp.minimum(best[0], _least_of_all(both)) if at is None else best[0].at[at].min(both),)
    key1, key2 = best
    if at is None:
        k1 = _least_of_all(key)
        k2 = _least_of_all(jnp.where((key < BIG) & (key == k1), second, BIG))
    else:
        k1 = jnp.full_like(key1, BIG).at[at].min(key)
        k2 = jnp.full_like(key2, BIG).at[at].min(jnp.where((key < BIG) & (key == k1[at]), second, BIG))
    return jnp.minimum(key1, k1), jnp.where(k1 < key1, k2, jnp.where(k1 == key1, jnp.minimum(key2, k2), key2))


def _least_of_all(x):
    """The least element of ``x`` as a scatter-min into one place: under a sweep's ``vmap`` that keeps the scenarios
    the minor axis, as the races' scatters do, where a reduction first lays every pair out again (the reordered
    pair: 181 against 221 ms for 1,024 seed-000 scenarios)."""
    return jnp.full((1,), BIG, jnp.int32).at[jnp.zeros(x.shape, jnp.int32)].min(x)[0]


def _keys(best: tuple, n: int):
    """``_least``'s ``(key, second)`` (BIG, BIG where nothing was taken in)."""
    if len(best) == 2:
        return best
    found = best[0] < BIG
    return (jnp.where(found, jax.lax.div(best[0], n), BIG), jnp.where(found, jax.lax.rem(best[0], n), BIG))


def small_tile(st: Static, op, log: Log) -> dict:
    """Two consecutive accumulating mmads over < 10 fp32 fractals need a PIPE_M barrier [semantics §2]:
    one row per place of the M queue, its predecessor being the queue's previous enabled instruction."""
    cur = jnp.clip(st.m_list, 0)
    enabled = (st.m_list >= 0) & op["enable"][cur]
    place = jnp.arange(st.m_list.shape[0])
    before = jax.lax.cummax(jnp.where(enabled, place, -1))
    prev_place = jnp.concatenate([jnp.full((1,), -1, before.dtype), before[:-1]])
    prev = jnp.clip(st.m_list[jnp.clip(prev_place, 0)], 0)
    key = op["wr_lo"][cur, 0]  # the L0C it writes
    hit = enabled & (prev_place >= 0) & log.started[cur] & op["small_tile"][cur] & op["accumulate"][cur]
    hit &= op["small_tile"][prev] & (op["wr_lo"][prev, 0] == key)
    return rows(hit, Finding.RACE, cur, prev, key, SMALL_TILE, log.start_step[cur])


def first_landed(st: Static, acc: Accesses):
    """Per atom, the first step a write landed on it (``BIG``: none), over the writes that may land on bytes of
    no input (the only atoms ``uninitialised`` and ``races`` ask about)."""
    atoms = st.n_atoms
    w = st.uninit_writes
    idx, on, step = [], [], []
    for part, span in _span_parts(w, st.uninit_narrow_write_rows, st.uninit_write_span):
        x = acc.lo[part][:, None] + jnp.arange(span)
        idx.append(x.reshape(-1))
        on.append((acc.live[part][:, None] & (x < acc.hi[part][:, None])).reshape(-1))
        step.append(jnp.broadcast_to(acc.step[part][:, None], x.shape).reshape(-1))
    idx, on, step = (jnp.concatenate(x) for x in (idx, on, step))
    return jnp.full((atoms,), BIG, jnp.int32).at[jnp.where(on, idx, atoms)].min(step, mode="drop")


def uninitialised(st: Static, acc: Accesses, landed) -> dict:
    """Reads of bytes of no input that no write landed on before the read started (b: the read slot)."""
    atoms = st.n_atoms
    r = st.uninit_reads
    any_bad, first = [], []
    for part, span in _span_parts(r, st.uninit_narrow_rows, st.uninit_span):
        idx = acc.lo[part][:, None] + jnp.arange(span)
        safe = jnp.clip(idx, 0, atoms - 1)
        on = acc.live[part][:, None] & (idx < acc.hi[part][:, None])
        bad = on & ~st.atom_init[safe] & (landed[safe] > acc.step[part][:, None])
        any_bad.append(jnp.any(bad, axis=1))
        first.append(jnp.take_along_axis(idx, jnp.argmax(bad, axis=1)[:, None], axis=1)[:, 0])
    bad, first = jnp.concatenate(any_bad), jnp.concatenate(first)
    return rows(bad, Finding.UNINITIALIZED, st.acc_inst[r], -1, first, st.acc_slot[r], acc.step[r])


def _span_parts(listed, narrow_rows: int, wide_span: int) -> list:
    """A listed access column as its narrow rows (``NARROW_SPAN`` atoms each) and its wide ones (``wide_span``)."""
    parts = [(listed[:narrow_rows], NARROW_SPAN), (listed[narrow_rows:], wide_span)]
    return [(part, span) for part, span in parts if part.shape[0]]


def bounds(st: Static, acc: Accesses) -> dict:
    """Accesses whose traced slot choice lies outside their candidates (a: the slot, b: 0 read, 1 write)."""
    a = st.bound_accs
    return rows(acc.on[a] & ~acc.ok[a], Finding.BOUNDS, st.acc_inst[a], -1, st.acc_slot[a], st.acc_write[a],
                acc.step[a])  # fmt: skip


def faults(st: Static, op, log: Log) -> dict:
    """Issues whose traced operand broke its instruction's rule (``Fault``): a BOUNDS row names the operand in
    ``b`` (``FAULT_DETAIL`` + its ``BOUNDS_WHAT`` index) and its value in ``a``; a LAYOUT row the same way."""
    inst = st.fault_inst
    layout = st.fault_kind == Finding.LAYOUT
    what = jnp.where(layout, op["layout_what"][inst], op["bounds_what"][inst])
    value = jnp.where(layout, op["layout_value"][inst], op["bounds_value"][inst])
    valid = st.fault_valid & log.started[inst] & (what >= 0)
    return rows(valid, st.fault_kind, inst, -1, value, FAULT_DETAIL + what, log.start_step[inst])


def event_ids(st: Static, op, log: Log) -> dict:
    """A sync instruction whose traced event id names no flag or counter of the chip."""
    inst = st.id_inst
    eid, ok = ids_ok(st, op, inst)
    return rows(log.started[inst] & ~ok, Finding.SYNC_ERROR, inst, -1, 0, eid, log.start_step[inst])


def sync_events(st: Static, log: Log) -> dict:
    """The findings the machine raised as it ran: double sets, merged signals, overflows (at a set's
    completion) and mode mismatches (at a cross-core wait's start), one row per kind each can raise."""
    inst = st.sync_inst
    found = jnp.where(st.sync_at_end[:, None], log.end_finding[inst], log.start_finding[inst])
    step = jnp.where(st.sync_at_end, log.end_step[inst], log.start_step[inst])
    return rows(found[:, 0] == st.sync_kind, st.sync_kind, inst, found[:, 1], found[:, 2], found[:, 3], step)


def end_state(st: Static, m: Machine, pl: Plan, n_steps: int) -> dict:
    """At the end: a deadlock (the first stuck head), else every bit, counter, barrier half and unit flag left set."""
    has, head = heads(m, pl)
    dead = m.stuck | ~m.done
    deadlock = rows(dead[None], Finding.DEADLOCK, head[jnp.argmax(has)], -1, jnp.argmax(has), 0, n_steps)
    c, e = m.count.shape
    ring_first = m.ring_inst[jnp.arange(c)[:, None], jnp.arange(e)[None, :], m.ring_head]
    left = [
        (m.flag, m.flag_inst, 0, jnp.arange(m.flag.shape[0])),
        (
            ((m.count > 0) & st.channel_valid[:, None]).reshape(-1),
            ring_first.reshape(-1),
            1,
            st.cross_ids[jnp.arange(c * e) % e],
        ),
        (m.half.reshape(-1), m.half_inst.reshape(-1), 2, st.cross_ids[jnp.arange(e * 2) // 2]),
        (m.uf & st.uf_valid, m.uf_inst, 3, jnp.arange(m.uf.shape[0])),
    ]
    leftovers = [rows(~dead & held, Finding.LEFTOVER, jnp.clip(inst, 0), -1, what, which, n_steps)
                 for held, inst, what, which in left]  # fmt: skip
    return concat([deadlock, *leftovers])


def concat(groups: list[dict]) -> dict:
    return {k: jnp.concatenate([g[k] for g in groups]) for k in groups[0]}
