"""The block's sync hardware as an event loop: semantics §8, and nothing else.

Each (core, pipe) is an in-order queue (a DMA pipe keeps its requests in flight: the next one leaves
as the previous one's transfer ends, its GM latency overlaps); the scalar unit issues in program order and stops only
at fences (``PIPE_ALL``, every S instruction, and — as options — every wait, or every
cross-core wait on chips where that blocks the whole core). Each step executes one event, in
time order: a queue head *starts* once it is issued and what it waits for holds (it consumes
the signal and acquires that signal's clock), and *completes* ``cycles`` later (its sets and
unit-flag updates happen then). A state with unfinished instructions and no possible event is
a deadlock.

The loop carries only the machine: queue positions, flag bits, cross-core counters (FIFO
rings, so each wait acquires its own set's clock), unit flags and one vector clock per queue.
Each step emits one ``Event`` (which instance started or completed, when, its clock, and the
sync finding of that moment, if any); what the accesses did is checked afterwards from the
events, all at once (``_checks``). The loop is a ``lax.scan`` of a static length, so a sweep's
``vmap`` carries no per-scenario predicate and the event log is written, not carried.
"""

from __future__ import annotations

import dataclasses
import enum
import math

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.custom_batching import custom_vmap
from jaxtyping import Array, Bool, Int

from ..core import AIV0, Finding
from . import _onehot as hot
from ._options import SyncLatency
from ._record import N_MUTEX_IDS, UF_KEEP, UF_UPDATE, Sync, UnitFlagRole
from ._tables import NEVER, Static

#: Event kinds.
IDLE, START, END = 0, 1, 2
#: Steps the loop takes between two tests of whether every scenario is done: a test (a branch) per step costs a
#: step's worth of copies; a done scenario's steps in its last chunk are idle ones.
STEPS_PER_CHUNK = 16


class Machine(eqx.Module):
    """What the sync hardware holds for one scenario (sizes set by the record's resources)."""

    # queues and issue
    now: Int[Array, ""]
    pos: Int[Array, " Q"]  # next unfinished instance of each queue (index into its list)
    busy: Bool[Array, " Q"]  # the head has started and not completed
    busy_end: Int[Array, " Q"]
    free_t: Int[Array, " Q"]  # when the queue's last instruction completed (a DMA request: left the pipe)
    drain_t: Int[Array, " Q"]  # when the queue's requests in flight have all landed
    last_mmad: Bool[Array, " Q"]  # the queue's last instruction to start was an mmad (one may stream behind it)
    fence_pos: Int[Array, " 3"]  # next unfinished fence of each core
    vc: Int[Array, "Q Q"]  # one vector clock per queue
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
    # the wait that last took a signal per (channel, id): its queue, its own clock component, its instance
    take_q: Int[Array, "C E"]
    take_epoch: Int[Array, "C E"]
    take_inst: Int[Array, "C E"]
    # the INTER_SUBBLOCK barrier's halves per id and AIV
    half: Bool[Array, "E 2"]
    half_clock: Int[Array, "E 2 Q"]
    half_inst: Int[Array, "E 2"]
    # unit flags per unit-flag atom of L0C
    uf: Bool[Array, " U"]
    uf_t: Int[Array, " U"]
    uf_clock: Int[Array, "U Q"]
    uf_inst: Int[Array, " U"]
    # mutexes per flag slot of theirs (empty without one): lock groups released, and the last unlock's time, clock
    # and instance (the groups on one id unlock in issue order, so the last one's clock holds the others')
    mutex_free: Int[Array, " X"]
    mutex_t: Int[Array, " X"]
    mutex_clock: Int[Array, "X Q"]
    mutex_inst: Int[Array, " X"]
    stuck: Bool[Array, ""]  # no event is possible and instructions remain
    done: Bool[Array, ""]  # every queue has drained


class Event(eqx.Module):
    """One step of the loop: what happened, to which instance, when, and the sync finding it raised."""

    kind: Int[Array, ""]  # IDLE, START, END
    inst: Int[Array, ""]
    t: Int[Array, ""]
    clock: Int[Array, " Q"]  # the queue's vector clock after the event
    finding: Int[Array, " 4"]  # kind (-1: none), other instance, detail a, detail b
    source: Int[Array, ""]  # a started wait: the instance whose signal it consumed (-1: none)


