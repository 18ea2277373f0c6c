"""Granules: the units race tracking works in (512 B on chip, ``gm_granule_bytes`` in GM).

Each tile or GM tensor is cut into *units* (sub-blocks of its logical matrix that never
straddle a granule: an input fractal, half an L0C fractal, or a run of elements) with a
static granule id each; a (possibly traced) region becomes a granule mask by testing which
units it overlaps.
"""

from __future__ import annotations

import functools

import jax.numpy as jnp
import numpy as np

from . import dtypes
from .kinds import Buffer, Format
from .layout import from_fractal
from .memory import Tile

CHIP_GRANULE_BYTES = 512


def buffer_granules(chip, buffer: Buffer) -> int:
    return chip.buffer_bytes[buffer] // CHIP_GRANULE_BYTES


@functools.lru_cache(maxsize=4096)
def tile_units(tile: Tile) -> tuple[int, int, np.ndarray]:
    """(unit rows, unit cols, granule id of every unit) of a tile's padded logical matrix."""
    bits = dtypes.bits(tile.dtype)
    elements = int(np.prod(tile.physical_shape))
    byte = tile.addr + np.arange(elements, dtype=np.int64) * bits // 8
    gran = (byte // CHIP_GRANULE_BYTES).reshape(tile.physical_shape)
    nd = np.asarray(from_fractal(gran, tile.fmt))
    if tile.fmt is Format.ND:
        return 1, 1, nd
    fractal_bytes = 16 * tile.c0 * bits // 8
    ur, uc = (16, tile.c0) if tile.fmt is not Format.ZN else (tile.c0, 16)
    if fractal_bytes > CHIP_GRANULE_BYTES:  # L0C: a 16 x 16 fp32 fractal is two 8-row granules
        ur = ur * CHIP_GRANULE_BYTES // fractal_bytes
    return ur, uc, nd[::ur, ::uc]


@functools.lru_cache(maxsize=1024)
def gm_units(shape: tuple, dtype: str, granule_bytes: int) -> tuple[int, int, np.ndarray, int]:
    """(unit rows, unit cols, granule ids, granule count) of a GM tensor seen as 2-D row-major."""
    rows, cols = (shape[0], int(np.prod(shape[1:]))) if len(shape) >= 2 else (1, int(np.prod(shape)))
    size = dtypes.bits(dtype) // 8
    n = -(-rows * cols * size // granule_bytes)
    if (cols * size) % granule_bytes == 0 and granule_bytes % size == 0:
        per = granule_bytes // size
        ids = np.arange(rows)[:, None] * (cols // per) + np.arange(cols // per)[None, :]
        return 1, per, ids, n
    ids = (np.arange(rows)[:, None] * cols + np.arange(cols)[None, :]) * size // granule_bytes
    return 1, 1, ids, n


def region_mask(units, n: int, row0, rows, col0, cols) -> jnp.ndarray:
    """bool[n]: granules a (rows x cols) region at (row0, col0) touches (traced values allowed)."""
    ur, uc, ids = units[:3]
    r = np.arange(ids.shape[0])[:, None] * ur
    c = np.arange(ids.shape[1])[None, :] * uc
    hit = (r < row0 + rows) & (r + ur > row0) & (c < col0 + cols) & (c + uc > col0)
    hit = hit & (jnp.asarray(rows) > 0) & (jnp.asarray(cols) > 0)
    counts = jnp.zeros((n,), jnp.int32).at[ids.reshape(-1)].max(jnp.asarray(hit, jnp.int32).reshape(-1))
    return counts > 0


def tile_mask(chip, tile: Tile, row0=0, rows=None, col0=0, cols=None) -> jnp.ndarray:
    """Granules of ``tile``'s buffer that a region of the tile touches (default: the whole padded tile)."""
    rp, cp = tile.padded
    rows = rp - row0 if rows is None else rows
    cols = cp - col0 if cols is None else cols
    return region_mask(tile_units(tile), buffer_granules(chip, tile.buffer), row0, rows, col0, cols)
