"""``mmad`` against an independent float64 / int64 NumPy reference.

Every run loads *whole padded* tiles from GM, so the fractal padding of L0A/L0B and everything
past the valid ``k`` holds nonzero garbage; ``C`` is first filled by a full-size mmad
(``prior``), then the mmad under test runs with the valid ``m, k, n``. We check:

* the valid ``m x n`` region against ``init + A[:m, :k] @ B[:k, :n]`` (float64 reference,
  tolerance of f32 accumulation; int8 -> int32 bit exact),
* everything outside ``ceil16(m) x ceil16(n)`` still equals ``prior`` bit for bit,
* ``m, k`` or ``n == 0`` leaves ``C`` untouched.

Sizes are traced (arrays), so one compilation covers many scenarios, run one after another on the
compiled planes (``each_scenario``); traced sizes under ``jax.vmap`` are test_verdicts.py's.
"""

from __future__ import annotations

import zlib

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from conftest import ON_GPU, primitive_counts

import ascjax as aj
from ascjax import Buffer, Verdict

NP_DTYPE = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32, "int8": np.int8}
K0 = {"float16": 16, "bfloat16": 16, "float32": 8, "int8": 32}  # 32 B / sizeof(dtype)
C_DTYPE = {"float16": "float32", "bfloat16": "float32", "float32": "float32", "int8": "int32"}
F32_MAX = float(np.finfo(np.float32).max)
I32_MAX, I32_MIN = int(np.iinfo(np.int32).max), int(np.iinfo(np.int32).min)
BIAS2_ADDR = 256  # the explicit-bias tile sits away from BiasTable address 0


def _ceil(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def _random(rng, shape, dtype: str, scale: float = 1.0) -> np.ndarray:
    if dtype == "int8":
        return rng.integers(-128, 128, shape).astype(np.int8)
    if dtype == "int32":
        return rng.integers(-(10**6), 10**6, shape).astype(np.int32)
    x = rng.standard_normal(shape) * scale
    x = np.where(x == 0, 1.0, x)  # garbage must be nonzero to prove it does not contribute
    return x.astype(NP_DTYPE.get(dtype, np.float32))


def _sync(k: aj.Program, src: str, dst: str) -> None:
    """SetFlag/WaitFlag pair: ``dst`` waits until ``src`` has finished what it issued so far."""
    k.sync_notify(src, dst, 0)
    k.sync_wait(src, dst, 0)


# -- the kernel --------------------------------------------------------------------------------
def mmad_kernel(
    k: aj.Program,
    *,
    M,
    K,
    N,
    adt,
    m,
    kk,
    n,
    init_zero=False,
    src_bt=False,
    disable_gemv=False,
    explicit_bias=False,
    b_kn=False,
    saturation=None,
):
    """Fill C with a full-size mmad (-> GM ``prior``), then run the mmad under test (-> GM ``out``).

    GM ``a`` is (Mp, Kp) and ``b`` (Np, Kp) holding B^T (``b_kn``: (Kp, Np) holding B), so the
    whole padded L1/L0 tiles hold data. ``bias`` (1 x Np) goes to the BiasTable tile at address 0,
    ``bias2`` to the one at BIAS2_ADDR (the explicit ``bias=`` overload). ``m, kk, n``, the init
    flags, ``disable_gemv`` and ``saturation`` may be traced.
    """
    cdt = C_DTYPE[adt]
    mp, kp, np_ = _ceil(M, 16), _ceil(K, K0[adt]), _ceil(N, 16)
    a_l1 = k.alloc("L1", (mp, kp), adt, name="a_l1")
    b_l1 = k.alloc("L1", (kp, np_) if b_kn else (np_, kp), adt, name="b_l1")
    bias_l1 = k.alloc("L1", (1, np_), cdt, fmt="ND", name="bias_l1")
    bias2_l1 = k.alloc("L1", (1, np_), cdt, fmt="ND", name="bias2_l1")
    a_l0 = k.alloc("L0A", (M, K), adt, name="a_l0")
    b_l0 = k.alloc("L0B", (K, N), adt, name="b_l0")
    c_l0 = k.alloc("L0C", (M, N), cdt, name="c_l0")
    bt = k.alloc(Buffer.BT, (1, N), cdt, addr=0, name="bt")
    bt2 = k.alloc(Buffer.BT, (1, N), cdt, addr=BIAS2_ADDR, name="bt2")

    k.copy_gm2l1_nd2nz(a_l1, "a")
    k.copy_gm2l1_nd2nz(b_l1, "b")
    k.copy_gm2l1(bias_l1, "bias")
    k.copy_gm2l1(bias2_l1, "bias2")
    _sync(k, "MTE2", "MTE1")
    k.copy_l12l0a(a_l0, a_l1)
    k.copy_l12l0b(b_l0, b_l1, transpose=b_kn)
    k.copy_l12bt(bt, bias_l1)
    k.copy_l12bt(bt2, bias2_l1)
    _sync(k, "MTE1", "M")
    k.mmad(c_l0, a_l0, b_l0, M, K, N, c_matrix_init_val=True, disable_gemv=True)
    _sync(k, "M", "FIX")
    k.fixpipe("prior", c_l0, m=mp, n=np_)  # the whole padded tile
    _sync(k, "FIX", "M")
    k.sync_pipe("M")  # the next mmad may accumulate onto this one's C
    if saturation is not None:
        k.set_ctrl_saturation(saturation)
    if explicit_bias:
        k.mmad(c_l0, a_l0, b_l0, m, kk, n, bias=bt2, disable_gemv=disable_gemv)
    else:
        k.mmad(
            c_l0, a_l0, b_l0, m, kk, n, c_matrix_init_val=init_zero, c_matrix_source=src_bt, disable_gemv=disable_gemv
        )
    _sync(k, "M", "FIX")
    k.fixpipe("out", c_l0, m=mp, n=np_)
    k.sync_pipe("ALL")


def make_inputs(M, K, N, adt, seed, *, b_kn=False, scale=1.0):
    rng = np.random.default_rng(seed)
    cdt = C_DTYPE[adt]
    mp, kp, np_ = _ceil(M, 16), _ceil(K, K0[adt]), _ceil(N, 16)
    a = _random(rng, (mp, kp), adt, scale)
    b_nk = _random(rng, (np_, kp), adt, scale)
    return {
        "a": a,
        "b": np.ascontiguousarray(b_nk.T) if b_kn else b_nk,
        "bias": _random(rng, (1, np_), cdt),
        "bias2": _random(rng, (1, np_), cdt),
    }


def outputs_for(M, N, adt):
    shape = (_ceil(M, 16), _ceil(N, 16))
    return {"prior": (shape, C_DTYPE[adt]), "out": (shape, C_DTYPE[adt])}


def b_matrix(inputs, b_kn=False):
    """B (K x N) as stored."""
    return inputs["b"] if b_kn else inputs["b"].T


def each_scenario(one, traced: dict):
    """``one(params)`` per scenario of ``traced`` (arrays with a leading scenario axis), stacked as a vmap stacks.

    Each scenario's parameters are arrays, so each plane compiles once for all of them, and the control plane's
    program is the one every small kernel shares; a ``jax.vmap`` would compile the whole run per test."""
    n = len(next(iter(traced.values())))
    rows = [one({name: jnp.asarray(v[i]) for name, v in traced.items()}) for i in range(n)]
    return jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *rows)


