"""PyPTO-Pro vector functions (``ascjax.front.pypto.vf`` and ``_vf_runtime``), against NumPy / ml_dtypes references.

The op families are checked lane by lane (masks, tail masks, ZEROING / MERGING, reductions into lane 0, compares and
select, conversions and their rounding, ``exp_sub``); whole VF bodies run through ``run_vf`` (nested ``pl.range``
loops, carried registers, traced scalars under ``jit`` and ``vmap``) and ``vf_accesses``; out-of-range accesses and
unmodelled ops are refused by name.
"""

from __future__ import annotations

import types

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import ascjax.front.pypto.language as pl
from ascjax.core._kinds import Buffer, Format
from ascjax.core._memory import Tile
from ascjax.front.pypto import UnsupportedConstruct
from ascjax.front.pypto._vf_runtime import run_vf, vf_accesses
from ascjax.front.pypto.vf import (
    BinType,
    CastLayout,
    DataCopyMode,
    HistType,
    LoadDist,
    MaskPattern,
    MergeMode,
    SqueezeMode,
    StoreDist,
    VFRoundMode,
)
from ascjax.front.pypto.vf import SaturateMode as Sat
from ascjax.front.pypto.vf import Vf as vf

RNG = np.random.default_rng(11)
F32_LANES, F16_LANES = 64, 128
NEG_INF = -1e30
ROW = 128  # elements per row of the softmax tiles (two fp32 registers)
ROWS = 4


def _tile(name: str, addr: int, rows: int, cols: int, dtype: str = "float32") -> Tile:
    return Tile(name, Buffer.UB, addr, rows, cols, dtype, Format.ND)


def _np(x) -> np.ndarray:
    return np.asarray(x)


def _f32(n: int = F32_LANES, scale: float = 3.0) -> np.ndarray:
    return (RNG.standard_normal(n) * scale).astype(np.float32)


ALL32 = vf.create_mask(pattern=MaskPattern.ALL, dtype=pl.DT_FP32)


# -- masks ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("pattern", "dtype", "expected"),
    [
        (MaskPattern.ALL, pl.DT_FP32, np.ones(64, bool)),
        (MaskPattern.ALLF, pl.DT_FP16, np.zeros(128, bool)),
        (MaskPattern.VL8, pl.DT_FP32, np.arange(64) < 8),
        (MaskPattern.H, pl.DT_FP16, np.arange(128) < 64),
        (MaskPattern.Q, pl.DT_FP32, np.arange(64) < 16),
        (MaskPattern.M3, pl.DT_INT8, np.arange(256) % 3 == 0),
        (MaskPattern.VL128, pl.DT_FP32, np.ones(64, bool)),
    ],
)
def test_create_mask_selects_the_pattern_at_the_dtype_granularity(pattern, dtype, expected):
    mask = _np(vf.create_mask(pattern=pattern, dtype=dtype))
    width = 256 // expected.size
    assert mask.shape == (256,)
    np.testing.assert_array_equal(mask, np.repeat(expected, width))  # every bit of an active element is set


def test_update_mask_is_a_tail_mask_static_and_traced():
    np.testing.assert_array_equal(_np(vf.update_mask(5, dtype=pl.DT_FP32))[::4], np.arange(64) < 5)
    np.testing.assert_array_equal(_np(vf.update_mask(300, dtype=pl.DT_FP16))[::2], np.ones(128, bool))
    np.testing.assert_array_equal(_np(vf.update_mask(-3, dtype=pl.DT_FP32)), np.zeros(256, bool))
    traced = jax.jit(lambda n: vf.update_mask(n, dtype=pl.DT_FP32))(jnp.int32(37))
    np.testing.assert_array_equal(_np(traced)[::4], np.arange(64) < 37)


def test_a_b32_mask_drives_b16_lanes_in_pairs_and_survives_pack_unpack():
    x = RNG.integers(0, 1000, 128).astype(np.uint16)
    tail = vf.update_mask(10, dtype=pl.DT_FP32)  # 10 fp32 lanes = 20 uint16 lanes
    got = _np(vf.adds(jnp.asarray(x), 1, tail))
    np.testing.assert_array_equal(got, np.where(np.arange(128) < 20, x + 1, 0))
    packed = vf.pack(tail)
    np.testing.assert_array_equal(_np(vf.unpack(packed)), _np(tail))


