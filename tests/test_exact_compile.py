"""The programs ascjax compiles itself carry ``EXACT_COMPILE`` (no excess precision: on a GPU, XLA would otherwise
skip the f16/bf16 roundings the device makes), compiled for a quick first run and optimised once called more; a
program nested in the user's own trace takes the user's options."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import KERNELS, REFUSED_WHILE_TRACING

import ascjax as aj
from ascjax.core import _numerics
from ascjax.engine import _dataplane as dataplane
from ascjax.runner._planes import CONTROL_CACHE


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
    monkeypatch.setattr(_numerics, "FIRST_CALLS_COMPILE", {"xla_no_such_quick_option": True})
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
    """LLVM's lighter optimisation generates the same floating-point operations: a vector kernel's exp, max, sum and
    division alike (every OK case of ``kernels/``, both data-plane schedules, under ``-m slow``)."""
    case = aj.build_case(str(KERNELS / "matmul_softmax.py"), "matmul_softmax")
    _numerics.forget_program_calls()
    runs = [aj.run(case.kernel, case.inputs, case.outputs, chip=case.chip) for _ in range(_numerics.QUICK_CALLS + 1)]
    quick, optimised = runs[0], runs[-1]
    for name in case.outputs:
        np.testing.assert_array_equal(np.asarray(quick.outputs[name]), np.asarray(optimised.outputs[name]))


def _every_case():
    for path in sorted(KERNELS.glob("*.py")):
        for name in aj.load_cases(str(path)):
            if (path.name, name) not in REFUSED_WHILE_TRACING:
                yield pytest.param(path.name, name, id=f"{path.stem}-{name}")


@pytest.mark.slow  # minutes: every case of kernels/, each data plane compiled twice, both schedules
@pytest.mark.parametrize("at_run_time", [False, True], ids=["schedule-traced", "schedule-at-run-time"])
@pytest.mark.parametrize(("file", "name"), list(_every_case()))
def test_every_kernels_first_calls_and_optimised_runs_have_the_same_bits(file, name, at_run_time, monkeypatch):
    """Without optimisation one bit of flash attention's output moved (its data plane with the schedule chosen at run
    time): the first calls' compile must give every kernel's bits, with its schedule traced or chosen at run time."""
    case = aj.build_case(str(KERNELS / file), name)
    if at_run_time:
        monkeypatch.setattr(dataplane, "_ranks", lambda keys: None)
    CONTROL_CACHE.clear()  # its schedule from this test's choice
    _numerics.forget_program_calls()
    runs = [aj.run(case.kernel, case.inputs, case.outputs, chip=case.chip, params=case.params)
            for _ in range(_numerics.QUICK_CALLS + 1)]  # fmt: skip
    for out in case.outputs:
        first, optimised = np.asarray(runs[0].outputs[out]), np.asarray(runs[-1].outputs[out])
        assert first.tobytes() == optimised.tobytes(), out
