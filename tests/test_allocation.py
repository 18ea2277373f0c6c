"""Static allocation: every placement rule raises at trace time, naming the rule and the numbers."""

import pytest

import ascjax as aj
from ascjax import Buffer


@pytest.fixture
def alloc_a2():
    return aj.Allocator(aj.get_chip("a2"))


@pytest.mark.parametrize(
    ("buffer", "shape", "dtype", "addr", "align"),
    [
        ("L0C", (16, 16), "float32", 512, 1024),
        ("L0A", (16, 16), "float16", 256, 512),
        ("L0B", (16, 16), "float16", 32, 512),
        ("BiasTable", (1, 16), "float32", 32, 64),
    ],
)
def test_misalignment(alloc_a2, buffer, shape, dtype, addr, align):
    with pytest.raises(ValueError, match=rf"alignment.*byte {addr}.*multiple of {align} B"):
        alloc_a2.alloc(buffer, shape, dtype, addr=addr)
    alloc_a2.alloc(buffer, shape, dtype, addr=align)  # the good twin


@pytest.mark.parametrize(
    ("chip", "rows", "ok"),
    [("a2", 256, True), ("a2", 272, False), ("950", 512, True), ("950", 528, False)],
)
def test_l0c_capacity_per_chip(chip, rows, ok):
    """A2/A3 L0C is 128 KB, 950's 256 KB: 128 x rows f32 fits exactly up to that."""
    alloc = aj.Allocator(aj.get_chip(chip))
    if ok:
        alloc.alloc("L0C", (rows, 128), "float32")
    else:
        size = aj.get_chip(chip).buffer_bytes[Buffer.L0C]
        with pytest.raises(ValueError, match=rf"L0C capacity.*needs bytes \[0, {rows * 128 * 4}\).*has {size} B"):
            alloc.alloc("L0C", (rows, 128), "float32")


def test_capacity_counts_padding(alloc_a2):
    # 1 x 8 f32 on L0C still takes a whole 16 x 16 fractal: 1024 B
    t = alloc_a2.alloc("L0C", (1, 8), "float32")
    assert t.nbytes == 1024
    alloc_a2.alloc("L0A", (127, 256), "float16", addr=0, name="fits")  # pads to 128 x 256 x 2 B = 64 KB
    alloc_a2.free(alloc_a2.live[Buffer.L0A][0])
    with pytest.raises(ValueError, match=r"L0A capacity.*\(73728 B after padding.*has 65536 B"):
        alloc_a2.alloc("L0A", (129, 256), "float16", addr=0)  # pads to 144 x 256


def test_overlap_and_free(alloc_a2):
    a = alloc_a2.alloc("L1", (128, 128), "float16", addr=0, name="a")
    with pytest.raises(ValueError, match=r"no overlap.*bytes \[16384, 49152\).*`a`.*bytes \[0, 32768\)"):
        alloc_a2.alloc("L1", (128, 128), "float16", addr=16384, name="b")
    alloc_a2.free(a)
    alloc_a2.alloc("L1", (128, 128), "float16", addr=16384, name="b")  # fine once `a` is dead
    with pytest.raises(ValueError, match="not live"):
        alloc_a2.free(a)


def test_first_fit_respects_alignment(alloc_a2):
    a = alloc_a2.alloc("L0C", (16, 8), "float32")
    b = alloc_a2.alloc("L0C", (16, 16), "float32")
    assert (a.addr, b.addr) == (0, 1024)


def test_formats_and_dtypes(alloc_a2):
    with pytest.raises(ValueError, match=r"buffer format.*L0A holds Zz/ND.*not Nz"):
        alloc_a2.alloc("L0A", (16, 16), "float16", fmt="Nz")
    assert aj.Allocator(aj.get_chip("950")).alloc("L0A", (16, 16), "float16").fmt is aj.Format.NZ
    assert alloc_a2.alloc("L0A", (16, 16), "float16").fmt is aj.Format.ZZ
    with pytest.raises(ValueError, match=r"accumulator dtype.*float16"):
        alloc_a2.alloc("L0C", (16, 16), "float16")
    with pytest.raises(ValueError, match=r"bias shape.*2x16"):
        alloc_a2.alloc("BiasTable", (2, 16), "float32")
    alloc_a2.alloc("L1", (16, 16), "float16", name="x")
    with pytest.raises(ValueError, match="already used"):
        alloc_a2.alloc("L1", (16, 16), "float16", name="x")
    with pytest.raises(ValueError, match="unknown dtype"):
        alloc_a2.alloc("L1", (16, 16), "float13")