# -- arithmetic ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "reference"),
    [
        ("add", np.add),
        ("sub", np.subtract),
        ("mul", np.multiply),
        ("div", np.divide),
        ("max", np.maximum),
        ("min", np.minimum),
        ("abs_sub", lambda a, b: np.abs(a - b)),
    ],
)
def test_binary_ops_write_the_selected_lanes_and_zero_the_rest(name, reference):
    a, b = _f32(), _f32()
    b[b == 0] = 1.0
    tail = vf.update_mask(45, dtype=pl.DT_FP32)
    got = _np(getattr(vf, name)(jnp.asarray(a), jnp.asarray(b), tail))
    expected = np.where(np.arange(64) < 45, reference(a, b), 0).astype(np.float32)
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_scalar_and_unary_ops_against_numpy():
    a = _f32()
    pos = np.abs(a) + 0.25
    checks = [
        (vf.adds(jnp.asarray(a), 3.14, ALL32), a + np.float32(3.14)),
        (vf.subs(jnp.asarray(a), 1.5, ALL32), a - np.float32(1.5)),
        (vf.muls(jnp.asarray(a), 2.5, ALL32), a * np.float32(2.5)),
        (vf.maxs(jnp.asarray(a), -0.5, ALL32), np.maximum(a, np.float32(-0.5))),
        (vf.leaky_relu(jnp.asarray(a), 0.1, ALL32), np.where(a >= 0, a, a * np.float32(0.1))),
        (vf.abs(jnp.asarray(a), ALL32), np.abs(a)),
        (vf.neg(jnp.asarray(a), ALL32), -a),
        (vf.relu(jnp.asarray(a), ALL32), np.maximum(a, 0)),
        (vf.truncate(jnp.asarray(a), ALL32), np.trunc(a)),
    ]
    for got, expected in checks:
        np.testing.assert_array_equal(_np(got), expected.astype(np.float32))
    np.testing.assert_allclose(_np(vf.sqrt(jnp.asarray(pos), ALL32)), np.sqrt(pos), rtol=1e-6)
    np.testing.assert_allclose(_np(vf.exp(jnp.asarray(a), ALL32)), np.exp(a), rtol=1e-6)
    np.testing.assert_allclose(_np(vf.ln(jnp.asarray(pos), ALL32)), np.log(pos), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(_np(vf.log2(jnp.asarray(pos), ALL32)), np.log2(pos), rtol=1e-6, atol=1e-7)


def test_integer_lanes_wrap_and_divide_toward_zero():
    a = np.array([32767, -32768, -7, 7] * 32, np.int16)
    b = np.array([1, -1, 2, -2] * 32, np.int16)
    all16 = vf.create_mask(dtype=pl.DT_INT16)
    np.testing.assert_array_equal(_np(vf.add(jnp.asarray(a), jnp.asarray(b), all16)), (a + b).astype(np.int16))
    np.testing.assert_array_equal(_np(vf.div(jnp.asarray(a), jnp.asarray(b), all16))[:4], [32767, -32768, -3, -3])
    np.testing.assert_array_equal(_np(vf.abs(jnp.asarray(a), all16))[:2], [32767, -32768])  # |-32768| wraps


def test_merging_keeps_the_destination_lanes():
    a, b, old = _f32(), _f32(), _f32()
    tail = vf.update_mask(20, dtype=pl.DT_FP32)
    merged = vf.add(jnp.asarray(a), jnp.asarray(b), tail, mode=MergeMode.MERGING).resolve(jnp.asarray(old))
    np.testing.assert_array_equal(_np(merged), np.where(np.arange(64) < 20, a + b, old))
    fresh = vf.add(jnp.asarray(a), jnp.asarray(b), tail, mode=MergeMode.MERGING).resolve(name="fresh")
    np.testing.assert_array_equal(_np(fresh), np.where(np.arange(64) < 20, a + b, 0))  # undefined lanes read as 0
    with pytest.raises(UnsupportedConstruct, match="reads its destination register 'acc'"):
        vf.mul_add_dst(jnp.asarray(a), jnp.asarray(b), tail).resolve(name="acc")


def test_fused_multiply_add_rounds_once():
    a, b, c = _f32(), _f32(), _f32()
    exact = (a.astype(np.float64) * b + c).astype(np.float32)
    np.testing.assert_array_equal(
        _np(vf.mul_add_dst(jnp.asarray(a), jnp.asarray(b), ALL32).resolve(jnp.asarray(c))), exact
    )
    np.testing.assert_array_equal(
        _np(vf.mul_dst_add(jnp.asarray(b), jnp.asarray(c), ALL32).resolve(jnp.asarray(a))), exact
    )
    axpy = (np.float64(2.5) * a + c).astype(np.float32)
    np.testing.assert_array_equal(_np(vf.axpy(jnp.asarray(a), 2.5, ALL32).resolve(jnp.asarray(c))), axpy)


# -- reductions ----------------------------------------------------------------------------------------------------
def _tree(x: np.ndarray) -> np.ndarray:
    while x.shape[-1] > 1:
        x = x[..., 0::2] + x[..., 1::2]
    return x[..., 0]


def test_reduce_sum_adds_the_selected_lanes_in_a_tree_into_lane_0():
    a = _f32()
    tail = vf.update_mask(50, dtype=pl.DT_FP32)
    got = _np(vf.reduce_sum(jnp.asarray(a), tail))
    assert got[0] == _tree(np.where(np.arange(64) < 50, a, np.float32(0)))
    assert not got[1:].any()
    blocks = _np(vf.reduce_sum(jnp.asarray(a), ALL32, datablock=True))  # one sum per 32-byte DataBlock (8 fp32)
    np.testing.assert_array_equal(blocks[0::8], _tree(a.reshape(8, 8)))
    assert not np.delete(blocks, np.arange(0, 64, 8)).any()
    h = (RNG.standard_normal(128) * 100).astype(np.float16)
    half = _np(vf.reduce_sum(jnp.asarray(h), vf.create_mask(dtype=pl.DT_FP16)))
    assert half[0] == _tree(h.astype(np.float32)).astype(np.float16)  # accumulated in f32, rounded once
    assert _np(vf.reduce_sum(jnp.asarray(a), vf.create_mask(pattern=MaskPattern.ALLF)))[0] == 0


def test_reduce_max_and_min_give_the_value_in_lane_0_and_its_first_index_in_lane_1():
    a = _f32()
    a[40] = a[7] = 50.0
    got = _np(vf.reduce_max(jnp.asarray(a), ALL32))
    assert got[0] == 50.0 and got[1:2].view(np.uint32)[0] == 7 and not got[2:].any()
    first32 = vf.create_mask(pattern=MaskPattern.VL32, dtype=pl.DT_FP32)
    low = _np(vf.reduce_min(jnp.asarray(a), first32))
    assert low[0] == a[:32].min() and low[1:2].view(np.uint32)[0] == a[:32].argmin()
    assert _np(vf.reduce_max(jnp.asarray(a), vf.create_mask(pattern=MaskPattern.ALLF)))[0] == -np.inf
    signed_zeros = jnp.asarray(np.array([-0.0, 0.0] * 32, np.float32))
    assert not np.signbit(_np(vf.reduce_max(signed_zeros, ALL32))[0])  # max(-0, +0) = +0
    assert np.signbit(_np(vf.reduce_min(signed_zeros, ALL32))[0])
    pairs = _np(vf.pair_reduce_sum(jnp.asarray(a), ALL32))
    np.testing.assert_array_equal(pairs, np.concatenate([a[0::2] + a[1::2], np.zeros(32, np.float32)]))


# -- compare and select --------------------------------------------------------------------------------------------
def test_compares_give_masks_that_select_picks_by():
    a, b = _f32(), _f32()
    a[3] = np.nan
    a[5], b[5] = -0.0, 0.0
    tail = vf.update_mask(60, dtype=pl.DT_FP32)
    for name, ref in (("gt", np.greater), ("ge", np.greater_equal), ("eq", np.equal), ("ne", np.not_equal)):
        mask = _np(getattr(vf, name)(jnp.asarray(a), jnp.asarray(b), tail))
        np.testing.assert_array_equal(mask, np.repeat(ref(a, b) & (np.arange(64) < 60), 4), err_msg=name)
    scalar = _np(vf.lt(jnp.asarray(a), 0.5, ALL32))[::4]
    np.testing.assert_array_equal(scalar, a < 0.5)
    tiny = np.full(64, 1e-40, np.float32)  # subnormal: XLA's CPU compares would flush it to 0
    assert _np(vf.gt(jnp.asarray(tiny), 0.0, ALL32)).all()
    picked = _np(vf.select(jnp.asarray(a), jnp.asarray(b), vf.gt(jnp.asarray(a), jnp.asarray(b), ALL32)))
    np.testing.assert_array_equal(picked, np.where(a > b, a, b))


# -- conversion ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("mode", "reference"),
    [
        (None, np.rint),
        (VFRoundMode.CAST_TRUNC, np.trunc),
        (VFRoundMode.CAST_FLOOR, np.floor),
        (VFRoundMode.CAST_CEIL, np.ceil),
        (VFRoundMode.CAST_ROUND, lambda v: np.sign(v) * np.floor(np.abs(v) + 0.5)),
    ],
)
def test_astype_float_to_int_rounds_by_mode(mode, reference):
    x = np.concatenate([np.array([2.5, -2.5, 0.5, -1.5, 3.49999], np.float32), _f32(59, 1000.0)])
    got = _np(vf.astype(jnp.asarray(x), ALL32, dtype=pl.DT_INT32, round_mode=mode))
    np.testing.assert_array_equal(got, reference(x.astype(np.float64)).astype(np.int32))


