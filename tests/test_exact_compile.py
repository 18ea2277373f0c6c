"""The programs ascjax compiles itself carry ``EXACT_COMPILE`` (no excess precision: on a GPU, XLA would otherwise
skip the f16/bf16 roundings the device makes), compiled for a quick first run and optimised once called more; a
program nested in the user's own trace takes the user's options."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import KERNELS

import ascjax as aj
from ascjax.core import _numerics


def test_exact_jit_passes_its_options_to_a_program_of_its_own_and_none_inside_a_users_jit_or_grad(monkeypatch):
    # an option XLA does not know makes the compile fail, so it shows whether the options reached the compiler
    monkeypatch.setattr(_numerics, "EXACT_COMPILE", {"xla_no_such_option_for_this_test": True})
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


def test_a_program_runs_quick_compiled_first_and_optimised_after_its_first_calls(monkeypatch):
    # an option XLA does not know shows which of the two compiles a call ran
    monkeypatch.setattr(_numerics, "QUICK_COMPILE", {"xla_no_such_quick_option": True})
    double = _numerics.exact_jit(lambda x: 2 * x)
    for _ in range(_numerics.QUICK_CALLS):
        with pytest.raises(Exception, match="xla_no_such_quick_option"):
            double(jnp.ones(3))  # its first calls: compiled for a quick first run
    assert double(jnp.ones(3)).tolist() == [2.0, 2.0, 2.0]  # the next: optimised
    with pytest.raises(Exception, match="xla_no_such_quick_option"):
        double(jnp.ones(4))  # another shape is another program: its first call
    _numerics.forget_program_calls()  # as ascjax.clear_caches does
    with pytest.raises(Exception, match="xla_no_such_quick_option"):
        double(jnp.ones(3))
    assert float(jax.jit(double)(jnp.float32(2))) == 4.0  # inside a user's jit: the user's options, no count


def test_a_kernels_quick_first_run_and_its_optimised_runs_have_the_same_bits():
    """LLVM without optimisation runs the same operations: a vector kernel's exp, max, sum and division alike."""
    case = aj.build_case(str(KERNELS / "matmul_softmax.py"), "matmul_softmax")
    _numerics.forget_program_calls()
    runs = [aj.run(case.kernel, case.inputs, case.outputs, chip=case.chip) for _ in range(_numerics.QUICK_CALLS + 1)]
    quick, optimised = runs[0], runs[-1]
    for name in case.outputs:
        np.testing.assert_array_equal(np.asarray(quick.outputs[name]), np.asarray(optimised.outputs[name]))
