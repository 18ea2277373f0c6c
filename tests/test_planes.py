"""The two planes (``ascjax.planes``): the data plane computes what version 1's engine computes, bit for bit,
in the order the control plane ran the sections, with no sync, sanitizer or timing state; gradients flow."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import KERNELS, REFUSED_WHILE_TRACING
from matmul import matmul_case

import ascjax as aj
from ascjax import dataplane
from ascjax.planes import execute_data, run_planes
from ascjax.run import gm_inputs, output_spec

#: cases whose outputs the default suite compares with version 1's; every OK case of kernels/ under -m slow
QUICK = {("matmul.py", "matmul_256"), ("vec_cube.py", "vec_cube_abs_sqrt_matmul")}


def _ok_cases():
    for path in sorted(KERNELS.glob("*.py")):
        for name in aj.load_cases(str(path)):
            if (path.name, name) in REFUSED_WHILE_TRACING:
                continue
            if aj.build_case(str(path), name).expect is aj.Verdict.OK:
                marks = [] if (path.name, name) in QUICK else [pytest.mark.slow]
                yield pytest.param(path.name, name, marks=marks, id=f"{path.stem}-{name}")


@pytest.fixture
def _drop_compiled():
    """Each corpus case compiles two engines' programs: drop them after it, or a worker runs out of memory."""
    yield
    jax.clear_caches()


@pytest.mark.usefixtures("_drop_compiled")
@pytest.mark.parametrize(("file", "name"), list(_ok_cases()))
def test_the_two_planes_compute_version_1s_outputs_bit_for_bit(file, name):
    case = aj.build_case(str(KERNELS / file), name)
    planes = run_planes(case.kernel, case.inputs, case.outputs, chip=case.chip, params=case.params)
    assert planes.verdict is aj.Verdict.OK, str(planes.check)
    v1 = aj.run(case.kernel, case.inputs, case.outputs, chip=case.chip, params=case.params)
    for out in case.outputs:
        np.testing.assert_array_equal(np.asarray(planes.outputs[out]), np.asarray(v1.outputs[out]), err_msg=out)
    if case.reference is not None:
        for out, want in case.reference(case.inputs).items():
            np.testing.assert_allclose(np.asarray(planes.outputs[out], np.float64), want, atol=case.atol, rtol=0)


def test_a_deadlocked_wait_stops_its_section_and_the_good_twin_runs_on():
    """Only AIV0 sets the event the cube waits for (INTRA_BLOCK needs both): the cube's segment after the wait
    never runs, so the output stays as it was; with both AIVs setting it, the output is the reference."""
    bad = aj.build_case(str(KERNELS / "vec_cube.py"), "vec_cube_one_aiv_sets")
    stuck = run_planes(bad.kernel, bad.inputs, bad.outputs, chip=bad.chip, params=bad.params)
    assert stuck.verdict is aj.Verdict.DEADLOCK
    assert not np.any(np.asarray(stuck.outputs["out"]))
    good = aj.build_case(str(KERNELS / "vec_cube.py"), "vec_cube_abs_sqrt_matmul")
    ran = run_planes(good.kernel, good.inputs, good.outputs, chip=good.chip, params=good.params)
    want = good.reference(good.inputs)["out"]
    np.testing.assert_allclose(np.asarray(ran.outputs["out"], np.float64), want, atol=good.atol, rtol=0)


def test_the_data_plane_carries_only_data():
    """The data-only state holds GM, the tiles, the config registers and the cursors: no sync, sanitizer or
    timing state, so its bytes are the buffers' (a fixed, small overhead for the registers and the costs)."""
    case = matmul_case(128, 128, 128)
    spec = output_spec(case.outputs)
    inputs = gm_inputs(case.inputs)
    order = dataplane.Schedule((jnp.zeros(0), jnp.zeros(0), jnp.zeros(0)))
    state = jax.eval_shape(lambda: execute_data(case.kernel, aj.get_chip("a2"), aj.Options(), inputs, spec,
                                                case.params, order))  # fmt: skip
    assert state.data_only
    for field in ("wait", "flags", "xc", "issue_log", "vc", "time", "error", "seq", "loop", "warn_op"):
        assert getattr(state, field) is None, field
    assert not state.shadows and state.aic.unit_flag is None
    data = sum(x.size * x.dtype.itemsize for x in jax.tree.leaves((state.gm, state.aic.l1, state.aic.l0a,
                                                                   state.aic.l0b, state.aic.l0c, state.ub)))  # fmt: skip
    total = sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(state))
    costs = sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(state.costs))
    assert total - data - costs <= 16  # the mmad direction and saturation registers


def test_jit_and_op_by_op_agree():
    case = matmul_case(128, 128, 128)
    jitted = run_planes(case.kernel, case.inputs, case.outputs, params=case.params)
    eager = run_planes(case.kernel, case.inputs, case.outputs, params=case.params, jit=False)
    np.testing.assert_array_equal(np.asarray(jitted.outputs["c"]), np.asarray(eager.outputs["c"]))
    assert jitted.verdict is eager.verdict is aj.Verdict.OK


def test_gradients_flow_through_the_data_plane():
    """d sum(A B) / dA = 1 B^T and / dB = A^T 1, against NumPy; and the same as version 1's engine."""
    case = matmul_case(128, 128, 128, dtype=np.float32)
    a, b = (jnp.asarray(case.inputs[n]) for n in ("a", "b"))
    params = {**case.params, "dtype": "float32"}

    def loss(run, a, b):
        return jnp.sum(run(case.kernel, {"a": a, "b": b}, case.outputs, params=params).outputs["c"])

    da, db = jax.grad(lambda a, b: loss(run_planes, a, b), argnums=(0, 1))(a, b)
    ones = np.ones((128, 128))
    np.testing.assert_allclose(np.asarray(da), ones @ np.asarray(b, np.float64).T, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(np.asarray(db), np.asarray(a, np.float64).T @ ones, rtol=1e-5, atol=1e-4)
    v1_da = jax.grad(lambda a: loss(aj.run, a, b))(a)
    np.testing.assert_array_equal(np.asarray(da), np.asarray(v1_da))


def test_scenarios_vmap_through_both_planes():
    """Three phase scenarios of seed 000's K loop in one ``vmap``: each gives the verdict and the outputs that
    its own run gives (the recipe; a store without phase, a race; Partial then Final only, a deadlock)."""
    from phases import phase_case

    from ascjax.engine import verdict

    P, F, NONE = int(aj.AccPhase.Partial), int(aj.AccPhase.Final), 0
    scenarios = {"first": [P, P, P], "middle": [P, P, F], "last": [F, F, F], "store": [F, NONE, F]}
    case = phase_case(P, P, F, F)

    def one(first, middle, last, store):
        params = {"first": first, "middle": middle, "last": last, "store": store}
        r = run_planes(case.kernel, case.inputs, case.outputs, params=params, jit=False)
        return r.outputs["out"], verdict(r.check.result)

    outs, codes = jax.jit(jax.vmap(one))(*(jnp.asarray(scenarios[k], jnp.int32) for k in scenarios))
    words = [aj.Verdict[aj.core.Finding(int(c)).verdict] if c >= 0 else aj.Verdict.OK for c in np.asarray(codes)]
    assert words == [aj.Verdict.OK, aj.Verdict.RACE, aj.Verdict.DEADLOCK]
    for i in range(3):
        alone = run_planes(case.kernel, case.inputs, case.outputs, params={k: v[i] for k, v in scenarios.items()})
        assert alone.verdict is words[i]
        np.testing.assert_array_equal(np.asarray(outs[i]), np.asarray(alone.outputs["out"]))
