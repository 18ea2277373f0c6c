"""Seed rules no other kernel file shows, one small case each (docs/seeds/ shows their output).

Seed 001's unit-flag direction and both-sides rules; seed 002's set-pipe, sync-mode, event-id
and TileGroup-index rules; seed 004's mmad parameter rules (C alignment, L0C size per chip,
dtypes, k = 0, BiasTable, GEMV layout, the small-tile PIPE_M barrier, saturation, AIC only).
Cases that a rule refuses while tracing raise the documented ``ValueError``.

    python -m ascjax list kernels/seed_rules.py
    python -m ascjax run kernels/seed_rules.py::uf_direction_m
"""

import jax.numpy as jnp
import numpy as np

import ascjax as aj
from ascjax import UnitFlagMode, pl

PIPE = pl.PipeType
DISABLE, KEEP, UPDATE = UnitFlagMode.DISABLE, UnitFlagMode.ENABLE_KEEP, UnitFlagMode.ENABLE_UPDATE


def _stage(k, m, kk, n, dtype="float16", direction="n", bias=False):
    """A (m x kk) and B (kk x n) GM -> L1 -> L0A / L0B, ordered by MTE2 -> MTE1 -> M flags.

    With ``bias`` the GM row ``bias`` goes to the BiasTable at address 0 as well. Returns the
    L0A, L0B and L0C tiles.
    """
    a_l1 = k.alloc("L1", (m, kk), dtype, name="a_l1")
    b_l1 = k.alloc("L1", (kk, n), dtype, name="b_l1")
    al = k.alloc("L0A", (m, kk), dtype, name="al")
    br = k.alloc("L0B", (kk, n), dtype, name="br")
    ac = k.alloc("L0C", (m, n), "float32", name="ac")
    k.set_mmad_direction(direction)
    k.copy_gm2l1_nd2nz(a_l1, "a")
    k.copy_gm2l1_nd2nz(b_l1, "b")
    if bias:
        bias_l1 = k.alloc("L1", (1, n), "float32", fmt="ND", name="bias_l1")
        bt = k.alloc("BiasTable", (1, n), "float32", addr=0, name="bt")
        k.copy_gm2l1(bias_l1, "bias")
    k.sync_notify("MTE2", "MTE1", 0)
    k.sync_wait("MTE2", "MTE1", 0)
    k.copy_l12l0a(al, a_l1)
    k.copy_l12l0b(br, b_l1, transpose=True)  # L1 holds B (K x N)
    if bias:
        k.copy_l12bt(bt, bias_l1)
    k.sync_notify("MTE1", "M", 0)
    k.sync_wait("MTE1", "M", 0)
    return al, br, ac


def _inputs(m, kk, n, seed=7, bias=False):
    rng = np.random.default_rng(seed)
    x = {"a": rng.uniform(-1, 1, (m, kk)).astype(np.float16), "b": rng.uniform(-1, 1, (kk, n)).astype(np.float16)}
    if bias:
        x["bias"] = rng.uniform(-1, 1, (1, n)).astype(np.float32)
    return x


def _product(times=1.0, bias=False):
    def reference(x):
        c = times * (x["a"].astype(np.float64) @ x["b"].astype(np.float64))
        return {"c": c + x["bias"].astype(np.float64) if bias else c}

    return reference


def _matmul_case(kernel, size, expect=aj.Verdict.OK, times=1.0, chip="a2", bias=False, **params) -> aj.Case:
    m, kk, n = size
    ok = expect is aj.Verdict.OK
    return aj.Case(
        kernel=kernel,
        inputs=_inputs(m, kk, n, bias=bias),
        outputs={"c": ((m, n), "float32")},
        params=params,
        reference=_product(times, bias) if ok else None,
        atol=1e-3,
        expect=expect,
        chip=chip,
    )


def _trace_only(kernel, chip="a2") -> aj.Case:
    """A kernel that is refused while it is traced: nothing runs."""
    return aj.Case(kernel=kernel, inputs={}, outputs={}, chip=chip)


