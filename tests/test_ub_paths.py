"""Vector-core data paths: GM <-> UB (traced offsets, bounds), UB -> L1 insert, and L0C -> UB move split
between the two AIVs by ``acc_to_vec_mode`` (with its tail rules) and with the unit flag."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ascjax as aj
from ascjax import AccPhase, AccToVecMode, STPhase
from ascjax.core import Finding

F32, F16 = "float32", "float16"


def _rng(seed):
    return np.random.default_rng(seed)


# --- GM <-> UB with traced offsets ---------------------------------------------------------
GR, GC = 16, 32  # GM tensor
TR, TC = 4, 8  # UB tile


def _window_kernel(k, lrow, lcol, srow, scol):
    ub = k.alloc("UB", (TR, TC), F32, name="ub")
    with k.vector(1):  # AIV1: its own UB
        k.copy_gm2ub(ub, "x", row=lrow, col=lcol)
        k.sync_notify("MTE2", "MTE3", 0)
        k.sync_wait("MTE2", "MTE3", 0)
        k.copy_ub2gm("out", ub, row=srow, col=scol)


# (load row, load col, store row, store col): in range ends at (GR - TR, GC - TC) = (12, 24)
OFFSETS = [
    (0, 0, 0, 0),
    (12, 24, 3, 8),
    (5, 3, 12, 24),
    (13, 0, 0, 0),  # load row past the end
    (0, -1, 0, 0),  # negative load column
    (0, 0, 12, 25),  # store column past the end
    (0, 0, -2, 0),  # negative store row
]
GOOD = 3
BAD_LOADS = 2  # a faulting load writes nothing, so the store then reads uninitialised UB (ranked above BOUNDS)


@pytest.fixture(scope="module")
def windows():
    x = _rng(0).standard_normal((GR, GC)).astype(np.float32)
    params = {name: jnp.array(col, jnp.int32) for name, col in zip(("lrow", "lcol", "srow", "scol"), zip(*OFFSETS))}
    result = jax.vmap(lambda p: aj.run(_window_kernel, {"x": x}, {"out": ((GR, GC), F32)}, params=p))(params)
    return x, result


def test_gm_ub_round_trip_with_traced_offsets(windows):
    x, result = windows
    verdicts = [aj.Verdict(int(v)) for v in result.verdict]
    bad_stores = len(OFFSETS) - GOOD - BAD_LOADS
    assert (
        verdicts == [aj.Verdict.OK] * GOOD + [aj.Verdict.UNINITIALIZED] * BAD_LOADS + [aj.Verdict.BOUNDS] * bad_stores
    )
    for i, (lr, lc, sr, sc) in enumerate(OFFSETS[:GOOD]):
        want = np.zeros((GR, GC), np.float32)
        want[sr : sr + TR, sc : sc + TC] = x[lr : lr + TR, lc : lc + TC]
        np.testing.assert_array_equal(np.asarray(result.outputs["out"][i]), want)


@pytest.mark.parametrize(
    "i, what, value, limit",
    [(3, "row offset", 13, 12), (4, "column offset", -1, 24), (5, "column offset", 25, 24), (6, "row offset", -2, 12)],
)
def test_out_of_range_offset_is_bounds_and_nothing_is_written(windows, i, what, value, limit):
    _, result = windows
    bounds = [f for f in result.findings(i) if f.kind is Finding.BOUNDS]
    assert len(bounds) == 1 and bounds[0].site.startswith("copy_gm2ub at" if i < 5 else "copy_ub2gm at")
    assert f"{what} = {value} is outside [0, {limit}], so the instruction does nothing" in bounds[0].message
    np.testing.assert_array_equal(np.asarray(result.outputs["out"][i]), 0)  # the store did not happen


# --- a small cube front end ------------------------------------------------------------
def _operands(k, m, kk, n):
    """Tiles for A (m x kk) and B (kk x n) f16 in L1 and L0A / L0B, and an m x n f32 L0C tile."""
    a1 = k.alloc("L1", (m, kk), F16, name="a1")
    b1 = k.alloc("L1", (kk, n), F16, name="b1")
    a0 = k.alloc("L0A", (m, kk), F16, name="a0")
    b0 = k.alloc("L0B", (kk, n), F16, name="b0")
    c = k.alloc("L0C", (m, n), F32, name="c")
    return a1, b1, a0, b0, c


def _stage(k, a1, b1, a0, b0, a_from_gm=True):
    """Cube: GM -> L1 (A unless an insert fills it, and B), then MTE2 -> MTE1."""
    with k.cube():
        if a_from_gm:
            k.copy_gm2l1_nd2nz(a1, "a")
        k.copy_gm2l1_nd2nz(b1, "b")
        k.sync_notify("MTE2", "MTE1", 0)
        k.sync_wait("MTE2", "MTE1", 0)


def _l0(k, a1, b1, a0, b0):
    """Cube: L1 -> L0A / L0B, then MTE1 -> M."""
    with k.cube():
        k.copy_l12l0a(a0, a1)
        k.copy_l12l0b(b0, b1, transpose=True)
        k.sync_notify("MTE1", "M", 0)
        k.sync_wait("MTE1", "M", 0)
        k.set_mmad_direction("n")


# --- UB -> L1 insert, then L1 -> L0A and matmul ---------------------------------------------
def test_insert_ub_to_l1_then_matmul():
    m = kk = n = 32

    def kernel(k):
        a1, b1, a0, b0, c = _operands(k, m, kk, n)
        ub = k.alloc("UB", (m // 2, kk), F16, name="ub")

        @k.section_vector
        def _(sub):  # each AIV inserts its half of A's rows
            k.copy_gm2ub(ub, "a", row=sub * (m // 2))
            k.sync_notify("MTE2", "MTE3", 1)
            k.sync_wait("MTE2", "MTE3", 1)
            k.insert(a1, ub, row=sub * (m // 2), col=0)
            k.set_cross_core("MTE3", 2)

        _stage(k, a1, b1, a0, b0, a_from_gm=False)
        with k.cube():
            k.wait_cross_core("MTE1", 2)
        _l0(k, a1, b1, a0, b0)
        with k.cube():
            k.matmul(c, a0, b0, phase=AccPhase.Final)
            k.store("out", c, phase=STPhase.Final)

    a = _rng(1).uniform(-1, 1, (m, kk)).astype(np.float16)
    b = _rng(2).uniform(-1, 1, (kk, n)).astype(np.float16)
    r = aj.run(kernel, {"a": a, "b": b}, {"out": ((m, n), F32)})  # sanitized: the handshake is race-free
    rep = r.report()
    assert rep.verdict is aj.Verdict.OK, rep.message
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(np.asarray(r.outputs["out"]), want, rtol=1e-5, atol=1e-5)


# --- L0C -> UB split between the AIVs -----------------------------------------------------------
SPLIT_CASES = [
    # mode, m, n, (AIV0 (row0, rows, col0, cols), AIV1 (...)) as documented (PyPTO-Pro move.md, facts §4)
    (AccToVecMode.SingleModeVec0, 48, 80, ((0, 48, 0, 80), (0, 0, 0, 0))),
    (AccToVecMode.SingleModeVec1, 48, 80, ((0, 0, 0, 0), (0, 48, 0, 80))),
    (AccToVecMode.DualModeSplitM, 33, 80, ((0, 17, 0, 80), (17, 16, 0, 80))),
    (AccToVecMode.DualModeSplitM, 48, 32, ((0, 24, 0, 32), (24, 24, 0, 32))),
    (AccToVecMode.DualModeSplitN, 48, 33, ((0, 48, 0, 32), (0, 48, 32, 1))),
    (AccToVecMode.DualModeSplitN, 48, 65, ((0, 48, 0, 48), (0, 48, 48, 17))),
    (AccToVecMode.DualModeSplitN, 48, 16, ((0, 48, 0, 16), (0, 48, 16, 0))),
    (AccToVecMode.DualModeSplitN, 48, 9, ((0, 48, 0, 9), (0, 48, 9, 0))),
    (AccToVecMode.DualModeSplitN, 48, 64, ((0, 48, 0, 32), (0, 48, 32, 32))),
]
CM, CK, CN = 48, 32, 80
SENTINEL = -7.0


@pytest.mark.parametrize("mode, m, n, parts", SPLIT_CASES, ids=lambda v: getattr(v, "name", str(v)))
def test_split_function_tail_rules(mode, m, n, parts):
    got = aj.ops.split(mode, m, n)
    # AIVs that receive nothing: compare only the sizes that matter
    for sub in (0, 1):
        r0, rows, c0, cols = got[sub]
        w0, wrows, wc0, wcols = parts[sub]
        if wrows == 0 or wcols == 0:
            assert rows == 0 or cols == 0, (sub, got)
        else:
            assert (r0, rows, c0, cols) == (w0, wrows, wc0, wcols), (sub, got)


def _moves_kernel(k):
    """One L0C tile moved to UB once per split case (one UB tile each), each AIV storing what it received."""
    a1, b1, a0, b0, c = _operands(k, CM, CK, CN)
    ubs = [k.alloc("UB", (CM, CN), F32, name=f"ub{j}") for j in range(len(SPLIT_CASES))]

    @k.section_vector
    def _(sub):  # mark the whole UB tiles, then hand them to the cube (RELEASE)
        for ub in ubs:
            k.fill(ub, SENTINEL)
        k.set_cross_core("V", 1)

    _stage(k, a1, b1, a0, b0)
    _l0(k, a1, b1, a0, b0)
    with k.cube():
        k.matmul(c, a0, b0)
        k.sync_notify("M", "FIX", 0)
        k.sync_wait("M", "FIX", 0)
        k.wait_cross_core("FIX", 1)
        for ub, (mode, m, n, _) in zip(ubs, SPLIT_CASES):
            k.copy_l0c2ub(ub, c, acc_to_vec_mode=mode, m=m, n=n)
        k.set_cross_core("FIX", 0)

    @k.section_vector
    def _(sub):  # READY: each AIV stores what it received
        k.wait_cross_core("MTE3", 0)
        for j, ub in enumerate(ubs):
            k.copy_ub2gm(f"out{sub}_{j}", ub)


@pytest.fixture(scope="module")
def moved():
    a = _rng(3).uniform(-1, 1, (CM, CK)).astype(np.float16)
    b = _rng(4).uniform(-1, 1, (CK, CN)).astype(np.float16)
    outputs = {f"out{sub}_{j}": ((CM, CN), F32) for sub in (0, 1) for j in range(len(SPLIT_CASES))}
    # data only (the race sanitizer's compile time grows with the UB tiles; test_move_with_unit_flag... runs it)
    r = aj.run(_moves_kernel, {"a": a, "b": b}, outputs, sanitize=False)
    return (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float32), r


def test_moves_run_clean(moved):
    rep = moved[1].report()
    assert rep.verdict is aj.Verdict.OK, rep.message
    assert rep.warnings == []


@pytest.mark.parametrize("j", range(len(SPLIT_CASES)), ids=[f"{c[0].name}-{c[1]}x{c[2]}" for c in SPLIT_CASES])
def test_move_delivers_each_aiv_its_part_at_the_tile_origin(moved, j):
    full, r = moved
    for sub in (0, 1):
        r0, rows, c0, cols = SPLIT_CASES[j][3][sub]
        want = np.full((CM, CN), SENTINEL, np.float32)
        want[:rows, :cols] = full[r0 : r0 + rows, c0 : c0 + cols]
        np.testing.assert_allclose(np.asarray(r.outputs[f"out{sub}_{j}"]), want, rtol=1e-5, atol=1e-5)


def test_move_part_larger_than_the_ub_tile_is_rejected():
    def kernel(k, rows):
        a1, b1, a0, b0, c = _operands(k, 32, 32, 32)
        ub = k.alloc("UB", (rows, 32), F32, name="ub")
        with k.cube():
            k.copy_l0c2ub(ub, c, acc_to_vec_mode=AccToVecMode.DualModeSplitM)

    with pytest.raises(ValueError, match=r"rule 'move split'.*DualModeSplitM sends a 16x32 part.*AIV0"):
        aj.run(kernel, {}, {}, params={"rows": 15})  # raises while tracing: nothing compiles
    jax.eval_shape(lambda: aj.run(kernel, {}, {}, params={"rows": 16}))  # the good twin traces


# --- move with the unit flag ----------------------------------------------------------------
def _staged_32(k):
    """A and B (32 x 32) staged into L0A / L0B, and the L0C tile and the half-height UB tile a move fills."""
    a1, b1, a0, b0, c = _operands(k, 32, 32, 32)
    ub = k.alloc("UB", (16, 32), F32, name="ub")
    _stage(k, a1, b1, a0, b0)
    _l0(k, a1, b1, a0, b0)
    return a0, b0, c, ub


def _flag_kernel(k, mm_phase):
    m = 32
    a0, b0, c, ub = _staged_32(k)
    with k.cube():
        k.matmul(c, a0, b0, phase=mm_phase)  # traced: 0 = no phase
        k.move_to_vec(ub, c, acc_to_vec_mode=AccToVecMode.DualModeSplitM, phase=STPhase.Final)
        k.set_cross_core("FIX", 0)

    @k.section_vector
    def _(sub):
        k.wait_cross_core("MTE3", 0)
        k.copy_ub2gm("out", ub, row=sub * (m // 2))


def test_move_with_unit_flag_needs_a_final_matmul():
    a = _rng(5).uniform(-1, 1, (32, 32)).astype(np.float16)
    b = _rng(6).uniform(-1, 1, (32, 32)).astype(np.float16)
    runs = {}
    for phase in (AccPhase.Final, 0, AccPhase.Partial):  # a traced phase: one compilation for all three
        runs[phase] = aj.run(  # unit-flag verdicts need no race sanitizer (it would double the compile time)
            _flag_kernel,
            {"a": a, "b": b},
            {"out": ((32, 32), F32)},
            params={"mm_phase": jnp.int32(phase)},
            sanitize=False,
        )
    good = runs[AccPhase.Final]
    assert good.report().verdict is aj.Verdict.OK, good.report().message
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(np.asarray(good.outputs["out"]), want, rtol=1e-5, atol=1e-5)
    for phase in (0, AccPhase.Partial):
        rep = runs[phase].report()
        assert rep.verdict is aj.Verdict.DEADLOCK, rep.message
        assert rep.op == "move_to_vec" and "(AIC.FIX) waits for unit flag = 1" in rep.message
        np.testing.assert_array_equal(np.asarray(runs[phase].outputs["out"]), 0)  # the AIVs never got the data
    assert "AccPhase.Final" in runs[AccPhase.Partial].report().message
    assert "rule 'Final closing'" in runs[AccPhase.Partial].report().message


def _read_twice_kernel(k, first):
    a0, b0, c, ub = _staged_32(k)
    with k.cube():
        k.matmul(c, a0, b0, phase=AccPhase.Final)
        k.move_to_vec(ub, c, acc_to_vec_mode=AccToVecMode.DualModeSplitM, phase=first)  # traced STPhase
        k.move_to_vec(ub, c, acc_to_vec_mode=AccToVecMode.DualModeSplitM, phase=STPhase.Final)


def test_a_move_after_a_draining_move_is_told_an_earlier_read_drained_the_blocks():
    """Reports dispatch on the instruction's kind: a move out of L0C is a read, like fixpipe (not an mmad)."""
    a = _rng(7).uniform(-1, 1, (32, 32)).astype(np.float16)
    runs = {
        phase: aj.run(_read_twice_kernel, {"a": a, "b": a}, {}, params={"first": jnp.int32(phase)}, sanitize=False)
        for phase in (STPhase.Partial, STPhase.Final)
    }
    assert runs[STPhase.Partial].report().verdict is aj.Verdict.OK, runs[STPhase.Partial].report().message
    rep = runs[STPhase.Final].report()
    assert rep.verdict is aj.Verdict.DEADLOCK and rep.op == "move_to_vec", rep.message
    assert "last read by move" in rep.message
    assert "an earlier read already drained these blocks" in rep.message and "STPhase.Partial" in rep.message