class Col(enum.IntEnum):
    """Columns of the per-instance table the loop reads: one row per instance, everything a step needs."""

    SYNC = 0
    CORE = 1
    PIDX = 2
    READER = 3  # a unit-flag reader (waits for 1, mode 3 clears)
    WRITER = 4  # a unit-flag writer (waits for 0, mode 3 sets)
    UF_ON = 5  # takes part in the unit-flag handshake (a role, mode 2 or 3, a valid block choice)
    UF_UPDATE = 6  # and flips its blocks at completion (mode 3)
    UF_LO = 7
    UF_HI = 8
    SLOT = 9  # its flag bit
    COUNTER = 10  # its cross-core counter id
    EVENT_ID = 11
    ID_OK = 12  # the event id names a real flag or counter
    CH0 = 13  # its cross-core channels (-1: none)
    CH1 = 14
    ALT = 15  # four other channels of a wait's receiver
    FENCE = 19
    MODE = 20
    CYCLES = 21
    UF_PERIOD = 22  # its unit-flag blocks: the first UF_RUN of every UF_PERIOD blocks of the range (0: all)
    UF_RUN = 23
    HEAD = 24  # cycles of CYCLES an mmad saves when it streams: it starts as the previous one on its pipe ends
    FLIGHT = 25  # cycles of CYCLES a DMA request is in flight after it leaves its pipe (its GM latency)
    TICKET = 26  # a mutex lock: the enabled lock groups before it on its slot (it waits until that many unlocked)


N_COLS = len(Col) + 3  # ALT spans four columns


class Plan(eqx.Module):
    """One scenario's issue order and per-instance table, made once before the loop.

    A disabled instance (a loop iteration past its trip count, a flag pair switched off) is not in
    the program, so it is not in its queue either."""

    qlist: Int[Array, "Q L"]  # the enabled instances of every queue, in order
    qlen: Int[Array, " Q"]
    fences: Int[Array, "3 Fm"]  # program index of each core's enabled fences in order (NEVER padded)
    table: Int[Array, "N K"]  # per instance, the columns of ``Col``
    uf_mask: Bool[Array, "N U"]  # per instance, the unit-flag atoms of its block range (``_uf_mask``)


def plan(st: Static, op: dict) -> Plan:
    def compact(lists, fill):  # the enabled entries of each row, in order, then ``fill``
        on = (lists >= 0) & op["enable"][jnp.clip(lists, 0)]
        rank = jnp.cumsum(on, axis=1) - 1
        width = lists.shape[1]
        at = jnp.where(on, rank + width * jnp.arange(lists.shape[0])[:, None], lists.size)  # size: dropped
        kept = jnp.full((lists.size,), fill, jnp.int32).at[at.reshape(-1)].set(lists.reshape(-1), mode="drop")
        return kept.reshape(lists.shape), jnp.sum(on, axis=1).astype(jnp.int32)

    qlist, qlen = compact(st.qlist, -1)
    fences, _ = compact(st.fence_list, -1)
    eid, ok = ids_ok(st, op, jnp.arange(st.n_instances))
    mode = op["uf_mode"]
    uf_on = (st.uf_role != UnitFlagRole.NONE) & ((mode == UF_KEEP) | (mode == UF_UPDATE)) & op["uf_ok"]
    is_mutex = (st.sync == Sync.MUTEX_LOCK) | (st.sync == Sync.MUTEX_UNLOCK)
    n_ids = jnp.where(is_mutex, N_MUTEX_IDS, st.n_flag_ids)
    slot = jnp.clip(st.flag_base + st.flag_scale * jnp.clip(eid, 0, n_ids - 1), 0, st.n_flags - 1)
    counter = jnp.clip(st.cross_base + st.cross_scale * jnp.clip(eid, 0, st.n_cross_ids - 1), 0, st.n_counters - 1)
    cols = {
        Col.SYNC: st.sync, Col.CORE: st.core, Col.PIDX: st.pidx, Col.READER: st.uf_role == UnitFlagRole.READER,
        Col.WRITER: st.uf_role == UnitFlagRole.WRITER, Col.UF_ON: uf_on, Col.UF_UPDATE: uf_on & (mode == UF_UPDATE),
        Col.UF_LO: op["uf_lo"], Col.UF_HI: op["uf_hi"], Col.SLOT: slot, Col.COUNTER: counter, Col.EVENT_ID: eid,
        Col.ID_OK: ok, Col.CH0: st.channels[:, 0], Col.CH1: st.channels[:, 1], Col.FENCE: st.fence, Col.MODE: op["mode"],
        Col.CYCLES: jnp.maximum(op["cycles"], 0), Col.UF_PERIOD: st.uf_stride[:, 0], Col.UF_RUN: st.uf_stride[:, 1],
        Col.HEAD: jnp.clip(op["head_cycles"], 0, jnp.maximum(op["cycles"] - 1, 0)),
        Col.FLIGHT: op["flight_cycles"],  # the record keeps it within the cycles
        Col.TICKET: _tickets(st, op, slot, ok) if st.has_mutex else jnp.zeros_like(st.sync),
    }  # fmt: skip
    cols.update({Col.ALT + j: st.channel_alt[:, j] for j in range(4)})
    table = jnp.stack([jnp.asarray(cols[c], jnp.int32) for c in range(N_COLS)], axis=1)
    fence_pidx = jnp.where(fences >= 0, st.pidx[jnp.clip(fences, 0)], NEVER)
    return Plan(qlist, qlen, fence_pidx, table, _uf_mask(st, table))