# --- seed 001 -----------------------------------------------------------------------------
def direction_kernel(k: aj.Program):
    al, br, ac = _stage(k, 128, 128, 128, direction="m")  # SetMMColumnMajor: M first
    k.mmad(ac, al, br, 128, 128, 128, unit_flag_mode=UPDATE, c_matrix_init_val=True)
    k.fixpipe("c", ac, unit_flag_mode=UPDATE)  # NZ -> ND: the fixpipe reads along N


@aj.case
def uf_direction_m():
    """Unit flag on, the mmad computes M first but the fixpipe converts NZ -> ND -> ok, with a warning."""
    return _matmul_case(direction_kernel, (128, 128, 128))


def one_side_kernel(k: aj.Program):
    al, br, ac = _stage(k, 128, 128, 128)
    k.mmad(ac, al, br, 128, 128, 128, unit_flag_mode=UPDATE, c_matrix_init_val=True)
    k.fixpipe("c", ac, unit_flag_mode=DISABLE)  # the read side leaves the unit flag off


@aj.case
def uf_one_side():
    """The mmad enables the unit flag, the fixpipe does not (and there is no M -> FIX sync) -> race."""
    return _matmul_case(one_side_kernel, (128, 128, 128), aj.Verdict.RACE)


# --- seed 004 -----------------------------------------------------------------------------
def misaligned_c_kernel(k: aj.Program):
    k.alloc("L0C", (48, 80), "int32", addr=512, name="c_l0")  # C must start at a multiple of 1024 B


@aj.case
def mmad_c_misaligned():
    """An L0C tile for C at byte 512 -> refused while tracing (alignment 1024 B)."""
    return _trace_only(misaligned_c_kernel)


def l0c_256k_kernel(k: aj.Program):
    k.alloc("L0C", (256, 256), "float32", name="c_l0")  # 256 x 256 x 4 B = 256 KB


@aj.case
def l0c_256k_on_a2():
    """A 256 KB L0C tile on Atlas A2 (L0C 128 KB) -> refused while tracing."""
    return _trace_only(l0c_256k_kernel, chip="a2")


@aj.case
def l0c_256k_on_950():
    """The same 256 KB L0C tile on Ascend 950 (L0C 256 KB) -> fits exactly, ok."""
    return _trace_only(l0c_256k_kernel, chip="950")


def hifloat8_kernel(k: aj.Program):
    a = k.alloc("L0A", (16, 32), "hifloat8", name="a_l0")
    b = k.alloc("L0B", (32, 16), "hifloat8", name="b_l0")
    c = k.alloc("L0C", (16, 16), "float32", name="c_l0")
    k.mmad(c, a, b, 16, 32, 16, c_matrix_init_val=True)


@aj.case
def mmad_hifloat8_on_a2():
    """hifloat8 x hifloat8 -> float on Atlas A2 (an arch-3510 combination) -> refused while tracing."""
    return _trace_only(hifloat8_kernel, chip="a2")


def zero_k_kernel(k: aj.Program, kk=0):
    al, br, ac = _stage(k, 64, 64, 64)
    k.mmad(ac, al, br, 64, 64, 64, c_matrix_init_val=True)  # C = A @ B
    k.mmad(ac, al, br, 64, kk, 64)  # accumulate with k = kk (traced): 0 makes it a NOP
    k.sync_notify("M", "FIX", 0)
    k.sync_wait("M", "FIX", 0)
    k.fixpipe("c", ac)


@aj.case
def mmad_k_zero_is_nop():
    """A second, accumulating mmad with k = 0 (a traced value) changes nothing: C is still A @ B -> ok."""
    return _matmul_case(zero_k_kernel, (64, 64, 64), kk=jnp.int32(0))


def bias_table_kernel(k: aj.Program):
    al, br, ac = _stage(k, 32, 32, 32, bias=True)  # the bias row is at BiasTable address 0
    k.mmad(ac, al, br, 32, 32, 32, c_matrix_init_val=False, c_matrix_source=True)  # C = bias + A @ B
    k.sync_notify("M", "FIX", 0)
    k.sync_wait("M", "FIX", 0)
    k.fixpipe("c", ac)