def test_astype_narrowing_wraps_or_saturates():
    x = np.array([40000.0, -40000.0, 70000.0, 3e9, np.inf, -np.inf, np.nan, -1.0] * 8, np.float32)
    wrapped = _np(vf.astype(jnp.asarray(x), ALL32, dtype=pl.DT_INT16, round_mode=VFRoundMode.CAST_TRUNC))[0::2]
    np.testing.assert_array_equal(wrapped[:8], [-25536, 25536, 4464, 3_000_000_000 % 65536, 32767, -32768, 0, -1])
    saturated = _np(vf.astype(jnp.asarray(x), ALL32, dtype=pl.DT_INT16, round_mode=VFRoundMode.CAST_TRUNC,
                              saturate=Sat.ON))[0::2]  # fmt: skip
    np.testing.assert_array_equal(saturated[:8], [32767, -32768, 32767, 32767, 32767, -32768, 0, -1])
    ints = np.array([300, -1, 65535, 7] * 16, np.int32)
    all_i32 = vf.create_mask(dtype=pl.DT_INT32)
    np.testing.assert_array_equal(
        _np(vf.astype(jnp.asarray(ints), all_i32, dtype=pl.DT_UINT16))[0:8:2], [300, 65535, 65535, 7]
    )
    np.testing.assert_array_equal(
        _np(vf.astype(jnp.asarray(ints), all_i32, dtype=pl.DT_UINT8, saturate=Sat.ON))[0:16:4], [255, 0, 255, 7]
    )