def _tickets(st: Static, op: dict, slot, ok):
    """Per mutex lock, how many enabled lock groups come before it on its slot: the scalar unit issues them in program
    order (instances are in program order per core, and a slot belongs to one core)."""
    lock = (st.sync == Sync.MUTEX_LOCK) & op["enable"] & ok
    on_slot = lock[:, None] & (slot[:, None] == jnp.arange(st.n_flags)[None, :])  # [N, F]
    before = jnp.cumsum(on_slot, axis=0) - on_slot
    return jnp.sum(jnp.where(on_slot, before, 0), axis=1)


def init_machine(st: Static) -> Machine:
    """The machine before the kernel: every flag, counter and unit flag 0."""
    q, f = st.n_queues, st.n_flags
    c, e, d = st.channel_valid.shape[0], st.n_counters, st.depth
    u = st.uf_valid.shape[0]
    x = f if st.has_mutex else 0
    zi = lambda *s: jnp.zeros(s, jnp.int32)
    neg = lambda *s: jnp.full(s, -1, jnp.int32)
    return Machine(
        now=zi(), pos=zi(q), busy=jnp.zeros(q, bool), busy_end=zi(q), free_t=zi(q), drain_t=zi(q), last_mmad=jnp.zeros(q, bool), fence_pos=zi(3), vc=zi(q, q),
        flag=jnp.zeros(f, bool), flag_t=zi(f), flag_clock=zi(f, q), flag_inst=neg(f),
        count=zi(c, e), ring_head=zi(c, e), ring_clock=zi(c, e, d, q), ring_t=zi(c, e, d), ring_inst=neg(c, e, d),
        ring_mode=neg(c, e, d), take_q=neg(c, e), take_epoch=zi(c, e), take_inst=neg(c, e),
        half=jnp.zeros((e, 2), bool), half_clock=zi(e, 2, q), half_inst=neg(e, 2),
        uf=jnp.zeros(u, bool), uf_t=zi(u), uf_clock=zi(u, q), uf_inst=neg(u),
        mutex_free=zi(x), mutex_t=zi(x), mutex_clock=zi(x, q), mutex_inst=neg(x),
        stuck=jnp.asarray(False), done=jnp.asarray(False),
    )  # fmt: skip


def ids_ok(st: Static, op, h):
    """The event id of instance ``h`` and whether it names a real flag or counter."""
    eid = op["event_id"][h]
    sync = st.sync[h]
    limit = jnp.select(
        [sync <= Sync.WAIT_FLAG, (sync == Sync.MUTEX_LOCK) | (sync == Sync.MUTEX_UNLOCK)],
        [st.n_flag_ids, N_MUTEX_IDS],
        st.n_cross_ids,
    )
    return eid, (eid >= 0) & (eid < limit)


