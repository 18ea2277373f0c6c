"""float32 -> every output type (``ascjax.formats.cast``) in both CTRL[48] modes, and device bytes.

References: ml_dtypes / NumPy casts (round to nearest even) for the finite, in-range part, and
the asc-devkit CPU twin's rules for the rest: saturation mode clips to ±max and turns NaN into 0;
non-saturation mode overflows to ±Inf (e4m3fn: NaN 0x7F), fp8 NaN is 0x7F. Hypothesis draws the
inputs around each type's overflow edge; one fixed-size batch per call keeps compilations few.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ascjax.core import _dtypes as dtypes
from ascjax.core.formats import cast, from_device_bytes, saturate, to_device_bytes

FLOATS = {
    "float16": np.float16,
    "bfloat16": ml_dtypes.bfloat16,
    "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
    "float8_e5m2": ml_dtypes.float8_e5m2,
}
BATCH = 64


#: each 16-bit float's quiet NaN, sign bit clear
QUIET_NAN = {"float16": 0x7E00, "bfloat16": 0x7FC0}


def _reference(x: np.ndarray, dtype: str, sat: bool) -> np.ndarray:
    t = FLOATS[dtype]
    big = float(ml_dtypes.finfo(t).max)
    if sat:
        y = np.where(np.isnan(x), 0, np.clip(x, -big, big)).astype(t)
    else:
        with np.errstate(over="ignore"):
            y = x.astype(t)  # ml_dtypes: RNE, overflow to Inf (e4m3fn: NaN)
        if dtype in QUIET_NAN:  # a NaN is the type's quiet NaN with the source's sign (payloads not modelled)
            sign = (x.view(np.uint32) >> 16).astype(np.uint16) & np.uint16(0x8000)
            y = np.where(np.isnan(x), (sign | np.uint16(QUIET_NAN[dtype])).view(t), y)
    if dtype.startswith("float8"):
        codes = y.view(np.uint8).copy()
        codes[np.isnan(y.astype(np.float32))] = 0x7F
        y = codes.view(t)
    return y


def _bits(y: np.ndarray) -> np.ndarray:
    return y.view(f"u{y.dtype.itemsize}")


def _batch(xs) -> np.ndarray:
    x = np.zeros(BATCH, np.float32)
    x[: len(xs)] = xs
    return x


@pytest.mark.parametrize("dtype", sorted(FLOATS))
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_float_casts_match_reference(dtype, data):
    big = float(ml_dtypes.finfo(FLOATS[dtype]).max)
    lim = float(np.float32(min(1.2 * big, float(np.finfo(np.float32).max))))
    near = st.floats(min_value=-lim, max_value=lim, width=32)
    special = st.sampled_from([np.inf, -np.inf, np.nan, big, -big, 0.0, -0.0, 1e-39, -1e-40])  # with subnormals
    anything = st.floats(width=32)
    x = _batch(data.draw(st.lists(near | special | anything, min_size=1, max_size=BATCH)))
    for sat in (True, False):
        got = np.asarray(cast(x, dtype, saturate=sat))
        want = _reference(x, dtype, sat)
        np.testing.assert_array_equal(_bits(got), _bits(want), err_msg=f"{dtype} saturate={sat}")


def test_a_nan_converts_to_the_quiet_nan_with_its_sign_whatever_its_payload():
    # a canonical NaN, its negative, a signalling NaN, a negative payload, all payload bits (XLA's NaN on a GPU)
    nans = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF812345, 0x7FFFFFFF], np.uint32).view(np.float32)
    for dtype, quiet in QUIET_NAN.items():
        got = _bits(np.asarray(cast(nans, dtype, saturate=False)))
        np.testing.assert_array_equal(got, np.array([0, 0x8000, 0, 0x8000, 0], np.uint16) | quiet, err_msg=dtype)
        assert not _bits(np.asarray(cast(nans, dtype, saturate=True))).any()  # the good twin: saturation writes 0


@pytest.mark.parametrize(
    ("dtype", "x", "sat", "non_sat"),
    [
        # e4m3fn: 464 is the tie between 448 and 480 (even: 448); above it overflows [CPU twin: mantissa > 0x680000]
        (
            "float8_e4m3fn",
            [464.0, 465.0, -465.0, np.inf, np.nan],
            [0x7E, 0x7E, 0xFE, 0x7E, 0x00],
            [0x7E, 0x7F, 0x7F, 0x7F, 0x7F],
        ),
        # e5m2: 61440 ties to the Inf side [CPU twin: mantissa >= 0x700000]
        (
            "float8_e5m2",
            [61439.0, 61440.0, -61440.0, -np.inf, np.nan],
            [0x7B, 0x7B, 0xFB, 0xFB, 0x00],
            [0x7B, 0x7C, 0xFC, 0xFC, 0x7F],
        ),
    ],
)
def test_fp8_overflow_edges(dtype, x, sat, non_sat):
    for mode, want in ((True, sat), (False, non_sat)):
        got = np.asarray(cast(_batch(x), dtype, saturate=mode)).view(np.uint8)[: len(x)]
        assert got.tolist() == want, (dtype, mode)


def test_integer_outputs_always_saturate():
    x = _batch([127.5, 128.5, -129.0, 2.5, -2.5, np.nan, np.inf, -np.inf, 255.5, 1e10])
    for mode in (True, False):
        assert np.asarray(cast(x, "int8", saturate=mode))[:10].tolist() == [
            127,
            127,
            -128,
            2,
            -2,
            0,
            127,
            -128,
            127,
            127,
        ]
        assert np.asarray(cast(x, "uint8", saturate=mode))[:10].tolist() == [128, 128, 0, 2, 0, 0, 255, 0, 255, 255]
    assert np.asarray(cast(np.array([2**31 - 1, -(2**31)], np.int32), "int8")).tolist() == [127, -128]
    assert np.asarray(cast(np.float32([3e9, -3e9]), "int32")).tolist() == [2**31 - 1, -(2**31)]


def test_float32_output_saturation():
    x = np.float32([np.inf, -np.inf, np.nan, 1.0])
    big = np.finfo(np.float32).max
    np.testing.assert_array_equal(np.asarray(cast(x, "float32", saturate=True)), [big, -big, 0, 1])
    np.testing.assert_array_equal(np.asarray(cast(x, "float32", saturate=False)), x)


def test_cast_rejects_input_only_formats_and_other_roundings():
    for dtype in ("float4_e2m1fn", "int4", "float8_e8m0fnu"):
        with pytest.raises(ValueError, match="input-only formats"):
            cast(np.float32([1.0]), dtype)
    with pytest.raises(ValueError, match="rounds to nearest even"):
        cast(np.float32([1.0]), "float16", rounding="away")
    assert saturate.max_finite("hifloat8") == 32768 and saturate.max_finite("float8_e4m3fn") == 448


# -- device bytes --------------------------------------------------------------------------------
def _sample(name: str, rng) -> np.ndarray:
    storage = dtypes.to_numpy_dtype(name)
    if name in ("float4_e1m2",):
        return rng.integers(0, 16, (3, 4)).astype(np.uint8)
    if dtypes.bits(name) == 4:
        return rng.integers(0, 16, (3, 4)).astype(np.uint8).view(storage)
    return rng.integers(0, 256, (3, 4 * storage.itemsize)).astype(np.uint8).view(storage)


@pytest.mark.parametrize("name", sorted(dtypes._DTYPES))
def test_device_bytes_round_trip(name):
    x = _sample(name, np.random.default_rng(0))
    raw = to_device_bytes(x, name)
    assert len(raw) == x.size * dtypes.bits(name) // 8
    back = from_device_bytes(raw, name, x.shape)
    assert back.dtype == x.dtype
    np.testing.assert_array_equal(back.view(np.uint8), x.view(np.uint8))


def test_device_bytes_layout():
    assert to_device_bytes(np.float16([1.0, -2.0]), "float16") == b"\x00\x3c\x00\xc0"  # little-endian
    assert to_device_bytes(np.int32([1]), "int32") == b"\x01\x00\x00\x00"
    e2m1 = np.array([0.5, 6.0, -1.0, 0.0], ml_dtypes.float4_e2m1fn)  # codes 1, 7, 0xA, 0
    assert to_device_bytes(e2m1, "float4_e2m1fn") == bytes([0x71, 0x0A])  # first element in the low nibble
    assert to_device_bytes(np.array([-1, 7], ml_dtypes.int4), "int4") == bytes([0x7F])
    assert to_device_bytes(np.uint8([0x6E, 0x80]), "hifloat8") == b"\x6e\x80"


def test_device_bytes_errors_with_good_twins():
    with pytest.raises(ValueError, match="two elements per byte: give an even number"):
        to_device_bytes(np.array([1, 2, 3], ml_dtypes.int4), "int4")
    assert len(to_device_bytes(np.array([1, 2, 3, 4], ml_dtypes.int4), "int4")) == 2
    with pytest.raises(ValueError, match="float4_e1m2 codes are 0..15, got 16"):
        to_device_bytes(np.uint8([16, 0]), "float4_e1m2")
    with pytest.raises(ValueError, match=r"needs elements stored as float16, got float32"):
        to_device_bytes(np.float32([1.0]), "float16")
    with pytest.raises(ValueError, match=r"float16 of shape \(3,\) is 6 bytes, got 4"):
        from_device_bytes(b"\x00" * 4, "float16", 3)
    with pytest.raises(ValueError, match=r"packs into 1.5 bytes"):
        from_device_bytes(b"\x00\x00", "float4_e2m1fn", 3)


@pytest.mark.parametrize("sat", [True, False])
def test_float32_subnormals_cast_to_bfloat16_as_ml_dtypes_does_in_both_modes(sat):
    bits = np.random.default_rng(7).integers(1, 0x00800000, BATCH, dtype=np.uint32)  # every one a subnormal
    x = (bits | (np.arange(BATCH, dtype=np.uint32) % 2 << 31)).view(np.float32)
    got = np.asarray(cast(x, "bfloat16", saturate=sat))
    np.testing.assert_array_equal(_bits(got), _bits(x.astype(ml_dtypes.bfloat16)))
    assert np.count_nonzero(got.astype(np.float32)) > BATCH // 2  # not flushed to zero
