"""Granules: the units race tracking works in (512 B on chip, ``gm_granule_bytes`` in GM).

A tile occupies a contiguous run of its buffer's granules; a (possibly traced) region of it
becomes a mask over that run, so every check touches only the tile's own granules. A GM
tensor whose rows are whole granules is tracked as a (rows, granules per row) grid and an
access as a window of it, which a traced offset moves.
"""

from __future__ import annotations

import functools

import jax.numpy as jnp
import numpy as np

from . import dtypes
from .core import BUFFERS, CHIP_GRANULE_BYTES, Buffer, Format
from .layout import fractal_unit, from_fractal
from .memory import Tile


def buffer_granules(chip, buffer: Buffer) -> int:
    return chip.buffer_bytes[buffer] // BUFFERS[buffer].granule_bytes


def _static(*values) -> bool:
    return all(isinstance(v, (int, np.integer)) for v in values)


@functools.lru_cache(maxsize=4096)
def tile_units(tile: Tile) -> tuple[int, int, np.ndarray, int]:
    """(unit rows, unit cols, granule id of every unit minus the first, first granule) of a tile.

    Units are sub-blocks of the padded logical matrix that never straddle a granule: an
    input fractal, half an L0C fractal, or single elements of an ND tile.
    """
    bits = dtypes.bits(tile.dtype)
    elements = int(np.prod(tile.physical_shape))
    byte = tile.addr + np.arange(elements, dtype=np.int64) * bits // 8
    gran = (byte // CHIP_GRANULE_BYTES).reshape(tile.physical_shape)
    nd = np.asarray(from_fractal(gran, tile.fmt))
    first = int(gran.min())
    if tile.fmt is Format.ND:
        return 1, 1, nd - first, first
    fractal_bytes = 16 * tile.c0 * bits // 8
    ur, uc = fractal_unit(tile.fmt, tile.c0)  # (16, c0); Zn and Nn: (c0, 16)
    if fractal_bytes > CHIP_GRANULE_BYTES:  # L0C: a 16 x 16 fp32 fractal is two 8-row granules
        ur = ur * CHIP_GRANULE_BYTES // fractal_bytes
    return ur, uc, nd[::ur, ::uc] - first, first


def _hit(ur, uc, shape, row0, rows, col0, cols, xp):
    r = xp.arange(shape[0])[:, None] * ur
    c = xp.arange(shape[1])[None, :] * uc
    hit = (r < row0 + rows) & (r + ur > row0) & (c < col0 + cols) & (c + uc > col0)
    return hit & (xp.asarray(rows) > 0) & (xp.asarray(cols) > 0)


def tile_window(tile: Tile, row0=0, rows=None, col0=0, cols=None):
    """(first granule, bool mask over the tile's granules) of a region (default: the whole padded tile).

    A TileGroup slot's first granule is traced: the group base plus its slot offset.
    """
    ur, uc, ids, first = tile_units(tile.base)
    slot = getattr(tile, "slot", None)
    if slot is not None:
        first = first + slot * tile.slot_granules
    rp, cp = tile.padded
    rows = rp - row0 if rows is None else rows
    cols = cp - col0 if cols is None else cols
    n = int(ids.max()) + 1
    if _static(row0, rows, col0, cols):
        hit = _hit(ur, uc, ids.shape, row0, rows, col0, cols, np)
        mask = np.zeros(n, bool)
        mask[ids[hit]] = True
        return first, mask
    hit = _hit(ur, uc, ids.shape, row0, rows, col0, cols, jnp)
    counts = jnp.zeros((n,), jnp.int32).at[ids.reshape(-1)].max(hit.astype(jnp.int32).reshape(-1))
    return first, counts > 0


@functools.lru_cache(maxsize=1024)
def gm_grid(shape: tuple, dtype: str, granule_bytes: int) -> tuple[int, int, int]:
    """(rows, granules per row, elements per granule) of a GM tensor seen as 2-D row-major.

    Rows that are not whole granules are tracked as one row of ``ceil(bytes / granule)``.
    """
    rows, cols = (shape[0], int(np.prod(shape[1:]))) if len(shape) >= 2 else (1, int(np.prod(shape)))
    size = dtypes.bits(dtype) // 8
    if (cols * size) % granule_bytes == 0 and granule_bytes % size == 0:
        return rows, cols * size // granule_bytes, granule_bytes // size
    return 1, -(-rows * cols * size // granule_bytes), 0


def gm_window(shape: tuple, dtype: str, granule_bytes: int, row0, rows, col0, cols, max_rows: int, max_cols: int):
    """((start row, start granule column), bool mask) of a (rows x cols) region of a GM tensor.

    The window has a static shape (from ``max_rows`` x ``max_cols``); offsets and sizes may be traced.
    """
    grid_rows, per_row, per = gm_grid(tuple(shape), dtype, granule_bytes)
    if per == 0:  # rows are not whole granules: one flat row, element granules computed exactly
        n_cols = int(np.prod(shape[1:])) if len(shape) >= 2 else int(np.prod(shape))
        size = dtypes.bits(dtype) // 8
        r = jnp.arange(shape[0] if len(shape) >= 2 else 1)[:, None]
        c = jnp.arange(n_cols)[None, :]
        hit = (r >= row0) & (r < row0 + rows) & (c >= col0) & (c < col0 + cols)
        ids = (r * n_cols + c) * size // granule_bytes
        counts = jnp.zeros((per_row,), jnp.int32).at[ids.reshape(-1)].max(hit.astype(jnp.int32).reshape(-1))
        return (0, 0), (counts > 0)[None, :]
    win_r = min(max_rows, grid_rows)
    win_c = min(-(-max_cols // per) + 1, per_row)
    if _static(row0, col0):
        s0, s1 = min(max(row0, 0), grid_rows - win_r), min(max(col0 // per, 0), per_row - win_c)
    else:
        s0 = jnp.clip(jnp.asarray(row0, jnp.int32), 0, grid_rows - win_r)
        s1 = jnp.clip(jnp.asarray(col0, jnp.int32) // per, 0, per_row - win_c)
    r = s0 + jnp.arange(win_r)[:, None]
    g = s1 + jnp.arange(win_c)[None, :]
    hit = (r >= row0) & (r < row0 + rows) & (g * per < col0 + cols) & ((g + 1) * per > col0)
    return (s0, s1), hit & (jnp.asarray(rows) > 0) & (jnp.asarray(cols) > 0)
