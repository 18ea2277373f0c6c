"""Low-precision cube inputs: fp8 (4 pairings) and HiFloat8 on 950, int4 on A2/A3, MX (MmadMx) on 950.

Every product is checked against a NumPy float64 / int64 reference computed from the operands'
stored values (ml_dtypes for fp8/fp4/int4/e8m0, the HiF8 value table for HiF8). Data are chosen
so that float32 accumulation is exact, so the check is bit for bit; one more run with arbitrary
HiF8 codes is checked to float32 accuracy. One compiled kernel covers all pairings of a chip;
other data reuse it (the race checker is off where it is not the subject: it only slows the
compilation). Bad inputs (wrong chip, MX scale address, MX family, K) sit beside their good twins;
a twin that only has to pass the trace-time rules is traced with ``jax.eval_shape``.
"""

from __future__ import annotations

import jax
import ml_dtypes
import numpy as np
import pytest

import ascjax as aj
from ascjax import ops
from ascjax.core.formats import hifloat8
from ascjax.engine import cube_class, fix_class

M, K, N = 16, 64, 16
FP8 = ("float8_e4m3fn", "float8_e5m2")
PAIRS_950 = [(a, b) for a in FP8 for b in FP8] + [("hifloat8", "hifloat8")]
# every MX element type on both sides, crossed within its family
MX_PAIRS = [
    ("float8_e4m3fn", "float8_e5m2"),
    ("float8_e5m2", "float8_e4m3fn"),
    ("float4_e2m1fn", "float4_e1m2"),
    ("float4_e1m2", "float4_e2m1fn"),
]
E1M2 = np.array([0, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 1.75])  # asc-devkit Fp4e1m2ToBf16, positive half


def _np_dtype(name):
    return {"hifloat8": np.uint8, "float4_e1m2": np.uint8}.get(name) or np.dtype(getattr(ml_dtypes, name))


def _traces(kernel, inputs, outputs, chip, sanitize=False, **kwargs) -> None:
    """Trace ``kernel`` through every trace-time rule without compiling or running it."""
    jax.eval_shape(lambda: aj.run(kernel, inputs, outputs, chip=chip, jit=False, sanitize=sanitize, **kwargs).outputs)


def _values(x: np.ndarray, name: str) -> np.ndarray:
    """float64 values of stored elements (independent of ascjax.formats for all but HiF8's table)."""
    if name == "hifloat8":
        return hifloat8.TABLE[x].astype(np.float64)  # the table itself is checked in test_formats_hifloat8.py
    if name == "float4_e1m2":
        return np.where(x & 8, -1.0, 1.0) * E1M2[x & 7]
    return x.astype(np.float64)


def _elements(rng, name: str, shape) -> np.ndarray:
    """Stored elements whose products and K-sums are exact in float32."""
    if name == "hifloat8":  # codes of multiples of 1/8 in [-4, 4]
        values = hifloat8.TABLE.astype(np.float64)
        nice = np.isfinite(values)
        nice[nice] = (np.abs(values[nice]) <= 4) & (values[nice] * 8 % 1 == 0)
        return rng.choice(np.flatnonzero(nice), shape).astype(np.uint8)
    if name == "float4_e1m2":
        return rng.integers(0, 16, shape).astype(np.uint8)
    if name == "int4":
        return rng.integers(-8, 8, shape).astype(ml_dtypes.int4)
    return (rng.integers(-32, 33, shape) / 8).astype(_np_dtype(name))


def _sync(k, src, dst):
    k.sync_notify(src, dst, 0)
    k.sync_wait(src, dst, 0)


def _cube_kernel(pairs, c_dtype="float32"):
    """One mmad per (a, b) dtype pair: GM a{i} (M x K), bt{i} (N x K, holding B^T) -> GM c{i}."""

    def kernel(k):
        staged = []
        for i, (da, db) in enumerate(pairs):
            a1, b1 = k.alloc("L1", (M, K), da), k.alloc("L1", (N, K), db)
            a0, b0 = k.alloc("L0A", (M, K), da), k.alloc("L0B", (K, N), db)
            k.copy_gm2l1_nd2nz(a1, f"a{i}")
            k.copy_gm2l1_nd2nz(b1, f"bt{i}")
            staged.append((a1, b1, a0, b0, k.alloc("L0C", (M, N), c_dtype)))
        _sync(k, "MTE2", "MTE1")
        for a1, b1, a0, b0, _ in staged:
            k.copy_l12l0a(a0, a1)
            k.copy_l12l0b(b0, b1)
        _sync(k, "MTE1", "M")
        for _, _, a0, b0, c in staged:
            k.mmad(c, a0, b0, M, K, N, c_matrix_init_val=True)
        _sync(k, "M", "FIX")
        for i, (*_, c) in enumerate(staged):
            k.fixpipe(f"c{i}", c)

    return kernel


