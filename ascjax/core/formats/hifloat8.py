"""HiFloat8 (HiF8), Huawei's 8-bit tapered float, held as uint8 bit patterns.

Layout [facts §6, asc-devkit ``FPTranslation::Hif8ToFloatCommon``]: sign | dot field D | exponent E |
mantissa M, value ``±2^E · (1 + M)``. D is a prefix code that sets the widths:

======  ====  ====  ==================
D       E     M     exponent
======  ====  ====  ==================
``11``  4     1     ±8 .. ±15
``10``  3     2     ±4 .. ±7
``01``  2     3     ±2 .. ±3
``001`` 1     3     ±1
``0001`` 0    3     0
``0000`` -    3     denormal ±2^(M-23)
======  ====  ====  ==================

E is sign-magnitude: its top stored bit is the exponent's sign, the magnitude's leading 1 is
implicit. Specials: 0x00 is the only zero, 0x80 NaN, 0x6F / 0xEF ±Inf; 0x6E = 2^15 = 32768 is
the largest finite value, 0x01 = 2^-22 the smallest.

Encoding (f32 -> HiF8) rounds to nearest with ties away from zero (``CAST_ROUND``, fixpipe
``QF322HIF8_PRE``): the f32 mantissa is rounded at the width of its binade. |x| >= 40960
(1.25 · 2^15, the midpoint to the Inf code) overflows: ±Inf, or ±32768 in saturation mode,
where NaN becomes 0 [asc-devkit CPU twin ``__cvt_hifloat8x2_t``]. Hybrid rounding
(``CAST_HYBRID``, ``QF322HIF8_PRE_HYBRID``) is not defined in public material: refused.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

ZERO, NAN, POS_INF, NEG_INF, MAX, NEG_MAX = 0x00, 0x80, 0x6F, 0xEF, 0x6E, 0xEE
MAX_VALUE = 32768.0
OVERFLOW_THRESHOLD = 40960.0  # 1.25 * 2^15: from here on a value rounds to the Inf code
ROUNDINGS = ("away",)


def _decode_one(code: int) -> float:
    """The reference decoder, bit for bit: value of one code (Python float)."""
    code &= 0xFF
    if code == ZERO:
        return 0.0
    if code == NAN:
        return float("nan")
    if code in (POS_INF, NEG_INF):
        return float("inf") if code == POS_INF else float("-inf")
    sign = -1.0 if code & 0x80 else 1.0
    if (code >> 3) & 0xF == 0:  # D = 0000: denormal 2^(M - 23)
        return sign * 2.0 ** ((code & 0x7) - 23)
    b6, b5, b4 = (code >> 6) & 1, (code >> 5) & 1, (code >> 4) & 1
    if b6:
        d_bits, e_bits = 2, (4 if b5 else 3)
    elif b5:
        d_bits, e_bits = 2, 2
    elif b4:
        d_bits, e_bits = 3, 1
    else:
        d_bits, e_bits = 4, 0
    m_bits = 7 - d_bits - e_bits
    exponent = 0
    if e_bits:
        field = (code >> m_bits) & ((1 << e_bits) - 1)
        magnitude = (field & ((1 << (e_bits - 1)) - 1)) | (1 << (e_bits - 1))
        exponent = -magnitude if field >> (e_bits - 1) else magnitude
    mantissa = code & ((1 << m_bits) - 1)
    return sign * 2.0**exponent * (1.0 + mantissa / (1 << m_bits))


#: value of every code as float32 (NaN for 0x80)
TABLE = np.array([_decode_one(c) for c in range(256)], np.float32)


def decode(codes) -> jax.Array:
    """HiF8 codes (any integer array; uint8 bit patterns) -> float32 values."""
    idx = jnp.asarray(codes).astype(jnp.int32) & 0xFF
    return jnp.asarray(TABLE)[idx]


def _mantissa_bits(e):
    """Mantissa width of the HiF8 binade with unbiased exponent ``e`` (0 in the denormal binades)."""
    a = jnp.abs(e)
    return jnp.where(e < -15, 0, jnp.where(a <= 3, 3, jnp.where(a <= 7, 2, 1)))


def encode(x, *, saturate=False, rounding: str = "away") -> jax.Array:
    """float values -> HiF8 codes (uint8), ties away from zero.

    ``saturate`` (a bool, traced allowed) is CTRL[48] == 0: NaN -> 0x00 and overflow or ±Inf ->
    ±32768 (0x6E / 0xEE); otherwise NaN -> 0x80 and overflow or ±Inf -> ±Inf (0x6F / 0xEF).
    """
    if rounding == "hybrid":
        raise NotImplementedError(
            "HiFloat8 hybrid rounding (CAST_HYBRID / QF322HIF8_PRE_HYBRID) is not defined in public Ascend "
            "material, so ascjax cannot emulate it bit-exactly: use rounding='away' (CAST_ROUND / QF322HIF8_PRE)"
        )
    if rounding not in ROUNDINGS:
        raise ValueError(f"HiFloat8 rounding is 'away' (ties away from zero) or 'hybrid', got {rounding!r}")
    x = jnp.asarray(x, jnp.float32)
    bits = jax.lax.bitcast_convert_type(x, jnp.uint32)
    negative = (bits >> 31) == 1
    mag = bits & jnp.uint32(0x7FFFFFFF)
    e = (mag >> 23).astype(jnp.int32) - 127
    # round half away from zero at the binade's mantissa width: add half an ulp, drop the rest
    drop = (23 - _mantissa_bits(e)).astype(jnp.uint32)
    rounded = (mag + (jnp.uint32(1) << (drop - 1))) & ~((jnp.uint32(1) << drop) - 1)
    er = (rounded >> 23).astype(jnp.int32) - 127
    width = _mantissa_bits(er)
    m = ((rounded & jnp.uint32(0x7FFFFF)) >> (23 - width).astype(jnp.uint32)).astype(jnp.int32)
    a = jnp.abs(er)
    s = (er < 0).astype(jnp.int32)
    normal = jnp.where(
        a == 0,
        0x08 | m,
        jnp.where(
            a == 1,
            0x10 | (s << 3) | m,
            jnp.where(
                a <= 3,
                0x20 | (s << 4) | ((a & 1) << 3) | m,
                jnp.where(a <= 7, 0x40 | (s << 4) | ((a & 3) << 2) | m, 0x60 | (s << 4) | ((a & 7) << 1) | m),
            ),
        ),
    )
    code = jnp.where(er < -15, er + 23, normal)  # denormals 2^-22 .. 2^-16: M = e + 23
    code = jnp.where(e == -23, 1, code)  # [2^-23, 2^-22): nearer 2^-22 than 0, the tie 2^-23 goes away
    tiny = e < -23  # below 2^-23 (f32 zeros and subnormals too): rounds to the only zero
    sat = jnp.asarray(saturate)
    inf_code = jnp.where(sat, MAX, POS_INF)
    overflow = (mag >= 0x7F800000) | (er > 15) | ((er == 15) & (m > 0))
    code = jnp.where(overflow, inf_code, code)
    code = jnp.where(negative & ~tiny, code | 0x80, code)
    code = jnp.where(tiny, ZERO, code)
    code = jnp.where(jnp.isnan(x), jnp.where(sat, ZERO, NAN), code)
    return code.astype(jnp.uint8)
