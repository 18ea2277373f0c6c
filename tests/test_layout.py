"""Fractal layouts (Nz, Zz, Zn): round trips, where each element lands, padded/physical shapes, tile sizes.

The expected positions come from an independent NumPy index formula (seed 004's tables):

* Nz  of (M, N): element (r, c) at (c // c0, r // 16, r % 16, c % c0)   i.e. (N1, M1, M0, N0)
* Zz  of (M, K): element (r, c) at (r // 16, c // c0, r % 16, c % c0)   i.e. (M1, K1, M0, K0)
* Zn  of (K, N): element (k, n) at (k // c0, n // 16, n % 16, k % c0)   i.e. (K1, N1, N0, K0)

and, since flattening a physical array gives buffer order, from the byte-free flat offset of each element.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ascjax as aj
from ascjax import Buffer, Format
from ascjax.core._memory import Allocator, Tile
from ascjax.core.layout import (
    fractal_unit,
    from_fractal,
    nd_to_nz,
    nz_to_nd,
    pad_to,
    padded_shape,
    physical_shape,
    to_fractal,
)

FRACTALS = (Format.NZ, Format.ZZ, Format.ZN)
C0S = (8, 16, 32)


def _ceil(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def _units(fmt: Format, c0: int) -> tuple[int, int]:
    """(row unit, column unit) of the logical matrix, written out by hand."""
    return {Format.NZ: (16, c0), Format.ZZ: (16, c0), Format.ZN: (c0, 16)}[fmt]


def _index(fmt: Format, c0: int, r, c):
    """Independent index formula: the 4-D position of logical element (r, c)."""
    if fmt is Format.NZ:
        return c // c0, r // 16, r % 16, c % c0
    if fmt is Format.ZZ:
        return r // 16, c // c0, r % 16, c % c0
    if fmt is Format.ZN:  # (K, N): k = r, n = c
        return r // c0, c // 16, c % 16, r % c0
    raise AssertionError(fmt)


def _flat_offset(fmt: Format, c0: int, rows: int, cols: int, r, c):
    """Independent buffer-order offset (in elements) of logical element (r, c)."""
    ru, cu = _units(fmt, c0)
    rp, cp = _ceil(rows, ru), _ceil(cols, cu)
    frac = 16 * c0
    if fmt is Format.NZ:  # fractal columns outermost, each a column of row-major 16 x c0 fractals
        return (c // c0) * (rp // 16) * frac + (r // 16) * frac + (r % 16) * c0 + c % c0
    if fmt is Format.ZZ:  # fractal rows outermost, each a row of row-major 16 x c0 fractals
        return (r // 16) * (cp // c0) * frac + (c // c0) * frac + (r % 16) * c0 + c % c0
    if fmt is Format.ZN:  # K1 outermost, then N1; inside a fractal n is the row, k the column
        return (r // c0) * (cp // 16) * frac + (c // 16) * frac + (c % 16) * c0 + r % c0
    raise AssertionError(fmt)


def _expected_physical(nd: np.ndarray, fmt: Format, c0: int) -> np.ndarray:
    rows, cols = nd.shape
    ru, cu = _units(fmt, c0)
    rp, cp = _ceil(rows, ru), _ceil(cols, cu)
    shape = {
        Format.NZ: (cp // c0, rp // 16, 16, c0),
        Format.ZZ: (rp // 16, cp // c0, 16, c0),
        Format.ZN: (rp // c0, cp // 16, 16, c0),
    }[fmt]
    out = np.zeros(shape, nd.dtype)
    r, c = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    out[_index(fmt, c0, r, c)] = nd
    return out


def _distinct(rows: int, cols: int, dtype=np.int32) -> np.ndarray:
    """Values 1..rows*cols (never 0, so padding is recognisable)."""
    return np.arange(1, rows * cols + 1, dtype=np.int64).reshape(rows, cols).astype(dtype)


@functools.partial(jax.jit, static_argnums=(1, 2, 3))
def _transforms(x, fmt: Format, c0: int, padded: tuple):
    """What the data plane computes, as it computes it (traced): the physical array of ``x`` padded to ``padded``,
    its ND matrix back, and for Nz the direct ``nd_to_nz`` / ``nz_to_nd`` pair. One program per shape, not one per
    eager op."""
    phys = to_fractal(pad_to(x, *padded), fmt, c0)
    back = from_fractal(phys, fmt)
    if fmt is not Format.NZ:
        return phys, back, None, None
    nz = nd_to_nz(x, c0)
    return phys, back, nz, nz_to_nd(nz, *x.shape)


def _check_layout(rows: int, cols: int, fmt: Format, c0: int) -> None:
    x = _distinct(rows, cols)
    ru, cu = _units(fmt, c0)
    rp, cp = _ceil(rows, ru), _ceil(cols, cu)
    assert padded_shape(rows, cols, fmt, c0) == (rp, cp)
    phys, back, nz, nd = jax.device_get(_transforms(jnp.asarray(x), fmt, c0, (rp, cp)))
    assert phys.shape == physical_shape(rows, cols, fmt, c0)
    # every element where the index formula puts it, zeros in the padding
    np.testing.assert_array_equal(phys, _expected_physical(x, fmt, c0))
    # flattening the physical array gives buffer order
    r, c = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    flat = phys.reshape(-1)
    off = _flat_offset(fmt, c0, rows, cols, r, c)
    np.testing.assert_array_equal(flat[off], x)
    assert flat.size == rp * cp
    rest = np.ones(flat.size, bool)
    rest[off.reshape(-1)] = False
    assert not np.any(flat[rest]), "padding must be zero"
    # round trip
    assert back.shape == (rp, cp)
    np.testing.assert_array_equal(back[:rows, :cols], x)
    assert not np.any(back[rows:, :]) and not np.any(back[:, cols:])
    if fmt is Format.NZ:
        np.testing.assert_array_equal(nz, phys)
        np.testing.assert_array_equal(nd, x)


# -- deterministic edge shapes: exact fractals, one short, one over, single element ----------
def _edge_shapes(fmt: Format, c0: int):
    ru, cu = _units(fmt, c0)
    return sorted(
        {
            (1, 1),
            (ru, cu),
            (ru - 1, cu - 1),
            (ru + 1, cu + 1),
            (1, cu),
            (ru, 1),
            (2 * ru, 3 * cu),
            (3 * ru - 5, 2 * cu + 3),
            (37, 50),
            (50, 37),
            (5, 100),
        }
    )


@pytest.mark.parametrize("c0", C0S)
@pytest.mark.parametrize("fmt", FRACTALS, ids=str)
def test_layout_edge_shapes(fmt, c0):
    for rows, cols in _edge_shapes(fmt, c0):
        _check_layout(rows, cols, fmt, c0)


@settings(max_examples=25, deadline=None)
@given(
    rows=st.integers(1, 70),
    cols=st.integers(1, 70),
    fmt=st.sampled_from(FRACTALS),
    c0=st.sampled_from(C0S),
)
def test_layout_random_shapes(rows, cols, fmt, c0):
    _check_layout(rows, cols, fmt, c0)


@settings(max_examples=25, deadline=None)
@given(
    rows=st.integers(1, 64),
    cols=st.integers(1, 64),
    fmt=st.sampled_from(FRACTALS),
    c0=st.sampled_from(C0S),
    seed=st.integers(0, 2**31 - 1),
)
def test_padded_round_trip_keeps_padding_data(rows, cols, fmt, c0, seed):
    """A whole padded matrix (garbage in its padding too) survives ND -> fractal -> ND bit for bit."""
    rp, cp = padded_shape(rows, cols, fmt, c0)
    nd = np.random.default_rng(seed).integers(-(2**20), 2**20, (rp, cp)).astype(np.int32)
    phys, back, _, _ = jax.device_get(_transforms(jnp.asarray(nd), fmt, c0, (rp, cp)))
    np.testing.assert_array_equal(back, nd)
    # Zn is bit for bit the Nz image of the transpose
    if fmt is Format.ZN:
        transposed, _, _, _ = _transforms(jnp.asarray(nd.T), Format.NZ, c0, (cp, rp))
        np.testing.assert_array_equal(phys, np.asarray(transposed))


@pytest.mark.parametrize(
    "np_dtype, c0",
    [(np.float16, 16), (ml_dtypes.bfloat16, 16), (np.float32, 8), (np.int8, 32)],
    ids=["float16", "bfloat16", "float32", "int8"],
)
@pytest.mark.parametrize("fmt", FRACTALS, ids=str)
def test_layout_keeps_dtype_and_bits(np_dtype, c0, fmt):
    rng = np.random.default_rng(7)
    rows, cols = 21, 3 * c0 - 3
    if np.dtype(np_dtype).kind == "i":
        x = rng.integers(-128, 128, (rows, cols)).astype(np_dtype)
    else:
        x = (rng.standard_normal((rows, cols)) * 100).astype(np_dtype)
    rp, cp = padded_shape(rows, cols, fmt, c0)
    phys, back, _, _ = jax.device_get(_transforms(jnp.asarray(x), fmt, c0, (rp, cp)))
    assert phys.dtype == np.dtype(np_dtype)
    back = back[:rows, :cols]
    assert back.dtype == np.dtype(np_dtype)
    uint = {1: np.uint8, 2: np.uint16, 4: np.uint32}[np.dtype(np_dtype).itemsize]
    np.testing.assert_array_equal(back.view(uint), x.view(uint))
    np.testing.assert_array_equal(np.asarray(phys).view(uint), _expected_physical(x, fmt, c0).view(uint))


# -- shapes written out by hand --------------------------------------------------------------
@pytest.mark.parametrize(
    "rows, cols, fmt, c0, padded, physical",
    [
        (37, 50, Format.NZ, 16, (48, 64), (4, 3, 16, 16)),
        (37, 50, Format.ZZ, 16, (48, 64), (3, 4, 16, 16)),
        (50, 37, Format.ZN, 16, (64, 48), (4, 3, 16, 16)),  # K=50 -> 4 x K0, N=37 -> 3 x 16
        (17, 33, Format.NZ, 32, (32, 64), (2, 2, 16, 32)),
        (17, 33, Format.ZZ, 32, (32, 64), (2, 2, 16, 32)),
        (33, 17, Format.ZN, 32, (64, 32), (2, 2, 16, 32)),
        (5, 9, Format.NZ, 8, (16, 16), (2, 1, 16, 8)),
        (5, 9, Format.ZZ, 8, (16, 16), (1, 2, 16, 8)),
        (9, 1, Format.ZN, 8, (16, 16), (2, 1, 16, 8)),
        (16, 16, Format.NZ, 16, (16, 16), (1, 1, 16, 16)),
        (1, 1, Format.ZN, 32, (32, 16), (1, 1, 16, 32)),
        (1, 64, Format.ZZ, 32, (16, 64), (1, 2, 16, 32)),
        (5, 7, Format.ND, 1, (5, 7), (5, 7)),
    ],
)
def test_padded_and_physical_shape_values(rows, cols, fmt, c0, padded, physical):
    assert padded_shape(rows, cols, fmt, c0) == padded
    assert physical_shape(rows, cols, fmt, c0) == physical


def test_fractal_unit_values():
    for c0 in C0S:
        assert fractal_unit(Format.NZ, c0) == (16, c0)
        assert fractal_unit(Format.ZZ, c0) == (16, c0)
        assert fractal_unit(Format.ZN, c0) == (c0, 16)
        assert fractal_unit(Format.ND, c0) == (1, 1)


# -- Tile sizes ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "buffer, rows, cols, dtype, fmt, c0, nbytes",
    [
        (Buffer.L1, 37, 50, "float16", Format.NZ, 16, 48 * 64 * 2),
        (Buffer.L1, 17, 33, "int8", Format.NZ, 32, 32 * 64 * 1),
        (Buffer.L1, 5, 9, "float32", Format.NZ, 8, 16 * 16 * 4),
        (Buffer.L1, 3, 7, "float16", Format.ND, 1, 3 * 7 * 2),
        (Buffer.L0A, 20, 20, "bfloat16", Format.ZZ, 16, 32 * 32 * 2),
        (Buffer.L0A, 20, 20, "int8", Format.NZ, 32, 32 * 32 * 1),
        (Buffer.L0A, 1, 40, "float16", Format.ND, 1, 1 * 40 * 2),
        (Buffer.L0B, 40, 20, "int8", Format.ZN, 32, 64 * 32 * 1),  # K 40 -> 64, N 20 -> 32
        (Buffer.L0B, 9, 3, "float32", Format.ZN, 8, 16 * 16 * 4),
        (Buffer.L0B, 17, 17, "float16", Format.ZN, 16, 32 * 32 * 2),
        (Buffer.L0C, 37, 23, "float32", Format.NZ, 16, 48 * 32 * 4),  # L0C fractals are 16 x 16
        (Buffer.L0C, 1, 1, "int32", Format.NZ, 16, 16 * 16 * 4),
        (Buffer.BT, 1, 10, "float32", Format.ND, 1, 10 * 4),
    ],
)
def test_tile_nbytes_includes_padding(buffer, rows, cols, dtype, fmt, c0, nbytes):
    tile = Tile("t", buffer, 0, rows, cols, dtype, fmt)
    assert tile.c0 == c0
    assert tile.nbytes == nbytes
    assert tile.end == nbytes
    if fmt is not Format.ND:
        itemsize = np.dtype(tile.np_dtype).itemsize
        assert int(np.prod(tile.physical_shape)) * itemsize == nbytes


@settings(max_examples=25, deadline=None)
@given(
    rows=st.integers(1, 80),
    cols=st.integers(1, 80),
    dtype=st.sampled_from(["float16", "bfloat16", "float32", "int8"]),
    where=st.sampled_from(
        [(Buffer.L1, Format.NZ), (Buffer.L0A, Format.ZZ), (Buffer.L0A, Format.NZ), (Buffer.L0B, Format.ZN)]
    ),
)
def test_tile_nbytes_matches_padding(rows, cols, dtype, where):
    buffer, fmt = where
    itemsize = {"float16": 2, "bfloat16": 2, "float32": 4, "int8": 1}[dtype]
    k0 = 32 // itemsize
    ru, cu = (k0, 16) if fmt is Format.ZN else (16, k0)
    tile = Tile("t", buffer, 512, rows, cols, dtype, fmt)
    assert tile.padded == (_ceil(rows, ru), _ceil(cols, cu))
    assert tile.nbytes == _ceil(rows, ru) * _ceil(cols, cu) * itemsize
    assert tile.end == 512 + tile.nbytes
    acc = Tile("c", Buffer.L0C, 0, rows, cols, "float32", Format.NZ)
    assert acc.nbytes == _ceil(rows, 16) * _ceil(cols, 16) * 4


def test_allocator_places_by_padded_size():
    alloc = Allocator(aj.get_chip("a2"))
    first = alloc.alloc("L1", (17, 17), "float16", name="first")  # padded 32 x 32 = 2048 B
    assert first.addr == 0 and first.nbytes == 2048
    second = alloc.alloc("L1", (1, 1), "float16", name="second")
    assert second.addr == 2048
    # bytes [1024, 2048) hold only padding of `first`, but padding is still its storage
    with pytest.raises(ValueError, match="no overlap"):
        alloc.alloc("L1", (16, 16), "float16", addr=1024, name="third")


def test_allocator_capacity_counts_padding():
    alloc = Allocator(aj.get_chip("a2"))
    # 17 x 513 float32 is 34884 B unpadded, but 32 x 520 x 4 = 66560 B > 64 KB after padding
    with pytest.raises(ValueError, match="capacity"):
        alloc.alloc("L0A", (17, 513), "float32", name="too_big")
    # exactly 64 KB after padding fits
    tile = alloc.alloc("L0A", (127, 256), "float16", name="full")
    assert tile.nbytes == 64 * 1024


@pytest.mark.parametrize("chip, a_fmt", [("a2", Format.ZZ), ("a3", Format.ZZ), ("950", Format.NZ)])
def test_default_formats(chip, a_fmt):
    alloc = Allocator(aj.get_chip(chip))
    assert alloc.alloc("L0A", (16, 32), "float16", name="a").fmt is a_fmt
    assert alloc.alloc("L0A", (1, 32), "float16", fmt="ND", name="gemv").fmt is Format.ND
    assert alloc.alloc("L0B", (32, 16), "float16", name="b").fmt is Format.ZN
    assert alloc.alloc("L0C", (16, 16), "float32", name="c").fmt is Format.NZ
    assert alloc.alloc("L1", (16, 32), "float16", name="l1").fmt is Format.NZ
    other = Format.NZ if a_fmt is Format.ZZ else Format.ZZ
    with pytest.raises(ValueError, match="buffer format"):
        alloc.alloc("L0A", (16, 32), "float16", fmt=other, name="wrong")
    with pytest.raises(ValueError, match="buffer format"):
        alloc.alloc("L0B", (32, 16), "float16", fmt="Nz", name="wrong_b")


# -- the copies put data in the hardware layout ------------------------------------------------
def _copy_kernel(k, *, M, K, N, adt):
    """GM -> L1 (Nz) -> L0A / L0B, both the plain and the transposing loads."""
    k0 = {"float16": 16, "bfloat16": 16, "float32": 8, "int8": 32}[adt]
    mp, kp, np_ = _ceil(M, 16), _ceil(K, k0), _ceil(N, 16)
    a_l1 = k.alloc("L1", (M, K), adt, name="a_l1")
    at_l1 = k.alloc("L1", (kp, mp), adt, name="at_l1")  # holds A^T
    bt_l1 = k.alloc("L1", (N, K), adt, name="bt_l1")  # holds B^T
    b_l1 = k.alloc("L1", (kp, np_), adt, name="b_l1")  # holds B
    a0 = k.alloc("L0A", (M, K), adt, name="a0")
    a0t = k.alloc("L0A", (M, K), adt, name="a0t")
    b0 = k.alloc("L0B", (K, N), adt, name="b0")
    b0t = k.alloc("L0B", (K, N), adt, name="b0t")
    k.copy_gm2l1_nd2nz(a_l1, "a")
    k.copy_gm2l1_nd2nz(at_l1, "at")
    k.copy_gm2l1_nd2nz(bt_l1, "bt")
    k.copy_gm2l1_nd2nz(b_l1, "b")
    k.sync_notify("MTE2", "MTE1", 0)
    k.sync_wait("MTE2", "MTE1", 0)
    k.copy_l12l0a(a0, a_l1)
    k.copy_l12l0a(a0t, at_l1, transpose=True)
    k.copy_l12l0b(b0, bt_l1)
    k.copy_l12l0b(b0t, b_l1, transpose=True)


@pytest.mark.parametrize(
    "chip, adt, np_dtype",
    [
        ("a2", "float16", np.float16),
        ("a3", "int8", np.int8),
        ("950", "float32", np.float32),
        ("950", "bfloat16", ml_dtypes.bfloat16),
    ],
)
def test_copies_write_hardware_layout(chip, adt, np_dtype):
    M, K, N = 32, 40, 48  # K is not a multiple of K0 (except for float32): nd2nz pads the columns
    k0 = {"float16": 16, "bfloat16": 16, "float32": 8, "int8": 32}[adt]
    mp, kp, np_ = _ceil(M, 16), _ceil(K, k0), _ceil(N, 16)
    rng = np.random.default_rng(3)
    a = rng.integers(1, 100, (M, K)).astype(np_dtype)  # nonzero: padding is recognisable
    b = rng.integers(1, 100, (K, N)).astype(np_dtype)
    a_pad = np.zeros((mp, kp), np_dtype)
    a_pad[:M, :K] = a
    b_pad = np.zeros((kp, np_), np_dtype)
    b_pad[:K, :N] = b
    res = aj.run(
        _copy_kernel,
        {"a": a, "at": a_pad.T.copy(), "bt": b.T.copy(), "b": b_pad},
        {},
        chip=chip,
        params=dict(M=M, K=K, N=N, adt=adt),
    )
    assert res.ok
    aic = res.state.aic
    a_fmt = aj.get_chip(chip).a_format
    np.testing.assert_array_equal(np.asarray(aic.l1["a_l1"]), _expected_physical(a, Format.NZ, k0))
    np.testing.assert_array_equal(np.asarray(aic.l1["bt_l1"]), _expected_physical(b.T, Format.NZ, k0))
    np.testing.assert_array_equal(np.asarray(aic.l0a["a0"]), _expected_physical(a, a_fmt, k0))
    np.testing.assert_array_equal(np.asarray(aic.l0a["a0t"]), _expected_physical(a, a_fmt, k0))
    np.testing.assert_array_equal(np.asarray(aic.l0b["b0"]), _expected_physical(b, Format.ZN, k0))
    np.testing.assert_array_equal(np.asarray(aic.l0b["b0t"]), _expected_physical(b, Format.ZN, k0))
