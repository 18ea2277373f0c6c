"""Static rules of the copy and mmad ops: each raises at trace time, naming the rule."""

import numpy as np
import pytest

import ascjax as aj


def _trace(body, chip="a2", inputs=None, outputs=None):
    return aj.run(body, inputs or {"g": np.zeros((32, 32), np.float16)}, outputs or {}, chip=chip)


def test_copy_rules():
    with pytest.raises(ValueError, match="does not convert"):
        _trace(lambda k: k.copy_gm2l1(k.alloc("L1", (16, 16), "float32"), "g"))
    with pytest.raises(ValueError, match="not an input or output"):
        _trace(lambda k: k.copy_gm2l1(k.alloc("L1", (16, 16), "float16"), "missing"))
    with pytest.raises(ValueError, match=r"64x16 window does not fit GM tensor 'g'"):
        _trace(lambda k: k.copy_gm2l1(k.alloc("L1", (64, 16), "float16"), "g"))
    with pytest.raises(ValueError, match=r"row offset 20 is outside \[0, 16\]"):
        _trace(lambda k: k.copy_gm2l1(k.alloc("L1", (16, 16), "float16"), "g", row=20))
    with pytest.raises(ValueError, match=r"dst must be a tile in L1"):
        _trace(lambda k: k.copy_gm2l1(k.alloc("L0A", (16, 16), "float16"), "g"))
    with pytest.raises(ValueError, match=r"copy_gm2l1_nd2nz writes Nz"):
        _trace(lambda k: k.copy_gm2l1_nd2nz(k.alloc("L1", (16, 16), "float16", fmt="ND"), "g"))
    with pytest.raises(ValueError, match="fractal alignment"):
        _trace(lambda k: k.copy_l12l0a(k.alloc("L0A", (16, 16), "float16"), k.alloc("L1", (32, 32), "float16"), row=8))
    with pytest.raises(ValueError, match="copy_l12l0a does not convert"):
        _trace(lambda k: k.copy_l12l0a(k.alloc("L0A", (16, 16), "float16"), k.alloc("L1", (16, 16), "float32")))
    with pytest.raises(ValueError, match="copy_l12l0b reads an Nz L1 tile"):
        _trace(
            lambda k: k.copy_l12l0b(k.alloc("L0B", (16, 16), "float16"), k.alloc("L1", (16, 16), "float16", fmt="ND"))
        )
    with pytest.raises(ValueError, match="converts only f16/bf16 -> float32"):
        _trace(
            lambda k: k.copy_l12bt(k.alloc("BiasTable", (1, 16), "int32"), k.alloc("L1", (1, 16), "float16", fmt="ND"))
        )


def _tiles(k, m=16, kk=32, n=16, dtype="float16"):
    return (k.alloc("L0C", (m, n), "float32"), k.alloc("L0A", (m, kk), dtype), k.alloc("L0B", (kk, n), dtype))


def test_mmad_rules():
    with pytest.raises(ValueError, match=r"mmad sizes.*k = 33 is outside \[0, 32\]"):
        _trace(lambda k: k.mmad(*_tiles(k), 16, 33, 16))
    with pytest.raises(ValueError, match=r"c must be a tile in L0C"):
        _trace(lambda k: k.mmad(k.alloc("L0A", (16, 16), "float16"), *_tiles(k)[1:], 16, 16, 16))
    with pytest.raises(ValueError, match="no tile lives there"):
        _trace(lambda k: k.mmad(*_tiles(k), 16, 32, 16, c_matrix_source=True))
    with pytest.raises(ValueError, match="leave c_matrix_source / c_matrix_init_val unset"):
        _trace(
            lambda k: k.mmad(
                *_tiles(k), 16, 32, 16, c_matrix_init_val=True, bias=k.alloc("BiasTable", (1, 16), "float32")
            )
        )
    with pytest.raises(ValueError, match=r"bias dtype.*int32"):
        _trace(lambda k: k.mmad(*_tiles(k), 16, 32, 16, bias=k.alloc("BiasTable", (1, 16), "int32")))
    with pytest.raises(ValueError, match="unit_flag_mode must be DISABLE"):
        _trace(lambda k: k.mmad(*_tiles(k), 16, 32, 16, unit_flag_mode=1))
    with pytest.raises(ValueError, match=r"GEMV layout.*load A into an ND L0A tile"):
        _trace(lambda k: k.mmad(*_tiles(k), 1, 32, 16))  # a2: GEMV cannot be disabled
    _trace(lambda k: k.mmad(*_tiles(k), 1, 32, 16, disable_gemv=True), chip="950")  # the good twin
    with pytest.raises(ValueError, match="mmad direction"):
        _trace(lambda k: k.set_mmad_direction("k"))


def test_loop_rules():
    def alloc_in_loop(k):
        k.range(2, lambda i: k.alloc("L1", (16, 16), "float16"))

    with pytest.raises(ValueError, match="allocate tiles .* before the loop"):
        _trace(alloc_in_loop)
    with pytest.raises(ValueError, match="static trip count"):
        _trace(lambda k: k.range(-1, lambda i: None))