def _uf_mask(st: Static, row):
    """[..., U] the unit-flag atoms of the row's block range (under its stride: the first run of each period)."""
    u = st.uf_valid.shape[0]
    ar = jnp.arange(u)
    lo, hi = row[..., Col.UF_LO, None], row[..., Col.UF_HI, None]
    period, run = row[..., Col.UF_PERIOD, None], row[..., Col.UF_RUN, None]
    offset = st.uf_start - st.uf_start[jnp.clip(lo, 0, u - 1)]
    in_run = (period == 0) | (offset % jnp.maximum(period, 1) < run)
    return (ar >= lo) & (ar < hi) & in_run


def heads(m: Machine, pl: Plan):
    """Per queue: whether it has an instruction left, and its head (0 where none)."""
    has = m.pos < pl.qlen
    head = pl.qlist[jnp.arange(pl.qlist.shape[0]), jnp.clip(m.pos, 0, pl.qlist.shape[1] - 1)]
    return has, jnp.where(has, head, 0)


def _runnable(m: Machine, st: Static, pl: Plan, lat: SyncLatency, has, head, rows):
    """Per queue: can its head (``rows``: the heads' table rows) start now, and at what time."""
    sync, core, pidx, ok = rows[:, Col.SYNC], rows[:, Col.CORE], rows[:, Col.PIDX], rows[:, Col.ID_OK] > 0
    issued = pidx <= pl.fences[core, jnp.clip(m.fence_pos[core], 0, pl.fences.shape[1] - 1)]
    e = rows[:, Col.COUNTER, None]

    wait_flag_ok, wait_flag_t, cross_ok, cross_t, uf_ok, uf_t, barrier_ok = True, 0, True, 0, True, 0, True
    if st.has_flags:  # intra-core flag wait
        slot = rows[:, Col.SLOT]
        wait_flag_ok = ~ok | m.flag[slot]
        wait_flag_t = jnp.where(ok, m.flag_t[slot] + lat.flag_cycles, 0)

    if st.has_cross:  # cross-core wait: every own channel holds a signal, or a mismatched one waits elsewhere
        chans = rows[:, Col.CH0 : Col.CH1 + 1]  # [Q, 2]
        cc = jnp.clip(chans, 0)
        own_ok = jnp.all(jnp.where(chans >= 0, m.count[cc, e] > 0, True), axis=1)
        alt = rows[:, Col.ALT : Col.ALT + 4]  # [Q, 4]
        alt_have = jnp.any((alt >= 0) & (m.count[jnp.clip(alt, 0), e] > 0), axis=1)
        ring_t = m.ring_t[cc, e, m.ring_head[cc, e]]
        cross_ok = ~ok | own_ok | alt_have
        cross_t = jnp.where(ok & own_ok, jnp.max(jnp.where(chans >= 0, ring_t, 0), axis=1), 0) + lat.cross_core_cycles

    if st.has_unit_flags:  # unit flag: every block of the range has the value the instruction waits for
        uf_on = rows[:, Col.UF_ON] > 0
        mask = pl.uf_mask[head]  # [Q, U]
        want = (rows[:, Col.READER] > 0)[:, None]
        uf_ok = ~uf_on | jnp.all(~mask | (m.uf[None, :] == want), axis=1)
        uf_t = jnp.where(uf_on, jnp.max(jnp.where(mask, m.uf_t[None, :], 0), axis=1) + lat.unit_flag_cycles, 0)

    mutex_ok, mutex_t = True, 0
    if st.has_mutex:  # mutex lock: every lock group issued before it on its id has unlocked
        slot, ticket = rows[:, Col.SLOT], rows[:, Col.TICKET]
        mutex_ok = ~ok | (m.mutex_free[slot] >= ticket)
        mutex_t = jnp.where(ok & (ticket > 0), m.mutex_t[slot] + lat.flag_cycles, 0)

    if st.has_barrier:  # PIPE_ALL: every earlier instruction of the core has completed
        q_pidx = jnp.where(has, pidx, NEVER)
        earlier_pending = (st.queue_core[None, :] == core[:, None]) & (
            m.busy[None, :] | (q_pidx[None, :] < pidx[:, None])
        )
        earlier_pending &= ~jnp.eye(st.n_queues, dtype=bool)
        barrier_ok = ~jnp.any(earlier_pending, axis=1)

    # a set or a barrier on a DMA pipe starts once the requests in flight before it have landed (so its signal
    # follows their data); PIPE_ALL once those of every queue of its core have
    lands = (
        (sync == Sync.SET_FLAG) | (sync == Sync.CROSS_SET) | (sync == Sync.PIPE_BARRIER) | (sync == Sync.MUTEX_UNLOCK)
    )
    core_drain = jnp.max(jnp.where(st.queue_core[None, :] == core[:, None], m.drain_t[None, :], 0), axis=1)
    drain_t = jnp.select([lands, sync == Sync.BARRIER_ALL], [m.drain_t, core_drain], 0)

    waits = [sync == Sync.WAIT_FLAG, sync == Sync.CROSS_WAIT, sync == Sync.MUTEX_LOCK]
    cond = jnp.select([*waits, sync == Sync.BARRIER_ALL], [wait_flag_ok, cross_ok, mutex_ok, barrier_ok], True) & uf_ok
    ready_t = jnp.select(waits, [wait_flag_t, cross_t, mutex_t], 0)
    runnable = has & ~m.busy & issued & cond
    return runnable, jnp.maximum(jnp.maximum(m.now, m.free_t), jnp.maximum(jnp.maximum(ready_t, uf_t), drain_t))