def test_astype_between_widths_uses_the_layout_half_and_rounds_like_ml_dtypes():
    x = _f32()
    x[0] = 65520.0  # rounds to inf in f16 (round to nearest even)
    even = _np(vf.astype(jnp.asarray(x), ALL32, dtype=pl.DT_FP16, layout=CastLayout.ZERO))
    odd = _np(vf.astype(jnp.asarray(x), ALL32, dtype=pl.DT_FP16, layout=CastLayout.ONE))
    with np.errstate(over="ignore"):
        half = x.astype(np.float16)
    np.testing.assert_array_equal(even[0::2], half)
    assert not even[1::2].any() and not odd[0::2].any()
    np.testing.assert_array_equal(odd[1::2], half)
    bf = _np(vf.astype(jnp.asarray(x), ALL32, dtype=pl.DT_BF16))[0::2]
    np.testing.assert_array_equal(bf.view(np.uint16), x.astype(ml_dtypes.bfloat16).view(np.uint16))
    h = (RNG.standard_normal(128)).astype(np.float16)
    back = _np(vf.astype(jnp.asarray(h), vf.create_mask(dtype=pl.DT_FP16), dtype=pl.DT_FP32, layout=CastLayout.ONE))
    np.testing.assert_array_equal(back, h[1::2].astype(np.float32))
    e4m3 = _np(vf.astype(jnp.asarray(x), ALL32, dtype=pl.DT_FP8E4M3FN, saturate=Sat.ON))[0::4]
    np.testing.assert_array_equal(e4m3[1:].view(np.uint8), x[1:].astype(ml_dtypes.float8_e4m3fn).view(np.uint8))
    assert float(e4m3[0]) == 448.0  # saturated to the largest finite e4m3


