"""The control plane against semantics §8 and §3: every test vector there, each bad program beside its good twin.

Programs are written straight into a ``RecordBuilder`` (the record a front end produces), so
these tests pin the execution model itself: decoupled issue, fences, unit flags, flag bits,
cross-core counters, happens-before, and findings ranked by severity.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ascjax.core import AIV0, AIV1, RAW, SMALL_TILE, WAR, WAW, Finding, SyncMode
from ascjax.engine import (
    UF_KEEP,
    UF_OFF,
    UF_UPDATE,
    UNIT_FLAG_BLOCK_BYTES,
    ControlOptions,
    RecordBuilder,
    UnitFlagRole,
    run_control,
    state_bytes,
    sweep_control,
    verdict,
)
from ascjax.engine._log import ENTRY, KIND, OTHER
from ascjax.engine._tables import NARROW_SPAN, static

TILE_BYTES = 128 * 128 * 4  # one 128x128 float32 L0C tile
TILE_BLOCKS = TILE_BYTES // UNIT_FLAG_BLOCK_BYTES


def kinds(state) -> set[Finding]:
    rows = np.asarray(state.findings)[: int(state.n_findings)]
    return {Finding(int(k)) for k in rows[:, KIND]}


def worst(state) -> Finding | None:
    v = int(verdict(state))
    return None if v < 0 else Finding(v)


def rows_of(state, kind):
    rows = np.asarray(state.findings)[: int(state.n_findings)]
    return rows[rows[:, KIND] == int(kind)]


class Cube:
    """A cube-core test bench: operand spaces, L0C and a GM output, and the ops on them."""

    def __init__(self, b: RecordBuilder, l0c_bytes: int = 2 * TILE_BYTES):
        self.b = b
        self.l0a = b.space("L0A", 65536, initialised=True)
        self.l0b = b.space("L0B", 65536, initialised=True)
        self.l0c = b.space("L0C", l0c_bytes)
        self.gm = b.space("GM:c", 2 * TILE_BYTES)

    def mmad(self, mode=UF_OFF, lo=0, hi=TILE_BYTES, *, accumulate=False, small=False, enable=True):
        acc = [(self.l0c, [(lo, hi)], 0, accumulate)]
        self.b.instruction(
            "mmad", "M", reads=[(self.l0a, (0, 32768)), (self.l0b, (0, 32768)), *acc], writes=[(self.l0c, (lo, hi))],
            uf_role=UnitFlagRole.WRITER, uf_mode=mode, uf_blocks=[(lo // UNIT_FLAG_BLOCK_BYTES, hi // UNIT_FLAG_BLOCK_BYTES)], accumulate=accumulate,
            small_tile=small, cycles=60, enable=enable,
        )  # fmt: skip

    def fixpipe(self, mode=UF_OFF, lo=0, hi=TILE_BYTES, gm_lo=0, *, enable=True):
        self.b.instruction(
            "fixpipe", "FIX", reads=[(self.l0c, (lo, hi))], writes=[(self.gm, (gm_lo, gm_lo + hi - lo))],
            uf_role=UnitFlagRole.READER, uf_mode=mode, uf_blocks=[(lo // UNIT_FLAG_BLOCK_BYTES, hi // UNIT_FLAG_BLOCK_BYTES)], cycles=40, enable=enable,
        )  # fmt: skip


# --- semantics §8 test vectors --------------------------------------------------------------


def _decoupled_wait():
    b = RecordBuilder()
    ub, gm = b.space("UB0", 4096), b.space("GM:x", 4096, initialised=True)
    with b.on(AIV0):
        b.wait_flag("MTE2", "V", 0)
        b.instruction("copy_gm2ub", "MTE2", reads=[(gm, (0, 512))], writes=[(ub, (0, 512))])
        b.set_flag("MTE2", "V", 0)
        b.instruction("vadd", "V", reads=[(ub, (0, 512))])
    return b.build()


def test_a_wait_queued_before_its_set_is_fine_with_decoupled_issue():
    s = run_control(_decoupled_wait())
    assert worst(s) is None
    assert state_bytes(s) < 8192


def test_the_same_wait_deadlocks_when_issue_blocks_on_every_wait():
    s = run_control(_decoupled_wait(), ControlOptions(wait_blocks_issue=True))
    assert worst(s) is Finding.DEADLOCK


def test_a_second_mmad_waits_until_the_first_fixpipe_drains_the_flag():
    b = RecordBuilder()
    c = Cube(b)
    c.mmad(UF_UPDATE)
    c.mmad(UF_UPDATE)
    c.fixpipe(UF_UPDATE, gm_lo=0)
    c.fixpipe(UF_UPDATE, gm_lo=TILE_BYTES)
    s = run_control(b.build())
    assert worst(s) is None, np.asarray(s.findings)
    start, end = np.asarray(s.start), np.asarray(s.end)
    assert start[1] >= end[2]  # mmad 2 starts after fixpipe 1 completes
    assert start[3] >= end[1]


def test_a_scalar_wait_before_its_set_is_issued_stalls_the_core():
    b = RecordBuilder()
    with b.on(AIV0):
        b.wait_flag("V", "S", 0)
        b.set_flag("V", "S", 0)
    s = run_control(b.build())
    assert worst(s) is Finding.DEADLOCK
    twin = RecordBuilder()
    with twin.on(AIV0):
        twin.set_flag("V", "S", 0)
        twin.wait_flag("V", "S", 0)
    assert worst(run_control(twin.build())) is None


def _flash_tiles(phases, move_mode=UF_UPDATE):
    b = RecordBuilder()
    c = Cube(b)
    ub = b.space("UB0", TILE_BYTES)
    for k, mode in enumerate(phases):
        c.mmad(mode, accumulate=k > 0)
    b.instruction(
        "copy_l0c2ub", "FIX", reads=[(c.l0c, (0, TILE_BYTES))], writes=[(ub, (0, TILE_BYTES))],
        uf_role=UnitFlagRole.READER, uf_mode=move_mode, uf_blocks=[(0, TILE_BLOCKS)],
    )  # fmt: skip
    return b.build()


def test_flash_attention_with_three_k_tiles_leaves_the_flag_set_not_a_deadlock():
    s = run_control(_flash_tiles([UF_KEEP, UF_UPDATE, UF_UPDATE]))
    assert worst(s) is Finding.LEFTOVER
    assert Finding.DEADLOCK not in kinds(s)
    (row,) = rows_of(s, Finding.LEFTOVER)
    assert row[ENTRY] == 2  # the third tile's mmad set the flag that nothing drains
    assert worst(run_control(_flash_tiles([UF_KEEP, UF_KEEP, UF_UPDATE]))) is None


def _counter_race(second_sync):
    b = RecordBuilder()
    gm = b.space("GM:x", 4096)
    b.instruction("fixpipe", "FIX", writes=[(gm, (0, 512))])
    b.cross_set("FIX", 0, SyncMode.UNICAST_BLOCK, subblock=0)
    if second_sync:  # the good twin: wait for the reader's RELEASE before overwriting
        b.cross_wait("FIX", 1, SyncMode.UNICAST_BLOCK, subblock=0)
    b.instruction("fixpipe", "FIX", writes=[(gm, (0, 512))])
    b.cross_set("FIX", 0, SyncMode.UNICAST_BLOCK, subblock=0)
    with b.on(AIV0):
        b.instruction("copy_gm2ub", "MTE2", cycles=500)  # busy: both sets arrive before the first wait
        b.cross_wait("MTE2", 0, SyncMode.UNICAST_BLOCK)
        b.instruction("copy_gm2ub", "MTE2", reads=[(gm, (0, 512))])
        if second_sync:
            b.cross_set("MTE2", 1, SyncMode.UNICAST_BLOCK)
        b.cross_wait("MTE2", 0, SyncMode.UNICAST_BLOCK)
        b.instruction("copy_gm2ub", "MTE2", reads=[(gm, (0, 512))])
    return b.build()


def test_counter_chip_each_wait_acquires_only_its_own_sets_clock():
    record = _counter_race(False)
    s = run_control(record, ControlOptions(counter_chip=True))
    assert worst(s) is Finding.RACE
    (row,) = rows_of(s, Finding.RACE)
    entries = {int(row[ENTRY]), int(record.template.entry[row[OTHER]])}
    assert entries == {2, 6}  # the second write and the first read
    assert worst(run_control(_counter_race(True), ControlOptions(counter_chip=True))) is None


def test_the_bit_chip_merges_the_second_pending_signal():
    s = run_control(_counter_race(False))
    assert Finding.MERGED_SIGNAL in kinds(s)
    assert worst(s) is Finding.DEADLOCK  # the lost signal leaves the second wait without one


def _reset(barrier):
    b = RecordBuilder()
    c = Cube(b)
    c.mmad(UF_UPDATE)
    c.fixpipe(UF_UPDATE, lo=0, hi=TILE_BYTES // 4)  # drains a quarter of the blocks
    if barrier:
        b.barrier("ALL")
    b.unit_flag_reset()
    c.mmad(UF_UPDATE)
    c.fixpipe(UF_UPDATE)
    return b.build()


def test_a_unit_flag_reset_without_a_barrier_may_run_first_and_deadlock():
    assert worst(run_control(_reset(barrier=False))) is Finding.DEADLOCK
    assert worst(run_control(_reset(barrier=True))) is None


def _inter_subblock(aiv1_sets):
    b = RecordBuilder()
    gm = b.space("GM:x", 4096)
    with b.on(AIV0):
        b.instruction("copy_ub2gm", "MTE3", writes=[(gm, (0, 512))])
        b.cross_set("MTE3", 5, SyncMode.INTER_SUBBLOCK)
        b.cross_wait("MTE3", 5, SyncMode.INTER_SUBBLOCK)
    with b.on(AIV1):
        if aiv1_sets:
            b.cross_set("MTE2", 5, SyncMode.INTER_SUBBLOCK)
        b.cross_wait("MTE2", 5, SyncMode.INTER_SUBBLOCK)
        b.instruction("copy_gm2ub", "MTE2", reads=[(gm, (0, 512))])
    return b.build()


def test_inter_subblock_is_a_barrier_of_both_aivs():
    assert worst(run_control(_inter_subblock(True))) is None
    assert worst(run_control(_inter_subblock(False))) is Finding.DEADLOCK


def test_inter_subblock_point_to_point_orders_only_the_setter():
    b = RecordBuilder()
    gm = b.space("GM:x", 4096)
    with b.on(AIV0):
        b.instruction("copy_ub2gm", "MTE3", writes=[(gm, (0, 512))])
        b.cross_set("MTE3", 5, SyncMode.INTER_SUBBLOCK, point_to_point=True)
    with b.on(AIV1):
        b.cross_wait("MTE2", 5, SyncMode.INTER_SUBBLOCK, point_to_point=True)
        b.instruction("copy_gm2ub", "MTE2", reads=[(gm, (0, 512))])
    assert worst(run_control(b.build())) is None


def test_a_set_and_wait_of_different_modes_is_a_sync_error_naming_both():
    b = RecordBuilder()
    b.cross_set("FIX", 3, SyncMode.INTRA_BLOCK)
    for aiv in (AIV0, AIV1):
        with b.on(aiv):
            b.cross_wait("V", 3, SyncMode.INTER_SUBBLOCK)
    s = run_control(b.build())
    assert worst(s) is Finding.SYNC_ERROR
    rows = rows_of(s, Finding.SYNC_ERROR)
    assert set(rows[:, ENTRY]) == {1, 2} and set(rows[:, OTHER]) == {0}  # each wait, and the cube's set


# --- semantics §3 unit-flag test vectors ----------------------------------------------------


def _k_loop(modes, trip=None, store_mode=UF_UPDATE, trip_max=8):
    b = RecordBuilder()
    c = Cube(b)
    with b.loop(trip_max, trip) as k:
        mode = jnp.asarray(modes)[k] if not isinstance(modes, int) else modes
        c.mmad(mode, accumulate=k > 0)
    c.fixpipe(store_mode)
    return b.build()


def test_k_loop_keep_seven_times_then_update_is_correct():
    assert worst(run_control(_k_loop([UF_KEEP] * 7 + [UF_UPDATE]))) is None


def test_split_n_one_mmad_two_fixpipes_is_correct():
    b = RecordBuilder()
    c = Cube(b)
    c.mmad(UF_UPDATE, 0, 2 * TILE_BYTES)
    c.fixpipe(UF_UPDATE, 0, TILE_BYTES, 0)
    c.fixpipe(UF_UPDATE, TILE_BYTES, 2 * TILE_BYTES, TILE_BYTES)
    assert worst(run_control(b.build())) is None


def test_seed_000_error_1_partial_matmul_then_final_store_hangs():
    b = RecordBuilder()
    c = Cube(b)
    c.mmad(UF_KEEP)
    c.fixpipe(UF_UPDATE)
    s = run_control(b.build())
    assert worst(s) is Finding.DEADLOCK
    assert rows_of(s, Finding.DEADLOCK)[0, ENTRY] == 1  # the store is stuck


def test_seed_000_error_2_store_without_phase_races_the_k_loop():
    s = run_control(_k_loop([UF_KEEP] * 7 + [UF_UPDATE], store_mode=UF_OFF))
    assert worst(s) is Finding.RACE
    assert {Finding.LEFTOVER, Finding.UNINITIALIZED} <= kinds(s)  # every finding is reported, not only the worst
    # on one core the hazard follows program order: the mmads write, then the store reads (semantics §8)
    assert rows_of(s, Finding.RACE)[0, 5] == RAW


def test_seed_000_error_3_final_matmul_partial_store_hangs_in_the_second_iteration():
    b = RecordBuilder()
    c = Cube(b)
    with b.loop(2):
        c.mmad(UF_UPDATE)
        c.fixpipe(UF_KEEP)
    s = run_control(b.build())
    assert worst(s) is Finding.DEADLOCK
    assert rows_of(s, Finding.DEADLOCK)[0, ENTRY] == 0  # the mmad


def test_size_mismatch_hangs_on_the_blocks_never_drained_and_a_fenced_reset_fixes_it():
    b = RecordBuilder()
    c = Cube(b)
    c.mmad(UF_UPDATE)
    c.fixpipe(UF_UPDATE, 0, TILE_BYTES // 4)
    c.mmad(UF_UPDATE)
    assert worst(run_control(b.build())) is Finding.DEADLOCK
    assert worst(run_control(_reset(barrier=True))) is None


def test_single_matmul_without_phase_is_ordered_by_the_inserted_software_sync():
    b = RecordBuilder()
    c = Cube(b)
    c.mmad()
    b.set_flag("M", "FIX", 0)
    b.wait_flag("M", "FIX", 0)
    c.fixpipe()
    assert worst(run_control(b.build())) is None
    bad = RecordBuilder()
    c = Cube(bad)
    c.mmad()
    c.fixpipe()
    s = run_control(bad.build())
    assert worst(s) is Finding.RACE


# --- more findings --------------------------------------------------------------------------


def test_a_read_of_bytes_nothing_wrote_is_uninitialised_and_the_written_part_is_not():
    b = RecordBuilder()
    ub = b.space("UB0", 4096)
    with b.on(AIV0):
        b.instruction("vdup", "V", writes=[(ub, (0, 256))])
        b.instruction("vadd", "V", reads=[(ub, (0, 512))])
        b.instruction("vadd", "V", reads=[(ub, (0, 256))])
    s = run_control(b.build())
    (row,) = rows_of(s, Finding.UNINITIALIZED)
    assert row[ENTRY] == 1


ROW_BYTES, ROWS = 64, 8  # a UB tile written and read row by row, so that it is cut into eight atoms


@pytest.mark.parametrize("missing", [None, 5])
def test_a_wide_read_of_rows_written_one_by_one_finds_the_row_nothing_wrote(missing):
    """Eight narrow row writes, then one read of all eight atoms: the check looks at every atom of the wide read."""
    b = RecordBuilder()
    ub = b.space("UB0", 4096)
    with b.on(AIV0):
        for r in range(ROWS):
            if r != missing:
                b.instruction("vdup", "V", writes=[(ub, (r * ROW_BYTES, (r + 1) * ROW_BYTES))])
        b.instruction("vadd", "V", reads=[(ub, (0, ROWS * ROW_BYTES))])
    record = b.build()
    st = static(record.template, ControlOptions(), False)
    assert st.uninit_span >= ROWS > NARROW_SPAN  # the read is a wide one
    found = rows_of(run_control(record), Finding.UNINITIALIZED)
    if missing is None:
        assert found.size == 0
    else:
        (row,) = found
        assert tuple(record.template.atom_bytes[row[4]]) == (missing * ROW_BYTES, (missing + 1) * ROW_BYTES)


@pytest.mark.parametrize("rows_written", [ROWS, ROWS - 1])
def test_a_wide_write_lands_on_every_row_the_narrow_reads_then_read(rows_written):
    """One write of several atoms, then each row read on its own: only a row past the write is uninitialised."""
    b = RecordBuilder()
    ub = b.space("UB0", 4096)
    with b.on(AIV0):
        b.instruction("vdup", "V", writes=[(ub, (0, rows_written * ROW_BYTES))])
        for r in range(ROWS):
            b.instruction("vadd", "V", reads=[(ub, (r * ROW_BYTES, (r + 1) * ROW_BYTES))])
    record = b.build()
    assert static(record.template, ControlOptions(), False).uninit_write_span >= ROWS - 1 > NARROW_SPAN
    found = rows_of(run_control(record), Finding.UNINITIALIZED)
    assert [int(row[ENTRY]) for row in found] == ([] if rows_written == ROWS else [1 + ROWS - 1])


def test_a_double_set_flag_is_reported_and_so_is_the_leftover_bit():
    b = RecordBuilder()
    b.set_flag("MTE2", "MTE1", 1)
    b.set_flag("MTE2", "MTE1", 1)
    s = run_control(b.build())
    assert kinds(s) == {Finding.DOUBLE_SET, Finding.LEFTOVER}
    assert worst(s) is Finding.LEFTOVER


def test_the_small_tile_rule_needs_a_pipe_m_barrier_between_accumulating_mmads():
    def prog(barrier):
        b = RecordBuilder()
        c = Cube(b)
        c.mmad(small=True)
        if barrier:
            b.barrier("M")
        c.mmad(small=True, accumulate=True)
        return b.build()

    s = run_control(prog(False))
    assert worst(s) is Finding.RACE and rows_of(s, Finding.RACE)[0, 5] == SMALL_TILE
    assert worst(run_control(prog(True))) is None


def test_a_missing_release_reads_war_across_cores():
    b = RecordBuilder()
    gm = b.space("GM:x", 4096)
    with b.on(AIV0):
        b.instruction("copy_ub2gm", "MTE3", writes=[(gm, (0, 512))])
        b.cross_set("MTE3", 0, SyncMode.INTRA_BLOCK)
        b.instruction("copy_ub2gm", "MTE3", writes=[(gm, (0, 512))], cycles=500)
    b.cross_wait("MTE2", 0, SyncMode.UNICAST_BLOCK, subblock=0)
    b.instruction("copy_gm2l1", "MTE2", reads=[(gm, (0, 512))], cycles=1)
    s = run_control(b.build())
    assert worst(s) is Finding.RACE
    assert rows_of(s, Finding.RACE)[0, 5] == WAR
    assert Finding.SYNC_ERROR in kinds(s)  # UNICAST wait on an INTRA_BLOCK set


@pytest.mark.parametrize("initialised", [False, True])
def test_a_missing_ready_reads_raw_across_cores_though_the_read_runs_first(initialised):
    """semantics §8: the read of bytes nothing wrote yet was meant to follow the write (RAW), and so was the write
    after it on its core (WAW, the write first); over bytes an input holds, the order they ran in decides (WAR)."""
    b = RecordBuilder()
    ub = b.space("UB0", 4096, initialised=initialised)
    b.instruction("move_to_vec", "FIX", writes=[(ub, (0, 512))], cycles=500)  # AIC, no READY set
    with b.on(AIV0):
        b.instruction("vmax", "V", reads=[(ub, (0, 512))], cycles=1)  # runs at once
        b.instruction("vexp", "V", writes=[(ub, (0, 512))], cycles=1)
    s = run_control(b.build())
    assert worst(s) is Finding.RACE
    race = rows_of(s, Finding.RACE)
    if initialised:  # one site: the move, the later of both pairs
        assert race.shape[0] == 1 and race[0, 5] == WAR
    else:  # reported by the vector side, in its program order
        assert [int(h) for h in race[:, 5]] == [RAW, WAW]


def test_an_event_id_out_of_range_is_refused_at_trace_time_and_found_when_traced():
    b = RecordBuilder()
    with pytest.raises(ValueError, match=r"event_id must lie in \[0, 16\), got 16"):
        b.cross_set("FIX", 16)
    with pytest.raises(TypeError, match="must be an integer"):
        b.cross_set("FIX", 1.5)
    b.cross_set("FIX", jnp.asarray(17))
    assert Finding.SYNC_ERROR in kinds(run_control(b.build()))


# --- record as data: vmap, trip counts, compile size ----------------------------------------


def test_a_sweep_over_phases_and_trip_counts_gives_each_scenario_its_verdict():
    modes = jnp.asarray([[UF_KEEP] * 7 + [UF_UPDATE], [UF_KEEP] * 8, [UF_UPDATE] * 8, [UF_KEEP] * 3 + [UF_UPDATE] * 5])
    trip = jnp.asarray([8, 8, 1, 4])
    # build one record per scenario's operands, then stack them: the template is shared
    records = []
    for i in range(4):
        bi = RecordBuilder()
        ci = Cube(bi)
        with bi.loop(8, trip[i]) as k:
            ci.mmad(modes[i][k], accumulate=k > 0)
        ci.fixpipe(UF_UPDATE)
        records.append(bi.build())
    stacked = jax.tree.map(lambda *xs: jnp.stack(xs), *[r.operands for r in records])
    batch = type(records[0])(records[0].template, stacked)
    out = jax.jit(sweep_control)(batch)
    got = [worst(jax.tree.map(lambda x, i=i: x[i], out)) for i in range(4)]
    assert got == [None, Finding.DEADLOCK, None, None]
    assert got == [worst(run_control(r)) for r in records]  # vmap agrees with one run at a time


def test_a_record_built_inside_vmap_sweeps_its_traced_operands():
    def verdict_of(modes, trip):
        b = RecordBuilder()
        c = Cube(b)
        with b.loop(8, trip) as k:
            c.mmad(modes[k], accumulate=k > 0)
        c.fixpipe(UF_UPDATE)
        return verdict(run_control(b.build()))

    modes = jnp.asarray([[UF_KEEP] * 7 + [UF_UPDATE], [UF_KEEP] * 8, [UF_UPDATE] * 8])
    trip = jnp.asarray([8, 8, 1])
    swept = jax.jit(jax.vmap(verdict_of))(modes, trip)
    assert [int(v) for v in swept] == [-1, int(Finding.DEADLOCK), -1]
    assert [int(v) for v in swept] == [int(verdict_of(m, t)) for m, t in zip(modes, trip)]


def test_the_control_plane_program_does_not_grow_with_the_kernel():
    def size(trips):
        rec = _k_loop(UF_KEEP, trip_max=trips, store_mode=UF_OFF)
        return len(jax.make_jaxpr(lambda op: run_control(type(rec)(rec.template, op)))(rec.operands).eqns)

    assert size(4) == size(64)


def test_a_record_past_the_size_classes_finds_the_same_on_the_host_compiled_quick_or_optimised(monkeypatch):
    """Its own program runs on the host while that costs less than compiling it (a short record), then compiled for a
    quick first run (LLVM unoptimised; a long record's as two programs, its loop optimised) or, for a launch's blocks,
    optimised: the control plane computes integers, so all four find the same (here: a race, its uninitialised read, a
    leftover set, every timeline entry)."""
    from ascjax.core import HostFirst, KeptPrograms
    from ascjax.engine import _control

    b = RecordBuilder()
    ub, gm = b.space("UB0", 8192), b.space("GM:x", 8192, initialised=True)
    pairs = (("MTE2", "V"), ("V", "MTE3"), ("MTE3", "MTE2"))
    with b.on(AIV0):
        for event_id in range(8):  # 24 flags: past every size class's 16
            for src, dst in pairs:
                b.set_flag(src, dst, event_id)
        for event_id in range(8):
            for src, dst in pairs:
                b.wait_flag(src, dst, event_id)
        b.instruction("copy_gm2ub", "MTE2", reads=[(gm, (0, 512))], writes=[(ub, (0, 512))])
        b.instruction("vadd", "V", reads=[(ub, (0, 512))])  # no flag after the copy: a race
        b.set_flag("V", "MTE2", 0)  # never waited for: left set
    rec = b.build()
    assert not static(rec.template, ControlOptions(), True).shared
    on_host, host_call = [], _control.host_call
    monkeypatch.setattr(_control, "host_call", lambda *a: on_host.append(1) or host_call(*a))
    monkeypatch.setattr(_control, "_run_own", HostFirst(_control._run_quick, _control.CONTROL_COMPILE_S))
    host = run_control(rec)
    assert on_host == [1] and _control._run_own.compiled_programs() == 0  # 51 instances: less than a compile
    monkeypatch.setattr(_control, "_run_own", HostFirst(_control._run_quick, 0.0))  # a compile that costs nothing
    quick, optimised = run_control(rec), run_control(rec, quick=False)
    loop, checks = (KeptPrograms(f, {}) for f in (_control._loop, _control._checked))
    monkeypatch.setattr(_control, "_loop_kept", loop)
    monkeypatch.setattr(_control, "_checked_kept", checks)
    monkeypatch.setattr(_control, "LOOP_OPTIMISED_INSTANCES", 0)  # run as a long record is
    split = run_control(rec)
    assert on_host == [1] and _control._run_own.compiled_programs() == 1 and len(loop) == len(checks) == 1
    assert kinds(host) == {Finding.RACE, Finding.UNINITIALIZED, Finding.LEFTOVER}
    for x, *others in zip(*(jax.tree.leaves(r) for r in (host, quick, optimised, split)), strict=True):
        for y in others:
            np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_jit_and_eager_agree():
    rec = _k_loop([UF_KEEP] * 7 + [UF_UPDATE])
    eager = run_control(rec)
    jitted = jax.jit(lambda op: run_control(type(rec)(rec.template, op)))(rec.operands)
    # the machine's arrays are padded to the program's sizes (eager: a size class shared with other records)
    strip = lambda r: dataclasses.replace(r, machine=None)
    for a, b in zip(jax.tree.leaves(strip(eager)), jax.tree.leaves(strip(jitted)), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_seed_000_k_loop_carries_less_than_8_kb_per_scenario():
    b = RecordBuilder()
    gm_a = b.space("GM:a", 128 * 1024 * 2, initialised=True)
    gm_b = b.space("GM:b", 1024 * 128 * 2, initialised=True)
    gm_c = b.space("GM:c", TILE_BYTES)
    l1a, l1b = b.space("L1:a", 32768), b.space("L1:b", 32768)
    l0a, l0b, l0c = b.space("L0A", 65536), b.space("L0B", 65536), b.space("L0C", 131072)
    with b.loop(8) as k:
        b.instruction("copy_gm2l1", "MTE2", reads=[(gm_a, (0, 32768))], writes=[(l1a, (0, 32768))])
        b.instruction("copy_gm2l1", "MTE2", reads=[(gm_b, (0, 32768))], writes=[(l1b, (0, 32768))])
        b.set_flag("MTE2", "MTE1", 0)
        b.wait_flag("MTE2", "MTE1", 0)
        b.instruction("copy_l12l0a", "MTE1", reads=[(l1a, (0, 32768))], writes=[(l0a, (0, 32768))])
        b.instruction("copy_l12l0b", "MTE1", reads=[(l1b, (0, 32768))], writes=[(l0b, (0, 32768))])
        b.set_flag("MTE1", "MTE2", 0)  # RELEASE of L1 back to MTE2
        b.set_flag("MTE1", "M", 0)
        b.wait_flag("MTE1", "M", 0)
        mode = jnp.where(k == 7, UF_UPDATE, UF_KEEP)
        b.instruction(
            "mmad", "M", reads=[(l0a, (0, 32768)), (l0b, (0, 32768))], writes=[(l0c, (0, TILE_BYTES))],
            uf_role=UnitFlagRole.WRITER, uf_mode=mode, uf_blocks=[(0, TILE_BLOCKS)],
        )  # fmt: skip
        b.set_flag("M", "MTE1", 0)
        b.wait_flag("M", "MTE1", 0)
        b.wait_flag("MTE1", "MTE2", 0)
    b.instruction(
        "fixpipe", "FIX", reads=[(l0c, (0, TILE_BYTES))], writes=[(gm_c, (0, TILE_BYTES))],
        uf_role=UnitFlagRole.READER, uf_mode=UF_UPDATE, uf_blocks=[(0, TILE_BLOCKS)],
    )  # fmt: skip
    s = run_control(b.build())
    assert worst(s) is None, np.asarray(s.findings)[: int(s.n_findings)]
    assert state_bytes(s) <= 8192


# --- the log and the record's resources -----------------------------------------------------


def test_findings_come_most_severe_first_once_per_site_and_the_rest_are_counted():
    def prog():
        b = RecordBuilder()
        ub = b.space("UB0", 4096)
        with b.on(AIV0):
            b.instruction("vadd", "V", reads=[(ub, (0, 512))])  # uninitialised
            b.set_flag("MTE2", "V", 1)  # left set
            b.instruction("copy_gm2ub", "MTE2", writes=[(ub, (0, 512))])  # unordered with the read: WAR
        return b.build()

    s = run_control(prog())
    got = [Finding(int(k)) for k in np.asarray(s.findings)[: int(s.n_findings), KIND]]
    assert got == sorted(got) and got[0] is Finding.RACE and Finding.UNINITIALIZED in got, got
    assert int(s.dropped) == 0
    one = run_control(prog(), ControlOptions(max_findings=1))
    assert int(one.n_findings) == 1 and int(one.dropped) == len(got) - 1
    assert int(verdict(one)) == int(verdict(s)) == int(Finding.RACE)


def test_a_k_loop_mistake_is_one_finding_at_its_first_iteration():
    b = RecordBuilder()
    c = Cube(b)
    with b.loop(8):
        c.mmad(UF_UPDATE)  # no fixpipe drains the flag: the second mmad waits forever
    s = run_control(b.build())
    (row,) = rows_of(s, Finding.DEADLOCK)
    assert int(s.n_findings) == 1 and row[ENTRY] == 0


def test_static_event_ids_use_one_bit_or_counter_each_and_findings_name_the_real_id():
    b = RecordBuilder()
    b.set_flag("MTE2", "MTE1", 3)
    b.wait_flag("MTE2", "MTE1", 3)
    b.set_flag("M", "FIX", 6)
    b.cross_set("FIX", 11, SyncMode.UNICAST_BLOCK)
    rec = b.build()
    assert len(rec.template.flag_bits) == 2 and rec.template.cross_ids == (11,)
    s = run_control(rec)
    left = rows_of(s, Finding.LEFTOVER)
    assert sorted(left[:, 4].tolist()) == [0, 1]  # a flag bit and a cross-core counter
    assert left[left[:, 4] == 1][0, 5] == 11  # the counter is named by its event id

    traced = RecordBuilder()
    traced.set_flag("MTE2", "MTE1", jnp.asarray(3))
    traced.set_flag("MTE2", "MTE1", 5)
    assert len(traced.build().template.flag_bits) == 8  # a traced id may name any bit of its pair


def test_a_static_slot_choice_outside_its_candidates_is_refused_at_trace_time():
    b = RecordBuilder()
    ub = b.space("UB0", 4096)
    with b.on(AIV0), pytest.raises(ValueError, match="chooses candidate 2 of 2 byte ranges"):
        b.instruction("vadd", "V", reads=[(ub, [(0, 256), (256, 512)], 2)])


def test_the_tables_lists_are_those_of_the_quadratic_definitions():
    """On random footprints, the race check's instances and each pair's places among them are ``np.unique``'s, and the
    uninitialised-write list is the writes that overlap a listed read (the writes x reads matrix the tables no longer
    build)."""
    import types

    from ascjax.engine import _tables

    rng = np.random.default_rng(7)
    inst = rng.integers(0, 300, (5000, 2))
    members, places = _tables._members_of(inst, 300)
    want_members, want_places = np.unique(inst.reshape(-1), return_inverse=True)
    np.testing.assert_array_equal(members, want_members)
    np.testing.assert_array_equal(places.reshape(-1), want_places.reshape(-1))
    n_atoms = 200
    lo = rng.integers(0, n_atoms, 400)
    hi = np.minimum(lo + rng.integers(1, 12, 400), n_atoms)
    acc = {"lo": lo, "hi": hi, "write": rng.random(400) < 0.8}
    t = types.SimpleNamespace(atom_init=rng.random(n_atoms) < 0.97, n_atoms=n_atoms)
    reads, writes = _tables._uninit(t, acc)
    w = np.flatnonzero(acc["write"])
    near = (lo[w][:, None] < hi[reads][None, :]) & (lo[reads][None, :] < hi[w][:, None])
    assert 0 < len(writes) < len(w) and len(reads) > 0
    np.testing.assert_array_equal(writes, w[np.any(near, axis=1)])
