"""The control plane: the block's sync hardware and the sanitizer, as one event loop over a record.

This is semantics §8 as a pure state machine. Each (core, pipe) is an in-order queue; the
scalar unit issues in program order and stops only at fences (``PIPE_ALL``, every S
instruction, and — as options — every wait, or every cross-core wait on chips where that
blocks the whole core). The loop executes events in time order: a queue head *starts* once it
is issued and what it waits for holds (it consumes the signal and acquires that signal's
clock), and *completes* ``cycles`` later (its sets and unit-flag updates happen then). A state
with unfinished instructions and no possible event is a deadlock.

Happens-before is exact: one vector clock per queue, one clock per signal (cross-core
counters are FIFO rings, so the k-th wait acquires the k-th set's clock), and per atom of
every byte space a write clock and a read clock. A conflicting access that does not
happen-after the other is a race whatever the latencies.

The loop body interprets the record's arrays, so it compiles once per shape of the static
resources (queues, atoms, flag bits, channels), not per instruction: a longer kernel is a
longer array, not a bigger program.
"""

from __future__ import annotations

import dataclasses
import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Int

from ..core import AIV0, RAW, SMALL_TILE, WAR, WAW, Finding, Pipe
from . import _onehot as hot
from ._record import SUB, UF_UPDATE, Record, Sync, Template, UnitFlagRole

#: Fields of one finding row: kind, template entry (the site), instance, other instance, detail a, detail b.
KIND, ENTRY, INST, OTHER, DETAIL_A, DETAIL_B = range(6)
FINDING_FIELDS = 6
#: Pending signals one cross-core counter holds on a counter chip (the 16th overflows) [semantics §8].
COUNTER_DEPTH = 15
_NEVER = np.int32(2**30)  # a time no event reaches
ATOM_STEP = 8  # atoms are padded to a multiple of this (they are scanned per access; a power of two wastes too many)


@dataclasses.dataclass(frozen=True)
class ControlOptions:
    """Static choices of the execution model (device behaviour by default)."""

    wait_blocks_issue: bool = False  # "issue blocks on every wait": each wait is a fence
    cross_wait_blocks_core: bool = False  # A2/A3: a cross-core wait is a fence of its core
    counter_chip: bool = False  # cross-core counters 0..15 (else bits: a second set merges)
    inter_subblock_barrier: bool = True  # INTER_SUBBLOCK as a barrier (else point-to-point)
    max_findings: int = 32  # distinct (kind, site) findings kept; more are counted in ``dropped``
    keep_timeline: bool = True  # per-instance start and end cycles


class SyncLatency(eqx.Module):
    """Cycles from a signal's set completing to its wait being able to start, per edge kind (sweepable)."""

    flag_cycles: Int[Array, ""] = eqx.field(default_factory=lambda: jnp.asarray(0, jnp.int32))
    unit_flag_cycles: Int[Array, ""] = eqx.field(default_factory=lambda: jnp.asarray(0, jnp.int32))
    cross_core_cycles: Int[Array, ""] = eqx.field(default_factory=lambda: jnp.asarray(0, jnp.int32))


class ControlState(eqx.Module):
    """Everything the control plane carries for one scenario (sizes set by the record's resources)."""

    # queues and issue
    now: Int[Array, ""]
    pos: Int[Array, " Q"]  # next unfinished instance of each queue (index into the queue's list)
    busy: Bool[Array, " Q"]  # the head has started and not completed
    busy_end: Int[Array, " Q"]
    free_t: Int[Array, " Q"]  # when the queue's last instruction completed
    fence_pos: Int[Array, " 3"]  # next unfinished fence of each core
    # happens-before
    vc: Int[Array, "Q Q"]
    write_clock: Int[Array, "A Q"]  # per atom, the latest write epoch of each queue
    write_inst: Int[Array, "A Q"]
    read_clock: Int[Array, "A Q"]  # per atom, the latest read epoch of each queue
    read_inst: Int[Array, "A Q"]
    # intra-core flag bits
    flag: Bool[Array, " F"]
    flag_t: Int[Array, " F"]
    flag_clock: Int[Array, "F Q"]
    flag_inst: Int[Array, " F"]
    # cross-core counters: FIFO rings per (channel, id)
    count: Int[Array, "C E"]
    ring_head: Int[Array, "C E"]
    ring_clock: Int[Array, "C E D Q"]
    ring_t: Int[Array, "C E D"]
    ring_inst: Int[Array, "C E D"]
    ring_mode: Int[Array, "C E D"]
    # the INTER_SUBBLOCK barrier's halves per id and AIV
    half: Bool[Array, "E 2"]
    half_clock: Int[Array, "E 2 Q"]
    half_inst: Int[Array, "E 2"]
    # unit flags per unit-flag atom of L0C
    uf: Bool[Array, " U"]
    uf_t: Int[Array, " U"]
    uf_clock: Int[Array, "U Q"]
    uf_inst: Int[Array, " U"]
    # the small-tile chain on the AIC's M pipe
    chain_atom: Int[Array, ""]
    chain_inst: Int[Array, ""]
    # findings and timeline
    findings: Int[Array, "K 6"]
    n_findings: Int[Array, ""]
    dropped: Int[Array, ""]
    start: Int[Array, " N"]
    end: Int[Array, " N"]
    stuck: Bool[Array, ""]
    steps: Int[Array, ""]


