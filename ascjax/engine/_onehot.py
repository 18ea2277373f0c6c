"""Writes at traced indices as one-hot masks: no scatter.

The control plane's arrays are small (tens to hundreds of elements) and a sweep ``vmap``s it
over a thousand scenarios. Under ``vmap`` a scatter at a batched index becomes a scatter with
batch dimensions, which XLA's CPU backend runs element by element; a select against
``arange == index`` stays one vectorised pass over the array.
"""

from __future__ import annotations

import jax.numpy as jnp


def mask(shape: tuple[int, ...], index: tuple) -> jnp.ndarray:
    """True at ``index`` (one traced int per leading axis), broadcast over ``shape``."""
    m = jnp.asarray(True)
    for axis, i in enumerate(index):
        hit = jnp.arange(shape[axis]) == i
        m = m & hit.reshape((shape[axis],) + (1,) * (len(shape) - axis - 1))
    return m


def put(arr: jnp.ndarray, index: tuple, value, when=True) -> jnp.ndarray:
    """``arr.at[index].set(value)`` where ``when`` holds; ``value`` broadcasts over the trailing axes."""
    tail = arr.shape[len(index) :]
    new = jnp.broadcast_to(jnp.asarray(value, arr.dtype), tail)
    return jnp.where(mask(arr.shape, index) & when, new, arr)


def add(arr: jnp.ndarray, index: tuple, value) -> jnp.ndarray:
    """``arr.at[index].add(value)``."""
    return jnp.where(mask(arr.shape, index), arr + jnp.asarray(value, arr.dtype), arr)
