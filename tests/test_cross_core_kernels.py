"""The seed-002 kernels (cube <-> vector) and their broken twins: verdicts, outputs and event counts."""

import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ascjax as aj
from ascjax.report._event_table import event_rows

KERNELS = pathlib.Path(__file__).resolve().parent.parent / "kernels"
FILES = ["matmul_softmax.py", "vec_cube.py", "engram.py", "kda.py"]
# the larger kernels compile for tens of seconds each: their twins run in the slow session (nox -s slow)
# (CI runs matmul_softmax, vec_cube and their twins but matmul_softmax_no_set and vec_cube_abs_sqrt_matmul; engram
# and KDA run in the slow session, and the control plane's and the data plane's corpus tests run every case there too)
SLOW = {
    "engram",
    "engram_sections",  # tens of seconds cold; the data plane's and the control plane's corpus tests run it too
    "matmul_softmax_no_set",
    "vec_cube_one_aiv_sets",  # INTRA_BLOCK needing both AIVs: tests/test_cross_core.py
    "vec_cube_abs_sqrt_matmul",  # tens of seconds cold; the two planes' twin test runs it against NumPy
    "engram_no_cold_start",
    "engram_no_ack_wait",
    "engram_no_drain",
    "engram_sections_no_cold_start",  # its report is checked below (slow too)
    "engram_sections_no_ack_wait",
    "engram_sections_no_drain",
    "kda_chunk_h",
    "kda_shared_id",
    "kda_sections",
    "kda_sections_shared_id",
}
CASES = [
    pytest.param(f, name, id=f"{f}::{name}", marks=[pytest.mark.slow] if name in SLOW else [])
    for f in FILES
    for name in aj.load_cases(str(KERNELS / f))
]


@pytest.mark.parametrize(("file", "name"), CASES)
def test_case_verdict_and_reference(file, name):
    case = aj.build_case(str(KERNELS / file), name)
    result, rep, err = aj.run_case(case)
    assert rep.verdict is case.expect, str(rep)
    if case.expect is aj.Verdict.OK:
        assert err is not None and err <= case.atol, err
        assert not rep.warnings, rep.warnings
    else:
        assert rep.location and rep.location.startswith("kernels/"), rep.location


def _pingpong():
    return aj.load_cases(str(KERNELS / "pingpong.py")), __import__("ascjax_kernel_pingpong")


@pytest.mark.slow  # the two-section form runs in CI (tests/test_sections.py)
def test_pingpong_trip_counts_in_one_vmap():
    """0, 1, even and odd trip counts: one compiled kernel, every scenario ok with the right outputs."""
    _, mod = _pingpong()
    inputs = mod.inputs()
    counts = jnp.array([0, 1, 4, 5], jnp.int32)

    def one(n):
        return aj.run(mod.pingpong_kernel, inputs, {"out": ((mod.N_MAX * mod.ROWS, mod.D), "float32")}, chip="950",
                      params={"n": n})  # fmt: skip

    result = jax.vmap(one)(counts)
    assert np.all(np.asarray(result.verdict) == aj.Verdict.OK)
    for i, n in enumerate(np.asarray(counts)):
        np.testing.assert_allclose(
            np.asarray(result.outputs["out"][i]), mod.reference(inputs, int(n))["out"], atol=1e-4
        )
        checked = result.checked(i)
        rows = event_rows(checked.record, checked.result)  # {(event id, core): sets, waits, ...}

        def count(event, core, side, rows=rows):
            return rows.get((event, core), {}).get(side, 0)

        uses = [(int(n) + 1) // 2, int(n) // 2]  # slot 0 on even tiles, slot 1 on odd ones
        for slot, used in enumerate(uses):
            release = mod.RELEASE[slot]
            # seed 002: a slot used n times has n + 1 RELEASE sets (per AIV) and n + 1 RELEASE waits (cube)
            assert count(release, 1, "sets") == count(release, 2, "sets") == used + 1
            assert count(release, 0, "waits") == used + 1
            assert count(mod.READY[slot], 0, "sets") == used == count(mod.READY[slot], 1, "waits")


@pytest.mark.slow
def test_pingpong_twin_without_final_release_is_leftover():
    cases, _ = _pingpong()
    case = cases["pingpong_no_final_release"]()
    _, rep, _ = aj.run_case(case)
    assert rep.verdict is aj.Verdict.LEFTOVER
    assert "cross-core event 2" in rep.message and "wait for it on the receiver" in rep.message


@pytest.mark.slow  # compiles the two-section engram kernel once more (tens of seconds): nox -s slow
def test_engram_cold_start_report_names_the_missing_ack():
    case = aj.build_case(str(KERNELS / "engram.py"), "engram_sections_no_cold_start")
    _, rep, _ = aj.run_case(case)
    assert rep.verdict is aj.Verdict.DEADLOCK
    assert "wait_cross_core at kernels/engram.py:64 (AIC.FIX) in loop iteration (0) waits for cross-core event 2" in (
        rep.message
    )
    assert "a wait cycle between the cores" in rep.message


@pytest.mark.slow
def test_engram_on_a2_wait_blocks_the_whole_cube():
    """On A2/A3 the cross-core wait holds every pipe of the cube: its MTE2 stops in iteration 1, where on 950 (the
    wait holds FIX only) it runs ahead to iteration 3."""
    case = aj.build_case(str(KERNELS / "engram.py"), "engram_no_cold_start")
    _, rep950, _ = aj.run_case(case)
    _, rep_a2, _ = aj.run_case(case, chip="a2")
    assert rep950.verdict is rep_a2.verdict is aj.Verdict.DEADLOCK
    assert "(AIC.MTE2) in loop iteration (3) waits" in rep950.message
    assert "(AIC.MTE2) in loop iteration (1) waits" in rep_a2.message