def _inputs(rng, pairs):
    inputs, refs = {}, []
    for i, (da, db) in enumerate(pairs):
        a, bt = _elements(rng, da, (M, K)), _elements(rng, db, (N, K))
        inputs[f"a{i}"], inputs[f"bt{i}"] = a, bt
        refs.append(_values(a, da) @ _values(bt, db).T)
    return inputs, refs


CUBE_950 = _cube_kernel(PAIRS_950)
CUBE_INT4 = _cube_kernel([("int4", "int4")], "int32")


def test_fp8_and_hifloat8_pairings_on_950():
    rng = np.random.default_rng(1)
    outputs = {f"c{i}": ((M, N), "float32") for i in range(len(PAIRS_950))}
    inputs, refs = _inputs(rng, PAIRS_950)
    got = aj.run(CUBE_950, inputs, outputs, chip="950", throw=True, sanitize=False).outputs
    for i, ref in enumerate(refs):
        np.testing.assert_array_equal(np.asarray(got[f"c{i}"]), ref, err_msg=str(PAIRS_950[i]))
        assert np.any(ref != 0)
    # any finite HiF8 codes (2^-22 .. 2^15): float32 accumulation, checked to its accuracy (same compiled kernel)
    finite = np.flatnonzero(np.isfinite(hifloat8.TABLE)).astype(np.uint8)
    a, bt = rng.choice(finite, (M, K)), rng.choice(finite, (N, K))
    inputs.update({"a4": a, "bt4": bt})
    got = aj.run(CUBE_950, inputs, outputs, chip="950", throw=True, sanitize=False).outputs["c4"]
    va, vb = hifloat8.TABLE[a].astype(np.float64), hifloat8.TABLE[bt].astype(np.float64).T
    np.testing.assert_allclose(np.asarray(got), va @ vb, rtol=0, atol=float((np.abs(va) @ np.abs(vb)).max()) * 2e-7)


def test_int4_on_a2_a3():
    rng = np.random.default_rng(2)
    inputs, refs = _inputs(rng, [("int4", "int4")])
    outputs = {"c0": ((M, N), "int32")}
    got = aj.run(CUBE_INT4, inputs, outputs, chip="a3", throw=True, sanitize=False).outputs["c0"]
    np.testing.assert_array_equal(np.asarray(got), refs[0].astype(np.int64))
    _traces(CUBE_INT4, inputs, outputs, "a2")  # jit vs eager agreement of an op: tests/test_fixpipe_quant.py


@pytest.mark.parametrize(
    ("pair", "chip", "match"),
    [
        (
            ("float8_e4m3fn", "float8_e5m2"),
            "a2",
            r"not supported on chip a2 \(float8_e4m3fn x float8_e5m2 is a chip 950",
        ),
        (("hifloat8", "hifloat8"), "a3", r"not supported on chip a3 \(hifloat8 x hifloat8 is a chip 950"),
        (("int4", "int4"), "950", r"not supported on chip 950 \(int4 x int4 is a chip a2/a3"),
    ],
)
def test_low_precision_pairs_name_the_chip(pair, chip, match):
    outputs = {"c0": ((M, N), "int32" if pair[0] == "int4" else "float32")}
    inputs, _ = _inputs(np.random.default_rng(3), [pair])
    kernel = _cube_kernel([pair], outputs["c0"][1])
    with pytest.raises(ValueError, match=match):
        _traces(kernel, inputs, outputs, chip)
    _traces(kernel, inputs, outputs, "950" if chip != "950" else "a2")  # the good twin: a chip that has the pair


def test_cube_rates_of_the_new_classes():
    """fp8/hif8 run at 16x16x32 (8192 MACs/cycle) on 3510, int4 at 16x16x64 on 2201, MX fp4 at 16x16x64."""
    c950, a2 = aj.default_costs(aj.get_chip("950")), aj.default_costs(aj.get_chip("a2"))
    rate = lambda costs, dtype, mx=False: float(costs.cube_macs_per_cycle[cube_class(dtype, mx)])  # noqa: E731
    assert rate(c950, "float8_e4m3fn") == rate(c950, "hifloat8") == 8192 == rate(c950, "float8_e5m2", True)
    assert rate(a2, "int4") == 16384 == rate(c950, "float4_e1m2", True)
    assert rate(c950, "float16") == 4096
    for dtype in ("int8", "uint8", "float8_e4m3fn", "hifloat8"):
        assert float(c950.fix_elements_per_cycle[fix_class(dtype)]) == 64


