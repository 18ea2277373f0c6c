"""The cycle timing model: the published unit-flag measurement, overlap, sweeps, bounds, traces and pictures."""

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
from ascjax import trace
from ascjax.ops.unit_flag import tile_blocks

PUBLISHED_THEORETICAL, PUBLISHED_WITH_UF, PUBLISHED_WITHOUT_UF = 4156, 4209, 4225


def run(case, **kw):
    return aj.run(case.kernel, case.inputs, case.outputs, params=case.params, chip=case.chip, **kw)


def _mmad_events(result):
    return [e for e in trace.events(result.state) if e["op"] == "mmad"]


def test_published_unit_flag_measurement_within_2_percent():
    # with the unit flag: the whole result is readable by FIX when the last fractal's flag flips
    uf = run(measurement_case(True, drain=False), max_events=64)
    mmads = _mmad_events(uf)
    first = mmads[0]["start"]
    busy = mmads[-1]["end"] - first
    ac = next(t for t in uf.state.tiles if t.name == "ac")
    handoff = float(jnp.max(uf.state.time.uf_t[tile_blocks(ac, uf.state.chip).reshape(-1)]))
    handoff += float(uf.state.costs.unit_flag_latency_cycles) - first
    # with software sync: the fixpipe starts when M -> FIX sync lets it
    sw = run(measurement_case(False), max_events=64)
    first_sw = _mmad_events(sw)[0]["start"]
    fix = next(e for e in trace.events(sw.state) if e["op"] == "fixpipe")
    assert busy == PUBLISHED_THEORETICAL  # 8 x (128*256*64 / 4096) + a 60-cycle head
    assert abs(handoff - PUBLISHED_WITH_UF) / PUBLISHED_WITH_UF < 0.02
    assert abs((fix["start"] - first_sw) - PUBLISHED_WITHOUT_UF) / PUBLISHED_WITHOUT_UF < 0.02


def test_unit_flag_overlaps_the_drain_and_direction_matters():
    with_uf = run(measurement_case(True)).report().cycles
    software = run(measurement_case(False)).report().cycles
    wrong_direction = run(measurement_case(True, direction="m"))
    # the fixpipe drains the fractals of the last mmad while it computes the others
    assert software - with_uf > PUBLISHED_WITHOUT_UF - PUBLISHED_WITH_UF
    assert with_uf < wrong_direction.report().cycles <= software
    assert "set_mmad_direction('n')" in wrong_direction.report().warnings[0]


@pytest.mark.slow  # benchmarks/ measure the ping-pong kernel too
def test_ping_pong_is_faster_by_the_overlap():
    single = run(matmul_case()).report().timing
    double = run(matmul_case(kernel=matmul_pingpong_kernel)).report().timing
    mte2_single, mte2_double = single["pipes"]["AIC.MTE2"], double["pipes"]["AIC.MTE2"]
    assert mte2_single["busy_cycles"] == mte2_double["busy_cycles"]  # the same bytes
    # single-buffered, MTE2 waits every step for MTE1 to free L1; double-buffered it hardly waits
    steps = 8
    mte1_step = single["pipes"]["AIC.MTE1"]["busy_cycles"] / steps
    assert mte2_single["stall_cycles"] >= (steps - 2) * mte1_step
    assert mte2_double["stall_cycles"] < 0.25 * mte2_single["stall_cycles"]
    assert single["cycles"] - double["cycles"] >= mte2_single["stall_cycles"] - mte2_double["stall_cycles"] - 1000
    assert double["cycles"] < 0.95 * single["cycles"] and single["bound"] == double["bound"] == "MTE2"


def test_costs_are_arrays_a_vmap_sweeps_and_grad_differentiates():
    case = measurement_case(False)
    base = aj.timing.default_costs(aj.get_chip("a2"))

    def cycles(head, latency):
        costs = base.replace(mmad_head_cycles=head, flag_latency_cycles=latency)
        state = run(case, costs=costs).state
        return jnp.max(state.time.pipe_t)

    heads = jnp.array([0.0, 60.0, 100.0])
    swept = jax.vmap(cycles, in_axes=(0, None))(heads, 69.0)
    np.testing.assert_allclose(np.diff(np.asarray(swept)), np.diff(np.asarray(heads)))
    d_head, d_latency = jax.grad(cycles, argnums=(0, 1))(60.0, 69.0)
    assert float(d_head) == 1.0 and float(d_latency) >= 2.0  # two syncs on the critical path


@pytest.mark.slow  # version 1's event buffer (tens of seconds cold); the control plane's timeline: test_timeline.py
def test_events_are_fixed_shape_and_work_under_vmap():
    case = measurement_case(True)

    def go(head):
        return run(case, max_events=32, costs=aj.timing.default_costs(aj.get_chip("a2")).replace(mmad_head_cycles=head))

    result = jax.vmap(go)(jnp.array([60.0, 0.0]))
    assert result.state.time.ev_start.shape == (2, 32)
    assert len(trace.events(result.state, 0)) == int(result.state.time.ev_count[0])
    assert trace.summary(result.state, 0)["cycles"] - trace.summary(result.state, 1)["cycles"] == 60


def test_truncated_trace_is_reported():
    result = run(measurement_case(True), max_events=4)
    info = trace.summary(result.state)
    assert info["events"] > info["events_kept"] == 4


@pytest.mark.slow  # about 30 s cold; test_cli writes and checks a trace in the default run
def test_perfetto_trace(tmp_path):
    result = run(matmul_case(kernel=matmul_pingpong_kernel), max_events=512)
    path = tmp_path / "trace.json"
    trace.to_perfetto(result.state, str(path))
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
    result = run(measurement_case(True), max_events=64)
    path = tmp_path / "timeline.png"
    trace.plot_timeline(result.state, str(path))
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
    costs = aj.timing.default_costs(aj.get_chip("a2")).replace(
        # f16, int8, f32, fp8/hif8, int4, MX fp8, MX fp4 (timing.CUBE_*)
        cube_macs_per_cycle=jnp.array([cube, 2 * cube, cube / 4, 2 * cube, 4 * cube, 2 * cube, 4 * cube]),
        mte2_bytes_per_cycle=mte2,
        gm_read_latency_cycles=latency,
        fix_elements_per_cycle=jnp.array([fix, 2 * fix, fix, 2 * fix]),  # f32, f16/bf16, int32, 8-bit
    )
    state = _physics_run(case, costs)
    total = float(jnp.max(state.time.pipe_t))
    macs = 256**3
    assert total >= macs / cube
    loaded = 2 * 256 * 256 * 2 * 2  # A and B, f16, each read once per output tile row/column
    assert total >= loaded / mte2
    assert total >= 256 * 256 / fix


_physics_jit = {}


def _physics_run(case, costs):
    if "fn" not in _physics_jit:
        _physics_jit["fn"] = jax.jit(lambda c: run(case, costs=c).state)
    return _physics_jit["fn"](costs)