def _finding(cands) -> jnp.ndarray:
    """The first of ``(cond, kind, other, a, b)`` that holds, as a row (kind -1: none)."""
    row = jnp.asarray([-1, -1, -1, -1], jnp.int32)
    for cond, *fields in reversed(cands):
        row = jnp.where(cond, jnp.stack([jnp.asarray(x, jnp.int32) for x in fields]), row)
    return row


def _complete(m: Machine, st: Static, row, uf_mask, q, h, on):
    """Where ``on``: queue ``q``'s head ``h`` (table row ``row``) completes at ``m.now``: its sets and unit-flag
    updates happen."""
    sync, ok, eid = row[Col.SYNC], on & (row[Col.ID_OK] > 0), row[Col.EVENT_ID]
    clock = m.vc[q]

    found = []
    if st.has_flags:  # SetFlag: a bit already 1 is a double set and the second signal is lost
        slot = row[Col.SLOT]
        is_set = ok & (sync == Sync.SET_FLAG)
        found.append((is_set & m.flag[slot], Finding.DOUBLE_SET, m.flag_inst[slot], slot, 0))
        take = is_set & ~m.flag[slot]
        m = dataclasses.replace(
            m,
            flag=hot.put(m.flag, (slot,), True, take),
            flag_t=hot.put(m.flag_t, (slot,), m.now, take),
            flag_clock=hot.put(m.flag_clock, (slot,), clock, take),
            flag_inst=hot.put(m.flag_inst, (slot,), h, take),
        )
    if st.has_cross:
        m = _cross_set(m, st, row, h, ok & (sync == Sync.CROSS_SET), clock, eid, found)
    if st.has_mutex:  # mutex unlock: its group is released, in issue order
        slot = row[Col.SLOT]
        release = ok & (sync == Sync.MUTEX_UNLOCK)
        m = dataclasses.replace(
            m,
            mutex_free=hot.add(m.mutex_free, (slot,), release.astype(jnp.int32)),
            mutex_t=hot.put(m.mutex_t, (slot,), m.now, release),
            mutex_clock=hot.put(m.mutex_clock, (slot,), clock, release),
            mutex_inst=hot.put(m.mutex_inst, (slot,), h, release),
        )

    if st.has_unit_flags:  # unit flag: mode 3 flips the blocks at completion; the reset clears them all
        reset = on & (sync == Sync.UF_RESET)
        touched = (on & (row[Col.UF_UPDATE] > 0) & uf_mask) | reset
        m = dataclasses.replace(
            m,
            uf=jnp.where(touched, (row[Col.WRITER] > 0) & ~reset, m.uf),
            uf_t=jnp.where(touched, m.now, m.uf_t),
            uf_clock=jnp.where(touched[:, None], clock[None, :], m.uf_clock),
            uf_inst=jnp.where(touched, h, m.uf_inst),
        )
    m = dataclasses.replace(
        m,
        busy=hot.put(m.busy, (q,), False, on),
        pos=hot.add(m.pos, (q,), on.astype(jnp.int32)),
        free_t=hot.put(m.free_t, (q,), m.now, on),
        fence_pos=hot.add(m.fence_pos, (row[Col.CORE],), row[Col.FENCE] * on),
    )
    return m, _finding(found)


