"""The L0C unit flag: seed 001's K-loop and split-N recipes and seed 000's failure cases.

Phases map onto ``unit_flag_mode``: AccPhase/STPhase.Partial = ENABLE_KEEP (2),
Final = ENABLE_UPDATE (3); no phase = DISABLE (0) plus explicit M -> FIX sync.
"""

import jax.numpy as jnp
import ml_dtypes
import numpy as np

import ascjax as aj
from ascjax import AccPhase, STPhase, UnitFlagMode

DISABLE, KEEP, UPDATE = UnitFlagMode.DISABLE, UnitFlagMode.ENABLE_KEEP, UnitFlagMode.ENABLE_UPDATE


def _random(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    return rng.uniform(-1, 1, size=shape).astype(dtype)


def _matmul_reference(a_name="a", b_name="b", out="c", out_dtype=np.float32):
    def reference(inputs):
        a = np.asarray(inputs[a_name], np.float64)
        b = np.asarray(inputs[b_name], np.float64)
        return {out: (a @ b).astype(out_dtype)}

    return reference


# --- seed 001: K-loop, A 128 x 1024, B 1024 x 128, K tile 128 ----------------------------
KLOOP_M, KLOOP_K, KLOOP_N, KLOOP_TK = 128, 1024, 128, 128
KLOOP_STEPS = KLOOP_K // KLOOP_TK


def kloop_kernel(k: aj.Program, dtype="float16", first=KEEP, middle=KEEP, last=UPDATE, store=UPDATE):
    """8 mmads into one L0C tile (modes first / middle x6 / last), then one fixpipe (mode ``store``).

    Single-buffered L1 and L0 with the reverse events primed before the loop, as device kernels do.
    The modes may be traced: a vmap over them sweeps every phase choice with one compilation.
    """
    M, TK, N = KLOOP_M, KLOOP_TK, KLOOP_N
    a_l1 = k.alloc("L1", (M, TK), dtype, name="a_l1")
    b_l1 = k.alloc("L1", (TK, N), dtype, name="b_l1")
    al = k.alloc("L0A", (M, TK), dtype, name="al")
    br = k.alloc("L0B", (TK, N), dtype, name="br")
    ac = k.alloc("L0C", (M, N), "float32", name="ac")
    k.set_mmad_direction("n")  # the fixpipe converts NZ -> ND, so the cube computes N first
    k.sync_notify("MTE1", "MTE2", 0)  # L1 starts free
    k.sync_notify("M", "MTE1", 0)  # L0A/L0B start free

    def step(i):
        k.sync_wait("MTE1", "MTE2", 0)
        k.copy_gm2l1_nd2nz(a_l1, "a", col=i * TK)
        k.copy_gm2l1_nd2nz(b_l1, "b", row=i * TK)
        k.sync_notify("MTE2", "MTE1", 0)
        k.sync_wait("MTE2", "MTE1", 0)
        k.sync_wait("M", "MTE1", 0)
        k.copy_l12l0a(al, a_l1)
        k.copy_l12l0b(br, b_l1, transpose=True)  # L1 holds B (K x N): transpose into Zn
        k.sync_notify("MTE1", "MTE2", 0)
        k.sync_notify("MTE1", "M", 0)
        k.sync_wait("MTE1", "M", 0)
        mode = jnp.where(i == 0, first, jnp.where(i == KLOOP_STEPS - 1, last, middle))
        k.mmad(ac, al, br, M, TK, N, unit_flag_mode=mode, c_matrix_init_val=(i == 0))
        k.sync_notify("M", "MTE1", 0)

    k.range(KLOOP_STEPS, step)
    k.sync_wait("MTE1", "MTE2", 0)
    k.sync_wait("M", "MTE1", 0)
    k.fixpipe("c", ac, unit_flag_mode=store)


def kloop_case(dtype: str, **params) -> aj.Case:
    np_dtype = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16}[dtype]
    return aj.Case(
        kernel=kloop_kernel,
        inputs={"a": _random((KLOOP_M, KLOOP_K), np_dtype, 1), "b": _random((KLOOP_K, KLOOP_N), np_dtype, 2)},
        outputs={"c": ((KLOOP_M, KLOOP_N), "float32")},
        params={"dtype": dtype, **params},
        reference=_matmul_reference(),
        atol=1e-3,
    )


@aj.case
def kloop_f16():
    """Seed 001 K-loop in f16: mmad KEEP x7 then UPDATE, fixpipe UPDATE -> correct, ok."""
    return kloop_case("float16")


