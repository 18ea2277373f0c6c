"""The sanitizer's table: small programs, each a good one or a broken twin, with the verdict and op it must give.

Every program runs the same way: inputs `a` (32 x 32 f16) and `b` (32 x 32 f16), output `c`
(32 x 32 f32) and a GM workspace `ws` (32 x 32 f32).
"""

import inspect

import numpy as np
import pytest

import ascjax as aj
from ascjax.core import Finding
from ascjax.front._sites import short_path

N = 32
INPUTS = {
    "a": np.random.default_rng(0).uniform(-1, 1, (N, N)).astype(np.float16),
    "b": np.random.default_rng(1).uniform(-1, 1, (N, N)).astype(np.float16),
}
OUTPUTS = {"c": ((N, N), "float32"), "ws": ((N, N), "float32")}


class T:
    """The tiles of one program, allocated in one place."""

    def __init__(self, k, size=N):
        self.a_l1 = k.alloc("L1", (size, size), "float16", name="a_l1")
        self.b_l1 = k.alloc("L1", (size, size), "float16", name="b_l1")
        self.ws_l1 = k.alloc("L1", (size, size), "float32", name="ws_l1")
        self.al = k.alloc("L0A", (size, size), "float16", name="al")
        self.br = k.alloc("L0B", (size, size), "float16", name="br")
        self.ac = k.alloc("L0C", (size, size), "float32", name="ac")


def sync(k, src, dst, ev=0):
    k.sync_notify(src, dst, ev)
    k.sync_wait(src, dst, ev)


def load(k, t, *, wait=True, notify=True, b=True):
    k.copy_gm2l1_nd2nz(t.a_l1, "a")
    if b:
        k.copy_gm2l1_nd2nz(t.b_l1, "b")
    if notify:
        k.sync_notify("MTE2", "MTE1", 0)
    if wait:
        k.sync_wait("MTE2", "MTE1", 0)


def to_l0(k, t, *, sync_m=True):
    k.copy_l12l0a(t.al, t.a_l1)
    k.copy_l12l0b(t.br, t.b_l1, transpose=True)
    if sync_m:
        sync(k, "MTE1", "M")


def matmul(k, t, mode=0, init=True):
    k.mmad(t.ac, t.al, t.br, N, N, N, unit_flag_mode=mode, c_matrix_init_val=init)


def drain(k, t, mode=0, *, sync_fix=True, dst="c"):
    if sync_fix:
        sync(k, "M", "FIX")
    k.fixpipe(dst, t.ac, unit_flag_mode=mode)


def pipeline(k, **kw):
    t = T(k)
    load(k, t)
    to_l0(k, t)
    matmul(k, t)
    drain(k, t)
    return t


# --- the programs -------------------------------------------------------------------------
def good_pipeline(k):
    pipeline(k)


def missing_mte2_mte1_wait(k):
    t = T(k)
    load(k, t, wait=False)
    to_l0(k, t)
    matmul(k, t)
    drain(k, t)
    k.sync_wait("MTE2", "MTE1", 0)  # consumed late: the copy above was not ordered


def missing_mte2_mte1_notify(k):
    t = T(k)
    load(k, t, notify=False)
    to_l0(k, t)


def wrong_pipe_pair(k):
    t = T(k)
    k.copy_gm2l1_nd2nz(t.a_l1, "a")
    k.copy_gm2l1_nd2nz(t.b_l1, "b")
    k.sync_notify("MTE2", "M", 0)  # should be MTE2 -> MTE1
    k.sync_wait("MTE2", "MTE1", 0)


def wrong_event_id(k):
    t = T(k)
    k.copy_gm2l1_nd2nz(t.a_l1, "a")
    k.sync_notify("MTE2", "MTE1", 1)
    k.sync_wait("MTE2", "MTE1", 0)


def missing_mte1_m_sync(k):
    t = T(k)
    load(k, t)
    to_l0(k, t, sync_m=False)
    matmul(k, t)
    drain(k, t)


def missing_m_fix_sync(k):
    t = T(k)
    load(k, t)
    to_l0(k, t)
    matmul(k, t)
    drain(k, t, sync_fix=False)


