"""Host or device arithmetic: NumPy for concrete values, ``jax.numpy`` once any value is traced.

Post-processing a concrete result (a verdict, a launch's waves, a schedule) with ``jax.numpy``
runs one eager op per primitive and shape, and each compiles on first use: a test file or a
first run pays tens of milliseconds per op. The same formula in NumPy compiles nothing, and
under a transformation the traced values take the ``jax.numpy`` path unchanged.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def array_module(*xs):
    """``numpy`` when no leaf of ``xs`` is traced, else ``jax.numpy``."""
    return jnp if any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(xs)) else np