@aj.case
def kloop_bf16():
    """Seed 001 K-loop in bf16: mmad KEEP x7 then UPDATE, fixpipe UPDATE -> correct, ok."""
    return kloop_case("bfloat16")


# --- seed 001: split-N, one mmad 128 x 256 read by two fixpipes of 128 x 128 -------------
def split_n_kernel(k: aj.Program):
    """One mmad (UPDATE) drained by two fixpipes (each UPDATE) along N."""
    M, K, N = 128, 128, 256
    al, br, ac = stage_operands(k, M, K, N)
    k.mmad(ac, al, br, M, K, N, unit_flag_mode=UPDATE, c_matrix_init_val=True)
    k.fixpipe("c", ac, m=M, n=128, src_col=0, dst_col=0, unit_flag_mode=UPDATE)
    k.fixpipe("c", ac, m=M, n=128, src_col=128, dst_col=128, unit_flag_mode=UPDATE)


@aj.case
def split_n():
    """Seed 001 split-N: mmad 128x256 UPDATE, two fixpipes 128x128 UPDATE -> correct, ok."""
    return aj.Case(
        kernel=split_n_kernel,
        inputs={"a": _random((128, 128), np.float16, 3), "b": _random((128, 256), np.float16, 4)},
        outputs={"c": ((128, 256), "float32")},
        reference=_matmul_reference(),
        atol=1e-3,
    )


# --- a single 128 x 128 x 128 f16 matmul, the base of seed 000's cases -----------------
def stage_operands(k: aj.Program, M: int, K: int, N: int, direction: str = "n"):
    """Allocate A (M x K), B (K x N) f16 and C f32, load A and B from GM and move them to L0A / L0B.

    MTE2 -> MTE1 -> M software sync orders the copies; returns the L0A, L0B and L0C tiles.
    """
    a_l1 = k.alloc("L1", (M, K), "float16", name="a_l1")
    b_l1 = k.alloc("L1", (K, N), "float16", name="b_l1")
    al = k.alloc("L0A", (M, K), "float16", name="al")
    br = k.alloc("L0B", (K, N), "float16", name="br")
    ac = k.alloc("L0C", (M, N), "float32", name="ac")
    k.set_mmad_direction(direction)  # the fixpipe converts Nz -> ND: N first
    k.copy_gm2l1_nd2nz(a_l1, "a")
    k.copy_gm2l1_nd2nz(b_l1, "b")
    k.sync_notify("MTE2", "MTE1", 0)
    k.sync_wait("MTE2", "MTE1", 0)
    k.copy_l12l0a(al, a_l1)
    k.copy_l12l0b(br, b_l1, transpose=True)
    k.sync_notify("MTE1", "M", 0)
    k.sync_wait("MTE1", "M", 0)
    return al, br, ac


def _single_tile(k: aj.Program):
    return stage_operands(k, 128, 128, 128)


def _single_case(kernel, expect="ok", reference=True, **kwargs) -> aj.Case:
    return aj.Case(
        kernel=kernel,
        inputs={"a": _random((128, 128), np.float16, 5), "b": _random((128, 128), np.float16, 6)},
        outputs={"c": ((128, 128), "float32")},
        reference=_matmul_reference() if reference else None,
        atol=1e-3,
        expect=aj.Verdict.parse(expect),
        **kwargs,
    )


def single_matmul_sync_kernel(k: aj.Program):
    al, br, ac = _single_tile(k)
    k.mmad(ac, al, br, 128, 128, 128, c_matrix_init_val=True)  # no phase: unit flag off
    k.sync_notify("M", "FIX", 0)  # the M -> FIX software sync the framework inserts
    k.sync_wait("M", "FIX", 0)
    k.fixpipe("c", ac)


@aj.case
def single_matmul_sync():
    """Seed 000 'single matmul, no phase': unit flag off, explicit M -> FIX sync -> ok."""
    return _single_case(single_matmul_sync_kernel)


def seed000_error1_kernel(k: aj.Program):
    al, br, ac = _single_tile(k)
    k.mmad(ac, al, br, 128, 128, 128, unit_flag_mode=AccPhase.Partial, c_matrix_init_val=True)
    k.fixpipe("c", ac, unit_flag_mode=STPhase.Final)  # waits for a flag nobody sets