def _bucket(n: int, floor: int) -> int:
    """``n`` rounded up to a power of two (at least ``floor``): records of similar size share one compile."""
    return max(floor, 1 << max(int(n) - 1, 0).bit_length())


class _Static(eqx.Module):
    """The template as the loop body reads it: padded arrays (traced, so one compiled program serves
    every record of the same bucketed size) and the few sizes that are static."""

    entry: Int[Array, " N"]
    core: Int[Array, " N"]
    pidx: Int[Array, " N"]
    sync: Int[Array, " N"]
    uf_role: Int[Array, " N"]
    flag_base: Int[Array, " N"]
    channels: Int[Array, "N 2"]
    channel_alt: Int[Array, "N 4"]
    read_valid: Bool[Array, "N Rr"]  # the instance reads in that slot
    write_valid: Bool[Array, "N Rw"]
    fence: Bool[Array, " N"]
    qlist: Int[Array, "Q L"]
    qlen: Int[Array, " Q"]
    queue_core: Int[Array, " Q"]
    queue_pipe: Int[Array, " Q"]
    flist: Int[Array, "3 Fm"]  # program index of each core's fences in order (sentinel padded)
    atom_init: Bool[Array, " A"]
    uf_valid: Bool[Array, " U"]
    channel_valid: Bool[Array, " C"]
    sub_channel: Bool[Array, " C"]  # an INTER_SUBBLOCK barrier channel
    n_flags: int = eqx.field(static=True)
    n_entries: int = eqx.field(static=True)
    n_flag_ids: int = eqx.field(static=True)
    n_cross_ids: int = eqx.field(static=True)
    depth: int = eqx.field(static=True)  # ring depth
    read_span: tuple = eqx.field(static=True)  # per read slot, the most atoms one access covers
    write_span: tuple = eqx.field(static=True)

    @property
    def n_instances(self) -> int:
        return self.entry.shape[0]

    @property
    def n_queues(self) -> int:
        return self.qlen.shape[0]

    @property
    def n_atoms(self) -> int:
        return self.atom_init.shape[0]


def _pad(x, shape, fill):
    out = np.full(shape, fill, np.asarray(x).dtype)
    out[tuple(slice(0, d) for d in np.shape(x))] = x
    return out


def _static(t: Template, options: ControlOptions) -> _Static:
    """The padded tables as JAX arrays (made here, at the call, so that no array outlives a trace)."""
    return jax.tree.map(jnp.asarray, _tables(t, options))


