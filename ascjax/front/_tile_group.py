"""TileGroup: ``depth`` equal tiles side by side in one buffer, picked by a (possibly traced) slot index.

PyPTO-Pro's ``make_tile_group(..., depth=...)`` gives ping-pong (and deeper) buffering. The
slots are contiguous and equally aligned, so a slot is the group's first tile shifted by
``slot * stride_bytes``; its data is one stacked array ``[depth, *physical_shape]`` in the
state. A slot index outside ``[0, depth)`` is a ``BOUNDS`` verdict, never wrapped: such a
slot reads slot 0's address range for shape only and writes nothing.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax.numpy as jnp

from ..core._memory import Tile


@dataclasses.dataclass(frozen=True, eq=False)
class TileSlot(Tile):
    """One slot of a ``TileGroup``: a Tile whose position is the group base plus a traced offset."""

    slot: Any = None  # int32 slot index, clipped into [0, depth) (``ok`` says whether it was in range)
    ok: Any = True  # the requested index lay in [0, depth): writes of a bad slot are dropped
    depth: int = 1
    stride_bytes: int = 0

    @property
    def base(self) -> Tile:
        """The slot-0 tile (static metadata, hashable)."""
        return Tile(self.name, self.buffer, self.addr, self.rows, self.cols, self.dtype, self.fmt, self.storage)

    def __str__(self) -> str:
        return f"{super().__str__()} slot of a depth-{self.depth} group"


@dataclasses.dataclass(frozen=True)
class TileGroup:
    """``depth`` slots of one tile shape; ``group[i]`` / ``slot(i)`` select one (``i`` may be traced)."""

    tile: Tile  # slot 0 (its name keys the stacked storage)
    depth: int
    stride_bytes: int

    @property
    def name(self) -> str:
        return self.tile.name

    def slot(self, index) -> TileSlot:
        """Slot ``index`` (static or traced). Out of range gives a slot with ``ok == False``."""
        if isinstance(index, int) and not 0 <= index < self.depth:
            raise IndexError(
                f"rule 'TileGroup index': slot {index} of TileGroup `{self.name}` is outside [0, {self.depth}); "
                "slots are not taken modulo depth: use index % depth if you mean a ring"
            )
        i = jnp.asarray(index, jnp.int32)
        ok = (i >= 0) & (i < self.depth)
        t = self.tile
        return TileSlot(
            t.name,
            t.buffer,
            t.addr,
            t.rows,
            t.cols,
            t.dtype,
            t.fmt,
            t.storage,
            slot=jnp.clip(i, 0, self.depth - 1),
            ok=ok,
            depth=self.depth,
            stride_bytes=self.stride_bytes,
        )

    def __len__(self) -> int:
        return self.depth

    def __str__(self) -> str:
        return f"TileGroup `{self.name}` (depth {self.depth}, {self.tile.buffer} @{self.tile.addr:#x})"
