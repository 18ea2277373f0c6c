"""kernels/seed_rules.py: each seed rule case gives its documented verdict, or is refused while tracing."""

import pytest
from conftest import KERNELS

import ascjax as aj

FILE = str(KERNELS / "seed_rules.py")
REFUSED = {  # rule -> words of the trace-time error
    "mmad_c_misaligned": "align",
    "l0c_256k_on_a2": "L0C",
    "mmad_hifloat8_on_a2": "hifloat8",
    "mmad_gemv_fractal_a": "GEMV",
    "mmad_on_aiv": "AIC",
    "xc_inter_block": "INTER_BLOCK",
    "xc_event_id_16": "16",
}
CASES = aj.load_cases(FILE)

pytestmark = pytest.mark.slow  # twenty small compiles: the docs' seed pages run them too


@pytest.mark.parametrize("name", CASES)
def test_seed_rule(name):
    case = aj.build_case(FILE, name)
    if name in REFUSED:
        with pytest.raises(ValueError, match=REFUSED[name]):
            aj.run_case(case)
        return
    _, rep, err = aj.run_case(case)
    assert rep.verdict is case.expect, str(rep)
    if case.reference is not None:
        assert err is not None and err <= case.atol, f"max abs err {err} > {case.atol}"


def test_every_refused_rule_is_a_case():
    assert set(REFUSED) <= set(CASES)
