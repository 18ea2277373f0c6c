"""Fixpipe quantisation: every mode's arithmetic against an independent NumPy reference, in both
CTRL[48] modes, and the trace-time rules beside their good twins.

L0C is filled with ``C = A @ I + bias`` (mmad in non-saturation mode), so it holds exactly the
values the test chooses: ordinary ones and, in the first 16 columns, ±Inf, NaN and the overflow
edges of every output type. One compiled kernel per L0C dtype moves C out through many modes; a
``vmap`` over the saturation bit runs both modes in that one compilation. The references follow
the asc-devkit golden scripts (gen_data_f322s8.py, gen_data_s322s8.py, gen_data_s322f16.py): the
scale truncated to (1, 8, 10), positive/negative coefficients M1/M2 (M2 = 0 with ReLU), b8 outputs
clipped to [-256, 255], rounded half to even, offset, clipped to int8/uint8.
"""

from __future__ import annotations

import jax
import ml_dtypes
import numpy as np
import pytest

import ascjax as aj
from ascjax.core.formats import hifloat8
from ascjax.core.layout import nd_to_nz

M, N = 16, 32
SPECIAL = [np.inf, -np.inf, np.nan, 65519, 65520, 7e4, -7e4, 448, 464, 465, -480, 40959, 40960, -40960, 3.4e38, 2e-9]


