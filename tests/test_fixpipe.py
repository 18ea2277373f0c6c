"""fixpipe: Nz -> ND or Nz kept, ReLU, f32 -> f16/bf16 rounding, int32, and its static rules."""

import ml_dtypes
import numpy as np
import pytest

import ascjax as aj
from ascjax.core.layout import nd_to_nz

M, K, N = 48, 32, 40  # neither M nor N a multiple of 32; N not a multiple of 16
A = np.random.default_rng(7).uniform(-4, 4, (M, K)).astype(np.float32)
B = np.random.default_rng(8).uniform(-4, 4, (K, N)).astype(np.float32)
PRODUCT = A.astype(np.float64) @ B.astype(np.float64)


def _kernel(k, out_dtype="float32", relu=False, nz2nd=True):
    a_l1 = k.alloc("L1", (M, K), "float32")
    b_l1 = k.alloc("L1", (K, N), "float32")
    al = k.alloc("L0A", (M, K), "float32")
    br = k.alloc("L0B", (K, N), "float32")
    ac = k.alloc("L0C", (M, N), "float32")
    k.copy_gm2l1_nd2nz(a_l1, "a")
    k.copy_gm2l1_nd2nz(b_l1, "b")
    k.copy_l12l0a(al, a_l1)
    k.copy_l12l0b(br, b_l1, transpose=True)
    k.mmad(ac, al, br, M, K, N, c_matrix_init_val=True)
    k.fixpipe("c", ac, relu=relu, nz2nd=nz2nd)


def _run(out_shape, out_dtype, **params):
    return aj.run(_kernel, {"a": A, "b": B}, {"c": (out_shape, out_dtype)}, params=params, chip="950").outputs["c"]


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("relu", [False, True])
def test_nz2nd_relu_and_cast(dtype, relu):
    got = np.asarray(_run((M, N), dtype, relu=relu))
    f32 = np.asarray(_run((M, N), "float32", relu=relu)).astype(np.float32)
    np.testing.assert_allclose(f32, np.maximum(PRODUCT, 0) if relu else PRODUCT, rtol=1e-5, atol=1e-4)
    if relu:
        assert np.all(got.astype(np.float32) >= 0) and np.any(PRODUCT < 0)
    # the cast is round-to-nearest-even of the f32 result, bit for bit (ml_dtypes / NumPy reference)
    want = f32.astype({"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}[dtype])
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def test_nz_kept_matches_the_fractal_image():
    got = np.asarray(_run((3, 3, 16, 16), "float32", nz2nd=False))
    ref = np.asarray(_run((M, N), "float32"))
    np.testing.assert_array_equal(got[..., :], np.asarray(nd_to_nz(ref, 16)))


def test_static_rules():
    with pytest.raises(ValueError, match=r"fixpipe dtypes.*float32 to int32; on chip 950 float32 converts to bf"):
        _run((M, N), "int32")
    # f32 -> int8 is QF322B8_PRE, which needs a scale (tests/test_fixpipe_quant.py runs it with one)
    with pytest.raises(ValueError, match=r"QF322B8_PRE, which multiplies by a scale: pass quant_scale="):
        _run((M, N), "int8")
    with pytest.raises(ValueError, match=r"keeping Nz writes shape \(3, 3, 16, 16\)"):
        _run((M, N), "float32", nz2nd=False)


def _misuse(**fix_kwargs):
    def kernel(k):
        ac = k.alloc("L0C", (32, 32), "float32")
        k.fixpipe("c", ac, **fix_kwargs)

    return aj.run(kernel, {}, {"c": ((32, 32), "float32")})


def test_fixpipe_region_rules():
    with pytest.raises(ValueError, match="multiple of 16"):
        _misuse(src_row=8, m=8)
    with pytest.raises(ValueError, match=r"a 32x32 region at \(16, 0\) does not fit"):
        _misuse(src_row=16, m=32)
    with pytest.raises(ValueError, match="not an input or output"):
        aj.run(lambda k: k.fixpipe("nope", k.alloc("L0C", (16, 16), "float32")), {}, {})
