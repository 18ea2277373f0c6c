"""Seed 002's six checks on a run (``explain``), the slot of each cross-core event, and slot-mismatch words."""

import re

import flash_attention as fa
import pytest
from conftest import KERNELS

import ascjax as aj
from ascjax.report import CHECK_NAMES
from ascjax.tools.cli import main

#: a small flash attention: 3 KV tiles of 32 keys, so the stale slot of the twin is overwritten in tile 2
SMALL = dict(half_q=16, tile_kv=32)
SEQ_Q, SEQ_KV, D = 32, 96, 32


def _fa(variant):
    x = fa.inputs(SEQ_Q, SEQ_KV, D, **SMALL)
    params = fa.params(SEQ_Q, SEQ_KV, D, variant=variant, **SMALL)
    return aj.check(fa.flash_attention_kernel, x, {"out": (x["q"].shape, "float16")}, chip="950", params=params)


@pytest.fixture(scope="module")
def fa_ok():
    return _fa("ok")


@pytest.fixture(scope="module")
def fa_stale():
    return _fa("slot_mismatch")


def _case(file, name):
    case = aj.build_case(str(KERNELS / file), name)
    return aj.check(case.kernel, case.inputs, case.outputs, chip=case.chip, params=case.params)


def _marks(explained) -> dict:
    return {c.name: c.ok for c in explained.checks()}


def _events(explained) -> dict:
    """The event table as {(event, core): {column: text}}."""
    lines = str(explained).split("cross-core events:\n", 1)[1].splitlines()
    header = re.split(r"\s{2,}", lines[0].strip())
    rows = {}
    for line in lines[1:]:
        if line.strip().startswith("("):
            break
        row = dict(zip(header, re.split(r"\s{2,}", line.strip())))
        rows[(int(row["event"]), row["core"])] = row
    return rows


def test_a_good_ping_pong_passes_all_six_checks_with_the_slot_of_every_event(fa_ok):
    explained = fa_ok.explain()
    assert _marks(explained) == dict.fromkeys(CHECK_NAMES, True), str(explained)
    rows = _events(explained)
    assert rows[(0, "AIC")]["slots"] == "READY s[0]" and rows[(1, "AIV1")]["slots"] == "READY s[1]"
    # P_READY: P is ready for the cube, and the AIVs are done with the scores and O_t slots (READY = RELEASE)
    assert rows[(2, "AIV0")]["slots"] == "READY p_t[0] / RELEASE s[0] o_t[0]", rows[(2, "AIV0")]
    assert rows[(0, "AIC")]["count"] == "n" and rows[(0, "AIC")]["sets"] == "2"  # tiles 0 and 2 use slot 0


def test_a_wrong_slot_expression_reads_as_a_slot_mismatch_not_a_missing_event(fa_stale, fa_ok):
    marks = _marks(fa_stale.explain())
    assert marks["slot mapping"] is False and marks["pairing"] is True, str(fa_stale.explain())
    check1 = fa_stale.explain().checks()[0].detail
    assert "READY of slot 1 waited on for slot 0" in check1 and "reads `s[0]`" in check1, check1
    race = next(f for f in fa_stale.findings if f.kind is aj.core.Finding.RACE)
    assert "of tile `s[0]`" in race.message
    assert "the read of slot 0 waited on the READY of slot 1" in race.message, race.message
    assert "Fix: the slot expression" in race.message and "set_cross_core(pipe=" not in race.message
    assert not [f for f in fa_ok.findings], fa_ok.findings  # the good twin: nothing to explain away


def test_a_pre_posted_release_counts_n_plus_one():
    explained = _case("pingpong.py", "pingpong_odd").explain()
    rows = _events(explained)
    # slot 0 is used 3 times of 5 tiles: READY 3 and 3; RELEASE 4 sets (one pre-posted) and 4 waits (one final)
    assert rows[(0, "AIV0")]["waits"] == "3" and rows[(0, "AIV0")]["count"] == "n"
    assert rows[(2, "AIV0")]["sets"] == "4" and rows[(2, "AIV0")]["count"] == "n+1"
    assert rows[(2, "AIC")]["waits"] == "4" and rows[(2, "AIC")]["count"] == "n+1"
    assert rows[(2, "AIC")]["slots"] == "RELEASE slots[0]" and rows[(1, "AIC")]["slots"] == "READY slots[1]"
    assert "events 2, 3 are pre-posted" in explained.checks()[3].detail
    assert all(_marks(explained).values())


def test_participants_fail_when_one_aiv_sets_an_intra_block_event_and_counts_fail_on_a_leftover():
    one = _case("vec_cube.py", "vec_cube_one_aiv_sets").explain()
    marks = _marks(one)
    assert marks["participants"] is False and marks["pairing"] is False, str(one)
    assert "INTRA_BLOCK event 2 ran on AIV0 only" in one.checks()[5].detail
    left = _marks(_case("pingpong.py", "pingpong_no_final_release").explain())
    assert left["execution counts"] is False and left["boundary paths"] is False and left["slot mapping"] is True


def test_a_kernel_without_cross_core_events_has_nothing_to_check():
    explained = _case("unit_flag.py", "kloop_f16").explain()
    assert all(c.ok is None for c in explained.checks()) and "cross-core events" not in str(explained)


def test_the_command_line_explains_a_case(capsys):
    assert main(["explain", f"{KERNELS / 'pingpong.py'}::pingpong_one"]) == 0
    out = capsys.readouterr().out
    assert "seed 002's six checks" in out and "slot mapping" in out and "cross-core events:" in out
    assert main(["explain", f"{KERNELS / 'pingpong.py'}::no_such_case"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: cannot explain:"), err


def _cube_only(k, aiv_waits):
    with k.cube():
        k.set_cross_core("FIX", 0)
    if aiv_waits:
        for sub in (0, 1):
            with k.vector(sub):
                k.wait_cross_core("V", 0)


def test_participants_fail_when_no_aiv_takes_part_in_an_event():
    bad = aj.run(_cube_only, {}, {}, chip="a2", params={"aiv_waits": False}, jit=False).explain()
    assert _marks(bad)["participants"] is False, str(bad)
    assert "event 0 ran on the AIC only" in bad.checks()[5].detail
    good = aj.run(_cube_only, {}, {}, chip="a2", params={"aiv_waits": True}, jit=False).explain()
    assert _marks(good)["participants"] is True, str(good)
    assert good.checks()[5].detail == "INTRA_BLOCK: AIV0 and AIV1 on every event"
