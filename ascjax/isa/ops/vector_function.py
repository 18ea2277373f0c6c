"""A vector function: register-level vector code that runs as one instruction on an AIV's V pipe (PyPTO-Pro's
``@pl.vector_function``), reading the UB tiles it loads from and writing those it stores to.

The front end that reads the function's body hands it over as ``body``: a pure function from the tiles' contents to
the new contents of the tiles it writes, so this op stays free of any front end.
"""

from __future__ import annotations

from ...core import Buffer
from ...core._memory import Tile
from ...engine._state import State
from ._machine import core_of, poison, racy_read
from .move import _expect, _need


def vector_function(state: State, body, reads: tuple, writes: tuple, *, sub: int) -> State:
    """V of AIV ``sub``: ``body(contents)`` over the UB tiles ``reads + writes`` (their contents in that order)
    returns the new contents of ``writes``, in order (each the tile's physical shape and dtype)."""
    tiles = (*reads, *writes)
    for tile in tiles:
        _expect(tile, Buffer.UB, "a vector function's tile")
    core_of(sub)
    new = tuple(body(tuple(state.tile(tile, sub) for tile in tiles)))
    _need(len(new) == len(writes), f"the vector function returned {len(new)} tiles for the {len(writes)} it writes")
    for tile, value in zip(writes, new):
        _need(
            isinstance(tile, Tile) and tuple(value.shape) == tuple(tile.physical_shape),
            f"the vector function returned a {tuple(value.shape)} array for {tile}",
        )
        value = poison(value.astype(tile.np_dtype), racy_read(), state.options)
        state = state.with_tile(tile, value, sub)
    return state