# -- MX ------------------------------------------------------------------------------------------
def _mx_kernel(pairs, *, scale_shift=0, a_dtype_override=None, k_valid=K):
    """One matmul_mx per pair; A tiles 1 KB apart in L0A (fp8 needs 1024 B alignment), scales at addr >> 4."""

    def kernel(k):
        staged = []
        for i, (da, db) in enumerate(pairs):
            da = a_dtype_override or da
            a1, b1 = k.alloc("L1", (M, K), da), k.alloc("L1", (N, K), db)
            sa1 = k.alloc("L1", (M, K // 32), "float8_e8m0fnu", fmt="Zz")
            sb1 = k.alloc("L1", (K // 32, N), "float8_e8m0fnu", fmt="Nn")
            a0 = k.alloc("L0A", (M, K), da, addr=1024 * i)
            b0 = k.alloc("L0B", (K, N), db, addr=1024 * i)
            sa0 = k.alloc("ScaleLeft", (M, K // 32), "float8_e8m0fnu", addr=(a0.addr >> 4) + scale_shift)
            sb0 = k.alloc("ScaleRight", (K // 32, N), "float8_e8m0fnu", addr=b0.addr >> 4)
            for tile, name in ((a1, "a"), (b1, "bt")):
                k.copy_gm2l1_nd2nz(tile, f"{name}{i}")
            k.copy_gm2l1(sa1, f"sa{i}")
            k.copy_gm2l1(sb1, f"sb{i}")
            staged.append((a1, b1, sa1, sb1, a0, b0, sa0, sb0, k.alloc("L0C", (M, N), "float32")))
        _sync(k, "MTE2", "MTE1")
        for a1, b1, sa1, sb1, a0, b0, sa0, sb0, _ in staged:
            k.copy_l12l0a(a0, a1)
            k.copy_l12l0b(b0, b1)
            k.copy_l12scale(sa0, sa1)
            k.copy_l12scale(sb0, sb1)
        _sync(k, "MTE1", "M")
        for i, (*_, a0, b0, sa0, sb0, c) in enumerate(staged):
            k.matmul_mx(c, a0, b0, sa0, sb0)
            if i % 2:  # accumulate the same product once more: C = 2 x product
                k.sync_pipe("M")  # small tile: consecutive accumulating mmads need a PIPE_M barrier
                k.matmul_mx_acc(c, c, a0, b0, sa0, sb0)
        _sync(k, "M", "FIX")
        for i, (*_, c) in enumerate(staged):
            k.fixpipe(f"c{i}", c)

    return kernel


def _mx_inputs(rng, pairs):
    inputs, refs = {}, []
    for i, (da, db) in enumerate(pairs):
        a, bt = _elements(rng, da, (M, K)), _elements(rng, db, (N, K))
        # scales 2^-2 .. 2^2: the two scaled block sums of a K of 64 then add exactly in float32
        sa = (2.0 ** rng.integers(-2, 3, (M, K // 32))).astype(ml_dtypes.float8_e8m0fnu)
        sb = (2.0 ** rng.integers(-2, 3, (K // 32, N))).astype(ml_dtypes.float8_e8m0fnu)
        inputs.update({f"a{i}": a, f"bt{i}": bt, f"sa{i}": sa, f"sb{i}": sb})
        va = _values(a, da) * np.repeat(sa.astype(np.float64), 32, axis=1)
        vb = _values(bt, db).T * np.repeat(sb.astype(np.float64), 32, axis=0)
        refs.append(va @ vb)
    return inputs, refs


def test_matmul_mx_all_pairings_against_numpy():
    rng = np.random.default_rng(4)
    inputs, refs = _mx_inputs(rng, MX_PAIRS)
    outputs = {f"c{i}": ((M, N), "float32") for i in range(len(MX_PAIRS))}
    got = aj.run(_mx_kernel(MX_PAIRS), inputs, outputs, chip="950", throw=True, sanitize=False).outputs
    for i, ref in enumerate(refs):
        want = 2 * ref if i % 2 else ref  # odd pairs: matmul_mx then matmul_mx_acc
        np.testing.assert_array_equal(np.asarray(got[f"c{i}"]), want, err_msg=str(MX_PAIRS[i]))
        assert np.any(ref != 0)


def test_mx_nan_scale_and_saturation():
    """An E8M0 NaN scale (0xFF) makes its block NaN: 0 in saturation mode, NaN without (same compiled kernel)."""
    pairs = MX_PAIRS[:1]
    rng = np.random.default_rng(5)
    inputs, refs = _mx_inputs(rng, pairs)
    sa = inputs["sa0"].copy()
    sa[3, 1] = np.array([0xFF], np.uint8).view(ml_dtypes.float8_e8m0fnu)[0]
    inputs["sa0"] = sa

    def kernel(k, saturation):
        k.set_ctrl_saturation(saturation)
        _mx_kernel(pairs)(k)

    out = {"c0": ((M, N), "float32")}
    run = lambda s: aj.run(kernel, inputs, out, chip="950", params={"saturation": s}, sanitize=False).outputs  # noqa: E731
    outs = jax.vmap(run)(np.array([True, False]))["c0"]
    sat, nonsat = np.asarray(outs[0]), np.asarray(outs[1])
    assert np.all(sat[3] == 0) and np.all(np.isnan(nonsat[3]))
    rows = np.arange(M) != 3
    np.testing.assert_array_equal(sat[rows], refs[0][rows])
    np.testing.assert_array_equal(nonsat[rows], refs[0][rows])


def test_mx_static_rules_with_good_twins():
    pair = [MX_PAIRS[0]]
    inputs, _ = _mx_inputs(np.random.default_rng(6), pair)
    out = {"c0": ((M, N), "float32")}
    # the scale address rule: a scale_a one fractal away from data >> 4 is refused at trace time
    with pytest.raises(ValueError, match=r"rule 'MX scale address': scale_a .* must start at address 0x0 = L0A"):
        _traces(_mx_kernel(pair, scale_shift=32), inputs, out, "950")
    _traces(_mx_kernel(pair, scale_shift=0), inputs, out, "950", sanitize=True)  # with the race checker's paths
    # MXFP8 x MXFP4 crosses families
    inputs_x = dict(inputs, a0=_elements(np.random.default_rng(7), "float4_e2m1fn", (M, K)))
    with pytest.raises(ValueError, match=r"rule 'MX family'.*float4_e2m1fn and B float8_e5m2"):
        _traces(_mx_kernel(pair, a_dtype_override="float4_e2m1fn"), inputs_x, out, "950")
    # the scale domains and MmadMx exist on 950 only
    with pytest.raises(ValueError, match=r"chip a2 \(arch 2201\) has no ScaleLeft buffer"):
        _traces(_mx_kernel(pair), inputs, out, "a2")


def test_mx_k_must_be_a_multiple_of_64():
    def kernel(k, kk):
        a0 = k.alloc("L0A", (M, K), "float8_e4m3fn")
        b0 = k.alloc("L0B", (K, N), "float8_e4m3fn")
        sa0 = k.alloc("ScaleLeft", (M, K // 32), "float8_e8m0fnu")
        sb0 = k.alloc("ScaleRight", (K // 32, N), "float8_e8m0fnu")
        c = k.alloc("L0C", (M, N), "float32")
        k.state = ops.mmad_mx(k.state, c, a0, b0, sa0, sb0, M, kk, N, c_matrix_init_val=True)

    with pytest.raises(ValueError, match=r"rule 'MX K': mmad_mx needs a static k that is a multiple of 64, got 32"):
        _traces(kernel, {}, {}, "950", params={"kk": 32})
    _traces(kernel, {}, {}, "950", params={"kk": 64})


def test_mx_scale_layouts_byte_order():
    """Zz scale_a [M, G] and Nn scale_b [G, N]: 16 x 2 fractals of 32 B, the two K-groups of a row (column)
    adjacent; Zz fractals run along G first, Nn fractals along G first too (big N: down the K-groups)."""
    from ascjax.core.layout import to_fractal

    rows, groups = 32, 8
    m, g = np.meshgrid(np.arange(rows), np.arange(groups), indexing="ij")
    want_a = (m // 16 * (groups // 2) + g // 2) * 32 + (m % 16) * 2 + g % 2
    flat_a = np.asarray(to_fractal(np.arange(rows * groups).reshape(rows, groups), aj.Format.ZZ, 2)).reshape(-1)
    np.testing.assert_array_equal(np.argsort(flat_a).reshape(rows, groups), want_a)
    nd_b = np.arange(groups * rows).reshape(groups, rows)  # scale_b: [G, N]
    flat_b = np.asarray(to_fractal(nd_b, aj.Format.NN, 2)).reshape(-1)
    np.testing.assert_array_equal(np.argsort(flat_b).reshape(groups, rows), want_a.T)