def run_sweep(chip, static: dict, inputs, outputs, traced: dict):
    """One compilation, many scenarios: aj.run over the traced params, one by one."""

    def one(tp):
        res = aj.run(mmad_kernel, inputs, outputs, chip=chip, params={**static, **tp})
        return res.outputs, res.verdict

    traced = {name: jnp.asarray(v) for name, v in traced.items()}
    outs, verdicts = each_scenario(one, traced)
    return {name: np.asarray(v) for name, v in outs.items()}, np.asarray(verdicts)


# -- the reference -----------------------------------------------------------------------------
def check_product(got, a, b, init, m, kk, n, cdt, what=""):
    """got[:m, :n] == init[:m, :n] + a[:m, :kk] @ b[:kk, :n], computed exactly in float64 / int64."""
    got = np.asarray(got)[:m, :n]
    init = np.asarray(init)
    if init.ndim == 2:  # a whole C (rows x cols) or a bias row (1 x cols)
        init = init[:m, :n] if init.shape[0] > 1 else init[:, :n]
    init = np.broadcast_to(init, (m, n))
    if cdt == "int32":
        want = init.astype(np.int64) + a[:m, :kk].astype(np.int64) @ b[:kk, :n].astype(np.int64)
        assert np.all((want >= I32_MIN) & (want <= I32_MAX)), "test data must not overflow here"
        assert got.dtype == np.int32
        np.testing.assert_array_equal(got, want.astype(np.int32), err_msg=what)
        return
    a64, b64, i64 = a[:m, :kk].astype(np.float64), b[:kk, :n].astype(np.float64), init.astype(np.float64)
    want = i64 + a64 @ b64
    # f32 accumulation of kk products (f16/bf16 products are exact in f32, f32 ones round once)
    bound = np.abs(i64) + np.abs(a64) @ np.abs(b64)
    tol = 2.0 * (kk + 2) * 2.0**-24 * bound + 1e-30
    assert got.dtype == np.float32
    err = np.abs(got.astype(np.float64) - want)
    assert np.all(err <= tol), f"{what}: max error {err.max():.3g}, allowed {tol[np.argmax(err - tol)]:.3g}"


def check_untouched(out, prior, m, n, what=""):
    """Everything outside the ceil16(m) x ceil16(n) region is bit-for-bit the prior C."""
    mp, np_ = _ceil(m, 16), _ceil(n, 16)
    outside = np.ones(out.shape, bool)
    outside[:mp, :np_] = False
    np.testing.assert_array_equal(out[outside], prior[outside], err_msg=what)


# -- 1. the sweep: every dtype on every chip, random sizes, all C-init modes ---------------------
# tile sizes (M, K, N), deliberately not multiples of 16 / K0 (and one that is)
SWEEP = [
    ("a2", "float16", (37, 50, 23), False),
    ("a2", "bfloat16", (20, 33, 40), False),
    ("a2", "float32", (45, 13, 17), False),
    ("a2", "int8", (18, 70, 31), False),
    ("a3", "float16", (32, 64, 48), True),  # whole fractals, B loaded transposed (L1 holds K x N)
    # A3 has A2's cube (one arch): its other dtypes run under -m slow
    pytest.param("a3", "bfloat16", (17, 100, 9), False, marks=pytest.mark.slow),
    pytest.param("a3", "float32", (30, 27, 33), False, marks=pytest.mark.slow),
    pytest.param("a3", "int8", (40, 33, 16), False, marks=pytest.mark.slow),
    ("950", "float16", (21, 47, 35), False),
    ("950", "bfloat16", (48, 20, 29), True),
    ("950", "float32", (19, 41, 26), False),
    ("950", "int8", (35, 95, 50), False),
]
# C-init modes as (c_matrix_init_val, c_matrix_source)
ZERO, ACC, BT, ZERO_OVER_BT = (True, False), (False, False), (False, True), (True, True)