def _trunc(scale):
    """QUANT_PRE M1: float32 bits 13..31."""
    return (np.asarray(scale, np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)


def _float_out(v, t, sat):
    big = float(ml_dtypes.finfo(t).max)
    with np.errstate(over="ignore", invalid="ignore"):
        y = np.where(np.isnan(v), 0, np.clip(v, -big, big)).astype(t) if sat else v.astype(t)
    if t in (ml_dtypes.float8_e4m3fn,):
        codes = y.view(np.uint8).copy()
        codes[np.isnan(y.astype(np.float32))] = 0x7F
        y = codes.view(t)
    return y


def _hif8_out(v, sat):
    """Nearest HiF8 code by brute force over the value table (ties away), overflow from 40960."""
    table = hifloat8.TABLE.astype(np.float64)
    finite = np.flatnonzero(np.isfinite(table))
    x = np.nan_to_num(v.astype(np.float64), nan=0.0, posinf=1e300, neginf=-1e300).reshape(-1)
    dist = np.abs(x[:, None] - table[finite][None, :])
    ties = dist == dist.min(axis=1, keepdims=True)
    code = finite[np.argmax(np.where(ties, np.abs(table[finite])[None, :], -1), axis=1)]
    over = np.abs(x) >= 40960
    code = np.where(over, np.where(x > 0, 0x6E if sat else 0x6F, 0xEE if sat else 0xEF), code)
    code = np.where(np.isnan(v.reshape(-1)), 0x00 if sat else 0x80, code)
    return code.astype(np.uint8).reshape(v.shape)


def _b8_out(v, offset, t):
    info = np.iinfo(t)
    with np.errstate(invalid="ignore"):
        q = np.round(np.clip(v, -256, 255)) + offset
        return np.where(np.isnan(q), 0, np.clip(q, info.min, info.max)).astype(t)


def _scaled(c, scale, relu=False):
    cf = c.astype(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        v = (cf * _trunc(scale)).astype(np.float32)
    return np.where(cf < 0, np.float32(0), v) if relu else v


def _sync(k, src, dst):
    k.sync_notify(src, dst, 0)
    k.sync_wait(src, dst, 0)


def _fill_l0c(k, dtype):
    """C = A @ I + bias in non-saturation mode: GM a (M x N), eye (N x N), bias (1 x N)."""
    in_dtype = "float32" if dtype == "float32" else "int8"
    a1, i1 = k.alloc("L1", (M, N), in_dtype), k.alloc("L1", (N, N), in_dtype)
    bias1 = k.alloc("L1", (1, N), dtype, fmt="ND")
    a0, i0 = k.alloc("L0A", (M, N), in_dtype), k.alloc("L0B", (N, N), in_dtype)
    bt, c = k.alloc("BiasTable", (1, N), dtype), k.alloc("L0C", (M, N), dtype)
    k.copy_gm2l1_nd2nz(a1, "a")
    k.copy_gm2l1_nd2nz(i1, "eye")
    k.copy_gm2l1(bias1, "bias")
    _sync(k, "MTE2", "MTE1")
    k.copy_l12l0a(a0, a1)
    k.copy_l12l0b(i0, i1)
    k.copy_l12bt(bt, bias1)
    _sync(k, "MTE1", "M")
    k.set_ctrl_saturation(False)
    k.mmad(c, a0, i0, M, N, N, c_matrix_source=True)
    _sync(k, "M", "FIX")
    return c


F32_MOVES = {  # GM output -> (dtype, fixpipe keyword arguments)
    "f16": ("float16", {}),
    "f16s": ("float16", {"quant_scale": 0.1}),
    "bf16v": ("bfloat16", {"quant_scale": "scales"}),
    "f32s": ("float32", {"quant_scale": "traced"}),
    "f32": ("float32", {}),
    "i8": ("int8", {"quant_scale": 0.37, "relu": True, "quant_offset": 3}),
    "u8v": ("uint8", {"quant_scale": "vec"}),
    "e4m3": ("float8_e4m3fn", {"quant_scale": 1.0}),
    "hif8": ("hifloat8", {"quant_scale": 1.0, "quant_mode": "QF322HIF8_PRE"}),
}
S32_MOVES = {
    "deq": ("float16", {"quant_scale": 2.0**-4}),
    "req": ("int8", {"quant_scale": 0.5, "quant_offset": -5}),
    "requ": ("uint8", {"quant_scale": "vec", "quant_mode": "VREQ8"}),
    "qs": ("bfloat16", {"quant_scale": 3.0}),
    "i32": ("int32", {"relu": True}),
}


def _kernel(dtype, moves):
    def kernel(k, saturation, scale, vec):
        c = _fill_l0c(k, dtype)
        k.set_ctrl_saturation(saturation)
        for name, (_, kw) in moves.items():
            kw = dict(kw)
            if kw.get("quant_scale") == "traced":
                kw["quant_scale"] = scale
            elif kw.get("quant_scale") == "vec":
                kw["quant_scale"] = vec
            k.fixpipe(name, c, **kw)

    return kernel


KERNELS = {"float32": _kernel("float32", F32_MOVES), "int32": _kernel("int32", S32_MOVES)}


def _data(dtype, rng):
    if dtype == "float32":
        a = rng.uniform(-300, 300, (M, N)).astype(np.float32)
        a[:, : len(SPECIAL)] = 0
        bias = np.zeros((1, N), np.float32)
        bias[0, : len(SPECIAL)] = SPECIAL
        eye = np.eye(N, dtype=np.float32)
    else:
        a = rng.integers(-128, 128, (M, N)).astype(np.int8)
        bias = rng.integers(-3000, 3000, (1, N)).astype(np.int32)
        bias[0, :4] = [2**31 - 1, -(2**31), 10**9, -(10**9)]
        eye = np.eye(N, dtype=np.int8)
    scales = rng.uniform(-2, 2, N).astype(np.float32)
    return {"a": a, "eye": eye, "bias": bias, "scales": scales}


def _run(dtype, moves, inputs, scale, vec):
    outputs = {name: ((M, N), out) for name, (out, _) in moves.items()}

    def one(sat):
        params = {"saturation": sat, "scale": scale, "vec": vec}
        return aj.run(KERNELS[dtype], inputs, outputs, chip="950", params=params, sanitize=False).outputs

    return jax.vmap(one)(np.array([True, False]))


def test_float32_l0c_modes_both_saturation_modes():
    rng = np.random.default_rng(0)
    inputs = _data("float32", rng)
    scale, vec = np.float32(-0.7071), rng.uniform(0.01, 3, N).astype(np.float32)
    got = _run("float32", F32_MOVES, inputs, scale, vec)
    c = inputs["a"] + inputs["bias"]  # what L0C holds (A @ I is exact)
    assert np.isinf(c).any() and np.isnan(c).any()
    for i, sat in enumerate((True, False)):
        out = {k: np.asarray(v[i]) for k, v in got.items()}
        want = {
            "f16": _float_out(c, np.float16, sat),
            "f16s": _float_out(_scaled(c, 0.1), np.float16, sat),
            "bf16v": _float_out(_scaled(c, inputs["scales"]), ml_dtypes.bfloat16, sat),
            "f32s": _float_out(_scaled(c, scale), np.float32, sat),
            "f32": _float_out(c, np.float32, sat),
            "i8": _b8_out(_scaled(c, 0.37, relu=True), 3, np.int8),
            "u8v": _b8_out(_scaled(c, vec), 0, np.uint8),
            "e4m3": _float_out(_scaled(c, 1.0), ml_dtypes.float8_e4m3fn, sat),
            "hif8": _hif8_out(_scaled(c, 1.0), sat),
        }
        for name, ref in want.items():
            assert out[name].dtype == ref.dtype, name
            np.testing.assert_array_equal(out[name].view(np.uint8), ref.view(np.uint8), err_msg=f"{name} sat={sat}")
    assert float(_trunc(0.1)) != np.float32(0.1)  # the (1, 8, 10) truncation is visible in f16s


def test_int32_l0c_modes():
    rng = np.random.default_rng(1)
    inputs = _data("int32", rng)
    vec = rng.uniform(-1.5, 1.5, N).astype(np.float32)
    got = _run("int32", S32_MOVES, inputs, np.float32(1), vec)
    c = np.clip(inputs["a"].astype(np.int64) + inputs["bias"], -(2**31), 2**31 - 1)  # integer mmad saturates
    for i, sat in enumerate((True, False)):
        out = {k: np.asarray(v[i]) for k, v in got.items()}
        want = {
            "deq": _float_out(_scaled(c, 2.0**-4), np.float16, sat),
            "req": _b8_out(_scaled(c, 0.5), -5, np.int8),
            "requ": _b8_out(_scaled(c, vec), 0, np.uint8),
            "qs": _float_out(_scaled(c, 3.0), ml_dtypes.bfloat16, sat),
            "i32": np.maximum(c, 0).astype(np.int32),
        }
        for name, ref in want.items():
            np.testing.assert_array_equal(out[name].view(np.uint8), ref.view(np.uint8), err_msg=f"{name} sat={sat}")
    assert np.isinf(np.asarray(got["deq"][1])).any() and not np.isinf(np.asarray(got["deq"][0])).any()


def test_jit_agrees_with_eager():
    """The fixpipe op on a prepared state, compiled and op by op, with a static and a traced scale."""
    chip = aj.get_chip("950")
    c = _data("float32", np.random.default_rng(2))["a"][:, ::-1] + np.float32(SPECIAL + [0.5] * (N - len(SPECIAL)))
    vec = np.linspace(-2, 2, N, dtype=np.float32)
    tile = aj.Allocator(chip).alloc("L0C", (M, N), "float32")
    gm = {"hif8": jax.numpy.zeros((M, N), np.uint8), "i8": jax.numpy.zeros((M, N), np.int8)}
    state = aj.State.create(chip, gm, tuple(gm)).add_tile(tile)
    state = state.with_tile(tile, nd_to_nz(c, 16))

    def move(state, scale):
        state = aj.ops.fixpipe(state, "hif8", tile, quant_scale=scale, quant_mode="QF322HIF8_PRE")
        state = aj.ops.fixpipe(state, "i8", tile, quant_scale=vec, relu=True)
        return state.gm

    eager = move(state, 0.5)
    jitted = jax.jit(move)(state, np.float32(0.5))  # the scale is traced here
    for name in gm:
        np.testing.assert_array_equal(np.asarray(eager[name]), np.asarray(jitted[name]))
    np.testing.assert_array_equal(np.asarray(eager["hif8"]), _hif8_out(_scaled(c, 0.5), True))
    np.testing.assert_array_equal(np.asarray(eager["i8"]), _b8_out(_scaled(c, vec, relu=True), 0, np.int8))


# -- trace-time rules, each with its good twin ------------------------------------------------------
def _traces(chip, src="float32", out="float16", inputs=None, **kw):
    def kernel(k):
        k.fixpipe("c", k.alloc("L0C", (M, N), src), **kw)

    shape = (N // 16, M // 16, 16, 16) if kw.get("nz2nd") is False else (M, N)
    gm = {"scales": np.ones(N, np.float32), **(inputs or {})}
    jax.eval_shape(lambda: aj.run(kernel, gm, {"c": (shape, out)}, chip=chip, jit=False, sanitize=False).outputs)


@pytest.mark.parametrize(
    ("bad", "good", "error", "match"),
    [
        (
            {"out": "hifloat8", "quant_scale": 1.0, "quant_mode": "QF322HIF8_PRE_HYBRID"},
            {"out": "hifloat8", "quant_scale": 1.0, "quant_mode": "QF322HIF8_PRE"},
            NotImplementedError,
            "hybrid rounding is not defined in public Ascend material",
        ),
        (
            {"out": "float8_e5m2", "quant_scale": 1.0},
            {"out": "float8_e4m3fn", "quant_scale": 1.0},
            ValueError,
            "QF322FP8_PRE writes float8_e4m3fn only",
        ),
        (
            {"chip": "a2", "out": "float8_e4m3fn", "quant_scale": 1.0},
            {"chip": "950", "out": "float8_e4m3fn", "quant_scale": 1.0},
            ValueError,
            r"QF322FP8_PRE .* exists on chip 950 \(arch 3510\) only, not on chip a2",
        ),
        (
            {"chip": "a3", "out": "float16", "quant_scale": 0.5},
            {"chip": "a3", "out": "float16"},
            ValueError,
            r"QF322F16_PRE .* chip 950 \(arch 3510\) only, not on chip a3 .* this chip has NoQuant, F322F16",
        ),
        (
            {"chip": "a2", "out": "int8"},
            {"chip": "a2", "out": "int8", "quant_scale": 0.5},
            ValueError,
            "QF322B8_PRE, which multiplies by a scale: pass quant_scale=",
        ),
        (
            {"out": "int8", "quant_scale": 0.5, "quant_mode": "VQF322B8_PRE"},
            {"out": "int8", "quant_scale": "scales", "quant_mode": "VQF322B8_PRE"},
            ValueError,
            "VQF322B8_PRE takes a per-channel vector",
        ),
        (
            {"out": "int8", "quant_scale": np.ones(N - 1, np.float32)},
            {"out": "int8", "quant_scale": np.ones(N, np.float32)},
            ValueError,
            "has 31 entries, but the fixpipe moves 32 columns",
        ),
        (
            {"out": "float16", "quant_scale": float("inf")},
            {"out": "float16", "quant_scale": 3.0e38},
            ValueError,
            "scale must be finite",
        ),
        (
            {"out": "int8", "quant_scale": 0.5, "quant_offset": 256},
            {"out": "int8", "quant_scale": 0.5, "quant_offset": 255},
            ValueError,
            r"static 9-bit integer in \[-256, 255\], got 256",
        ),
        (
            {"out": "float16", "quant_offset": 1},
            {"out": "uint8", "quant_scale": 1.0, "quant_offset": 1},
            ValueError,
            "only the int8/uint8 modes .* add an offset, not F322F16",
        ),
        (
            {"out": "int8", "quant_scale": 1.0, "nz2nd": False},
            {"out": "int8", "quant_scale": 1.0},
            ValueError,
            "merges channels into 16 x 32 fractals",
        ),
        (
            {"out": "float16", "quant_mode": "REQ8", "quant_scale": 1.0},
            {"out": "float16", "src": "int32", "quant_mode": "DEQF16", "quant_scale": 1.0},
            ValueError,
            "REQ8 converts int32 -> int8, int32 -> uint8, not L0C float32 -> GM float16",
        ),
        (
            {"out": "float16", "quant_mode": "QF322F17"},
            {"out": "float16", "quant_mode": "F322F16"},
            ValueError,
            "unknown quantisation mode 'QF322F17'",
        ),
        (
            {"out": "float16", "quant_scale": "c"},
            {"out": "float16", "quant_scale": "scales", "quant_mode": "VQF322F16_PRE"},
            ValueError,
            "is a kernel output: per-channel scales are read-only inputs",
        ),
    ],
)
def test_static_rules_with_good_twins(bad, good, error, match):
    with pytest.raises(error, match=match):
        _traces(**{"chip": "950", **bad})
    _traces(**{"chip": "950", **good})
