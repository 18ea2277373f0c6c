"""The programs ascjax compiles itself carry ``EXACT_COMPILE`` (no excess precision: on a GPU, XLA would otherwise
skip the f16/bf16 roundings the device makes), alone or under a ``vmap``; a program nested in the user's own ``jit`` or
``grad`` takes the user's options."""

import jax
import jax.numpy as jnp
import pytest

from ascjax.core import _numerics


def test_exact_jit_passes_its_options_to_a_program_of_its_own_and_none_inside_a_users_jit_or_grad(monkeypatch):
    # an option XLA does not know makes the compile fail, so it shows whether the options reached the compiler
    # (``accepted``, which would drop it, lets it through here)
    monkeypatch.setattr(_numerics, "EXACT_COMPILE", {"xla_no_such_option_for_this_test": True})
    monkeypatch.setattr(_numerics, "accepted", lambda options: options)
    double = _numerics.exact_jit(lambda x: 2 * x)
    with pytest.raises(Exception, match="xla_no_such_option_for_this_test"):
        double(jnp.ones(3))
    # under vmaps alone JAX compiles the batched program by itself: the options reach it
    with pytest.raises(Exception, match="xla_no_such_option_for_this_test"):
        jax.vmap(jax.vmap(double))(jnp.ones((2, 3)))
    # inside a jit or grad of the user's (a vmap in a jit too) the options would be refused: the plain program runs
    assert float(jax.jit(double)(jnp.float32(2))) == 4.0
    assert jax.jit(jax.vmap(double))(jnp.ones(3)).tolist() == [2.0, 2.0, 2.0]
    assert jax.vmap(jax.jit(double))(jnp.ones(3)).tolist() == [2.0, 2.0, 2.0]
    assert float(jax.grad(double)(jnp.float32(1))) == 2.0


def test_an_option_the_installed_xla_does_not_know_is_dropped_not_fatal():
    """ascjax's own compiler options hold one newer than some jaxlibs (``INTEGER_COMPILE``): an XLA that does not
    know an option compiles without it, and this one knows every option ascjax asks for."""
    known = {"xla_backend_optimization_level": 0}
    assert _numerics.accepted({"xla_no_such_option_anywhere": True, **known}) == known
    for options in (_numerics.QUICK_COMPILE, _numerics.EXACT_COMPILE):
        assert _numerics.accepted(options) == options