def sweep_scenarios(chip, M, K, N, adt, seed):
    """(m, k, n, (init_zero, src_bt), disable_gemv) rows: random, edge and special cases."""
    rng = np.random.default_rng(seed)
    k0 = K0[adt]
    rows = [
        (M, K, N, ZERO, False),
        (M, K, N, ACC, False),
        (M, K, N, BT, False),
        (min(M, 16), min(K, k0), min(N, 16), ACC, False),
        (M, 1, N, BT, False),
        (2, K, 1, ACC, False),
        (0, K, N, ZERO, False),  # no-ops, even though init_val=True would have zeroed C
        (M, 0, N, ZERO, False),
        (M, K, 0, BT, False),
        (1, K, N, ACC, False),  # m == 1 with a fractal A: LAYOUT unless 950 disables GEMV
        (1, max(1, K - 3), max(1, N - 5), ZERO, True),
    ]
    modes = [ZERO, ACC, BT, ZERO_OVER_BT]
    for i in range(9):
        rows.append(
            (
                int(rng.integers(2, M + 1)),
                int(rng.integers(1, K + 1)),
                int(rng.integers(1, N + 1)),
                modes[i % 4],
                bool(rng.integers(0, 2)),
            )
        )
    return rows


@pytest.mark.parametrize(
    "chip, adt, shape, b_kn",
    SWEEP,
    ids=[f"{c}-{d}-{'x'.join(map(str, s))}" for c, d, s, _ in (getattr(p, "values", p) for p in SWEEP)],
)
def test_mmad_sweep(chip, adt, shape, b_kn):
    M, K, N = shape
    seed = zlib.crc32(f"{chip}-{adt}".encode())
    inputs = make_inputs(M, K, N, adt, seed, b_kn=b_kn)
    rows = sweep_scenarios(chip, M, K, N, adt, seed)
    traced = {
        "m": np.array([r[0] for r in rows], np.int32),
        "kk": np.array([r[1] for r in rows], np.int32),
        "n": np.array([r[2] for r in rows], np.int32),
        "init_zero": np.array([r[3][0] for r in rows]),
        "src_bt": np.array([r[3][1] for r in rows]),
        "disable_gemv": np.array([r[4] for r in rows]),
    }
    static = dict(M=M, K=K, N=N, adt=adt, b_kn=b_kn)
    outs, verdicts = run_sweep(chip, static, inputs, outputs_for(M, N, adt), traced)
    a, b, cdt = inputs["a"], b_matrix(inputs, b_kn), C_DTYPE[adt]
    for i, (m, kk, n, (init_zero, src_bt), dg) in enumerate(rows):
        what = f"scenario {i}: m={m} k={kk} n={n} init_val={init_zero} source={src_bt} disable_gemv={dg}"
        prior, out = outs["prior"][i], outs["out"][i]
        check_product(prior, a, b, 0, M, K, N, cdt, what + " (prior, full size)")
        gemv_layout_error = m == 1 and not (chip == "950" and dg)
        assert verdicts[i] == (Verdict.LAYOUT if gemv_layout_error else Verdict.OK), what
        if gemv_layout_error or 0 in (m, kk, n):
            np.testing.assert_array_equal(out, prior, err_msg=what + ": C must be unchanged")
            continue
        init = 0 if init_zero else (inputs["bias"][:, :n] if src_bt else prior)
        check_product(out, a, b, init, m, kk, n, cdt, what)
        check_untouched(out, prior, m, n, what)


# -- 2. the explicit bias overload ----------------------------------------------------------------
@pytest.mark.parametrize("chip, adt", [("a2", "float16"), ("a3", "int8"), ("950", "float32"), ("950", "bfloat16")])
def test_mmad_explicit_bias_tile(chip, adt):
    """``bias=`` reads that tile (at a nonzero address), not BiasTable address 0 and not L0C."""
    M, K, N = 33, 40, 30
    inputs = make_inputs(M, K, N, adt, seed=11)
    rows = [(M, K, N), (16, K0[adt], 16), (5, 7, 3), (M, 1, 1), (0, K, N), (M, K, 0)]
    traced = {
        "m": np.array([r[0] for r in rows], np.int32),
        "kk": np.array([r[1] for r in rows], np.int32),
        "n": np.array([r[2] for r in rows], np.int32),
    }
    outs, verdicts = run_sweep(
        chip, dict(M=M, K=K, N=N, adt=adt, explicit_bias=True), inputs, outputs_for(M, N, adt), traced
    )
    assert np.all(verdicts == Verdict.OK)
    a, b, cdt = inputs["a"], b_matrix(inputs), C_DTYPE[adt]
    for i, (m, kk, n) in enumerate(rows):
        prior, out = outs["prior"][i], outs["out"][i]
        if 0 in (m, kk, n):
            np.testing.assert_array_equal(out, prior)
            continue
        check_product(out, a, b, inputs["bias2"][:, :n], m, kk, n, cdt, f"m={m} k={kk} n={n}")
        check_untouched(out, prior, m, n)


def test_explicit_bias_rejects_init_flags():
    inputs = make_inputs(16, 16, 16, "float16", seed=0)

    def kernel(k):
        a = k.alloc("L0A", (16, 16), "float16", name="a")
        b = k.alloc("L0B", (16, 16), "float16", name="b")
        c = k.alloc("L0C", (16, 16), "float32", name="c")
        bias = k.alloc(Buffer.BT, (1, 16), "float32", name="bias")
        k.mmad(c, a, b, 16, 16, 16, bias=bias, c_matrix_init_val=True)

    with pytest.raises(ValueError, match="explicit bias"):
        aj.run(kernel, inputs, {})


