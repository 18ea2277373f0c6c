"""How ascjax compiles the programs that compute a kernel's data, so that they round where the device rounds."""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp

try:  # no public spelling: whether JAX runs eagerly, outside every transformation and trace
    from jax._src.core import trace_state_clean as _outside_transformations
except ImportError:  # pragma: no cover - a JAX without it: every program keeps JAX's options
    _outside_transformations = lambda: False  # noqa: E731

#: XLA may keep f16 and bf16 intermediates in float32 ("excess precision", on by default). On a GPU it then drops a
#: float32 -> f16 -> float32 round trip, and it may compute low-precision chains without rounding between their
#: operations: the bits of the directed-rounding casts change (measured on an H200: 10 bit-exactness tests fail with
#: it on, none with it off), and those of f16/bf16 vector chains can. The programs ascjax compiles itself switch it
#: off.
EXACT_COMPILE = {"xla_allow_excess_precision": False}


def jit_outside(fun, compiler_options: dict):
    """``eqx.filter_jit(fun)``, compiled with ``compiler_options`` when it is called outside any JAX transformation.

    JAX refuses compiler options on a program nested in another's trace: inside a ``jax.jit``, ``vmap`` or ``grad``
    of the user's, the enclosing program's options apply.
    """
    own, plain = eqx.filter_jit(fun, compiler_options=compiler_options), eqx.filter_jit(fun)

    @functools.wraps(fun)
    def call(*args, **kwargs):
        return (own if _outside_transformations() else plain)(*args, **kwargs)

    return call


def exact_jit(fun):
    """``fun`` compiled with ``EXACT_COMPILE`` outside transformations (``jit_outside``); inside a user's own
    transformation, ``XLA_FLAGS=--xla_allow_excess_precision=false`` gives the device's bits too."""
    return jit_outside(fun, EXACT_COMPILE)


def fold_sum(x, axis: int):
    """The sum of ``x`` along ``axis`` (kept, of length 1) in one fixed order: the upper half of the axis added to the
    lower half element by element, then again, until one element is left (a length short of a power of two padded
    with -0.0, the sum's identity, which keeps a sum of -0.0s negative).

    XLA chooses the order of a ``jnp.sum`` by the program around it: the same float32 rows summed in a ``vmap`` and
    on their own differ in most of their last bits. Each fold is an element-wise add, which XLA does not reorder, so
    a kernel's sums have the same bits alone, in a sweep, a launch's blocks or a user's ``jit``. The device's order
    within a reduction is not in the sources; a SIMD unit reduces by such folds.
    """
    n = x.shape[axis]
    width = 1 << max(n - 1, 0).bit_length()
    if width != n:
        pad = list(x.shape)
        pad[axis] = width - n
        x = jax.lax.concatenate([x, jnp.full(pad, -0.0, x.dtype)], axis)
    while x.shape[axis] > 1:
        half = x.shape[axis] // 2
        x = jax.lax.slice_in_dim(x, 0, half, axis=axis) + jax.lax.slice_in_dim(x, half, 2 * half, axis=axis)
    return x
