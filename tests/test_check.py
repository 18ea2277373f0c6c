"""``ascjax.check``: a kernel's synchronisation checked by the control plane, every finding in words."""

from __future__ import annotations

import dataclasses
import re

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import phases
from conftest import KERNELS

import ascjax as aj
from ascjax.core import Finding
from ascjax.tools.cli import main


def _check(file, name, **kw):
    case = aj.build_case(str(KERNELS / file), name)
    return aj.check(case.kernel, case.inputs, case.outputs, chip=case.chip, params=case.params, **kw)


def _line(file: str, pattern: str) -> int:
    lines = (KERNELS / file).read_text().splitlines()
    return next(i + 1 for i, text in enumerate(lines) if re.search(pattern, text))


def test_a_deadlock_names_the_stuck_instruction_its_iteration_and_what_it_waits_for():
    found = _check("unit_flag.py", "seed000_error3")
    assert found.verdict is aj.Verdict.DEADLOCK, str(found)
    line = _line("unit_flag.py", r"AccPhase.Final, c_matrix_init_val")
    assert f"mmad at kernels/unit_flag.py:{line} (AIC.M) in loop iteration (1) waits for unit flag = 0" in str(found)


def test_a_unit_flag_deadlock_names_the_blocks_the_last_toucher_and_the_fix_for_each_stuck_pipe():
    text = str(_check("unit_flag.py", "size_mismatch"))
    body = _line("unit_flag.py", r"def size_mismatch_kernel")
    lines = (KERNELS / "unit_flag.py").read_text().splitlines()
    mmad = next(i + 1 for i in range(body, len(lines)) if "k.mmad(" in lines[i])
    fixpipe = next(i + 1 for i in range(len(lines) - 1, body, -1) if "k.fixpipe(" in lines[i] and i < body + 12)
    assert "waits for unit flag = 0 on 96 of L0C blocks 8..127 of tile `ac`" in text  # what the 64 x 64 read left at 1
    assert f"last written by mmad at kernels/unit_flag.py:{mmad} (AIC.M) with ENABLE_UPDATE (AccPhase.Final)" in text
    assert f"fixpipe at kernels/unit_flag.py:{fixpipe} (AIC.FIX) waits for unit flag = 1" in text
    assert "an earlier read already drained these blocks" in text and "STPhase.Final" in text


def test_a_race_of_an_mmad_and_its_read_names_both_phases_and_gives_the_missing_one():
    race = str(_check("phases.py", "seed000_error2").findings[0])
    assert race.startswith("RACE (RAW) on L0C"), race  # on one core the hazard follows program order
    # the write the store wanted: the K loop's last matmul_acc, the one with the phase that closes the chain
    assert "first:  matmul_acc at kernels/phases.py" in race and "in loop iteration (7)" in race, race
    assert "second: store at kernels/phases.py" in race
    assert "the matmul_acc used AccPhase.Final (ENABLE_UPDATE), the store no phase (DISABLE): nothing orders" in race
    assert "Fix: give the store phase=STPhase.Final" in race


def test_a_hang_in_a_phased_kernel_speaks_of_phases_and_says_when_it_hung():
    """Phases given as PyPTO-Pro's AccPhase / STPhase: the words lead with them, and the fix is a phase."""
    partial, final = phases.AccPhase.Partial, phases.STPhase.Final
    c = phases.phase_case(partial, partial, partial, final, expect="deadlock")
    found = aj.check(c.kernel, c.inputs, c.outputs, chip=c.chip, params=c.params)
    text = str(found)
    line = _line("phases.py", r"k.matmul_acc\(ac, ac")
    last = f"matmul_acc at kernels/phases.py:{line} (AIC.M) in loop iteration (7)"
    assert f"{last} with AccPhase.Partial (ENABLE_KEEP), which never sets the flag" in text, text
    assert "Fix: the last matmul_acc on this tile must use phase=AccPhase.Final (ENABLE_UPDATE)" in text, text
    hung = re.search(r"no pipe can go on after (\d+) cycles", text)
    assert hung and int(hung[1]) == int(found.timeline().summary()["cycles"]) > 0, text
    # the Program spelling of the same hang keeps the Ascend C words
    plain = str(_check("unit_flag.py", "seed000_error1"))
    assert "with ENABLE_KEEP (AccPhase.Partial)." in plain and "must use ENABLE_UPDATE (AccPhase.Final)" in plain


def test_every_finding_is_reported_most_severe_first_and_the_good_twin_is_clean():
    found = _check("matmul_softmax.py", "matmul_softmax_no_wait")
    kinds = [f.kind for f in found.findings]
    assert kinds[0] is Finding.RACE and found.verdict is aj.Verdict.RACE
    assert {Finding.LEFTOVER, Finding.UNINITIALIZED} <= set(kinds)  # version 1 stops at the race
    assert kinds == sorted(kinds)
    race = str(found.findings[0])
    # the AIVs skip the READY wait: every vector op on `s` races with the move, and the first names the root cause
    assert "RACE (RAW) on UB@AIV0" in race and "move_to_vec" in race and "row_max" in race
    assert (
        "Fix: set_cross_core(pipe=FIX, event_id=id) on AIC after the move_to_vec and "
        "wait_cross_core(pipe=V, event_id=id) on AIV0 before the row_max"
    ) in race
    good = _check("matmul_softmax.py", "matmul_softmax")
    assert good.verdict is aj.Verdict.OK and not good.findings and str(good).startswith("OK")