def _cross_set(m: Machine, st: Static, row, h, on, clock, eid, found):
    e = row[Col.COUNTER]
    chans = row[Col.CH0 : Col.CH1 + 1]
    via_barrier = on & (chans[0] >= 0) & st.sub_channel[jnp.clip(chans[0], 0)]
    # INTER_SUBBLOCK barrier: a half per AIV; once both are in, one signal to each AIV
    k = jnp.clip(row[Col.CORE] - AIV0, 0, 1)
    found.append((via_barrier & m.half[e, k], Finding.MERGED_SIGNAL, m.half_inst[e, k], eid, 0))
    first_half = via_barrier & ~m.half[e, k]
    half = hot.put(m.half, (e, k), True, first_half)
    half_clock = hot.put(m.half_clock, (e, k), clock, first_half)
    half_inst = hot.put(m.half_inst, (e, k), h, first_half)
    both = first_half & half[e, 0] & half[e, 1]
    joined = jnp.maximum(half_clock[e, 0], half_clock[e, 1])
    m = dataclasses.replace(m, half=hot.put(half, (e,), False, both), half_clock=half_clock, half_inst=half_inst)
    push = (on & ~via_barrier) | both
    signal_clock = jnp.where(both, joined, clock)
    kind = Finding.OVERFLOW if st.depth > 1 else Finding.MERGED_SIGNAL
    for j in range(2):
        c = chans[j]
        active = push & (c >= 0)
        cc = jnp.clip(c, 0)
        full = m.count[cc, e] >= st.depth
        last = m.ring_inst[cc, e, (m.ring_head[cc, e] + m.count[cc, e] - 1) % st.depth]
        found.append((active & full, kind, last, eid, 0))
        if st.depth == 1:  # bit chip: the wait that took the previous signal must happen before this set
            taker = m.take_q[cc, e]
            unordered = (taker >= 0) & (signal_clock[jnp.clip(taker, 0)] < m.take_epoch[cc, e])
            found.append((active & ~full & unordered, Finding.UNORDERED_SET, m.take_inst[cc, e], eid, 0))
        go = active & ~full
        at = (m.ring_head[cc, e] + m.count[cc, e]) % st.depth
        m = dataclasses.replace(
            m,
            count=hot.add(m.count, (cc, e), go),
            ring_clock=hot.put(m.ring_clock, (cc, e, at), signal_clock, go),
            ring_t=hot.put(m.ring_t, (cc, e, at), m.now, go),
            ring_inst=hot.put(m.ring_inst, (cc, e, at), h, go),
            ring_mode=hot.put(m.ring_mode, (cc, e, at), row[Col.MODE], go),
        )
    return m


