"""A tile's valid region: the top-left ``rows x cols`` of it an op reads and writes (a tail tile's, PyPTO-Pro's
``valid_shape``, Ascend C's element counts).

The region may be traced (a tail computed from a loop index): an op then computes its whole tile and keeps the
rest of its destination as it was. A static region outside the tile is refused at the call; a traced one is the
control plane's BOUNDS finding (``valid_faults``), and the op then writes nothing.
"""

from __future__ import annotations

import jax.numpy as jnp

from ...core import BOUNDS_WHAT, Finding
from ...engine import Fault
from ._machine import _need, static_int

#: the BOUNDS_WHAT indices of a valid region's rows and columns
VALID_WHATS = (BOUNDS_WHAT.index("valid rows"), BOUNDS_WHAT.index("valid columns"))


def check_valid(valid, shape, what: str) -> None:
    """A static valid region lies in ``[0, rows] x [0, cols]`` of a ``shape`` tile."""
    if valid is None:
        return
    _need(len(valid) == 2, f"rule 'valid shape': {what}'s valid region is (rows, cols), got {valid!r}")
    for value, limit, which in zip(valid, shape, ("rows", "columns")):
        v = static_int(value)
        if v is not None:
            _need(0 <= v <= limit, f"rule 'bounds': {what}'s valid {which} {v} are outside [0, {limit}]")


def valid_faults(valid, shape) -> list[Fault]:
    """The traced parts of a valid region outside ``[0, rows] x [0, cols]`` as BOUNDS ``Fault`` s."""
    if valid is None:
        return []
    out = []
    for value, limit, what in zip(valid, shape, VALID_WHATS):
        if static_int(value) is None:
            v = jnp.asarray(value, jnp.int32)
            out.append(Fault(Finding.BOUNDS, (v < 0) | (v > limit), what, v, limit))
    return out


def is_whole(valid, shape) -> bool:
    """Whether ``valid`` is statically the whole ``shape`` (or not given)."""
    return valid is None or tuple(static_int(v) for v in valid) == tuple(shape)


def valid_mask(valid, shape):
    """The bool ``shape`` mask of the region (True: inside)."""
    rows, cols = shape
    r, c = (jnp.asarray(v, jnp.int32) for v in valid)
    return (jnp.arange(rows) < r)[:, None] & (jnp.arange(cols) < c)[None, :]


def window_index(start, size: int, limit: int):
    """``start + arange(size)`` clipped into ``[0, limit)``: a tail window's indices into its tensor (the positions
    past the tensor lie outside the region, which masks them off)."""
    return jnp.clip(jnp.asarray(start, jnp.int32) + jnp.arange(size, dtype=jnp.int32), 0, limit - 1)