def sync_on_the_wrong_producer(k):
    t = T(k)
    load(k, t)
    to_l0(k, t)
    matmul(k, t)
    sync(k, "MTE1", "FIX")  # orders FIX after MTE1, not after the mmad
    drain(k, t, sync_fix=False)


def notify_twice(k):
    t = T(k)
    k.copy_gm2l1_nd2nz(t.a_l1, "a")
    k.sync_notify("MTE2", "MTE1", 0)
    k.sync_notify("MTE2", "MTE1", 0)
    k.sync_wait("MTE2", "MTE1", 0)


def leftover_notify(k):
    pipeline(k)
    k.sync_notify("FIX", "M", 2)


def uninitialised_operand(k):
    t = T(k)
    load(k, t, b=False)  # B never loaded
    to_l0(k, t)


def uninitialised_accumulator(k):
    t = T(k)
    load(k, t)
    to_l0(k, t)
    matmul(k, t, init=False)  # accumulates onto L0C nothing wrote


def _two_rounds(k, *, l1_reverse=True, l0_reverse=True, l0c_reverse=True):
    t = T(k)
    if l1_reverse:
        k.sync_notify("MTE1", "MTE2", 0)
    if l0_reverse:
        k.sync_notify("M", "MTE1", 0)
    if l0c_reverse:
        k.sync_notify("FIX", "M", 0)

    def step(i):
        if l1_reverse:
            k.sync_wait("MTE1", "MTE2", 0)
        load(k, t)
        if l0_reverse:
            k.sync_wait("M", "MTE1", 0)
        k.copy_l12l0a(t.al, t.a_l1)
        k.copy_l12l0b(t.br, t.b_l1, transpose=True)
        if l1_reverse:
            k.sync_notify("MTE1", "MTE2", 0)
        sync(k, "MTE1", "M")
        if l0c_reverse:
            k.sync_wait("FIX", "M", 0)
        matmul(k, t)
        if l0_reverse:
            k.sync_notify("M", "MTE1", 0)
        drain(k, t)
        if l0c_reverse:
            k.sync_notify("FIX", "M", 0)

    k.range(2, step)
    if l1_reverse:
        k.sync_wait("MTE1", "MTE2", 0)
    if l0_reverse:
        k.sync_wait("M", "MTE1", 0)
    if l0c_reverse:
        k.sync_wait("FIX", "M", 0)


def reuse_with_reverse_sync(k):
    _two_rounds(k)


def reuse_l1_without_reverse_sync(k):
    _two_rounds(k, l1_reverse=False)


def reuse_l0_without_reverse_sync(k):
    _two_rounds(k, l0_reverse=False)


def reuse_l0c_without_reverse_sync(k):
    _two_rounds(k, l0c_reverse=False)


def _accumulate(k, barrier):
    t = T(k)
    load(k, t)
    to_l0(k, t)
    matmul(k, t)
    if barrier:
        k.sync_pipe("M")
    matmul(k, t, init=False)
    drain(k, t)


def small_tile_without_barrier(k):
    _accumulate(k, barrier=False)  # (32/16) * (32/16) = 4 < 10


def small_tile_with_barrier(k):
    _accumulate(k, barrier=True)


def large_tile_without_barrier(k):
    t = T(k, size=64)  # (64/16) * (64/16) = 16: the cube orders them itself
    k.copy_gm2l1_nd2nz(t.a_l1, "a64")
    k.copy_gm2l1_nd2nz(t.b_l1, "a64")
    sync(k, "MTE2", "MTE1")
    to_l0(k, t)
    for init in (True, False):
        k.mmad(t.ac, t.al, t.br, 64, 64, 64, c_matrix_init_val=init)
    sync(k, "M", "FIX")
    k.fixpipe("c64", t.ac)


def unit_flag_pipeline(k):
    t = T(k)
    load(k, t)
    to_l0(k, t)
    matmul(k, t, mode=3)
    drain(k, t, mode=3, sync_fix=False)


def phase_on_mmad_only(k):
    t = T(k)
    load(k, t)
    to_l0(k, t)
    matmul(k, t, mode=3)
    drain(k, t, mode=0, sync_fix=False)


def phase_on_fixpipe_only(k):
    t = T(k)
    load(k, t)
    to_l0(k, t)
    matmul(k, t, mode=0)
    drain(k, t, mode=3, sync_fix=False)