def _start(m: Machine, st: Static, row, uf_mask, q, h, start_t, on):
    """Where ``on``: queue ``q``'s head (table row ``row``) starts: it consumes what it waited for and acquires its
    clock."""
    sync, ok = row[Col.SYNC], on & (row[Col.ID_OK] > 0)
    vc = hot.add(m.vc, (q, q), on.astype(jnp.int32))
    acquired = jnp.zeros_like(vc[q])

    source, found = jnp.asarray(-1, jnp.int32), []
    if st.has_flags:  # WaitFlag: clear the bit, acquire its set's clock
        slot = row[Col.SLOT]
        is_wait = ok & (sync == Sync.WAIT_FLAG)
        acquired = jnp.where(is_wait, jnp.maximum(acquired, m.flag_clock[slot]), acquired)
        source = jnp.where(is_wait, m.flag_inst[slot], -1)
        m = dataclasses.replace(m, flag=hot.put(m.flag, (slot,), False, is_wait))

    if st.has_mutex:  # mutex lock: acquire the clock of the unlock that released the group before it
        slot = row[Col.SLOT]
        takes = ok & (sync == Sync.MUTEX_LOCK) & (row[Col.TICKET] > 0)
        acquired = jnp.where(takes, jnp.maximum(acquired, m.mutex_clock[slot]), acquired)
        source = jnp.where(takes, m.mutex_inst[slot], source)

    if st.has_cross:  # wait_cross_core: one signal from each own channel (FIFO), or a mismatched one from elsewhere
        m, acquired, found, taken = _cross_wait(m, st, row, ok & (sync == Sync.CROSS_WAIT), acquired, q, vc[q, q], h)
        source = jnp.where(taken >= 0, taken, source)

    if st.has_unit_flags:  # unit flag: acquire the clock of the flag writes it waited on
        mask = uf_mask
        uf_on = on & (row[Col.UF_ON] > 0)
        acquired = jnp.where(
            uf_on, jnp.maximum(acquired, jnp.max(jnp.where(mask[:, None], m.uf_clock, 0), axis=0)), acquired
        )
        source = jnp.where(uf_on & (source < 0), jnp.max(jnp.where(mask, m.uf_inst, -1)), source)

    # an mmad streams behind the one before it on its pipe (no gap): its pipeline is full, it pays no head
    streams = (row[Col.HEAD] > 0) & m.last_mmad[q] & (m.free_t[q] == start_t)

    if st.has_barrier:  # PIPE_ALL: the core's queues are idle; each now knows what all of them did
        same_core = st.queue_core == row[Col.CORE]
        joined = jnp.max(jnp.where(same_core[:, None], vc, 0), axis=0)
        vc = jnp.where(on & (sync == Sync.BARRIER_ALL) & same_core[:, None], jnp.maximum(vc, joined[None, :]), vc)
    vc = jnp.where(hot.mask(vc.shape, (q,)), jnp.maximum(vc, acquired[None, :]), vc)
    # a DMA request leaves its pipe after its transfer and lands after its flight: the next one starts meanwhile
    landed = start_t + row[Col.CYCLES] - jnp.where(streams, row[Col.HEAD], 0)
    m = dataclasses.replace(
        m,
        vc=vc,
        busy=hot.put(m.busy, (q,), True, on),
        last_mmad=hot.put(m.last_mmad, (q,), row[Col.HEAD] > 0, on),
        busy_end=hot.put(m.busy_end, (q,), landed - row[Col.FLIGHT], on),
        drain_t=hot.put(m.drain_t, (q,), jnp.maximum(m.drain_t[q], landed), on),
    )
    return m, _finding(found), source.astype(jnp.int32)


def _cross_wait(m: Machine, st: Static, row, on, acquired, q, epoch, h):
    e, eid = row[Col.COUNTER], row[Col.EVENT_ID]
    chans = row[Col.CH0 : Col.CH1 + 1]
    cc = jnp.clip(chans, 0)
    own_ok = jnp.all(jnp.where(chans >= 0, m.count[cc, e] > 0, True))
    alt = row[Col.ALT : Col.ALT + 4]
    alt_has = (alt >= 0) & (m.count[jnp.clip(alt, 0), e] > 0)
    mismatch_via_alt = on & ~own_ok & jnp.any(alt_has)
    takes = [(chans[0], on & own_ok & (chans[0] >= 0)), (chans[1], on & own_ok & (chans[1] >= 0))]
    takes.append((alt[jnp.argmax(alt_has)], mismatch_via_alt))
    found, taken = [], jnp.asarray(-1, jnp.int32)
    for j, (c, active) in enumerate(takes):
        cc = jnp.clip(c, 0)
        head = m.ring_head[cc, e]
        taken = jnp.where(active & (taken < 0), m.ring_inst[cc, e, head], taken)
        if j < 2:  # a take from its own channel: the next set there must be ordered after this wait
            m = dataclasses.replace(
                m,
                take_q=hot.put(m.take_q, (cc, e), q, active),
                take_epoch=hot.put(m.take_epoch, (cc, e), epoch, active),
                take_inst=hot.put(m.take_inst, (cc, e), h, active),
            )
        acquired = jnp.where(active, jnp.maximum(acquired, m.ring_clock[cc, e, head]), acquired)
        mode_differs = m.ring_mode[cc, e, head] != row[Col.MODE]
        found.append((active & mode_differs, Finding.SYNC_ERROR, m.ring_inst[cc, e, head], 1, eid))
        m = dataclasses.replace(
            m,
            count=hot.add(m.count, (cc, e), -active.astype(jnp.int32)),
            ring_head=hot.put(m.ring_head, (cc, e), (head + 1) % st.depth, active),
        )
    return m, acquired, found, taken


