"""Conversion of float32 results to every output type, with the CTRL[48] saturation modes.

[facts §5 "Saturation", seed 004; asc-devkit CPU twin ``__cvt_float8_e4m3x2_t`` / ``_e5m2x2_t`` /
``__cvt_hifloat8x2_t``] In saturation mode (CTRL[48] = 0, the default) ±Inf and values past the
largest finite one become ±max of the output type and NaN becomes 0; in non-saturation mode they
propagate: ±Inf where the type has it (f32, f16, bf16, e5m2, HiF8), else NaN (e4m3fn). Integer
outputs always saturate (NaN -> 0). Floats round to nearest even (``CAST_RINT``); HiF8 rounds
ties away from zero, its only public rounding. The 8-bit formats have one NaN code each: fp8
NaN is written as 0x7F (the CPU twin's choice), HiF8 NaN is 0x80. NaN payloads of f16/bf16/f32
outputs are not modelled: a NaN converted to f16 or bf16 is written as that type's quiet NaN with the source's sign,
on every backend (XLA converts payload bits on a CPU and writes 0x7FFF on a GPU).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np

from . import hifloat8

FP8_NAN_CODE = 0x7F
_FLOATS = {
    "float32": jnp.float32,
    "float16": jnp.float16,
    "bfloat16": jnp.bfloat16,
    "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
    "float8_e5m2": ml_dtypes.float8_e5m2,
}
_INTS = {"int8": jnp.int8, "uint8": jnp.uint8, "int32": jnp.int32}
OUTPUT_DTYPES = (*_FLOATS, "hifloat8", *_INTS)


def max_finite(dtype: str) -> float:
    """Largest finite value of an output type."""
    if dtype == "hifloat8":
        return hifloat8.MAX_VALUE
    if dtype in _FLOATS:
        return float(ml_dtypes.finfo(_FLOATS[dtype]).max)
    return float(np.iinfo(_INTS[dtype]).max)


def _check(dtype: str, rounding: str | None) -> str:
    if dtype not in OUTPUT_DTYPES:
        raise ValueError(
            f"no Ascend conversion writes {dtype}: outputs are {', '.join(OUTPUT_DTYPES)} "
            "(fp4, int4 and e8m0 are input-only formats)"
        )
    default = "away" if dtype == "hifloat8" else "rint"
    rounding = default if rounding is None else rounding
    if dtype == "hifloat8":
        return rounding  # hifloat8.encode checks it (and refuses hybrid rounding)
    if rounding != "rint":
        raise ValueError(f"conversion to {dtype} rounds to nearest even (rounding='rint'), got {rounding!r}")
    return rounding


def _to_int(x, dtype: str):
    info = np.iinfo(_INTS[dtype])
    x = jnp.asarray(x)
    if jnp.issubdtype(x.dtype, jnp.integer):  # int32 (or narrower) sources
        return jnp.clip(x.astype(jnp.int32), info.min, info.max).astype(_INTS[dtype])
    x = x.astype(jnp.float32)
    r = jnp.round(x)  # round half to even
    # compare in float: the bounds of int32 are not all f32 values, so test before converting
    hi, lo = r >= float(info.max), r <= float(info.min)
    safe = jnp.where(hi | lo | jnp.isnan(r), 0.0, r)
    out = safe.astype(_INTS[dtype])
    return jnp.where(hi, info.max, jnp.where(lo, info.min, out)).astype(_INTS[dtype])


def order_key(f) -> jax.Array:
    """float32 values as int32 keys that order like the floats (-0 just below +0), subnormals included:
    XLA on CPU treats float32 subnormals as 0 in float comparisons and min/max, not in integer ones."""
    bits = jax.lax.bitcast_convert_type(jnp.asarray(f, jnp.float32), jnp.int32)
    return bits ^ ((bits >> 31) & jnp.int32(0x7FFFFFFF))


@functools.partial(jax.custom_jvp, nondiff_argnums=(1,))
def _clip(x, big: float):
    """``clip(x, -big, big)`` on the bit patterns: XLA turns a float clip into min/max, which flush float32
    subnormals on CPU. Its derivative is the float clip's: 1 inside, 0 where it clips."""
    big = jnp.float32(big)
    key, bits = order_key(x), jax.lax.bitcast_convert_type(x, jnp.int32)
    as_bits = lambda v: jax.lax.bitcast_convert_type(v, jnp.int32)
    clipped = jnp.where(key > order_key(big), as_bits(big), jnp.where(key < order_key(-big), as_bits(-big), bits))
    return jax.lax.bitcast_convert_type(clipped, jnp.float32)


@_clip.defjvp
def _clip_jvp(big, primals, tangents):
    (x,), (t,) = primals, tangents
    return _clip(x, big), jnp.where(jnp.abs(x) <= big, t, jnp.zeros_like(t))


#: The quiet NaN of each 16-bit float output, without its sign bit
QUIET_NAN_BITS = {"float16": 0x7E00, "bfloat16": 0x7FC0}
_F16_SIGN_BIT = 0x8000


def _quiet_nan(x, y, nan, dtype: str):
    """``y`` (``x`` converted to a 16-bit float) with its lanes ``nan`` written as the quiet NaN with ``x``'s sign.
    A select, so the other lanes keep their derivatives."""
    sign = (jax.lax.bitcast_convert_type(x, jnp.uint32) >> 16) & _F16_SIGN_BIT
    code = (sign | QUIET_NAN_BITS[dtype]).astype(jnp.uint16)
    return jnp.where(nan, jax.lax.bitcast_convert_type(code, _FLOATS[dtype]), y)


def cast(x, dtype: str, *, saturate=True, rounding: str | None = None) -> jax.Array:
    """float32 (or int32) values -> ``dtype`` storage (HiF8: uint8 codes), CTRL[48] mode ``saturate``.

    ``saturate`` may be traced. ``rounding`` is ``"rint"`` (default) or, for HiF8, ``"away"``
    (default) or ``"hybrid"`` (refused: not publicly defined).
    """
    rounding = _check(dtype, rounding)
    if dtype in _INTS:
        return _to_int(x, dtype)
    x = jnp.asarray(x).astype(jnp.float32)
    if dtype == "hifloat8":
        return hifloat8.encode(x, saturate=saturate, rounding=rounding)
    sat = jnp.where(jnp.isnan(x), 0.0, _clip(x, max_finite(dtype)))
    y = jnp.where(jnp.asarray(saturate), sat, x).astype(_FLOATS[dtype])
    if dtype in QUIET_NAN_BITS:
        y = _quiet_nan(x, y, ~jnp.asarray(saturate) & jnp.isnan(x), dtype)
    if dtype.startswith("float8"):  # one NaN code (0x7F), whatever the sign
        codes = jax.lax.bitcast_convert_type(y, jnp.uint8)
        codes = jnp.where(jnp.isnan(y.astype(jnp.float32)), jnp.uint8(FP8_NAN_CODE), codes)
        y = jax.lax.bitcast_convert_type(codes, _FLOATS[dtype])
    return y