def partial_mmad_final_store(k):
    t = T(k)
    load(k, t)
    to_l0(k, t)
    matmul(k, t, mode=2)
    drain(k, t, mode=3, sync_fix=False)


def final_mmad_partial_store_in_loop(k):
    t = T(k)
    load(k, t)
    to_l0(k, t)

    def step(i):
        matmul(k, t, mode=3)
        drain(k, t, mode=2, sync_fix=False)

    k.range(2, step)


def barrier_all_instead_of_flags(k):
    t = T(k)
    load(k, t, notify=False, wait=False)
    k.sync_pipe("ALL")
    to_l0(k, t, sync_m=False)
    k.sync_pipe("ALL")
    matmul(k, t)
    k.sync_pipe("ALL")
    drain(k, t, sync_fix=False)


def barrier_all_behind_a_blocked_pipe(k):
    t = T(k)
    load(k, t, notify=False)
    k.sync_pipe("ALL")


def workspace_round_trip(k, sync_back=True):
    t = pipeline(k)
    drain(k, t, sync_fix=False, dst="ws")
    if sync_back:
        sync(k, "FIX", "MTE2")
    k.copy_gm2l1_nd2nz(t.ws_l1, "ws")


def workspace_read_back_without_sync(k):
    workspace_round_trip(k, sync_back=False)


def read_output_before_writing_it(k):
    t = T(k)
    k.copy_gm2l1_nd2nz(t.ws_l1, "ws")


def size_mismatch(k, reset=False, barrier=True):
    t = T(k)
    load(k, t)
    to_l0(k, t)
    matmul(k, t, mode=3)
    k.fixpipe("c", t.ac, m=16, n=16, unit_flag_mode=3)
    if reset:
        if barrier:  # the reset runs on S: only a fence orders it after the queued M and FIX work
            k.sync_pipe("ALL")
        k.set_l0c_copy_config(is_clean_unit_flag=True)
    matmul(k, t, mode=3)
    k.fixpipe("c", t.ac, unit_flag_mode=3)


def size_mismatch_with_reset(k):
    size_mismatch(k, reset=True)


def size_mismatch_with_reset_and_no_barrier(k):
    size_mismatch(k, reset=True, barrier=False)  # the reset may run before the first mmad (semantics §8)


def two_tile_pattern_with_three_tiles(k):
    t = T(k)
    load(k, t)
    to_l0(k, t)

    def step(i):
        k.cond(
            i == 0,
            lambda: k.matmul(t.ac, t.al, t.br, phase=aj.AccPhase.Partial),
            lambda: k.matmul_acc(t.ac, t.ac, t.al, t.br, phase=aj.AccPhase.Final),
        )
        k.sync_pipe("M")

    k.range(3, step)
    k.store("c", t.ac, phase=aj.STPhase.Final)  # drains after tile 2; tile 3 leaves the flag at 1


def k_split_recipe_with_three_tiles(k):
    """Seed 000's general recipe: Partial for every tile but the last."""
    t = T(k)
    load(k, t)
    to_l0(k, t)
    k.matmul(t.ac, t.al, t.br, phase=aj.AccPhase.Partial)
    for phase in (aj.AccPhase.Partial, aj.AccPhase.Final):
        k.sync_pipe("M")
        k.matmul_acc(t.ac, t.ac, t.al, t.br, phase=phase)
    k.store("c", t.ac, phase=aj.STPhase.Final)


def pypto_no_phases(k):
    t = T(k)
    load(k, t)
    to_l0(k, t)
    k.matmul(t.ac, t.al, t.br)
    k.store("c", t.ac)


def pypto_phase_on_matmul_only(k):
    t = T(k)
    load(k, t)
    to_l0(k, t)
    k.matmul(t.ac, t.al, t.br, phase=aj.AccPhase.Final)
    k.store("c", t.ac)