def test_astype_directed_rounding_of_large_integers():
    x = np.array([16_777_217, -16_777_217, 2_147_483_647, 16_777_219] * 16, np.int32)
    all_i32 = vf.create_mask(dtype=pl.DT_INT32)
    exact = x[:4].astype(np.float64)
    expected = {
        VFRoundMode.CAST_FLOOR: [16_777_216, -16_777_218, 2_147_483_520, 16_777_218],
        VFRoundMode.CAST_CEIL: [16_777_218, -16_777_216, 2_147_483_648, 16_777_220],
        VFRoundMode.CAST_ROUND: [16_777_218, -16_777_218, 2_147_483_648, 16_777_220],  # ties away from zero
        VFRoundMode.CAST_RINT: [16_777_216, -16_777_216, 2_147_483_648, 16_777_220],  # ties to even
    }
    for mode, want in expected.items():
        got = _np(vf.astype(jnp.asarray(x), all_i32, dtype=pl.DT_FP32, round_mode=mode))[:4].astype(np.float64)
        np.testing.assert_array_equal(got, want, err_msg=mode.name)
        assert np.all(np.abs(got - exact) <= 128)


def test_astype_refuses_an_undocumented_conversion():
    with pytest.raises(UnsupportedConstruct, match="from int32 to float16 is not a conversion"):
        vf.astype(jnp.zeros(64, jnp.int32), ALL32, dtype=pl.DT_FP16)


def test_exp_sub_in_f32_and_from_f16_halves():
    a, m = _f32(scale=1.0), _f32(scale=1.0)
    tail = vf.update_mask(33, dtype=pl.DT_FP32)
    got = _np(vf.exp_sub(jnp.asarray(a), jnp.asarray(m), tail))
    np.testing.assert_allclose(got, np.where(np.arange(64) < 33, np.exp(a - m), 0), rtol=1e-6)
    h, hm = (RNG.standard_normal(128)).astype(np.float16), (RNG.standard_normal(128)).astype(np.float16)
    for layout, start in ((CastLayout.ZERO, 0), (CastLayout.ONE, 1)):
        wide = _np(vf.exp_sub(jnp.asarray(h), jnp.asarray(hm), vf.create_mask(dtype=pl.DT_FP16), layout=layout))
        assert wide.dtype == np.float32
        ref = np.exp(h[start::2].astype(np.float32) - hm[start::2].astype(np.float32))
        np.testing.assert_allclose(wide, ref, rtol=1e-6)


def test_interleave_round_trips_and_histograms_count():
    a, b = _f32(), _f32()
    i0, i1 = vf.interleave(jnp.asarray(a), jnp.asarray(b))
    np.testing.assert_array_equal(_np(i0), np.stack([a[:32], b[:32]], 1).reshape(-1))
    r0, r1 = vf.de_interleave(i0, i1)
    np.testing.assert_array_equal(_np(r0), a)
    np.testing.assert_array_equal(_np(r1), b)
    values = RNG.integers(0, 256, 256).astype(np.uint8)
    all8 = vf.create_mask(dtype=pl.DT_UINT8)
    start = jnp.full(128, 5, jnp.uint16)
    freq = _np(vf.histograms(jnp.asarray(values), all8, hist_type=HistType.FREQUENCY).resolve(start))
    np.testing.assert_array_equal(freq, 5 + np.bincount(values, minlength=256)[:128])
    cumulative = _np(
        vf.histograms(jnp.asarray(values), all8, bin_type=BinType.BIN1).resolve(jnp.zeros(128, jnp.uint16))
    )
    np.testing.assert_array_equal(cumulative, np.cumsum(np.bincount(values, minlength=256))[128:])