@aj.case
def mmad_bias_table():
    """c_matrix_init_val=False, c_matrix_source=True: C starts from the BiasTable row broadcast over M -> ok."""
    return _matmul_case(bias_table_kernel, (32, 32, 32), bias=True)


def gemv_kernel(k: aj.Program):
    al = k.alloc("L0A", (16, 32), "float16", name="al")  # fractal A (Zz on A2)
    br = k.alloc("L0B", (32, 16), "float16", name="br")
    ac = k.alloc("L0C", (16, 16), "float32", name="ac")
    k.mmad(ac, al, br, 1, 32, 16, c_matrix_init_val=True)  # m == 1: GEMV reads A as ND


@aj.case
def mmad_gemv_fractal_a():
    """m == 1 runs GEMV, which reads A in ND, but the L0A tile is fractal -> refused while tracing."""
    return _trace_only(gemv_kernel, chip="a2")


def small_tile_kernel(k: aj.Program, barrier=False):
    al, br, ac = _stage(k, 32, 32, 32)  # (32 / 16) * (32 / 16) = 4 < 10
    k.mmad(ac, al, br, 32, 32, 32, c_matrix_init_val=True)
    if barrier:
        k.sync_pipe("M")  # asc_sync_pipe(PIPE_M)
    k.mmad(ac, al, br, 32, 32, 32)  # accumulate into the same L0C: C = 2 A @ B
    k.sync_notify("M", "FIX", 0)
    k.sync_wait("M", "FIX", 0)
    k.fixpipe("c", ac)


@aj.case
def mmad_small_tile_no_barrier():
    """Two accumulating mmads on 2 x 2 fractals of L0C with no PIPE_M barrier between them -> race."""
    return _matmul_case(small_tile_kernel, (32, 32, 32), aj.Verdict.RACE)


@aj.case
def mmad_small_tile_barrier():
    """The same two mmads with sync_pipe('M') between them -> ok, C = 2 A @ B."""
    return _matmul_case(small_tile_kernel, (32, 32, 32), times=2.0, barrier=True)


def saturation_kernel(k: aj.Program, saturating=True):
    al, br, ac = _stage(k, 16, 16, 16)
    k.set_ctrl_saturation(saturating)  # CTRL[48] = 0 (saturation) or 1 (no saturation)
    k.mmad(ac, al, br, 16, 16, 16, c_matrix_init_val=True)
    k.sync_notify("M", "FIX", 0)
    k.sync_wait("M", "FIX", 0)
    k.fixpipe("c", ac)


def _special_inputs():
    """A all ones but row 0 holds +inf, row 1 -inf, row 2 +inf and -inf (their sum is NaN); B all ones."""
    a = np.ones((16, 16), np.float16)
    a[0, 0], a[1, 0], a[2, 0], a[2, 1] = np.inf, -np.inf, np.inf, -np.inf
    return {"a": a, "b": np.ones((16, 16), np.float16)}


def _saturation_case(saturating: bool) -> aj.Case:
    return aj.Case(
        kernel=saturation_kernel,
        inputs=_special_inputs(),
        outputs={"c": ((16, 16), "float32")},
        params={"saturating": saturating},
    )


@aj.case
def mmad_saturation():
    """inf and inf - inf in the products, saturation mode (the default): +-max and 0 come out -> ok."""
    return _saturation_case(True)


@aj.case
def mmad_no_saturation():
    """The same with set_ctrl_saturation(False): inf and NaN come out -> ok."""
    return _saturation_case(False)


def mmad_on_aiv_kernel(k: aj.Program):
    al = k.alloc("L0A", (16, 32), "float16", name="al")
    br = k.alloc("L0B", (32, 16), "float16", name="br")
    ac = k.alloc("L0C", (16, 16), "float32", name="ac")
    with k.vector(0):  # issued on a vector core
        k.mmad(ac, al, br, 16, 32, 16, c_matrix_init_val=True)