TABLE = [
    (good_pipeline, "ok", None),
    (missing_mte2_mte1_wait, "race", "copy_l12l0a"),
    (missing_mte2_mte1_notify, "deadlock", "sync_wait"),
    (wrong_pipe_pair, "deadlock", "sync_wait"),
    (wrong_event_id, "deadlock", "sync_wait"),
    (missing_mte1_m_sync, "race", "mmad"),
    (missing_m_fix_sync, "race", "fixpipe"),
    (sync_on_the_wrong_producer, "race", "fixpipe"),
    (notify_twice, "sync_error", "sync_notify"),
    (leftover_notify, "leftover", "sync_notify"),
    (uninitialised_operand, "uninitialized", "copy_l12l0b"),
    (uninitialised_accumulator, "uninitialized", "mmad"),
    (reuse_with_reverse_sync, "ok", None),
    (reuse_l1_without_reverse_sync, "race", "copy_gm2l1_nd2nz"),
    (reuse_l0_without_reverse_sync, "race", "copy_l12l0a"),
    (reuse_l0c_without_reverse_sync, "race", "mmad"),
    (small_tile_without_barrier, "race", "mmad"),
    (small_tile_with_barrier, "ok", None),
    (large_tile_without_barrier, "ok", None),
    (unit_flag_pipeline, "ok", None),
    (phase_on_mmad_only, "race", "fixpipe"),
    (phase_on_fixpipe_only, "deadlock", "fixpipe"),
    (partial_mmad_final_store, "deadlock", "fixpipe"),
    (final_mmad_partial_store_in_loop, "deadlock", "mmad"),
    (barrier_all_instead_of_flags, "ok", None),
    (barrier_all_behind_a_blocked_pipe, "deadlock", "sync_pipe"),
    (workspace_round_trip, "ok", None),
    (workspace_read_back_without_sync, "race", "copy_gm2l1_nd2nz"),
    (read_output_before_writing_it, "uninitialized", "copy_gm2l1_nd2nz"),
    (size_mismatch, "deadlock", "mmad"),
    (size_mismatch_with_reset, "ok", None),
    (size_mismatch_with_reset_and_no_barrier, "deadlock", "mmad"),
    (two_tile_pattern_with_three_tiles, "leftover", "matmul_acc"),
    (k_split_recipe_with_three_tiles, "ok", None),
    (pypto_no_phases, "ok", None),
    (pypto_phase_on_matmul_only, "race", "store"),
]


def _run(program, **kw):
    inputs = dict(INPUTS, a64=np.random.default_rng(2).uniform(-1, 1, (64, 64)).astype(np.float16))
    outputs = dict(OUTPUTS, c64=((64, 64), "float32"))
    return aj.run(program, inputs, outputs, **kw)


def first_op(result):
    """The kernel's name of the most severe finding's instruction (its site reads ``name at file:line (core.pipe)``)."""
    found = result.findings()
    return found[0].site.partition(" at ")[0] if found else None


def line(fn, text):
    """``path:N`` as findings name it: the line of ``fn`` holding ``text``."""
    src, first = inspect.getsourcelines(fn)
    return f"{short_path(__file__)}:{first + next(i for i, s in enumerate(src) if text in s)}"


def via(fn, text):
    """`` via :N`` as findings name a helper's call: the line of ``fn`` holding ``text``."""
    return " via :" + line(fn, text).rpartition(":")[2]


MMAD, FIXPIPE = line(matmul, "k.mmad("), line(drain, "k.fixpipe(")


@pytest.mark.parametrize(("program", "verdict", "op"), TABLE, ids=[p.__name__ for p, _, _ in TABLE])
def test_table(program, verdict, op):
    result = _run(program)
    rep = result.report()
    assert rep.verdict is aj.Verdict.parse(verdict), str(rep)
    assert first_op(result) == op, str(rep)


def test_report_op_is_the_kernels_spelling():
    got = [_run(p).report().op for p in (missing_mte2_mte1_notify, notify_twice, barrier_all_behind_a_blocked_pipe)]
    assert got == ["sync_wait", "sync_notify", "sync_pipe"]


def test_table_is_large_and_balanced():
    verdicts = [v for _, v, _ in TABLE]
    assert len(TABLE) >= 30 and verdicts.count("ok") >= 8
    assert {"race", "deadlock", "uninitialized", "leftover", "sync_error"} <= set(verdicts)