def test_bias_from_half_precision_l1_row():
    """copy_l12bt converts an f16 L1 row to the f32 BiasTable; c_matrix_source=True reads it."""
    M, K, N = 16, 16, 20
    rng = np.random.default_rng(5)
    a = _random(rng, (M, K), "float16")
    bt_nk = _random(rng, (32, K), "float16")
    bias = _random(rng, (1, 32), "float16")

    def kernel(k):
        a_l1 = k.alloc("L1", (M, K), "float16", name="a_l1")
        b_l1 = k.alloc("L1", (32, K), "float16", name="b_l1")
        bias_l1 = k.alloc("L1", (1, 32), "float16", fmt="ND", name="bias_l1")
        a0 = k.alloc("L0A", (M, K), "float16", name="a0")
        b0 = k.alloc("L0B", (K, N), "float16", name="b0")
        c = k.alloc("L0C", (M, N), "float32", name="c")
        bt = k.alloc(Buffer.BT, (1, N), "float32", addr=0, name="bt")
        k.copy_gm2l1_nd2nz(a_l1, "a")
        k.copy_gm2l1_nd2nz(b_l1, "b")
        k.copy_gm2l1(bias_l1, "bias")
        _sync(k, "MTE2", "MTE1")
        k.copy_l12l0a(a0, a_l1)
        k.copy_l12l0b(b0, b_l1)
        k.copy_l12bt(bt, bias_l1)
        _sync(k, "MTE1", "M")
        k.mmad(c, a0, b0, M, K, N, c_matrix_source=True)
        _sync(k, "M", "FIX")
        k.fixpipe("out", c, m=M, n=N)

    res = aj.run(kernel, {"a": a, "b": bt_nk, "bias": bias}, {"out": ((M, N), "float32")}, chip="a2")
    assert res.ok
    check_product(res.outputs["out"], a, bt_nk.T, bias[:, :N].astype(np.float32), M, K, N, "float32")


# -- 3. static sizes and flags give exactly what traced ones give ---------------------------------
STATIC_VS_TRACED = [
    ("950", "float16", [(30, 37, 17, ZERO), (17, 3, 23, BT)]),
    pytest.param("a2", "int8", [(37, 45, 20, ACC), (5, 50, 1, ZERO_OVER_BT)], marks=pytest.mark.slow),
]


@pytest.mark.parametrize("chip, adt, cases", STATIC_VS_TRACED, ids=["950-float16", "a2-int8"])
def test_traced_sizes_match_static(chip, adt, cases):
    """The same scenario with Python ints/bools and with jnp scalars gives bit-identical C."""
    M, K, N = 37, 50, 23
    inputs = make_inputs(M, K, N, adt, seed=21)
    outputs = outputs_for(M, N, adt)
    static = dict(M=M, K=K, N=N, adt=adt)
    a, b, cdt = inputs["a"], b_matrix(inputs), C_DTYPE[adt]
    for i, (m, kk, n, (iz, sb)) in enumerate(cases):
        fixed = aj.run(
            mmad_kernel,
            inputs,
            outputs,
            chip=chip,
            params={**static, "m": m, "kk": kk, "n": n, "init_zero": iz, "src_bt": sb},
        )
        traced = {"m": jnp.int32(m), "kk": jnp.int32(kk), "n": jnp.int32(n)}
        traced.update(init_zero=jnp.asarray(iz), src_bt=jnp.asarray(sb))
        dynamic = aj.run(mmad_kernel, inputs, outputs, chip=chip, params={**static, **traced})
        assert fixed.ok and dynamic.ok
        for name in ("prior", "out"):
            np.testing.assert_array_equal(
                np.asarray(dynamic.outputs[name]), np.asarray(fixed.outputs[name]), err_msg=f"{name}, case {i}"
            )
        prior, out = np.asarray(fixed.outputs["prior"]), np.asarray(fixed.outputs["out"])
        check_product(prior, a, b, 0, M, K, N, cdt, f"prior, case {i}")
        check_product(out, a, b, 0 if iz else (inputs["bias"] if sb else prior), m, kk, n, cdt, f"case {i}")
        check_untouched(out, prior, m, n)


def test_static_zero_sizes_are_noops():
    """Static m, k or n == 0: nothing is written, though each call asks to zero C first."""
    M, K, N, adt = 32, 32, 32, "float16"
    inputs = make_inputs(M, K, N, adt, seed=8)

    def kernel(k):
        a_l1 = k.alloc("L1", (M, K), adt, name="a_l1")
        b_l1 = k.alloc("L1", (N, K), adt, name="b_l1")
        a0 = k.alloc("L0A", (M, K), adt, name="a0")
        b0 = k.alloc("L0B", (K, N), adt, name="b0")
        c = k.alloc("L0C", (M, N), "float32", name="c")
        k.copy_gm2l1_nd2nz(a_l1, "a")
        k.copy_gm2l1_nd2nz(b_l1, "b")
        _sync(k, "MTE2", "MTE1")
        k.copy_l12l0a(a0, a_l1)
        k.copy_l12l0b(b0, b_l1)
        _sync(k, "MTE1", "M")
        k.mmad(c, a0, b0, M, K, N, c_matrix_init_val=True)
        _sync(k, "M", "FIX")
        k.fixpipe("prior", c)
        _sync(k, "FIX", "M")
        k.mmad(c, a0, b0, 0, K, N, c_matrix_init_val=True)
        k.mmad(c, a0, b0, M, 0, N, c_matrix_init_val=True)
        k.mmad(c, a0, b0, M, K, 0, c_matrix_init_val=True)
        _sync(k, "M", "FIX")
        k.fixpipe("out", c)

    res = aj.run(kernel, inputs, outputs_for(M, N, adt), chip="a2")
    assert res.ok
    prior = np.asarray(res.outputs["prior"])
    check_product(prior, inputs["a"], inputs["b"].T, 0, M, K, N, "float32")
    np.testing.assert_array_equal(np.asarray(res.outputs["out"]), prior)


