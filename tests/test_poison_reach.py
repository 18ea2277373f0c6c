"""How many output elements a race's racy reads can poison, said without ``poison_races``; and the poison itself
survives the cube's saturation (a NaN in L0C is not flushed to 0 on the way out)."""

import numpy as np
import pytest
from conftest import KERNELS

import ascjax as aj


def _run(name, **kw):
    case = aj.build_case(str(KERNELS / "vec_cube.py"), name)
    return aj.run(case.kernel, case.inputs, case.outputs, chip=case.chip, params=case.params, **kw)


#: a vector side fast enough that the AIVs' insert lands before the cube's unsynchronised read (with the default
#: costs the read runs first)
FAST_VECTOR = aj.default_costs(aj.get_chip("a2")).replace(vector_fixed_cycles=0.0)


@pytest.mark.parametrize("jit", [False, True])
def test_the_report_bounds_what_poison_races_turns_nan(jit):
    """The cube skips the READY wait for the AIVs' insert: RAW, whichever of the two ran first."""
    plain = _run("vec_cube_no_wait", jit=jit)
    rep = plain.report()
    assert rep.verdict is aj.Verdict.RACE and "RACE (RAW) on L1" in rep.message.splitlines()[1]
    assert "can poison up to 4,096 of the 4,096 elements of output `out`: run with --poison-races" in rep.poisoned
    assert rep.poisoned in str(rep) and rep.to_dict()["poisoned"] == rep.poisoned
    assert not np.isnan(np.asarray(plain.outputs["out"])).any()  # nothing is poisoned unless asked
    poisoned = _run("vec_cube_no_wait", jit=jit, poison_races=True)
    # the racy L0A copy feeds every element of the 64 x 64 product, through the saturating mmad and fixpipe
    assert int(np.isnan(np.asarray(poisoned.outputs["out"], np.float64)).sum()) == 4096
    # a poisoned run's words say where the NaN are, not how to get them
    assert poisoned.report().poisoned.endswith("elements of output `out`: this run poisoned them, so they are NaN in "
                                               "the outputs")  # fmt: skip
    if not jit:  # the insert landing first reads the same: the label is the missing READY's, not the timing's
        fast = _run("vec_cube_no_wait", costs=FAST_VECTOR).report()
        assert fast.message.splitlines()[1] == rep.message.splitlines()[1] and fast.poisoned == rep.poisoned


def test_a_clean_run_and_a_war_race_poison_nothing():
    assert _run("vec_cube_abs_sqrt_matmul").report().poisoned == ""
    case = aj.build_case(str(KERNELS / "engram.py"), "engram_no_ack_wait")  # a missing RELEASE
    rep = aj.run(case.kernel, case.inputs, case.outputs, chip=case.chip, params=case.params).report()
    assert rep.verdict is aj.Verdict.RACE and "RACE (WAR)" in rep.message.splitlines()[1]
    assert rep.poisoned == "", rep.poisoned  # the reads came first: poison_races has nothing to poison either