def test_race_report_names_both_accesses_the_bytes_and_the_fix():
    race = _run(missing_m_fix_sync).findings()[0]
    assert race.kind is Finding.RACE and "RACE (RAW) on L0C bytes [0, 4096)" in race.message
    # each op is in a helper (``matmul``, ``drain``): the report names the helper's line and the call's
    mmad, fixpipe = MMAD + via(missing_m_fix_sync, "matmul(k, t)"), FIXPIPE + via(missing_m_fix_sync, "drain(k, t")
    assert race.other == f"mmad at {mmad} (AIC.M)" and race.site == f"fixpipe at {fixpipe} (AIC.FIX)"
    assert f"first:  mmad at {mmad} (AIC.M)" in race.message and f"second: fixpipe at {fixpipe}" in race.message
    assert "or DISABLE on both with sync_notify / sync_wait(M, FIX)" in race.message
    race = _run(reuse_l0c_without_reverse_sync).findings()[0]
    assert "RACE (WAR) on L0C bytes [0, 4096)" in race.message
    assert race.other == f"fixpipe at {FIXPIPE}{via(_two_rounds, 'drain(k, t)')} (AIC.FIX) in loop iteration (0)"
    assert race.site == f"mmad at {MMAD}{via(_two_rounds, 'matmul(k, t)')} (AIC.M) in loop iteration (1)"
    race = _run(small_tile_without_barrier).findings()[0]
    assert "RACE (RAW (small-tile rule)) on L0C bytes [0, 4096)" in race.message
    assert "Fix: put sync_pipe('M') (PipeBarrier<PIPE_M>) between the accumulating mmads" in race.message
    race = _run(workspace_read_back_without_sync).findings()[0]
    drained = f"fixpipe at {FIXPIPE}{via(workspace_round_trip, 'drain(k, t')} (AIC.FIX)"
    assert "RACE (RAW) on GM:ws bytes [0, " in race.message and race.other == drained
    assert (
        "Fix: sync_notify(FIX, MTE2, id) after the fixpipe and sync_wait(FIX, MTE2, id) before the copy" in race.message
    )


def test_race_words_name_the_tile():
    assert "RACE (RAW) on L0C bytes [0, 4096) of tile `ac`" in _run(missing_m_fix_sync).findings()[0].message
    assert "of tile" not in _run(workspace_read_back_without_sync).findings()[0].message  # GM:ws names its tensor


def test_gm_race_names_every_byte_it_covers():
    """The fixpipe writes and the copy reads all 32 rows of `ws`: the race names all of them, not the first row."""
    assert "RACE (RAW) on GM:ws bytes [0, 4096)" in _run(workspace_read_back_without_sync).findings()[0].message


def test_poison_races_turns_the_racy_result_into_nan():
    clean = np.asarray(_run(missing_m_fix_sync).outputs["c"])
    poisoned = np.asarray(_run(missing_m_fix_sync, poison_races=True).outputs["c"])
    assert not np.isnan(clean).any() and np.isnan(poisoned).all()
    good = np.asarray(_run(good_pipeline, poison_races=True).outputs["c"])
    assert not np.isnan(good).any()


def test_checks_off_keeps_hardware_semantics_only():
    assert _run(missing_m_fix_sync, sanitize=False).ok  # no race detection
    assert aj.Verdict(int(_run(partial_mmad_final_store, sanitize=False).verdict)) is aj.Verdict.DEADLOCK


def test_checks_off_drop_races_and_uninitialised_reads_only():
    """Off, a phase on the matmul only loses its race and uninitialised read, keeps its leftover unit flag, and
    computes the same."""
    on, off = _run(pypto_phase_on_matmul_only), _run(pypto_phase_on_matmul_only, sanitize=False)
    assert [f.kind for f in on.findings()] == [Finding.RACE, Finding.LEFTOVER, Finding.UNINITIALIZED]
    assert [f.kind for f in off.findings()] == [Finding.LEFTOVER]
    assert off.report().verdict is aj.Verdict.LEFTOVER
    np.testing.assert_array_equal(np.asarray(on.outputs["c"]), np.asarray(off.outputs["c"]))
    poisoned = _run(missing_m_fix_sync, options=aj.Options(sanitize=False, poison_races=True))
    assert not np.isnan(np.asarray(poisoned.outputs["c"])).any()  # no race found, none poisoned
