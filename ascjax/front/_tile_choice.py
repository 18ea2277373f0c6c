"""TileChoice: one of a few tiles picked by a traced index, such as a ping-pong pair of tiles declared apart.

A PyPTO-Pro kernel often keeps ``(tile_0, tile_1)`` in a Python tuple and indexes it with a run-time value
(``buf[task_id % 2]``). The tiles need not be side by side as a tile group's slots are, so the pick is its own
operand: reads select the chosen tile's elements, writes land in the chosen tile only, and the record sees one
access whose candidate byte ranges are the tiles' (as it sees a tile group slot's). An index outside the tuple is a
``BOUNDS`` finding: nothing is read from or written to another tile.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax.numpy as jnp

from ..core._memory import Tile


@dataclasses.dataclass(frozen=True, eq=False)
class TileChoice(Tile):
    """The tile ``candidates[choice]``; its own fields (name, address, ...) are candidate 0's."""

    candidates: tuple = ()
    choice: Any = 0  # int32, clipped into [0, len(candidates)) (``ok`` says whether it was in range)
    ok: Any = True

    def __str__(self) -> str:
        names = ", ".join(f"`{t.name}`" for t in self.candidates)
        return f"one of ({names}) ({self.buffer}, {self.rows}x{self.cols} {self.dtype} {self.fmt})"


def choose(tiles, index, what: str) -> TileChoice:
    """``tiles[index]`` for a traced ``index``: the tiles must share buffer, shape, dtype and format."""
    tiles = tuple(tiles)
    for t in tiles:
        if not isinstance(t, Tile) or getattr(t, "slot", None) is not None or isinstance(t, TileChoice):
            raise TypeError(
                f"rule 'traced index': {what} holds {t}, not a tile: a run-time index picks among tiles declared "
                "with pl.make_tile"
            )
    first = tiles[0]
    for t in tiles[1:]:
        if (t.buffer, t.rows, t.cols, t.dtype, t.fmt) != (first.buffer, first.rows, first.cols, first.dtype, first.fmt):
            raise TypeError(
                f"rule 'traced index': a run-time index picks among tiles of one buffer, shape, dtype and format, "
                f"but {what} holds {first} and {t}"
            )
    i = jnp.asarray(index, jnp.int32)
    fields = {f.name: getattr(first, f.name) for f in dataclasses.fields(Tile)}
    return TileChoice(**fields, candidates=tiles, choice=jnp.clip(i, 0, len(tiles) - 1), ok=(i >= 0) & (i < len(tiles)))