# -- 4. GEMV: m == 1 reads A as ND -----------------------------------------------------------------
def gemv_kernel(k: aj.Program, *, K, N, adt, m, kk, n, init_zero, src_bt):
    """A (1 x K) ND: GM -> ND L1 -> ND L0A; B^T (Np x Kp) Nz; C (1 x N) in L0C."""
    cdt = C_DTYPE[adt]
    kp, np_ = _ceil(K, K0[adt]), _ceil(N, 16)
    a_l1 = k.alloc("L1", (1, K), adt, fmt="ND", name="a_l1")
    b_l1 = k.alloc("L1", (np_, kp), adt, name="b_l1")
    bias_l1 = k.alloc("L1", (1, np_), cdt, fmt="ND", name="bias_l1")
    a_l0 = k.alloc("L0A", (1, K), adt, fmt="ND", name="a_l0")
    b_l0 = k.alloc("L0B", (K, N), adt, name="b_l0")
    c_l0 = k.alloc("L0C", (1, N), cdt, name="c_l0")
    bt = k.alloc(Buffer.BT, (1, N), cdt, addr=0, name="bt")
    k.copy_gm2l1(a_l1, "a")
    k.copy_gm2l1_nd2nz(b_l1, "b")
    k.copy_gm2l1(bias_l1, "bias")
    _sync(k, "MTE2", "MTE1")
    k.copy_l12l0a(a_l0, a_l1)
    k.copy_l12l0b(b_l0, b_l1)
    k.copy_l12bt(bt, bias_l1)
    _sync(k, "MTE1", "M")
    k.mmad(c_l0, a_l0, b_l0, 1, K, N, c_matrix_init_val=True)
    _sync(k, "M", "FIX")
    k.fixpipe("prior", c_l0, m=16, n=np_)
    _sync(k, "FIX", "M")
    k.sync_pipe("M")
    k.mmad(c_l0, a_l0, b_l0, m, kk, n, c_matrix_init_val=init_zero, c_matrix_source=src_bt)
    _sync(k, "M", "FIX")
    k.fixpipe("out", c_l0, m=16, n=np_)


@pytest.mark.parametrize("chip, adt", [("950", "float16"), ("950", "int8"), ("a2", "bfloat16"), ("a2", "float32")])
def test_gemv(chip, adt):
    K, N = 45, 37
    rng = np.random.default_rng(31)
    cdt = C_DTYPE[adt]
    kp, np_ = _ceil(K, K0[adt]), _ceil(N, 16)
    inputs = {"a": _random(rng, (1, K), adt), "b": _random(rng, (np_, kp), adt), "bias": _random(rng, (1, np_), cdt)}
    rows = [
        (K, N, ZERO),
        (K, N, ACC),
        (K, N, BT),
        (1, 1, ZERO),
        (K0[adt] + 1, 16, ACC),
        (10, N - 3, BT),
        (K - 1, 20, ZERO_OVER_BT),
        (0, N, ZERO),
        (K, 0, ZERO),
    ]

    def one(tp):
        res = aj.run(
            gemv_kernel,
            inputs,
            {"prior": ((16, np_), cdt), "out": ((16, np_), cdt)},
            chip=chip,
            params=dict(K=K, N=N, adt=adt, m=1, **tp),
        )
        return res.outputs, res.verdict

    traced = {
        "kk": jnp.array([r[0] for r in rows], jnp.int32),
        "n": jnp.array([r[1] for r in rows], jnp.int32),
        "init_zero": jnp.array([r[2][0] for r in rows]),
        "src_bt": jnp.array([r[2][1] for r in rows]),
    }
    outs, verdicts = each_scenario(one, traced)
    assert np.all(np.asarray(verdicts) == Verdict.OK)
    a, b = inputs["a"], inputs["b"].T
    for i, (kk, n, (iz, sb)) in enumerate(rows):
        prior, out = np.asarray(outs["prior"][i]), np.asarray(outs["out"][i])
        check_product(prior, a, b, 0, 1, K, N, cdt, "prior")
        if 0 in (kk, n):
            np.testing.assert_array_equal(out, prior)
            continue
        init = 0 if iz else (inputs["bias"][:, :n] if sb else prior)
        check_product(out, a, b, init, 1, kk, n, cdt, f"k={kk} n={n}")
        check_untouched(out, prior, 1, n)


def _layout_kernel(k, *, a_fmt, m, disable_gemv):
    a = k.alloc("L0A", (16, 32), "float16", fmt=a_fmt, name="a")
    b = k.alloc("L0B", (32, 16), "float16", name="b")
    c = k.alloc("L0C", (16, 16), "float32", name="c")
    k.mmad(c, a, b, m, 32, 16, c_matrix_init_val=True, disable_gemv=disable_gemv)


@pytest.mark.parametrize("chip", ["a2", "a3", "950"])
def test_gemv_layout_is_checked_statically(chip):
    frac = aj.get_chip(chip).a_format
    with pytest.raises(ValueError, match="GEMV layout"):
        aj.run(_layout_kernel, {}, {}, chip=chip, params=dict(a_fmt=frac, m=1, disable_gemv=False))
    # ND A but no GEMV (an ND L0A tile holds one row, so the size rule may speak first)
    with pytest.raises(ValueError, match="GEMV layout|mmad sizes"):
        aj.run(_layout_kernel, {}, {}, chip=chip, params=dict(a_fmt="ND", m=2, disable_gemv=False))
    if chip == "950":
        with pytest.raises(ValueError, match="GEMV layout"):  # GEMV disabled: ND A is wrong
            aj.run(_layout_kernel, {}, {}, chip=chip, params=dict(a_fmt="ND", m=1, disable_gemv=True))
    else:  # arch 2201 cannot turn GEMV off
        with pytest.raises(ValueError, match="GEMV layout"):
            aj.run(_layout_kernel, {}, {}, chip=chip, params=dict(a_fmt=frac, m=1, disable_gemv=True))


