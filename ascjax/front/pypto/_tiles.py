"""Where a PyPTO-Pro tile lives and which part of it counts: ZN Mat tiles and valid shapes.

A ZN Mat tile ``[R, C]`` (a transposed load's or insert's destination) is bit for bit the Nz image of its transpose,
so it is placed as an Nz ``[C, R]`` tile holding the transpose, and moves out of it read it transposed.

A tile declared with a ``valid_shape`` has two carried-value slots (``front._carried``) holding its valid
``(rows, cols)``: ``pl.set_validshape`` sets them as the kernel runs (per core, through loops and branches), and the
loads, stores and vector operations on the tile cover that top-left region (a tail). On a tile group the region
holds for every slot used after it. A tile declared without one that the kernel gives one anyway (PyPTO-Pro allows
it) is learnt by the jit's first recording (``Learnt``) and declared with ``[-1, -1]`` in the next.
"""

from __future__ import annotations

import contextvars
import dataclasses
import weakref

import jax
import ml_dtypes
import numpy as np

from ...core import Buffer
from .. import _carried as carried
from .._program import current
from . import _struct
from ._types import DYNAMIC, TensorLayout, TilePad, TileType

#: per Program, the tiles and tile groups declared with a valid_shape: the first of the two carried slots holding
#: their valid (rows, cols), which ``pl.set_validshape`` sets as the kernel runs (per core, through loops)
_VALID: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
#: while the jit records a kernel: the names of tiles and groups declared without a valid_shape that it gives one
#: with ``pl.set_validshape`` (``Learnt``), so the recording that follows declares them as if with [-1, -1]
LEARNT_VALID: contextvars.ContextVar = contextvars.ContextVar("learnt_valid", default=None)


@dataclasses.dataclass
class Learnt:
    """The tiles the jit's recordings learnt ``pl.set_validshape`` sets: ``known`` ones are declared with a valid
    shape, ``new`` ones were set in this recording without one (the jit records again). ``closed``: the jit's
    program is made, so a recording learns nothing more (runs record what the jit learnt)."""

    known: set = dataclasses.field(default_factory=set)
    new: set = dataclasses.field(default_factory=set)
    closed: bool = False


def declare_valid(k, tile_type: TileType, name: str) -> None:
    learnt = LEARNT_VALID.get()
    if tile_type.valid_shape is None and learnt is not None and name in learnt.known:
        tile_type = dataclasses.replace(tile_type, valid_shape=[DYNAMIC, DYNAMIC])  # set as the kernel runs
    if tile_type.valid_shape is None:
        return
    if len(tile_type.valid_shape) != 2:
        raise ValueError(f"rule 'valid shape': valid_shape is [rows, cols], got {list(tile_type.valid_shape)}")
    start = [full if v == DYNAMIC else int(v) for v, full in zip(tile_type.valid_shape, tile_type.shape)]
    for v, full in zip(start, tile_type.shape):
        if not 0 <= v <= full:
            raise ValueError(
                f"rule 'valid shape': valid_shape {list(tile_type.valid_shape)} is outside {list(tile_type.shape)}"
            )
    _VALID.setdefault(k, {})[name] = _struct.slots_for(start)  # a section's tile: the reserved slots


def valid(tile, *, placed: bool = False):
    """The valid (rows, cols) of a tile or tile-group slot declared with a valid_shape, as the kernel set it last
    (None: the whole tile); ``placed``: in the tile as placed (a ZN Mat tile's transposed)."""
    k = current()
    slot = _VALID.get(k, {}).get(getattr(tile, "name", None))
    if slot is None:
        return None
    region = (carried.load(k, slot, carried.Kind.INT), carried.load(k, slot + 1, carried.Kind.INT))
    region = tuple(v if isinstance(v, jax.core.Tracer) else int(v) for v in region)  # static where it is known
    return region[::-1] if placed and is_zn(tile) else region


def set_validshape(tile, shape) -> None:
    """``pl.set_validshape(tile, [rows, cols])``: the region of ``tile`` (or of every slot of a tile group) that loads,
    stores and vector operations cover from here on (a tail; run-time values allowed)."""
    name = tile.group.name if hasattr(tile, "group") and not hasattr(tile, "rows") else getattr(tile, "name", None)
    k = current()
    slot = _VALID.get(k, {}).get(name)
    learnt = LEARNT_VALID.get()
    if slot is None and learnt is not None and not learnt.closed and name is not None:  # any tile's, in PyPTO-Pro
        learnt.new.add(name)
        return
    if slot is None:
        raise ValueError(
            f"rule 'valid shape': pl.set_validshape of {tile}, which was not declared with a valid_shape: declare its "
            "TileType with valid_shape=[-1, -1]"
        )
    rows, cols = shape
    carried.store(k, slot, carried.Kind.INT, rows)
    carried.store(k, slot + 1, carried.Kind.INT, cols)


#: per Program, the names of its ZN Mat tiles (``placed``)
_ZN_MATS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def placed(k, tile_type: TileType) -> tuple[tuple, object]:
    """The shape and format a tile of ``tile_type`` is placed with. A ZN Mat tile ``[R, C]`` (a transposed load's
    or insert's destination) is bit for bit the Nz image of its transpose, so it is placed as an Nz ``[C, R]``
    tile holding the transpose; ``pl.move`` out of it reads it transposed."""
    if tile_type.buffer is Buffer.L1 and tile_type.layout is TensorLayout.ZN:
        return tile_type.shape[::-1], None
    return tile_type.shape, tile_type.format


def note_zn(k, tile_type: TileType, name: str) -> None:
    if tile_type.buffer is Buffer.L1 and tile_type.layout is TensorLayout.ZN:
        _ZN_MATS.setdefault(k, set()).add(name)


def is_zn(tile) -> bool:
    """Whether ``tile`` (a tile or a tile group slot) is a ZN Mat tile."""
    return getattr(tile, "name", None) in _ZN_MATS.get(current(), ())


#: per Program, the pad (``TileType(pad=)``) of its tiles and tile groups declared with one
_PADS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
#: the float dtypes whose ``TilePad.max`` / ``min`` are +inf / -inf (PyPTO-Pro's PadValue::Max / Min); narrower
#: floats without infinities take their largest finite value
_INF_FLOATS = ("float16", "bfloat16", "float32")


def declare_pad(k, tile_type: TileType, name: str) -> None:
    if tile_type.pad is not TilePad.null:
        _PADS.setdefault(k, {})[name] = tile_type.pad


def pad_value(tile):
    """The value ``pl.fillpad`` writes into ``tile``'s padding (None: it was declared without a pad)."""
    pad = _PADS.get(current(), {}).get(getattr(tile, "name", None))
    if pad is None:
        return None
    dtype = np.dtype(tile.np_dtype)
    if pad is TilePad.zero:
        return dtype.type(0)
    sign = 1 if pad is TilePad.max else -1
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return dtype.type(info.max if sign > 0 else info.min)
    if tile.dtype in _INF_FLOATS:
        return dtype.type(sign * np.inf)
    return dtype.type(sign * float(ml_dtypes.finfo(dtype).max))
