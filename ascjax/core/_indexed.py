"""Updates at an index without scatter: ``dynamic_slice`` / ``dynamic_update_slice``.

``x.at[i].set(v)`` lowers to an XLA scatter, and scatters dominate the compile time of large
kernels (the state machine updates a few scalars per op). An update of one element, or of
everything behind one leading index, is a ``dynamic_update_slice`` instead, which XLA compiles
as a copy. Reads and writes clamp the index the same way, so a gated write at an index that is
out of range (the op's own check has already failed) writes back the value it read.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def _starts(arr, index):
    index = index if isinstance(index, tuple) else (index,)
    tail = arr.shape[len(index) :]
    starts = tuple(int(i) if isinstance(i, (int, np.integer)) else jnp.asarray(i, jnp.int32) for i in index) + (
        0,
    ) * len(tail)
    return starts, (1,) * len(index) + tail, tail


def get(arr, index):
    """``arr[index]`` for integer (static or traced) leading indices."""
    starts, sizes, tail = _starts(arr, index)
    return jax.lax.dynamic_slice(arr, starts, sizes).reshape(tail)


def put(arr, index, value, when=True):
    """``arr.at[index].set(value)`` where ``when`` holds, else ``arr`` unchanged."""
    starts, sizes, tail = _starts(arr, index)
    old = jax.lax.dynamic_slice(arr, starts, sizes)
    new = jnp.broadcast_to(jnp.asarray(value, arr.dtype), tail).reshape(sizes)
    return jax.lax.dynamic_update_slice(arr, jnp.where(when, new, old), starts)


def add(arr, index, value):
    """``arr.at[index].add(value)``."""
    starts, sizes, tail = _starts(arr, index)
    old = jax.lax.dynamic_slice(arr, starts, sizes)
    new = old + jnp.broadcast_to(jnp.asarray(value, arr.dtype), tail).reshape(sizes)
    return jax.lax.dynamic_update_slice(arr, new, starts)