def _mmad_kernel(a_dtype, b_dtype, c_dtype):
    def kernel(k):
        a = k.alloc("L0A", (16, 32), a_dtype)
        b = k.alloc("L0B", (32, 16), b_dtype)
        c = k.alloc("L0C", (16, 16), c_dtype)
        k.mmad(c, a, b, 16, 32, 16)

    return kernel


@pytest.mark.parametrize(
    ("chip", "dtypes", "error", "match"),
    [
        (
            "a2",
            ("float16", "bfloat16", "float32"),
            ValueError,
            r"mmad dtypes.*float16 x bfloat16 is not supported on chip a2; valid: int8 x int8 -> int32",
        ),
        ("a2", ("float16", "float16", "int32"), ValueError, r"accumulates in float32.*is int32"),
        ("a2", ("int8", "int8", "float32"), ValueError, r"accumulates in int32"),
        ("950", ("int4", "int4", "int32"), ValueError, r"not supported on chip 950 \(int4 x int4 is a chip a2/a3 comb"),
        ("a2", ("float8_e4m3fn", "float8_e5m2", "float32"), ValueError, r"not supported on chip a2 \(float8_e4m3fn x"),
        ("a3", ("hifloat8", "hifloat8", "float32"), ValueError, r"not supported on chip a3 \(hifloat8 x hifloat8 is a"),
    ],
)
def test_mmad_dtype_combinations(chip, dtypes, error, match):
    with pytest.raises(error, match=match):
        aj.run(_mmad_kernel(*dtypes), {}, {}, chip=chip)


def test_supported_dtype_combinations_run():
    for a, c in (("float16", "float32"), ("bfloat16", "float32"), ("float32", "float32"), ("int8", "int32")):
        assert aj.run(_mmad_kernel(a, a, c), {}, {}, chip="a2", sanitize=False).ok  # operands never loaded
    # the good twins of the low-precision rejections above (their numerics: tests/test_low_precision_mmad.py)
    assert aj.run(_mmad_kernel("int4", "int4", "int32"), {}, {}, chip="a3", sanitize=False).ok
    assert aj.run(_mmad_kernel("float8_e4m3fn", "float8_e5m2", "float32"), {}, {}, chip="950", sanitize=False).ok
    assert aj.run(_mmad_kernel("hifloat8", "hifloat8", "float32"), {}, {}, chip="950", sanitize=False).ok


def test_chip_table():
    a2, a3, c950 = (aj.get_chip(n) for n in ("a2", "a3", "950"))
    assert a2.buffer_bytes[Buffer.L0C] == 128 * 1024 and c950.buffer_bytes[Buffer.L0C] == 256 * 1024
    assert a2.buffer_bytes[Buffer.BT] == 1024 and c950.buffer_bytes[Buffer.BT] == 4096
    assert a3.buffer_bytes == a2.buffer_bytes
    assert (a2.a_format, c950.a_format) == (aj.Format.ZZ, aj.Format.NZ)
    assert a2.intra_event_ids == 8 and a2.replace(intra_event_ids=16).intra_event_ids == 16
    assert ("int4", "int4") in a2.mmad_dtypes and ("int4", "int4") not in c950.mmad_dtypes
    assert ("hifloat8", "hifloat8") in c950.mmad_dtypes
    assert a2.l0c_blocks == 256 and c950.l0c_blocks == 512
    with pytest.raises(ValueError, match="unknown chip 'a9'"):
        aj.get_chip("a9")


def test_buffer_names():
    alloc = aj.Allocator(aj.get_chip("950"))
    for name, buffer in (
        ("BT", Buffer.BT),
        ("BiasTable", Buffer.BT),
        ("Acc", Buffer.L0C),
        ("Mat", Buffer.L1),
        ("l0a", Buffer.L0A),
    ):
        assert Buffer.parse(name) is buffer
    assert alloc.alloc("BT", (1, 16), "float32").buffer is Buffer.BT
    with pytest.raises(ValueError, match="unknown buffer 'L2'"):
        alloc.alloc("L2", (16, 16), "float16")


def test_a_tile_is_two_dimensional_and_an_l0c_tile_of_another_dtype_is_named(alloc_a2):
    with pytest.raises(ValueError, match=r"rule 'tile shape': a tile is 2-D .*\(2, 32, 32\) for 'kv'"):
        alloc_a2.alloc("L1", (2, 32, 32), "float16", name="kv")
    with pytest.raises(ValueError, match=r"rule 'accumulator dtype': tile 'acc' is float16, but L0C holds"):
        alloc_a2.alloc("L0C", (16, 16), "float16", name="acc")
    assert alloc_a2.alloc("L1", (64, 32), "float16", name="kv").rows == 64  # the good twins
    assert alloc_a2.alloc("L0C", (16, 16), "float32", name="acc").dtype == "float32"