def test_m1_without_gemv_on_950():
    """950 with disable_gemv=True: m == 1 on an Nz A computes row 0 normally."""
    M, K, N, adt = 20, 40, 24, "float16"
    inputs = make_inputs(M, K, N, adt, seed=41)
    res = aj.run(
        mmad_kernel,
        inputs,
        outputs_for(M, N, adt),
        chip="950",
        params=dict(M=M, K=K, N=N, adt=adt, m=1, kk=33, n=21, init_zero=False, src_bt=True, disable_gemv=True),
    )
    assert res.ok
    out, prior = np.asarray(res.outputs["out"]), np.asarray(res.outputs["prior"])
    check_product(out, inputs["a"], inputs["b"].T, inputs["bias"][:, :21], 1, 33, 21, "float32")
    check_untouched(out, prior, 1, 21)


def _nop_kernel(k, *, a_fmt, m, kk):
    a = k.alloc("L0A", (16, 32), "float16", fmt=a_fmt, name="a")
    b = k.alloc("L0B", (32, 16), "float16", name="b")
    c = k.alloc("L0C", (16, 16), "float32", name="c")
    k.mmad(c, a, b, m, kk, 16, c_matrix_init_val=True)


@pytest.mark.parametrize("a_fmt, m, kk", [("ND", 0, 32), ("Zz", 1, 0)], ids=["nd-m0", "zz-m1-k0"])
def test_zero_size_is_noop_whatever_the_a_layout(a_fmt, m, kk):
    """A NOP (m, k or n == 0) reads no A, so the GEMV layout rule (m == 1 <=> ND A) must not fire."""
    static = aj.run(_nop_kernel, {}, {}, chip="a2", params=dict(a_fmt=a_fmt, m=m, kk=kk))
    assert static.ok, static.report()
    traced = aj.run(_nop_kernel, {}, {}, chip="a2", params=dict(a_fmt=a_fmt, m=jnp.int32(m), kk=jnp.int32(kk)))
    assert traced.ok, traced.report()


# -- 5. inf / NaN: saturation mode (default) and non-saturation mode -------------------------------
def _special_inputs(adt, M, K, N, kk):
    """A and B^T (whole padded tiles) with inf/NaN rows in the valid region and NaN/inf garbage past k."""
    rng = np.random.default_rng(51)
    mp, kp, np_ = _ceil(M, 16), _ceil(K, K0[adt]), _ceil(N, 16)
    a = rng.uniform(0.5, 1.5, (mp, kp))
    b_nk = rng.uniform(0.5, 1.5, (np_, kp))  # B > 0: signs of infinite sums are known
    a[0, 0] = np.inf  # -> +inf
    a[1, 2] = -np.inf  # -> -inf
    a[2, 3] = np.nan  # -> NaN
    a[3, 0], a[3, 1] = np.inf, -np.inf  # inf - inf -> NaN
    if adt != "float16":  # finite inputs whose sum overflows f32
        a[4, :4] = 3.0e38
        b_nk[:, :4] = 1.0
    a[5, 5] = -1.0e4  # a plain large finite row
    a[:, kk:] = np.nan  # garbage past the valid k: must not turn the result into NaN
    a[6:, kk + 1 :] = np.inf
    b_nk[:, kk:] = np.inf
    b_nk[16:, :] = np.nan  # columns past n: outside C's valid region
    dt = NP_DTYPE[adt]
    return {
        "a": a.astype(dt),
        "b": b_nk.astype(dt),
        "bias": np.zeros((1, np_), np.float32),
        "bias2": np.zeros((1, np_), np.float32),
    }


@pytest.mark.parametrize("chip, adt", [("a2", "float16"), ("a3", "bfloat16"), ("950", "float32")])
def test_inf_nan_saturation_modes(chip, adt):
    M, K, N = 24, 20, 30
    m, kk, n = 16, 12, 16
    inputs = _special_inputs(adt, M, K, N, kk)
    traced = {
        "saturation": np.array([True, False]),
        "m": np.array([m, m], np.int32),
        "kk": np.array([kk, kk], np.int32),
        "n": np.array([n, n], np.int32),
        "init_zero": np.array([True, True]),
    }
    outs, verdicts = run_sweep(chip, dict(M=M, K=K, N=N, adt=adt), inputs, outputs_for(M, N, adt), traced)
    assert np.all(verdicts == Verdict.OK)
    a64 = inputs["a"][:m, :kk].astype(np.float64)
    b64 = inputs["b"][:n, :kk].T.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        exact = a64 @ b64
        propagated = exact.astype(np.float32)  # beyond f32 range -> inf
    saturated = np.where(np.isnan(exact), 0.0, np.clip(exact, -F32_MAX, F32_MAX)).astype(np.float32)
    # the special rows say what they should: +max/+inf, -max/-inf, 0/NaN, 0/NaN, overflow
    assert np.all(saturated[0] == F32_MAX) and np.all(propagated[0] == np.inf)
    assert np.all(saturated[1] == -F32_MAX) and np.all(propagated[1] == -np.inf)
    assert np.all(saturated[2:4] == 0) and np.all(np.isnan(propagated[2:4]))
    if adt != "float16":
        assert np.all(saturated[4] == F32_MAX) and np.all(propagated[4] == np.inf)
    ordinary = np.isfinite(exact) & (np.abs(exact) < F32_MAX)
    assert ordinary[:4].sum() == 0 and ordinary[6:].all()
    with np.errstate(invalid="ignore", over="ignore"):
        bound = np.abs(a64) @ np.abs(b64)
    for i, want in enumerate((saturated, propagated)):
        got = outs["out"][i][:m, :n]
        np.testing.assert_array_equal(got[~ordinary], want[~ordinary], err_msg=f"mode {i}: special values")
        err = np.abs(got[ordinary].astype(np.float64) - exact[ordinary])
        assert np.all(err <= 2.0 * (kk + 2) * 2.0**-24 * bound[ordinary]), f"mode {i}: finite values"
        # the prior (saturation mode, full K with garbage) has no inf/NaN; outside the region it is kept
        assert np.all(np.isfinite(outs["prior"][i]))
        check_untouched(outs["out"][i], outs["prior"][i], m, n)


