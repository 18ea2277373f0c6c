"""Every case in kernels/ gives the verdict its seed documents, pointing at the right op."""

import re

import numpy as np
import pytest
from conftest import KERNELS

import ascjax as aj

CASES = [(f, n) for f in ("mmad_int8.py", "unit_flag.py") for n in aj.load_cases(str(KERNELS / f))]


def _line_of(file: str, pattern: str, nth: int = 0) -> int:
    lines = (KERNELS / file).read_text().splitlines()
    hits = [i + 1 for i, line in enumerate(lines) if re.search(pattern, line)]
    return hits[nth]


@pytest.mark.parametrize(("file", "name"), CASES)
def test_case_verdict_and_reference(file, name):
    case = aj.build_case(str(KERNELS / file), name)
    result, rep, err = aj.run_case(case)
    assert rep.verdict is case.expect, str(rep)
    if case.reference is not None:
        assert err is not None and err <= case.atol, f"max abs err {err} > {case.atol}"


def test_seed004_is_bit_exact_on_every_chip():
    case = aj.build_case(str(KERNELS / "mmad_int8.py"), "seed004_int8")
    want = case.reference(case.inputs)["output"]
    for chip in ("a2", "a3", "950"):
        result, rep, _ = aj.run_case(case, chip=chip)
        assert rep.verdict is aj.Verdict.OK
        np.testing.assert_array_equal(np.asarray(result.outputs["output"]), want)
        assert result.outputs["output"].dtype == np.int32


def test_error1_points_at_the_store_and_names_final_closing():
    rep = aj.run_case(aj.build_case(str(KERNELS / "unit_flag.py"), "seed000_error1"))[1]
    assert rep.op == "fixpipe"
    line = _line_of("unit_flag.py", r"STPhase.Final\)  # waits for a flag")
    assert rep.location.endswith(f"unit_flag.py:{line}")
    assert f"fixpipe at kernels/unit_flag.py:{line} (AIC.FIX) waits for unit flag = 1" in rep.message
    assert "ENABLE_KEEP" in rep.message and "Final closing" in rep.message


def test_error3_hangs_in_the_second_iteration_matmul():
    rep = aj.run_case(aj.build_case(str(KERNELS / "unit_flag.py"), "seed000_error3"))[1]
    assert rep.op == "mmad"
    line = _line_of("unit_flag.py", r"AccPhase.Final, c_matrix_init_val")
    assert rep.location.endswith(f"unit_flag.py:{line}")
    assert "loop iteration (1)" in rep.message
    assert "waits for unit flag = 0" in rep.message and "STPhase.Final" in rep.message


def test_size_mismatch_names_the_undrained_blocks():
    rep = aj.run_case(aj.build_case(str(KERNELS / "unit_flag.py"), "size_mismatch"))[1]
    assert rep.op == "mmad"
    # 128 x 128 f32 = 128 blocks of 512 B; a 64 x 64 drain clears 4 column fractals x 8 half-fractals = 32
    assert "waits for unit flag = 0 on 96 of L0C blocks 8..127" in rep.message
    assert "set_l0c_copy_config(is_clean_unit_flag=True)" in rep.message


@pytest.mark.slow  # jit vs eager is also checked per op family (test_vector_ops, test_fixpipe_quant)
def test_jit_and_op_by_op_agree():
    case = aj.build_case(str(KERNELS / "unit_flag.py"), "split_n")
    jitted = aj.run(case.kernel, case.inputs, case.outputs, params=case.params)
    eager = aj.run(case.kernel, case.inputs, case.outputs, params=case.params, jit=False)
    np.testing.assert_array_equal(np.asarray(jitted.outputs["c"]), np.asarray(eager.outputs["c"]))
    assert int(jitted.verdict) == int(eager.verdict) == aj.Verdict.OK
    bad = aj.build_case(str(KERNELS / "unit_flag.py"), "seed000_error3")
    r1 = aj.run(bad.kernel, bad.inputs, bad.outputs, jit=True).report()
    r2 = aj.run(bad.kernel, bad.inputs, bad.outputs, jit=False).report()
    assert r1.message == r2.message and r1.verdict is aj.Verdict.DEADLOCK


def test_throw_raises_the_typed_error_with_the_same_message():
    case = aj.build_case(str(KERNELS / "unit_flag.py"), "seed000_error1")
    quiet = aj.run(case.kernel, case.inputs, case.outputs)
    with pytest.raises(aj.DeadlockError) as info:
        aj.run(case.kernel, case.inputs, case.outputs, throw=True)
    assert str(info.value) == str(quiet.report())
    good = aj.build_case(str(KERNELS / "unit_flag.py"), "single_matmul_sync")
    aj.run(good.kernel, good.inputs, good.outputs, throw=True)  # no error
