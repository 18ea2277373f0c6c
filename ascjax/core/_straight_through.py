"""The straight-through estimator (STE): hardware rounding forward, identity backward.

Rounding and saturation (floor, clip, a bit-level NaN fix-up) have zero or undefined
derivatives, so ``jax.grad`` through an emulated cast or quantisation is zero or fails. With
``Options(straight_through=True)`` the ops route those steps through ``straight_through``:
the forward value is the hardware's, bit for bit, and the backward pass treats the step as
the identity. Scaling before the step keeps its true derivative, so a scaled quantisation
``q(x * s)`` gets ``s``.

Integer destinations (int8, uint8, int32) and formats held as uint8 codes (HiFloat8, fp4
e1m2) stop the gradient with or without the option: JAX gives integer arrays no tangents
(float0), and a code's integer value is not the number it stands for.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def straight_through(x, quantize):
    """``quantize(x)``, whose derivative with respect to ``x`` is taken to be the identity.

    ``quantize`` is an elementwise function of ``x`` alone (close over static settings or
    non-differentiated arrays). The primal output is ``quantize(x)`` itself (a ``custom_jvp``,
    not ``x + stop_gradient(q(x) - x)``, whose sum is not exact at saturation, for infinities
    or for -0), so forward values are unchanged. The tangent is ``x``'s, cast to the output
    dtype (as ``astype`` does). Integer ``x`` or an integer output (codes included): returns
    ``quantize(x)`` unchanged, which carries no gradient.
    """
    x = jnp.asarray(x)
    out = jax.eval_shape(quantize, x)
    if not (jnp.issubdtype(x.dtype, jnp.floating) and jnp.issubdtype(out.dtype, jnp.floating)):
        return quantize(x)

    @jax.custom_jvp
    def ste(v):
        return quantize(v)

    @ste.defjvp
    def _identity(primals, tangents):
        (v,), (t,) = primals, tangents
        return quantize(v), t.astype(out.dtype)

    return ste(x)
