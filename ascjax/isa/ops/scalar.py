"""The scalar unit's element writes: one value into a GM tensor (PyPTO-Pro ``setval`` / ``tensor[i] = value``).

The scalar pipe (S) of either core writes GM element by element; the value is a scalar of the kernel (a constant,
a loop index, a carried value), converted to the tensor's dtype as the store writes it.
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp

from ...engine._state import State
from ._machine import core_of, select
from .move import _need, checked_offsets


def setval_gm_window(gm_shape, *, row=0, col=0):
    """(offsets, their limits, their units) of one element of a 2-D GM tensor."""
    return (row, col), (gm_shape[0] - 1, gm_shape[1] - 1), (1, 1)


def setval_gm(state: State, dst: str, value, *, row=0, col=0, sub: int | None = None) -> State:
    """S: GM tensor ``dst``'s element (row, col) = ``value`` (traced offsets and value allowed)."""
    _need(dst in state.gm, f"GM tensor {dst!r} is not an input or output of this kernel: have {sorted(state.gm)}")
    _need(
        dst in state.gm_outputs,
        f"GM tensor {dst!r} is a kernel input, and inputs are read-only: declare it in outputs (workspaces too)",
    )
    g = state.gm[dst]
    core_of(sub)
    execute = checked_offsets(*setval_gm_window(g.shape, row=row, col=col))
    r, c = jnp.asarray(row, jnp.int32), jnp.asarray(col, jnp.int32)
    old = g[r, c]
    new = g.at[r, c].set(select(execute, jnp.asarray(value).astype(g.dtype), old))
    state = eqx.tree_at(lambda s: s.gm[dst], state, new)
    mark = jnp.broadcast_to(jnp.asarray(execute), (1, 1))
    return state.mark_gm(dst, mark, False, start=(r, c))