# -- 6. int32 saturation ------------------------------------------------------------------------
KSAT = 1024
POS_STEP = 127 * 127 * KSAT  # 16,516,096 per mmad
NEG_STEP = 127 * -128 * KSAT  # -16,646,144 per mmad
N_POS = I32_MAX // POS_STEP + 1  # 131: the first mmad whose sum passes int32 max
N_NEG = -I32_MIN // -NEG_STEP + 1  # 130: the first that passes int32 min
N_MMADS = N_POS + 2


def _int_sat_kernel(k, *, saturation):
    """N_MMADS accumulating int8 mmads (one init + a lax.scan loop), C copied to GM after each."""
    a_l1 = k.alloc("L1", (16, KSAT), "int8", name="a_l1")
    b_l1 = k.alloc("L1", (16, KSAT), "int8", name="b_l1")
    a0 = k.alloc("L0A", (16, KSAT), "int8", name="a0")
    b0 = k.alloc("L0B", (KSAT, 16), "int8", name="b0")
    c = k.alloc("L0C", (16, 16), "int32", name="c")
    k.set_ctrl_saturation(saturation)  # integer mmad saturates whatever CTRL[48] says
    k.copy_gm2l1_nd2nz(a_l1, "a")
    k.copy_gm2l1_nd2nz(b_l1, "b")
    _sync(k, "MTE2", "MTE1")
    k.copy_l12l0a(a0, a_l1)
    k.copy_l12l0b(b0, b_l1)
    _sync(k, "MTE1", "M")
    k.mmad(c, a0, b0, 16, KSAT, 16, c_matrix_init_val=True)
    _sync(k, "M", "FIX")
    k.fixpipe("out", c, dst_row=0)
    k.sync_notify("FIX", "M", 0)

    def step(i):
        k.sync_wait("FIX", "M", 0)  # C was read out: it may be written again
        k.sync_pipe("M")
        k.mmad(c, a0, b0, 16, KSAT, 16)  # accumulate onto L0C
        _sync(k, "M", "FIX")
        k.fixpipe("out", c, dst_row=(i + 1) * 16)
        k.sync_notify("FIX", "M", 0)

    k.range(N_MMADS - 1, step)
    k.sync_wait("FIX", "M", 0)


def test_int32_saturates_when_accumulating():
    assert (N_POS - 1) * POS_STEP <= I32_MAX < N_POS * POS_STEP
    assert (N_NEG - 1) * NEG_STEP >= I32_MIN > N_NEG * NEG_STEP
    a = np.full((16, KSAT), 127, np.int8)
    col = np.array([127, -128, 0, 1] * 4, np.int8)  # B columns: +, -, zero, small
    b_nk = np.repeat(col[:, None], KSAT, axis=1)
    traced = {"saturation": np.array([True, False])}

    def one(tp):
        res = aj.run(_int_sat_kernel, {"a": a, "b": b_nk}, {"out": ((16 * N_MMADS, 16), "int32")}, chip="a2", params=tp)
        return res.outputs["out"], res.verdict

    outs, verdicts = each_scenario(one, traced)
    assert np.all(np.asarray(verdicts) == Verdict.OK)
    j = np.arange(1, N_MMADS + 1, dtype=np.int64)[:, None]  # after the j-th mmad
    per_mmad = 127 * col.astype(np.int64)[None, :] * KSAT
    want = np.clip(j * per_mmad, I32_MIN, I32_MAX)
    for i in range(2):
        got = np.asarray(outs[i]).reshape(N_MMADS, 16, 16)
        assert got.dtype == np.int32
        np.testing.assert_array_equal(got, np.broadcast_to(want[:, None, :], got.shape).astype(np.int32))
        assert got[N_POS - 2, 0, 0] == (N_POS - 1) * POS_STEP  # one step below the limit: exact
        assert got[N_POS - 1, 0, 0] == I32_MAX and got[-1, 0, 0] == I32_MAX
        assert got[N_NEG - 1, 0, 1] == I32_MIN and got[-1, 0, 1] == I32_MIN


@pytest.mark.parametrize("chip", ["950"])
def test_int32_saturates_from_bias(chip):
    """A large BiasTable init plus one product saturates instead of wrapping."""
    M, K, N = 16, 64, 32
    a = np.full((M, K), 127, np.int8)
    col = np.array([127, -128] * 16, np.int8)
    b_nk = np.repeat(col[:, None], K, axis=1)
    step = 127 * col.astype(np.int64) * K  # +-1,032,256 / -1,040,384
    bias = np.where(col > 0, I32_MAX - 1_000_000, I32_MIN + 1_000_000).astype(np.int32)[None, :]
    bias[0, 2] = I32_MAX - 2_000_000  # stays below the limit: exact
    inputs = {"a": a, "b": b_nk, "bias": bias, "bias2": bias}
    outs, verdicts = run_sweep(
        chip,
        dict(M=M, K=K, N=N, adt="int8"),
        inputs,
        outputs_for(M, N, "int8"),
        {
            "m": np.array([M, M], np.int32),
            "kk": np.array([K, K], np.int32),
            "n": np.array([N, N], np.int32),
            "init_zero": np.array([False, False]),
            "src_bt": np.array([True, True]),
            "saturation": np.array([True, False]),
        },
    )
    assert np.all(verdicts == Verdict.OK)
    want = np.clip(bias.astype(np.int64) + step[None, :], I32_MIN, I32_MAX).astype(np.int32)
    assert want[0, 0] == I32_MAX and want[0, 1] == I32_MIN and want[0, 2] < I32_MAX
    for i in range(2):
        np.testing.assert_array_equal(outs["out"][i], np.broadcast_to(want, (M, N)))


