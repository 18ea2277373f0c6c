"""Element values of every format: what the cube computes with (float32, or int32 for integers)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from . import hifloat8, mx

_INTEGERS = ("int8", "int4", "int32", "uint8")


def decode(x, dtype: str) -> jax.Array:
    """Stored elements of canonical dtype ``dtype`` -> float32 values (int32 for integer types).

    Formats held as uint8 bit patterns (hifloat8, float4_e1m2) are decoded from their codes;
    ml_dtypes types are converted exactly.
    """
    if dtype == "hifloat8":
        return hifloat8.decode(x)
    if dtype == "float4_e1m2":
        return mx.decode_e1m2(x)
    if dtype in _INTEGERS:
        return jnp.asarray(x).astype(jnp.int32)
    return jnp.asarray(x).astype(jnp.float32)
