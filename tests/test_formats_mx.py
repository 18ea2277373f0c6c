"""MX formats: fp4 e1m2 / e2m1 and E8M0 values on every code, and the block-scaled product.

References: the asc-devkit bf16 tables (``Fp4e1m2ToBf16`` / ``Fp4e2m1ToBf16``, transcribed here as
bit patterns), ml_dtypes for e2m1 and E8M0, and a float64 NumPy product for ``block_scaled_dot``.
"""

from __future__ import annotations

import jax
import ml_dtypes
import numpy as np
import pytest

from ascjax.core.formats import decode, mx

# asc-devkit kernel_type_conversion_utils.h, bfloat16 bit patterns of codes 0..15
E1M2_BF16 = [0x0, 0x3E80, 0x3F00, 0x3F40, 0x3F80, 0x3FA0, 0x3FC0, 0x3FE0]
E2M1_BF16 = [0x0, 0x3F00, 0x3F80, 0x3FC0, 0x4000, 0x4040, 0x4080, 0x40C0]


def _bf16_table(half):
    bits = np.array(half + [h | 0x8000 for h in half], np.uint32) << 16
    return bits.view(np.float32)


def test_fp4_codes():
    codes = np.arange(16, dtype=np.uint8)
    np.testing.assert_array_equal(np.asarray(decode(codes, "float4_e1m2")), _bf16_table(E1M2_BF16))
    e2m1 = codes.view(ml_dtypes.float4_e2m1fn)
    np.testing.assert_array_equal(np.asarray(decode(e2m1, "float4_e2m1fn")), _bf16_table(E2M1_BF16))
    np.testing.assert_array_equal(e2m1.astype(np.float32), _bf16_table(E2M1_BF16))  # ml_dtypes agrees


def test_e8m0_codes():
    codes = np.arange(256, dtype=np.uint8)
    scales = codes.view(ml_dtypes.float8_e8m0fnu)
    np.testing.assert_array_equal(np.asarray(mx.scale_codes(scales)), codes.astype(np.int32))
    want = np.where(codes == 0xFF, np.nan, 2.0 ** (codes.astype(np.float64) - 127))
    np.testing.assert_array_equal(scales.astype(np.float64), want)  # 2^(e - 127), 0xFF NaN (OCP MX)


def test_families():
    assert mx.family("float8_e5m2") == "MXFP8" and mx.family("float4_e1m2") == "MXFP4"
    assert mx.family("hifloat8") is None and mx.family("float16") is None


def _reference(a, b, sa, sb):
    va = a.astype(np.float64) * np.repeat(sa.astype(np.float64), 32, axis=1)
    vb = b.astype(np.float64) * np.repeat(sb.astype(np.float64), 32, axis=0)
    return va @ vb


def test_block_scaled_dot_against_numpy_and_jit():
    rng = np.random.default_rng(0)
    m, k, n = 8, 128, 8
    a = (rng.integers(-24, 25, (m, k)) / 8).astype(ml_dtypes.float8_e4m3fn).astype(np.float32)
    b = (rng.integers(-24, 25, (k, n)) / 8).astype(ml_dtypes.float8_e5m2).astype(np.float32)
    sa = (2.0 ** rng.integers(-1, 2, (m, k // 32))).astype(ml_dtypes.float8_e8m0fnu)
    sb = (2.0 ** rng.integers(-1, 2, (k // 32, n))).astype(ml_dtypes.float8_e8m0fnu)
    got = np.asarray(mx.block_scaled_dot(a, b, sa, sb))
    np.testing.assert_array_equal(got, _reference(a, b, sa, sb))  # small scales: exact in float32
    np.testing.assert_array_equal(np.asarray(jax.jit(mx.block_scaled_dot)(a, b, sa, sb)), got)
    # extreme scales: each block is scaled exactly (2^127 x 2^-127 does not overflow on the way)
    sa_x = np.full((m, k // 32), 2.0**127).astype(ml_dtypes.float8_e8m0fnu)
    sb_x = np.full((k // 32, n), 2.0**-127).astype(ml_dtypes.float8_e8m0fnu)
    np.testing.assert_array_equal(np.asarray(mx.block_scaled_dot(a, b, sa_x, sb_x)), a.astype(np.float64) @ b)
    # a NaN scale makes its block, hence its row, NaN
    sa_nan = sa.copy()
    sa_nan[2, 3] = np.array([0xFF], np.uint8).view(ml_dtypes.float8_e8m0fnu)[0]
    rows = np.isnan(np.asarray(mx.block_scaled_dot(a, b, sa_nan, sb))).any(axis=1)
    assert rows.tolist() == [i == 2 for i in range(m)]


def test_block_sums_have_the_same_bits_alone_and_in_a_vmap():
    """The scaled blocks are summed in one fixed order (``core.fold_sum``): inexact float32 sums give each product of
    a vmapped batch the bits it has alone (XLA's ``jnp.sum`` order changed with the batch)."""
    rng = np.random.default_rng(1)
    m, k, n, batch = 16, 256, 16, 3
    a = rng.standard_normal((batch, m, k)).astype(ml_dtypes.float8_e4m3fn).astype(np.float32)
    b = rng.standard_normal((batch, k, n)).astype(ml_dtypes.float8_e4m3fn).astype(np.float32)
    sa = (2.0 ** rng.integers(-8, 9, (batch, m, k // 32))).astype(ml_dtypes.float8_e8m0fnu)
    sb = (2.0 ** rng.integers(-8, 9, (batch, k // 32, n))).astype(ml_dtypes.float8_e8m0fnu)
    swept = np.asarray(jax.jit(jax.vmap(mx.block_scaled_dot))(a, b, sa, sb))
    for i in range(batch):
        alone = np.asarray(jax.jit(mx.block_scaled_dot)(a[i], b[i], sa[i], sb[i]))
        np.testing.assert_array_equal(swept[i].view(np.uint32), alone.view(np.uint32))


def test_block_scaled_dot_rejects_bad_shapes():
    a, b = np.ones((4, 64), np.float32), np.ones((64, 4), np.float32)
    good = (np.ones((4, 2), ml_dtypes.float8_e8m0fnu), np.ones((2, 4), ml_dtypes.float8_e8m0fnu))
    assert np.asarray(mx.block_scaled_dot(a, b, *good)).shape == (4, 4)
    with pytest.raises(ValueError, match=r"MX scales must be \(4, 2\) and \(2, 4\)"):
        mx.block_scaled_dot(a, b, good[0][:, :1], good[1])
    with pytest.raises(ValueError, match="K = 48 is not a multiple of 32"):
        mx.block_scaled_dot(a[:, :48], b[:48], *good)