# -- 7. dtype combinations ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "adt, bdt, cdt",
    [
        ("float16", "float16", "int32"),
        ("int8", "int8", "float32"),
        ("float16", "bfloat16", "float32"),
        ("float32", "float32", "int32"),
    ],
)
def test_invalid_dtype_combinations_raise(adt, bdt, cdt):
    def kernel(k):
        a = k.alloc("L0A", (16, 32), adt, name="a")
        b = k.alloc("L0B", (32, 16), bdt, name="b")
        c = k.alloc("L0C", (16, 16), cdt, name="c")
        k.mmad(c, a, b, 16, 32, 16, c_matrix_init_val=True)

    with pytest.raises(ValueError, match="mmad dtypes"):
        aj.run(kernel, {}, {}, chip="950")


MATRIX = (((1,), (0,)), ((), ()))  # (m, k) @ (k, n)


@pytest.mark.xfail(ON_GPU, strict=False, reason="on a GPU cuBLAS may run a batched product with another algorithm "
                   "than one product alone (unmeasured there: no GPU since this test was written)")  # fmt: skip
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("in_axes", [(0, None), (None, 0), (0, 0)])
def test_products_have_the_same_bits_alone_and_in_a_vmap(dtype, in_axes):
    """The mmad's product (``core.same_bits_dot_general``) gives each scenario of a ``vmap`` the bits it has alone.
    JAX folds a batch of one operand into its rows or columns (a 6 x 32 x 32 batch of A against one B becomes one
    192 x 32 x 32 product), and on an AVX-512 CPU XLA sums that wider product in another order: a lowered K loop,
    a sweep or a launch then disagreed with the run alone in most last bits."""
    rng = np.random.default_rng(7)
    batch, m, k, n = 6, 32, 32, 32
    a = rng.uniform(-1, 1, (batch, m, k)).astype(dtype)
    b = rng.uniform(-1, 1, (batch, k, n)).astype(dtype)
    a_in, b_in = (x if axis == 0 else x[0] for x, axis in zip((a, b), in_axes))

    def product(x, y):
        return aj.core.same_bits_dot_general(x, y, MATRIX, jnp.float32)

    swept = np.asarray(jax.jit(jax.vmap(product, in_axes=in_axes))(a_in, b_in))
    twice = np.asarray(
        jax.jit(jax.vmap(jax.vmap(product, in_axes=in_axes), in_axes=(None, None), axis_size=2))(a_in, b_in)
    )
    for i in range(batch):
        alone = np.asarray(jax.jit(product)(a[i] if in_axes[0] == 0 else a_in, b[i] if in_axes[1] == 0 else b_in))
        np.testing.assert_array_equal(swept[i].view(np.uint32), alone.view(np.uint32))
        np.testing.assert_array_equal(twice[1, i].view(np.uint32), alone.view(np.uint32))
    reference = np.einsum("mk,kn->mn", a[0].astype(np.float64), b[0].astype(np.float64))
    np.testing.assert_allclose(swept[0], reference, rtol=1e-5, atol=1e-5)  # and it is the product


def test_the_product_is_differentiable():
    rng = np.random.default_rng(8)
    a, b = (
        jnp.asarray(rng.uniform(-1, 1, (16, 24)), jnp.float32),
        jnp.asarray(rng.uniform(-1, 1, (24, 8)), jnp.float32),
    )

    def loss(dot, x, y):
        return jnp.sum(jnp.tanh(dot(x, y)) ** 2)

    def ours(x, y):
        return aj.core.same_bits_dot_general(x, y, MATRIX, jnp.float32)

    def plain(x, y):
        return jnp.dot(x, y, precision=jax.lax.Precision.HIGHEST)

    for got, want in zip(jax.grad(loss, (1, 2))(ours, a, b), jax.grad(loss, (1, 2))(plain, a, b)):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-6)
    # under a vmap too: the loss is even in A, so its gradient at -A is minus the one at A
    batched = jax.vmap(jax.grad(loss, 1), in_axes=(None, 0, None))(ours, jnp.stack([a, -a]), b)
    np.testing.assert_allclose(np.asarray(batched[1]), -np.asarray(jax.grad(loss, 1)(ours, a, b)), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("k_valid, masked", [(64, False), (48, True)])
def test_a_static_k_over_every_column_masks_no_operand(k_valid, masked):
    """The K mask is for a partial K: with the whole K static, the product reads its operands as they are (no
    select left over them, which cost flash attention's data plane a fifth of its time); with a partial K it
    zeroes the columns past it."""
    chip = aj.get_chip("950")
    alloc = aj.Allocator(chip)
    a, b, c = (
        alloc.alloc("L0A", (64, 64), "float16"),
        alloc.alloc("L0B", (64, 64), "float16"),
        alloc.alloc("L0C", (64, 64), "float32"),
    )
    state = aj.State.create(chip, {}, ()).add_tile(a).add_tile(b).add_tile(c)

    def product(state):
        return aj.ops.mmad(state, c, a, b, 64, k_valid, 64, c_matrix_init_val=True).tile(c)

    eqns = jax.make_jaxpr(product)(state).jaxpr.eqns
    barrier = [e.primitive.name for e in eqns].index("optimization_barrier")
    before = primitive_counts(eqns[:barrier])  # the operands as the product reads them
    assert ("select_n" in before) == masked
