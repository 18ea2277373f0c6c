"""A concrete schedule's segments chosen while the data plane is traced (``engine._dataplane``): the same buffers as
the choice made at run time by a loop over the segments, and a loop's steady state traced once whatever its trip
count."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import KERNELS

import ascjax as aj
from ascjax.engine import _dataplane as dataplane
from ascjax.engine import default_costs
from ascjax.front._tracing import gm_inputs, output_spec, record_on_host
from ascjax.runner._planes import CONTROL_CACHE, execute_data, resolve_control

pingpong = pytest.importorskip("pingpong")


def _expand(pieces: list) -> list:
    """``_compress``'s pieces back as the steps they stand for."""
    steps = []
    for reps, runs in pieces:
        if reps is None:
            steps.extend(runs)
        else:
            steps.extend((branch, first + k * step) for k in range(reps) for branch, first, step in runs)
    return steps


@pytest.mark.parametrize("trips", [4, 64])
def test_a_loops_steady_state_is_one_piece_whatever_its_trip_count(trips):
    prologue = [(0, 0), (1, 0)]
    loop = [(b, i) for i in range(trips) for b in (2, 3, 4)]  # three sections' segments, one iteration each
    epilogue = [(5, 0), (2, trips)]
    steps = prologue + loop + epilogue
    pieces = dataplane._compress(steps)
    assert _expand(pieces) == steps
    repeated = [p for p in pieces if p[0] is not None]
    assert len(repeated) == 1 and repeated[0][0] >= trips - 1  # the period may start one step early or late
    assert sum(len(runs) for _, runs in pieces) <= len(prologue) + 3 + len(epilogue) + 3


def test_steps_without_a_period_stay_single():
    steps = [(3, 0), (1, 0), (4, 0), (1, 5), (5, 0), (9, 2)]
    pieces = dataplane._compress(steps)
    assert all(reps is None for reps, _ in pieces) and _expand(pieces) == steps


def _outputs(case, monkeypatch, at_run_time: bool):
    CONTROL_CACHE.clear()
    if at_run_time:
        monkeypatch.setattr(dataplane, "_ranks", lambda keys: None)
    r = aj.run(case.kernel, case.inputs, case.outputs, chip=case.chip, params=case.params)
    monkeypatch.undo()
    return aj.Verdict(int(r.verdict)), {name: np.asarray(x) for name, x in r.outputs.items()}


@pytest.mark.parametrize(
    ("file", "name"),
    [
        ("pingpong.py", "pingpong_sections_odd"),
        ("pingpong.py", "pingpong_sections_no_final_release"),
        ("vec_cube.py", "vec_cube_one_aiv_sets"),  # a deadlock: the cube's segment after its wait never runs
        pytest.param("flash_attention.py", "f16_s187_d64", marks=pytest.mark.slow),  # 20 s: ping-pong checks the same
    ],
)
def test_segments_chosen_while_traced_compute_what_the_run_time_choice_computes(file, name, monkeypatch):
    case = aj.build_case(str(KERNELS / file), name)
    verdict, traced = _outputs(case, monkeypatch, at_run_time=False)
    again, chosen = _outputs(case, monkeypatch, at_run_time=True)
    assert verdict is again is case.expect
    for out, want in chosen.items():
        np.testing.assert_array_equal(traced[out], want, err_msg=out)


def _data_plane_equations(tiles: int) -> int:
    """Equations of the ping-pong sections' data plane at ``tiles`` tiles, its schedule concrete."""
    chip, options = aj.get_chip("950"), aj.Options()
    x = {n: np.asarray(v) for n, v in pingpong.inputs(n_max=tiles).items()}
    spec = output_spec({"out": ((tiles * pingpong.ROWS, pingpong.D), "float32")})
    params = {"n": jnp.int32(tiles), "n_max": tiles}
    kernel = pingpong.pingpong_sections_kernel
    record, latency = record_on_host(kernel, chip, default_costs(chip), x, spec, params)
    _, order, *_ = CONTROL_CACHE.get(record, resolve_control(chip, options, None), latency)
    assert order.ranks is not None
    jaxpr = jax.make_jaxpr(lambda: execute_data(kernel, chip, options, gm_inputs(x), spec, params, order))()
    return len(jaxpr.jaxpr.eqns)


def test_the_traced_schedule_does_not_grow_with_the_trip_count():
    assert _data_plane_equations(24) == _data_plane_equations(8)
