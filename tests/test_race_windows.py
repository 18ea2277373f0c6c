"""The race check's windows against the quadratic definition it replaced.

The tables no longer list every pair of overlapping accesses on two queues (their number grows with the square of a
loop's trip count); the check walks, per write and group of another queue's accesses, the range happens-before leaves
unordered (``_checks.Windows``), a few accesses a pass. Here random loops of cube and vector instructions, their
sync partly missing, partly ordering later instructions first, are checked both ways: the windows' races and reordered pair
must be those of every pair of the definition, looked at all at once.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from pair_definitions import every_pair

from ascjax.core import AIC, AIV0, N_CORES, RAW, WAR, WAW, Finding, SyncMode
from ascjax.engine import ControlOptions, RecordBuilder, SyncLatency, _checks, _control, _tables

PIPES = ("MTE2", "MTE1", "M", "FIX")
VECTOR_PIPES = ("MTE2", "V", "MTE3")
RANGE_BYTES = 256
BIG = _checks.BIG
PAIRS = 8192  # the definition's pairs, padded (one compile)


def _random_record(seed: int, trip: int, variety: bool = False):
    """A loop of ``trip`` iterations of random instructions on the cube's four pipes and one vector core's three, over
    overlapping byte ranges of L1, UB and GM (GM shared by both cores, none of it an input: reads of bytes no write
    reached yet). Per iteration and core, flag pairs from a random order of its instructions (some dropped: races),
    a set after the earlier one in that order, its wait before the later, so that sync may run a later instruction
    first; across the cores a READY (cube -> vector) and a RELEASE (vector -> cube, from the next iteration on),
    each dropped at random. ``variety``: also instructions of no cycles, and accesses that choose between two byte
    ranges or happen in every other iteration only."""
    rng = np.random.default_rng(seed)
    b = RecordBuilder()
    l1, ub, gm = (
        b.space("L1:buf", 8 * RANGE_BYTES),
        b.space("UB0:buf", 8 * RANGE_BYTES),
        b.space("GM:out", 8 * RANGE_BYTES),
    )
    cores = {AIC: (PIPES, (l1, gm)), AIV0: (VECTOR_PIPES, (ub, gm))}
    programs = {core: _random_ops(rng, pipes, spaces, variety) for core, (pipes, spaces) in cores.items()}
    ready, release = rng.random() < 0.6, rng.random() < 0.6
    with b.on(AIV0):
        if release:
            b.cross_set("MTE3", 1, SyncMode.UNICAST_BLOCK)  # the cube's first wait finds the buffer free
    with b.loop(trip + 1, trip) as i:  # the last iteration disabled
        with b.on(AIC):
            if release:
                b.cross_wait("MTE2", 1, SyncMode.UNICAST_BLOCK, subblock=0)
            _issue(b, *programs[AIC], i)
            if ready:
                b.cross_set("FIX", 0, SyncMode.UNICAST_BLOCK, subblock=0)
        with b.on(AIV0):
            if ready:
                b.cross_wait("MTE2", 0, SyncMode.UNICAST_BLOCK)
            _issue(b, *programs[AIV0], i)
            if release:
                b.cross_set("MTE3", 1, SyncMode.UNICAST_BLOCK)
    if release:
        with b.on(AIC):
            b.cross_wait("MTE2", 1, SyncMode.UNICAST_BLOCK, subblock=0)
    return b.build()


def _random_ops(rng, pipes, spaces, variety=False):
    """Random instructions (pipe, reads, writes, cycles, which iterations it skips) and flag pairs ``{(src, dst): (earlier, later)}``.
    An access is ``(space, range)``, or with ``variety`` also ``(space, (range, range), "choice")`` (the first in even
    iterations) or ``(space, range, "when")`` (in even iterations only)."""

    def touch():
        space, kind = spaces[int(rng.integers(0, len(spaces)))], int(rng.choice(3, p=[0.6, 0.2, 0.2])) if variety else 0
        where = 3 if variety else 7  # ranges begin in the first ``where`` slots: fewer, more of them overlap
        if kind == 1:
            return space, (_byte_range(rng, where), _byte_range(rng, where)), "choice"
        return (space, _byte_range(rng, where), "when") if kind == 2 else (space, _byte_range(rng, where))

    ops = []
    for _ in range(int(rng.integers(2, 6))):
        reads = [touch() for _ in range(int(rng.integers(0, 3)))]
        writes = [touch() for _ in range(int(rng.integers(0, 2)))]
        skips = int(rng.choice(3, p=[0.6, 0.2, 0.2]))  # none; every third iteration; the first half (gaps in places)
        cycles = int(rng.integers(0 if variety else 1, 40))
        ops.append((pipes[int(rng.integers(0, len(pipes)))], reads, writes, cycles, skips))
    intended = rng.permutation(len(ops))  # the order the sync asks for (not program order)
    edges = {}
    for a, c in zip(intended[:-1], intended[1:]):
        src, dst = ops[a][0], ops[c][0]
        if src != dst and (src, dst) not in edges and rng.random() < 0.7:
            edges[(src, dst)] = (a, c)
    return ops, edges


def _issue(b, ops, edges, i):
    """One core's instructions of iteration ``i``, with the waits of its flag pairs before and the sets after them."""
    for k, (pipe, reads, writes, cycles, skips) in enumerate(ops):
        for (src, dst), (_, later) in edges.items():
            if later == k:
                b.wait_flag(src, dst, 1)
        enable = [True, i % 3 != 1, i >= 4][skips]
        reads, writes = ([_access(a, i) for a in accesses] for accesses in (reads, writes))
        b.instruction(f"op{k}", pipe, reads=reads, writes=writes, cycles=cycles, enable=enable)
        for (src, dst), (earlier, _) in edges.items():
            if earlier == k:
                b.set_flag(src, dst, 1)