@aj.case
def seed000_error1():
    """Seed 000 error 1: matmul(Partial); store(Final) -> the store hangs."""
    return _single_case(seed000_error1_kernel, expect="deadlock", reference=False)


def seed000_error3_kernel(k: aj.Program):
    al, br, ac = _single_tile(k)

    def step(i):
        k.mmad(ac, al, br, 128, 128, 128, unit_flag_mode=AccPhase.Final, c_matrix_init_val=True)
        k.fixpipe("c", ac, unit_flag_mode=STPhase.Partial)  # leaves the flag at 1

    k.range(2, step)


@aj.case
def seed000_error3():
    """Seed 000 error 3: loop { matmul(Final); store(Partial) } -> the 2nd iteration's matmul hangs."""
    return _single_case(seed000_error3_kernel, expect="deadlock", reference=False)


def size_mismatch_kernel(k: aj.Program, reset=False, barrier=True):
    al, br, ac = _single_tile(k)
    k.mmad(ac, al, br, 128, 128, 128, unit_flag_mode=UPDATE, c_matrix_init_val=True)
    k.fixpipe("c", ac, m=64, n=64, unit_flag_mode=UPDATE)  # drains only 64 x 64 of 128 x 128
    if reset:  # the reset runs on S: PIPE_ALL first, or it may run before the fixpipe drained [semantics §8]
        if barrier:
            k.sync_pipe("ALL")
        k.set_l0c_copy_config(is_clean_unit_flag=True)
    k.mmad(ac, al, br, 128, 128, 128, unit_flag_mode=UPDATE, c_matrix_init_val=True)
    k.fixpipe("c", ac, unit_flag_mode=UPDATE)


@aj.case
def size_mismatch():
    """Seed 001 size mismatch: mmad 128x128, fixpipe 64x64, mmad again -> hangs on undrained blocks."""
    return _single_case(size_mismatch_kernel, expect="deadlock", reference=False)


@aj.case
def size_mismatch_reset():
    """The size-mismatch twin with PIPE_ALL and set_l0c_copy_config(is_clean_unit_flag=True) in between -> ok."""
    return _single_case(size_mismatch_kernel, params={"reset": True})


# --- the published unit-flag measurement (ascend-facts §1): half, 128 x 256 x 512, 8 K-loops ----
def measurement_kernel(k: aj.Program, unit_flag=True, drain=True, direction="n"):
    """8 back-to-back mmads 128 x 256 x 64 (f16) into one L0C tile, then one fixpipe.

    As in the measurement, only the cube and its hand-off to the fixpipe are timed: one A and
    one B tile are loaded once and every K step reuses them. With ``unit_flag`` the mmads
    use KEEP x7 then UPDATE and the fixpipe UPDATE; without it, M -> FIX software sync.
    """
    M, TK, N = 128, 64, 256
    al, br, ac = stage_operands(k, M, TK, N, direction)

    def step(i):
        mode = jnp.where(i == 7, UPDATE, KEEP) if unit_flag else DISABLE
        k.mmad(ac, al, br, M, TK, N, unit_flag_mode=mode, c_matrix_init_val=(i == 0))

    k.range(8, step)
    if not drain:
        return
    if not unit_flag:
        k.sync_notify("M", "FIX", 0)
        k.sync_wait("M", "FIX", 0)
    k.fixpipe("c", ac, unit_flag_mode=UPDATE if unit_flag else DISABLE)


def measurement_case(unit_flag: bool, drain: bool = True, direction: str = "n") -> aj.Case:
    rng = np.random.default_rng(9)
    a = rng.uniform(-1, 1, (128, 64)).astype(np.float16)
    b = rng.uniform(-1, 1, (64, 256)).astype(np.float16)
    return aj.Case(
        kernel=measurement_kernel,
        inputs={"a": a, "b": b},
        outputs={"c": ((128, 256), "float32")},
        params={"unit_flag": unit_flag, "drain": drain, "direction": direction},
        reference=lambda x: {"c": 8 * (x["a"].astype(np.float64) @ x["b"].astype(np.float64))},
        atol=1e-3,
    )


@aj.case
def measurement_with_unit_flag():
    """The published unit-flag measurement (4209 cycles with the unit flag): mmads KEEP x7, UPDATE; fixpipe UPDATE."""
    return measurement_case(True)


@aj.case
def measurement_with_software_sync():
    """The published unit-flag measurement (4225 cycles without): mmads DISABLE, M -> FIX sync, fixpipe."""
    return measurement_case(False)
