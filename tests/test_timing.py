"""The cycle timing model: overlap, sweeps, bounds, traces and pictures (the published measurements:
test_timing_accuracy.py)."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from matmul import matmul_case, matmul_pingpong_kernel
from unit_flag import measurement_case

import ascjax as aj


def run(case, **kw):
    return aj.run(case.kernel, case.inputs, case.outputs, params=case.params, chip=case.chip, **kw)


def test_the_unit_flag_beats_software_sync_and_a_wrong_direction_is_named():
    with_uf = run(measurement_case(True)).report().cycles
    software = run(measurement_case(False)).report().cycles
    wrong_direction = run(measurement_case(True, direction="m")).report()
    assert software > with_uf  # the unit flag saves the M -> FIX set and wait (the drain's overlap: not modelled)
    assert "set_mmad_direction('n')" in wrong_direction.warnings[0] and "fixpipe at" in wrong_direction.warnings[0]
    assert not run(measurement_case(True)).report().warnings


@pytest.mark.xfail(
    reason="timing v2 (issue 17): the control plane flips an mmad's unit flags when it completes, so a read in the "
    "mmad's order cannot start on the first fractals early and the direction costs nothing yet",
    strict=True,
)
def test_a_wrong_mmad_direction_costs_cycles():
    with_uf = run(measurement_case(True)).report().cycles
    assert with_uf < run(measurement_case(True, direction="m")).report().cycles


@pytest.mark.slow  # benchmarks/ measure the ping-pong kernel too
def test_ping_pong_is_faster_by_the_overlap():
    single = run(matmul_case()).report().timing
    double = run(matmul_case(kernel=matmul_pingpong_kernel)).report().timing
    mte2_single, mte2_double = single["pipes"]["AIC.MTE2"], double["pipes"]["AIC.MTE2"]
    assert abs(mte2_single["busy_cycles"] - mte2_double["busy_cycles"]) <= 2  # the same bytes (and sets)
    # single-buffered, MTE2 waits every step for MTE1 to free L1; double-buffered it hardly waits
    steps = 8
    mte1_step = single["pipes"]["AIC.MTE1"]["busy_cycles"] / steps
    assert mte2_single["stall_cycles"] >= (steps - 2) * mte1_step
    assert mte2_double["stall_cycles"] < 0.25 * mte2_single["stall_cycles"]
    assert single["cycles"] - double["cycles"] >= mte2_single["stall_cycles"] - mte2_double["stall_cycles"] - 1000
    assert double["cycles"] < 0.95 * single["cycles"] and single["bound"] == double["bound"] == "MTE2"


def _cycles(case, head, latency):
    costs = aj.default_costs(aj.get_chip("a2")).replace(mmad_head_cycles=head, flag_latency_cycles=latency)
    return jnp.max(run(case, costs=costs).control.end)


@pytest.mark.slow  # about 30 s; test_timelines_of_a_vmapped_run sweeps a cost in the default run
def test_costs_are_arrays_a_vmap_sweeps_them():
    """The software-sync kernel pays the head once (its mmads stream) and the M -> FIX flag latency once."""
    case = measurement_case(False)
    heads = jnp.array([0.0, 60.0, 100.0])
    swept = jax.vmap(_cycles, in_axes=(None, 0, None))(case, heads, 69.0)
    np.testing.assert_array_equal(np.diff(np.asarray(swept)), np.diff(np.asarray(heads)))
    latencies = jax.vmap(_cycles, in_axes=(None, None, 0))(case, 60.0, jnp.array([0.0, 69.0]))
    assert int(latencies[1] - latencies[0]) >= 69


@pytest.mark.slow  # the default run checks the cycles' gradient in test_cycles_grad (finite differences)
def test_grad_differentiates_the_cycles_by_a_cost():
    """The software-sync kernel pays the head once and the flag latency on three hand-offs of its critical path."""

    def cycles(head, latency):
        costs = aj.default_costs(aj.get_chip("a2")).replace(mmad_head_cycles=head, flag_latency_cycles=latency)
        return run(measurement_case(False), costs=costs).cycles

    d_head, d_latency = jax.grad(cycles, argnums=(0, 1))(60.0, 69.0)
    assert float(d_head) == 1.0 and float(d_latency) == 3.0


def test_timelines_of_a_vmapped_run():
    case = measurement_case(True)

    def go(head):
        return run(case, costs=aj.default_costs(aj.get_chip("a2")).replace(mmad_head_cycles=head))

    result = jax.vmap(go)(jnp.array([60.0, 0.0]))
    first, second = (result.timeline(i).summary()["cycles"] for i in (0, 1))
    assert first - second == 60  # the streaming mmads pay the head once
    with pytest.raises(ValueError, match="pass index="):
        result.timeline()


@pytest.mark.slow  # about 30 s cold; test_cli writes and checks a trace in the default run
def test_perfetto_trace(tmp_path):
    result = run(matmul_case(kernel=matmul_pingpong_kernel))
    path = tmp_path / "trace.json"
    result.timeline().to_perfetto(str(path))
    doc = json.loads(path.read_text())
    slices = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    names = {e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {"M", "MTE1", "MTE2", "FIX"} <= names
    assert any(e["name"].startswith("mmad kernels/matmul.py:") or "matmul.py:" in e["name"] for e in slices)
    flows = [e for e in doc["traceEvents"] if e["ph"] in ("s", "f")]
    assert flows and len(flows) % 2 == 0
    assert doc["otherData"]["cycles"] == pytest.approx(result.report().cycles)
    assert all(e["dur"] >= 0 for e in slices)


def test_timeline_picture(tmp_path):
    pytest.importorskip("matplotlib")
    result = run(measurement_case(True))
    path = tmp_path / "timeline.png"
    result.timeline().plot(str(path))
    assert path.stat().st_size > 10_000 and path.read_bytes()[:4] == b"\x89PNG"


def test_summary_and_report():
    result = run(matmul_case())
    info = result.report().timing
    assert info["bound"] == "MTE2" and 0 < info["cube_peak_fraction"] < 1
    assert result.report().to_dict()["cycles"] == info["cycles"]
    assert "cycles:" in str(result.report())


@settings(max_examples=8, deadline=None)
@given(
    cube=st.floats(1024, 16384),
    mte2=st.floats(8, 256),
    latency=st.floats(0, 3000),
    fix=st.floats(8, 128),
)
def test_no_run_beats_physics(cube, mte2, latency, fix):
    """Whatever the cost table, a run takes at least its cube work at peak and its bytes at each bandwidth."""
    case = matmul_case()
    costs = aj.default_costs(aj.get_chip("a2")).replace(
        # f16, int8, f32, fp8/hif8, int4, MX fp8, MX fp4 (timing.CUBE_*)
        cube_macs_per_cycle=jnp.array([cube, 2 * cube, cube / 4, 2 * cube, 4 * cube, 2 * cube, 4 * cube]),
        mte2_bytes_per_cycle=mte2,
        gm_read_latency_cycles=latency,
        fix_elements_per_cycle=jnp.array([fix, 2 * fix, fix, 2 * fix]),  # f32, f16/bf16, int32, 8-bit
    )
    total = float(_physics_run(case, costs))
    macs = 256**3
    assert total >= macs / cube
    loaded = 2 * 256 * 256 * 2 * 2  # A and B, f16, each read once per output tile row/column
    assert total >= loaded / mte2
    assert total >= 256 * 256 / fix


_physics_jit = {}


def _physics_run(case, costs):
    if "fn" not in _physics_jit:
        _physics_jit["fn"] = jax.jit(lambda c: jnp.max(run(case, costs=c).control.end))
    return _physics_jit["fn"](costs)
