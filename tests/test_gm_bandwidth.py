"""The chip's GM bandwidth, shared by the cores of a launch (``runner._bandwidth``)."""

import math

import calibration as cal
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ascjax as aj
from ascjax.report import summary_text
from ascjax.runner._bandwidth import block_offsets, gm_contention, gm_window, slow_gm

COSTS = aj.default_costs(aj.get_chip("a2"))
BANDWIDTH = float(COSTS.gm_bytes_per_cycle)


def test_blocks_past_the_ai_cores_start_after_that_cores_earlier_blocks():
    np.testing.assert_array_equal(block_offsets(np.array([10, 20, 30, 40, 50]), 2), [0, 0, 10, 20, 40])
    np.testing.assert_array_equal(block_offsets(np.array([[5, 7, 9]]), 24), [[0, 0, 0]])


def test_the_gm_window_runs_from_the_first_request_to_the_last_leaving_its_pipe():
    starts = np.array([[0, 4, -1], [2, 6, 8]])  # block 1, instance 2: no GM bytes; block 0, instance 2: never ran
    leaves = np.array([[4, 8, -1], [6, 10, 9]])
    gm_bytes = np.array([[128, 128, 128], [128, 128, 0]])
    moved, window = gm_window(starts, leaves, gm_bytes, np.array([20, 20]), 24)
    assert (float(moved), float(window)) == (512.0, 10.0)
    moved, window = gm_window(starts, leaves, gm_bytes, np.array([20, 20]), 1)  # one core: block 1 starts at 20
    assert (float(moved), float(window)) == (512.0, 30.0)


def test_contention_is_the_bandwidth_asked_for_over_the_chips_and_never_under_one():
    starts, leaves, gm_bytes = np.array([[0]]), np.array([[100]]), np.array([[160_000]])
    assert float(gm_contention(starts, leaves, gm_bytes, np.array([100]), 24, 800.0)) == 2.0
    assert float(gm_contention(starts, leaves, gm_bytes, np.array([100]), 24, 3200.0)) == 1.0


def test_slow_gm_lengthens_the_transfer_and_keeps_the_flight():
    ops = {"cycles": np.array([[192, 10]]), "flight_cycles": np.array([[188, 0]]), "gm_bytes": np.array([[128, 0]])}
    out = slow_gm(ops, 1.9)
    np.testing.assert_array_equal(out["cycles"], [[188 + 8, 10]])  # 4 x 1.9 = 7.6 -> 8 whole cycles; on chip: as is


def _launch(block_dim: int, copies: int):
    case = cal.aiv_small_copies_case(copies)
    return aj.launch(case.kernel, case.inputs, case.outputs, block_dim=block_dim, params=case.params, chip="a2")


def _copy_transfer(result) -> set:
    t = result.records.template
    ops = {k: np.asarray(result.records.operands[k])[0] for k in ("cycles", "flight_cycles")}
    return {
        int(c - f) for e, c, f in zip(t.entry, ops["cycles"], ops["flight_cycles"]) if t.entries[e][0] == "copy_gm2ub"
    }


@pytest.mark.parametrize("block_dim", [1, 24])
def test_48_aivs_streaming_small_copies_share_the_chips_gm_bandwidth(block_dim):
    """24 blocks x 2 AIVs streaming 128-byte copies ask for 48 x 32 B/cycle, 1.9 times the chip's 811: each copy
    takes 8 cycles, not 4. One block's two AIVs ask for 64 B/cycle and keep their own rate."""
    result = _launch(block_dim, 2)
    asked = 2 * block_dim * float(COSTS.mte2_bytes_per_cycle)
    own = 128 / float(COSTS.mte2_bytes_per_cycle)
    if block_dim == 1:
        assert float(result.gm_contention) == 1.0 and _copy_transfer(result) == {own}
    else:
        assert float(result.gm_contention) == pytest.approx(asked / BANDWIDTH, rel=1e-6)
        assert _copy_transfer(result) == {math.ceil(own * asked / BANDWIDTH)} == {8}
    timing = result.report().timing
    assert timing["gm_bytes"] == 2 * block_dim * 2 * 128
    assert timing["gm_contention"] == pytest.approx(float(result.gm_contention))
    gm_line = next(line for line in summary_text(timing).splitlines() if line.startswith("  GM "))
    assert f"asked for {float(result.gm_contention):.2f} x it" in gm_line


def test_a_launch_traced_whole_reruns_only_the_contended_scenarios_as_a_concrete_launch_does():
    """Costs traced inside a ``jit`` (one program: records, control planes, data planes): the rerun at the shared
    bandwidth is the second pass of one loop, taken per scenario; an eager ``vmap`` reruns a scenario's blocks on the
    host as a concrete launch does. Four blocks' 8 AIVs ask for 256 B/cycle: at 64 B/cycle they are
    contended, at 640 they are not. Each scenario gets the contention, the copies' cycles, the launch's cycles and
    verdict of a concrete launch with its costs (whose rerun runs each block's control plane as it first ran)."""
    case = cal.aiv_small_copies_case(2)
    bandwidths = np.array([64, 640], np.float32)

    def launch(bandwidth):
        costs = eqx.tree_at(lambda c: c.gm_bytes_per_cycle, COSTS, bandwidth)
        return aj.launch(case.kernel, case.inputs, case.outputs, block_dim=4, params=case.params, chip="a2",
                         costs=costs)  # fmt: skip

    traced = jax.jit(jax.vmap(launch))(jnp.asarray(bandwidths))
    eager = jax.vmap(launch)(jnp.asarray(bandwidths))  # each scenario's control planes on the host, then rerun
    for s, bandwidth in enumerate(bandwidths):
        one = launch(bandwidth)
        for swept in (traced, eager):
            assert float(swept.gm_contention[s]) == float(one.gm_contention)
            assert (
                int(swept.cycles[s]) == int(one.cycles) and int(swept.verdict[s]) == int(one.verdict) == aj.Verdict.OK
            )
            cycles = np.asarray(swept.records.operands["cycles"][s])
            np.testing.assert_array_equal(cycles, np.asarray(one.records.operands["cycles"]))
    assert float(traced.gm_contention[0]) == 4.0 and float(traced.gm_contention[1]) == 1.0
    assert _copy_transfer(launch(bandwidths[0])) == {4 * 128 / float(COSTS.mte2_bytes_per_cycle)}


@pytest.mark.slow  # the inputs vmapped: the blocks' control planes rerun on the host, their data planes vmapped
def test_a_vmapped_launch_prices_the_contention_as_one_launch_does():
    """Under ``vmap`` the rerun is a branch taken per scenario: the same contention and cycles as one launch."""
    case = cal.aiv_small_copies_case(2)
    one = _launch(24, 2)
    xs = np.stack([case.inputs["x"], case.inputs["x"] + 1])
    batch = jax.vmap(
        lambda x: aj.launch(case.kernel, {"x": x}, case.outputs, block_dim=24, params=case.params, chip="a2")
    )(xs)
    np.testing.assert_allclose(np.asarray(batch.gm_contention), [float(one.gm_contention)] * 2)
    np.testing.assert_array_equal(np.asarray(batch.cycles), [int(one.cycles)] * 2)
