"""MX (microscaling) formats: E8M0 block scales over 32 K elements, MXFP8 and MXFP4 elements.

[facts §6; PyPTO-Pro ``matmul_mx.md``; asc-devkit ``MmadMx.md``] Each 32 consecutive elements
along K share one E8M0 scale ``2^(e - 127)``. MXFP8 elements are fp8 e4m3fn / e5m2, MXFP4
elements fp4 e2m1 / e1m2; the two formats of one family may be crossed (A e4m3 x B e5m2), the
families never. The E8M0 code 0xFF is NaN (OCP MX and ml_dtypes ``float8_e8m0fnu``; the Ascend
pages do not say): a block with a NaN scale contributes NaN.

fp4 e1m2 has no ml_dtypes type: it is held as uint8 codes 0..15 and decoded with the table of
asc-devkit ``FPTranslation::Fp4e1m2ToBf16`` (0, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 1.75 and their
negatives).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .._numerics import fold_sum, same_bits_dot_general

BLOCK = 32  # K elements per E8M0 scale
K_MULTIPLE = 64  # K of an MX matmul is a multiple of 64 (two scales per scale fractal)
SCALE_DTYPE = "float8_e8m0fnu"
FAMILIES = {
    "MXFP8": ("float8_e4m3fn", "float8_e5m2"),
    "MXFP4": ("float4_e2m1fn", "float4_e1m2"),
}
E8M0_BIAS = 127
E8M0_NAN = 0xFF

#: fp4 e1m2 code -> value [asc-devkit ``Fp4e1m2ToBf16``: 0x0, 0x3E80, 0x3F00, ... as bfloat16]
E1M2_TABLE = np.array(
    [0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, -0.0, -0.25, -0.5, -0.75, -1.0, -1.25, -1.5, -1.75], np.float32
)


def family(dtype: str) -> str | None:
    """``"MXFP8"``, ``"MXFP4"`` or None for a canonical element dtype name."""
    for name, members in FAMILIES.items():
        if dtype in members:
            return name
    return None


def decode_e1m2(codes) -> jax.Array:
    """fp4 e1m2 codes (low nibble of each integer) -> float32."""
    return jnp.asarray(E1M2_TABLE)[jnp.asarray(codes).astype(jnp.int32) & 0xF]


def scale_codes(scales) -> jax.Array:
    """E8M0 scales (``float8_e8m0fnu``, or integer codes) -> int32 codes 0..255."""
    scales = jnp.asarray(scales)
    if not jnp.issubdtype(scales.dtype, jnp.integer):
        scales = jax.lax.bitcast_convert_type(scales, jnp.uint8)
    return scales.astype(jnp.int32)


def block_scaled_dot(a, b, scale_a, scale_b) -> jax.Array:
    """``(scale_a ⊗ a) @ (scale_b ⊗ b)`` in float32.

    ``a`` (M, K) and ``b`` (K, N) hold element values (float32), ``scale_a`` (M, K/32) and
    ``scale_b`` (K/32, N) E8M0 scales. Each 32-element block's product is accumulated in
    float32 and then scaled by ``2^(ea + eb - 254)`` exactly (``ldexp``: no intermediate
    overflow), and the blocks are summed in float32 in one fixed order (``fold_sum``).
    """
    m, k = a.shape
    n = b.shape[1]
    if k % BLOCK:
        raise ValueError(f"MX operands share one scale per {BLOCK} K elements: K = {k} is not a multiple of {BLOCK}")
    kb = k // BLOCK
    ca, cb = scale_codes(scale_a), scale_codes(scale_b)
    if ca.shape != (m, kb) or cb.shape != (kb, n):
        raise ValueError(f"MX scales must be ({m}, {kb}) and ({kb}, {n}) for a ({m}, {k}) x ({k}, {n}) product")
    # per block b: (m, 32) @ (32, n), batched over b ((b, m, n), then as "mbn")
    blocks = same_bits_dot_general(
        a.astype(jnp.float32).reshape(m, kb, BLOCK),
        b.astype(jnp.float32).reshape(kb, BLOCK, n),
        (((2,), (1,)), ((1,), (0,))),
        jnp.float32,
    ).transpose(1, 0, 2)
    exponent = ca[:, :, None] + cb[None, :, :] - 2 * E8M0_BIAS
    nan = (ca[:, :, None] == E8M0_NAN) | (cb[None, :, :] == E8M0_NAN)
    scaled = jnp.where(nan, jnp.nan, jnp.ldexp(blocks, exponent))
    return fold_sum(scaled.astype(jnp.float32), 1)[:, 0, :]  # the blocks in one fixed order, alone or in a vmap
