"""``Result.cycles``: the control plane's cycle count, differentiable by the costs (``engine.run_cycles``)."""

import calibration as cal
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from unit_flag import measurement_case

import ascjax as aj

BASE = aj.default_costs(aj.get_chip("a2"))
#: costs priced in whole cycles, so one more cycle of each is an exact finite difference
WHOLE = ("mmad_head_cycles", "gm_read_latency_cycles", "gm_write_latency_cycles", "flag_latency_cycles",
         "unit_flag_latency_cycles", "vector_fixed_cycles")  # fmt: skip


def _run(case, costs):
    return aj.run(case.kernel, case.inputs, case.outputs, params=case.params, chip=case.chip, costs=costs)


@pytest.mark.parametrize(
    "make",
    [pytest.param(lambda: measurement_case(True), marks=pytest.mark.slow), lambda: cal.aiv_add_case(2)],
    ids=["unit_flag", "add"],
)
def test_the_gradient_of_the_cycles_is_the_finite_difference_of_one_cycle_more(make):
    case = make()

    def cycles(values):
        return _run(case, BASE.replace(**dict(zip(WHOLE, values)))).cycles

    values = jnp.asarray([float(getattr(BASE, f)) for f in WHOLE])
    result = _run(case, BASE)
    assert float(result.cycles) == int(jnp.max(result.control.end))  # the control plane's count, exactly
    grad = np.asarray(jax.grad(cycles)(values))
    one_more = [float(cycles(values.at[i].add(1.0)) - result.cycles) for i in range(len(WHOLE))]
    np.testing.assert_array_equal(grad, one_more)
    assert grad.max() >= 1  # a kernel whose cycles depend on no cost would make this test vacuous


@pytest.mark.slow  # test_timing's gradient test covers the unit-flag measurement kernel in the default run
def test_a_vmapped_run_gives_each_scenario_its_cycles_and_gradient():
    case = measurement_case(False)

    def cycles(latency):
        return _run(case, BASE.replace(flag_latency_cycles=latency)).cycles

    latencies = jnp.asarray([0.0, 52.0, 69.0])
    batched = jax.vmap(cycles)(latencies)
    np.testing.assert_array_equal(np.asarray(batched), [float(cycles(x)) for x in latencies])
    np.testing.assert_array_equal(np.asarray(jax.vmap(jax.grad(cycles))(latencies)), [3.0, 3.0, 3.0])


def test_a_gradient_by_the_costs_runs_the_concrete_run_and_prices_its_record_again(monkeypatch):
    """Under a ``grad`` or ``jvp`` alone the costs' values are concrete: the run is the concrete run at those values
    (its control plane cached), and only its record is priced again by the traced costs. Nothing compiles the run
    whole, with the inputs concrete or traced, and the derivative is the finite difference of one cycle more (as
    above)."""
    import ascjax.runner._run as run_module

    case = cal.aiv_add_case(2)
    at = jnp.float32(BASE.vector_fixed_cycles)
    one_more = float(_run(case, BASE.replace(vector_fixed_cycles=at + 1)).cycles - _run(case, BASE).cycles)

    def traced_whole(*args, **kwargs):
        raise AssertionError("a gradient by the costs alone traced the run whole")

    monkeypatch.setattr(run_module, "planes_jit", traced_whole)
    monkeypatch.setattr(run_module, "planes_per_scenario", traced_whole)

    def cycles(x, scale):
        inputs = {"x": case.inputs["x"] * scale, "y": case.inputs["y"]}
        r = aj.run(case.kernel, inputs, case.outputs, params=case.params, costs=BASE.replace(vector_fixed_cycles=x))
        return r.cycles + 0.0 * jnp.sum(r.outputs["z"].astype(jnp.float32))

    by_costs = jax.grad(cycles)(at, jnp.float16(1))
    by_both = jax.grad(cycles, (0, 1))(at, jnp.float16(1))  # the inputs traced too: the data plane alone traced
    _, tangent = jax.jvp(lambda x: cycles(x, jnp.float16(1)), (at,), (jnp.float32(1),))
    assert one_more == float(by_costs) == float(by_both[0]) == float(tangent) >= 1