@aj.case
def mmad_on_aiv():
    """An mmad issued on AIV0 -> refused while tracing."""
    return _trace_only(mmad_on_aiv_kernel)


# --- seed 002 -----------------------------------------------------------------------------
def set_pipe_kernel(k: aj.Program, set_pipe=PIPE.MTE3):
    x = pl.alloc("Vec", (16, 32), "float32", name="x")
    w = pl.alloc("Mat", (32, 32), "float32", name="w")

    @pl.section_vector
    def _(sub):
        pl.fill(x, 1.0 + sub)  # V
        pl.system.sync_src(set_pipe=PIPE.V, wait_pipe=PIPE.MTE3, event_id=0)
        pl.system.sync_dst(set_pipe=PIPE.V, wait_pipe=PIPE.MTE3, event_id=0)
        pl.store("ws", x, (16 * sub, 0))  # MTE3: the last write
        pl.system.set_cross_core(pipe=set_pipe, event_id=1)

    @pl.section_cube
    def _():
        pl.system.wait_cross_core(pipe=PIPE.MTE2, event_id=1)
        pl.load(w, "ws")  # MTE2: the first read


def _set_pipe_case(set_pipe, expect) -> aj.Case:
    return aj.Case(
        kernel=set_pipe_kernel,
        inputs={},
        outputs={"ws": ((32, 32), "float32")},
        params={"set_pipe": set_pipe},
        expect=expect,
        chip="950",
    )


@aj.case
def xc_set_on_mte3():
    """The AIVs store to GM, then set on MTE3, the pipe of that store -> ok."""
    return _set_pipe_case(PIPE.MTE3, aj.Verdict.OK)


@aj.case
def xc_set_on_v():
    """The same set on V: the signal can leave before the store's data -> race, with a warning."""
    return _set_pipe_case(PIPE.V, aj.Verdict.RACE)


def mode_mismatch_kernel(k: aj.Program):
    @pl.section_cube
    def _():
        pl.system.set_cross_core(pipe=PIPE.FIX, event_id=8)  # INTRA_BLOCK, the default

    @pl.section_vector
    def _(sub):
        pl.system.wait_cross_core(pipe=PIPE.V, event_id=8, sync_mode=pl.SyncMode.UNICAST_BLOCK)


@aj.case
def xc_mode_mismatch():
    """The cube sets event 8 INTRA_BLOCK, the AIVs wait for it UNICAST_BLOCK -> sync_error."""
    return aj.Case(kernel=mode_mismatch_kernel, inputs={}, outputs={}, expect=aj.Verdict.SYNC_ERROR, chip="950")


def inter_block_kernel(k: aj.Program):
    @pl.section_cube
    def _():
        pl.system.set_cross_core(pipe=PIPE.FIX, event_id=0, sync_mode=pl.SyncMode.INTER_BLOCK)


@aj.case
def xc_inter_block():
    """An INTER_BLOCK set -> refused while tracing."""
    return _trace_only(inter_block_kernel, chip="950")


def event_16_kernel(k: aj.Program):
    @pl.section_cube
    def _():
        pl.system.set_cross_core(pipe=PIPE.FIX, event_id=16)

    @pl.section_vector
    def _(sub):
        pl.system.wait_cross_core(pipe=PIPE.V, event_id=16)


@aj.case
def xc_event_id_16():
    """A cross-core event id 16 -> refused while tracing ([0, 16))."""
    return _trace_only(event_16_kernel, chip="950")


def group_index_kernel(k: aj.Program, i=2):
    g = pl.make_tile_group("Vec", (4, 16), "float32", depth=2, name="g")
    with k.vector(0):
        pl.fill(g[i], 7.0)  # i is traced; slot 2 of a depth-2 group is not taken modulo 2


@aj.case
def tile_group_index_2():
    """group[i] with a traced i = 2 on a depth-2 TileGroup -> bounds (nothing is written)."""
    return aj.Case(
        kernel=group_index_kernel, inputs={}, outputs={}, params={"i": jnp.int32(2)}, expect=aj.Verdict.BOUNDS
    )