# -- whole vector functions ----------------------------------------------------------------------------------------
def softmax_rows_vf(in_tile, out_tile, n_rows, n_cols):
    """Row softmax over ``n_cols`` columns, two registers per row with a tail mask (PyPTO-Pro's softmax VF)."""
    preg = vf.create_mask(pattern=MaskPattern.ALL, dtype=pl.DT_FP32)
    n_regs = (n_cols + F32_LANES - 1) // F32_LANES
    for m in pl.range(0, n_rows):
        base = m * ROW
        row_max = vf.full(NEG_INF, preg, dtype=pl.DT_FP32)
        for r in pl.range(0, n_regs):
            mreg = vf.update_mask(pl.min(F32_LANES, n_cols - r * F32_LANES), dtype=pl.DT_FP32)
            part = vf.reduce_max(vf.load_align(in_tile, base + r * F32_LANES), mreg)
            row_max = vf.max(row_max, part, preg)
        row_max_b = vf.full(row_max, preg)
        row_sum = vf.full(0.0, preg, dtype=pl.DT_FP32)
        for r in pl.range(0, n_regs):
            mreg = vf.update_mask(pl.min(F32_LANES, n_cols - r * F32_LANES), dtype=pl.DT_FP32)
            e = vf.exp_sub(vf.load_align(in_tile, [m, r * F32_LANES]), row_max_b, mreg)
            row_sum = vf.add(row_sum, vf.reduce_sum(e, mreg), preg)
        row_sum_b = vf.full(row_sum, preg)
        for r in pl.range(0, n_regs):
            mreg = vf.update_mask(pl.min(F32_LANES, n_cols - r * F32_LANES), dtype=pl.DT_FP32)
            e = vf.exp_sub(vf.load_align(in_tile, base + r * F32_LANES), row_max_b, mreg)
            vf.store_align(out_tile + (base + r * F32_LANES), vf.div(e, row_sum_b, mreg), mreg)


IN_TILE = _tile("in_tile", 0x0, ROWS, ROW)
OUT_TILE = _tile("out_tile", 0x800, ROWS, ROW)
X = RNG.standard_normal((ROWS, ROW)).astype(np.float32)


def _softmax(x: np.ndarray, rows: int, cols: int) -> np.ndarray:
    out = np.zeros_like(x)
    part = x[:rows, :cols].astype(np.float64)
    e = np.exp(part - part.max(axis=1, keepdims=True))
    out[:rows, :cols] = e / e.sum(axis=1, keepdims=True)
    return out


def _run_softmax(x, rows, cols):
    tiles = {IN_TILE: jnp.asarray(x), OUT_TILE: jnp.zeros((ROWS, ROW), jnp.float32)}
    return run_vf(softmax_rows_vf, (IN_TILE, OUT_TILE, rows, cols), {}, tiles)


def test_softmax_vf_with_nested_loops_and_carried_registers_matches_numpy():
    out = _run_softmax(X, 3, 100)
    assert set(out) == {OUT_TILE}
    np.testing.assert_allclose(_np(out[OUT_TILE]), _softmax(X, 3, 100), rtol=2e-6, atol=1e-7)


def test_softmax_vf_with_traced_scalars_agrees_under_jit_and_vmap():
    eager = _np(_run_softmax(X, 3, 100)[OUT_TILE])
    jitted = jax.jit(lambda x, rows, cols: _run_softmax(x, rows, cols)[OUT_TILE])
    np.testing.assert_allclose(_np(jitted(jnp.asarray(X), 3, 100)), eager, rtol=1e-6, atol=0)
    rows, cols = jnp.array([3, 2, 4]), jnp.array([100, 64, 7])
    batched = _np(jax.vmap(jitted, in_axes=(None, 0, 0))(jnp.asarray(X), rows, cols))
    np.testing.assert_allclose(batched[0], eager, rtol=1e-6, atol=0)
    for i in range(1, 3):
        np.testing.assert_allclose(batched[i], _softmax(X, int(rows[i]), int(cols[i])), rtol=2e-6, atol=1e-7)


def test_vf_accesses_lists_the_tile_parameters_read_and_written():
    assert vf_accesses(softmax_rows_vf, (IN_TILE, OUT_TILE, 3, 100), {}) == (("in_tile",), ("out_tile",))
    assert vf_accesses(softmax_rows_vf, (IN_TILE, OUT_TILE), {"n_rows": jnp.int32(2), "n_cols": 64}) == (
        ("in_tile",),
        ("out_tile",),
    )
    assert vf_accesses(accumulate_vf, (IN_TILE, OUT_TILE, 4), {}) == (("src", "dst"), ("dst",))


def accumulate_vf(src, dst, n):
    """``dst[0:64] += sum of rows`` through ``mul_add_dst`` (which reads its destination), with a traced if."""
    preg = vf.create_mask(dtype=pl.DT_FP32)
    acc = vf.load_align(dst, 0)
    ones = vf.full(1.0, preg, dtype=pl.DT_FP32)
    for i in pl.range(0, n):
        row = vf.load_align(src, i * ROW)
        acc = vf.mul_add_dst(row, ones, preg)
        last = row
    if n > 2:
        acc = vf.add(acc, last, preg)
    vf.store_align(dst, acc, preg)