def test_findings_past_the_limit_are_counted_in_the_text():
    found = _check("matmul_softmax.py", "matmul_softmax_no_wait")
    assert found.dropped == 0 and "more (raise" not in str(found)
    cut = dataclasses.replace(found, result=eqx.tree_at(lambda r: r.dropped, found.result, jnp.int32(3)))
    assert cut.dropped == 3 and str(cut).endswith("... and 3 more (raise ControlOptions.max_findings)")


def test_the_command_line_prints_the_findings(capsys):
    assert main(["check", str(KERNELS / "unit_flag.py") + "::seed000_error3"]) == 0
    assert capsys.readouterr().out.startswith("DEADLOCK: 1 finding(s)")
    assert main(["check", str(KERNELS / "unit_flag.py") + "::no_such_case"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no_such_case" in err


def _two_signals(acknowledged: bool):
    """The cube signals event 0 twice; each AIV takes both. With ``acknowledged`` each AIV answers the first on
    event 1 and the cube waits for both answers before it sets event 0 again."""

    def kernel(k):
        for sub in (0, 1):
            with k.vector(sub):
                k.wait_cross_core("MTE2", 0)
                if acknowledged:
                    k.set_cross_core("MTE2", 1)
                k.wait_cross_core("MTE2", 0)
        with k.cube():
            k.set_cross_core("FIX", 0)
            if acknowledged:
                k.wait_cross_core("FIX", 1)
            k.set_cross_core("FIX", 0)

    instant = aj.default_costs(aj.get_chip("a2")).replace(cross_core_latency_cycles=0)  # the AIVs take it at once
    return aj.check(kernel, {}, {}, costs=instant)


def test_a_set_not_ordered_after_the_wait_of_the_signal_before_it_is_found_whatever_the_timing():
    """The AIVs take the first signal before the second set here, so no signal is lost on these timings; but
    nothing orders their wait before that set, so on others it is (semantics §8, bit chips)."""
    found = _two_signals(acknowledged=False)
    assert found.verdict is aj.Verdict.SYNC_ERROR
    assert [f.kind for f in found.findings] == [Finding.UNORDERED_SET]
    assert "set_cross_core at tests/test_check.py:" in str(found) and "which took its previous signal" in str(found)
    assert _two_signals(acknowledged=True).verdict is aj.Verdict.OK


def _mmad_then_fixpipe(k_size: int):
    """One mmad with ENABLE_UPDATE of size 32 x ``k_size`` x 32, then a fixpipe that waits for its flag."""
    update = aj.UnitFlagMode.ENABLE_UPDATE

    def kernel(k):
        a1, b1 = k.alloc("L1", (32, 32), "float16"), k.alloc("L1", (32, 32), "float16")
        a, b = k.alloc("L0A", (32, 32), "float16"), k.alloc("L0B", (32, 32), "float16")
        c = k.alloc("L0C", (32, 32), "float32")
        k.copy_gm2l1_nd2nz(a1, "a")
        k.copy_gm2l1_nd2nz(b1, "b")
        k.sync_notify("MTE2", "MTE1", 0)
        k.sync_wait("MTE2", "MTE1", 0)
        k.copy_l12l0a(a, a1)
        k.copy_l12l0b(b, b1, transpose=True)
        k.sync_notify("MTE1", "M", 0)
        k.sync_wait("MTE1", "M", 0)
        k.mmad(c, a, b, 32, k_size, 32, unit_flag_mode=update, c_matrix_init_val=True)
        k.fixpipe("out", c, unit_flag_mode=update)

    x = np.zeros((32, 32), np.float16)
    return aj.check(kernel, {"a": x, "b": x}, {"out": ((32, 32), "float32")})


def test_an_mmad_with_k_0_is_a_no_op_that_sets_no_flag_and_the_deadlock_names_it():
    """By the spec an mmad whose m, k or n is 0 does nothing, its unit flag included: the fixpipe behind it waits
    for a flag nobody sets, and the report names the no-op; with k = 32 the same kernel runs."""
    text = str(_mmad_then_fixpipe(0))
    assert text.startswith("DEADLOCK"), text
    assert "fixpipe at tests/test_check.py:" in text and "waits for unit flag = 1" in text
    assert re.search(r"mmad at tests/test_check.py:\d+ \(AIC.M\) is a no-op \(its m, k or n is 0\)", text), text
    assert _mmad_then_fixpipe(32).verdict is aj.Verdict.OK


def test_a_unit_flag_wait_whose_producer_is_stuck_names_it_and_what_holds_it():
    """The cube never sets QK_READY: the PV matmul behind the stuck P_READY wait never runs, so the move of its
    result waits on a flag no mmad touched. The entry names that matmul and the wait its queue is stuck at, not a
    fix for the flag's modes (which are right)."""
    text = str(_check("flash_attention.py", "no_ready_set"))
    matmul = _line("flash_attention.py", r'pl\.matmul\(t\["o_acc"\]')
    stuck = re.search(rf"matmul at kernels/flash_attention\.py:{matmul} \(AIC\.M\) in loop iteration \(1\) would set "
                      r"them, but it never ran: it is queued behind (sync_wait at kernels/flash_attention\.py:\d+ via "
                      r":\d+ \(AIC\.M\) in loop iteration \(1\))\.", text)  # fmt: skip
    assert stuck, text
    assert f"  {stuck.group(1)} waits for flag MTE1 -> M" in text  # and that wait has an entry of its own
    assert "move_to_vec that produces these blocks" not in text


def _store_of_an_unwritten_tile(k):
    acc = k.alloc("L0C", (16, 16), "float32", name="acc")
    k.set_mmad_direction("n")
    k.store("out", acc, [0, 0], phase=aj.STPhase.Final)


def test_a_read_waiting_on_blocks_no_mmad_wrote_asks_for_the_matmul_that_should():
    text = str(aj.check(_store_of_an_unwritten_tile, {}, {"out": ((16, 16), "float32")}))
    assert "waits for unit flag = 1 on L0C blocks 0..1 of tile `acc`" in text, text
    assert "no mmad or L0C read touched those blocks before it." in text
    assert "Fix: the matmul that produces these blocks must enable the unit flag" in text  # not "the store that"


def test_a_cross_core_set_on_another_pipe_than_the_last_write_is_named_with_its_pipe():
    """Seed 002: the AIVs store to GM on MTE3, then set the event on V. The event is there and the cube waits for it,
    so the words say which pipe the set must be on, not that nothing orders the pair; its good twin sets on MTE3."""
    text = str(_check("seed_rules.py", "xc_set_on_v"))
    set_line = _line("seed_rules.py", r"pl\.system\.set_cross_core\(pipe=set_pipe")
    assert "RACE (RAW) on GM:ws" in text and "first:  copy_ub2gm at kernels/seed_rules.py:" in text, text
    assert f"the set_cross_core at kernels/seed_rules.py:{set_line} (AIV" in text
    assert "but it is set on V, which does not wait for MTE3" in text and "nothing orders them" not in text
    assert "Fix: set_cross_core(pipe=MTE3, event_id=1), on the pipe of the copy_ub2gm (the last write)" in text
    assert _check("seed_rules.py", "xc_set_on_mte3").verdict is aj.Verdict.OK


def test_a_cross_core_set_ordered_after_the_write_by_a_flag_is_not_called_misplaced():
    """In the flash-attention slot mismatch, the set on MTE3 after the AIVs' V work is ordered by their V -> MTE3
    flag: the race is the slot expression, and the words say so."""
    text = str(_check("flash_attention.py", "slot_mismatch"))
    assert "slot mismatch:" in text and "which does not wait for" not in text, text


def test_a_wait_whose_set_this_run_leaves_out_names_that_set_and_the_path():
    """Zero tiles: the drain after the loop waits for a set only the loop's iterations make."""
    text = str(_check("zero_trip.py", "buggy_zero_tiles"))
    notify = _line("zero_trip.py", r"sync_src\(set_pipe=PIPE\.MTE3, wait_pipe=PIPE\.MTE2, event_id=1\)$")  # in the loop
    assert "waits for flag MTE3 -> MTE2 event 1 on AIV0, which no set of this run delivers: sync_notify at " in text
    assert f"kernels/zero_trip.py:{notify} (AIV0.MTE3) in loop iteration (0) would, but this run leaves it out" in text
    assert "pre-post one before the loop" in text


def test_a_read_that_ran_early_in_an_accumulation_is_blamed_on_the_early_final():
    """The first matmul of the K loop with AccPhase.Final sets the flag the store waits for: the store runs after it
    and reads one K step's product. The warning names the matmul that set the flag and the rule, not the order of
    issue (a non-accumulating pair keeps that advice: ``test_data_order``)."""
    case = phases.phase_case(phases.AccPhase.Final, phases.AccPhase.Partial, phases.AccPhase.Partial,
                             phases.STPhase.Final)  # fmt: skip
    r = aj.run(case.kernel, case.inputs, case.outputs, params=case.params, chip=case.chip)
    assert r.ok and not r.device_outputs
    (text,) = [w for w in r.report().warnings if "the outputs are not the device's" in w]
    first = _line("phases.py", r"lambda: k\.matmul\(ac, al, br, phase=first\)")
    assert (
        f"its unit-flag wait took the flag matmul at kernels/phases.py:{first} (AIC.M) in loop iteration (0) set"
        in text
    ), text
    assert "a partial sum" in text and "Only the last matmul of an accumulation may set the flag" in text
    assert "Issue store before" not in text