def _step(st: Static, pl: Plan, lat: SyncLatency, m: Machine):
    """One event: the earliest completion, else the earliest start (completions first at equal times)."""
    has, head = heads(m, pl)
    rows = pl.table[head]  # [Q, K]: one gather per step for everything the step reads
    runnable, start_t = _runnable(m, st, pl, lat, has, head, rows)
    start_key = jnp.where(runnable, start_t, NEVER)
    end_key = jnp.where(m.busy, m.busy_end, NEVER)
    t_next = jnp.minimum(jnp.min(start_key), jnp.min(end_key))
    any_end = jnp.any(end_key == t_next)
    q = jnp.where(any_end, jnp.argmax(end_key == t_next), jnp.argmax(start_key == t_next))
    idle = t_next >= NEVER
    m = dataclasses.replace(m, now=jnp.where(idle, m.now, t_next))
    h = head[q]
    row = jnp.sum(jnp.where((jnp.arange(st.n_queues) == q)[:, None], rows, 0), axis=0)
    uf_mask = pl.uf_mask[h] if st.has_unit_flags else None

    is_end, is_start = ~idle & any_end, ~idle & ~any_end
    m, found_end = _complete(m, st, row, uf_mask, q, h, is_end)
    m, found_start, source = _start(m, st, row, uf_mask, q, h, t_next, is_start)
    found = jnp.where(is_end, found_end, jnp.where(is_start, found_start, -1))
    source = jnp.where(is_start, source, -1)
    m = dataclasses.replace(m, stuck=m.stuck | (idle & jnp.any(has)))
    m = dataclasses.replace(m, done=m.stuck | jnp.all(m.pos >= pl.qlen))
    kind = jnp.where(idle, IDLE, jnp.where(any_end, END, START))
    return m, Event(kind, h, m.now, m.vc[q], found, source)


def _idle(m: Machine):
    q = m.vc.shape[0]
    z = jnp.asarray(0, jnp.int32)
    none = jnp.full((4,), -1, jnp.int32)
    return m, Event(
        jnp.asarray(IDLE, jnp.int32), z, m.now, jnp.zeros((q,), jnp.int32), none, jnp.asarray(-1, jnp.int32)
    )


@custom_vmap
def _all_done(done):
    """``done`` for one scenario; under ``vmap``, whether every scenario is done, unbatched."""
    return done


@_all_done.def_vmap
def _all_done_batched(axis_size, in_batched, done):
    return (jnp.all(done) if in_batched[0] else done), False


def execute(st: Static, pl: Plan, lat: SyncLatency) -> tuple[Machine, Event]:
    """Run the machine to the end (or to a deadlock); returns its final state and one event per step.

    Every executed instance starts once and completes once, so ``2 N`` steps always suffice; the steps after the
    end are idle. They run in chunks of ``STEPS_PER_CHUNK``, and a chunk is skipped once every scenario is done
    (``_all_done``: under ``vmap`` an unbatched test, so the skip is a branch, not a select of every field of the
    machine). A step of a done scenario finds no event and changes nothing.
    """
    n_steps = 2 * st.n_instances
    chunk = math.gcd(n_steps, STEPS_PER_CHUNK)

    def steps(m):
        return jax.lax.scan(lambda m, _: _step(st, pl, lat, m), m, None, length=chunk)

    def idle(m):
        m, event = _idle(m)
        return m, jax.tree.map(lambda x: jnp.broadcast_to(x, (chunk, *x.shape)), event)

    def body(m, _):
        return jax.lax.cond(_all_done(m.done), idle, steps, m)

    m, events = jax.lax.scan(body, init_machine(st), None, length=n_steps // chunk)
    return m, jax.tree.map(lambda x: x.reshape(n_steps, *x.shape[2:]), events)