def _access(access, i):
    """A random access as the builder takes it in iteration ``i``."""
    if len(access) == 2:
        return access
    space, ranges, kind = access
    if kind == "choice":
        return space, list(ranges), i % 2
    return space, [ranges], 0, i % 2 == 0


def _byte_range(rng, where: int = 7) -> tuple[int, int]:
    lo = int(rng.integers(0, where))
    return lo * RANGE_BYTES, (lo + int(rng.integers(1, 3))) * RANGE_BYTES


def _quadratic(st, log, acc, pairs, landed):
    """Races' rows and the reordered pair over every listed pair at once (the definition). Per reporter, its earliest
    event; a read's race, the latest write it is unordered with (then its first access); a write's, the first pair
    in the list's order (write, then other access)."""
    w, o = jnp.asarray(pairs[:, 0]), jnp.asarray(pairs[:, 1])
    p = _checks.Pairs(st, log, acc, w, o, jnp.ones(w.shape, bool))
    safe = jnp.clip(jnp.maximum(acc.lo[w], acc.lo[o]), 0, st.n_atoms - 1)
    fresh = p.race & ~p.o_writes & ~st.atom_init[safe] & (landed[safe] > acc.step[o])
    at = p.wi * N_CORES + st.core[p.oi]
    first = jnp.full((st.n_instances * N_CORES,), BIG, jnp.int32).at[at].min(jnp.where(fresh, st.pidx[p.oi], BIG))
    w_first = jnp.where(p.same_core, st.pidx[p.wi] < st.pidx[p.oi], acc.step[w] < acc.step[o])
    w_first |= ~p.same_core & (st.pidx[p.oi] >= first[at])
    at_end = ~w_first | p.o_writes
    n = w.shape[0]
    latest_write_first = jnp.lexsort((o, -w))  # the pairs by write, latest first, then by other access
    rank = jnp.zeros(n, jnp.int32).at[latest_write_first].set(jnp.arange(n, dtype=jnp.int32))
    key = jnp.where(p.race, jnp.where(at_end, n + jnp.arange(n), rank), BIG)
    best = jnp.full(st.race_inst.shape, BIG, jnp.int32)
    best = best.at[st.race_place[p.oi]].min(jnp.where(w_first, key, BIG))
    best = best.at[st.race_place[p.wi]].min(jnp.where(w_first, BIG, key))
    hit = best < BIG
    k = jnp.where(hit, jnp.where(best >= n, best - n, latest_write_first[jnp.clip(best, 0, n - 1)]), 0)
    inst = st.race_inst
    hazard = jnp.where(p.o_writes[k], WAW, jnp.where(w_first[k], RAW, WAR))
    step = jnp.where(best // n == 1, log.end_step[inst], log.start_step[inst])
    other = jnp.where(w_first[k], p.wi[k], p.oi[k])
    atom = jnp.maximum(acc.lo[w], acc.lo[o])[k]
    races = _checks.rows(hit, Finding.RACE, inst, other, atom, hazard, step)
    write_first = p.w_before_o & (st.pidx[p.oi] < st.pidx[p.wi])
    other_first = p.o_before_w & (st.pidx[p.wi] < st.pidx[p.oi])
    reorder = p.conflict & p.same_core & (write_first | other_first)
    r = jnp.argmax(reorder)
    pair = jnp.where(write_first[r], jnp.stack([p.wi[r], p.oi[r]]), jnp.stack([p.oi[r], p.wi[r]]))
    return races, jnp.where(reorder[r], pair, -1).astype(jnp.int32)


@jax.jit
def _both(st, op, lat, pairs):
    pl, _, events = _control._loop(st, op, lat)
    log = _checks.Log(st, events)
    acc = _checks.Accesses(st, op, log)
    landed = _checks.first_landed(st, acc)
    windows = _checks.Windows(st, op, pl, log, acc)
    return _checks.pair_checks(st, log, acc, windows, landed), _quadratic(st, log, acc, pairs, landed), windows.passes


def _compare(record, whole: bool = False):
    """(passes the windows took, races found, reordered found, races across cores) after asserting both ways agree. ``whole``: the
    record's own tables, each window taken whole (``WHOLE_WINDOW_ACCESSES``), padded to a size class's sizes."""
    t = record.template
    if whole:
        sizes = _tables.SIZE_CLASSES[1]
        st = _tables._build(t, ControlOptions(), lambda name, n, floor: sizes[name])
        assert st.whole_windows
    else:  # a size class's tables (one compile for the records of a class), or past the classes its own buckets
        st = _tables.static(t, ControlOptions())
        if st.whole_windows:
            st = _tables._build(t, ControlOptions(), lambda name, n, floor: _tables.bucket(n, floor), shared=True)
        assert not st.whole_windows
    acc = _tables._accesses(t, st.n_instances, (st.n_read_slots, st.n_write_slots))
    padding = st.acc_inst.shape[0] - 1  # an access that never happens: a record with no pair still has one
    pairs = every_pair(acc)
    pairs = np.concatenate([pairs, np.full((PAIRS - len(pairs), 2), padding)]).astype(np.int32)
    op = _control._pad_operands(record.operands, st)
    (races, reordered), (want_races, want_reordered), passes = _both(st, op, SyncLatency(), pairs)
    valid = np.asarray(want_races["valid"])
    np.testing.assert_array_equal(np.asarray(races["valid"]), valid)
    for field in want_races:  # what a found race says (rows without one are dropped by the log)
        np.testing.assert_array_equal(np.asarray(races[field])[valid], np.asarray(want_races[field])[valid], field)
    np.testing.assert_array_equal(np.asarray(reordered), np.asarray(want_reordered))
    across = valid & (st.core[np.asarray(want_races["inst"])] != st.core[np.asarray(want_races["other"])])
    return int(passes), int(np.sum(valid)), bool(want_reordered[0] >= 0), int(np.sum(across))


@pytest.mark.parametrize("trip", [3, 16])
def test_the_windows_find_what_every_pair_finds(trip):
    """40 random loops: the same first race per instance (its other instance, atom, hazard and step) and the same
    reordered pair as the quadratic definition. The loops cover wide windows (many passes), races on one core and
    across cores, and reorders."""
    passes, races, reorders, across = [], 0, 0, 0
    for seed in range(40):
        p, r, reordered, a = _compare(_random_record(seed, trip))
        passes.append(p)
        races += r
        reorders += reordered
        across += a
    assert races > across > 0 and reorders > 0
    if trip > 3:
        assert max(passes) > 1, passes  # some range wider than one pass
    assert min(passes) <= 1


def test_whole_windows_find_what_every_pair_finds():
    """A small record's own tables take each window whole, in one pass without a search: the same findings."""
    races, reorders, across = 0, 0, 0
    for seed in range(12):
        _, r, reordered, a = _compare(_random_record(seed, 6), whole=True)
        races += r
        reorders += reordered
        across += a
    assert races > across > 0 and reorders > 0


def test_keys_too_wide_to_pack_are_kept_apart(monkeypatch):
    """Past ``PACKED_ACCESSES`` a pair's place in the order is kept as two keys: the same findings."""
    monkeypatch.setattr(_checks, "PACKED_ACCESSES", 0)
    jax.clear_caches()  # trace again with the constant changed
    try:
        races = sum(_compare(_random_record(seed, 24))[1] for seed in range(8))
        assert races > 0
    finally:
        jax.clear_caches()


def test_a_correct_loop_takes_one_pass_whatever_its_trip_count():
    """A double-buffered copy loop with its sync: each write's unordered range is narrow, so the race check looks at a
    few accesses per write (one pass) at 4 or 64 iterations, where the pairs of the definition grow with the square."""
    passes = {}
    for trip in (4, 64):
        b = RecordBuilder()
        l1 = b.space("L1:a", 2 * RANGE_BYTES)
        b.set_flag("MTE1", "MTE2", 0)
        b.set_flag("MTE1", "MTE2", 1)
        with b.loop(trip, trip) as i:
            slot = i % 2
            ranges = [(0, RANGE_BYTES), (RANGE_BYTES, 2 * RANGE_BYTES)]
            b.wait_flag("MTE1", "MTE2", slot)
            b.instruction("load", "MTE2", writes=[(l1, ranges, slot)], cycles=30)
            b.set_flag("MTE2", "MTE1", slot)
            b.wait_flag("MTE2", "MTE1", slot)
            b.instruction("move", "MTE1", reads=[(l1, ranges, slot)], cycles=20)
            b.set_flag("MTE1", "MTE2", slot)
        b.wait_flag("MTE1", "MTE2", 0)
        b.wait_flag("MTE1", "MTE2", 1)
        passes[trip], races, _, _ = _compare(b.build())
        assert races == 0
    assert passes == {4: 1, 64: 1}


# --- GM windows: rows and columns ------------------------------------------------------------------------------
def _column_halves(shift: int):
    """Each AIV copies its half of ``x``'s columns to the same columns of ``out`` (AIV1's shifted left by
    ``shift``): both write every row of ``out``, at traced column offsets."""
    from ascjax import pl

    def kernel(k):
        t = pl.alloc("Vec", (8, 16), "float32", name="t")

        @pl.section_vector
        def _(sub):
            col = pl.get_subblock_idx() * (16 - shift)
            pl.load(t, "x", (0, col))
            pl.system.sync_src(set_pipe="MTE2", wait_pipe="MTE3", event_id=0)
            pl.system.sync_dst(set_pipe="MTE2", wait_pipe="MTE3", event_id=0)
            pl.store("out", t, (0, col))

    return kernel


@pytest.mark.parametrize(("shift", "verdict"), [(0, "OK"), (1, "RACE")])
def test_two_cores_storing_apart_columns_of_the_same_rows_do_not_race(shift, verdict):
    import ascjax as aj

    x = np.arange(8 * 32, dtype=np.float32).reshape(8, 32)
    result = aj.run(_column_halves(shift), {"x": x}, {"out": ((8, 32), "float32")})
    assert result.report().verdict is getattr(aj.Verdict, verdict), result.report()
    if verdict == "OK":
        np.testing.assert_array_equal(np.asarray(result.outputs["out"]), x)
    else:
        assert "GM:out" in result.report().message