def test_a_vf_reading_its_destination_and_a_register_first_bound_in_a_loop():
    dst = RNG.standard_normal((ROWS, ROW)).astype(np.float32)
    for n in (4, 2):
        tiles = {IN_TILE: jnp.asarray(X), OUT_TILE: jnp.asarray(dst)}
        got = _np(jax.jit(lambda k, t=tiles: run_vf(accumulate_vf, (IN_TILE, OUT_TILE, k), {}, t)[OUT_TILE])(n))
        want = dst[0, :64].astype(np.float64) + X[:n, :64].sum(axis=0) + (X[n - 1, :64] if n > 2 else 0)
        np.testing.assert_allclose(got[0, :64], want, rtol=1e-5)
        np.testing.assert_array_equal(got[0, 64:], dst[0, 64:])
        np.testing.assert_array_equal(got[1:], dst[1:])


def mask_round_trip_vf(src, bits, out):
    """A compare mask stored packed, reloaded into a name declared a mask (pld with LoadDist.US)."""
    preg = vf.create_mask(dtype=pl.DT_FP32)
    x = vf.load_align(src, 0)
    vf.store_align(bits, vf.ge(x, 0.0, preg), dist=StoreDist.PACK)
    vf.mem_bar()
    loaded = vf.create_mask(dtype=pl.DT_FP32)
    loaded = vf.load_align(bits, dist=LoadDist.US)
    vf.store_align(out, vf.abs(x, loaded), preg)


def collect_positive_vf(src, out_idx, n):
    """Indices of the positive lanes of ``n`` passes, appended with squeeze + unaligned stores (PyPTO-Pro's top-k)."""
    preg = vf.create_mask(dtype=pl.DT_INT32)
    vf.clear_spr()
    ureg = vf.unalign_reg_for_store()
    for i in pl.range(0, n):
        positive = vf.gt(vf.load_align(src, 0), 0.0, preg)
        packed = vf.squeeze(vf.arange(i * F32_LANES, dtype=pl.DT_INT32), positive, gather_mode=SqueezeMode.STORE_REG)
        vf.store_unalign(out_idx, packed, ureg, post_update=True)
    vf.store_unalign_post(out_idx, ureg)


def test_mask_loads_and_unaligned_stores_through_ub():
    bits, out = _tile("bits", 0x1000, 1, 64), _tile("out", 0x1100, 1, 64)
    tiles = {IN_TILE: jnp.asarray(X), bits: jnp.zeros((1, 64), jnp.float32), out: jnp.zeros((1, 64), jnp.float32)}
    got = run_vf(mask_round_trip_vf, (IN_TILE, bits, out), {}, tiles)
    np.testing.assert_array_equal(_np(got[out])[0], np.where(X[0, :64] >= 0, np.abs(X[0, :64]), 0))
    idx = _tile("idx", 0x2000, 1, 256, "int32")
    written = run_vf(collect_positive_vf, (IN_TILE, idx, 3), {}, {IN_TILE: jnp.asarray(X),
                     idx: jnp.full((1, 256), -1, jnp.int32)})[idx]  # fmt: skip
    positive = np.nonzero(X[0, :64] > 0)[0]
    expected = np.concatenate([positive, positive + 64, positive + 128])
    np.testing.assert_array_equal(_np(written)[0, : expected.size], expected)
    assert (_np(written)[0, expected.size :] == -1).all()


def block_store_vf(src, dst):
    """An fp16 register written as 8 DataBlocks 2 blocks apart, twice (post_update by one block)."""
    preg = vf.create_mask(dtype=pl.DT_FP32)
    h = vf.astype(vf.load_align(src, 0), preg, dtype=pl.DT_FP16)
    for _ in pl.range(0, 2):
        vf.store_align(dst, h, vf.update_mask(128, dtype=pl.DT_FP16), block_stride=2, repeat_stride=1,
                       data_copy_mode=DataCopyMode.DATA_BLOCK_COPY, post_update=True)  # fmt: skip


def test_data_block_copy_store_with_post_update():
    dst = _tile("dst", 0x3000, 4, 64, "float16")
    got = _np(run_vf(block_store_vf, (IN_TILE, dst), {}, {IN_TILE: jnp.asarray(X), dst: jnp.zeros((4, 64),
              jnp.float16)})[dst]).reshape(-1)  # fmt: skip
    register = np.zeros(128, np.float16)
    register[0::2] = X[0, :64].astype(np.float16)
    expected = np.zeros(256, np.float16)
    for trip in range(2):
        for block in range(8):
            start = trip * 16 + block * 2 * 16
            expected[start : start + 16] = register[block * 16 : (block + 1) * 16]
    np.testing.assert_array_equal(got, expected)


