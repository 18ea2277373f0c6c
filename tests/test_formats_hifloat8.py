"""HiFloat8 against an independent bit-by-bit decoder and a brute-force nearest-value encoder.

The decoder below follows the layout table of the Ascend data-type page (sign, prefix-coded dot
field, sign-magnitude exponent with an implicit leading 1, mantissa), written separately from
``ascjax.formats.hifloat8``. Encoding is checked on every code, on every midpoint between
neighbouring values (ties go away from zero), at the overflow and underflow edges, in both
saturation modes, and on random floats against a nearest-value search over the whole table.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ascjax.core.formats import cast, hifloat8

# dot-field prefix -> (exponent bits, mantissa bits), longest prefix first
_FIELDS = [("0000", None, 3), ("0001", 0, 3), ("001", 1, 3), ("01", 2, 3), ("10", 3, 2), ("11", 4, 1)]


def reference_decode(code: int) -> float:
    bits = f"{code:08b}"
    if code == 0x00:
        return 0.0
    if code == 0x80:
        return float("nan")
    if code in (0x6F, 0xEF):
        return float("inf") if code == 0x6F else float("-inf")
    sign = -1.0 if bits[0] == "1" else 1.0
    rest = bits[1:]
    for prefix, e_bits, m_bits in _FIELDS:
        if rest.startswith(prefix):
            tail = rest[len(prefix) :]
            if e_bits is None:  # denormal: 2^(M - 23)
                return sign * 2.0 ** (int(tail, 2) - 23)
            e_field, m_field = tail[:e_bits], tail[e_bits:]
            assert len(m_field) == m_bits
            exponent = 0
            if e_bits:
                magnitude = int("1" + e_field[1:], 2)  # implicit leading 1 replaces the sign bit
                exponent = -magnitude if e_field[0] == "1" else magnitude
            return sign * 2.0**exponent * (1 + int(m_field, 2) / 2**m_bits)
    raise AssertionError(code)


REF = np.array([reference_decode(c) for c in range(256)])
_ENCODE = jax.jit(hifloat8.encode, static_argnames=("saturate", "rounding"))


def encode(x, saturate=False) -> np.ndarray:
    """``hifloat8.encode`` on x padded to 256 elements: one compilation serves every call here."""
    x = np.asarray(x, np.float32)
    flat = np.zeros(-(-max(x.size, 1) // 256) * 256, np.float32)
    flat[: x.size] = x.reshape(-1)
    return np.asarray(_ENCODE(flat, saturate=saturate))[: x.size].reshape(x.shape)


CODES = np.arange(256, dtype=np.uint8)
FINITE = np.isfinite(REF)
POSITIVE = np.flatnonzero(FINITE & (REF > 0))
ORDER = POSITIVE[np.argsort(REF[POSITIVE])]  # positive codes by value


def test_decode_all_256_codes():
    got = np.asarray(hifloat8.decode(CODES), np.float64)
    np.testing.assert_array_equal(got, REF)  # NaN only at 0x80
    assert np.flatnonzero(np.isnan(got)).tolist() == [0x80]
    assert np.flatnonzero(got == 0).tolist() == [0x00]  # 0x00 is the only zero
    assert REF[0x6E] == 32768 == np.max(REF[FINITE]) and REF[0x01] == 2.0**-22 == np.min(REF[POSITIVE])
    assert len(set(REF[FINITE])) == 253  # 255 non-NaN codes, two of them infinite


def test_encode_decode_round_trip_every_code():
    for saturate in (False, True):
        back = encode(REF, saturate=saturate)
        want = CODES.copy()
        if saturate:  # +-Inf saturate to +-max, NaN to 0
            want[[0x6F, 0xEF, 0x80]] = [0x6E, 0xEE, 0x00]
        else:
            want[0x80] = 0x80
        np.testing.assert_array_equal(back, want)


def test_midpoints_round_away_from_zero():
    values = REF[ORDER]
    mids = ((values[:-1] + values[1:]) / 2).astype(np.float32)
    assert np.all(mids.astype(np.float64) == (values[:-1] + values[1:]) / 2)  # exact in f32
    below, above = np.nextafter(mids, np.float32(0)), np.nextafter(mids, np.float32(np.inf))
    for sign, offset in ((1, 0), (-1, 0x80)):
        enc = lambda x: encode(sign * x)  # noqa: B023, E731
        np.testing.assert_array_equal(enc(mids), ORDER[1:] | offset)  # the tie goes to the larger magnitude
        np.testing.assert_array_equal(enc(below), ORDER[:-1] | offset)
        np.testing.assert_array_equal(enc(above), ORDER[1:] | offset)


@pytest.mark.parametrize(
    ("x", "plain", "saturated"),
    [
        (40960.0, 0x6F, 0x6E),  # 1.25 * 2^15, the midpoint to the Inf code: overflows
        (float(np.nextafter(np.float32(40960), np.float32(0))), 0x6E, 0x6E),
        (-40960.0, 0xEF, 0xEE),
        (1e30, 0x6F, 0x6E),
        (float("inf"), 0x6F, 0x6E),
        (float("-inf"), 0xEF, 0xEE),
        (float("nan"), 0x80, 0x00),
        (32768.0, 0x6E, 0x6E),
        (2.0**-23, 0x01, 0x01),  # half the smallest denormal: away from zero
        (float(np.nextafter(np.float32(2.0**-23), np.float32(0))), 0x00, 0x00),
        (-(2.0**-23), 0x81, 0x81),
        (-(2.0**-30), 0x00, 0x00),  # underflow never gives 0x80 (that is NaN)
        (-0.0, 0x00, 0x00),
        (1.5 * 2.0**-22, 0x02, 0x02),  # between denormals 2^-22 and 2^-21: the tie goes up
        (1.5 * 2.0**-16, 0x7E, 0x7E),  # between 2^-16 and 2^-15 (the first normal)
    ],
)
def test_overflow_and_underflow_edges(x, plain, saturated):
    assert int(encode(x)) == plain
    assert int(encode(x, saturate=True)) == saturated


def test_hybrid_rounding_is_refused_and_away_is_the_default():
    with pytest.raises(NotImplementedError, match="hybrid rounding .* not defined in public Ascend material"):
        hifloat8.encode(np.float32(1.0), rounding="hybrid")
    with pytest.raises(NotImplementedError, match="not defined"):
        cast(np.float32(1.0), "hifloat8", rounding="hybrid")
    assert int(hifloat8.encode(np.float32(1.0625), rounding="away")) == 0x09  # 1.0625 -> 1.125
    with pytest.raises(ValueError, match="'away' .* or 'hybrid'"):
        hifloat8.encode(np.float32(1.0), rounding="rint")


def _nearest_codes(x: np.ndarray) -> np.ndarray:
    """Brute force: the finite code nearest to each x (ties away from zero), overflow to Inf."""
    finite = np.flatnonzero(FINITE & (CODES != 0x80))
    dist = np.abs(x[:, None].astype(np.float64) - REF[finite][None, :])
    best = dist.min(axis=1, keepdims=True)
    ties = dist == best
    magnitude = np.where(ties, np.abs(REF[finite])[None, :], -1.0)
    pick = finite[np.argmax(magnitude, axis=1)]
    pick = np.where(np.abs(x) >= 40960, np.where(x > 0, 0x6F, 0xEF), pick)
    return pick.astype(np.uint8)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.floats(min_value=-60000, max_value=60000, allow_nan=False, width=32)
        | st.floats(min_value=-(2.0**-14), max_value=2.0**-14, width=32),
        min_size=1,
        max_size=64,
    )
)
def test_encode_is_the_nearest_value(xs):
    x = np.array(xs, np.float32)
    np.testing.assert_array_equal(encode(x), _nearest_codes(x))


def test_jit_agrees_with_eager():
    x = np.random.default_rng(0).standard_normal(512).astype(np.float32) * np.float32(300)
    x[:8] = [np.inf, -np.inf, np.nan, 40960, -40960, 2.0**-23, -(2.0**-30), 0]
    for saturate in (False, True):
        # the fixpipe's converter (saturate.cast) is HiF8 encoding, and eager equals jitted
        np.testing.assert_array_equal(np.asarray(cast(x, "hifloat8", saturate=saturate)), encode(x, saturate))
        np.testing.assert_array_equal(
            np.asarray(jax.jit(lambda v, s=saturate: hifloat8.encode(v, saturate=s))(x)),
            np.asarray(hifloat8.encode(x, saturate=saturate)),
        )
    np.testing.assert_array_equal(np.asarray(jax.jit(hifloat8.decode)(CODES)), np.asarray(hifloat8.decode(CODES)))
