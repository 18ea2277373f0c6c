"""Every kernel in kernels/, recorded by its front end (a dry run) and checked by the control plane (semantics §8,
``ascjax.check``), gives the verdict its case documents.

The cases where semantics §8 gives another verdict than version 1's issue-order engine are listed with the
reason; so are the cases refused while they are traced (the dry run computes no data, but runs each data
function abstractly, so its trace-time rules raise as in ``run``).
"""

from __future__ import annotations

import jax
import numpy as np
import pytest
from conftest import KERNELS, REFUSED_WHILE_TRACING

import ascjax as aj
from ascjax.core import Finding
from ascjax.engine import verdict

UPDATE = aj.UnitFlagMode.ENABLE_UPDATE

#: refused while tracing: the refusal is the case's verdict, and it comes from the data functions
REFUSED = REFUSED_WHILE_TRACING
#: a few cases of different kinds in the default suite; the rest are marked slow
QUICK = {("unit_flag.py", "size_mismatch"), ("flash_attention.py", "f16_s187_d64")}


def _cases():
    for path in sorted(KERNELS.glob("*.py")):
        for name in aj.load_cases(str(path)):
            key = (path.name, name)
            if key in REFUSED:
                continue
            marks = [] if key in QUICK else [pytest.mark.slow]
            yield pytest.param(*key, marks=marks, id=f"{path.stem}-{name}")


def control_verdict(kernel, inputs, outputs, *, chip="a2", params=None) -> aj.Verdict:
    """The verdict the control plane gives the kernel's record (``ascjax.check``), and the engine's own code for it."""
    found = aj.check(kernel, inputs, outputs, chip=chip, params=params)
    code = int(np.asarray(verdict(found.result)))
    assert found.verdict is (aj.Verdict.OK if code < 0 else aj.Verdict[Finding(code).verdict])
    return found.verdict


@pytest.mark.parametrize(("file", "name"), list(_cases()))
def test_the_recorded_kernel_gives_its_cases_verdict(file, name):
    case = aj.build_case(str(KERNELS / file), name)
    want = case.expect
    assert control_verdict(case.kernel, case.inputs, case.outputs, chip=case.chip, params=case.params) is want


def test_the_refused_cases_are_refused_while_tracing_and_by_the_dry_run_too():
    """The list above stays true: each of these kernels raises before anything runs, in ``run`` and in ``check``
    alike, with the same words."""
    for file, name in sorted(REFUSED):
        case = aj.build_case(str(KERNELS / file), name)
        with pytest.raises((ValueError, TypeError)) as traced:
            jax.eval_shape(
                lambda c=case: aj.run(c.kernel, c.inputs, c.outputs, chip=c.chip, params=c.params, jit=False).outputs
            )
        with pytest.raises(type(traced.value)) as dry:
            aj.check(case.kernel, case.inputs, case.outputs, chip=case.chip, params=case.params)
        assert str(dry.value) == str(traced.value), (name, str(dry.value))


@pytest.mark.parametrize(("barrier", "want"), [(True, aj.Verdict.OK), (False, aj.Verdict.DEADLOCK)])
def test_a_unit_flag_reset_without_a_barrier_may_run_before_the_drain(barrier, want):
    """Semantics §8: the reset runs on S, ordered after queued M and FIX work only by a barrier."""
    case = aj.build_case(str(KERNELS / "unit_flag.py"), "size_mismatch_reset")
    params = {**case.params, "barrier": barrier}
    assert control_verdict(case.kernel, case.inputs, case.outputs, params=params) is want