def abs_vf(src, dst):
    preg = vf.create_mask(dtype=pl.DT_FP32)
    vf.store_align(dst, vf.abs(vf.load_align(src, 0), preg), preg)


def nested_vf(src, dst):
    """Calls another vector function (run inline), then reads what it stored; ``vf`` is never imported here."""
    abs_vf(src, dst)
    preg = vf.create_mask(dtype=pl.DT_FP32)
    vf.store_align(dst, vf.adds(vf.load_align(dst, 0), 1.0, preg), preg)


def test_nested_vector_functions_run_inline_and_vf_needs_no_import():
    without_vf = {k: v for k, v in globals().items() if k != "vf"}  # PyPTO-Pro reserves the name in a VF body
    body = types.FunctionType(nested_vf.__code__, without_vf, "nested_vf")
    tiles = {IN_TILE: jnp.asarray(X), OUT_TILE: jnp.zeros((ROWS, ROW), jnp.float32)}
    got = _np(run_vf(body, (IN_TILE, OUT_TILE), {}, tiles)[OUT_TILE])
    np.testing.assert_array_equal(got[0, :64], np.abs(X[0, :64]) + 1)
    assert vf_accesses(body, (IN_TILE, OUT_TILE), {}) == (("src", "dst"), ("dst",))


def test_distinct_tiles_over_the_same_bytes_are_refused():
    alias = _tile("alias", 0x100, 1, 64)  # inside IN_TILE's bytes
    tiles = {IN_TILE: jnp.asarray(X), alias: jnp.zeros((1, 64), jnp.float32)}
    with pytest.raises(UnsupportedConstruct, match="overlaps it in UB"):
        run_vf(abs_vf, (IN_TILE, alias), {}, tiles)


# -- refusals ------------------------------------------------------------------------------------------------------
def static_out_of_range_vf(src, dst):
    vf.store_align(dst, vf.load_align(src, ROWS * ROW - 32), vf.create_mask(dtype=pl.DT_FP32))


def traced_out_of_range_vf(src, dst, offset):
    preg = vf.create_mask(dtype=pl.DT_FP32)
    vf.store_align(dst + offset, vf.load_align(src, offset), preg)


def unmodelled_vf(src, dst):
    mask = vf.create_mask(dtype=pl.DT_FP32)
    vf.store_align(dst, vf.unsqueeze(mask, dtype=pl.DT_UINT32), mask)


def unknown_vf(src, dst):
    vf.store_align(dst, vf.rsqrt(vf.load_align(src, 0)), vf.create_mask())


def test_a_static_out_of_range_load_is_refused_naming_the_tile():
    tiles = {IN_TILE: jnp.asarray(X), OUT_TILE: jnp.zeros((ROWS, ROW), jnp.float32)}
    with pytest.raises(
        ValueError, match=r"rule 'bounds': vf.load_align reads .* `in_tile` \(elements 480 to 544\).* 512 elements"
    ):
        run_vf(static_out_of_range_vf, (IN_TILE, OUT_TILE), {}, tiles)


def test_a_traced_out_of_range_access_reads_zeros_and_drops_stores():
    tiles = {IN_TILE: jnp.asarray(X), OUT_TILE: jnp.zeros((ROWS, ROW), jnp.float32)}
    got = jax.jit(lambda k: run_vf(traced_out_of_range_vf, (IN_TILE, OUT_TILE, k), {}, tiles)[OUT_TILE])(480)
    flat = _np(got).reshape(-1)
    np.testing.assert_array_equal(flat[480:], X.reshape(-1)[480:])  # the 32 lanes inside; the rest dropped
    assert not flat[:480].any()


@pytest.mark.parametrize(("body", "name"), [(unmodelled_vf, "vf.unsqueeze"), (unknown_vf, "vf.rsqrt")])
def test_an_unmodelled_op_is_refused_by_name(body, name):
    tiles = {IN_TILE: jnp.asarray(X), OUT_TILE: jnp.zeros((ROWS, ROW), jnp.float32)}
    with pytest.raises(UnsupportedConstruct, match=rf"rule 'construct': {name} is not modelled"):
        run_vf(body, (IN_TILE, OUT_TILE), {}, tiles)