@functools.lru_cache(maxsize=64)  # one set of padded tables per record and options, not one per call
def _tables(t: Template, options: ControlOptions) -> _Static:
    """The template padded to its size bucket, with the options folded in (NumPy, on the host)."""
    n, q, a = _bucket(t.n_instances, 16), _bucket(t.n_queues, 4), max(-(-t.n_atoms // ATOM_STEP), 1) * ATOM_STEP
    rr, rw, length = _bucket(t.read_valid.shape[1], 1), _bucket(t.write_valid.shape[1], 1), _bucket(t.qlist.shape[1], 8)
    n_channels, n_uf = max(len(t.channel_keys), 1), _bucket(t.uf_atom_blocks.shape[0], 1)
    pipe_of = t.queues[t.queue] % len(Pipe)
    sync = t.sync
    fence = (sync == Sync.BARRIER_ALL) | (pipe_of == int(Pipe.S))
    if options.wait_blocks_issue:
        fence |= (sync == Sync.WAIT_FLAG) | (sync == Sync.CROSS_WAIT)
    if options.cross_wait_blocks_core:
        fence |= sync == Sync.CROSS_WAIT
    per_core = [np.sort(t.pidx[(t.core == c) & fence]) for c in range(3)]
    flist = np.full((3, _bucket(max(p.size for p in per_core) + 1, 4)), _NEVER, np.int32)
    for c, p in enumerate(per_core):
        flist[c, : p.size] = p
    nu = t.uf_atom_blocks.shape[0]
    return _Static(
        entry=_pad(t.entry, n, 0), core=_pad(t.core, n, 0), pidx=_pad(t.pidx, n, _NEVER), sync=_pad(t.sync, n, 0),
        uf_role=_pad(t.uf_role, n, 0), flag_base=_pad(t.flag_base, n, -1), channels=_pad(t.channels, (n, 2), -1),
        channel_alt=_pad(t.channel_alt, (n, 4), -1), read_valid=_pad(t.read_valid, (n, rr), False),
        write_valid=_pad(t.write_valid, (n, rw), False),
        fence=_pad(fence, n, False), qlist=_pad(t.qlist, (q, length), -1), qlen=_pad(t.qlen, q, 0),
        queue_core=_pad(t.queues // len(Pipe), q, 0), queue_pipe=_pad(t.queues % len(Pipe), q, 0), flist=flist,
        atom_init=_pad(t.atom_init, a, False), uf_valid=_pad(np.ones(nu, bool), n_uf, False),
        channel_valid=_pad(np.ones(len(t.channel_keys), bool), n_channels, False),
        sub_channel=_pad(np.asarray([k[1] == SUB for k in t.channel_keys], bool), n_channels, False),
        n_flags=_bucket(len(t.flag_triples) * t.n_flag_ids, 8), n_entries=_bucket(len(t.entries), 16),
        n_flag_ids=t.n_flag_ids, n_cross_ids=t.n_cross_ids, depth=COUNTER_DEPTH if options.counter_chip else 1,
        read_span=_pad_span(t.read_span, rr), write_span=_pad_span(t.write_span, rw),
    )  # fmt: skip


def _pad_span(spans: tuple, width: int) -> tuple:
    """Spans per slot, padded slots looking at one atom, each rounded up so records share compiles."""
    return tuple(_bucket(x, 1) for x in spans) + (1,) * (width - len(spans))


def init_state(st: _Static, options: ControlOptions) -> ControlState:
    """The control state before the kernel: every flag, counter and unit flag 0."""
    q, a, f = st.n_queues, st.n_atoms, st.n_flags
    c, e, d = st.channel_valid.shape[0], st.n_cross_ids, st.depth
    u = st.uf_valid.shape[0]
    n = st.n_instances if options.keep_timeline else 0
    zi = lambda *s: jnp.zeros(s, jnp.int32)
    neg = lambda *s: jnp.full(s, -1, jnp.int32)
    return ControlState(
        now=zi(), pos=zi(q), busy=jnp.zeros(q, bool), busy_end=zi(q), free_t=zi(q), fence_pos=zi(3),
        vc=zi(q, q), write_clock=zi(a, q), write_inst=neg(a, q), read_clock=zi(a, q), read_inst=neg(a, q),
        flag=jnp.zeros(f, bool), flag_t=zi(f), flag_clock=zi(f, q), flag_inst=neg(f),
        count=zi(c, e), ring_head=zi(c, e), ring_clock=zi(c, e, d, q), ring_t=zi(c, e, d), ring_inst=neg(c, e, d),
        ring_mode=neg(c, e, d),
        half=jnp.zeros((e, 2), bool), half_clock=zi(e, 2, q), half_inst=neg(e, 2),
        uf=jnp.zeros(u, bool), uf_t=zi(u), uf_clock=zi(u, q), uf_inst=neg(u),
        chain_atom=neg(), chain_inst=neg(),
        findings=neg(options.max_findings, FINDING_FIELDS), n_findings=zi(), dropped=zi(),
        start=neg(n), end=neg(n), stuck=jnp.asarray(False), steps=zi(),
    )  # fmt: skip


def state_bytes(state: ControlState) -> int:
    """Bytes the control plane carries for one scenario (timeline excluded)."""
    leaves = [x for k, x in vars(state).items() if k not in ("start", "end")]
    return int(sum(np.asarray(x).nbytes for x in leaves))


# --- findings -------------------------------------------------------------------------------


def _add(s: ControlState, st: _Static, cond, kind, inst, other=-1, a=-1, b=-1) -> ControlState:
    """Append the findings where ``cond`` holds, once per (kind, site)."""
    cond = jnp.atleast_1d(jnp.asarray(cond, bool))
    k = cond.shape[0]
    bc = lambda x: jnp.broadcast_to(jnp.asarray(x, jnp.int32), (k,))
    kind, inst, other, a, b = bc(kind), bc(inst), bc(other), bc(a), bc(b)
    entry = jnp.where(inst >= 0, st.entry[jnp.clip(inst, 0, max(st.n_instances - 1, 0))], -1)
    key = kind * (st.n_entries + 1) + entry
    logged = s.findings[:, KIND] * (st.n_entries + 1) + s.findings[:, ENTRY]
    logged = jnp.where(jnp.arange(s.findings.shape[0]) < s.n_findings, logged, -1)
    seen = jnp.any(key[:, None] == logged[None, :], axis=1)
    earlier = jnp.tril(jnp.ones((k, k), bool), -1)
    dup = jnp.any(earlier & (key[:, None] == key[None, :]) & cond[None, :], axis=1)
    new = cond & ~seen & ~dup
    slot = s.n_findings + jnp.cumsum(new) - 1
    keep = new & (slot < s.findings.shape[0])
    rows = jnp.stack([kind, entry, inst, other, a, b], axis=1)
    into = keep[:, None] & (slot[:, None] == jnp.arange(s.findings.shape[0])[None, :])  # [k, K]: row k -> log slot
    placed = jnp.max(jnp.where(into[:, :, None], rows[:, None, :], -1), axis=0)
    findings = jnp.where(jnp.any(into, axis=0)[:, None], placed, s.findings)
    n_new = jnp.sum(keep).astype(jnp.int32)
    return dataclasses.replace(
        s, findings=findings, n_findings=s.n_findings + n_new, dropped=s.dropped + jnp.sum(new) - n_new
    )


def _add_step(s: ControlState, st: _Static, found: list, inst) -> ControlState:
    """The findings of one event: all concern the one instruction ``inst`` (the event's), so per kind only
    the first candidate that holds is kept, and each kind costs one look-up in the log and one row."""
    by_kind: dict = {}
    for cand in found:
        cond, kind, *detail = tuple(cand) + (-1,) * (6 - len(cand))
        by_kind.setdefault(int(kind), []).append(
            (jnp.asarray(cond, bool), *(jnp.asarray(x, jnp.int32) for x in detail))
        )
    entry = st.entry[inst]
    width = s.findings.shape[0]
    for kind, cands in by_kind.items():
        cols = [jnp.stack(col) for col in zip(*cands)]
        hit = jnp.any(cols[0])
        first = jnp.argmax(cols[0])
        _, other, a, b = (c[first] for c in cols[1:])
        key = kind * (st.n_entries + 1) + entry
        logged = s.findings[:, KIND] * (st.n_entries + 1) + s.findings[:, ENTRY]
        seen = jnp.any((logged == key) & (jnp.arange(width) < s.n_findings))
        new = hit & ~seen
        keep = new & (s.n_findings < width)
        row = jnp.stack([jnp.asarray(kind, jnp.int32), entry, jnp.asarray(inst, jnp.int32), other, a, b])
        s = dataclasses.replace(
            s,
            findings=hot.put(s.findings, (s.n_findings,), row, keep),
            n_findings=s.n_findings + keep,
            dropped=s.dropped + (new & ~keep),
        )
    return s


# --- one event ------------------------------------------------------------------------------


def _heads(s: ControlState, st: _Static):
    qlist = st.qlist
    has = s.pos < st.qlen
    head = qlist[jnp.arange(st.n_queues), jnp.clip(s.pos, 0, st.qlist.shape[1] - 1)]
    return has, jnp.where(has, head, 0)


def _ids_ok(st: _Static, op, h):
    eid = op["event_id"][h]
    return eid, (eid >= 0) & (eid < jnp.where(st.sync[h] <= Sync.WAIT_FLAG, st.n_flag_ids, st.n_cross_ids))


def _flag_slot(st: _Static, h, eid):
    """The flag bit a SetFlag / WaitFlag names: its (core, src, dst) triple's base plus the id (clipped)."""
    return jnp.clip(st.flag_base[h] + jnp.clip(eid, 0, st.n_flag_ids - 1), 0, st.n_flags - 1)


def _uf_mask(st: _Static, op, h):
    u = st.uf_valid.shape[0]
    ar = jnp.arange(u)
    return (ar >= op["uf_lo"][h, None]) & (ar < op["uf_hi"][h, None])


def _uf_active(st: _Static, op, h):
    mode = op["uf_mode"][h]
    return (st.uf_role[h] != UnitFlagRole.NONE) & ((mode == 2) | (mode == 3)) & op["uf_ok"][h]


def _runnable(s: ControlState, st: _Static, op, lat: SyncLatency, has, head):
    """Per queue: can its head start now, and at what time."""
    sync = st.sync[head]
    core = st.core[head]
    pidx = st.pidx[head]
    fence_pidx = st.flist[core, s.fence_pos[core]]
    issued = pidx <= fence_pidx
    enable = op["enable"][head]
    eid, ok = jax.vmap(lambda h: _ids_ok(st, op, h))(head)
    eid_c = jnp.clip(eid, 0, st.n_cross_ids - 1)[:, None]

    # intra-core flag wait
    slot = _flag_slot(st, head, eid)
    wait_flag_ok = ~ok | s.flag[slot]
    wait_flag_t = jnp.where(ok, s.flag_t[slot] + lat.flag_cycles, 0)

    # cross-core wait: every own channel holds a signal, or a mismatched one waits elsewhere
    chans = st.channels[head]  # [Q, 2]
    cc = jnp.clip(chans, 0)
    have = jnp.where(chans >= 0, s.count[cc, eid_c] > 0, True)
    own_ok = jnp.all(have, axis=1)
    alt = st.channel_alt[head]  # [Q, 4]
    alt_have = jnp.any((alt >= 0) & (s.count[jnp.clip(alt, 0), eid_c] > 0), axis=1)
    ring_t = s.ring_t[cc, eid_c, s.ring_head[cc, eid_c]]
    cross_ok = ~ok | own_ok | alt_have
    cross_t = jnp.where(ok & own_ok, jnp.max(jnp.where(chans >= 0, ring_t, 0), axis=1), 0) + lat.cross_core_cycles

    # unit flag: every block of the range has the value the instruction waits for
    uf_on = jax.vmap(lambda h: _uf_active(st, op, h))(head)
    mask = jax.vmap(lambda h: _uf_mask(st, op, h))(head)  # [Q, U]
    want = (st.uf_role[head] == UnitFlagRole.READER)[:, None]
    uf_ok = ~uf_on | jnp.all(~mask | (s.uf[None, :] == want), axis=1)
    uf_t = jnp.where(uf_on, jnp.max(jnp.where(mask, s.uf_t[None, :], 0), axis=1) + lat.unit_flag_cycles, 0)

    # PIPE_ALL: every earlier instruction of the core has completed
    qcore = st.queue_core
    q_pidx = jnp.where(has, st.pidx[head], _NEVER)
    earlier_pending = (qcore[None, :] == core[:, None]) & (s.busy[None, :] | (q_pidx[None, :] < pidx[:, None]))
    earlier_pending &= ~jnp.eye(st.n_queues, dtype=bool)
    barrier_ok = ~jnp.any(earlier_pending, axis=1)

    cond = jnp.select(
        [sync == Sync.WAIT_FLAG, sync == Sync.CROSS_WAIT, sync == Sync.BARRIER_ALL], [wait_flag_ok, cross_ok, barrier_ok],
        True,
    ) & uf_ok  # fmt: skip
    ready_t = jnp.select([sync == Sync.WAIT_FLAG, sync == Sync.CROSS_WAIT], [wait_flag_t, cross_t], 0)
    ready_t = jnp.maximum(ready_t, uf_t)
    runnable = has & ~s.busy & issued & (~enable | cond)
    start_t = jnp.where(enable, jnp.maximum(jnp.maximum(s.now, s.free_t), ready_t), s.now)
    return runnable, start_t


def _complete(s: ControlState, st: _Static, op, q, h, found: list) -> ControlState:
    """Queue ``q``'s head ``h`` completes at ``s.now``: its sets and unit-flag updates happen, its writes land."""
    sync = st.sync[h]
    clock = s.vc[q]
    eid, ok = _ids_ok(st, op, h)

    # SetFlag: a bit already 1 is a double set and the second signal is lost
    slot = _flag_slot(st, h, eid)
    is_set = ok & (sync == Sync.SET_FLAG)
    found.append((is_set & s.flag[slot], Finding.DOUBLE_SET, h, s.flag_inst[slot], slot))
    take = is_set & ~s.flag[slot]
    s = dataclasses.replace(
        s,
        flag=hot.put(s.flag, (slot,), True, take),
        flag_t=hot.put(s.flag_t, (slot,), s.now, take),
        flag_clock=hot.put(s.flag_clock, (slot,), clock, take),
        flag_inst=hot.put(s.flag_inst, (slot,), h, take),
    )

    # set_cross_core
    is_cross = ok & (sync == Sync.CROSS_SET)
    s = _cross_set(s, st, op, h, is_cross, clock, eid, found)

    # unit flag: mode 3 flips the blocks at completion; the reset clears them all
    mask = _uf_mask(st, op, h)
    update = _uf_active(st, op, h) & (op["uf_mode"][h] == UF_UPDATE)
    value = st.uf_role[h] == UnitFlagRole.WRITER
    reset = sync == Sync.UF_RESET
    touched = (update & mask) | reset
    s = dataclasses.replace(
        s,
        uf=jnp.where(touched, value & ~reset, s.uf),
        uf_t=jnp.where(touched, s.now, s.uf_t),
        uf_clock=jnp.where(touched[:, None], clock[None, :], s.uf_clock),
        uf_inst=jnp.where(touched, h, s.uf_inst),
    )
    s = _accesses(s, st, op, q, h, True, found)
    return _retire(s, st, q, h, True)


def _cross_set(s: ControlState, st: _Static, op, h, on, clock, eid, found):
    e = jnp.clip(eid, 0, st.n_cross_ids - 1)
    chans = st.channels[h]
    core = st.core[h]
    via_barrier = on & (chans[0] >= 0) & st.sub_channel[jnp.clip(chans[0], 0)]
    # INTER_SUBBLOCK barrier: a half per AIV; once both are in, one signal to each AIV
    k = jnp.clip(core - AIV0, 0, 1)
    found.append((via_barrier & s.half[e, k], Finding.MERGED_SIGNAL, h, s.half_inst[e, k], e))
    first_half = via_barrier & ~s.half[e, k]
    half = hot.put(s.half, (e, k), True, first_half)
    half_clock = hot.put(s.half_clock, (e, k), clock, first_half)
    half_inst = hot.put(s.half_inst, (e, k), h, first_half)
    both = first_half & half[e, 0] & half[e, 1]
    joined = jnp.maximum(half_clock[e, 0], half_clock[e, 1])
    s = dataclasses.replace(s, half=hot.put(half, (e,), False, both), half_clock=half_clock, half_inst=half_inst)
    push = (on & ~via_barrier) | both
    signal_clock = jnp.where(both, joined, clock)
    for j in range(2):
        c = chans[j]
        active = push & (c >= 0)
        cc = jnp.clip(c, 0)
        full = s.count[cc, e] >= st.depth
        kind = Finding.OVERFLOW if st.depth > 1 else Finding.MERGED_SIGNAL
        last = s.ring_inst[cc, e, (s.ring_head[cc, e] + s.count[cc, e] - 1) % st.depth]
        found.append((active & full, kind, h, last, e))
        go = active & ~full
        at = (s.ring_head[cc, e] + s.count[cc, e]) % st.depth
        s = dataclasses.replace(
            s,
            count=hot.add(s.count, (cc, e), go),
            ring_clock=hot.put(s.ring_clock, (cc, e, at), signal_clock, go),
            ring_t=hot.put(s.ring_t, (cc, e, at), s.now, go),
            ring_inst=hot.put(s.ring_inst, (cc, e, at), h, go),
            ring_mode=hot.put(s.ring_mode, (cc, e, at), op["mode"][h], go),
        )
    return s


def _retire(s: ControlState, st: _Static, q, h, ran: bool) -> ControlState:
    """The head leaves its queue (``ran``: it executed, so it has an end); a fence lets its core issue on."""
    core = st.core[h]
    fence = st.fence[h]
    return dataclasses.replace(
        s,
        busy=hot.put(s.busy, (q,), False),
        pos=hot.add(s.pos, (q,), 1),
        free_t=hot.put(s.free_t, (q,), s.now),
        fence_pos=hot.add(s.fence_pos, (core,), fence),
        end=hot.put(s.end, (h,), s.now if ran else -1),
    )


def _start(s: ControlState, st: _Static, op, q, h, start_t, found: list) -> ControlState:
    """Queue ``q``'s (enabled) head ``h`` starts: it consumes what it waited for and its reads are checked."""
    sync = st.sync[h]
    eid, ok = _ids_ok(st, op, h)
    found.append((~ok & (sync != Sync.NONE), Finding.SYNC_ERROR, h, -1, 0, eid))
    vc = hot.add(s.vc, (q, q), 1)
    acquired = jnp.zeros_like(vc[q])

    # WaitFlag: clear the bit, acquire its set's clock
    slot = _flag_slot(st, h, eid)
    is_wait = ok & (sync == Sync.WAIT_FLAG)
    acquired = jnp.where(is_wait, jnp.maximum(acquired, s.flag_clock[slot]), acquired)
    s = dataclasses.replace(s, flag=hot.put(s.flag, (slot,), False, is_wait))

    # wait_cross_core: one signal from each own channel (FIFO), or a mismatched one from elsewhere
    s, acquired = _cross_wait(s, st, op, h, ok & (sync == Sync.CROSS_WAIT), eid, acquired, found)

    # unit flag: acquire the clock of the flag writes it waited on
    mask = _uf_mask(st, op, h)
    uf_on = _uf_active(st, op, h)
    acquired = jnp.where(
        uf_on, jnp.maximum(acquired, jnp.max(jnp.where(mask[:, None], s.uf_clock, 0), axis=0)), acquired
    )

    # PIPE_ALL: the core's queues are idle; each now knows what all of them did
    same_core = st.queue_core == st.core[h]
    barrier = sync == Sync.BARRIER_ALL
    joined = jnp.max(jnp.where(same_core[:, None], vc, 0), axis=0)
    vc = jnp.where(barrier & same_core[:, None], jnp.maximum(vc, joined[None, :]), vc)
    vc = jnp.where(hot.mask(vc.shape, (q,)), jnp.maximum(vc, acquired[None, :]), vc)
    s = dataclasses.replace(s, vc=vc)

    s = _accesses(s, st, op, q, h, False, found)
    s = _small_tile(s, st, op, q, h, found)
    cycles = jnp.maximum(op["cycles"][h], 0)
    return dataclasses.replace(
        s,
        busy=hot.put(s.busy, (q,), True),
        busy_end=hot.put(s.busy_end, (q,), start_t + cycles),
        start=hot.put(s.start, (h,), start_t),
    )


def _cross_wait(s: ControlState, st: _Static, op, h, on, eid, acquired, found):
    e = jnp.clip(eid, 0, st.n_cross_ids - 1)
    chans = st.channels[h]
    cc = jnp.clip(chans, 0)
    own_ok = jnp.all(jnp.where(chans >= 0, s.count[cc, e] > 0, True))
    alt = st.channel_alt[h]
    alt_has = (alt >= 0) & (s.count[jnp.clip(alt, 0), e] > 0)
    alt_pick = jnp.argmax(alt_has)
    mismatch_via_alt = on & ~own_ok & jnp.any(alt_has)
    takes = [(chans[0], on & own_ok & (chans[0] >= 0)), (chans[1], on & own_ok & (chans[1] >= 0))]
    takes.append((alt[alt_pick], mismatch_via_alt))
    for c, active in takes:
        cc = jnp.clip(c, 0)
        head = s.ring_head[cc, e]
        acquired = jnp.where(active, jnp.maximum(acquired, s.ring_clock[cc, e, head]), acquired)
        mode_differs = s.ring_mode[cc, e, head] != op["mode"][h]
        found.append((active & mode_differs, Finding.SYNC_ERROR, h, s.ring_inst[cc, e, head], 1, eid))
        s = dataclasses.replace(
            s,
            count=hot.add(s.count, (cc, e), -active.astype(jnp.int32)),
            ring_head=hot.put(s.ring_head, (cc, e), (head + 1) % st.depth, active),
        )
    return s, acquired


def _accesses(s: ControlState, st: _Static, op, q, h, writes: bool, found: list) -> ControlState:
    """Check the reads (at start) or the writes (at completion) of ``h`` against the atoms' clocks, then record them.

    A read samples its bytes when the instruction starts and a write lands when it completes,
    so a race's hazard label follows the order in which the bytes are really touched. Each
    slot looks only at the few atoms its access can cover (its static span), not at them all.
    """
    prefix, valid_slots, spans = (
        ("wr", st.write_valid, st.write_span) if writes else ("rd", st.read_valid, st.read_span)
    )
    clock = s.vc[q]
    other = jnp.arange(st.n_queues) != q
    this = ~other
    atoms = jnp.arange(st.n_atoms)
    for r, span in enumerate(spans):
        lo, hi = op[f"{prefix}_lo"][h, r], op[f"{prefix}_hi"][h, r]
        valid = valid_slots[h, r] & op[f"{prefix}_on"][h, r]
        in_range = op[f"{prefix}_ok"][h, r]
        found.append((valid & ~in_range, Finding.BOUNDS, h, -1, r, 0))
        live = valid & in_range
        idx = lo + jnp.arange(span)
        rows = live & (idx < hi)
        idx = jnp.clip(idx, 0, st.n_atoms - 1)
        w_clock = s.write_clock[idx]  # [span, Q]
        unordered_w = rows[:, None] & other[None, :] & (w_clock > clock[None, :])
        if writes:
            unordered_r = rows[:, None] & other[None, :] & (s.read_clock[idx] > clock[None, :])
            checks = ((unordered_w, WAW, s.write_inst), (unordered_r, WAR, s.read_inst))
        else:
            hb_written = jnp.any((w_clock > 0) & (w_clock <= clock[None, :]), axis=1)
            uninit = rows & ~st.atom_init[idx] & ~hb_written & ~jnp.any(unordered_w, axis=1)
            found.append((jnp.any(uninit), Finding.UNINITIALIZED, h, -1, idx[jnp.argmax(uninit)], r))
            checks = ((unordered_w, RAW, s.write_inst),)
        for bad, hazard, insts in checks:
            flat = jnp.argmax(bad.reshape(-1))
            atom, queue = idx[flat // st.n_queues], flat % st.n_queues
            found.append((jnp.any(bad), Finding.RACE, h, insts[atom, queue], atom, hazard))
        cells = (live & (atoms >= lo) & (atoms < hi))[:, None] & this[None, :]
        if writes:
            s = dataclasses.replace(
                s, write_clock=jnp.where(cells, clock[q], s.write_clock), write_inst=jnp.where(cells, h, s.write_inst)
            )
        else:
            s = dataclasses.replace(
                s, read_clock=jnp.where(cells, clock[q], s.read_clock), read_inst=jnp.where(cells, h, s.read_inst)
            )
    return s


def _small_tile(s: ControlState, st: _Static, op, q, h, found: list) -> ControlState:
    """Two consecutive accumulating mmads over < 10 fp32 fractals need a PIPE_M barrier [semantics §2]."""
    on_m = st.queue_pipe[q] == int(Pipe.M)
    small = op["small_tile"][h]
    key = op["wr_lo"][h, 0]  # the L0C it writes
    hit = on_m & small & op["accumulate"][h] & (s.chain_atom == key)
    found.append((hit, Finding.RACE, h, s.chain_inst, key, SMALL_TILE))
    keep = on_m & small
    clear = on_m & ~small
    return dataclasses.replace(
        s,
        chain_atom=jnp.where(keep, key, jnp.where(clear, -1, s.chain_atom)),
        chain_inst=jnp.where(keep, h, jnp.where(clear, -1, s.chain_inst)),
    )


def _step(st: _Static, op, lat: SyncLatency, s: ControlState) -> ControlState:
    """One event: the earliest completion, else the earliest start; a disabled head leaves at once."""
    has, head = _heads(s, st)
    runnable, start_t = _runnable(s, st, op, lat, has, head)
    start_key = jnp.where(runnable, start_t, _NEVER)
    end_key = jnp.where(s.busy, s.busy_end, _NEVER)
    t_next = jnp.minimum(jnp.min(start_key), jnp.min(end_key))
    any_end = jnp.any(end_key == t_next)
    q_end = jnp.argmax(end_key == t_next)
    q_start = jnp.argmax(start_key == t_next)
    idle = t_next >= _NEVER
    s = dataclasses.replace(s, now=jnp.where(idle, s.now, t_next), steps=s.steps + 1)

    def complete(s):
        found = []
        return _add_step(_complete(s, st, op, q_end, head[q_end], found), st, found, head[q_end])

    def start(s):
        found = []
        return _add_step(_start(s, st, op, q_start, head[q_start], t_next, found), st, found, head[q_start])

    def skip(s):
        return _retire(s, st, q_start, head[q_start], False)

    def stop(s):
        return dataclasses.replace(s, stuck=jnp.asarray(True))

    enabled = op["enable"][head[q_start]]
    branch = jnp.where(idle, 3, jnp.where(any_end, 0, jnp.where(enabled, 1, 2)))
    return jax.lax.switch(branch, (complete, start, skip, stop), s)


def _finished(s: ControlState, st: _Static):
    return jnp.all(s.pos >= st.qlen)


def _leftovers(s: ControlState, st: _Static) -> ControlState:
    """At the end: every bit, counter, barrier half and unit flag still set is a leftover."""
    s = _add(s, st, s.flag, Finding.LEFTOVER, s.flag_inst, -1, 0, jnp.arange(s.flag.shape[0]))
    c, e = s.count.shape
    pending = (s.count > 0) & st.channel_valid[:, None]
    first = s.ring_inst[jnp.arange(c)[:, None], jnp.arange(e)[None, :], s.ring_head]
    s = _add(s, st, pending.reshape(-1), Finding.LEFTOVER, first.reshape(-1), -1, 1, jnp.arange(c * e) % e)
    s = _add(s, st, s.half.reshape(-1), Finding.LEFTOVER, s.half_inst.reshape(-1), -1, 2, jnp.arange(e * 2) // 2)
    uf_live = s.uf & st.uf_valid
    return _add(s, st, uf_live, Finding.LEFTOVER, s.uf_inst, -1, 3, jnp.arange(s.uf.shape[0]))


@eqx.filter_jit
def _run(st: _Static, op: dict, lat: SyncLatency, options: ControlOptions) -> ControlState:
    s0 = init_state(st, options)
    max_steps = 2 * st.n_instances + 1

    def cond(s):
        return ~s.stuck & ~_finished(s, st) & (s.steps < max_steps)

    s = jax.lax.while_loop(cond, lambda s: _step(st, op, lat, s), s0)
    dead = ~_finished(s, st)
    has, head = _heads(s, st)
    first = head[jnp.argmax(has)]
    s = _add(s, st, dead, Finding.DEADLOCK, first, -1, jnp.argmax(has), 0)
    done = _leftovers(s, st)
    return jax.tree.map(lambda a, b: jnp.where(dead, a, b), s, done)


def _pad_operands(op: dict, st: _Static) -> dict:
    """Operands padded to the bucketed instance count (padding instances are in no queue: they never run)."""
    slots = {"rd": st.read_valid.shape[1], "wr": st.write_valid.shape[1]}
    out = {}
    for name, x in op.items():
        widths = [(0, st.n_instances - x.shape[0])] + [(0, slots.get(name[:2], 0) - x.shape[-1])] * (x.ndim - 1)
        out[name] = jnp.pad(x, widths)
    return out


def run_control(record: Record, options: ControlOptions = ControlOptions(), latency: SyncLatency | None = None):
    """Execute ``record``'s control plane; returns the final ``ControlState``.

    Pure and jittable; ``vmap`` it over records whose operands carry a batch axis (see ``sweep_control``).
    The timeline (``start``, ``end``) is indexed by instance; a deadlock leaves unexecuted ones at -1.
    """
    st = _static(record.template, options)
    lat = SyncLatency() if latency is None else latency
    s = _run(st, _pad_operands(record.operands, st), lat, options)
    n = record.template.n_instances if options.keep_timeline else 0
    return dataclasses.replace(s, start=s.start[:n], end=s.end[:n])


def sweep_control(record: Record, options: ControlOptions = ControlOptions(), latency: SyncLatency | None = None):
    """``run_control`` vmapped over a leading scenario axis of every operand."""
    return jax.vmap(lambda ops: run_control(Record(record.template, ops), options, latency))(record.operands)


def verdict(state: ControlState):
    """The most severe finding's ``Finding`` value (-1: none); a batched state gives one per scenario."""
    rows = state.findings[..., KIND]
    worst = jnp.min(jnp.where(rows >= 0, rows, len(Finding)), axis=-1)
    return jnp.where(worst == len(Finding), -1, worst).astype(jnp.int32)
