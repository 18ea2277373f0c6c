"""Loop summaries: a loop's cycles for any trip count from a few probed ones (``ascjax.summarise_loop``)."""

import calibration as cal
import pytest

import ascjax as aj
from ascjax.tools._loops import periodic


def test_a_linear_loop_has_no_transient_and_one_trip_per_period():
    summary = periodic((110, 210, 310, 410, 510))
    assert (summary.transient, summary.period, summary.cycles_per_period) == (1, 1, 100)
    assert summary.cycles(1_000_000) == 10 + 100 * 1_000_000


def test_a_transient_then_an_alternating_step_is_found_and_extended():
    # a pipeline that fills in two trips, then alternates 30 and 50 cycles per trip (period 2, 80 per period)
    probed = (100, 170, 200, 250, 280, 330, 360, 410)
    summary = periodic(probed)
    assert (summary.transient, summary.period, summary.cycles_per_period) == (2, 2, 80)
    assert [summary.cycles(n) for n in range(1, 9)] == list(probed)
    assert (summary.cycles(9), summary.cycles(10), summary.cycles(11)) == (440, 490, 520)


def test_probes_without_a_period_are_refused_not_guessed():
    with pytest.raises(ValueError, match="show no period repeated 2 times"):
        periodic((1, 2, 4, 8, 16, 32))
    with pytest.raises(ValueError, match="at least 5"):
        aj.summarise_loop(lambda n: n, probe=3)


def _check_cycles(case) -> int:
    return aj.check(case.kernel, case.inputs, case.outputs, params=case.params, chip=case.chip).timeline().cycles


@pytest.mark.parametrize(
    "make",
    [cal.aiv_add_case, pytest.param(lambda pairs: cal.aic_matmul_case(2 * pairs), marks=pytest.mark.slow)],
    ids=["aiv_add_tiles", "aic_matmul_k_step_pairs"],
)
def test_the_summary_equals_stepping_through_the_loop(make):
    summary = aj.summarise_loop(lambda n: _check_cycles(make(n)), probe=6)
    for trips in (9, 12):
        assert summary.cycles(trips) == _check_cycles(make(trips))
    assert summary.cycles_per_trip > 0
