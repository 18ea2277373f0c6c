"""``set_cross_core`` / ``wait_cross_core`` (seed 002): routing per sync_mode, counts, misuse, the chip's
blocking rule, races they prevent, the event table and pipe warnings. Every bad program beside its twin.

The cores and the pipes of a core run concurrently (semantics §8, decoupled issue): the program text
order of ``with k.cube()`` / ``with k.vector(i)`` sections orders nothing, only events do. Every finding
is reported, most severe first.

Most kernels are tiny and vector-only: they run eagerly (``jit=False``), which after the first one
costs a fraction of a compilation each.
"""

import functools
import inspect
import os
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ascjax as aj
from ascjax import AccPhase, AccToVecMode, STPhase, SyncMode
from ascjax.core import Finding

INTRA, UNICAST, SUB, INTER = SyncMode.INTRA_BLOCK, SyncMode.UNICAST_BLOCK, SyncMode.INTER_SUBBLOCK, SyncMode.INTER_BLOCK
V = aj.Verdict


def run(kernel, chip="a2", inputs=None, outputs=None, **params):
    return aj.run(kernel, inputs or {}, outputs or {}, chip=chip, params=params, jit=False)


def rep_of(kernel, chip="a2", **params):
    return run(kernel, chip, **params).report()


def at(fn, text, nth=0) -> str:
    """``file:line`` as a finding names it (relative to the working directory) of the ``nth`` line of ``fn``'s
    source holding ``text``."""
    lines, first = inspect.getsourcelines(fn)
    rel = os.path.relpath(__file__)
    path = os.path.abspath(__file__) if rel.startswith("..") else rel
    return f"{path}:{first + [i for i, line in enumerate(lines) if text in line][nth]}"


def events(rep) -> dict:
    """The event table as {(event, core): {column: text}}."""
    lines = rep.events.splitlines()
    assert lines[0] == "cross-core events:"
    header = re.split(r"\s{2,}", lines[1].strip())
    table = {}
    for line in lines[2:]:
        cells = re.split(r"\s{2,}", line.strip())
        row = dict(zip(header, cells))
        table[(int(row["event"]), row["core"])] = row
    return table


# --- INTRA_BLOCK: a cube set reaches both AIVs --------------------------------------------------
def _cube_set_aivs_wait(k, extra_wait):
    with k.cube():
        k.set_cross_core("FIX", 0)
    for sub in (0, 1):
        with k.vector(sub):
            k.wait_cross_core("V", 0)
    if extra_wait:
        with k.vector(0):
            k.wait_cross_core("V", 0)


def test_intra_block_cube_set_reaches_both_aivs():
    rep = rep_of(_cube_set_aivs_wait, extra_wait=False)
    assert rep.verdict is V.OK, rep.message
    table = events(rep)
    assert set(table) == {(0, "AIC"), (0, "AIV0"), (0, "AIV1")}
    aic = table[(0, "AIC")]
    assert (aic["sets"], aic["waits"], aic["set pipes"], aic["wait pipes"]) == ("1", "0", "FIX", "-")
    assert aic["modes"] == "INTRA_BLOCK" and aic["signals left"] == "0"
    for core in ("AIV0", "AIV1"):
        row = table[(0, core)]
        assert (row["sets"], row["waits"], row["set pipes"], row["wait pipes"]) == ("0", "1", "-", "V")
        assert row["signals left"] == "0"


def test_a_third_wait_on_one_cube_set_deadlocks():
    rep = rep_of(_cube_set_aivs_wait, extra_wait=True)
    assert rep.verdict is V.DEADLOCK
    third = at(_cube_set_aivs_wait, 'k.wait_cross_core("V", 0)', nth=1)
    assert rep.op == "wait_cross_core" and rep.location == third
    assert f"{third} (AIV0.V) waits for cross-core event 0 (INTRA_BLOCK) from AIC" in rep.message
    assert "AIC set event 0 1 time(s) for it and every signal was taken by an earlier wait" in rep.message
    assert "(AIV1.V)" not in rep.message  # AIV1 consumed its own signal


# --- INTRA_BLOCK: a cube wait needs both AIVs ---------------------------------------------------
def _aivs_set_cube_waits(k, setters):
    for sub in setters:
        with k.vector(sub):
            k.set_cross_core("MTE3", 1)
    with k.cube():
        k.wait_cross_core("MTE1", 1)


def test_cube_intra_block_wait_needs_both_aivs():
    good = rep_of(_aivs_set_cube_waits, setters=(0, 1))
    assert good.verdict is V.OK, good.message
    assert events(good)[(1, "AIC")]["waits"] == "1"
    bad = rep_of(_aivs_set_cube_waits, setters=(0,))
    assert bad.verdict is V.DEADLOCK
    wait = at(_aivs_set_cube_waits, "wait_cross_core")
    assert f"{wait} (AIC.MTE1) waits for cross-core event 1 (INTRA_BLOCK) from AIV0 and AIV1" in bad.message
    assert "a cube wait needs a set from each of the two AIVs" in bad.message
    assert "AIV1 never ran set_cross_core(event_id=1)" in bad.message
    assert "AIV0 never ran" not in bad.message
    assert events(bad)[(1, "AIC")]["signals left"] == "1 (to be consumed here)"  # AIV0's signal waits for AIV1's


def test_cube_intra_block_deadlock_does_not_blame_the_aiv_that_did_set():
    """AIV0's signal is pending at the cube (the table says so): the words must not say it was consumed."""
    bad = rep_of(_aivs_set_cube_waits, setters=(0,))
    assert "AIV1 never ran set_cross_core(event_id=1)" in bad.message
    assert "AIV0 set event 1 1 time(s) and every signal was taken by an earlier wait" not in bad.message


# --- UNICAST_BLOCK (950 only) ------------------------------------------------------------------
def _unicast(k, waiter):
    with k.cube():
        k.set_cross_core("FIX", 2, UNICAST, peer=1)
    with k.vector(waiter):
        k.wait_cross_core("V", 2, UNICAST)
    with k.vector(1):
        k.set_cross_core("MTE3", 3, UNICAST)
    with k.cube():
        k.wait_cross_core("MTE1", 3, UNICAST, peer=1)


def test_unicast_block_pairs_the_cube_with_one_aiv_on_950():
    good = rep_of(_unicast, "950", waiter=1)
    assert good.verdict is V.OK, good.message
    table = events(good)
    assert table[(2, "AIC")]["modes"] == "UNICAST_BLOCK" and table[(2, "AIV1")]["waits"] == "1"
    assert (2, "AIV0") not in table and table[(3, "AIC")]["waits"] == "1"
    bad = rep_of(_unicast, "950", waiter=0)  # the set went to AIV1 only
    assert bad.verdict is V.DEADLOCK
    wait = at(_unicast, 'k.wait_cross_core("V", 2')
    assert f"{wait} (AIV0.V) waits for cross-core event 2 (UNICAST_BLOCK) from AIC" in bad.message
    assert events(bad)[(2, "AIV1")]["signals left"] == "1 (to be consumed here)"


def test_unicast_deadlock_says_where_the_set_went():
    """The cube's UNICAST set reached AIV1 (peer=1), which still holds it: AIV0's wait never had a signal."""
    bad = rep_of(_unicast, "950", waiter=0)
    assert "every signal was taken by an earlier wait" not in bad.message
    assert "AIV1" in bad.message


def test_unicast_block_is_950_only_and_a_cube_unicast_names_its_aiv():
    with pytest.raises(ValueError, match=r"rule 'UNICAST_BLOCK'.*chip a2 supports .*950 only"):
        run(_unicast, "a2", waiter=1)

    def no_peer(k):
        with k.cube():
            k.set_cross_core("FIX", 2, UNICAST)

    with pytest.raises(ValueError, match=r"rule 'UNICAST_BLOCK'.*peer=0 or peer=1"):
        run(no_peer, "950")

    def peer_on_intra(k):
        with k.cube():
            k.set_cross_core("FIX", 2, INTRA, peer=0)

    with pytest.raises(ValueError, match=r"peer= only applies to a cube UNICAST_BLOCK"):
        run(peer_on_intra, "950")


# --- INTER_SUBBLOCK: a barrier between AIV0 and AIV1 ----------------------------------------------
def _subblock(k, setters, barrier=True):
    """AIV0 writes GM ``t``; both AIVs meet at barrier 5 (each AIV in ``setters`` sets it); AIV1 copies ``t``."""
    ub = k.alloc("UB", (8, 16), "float32", name="ub")
    with k.vector(0):
        k.fill(ub, 3.0)
        k.sync_notify("V", "MTE3", 0)
        k.sync_wait("V", "MTE3", 0)
        k.copy_ub2gm("t", ub)
    for sub in (0, 1):
        with k.vector(sub):
            if sub in setters:
                k.set_cross_core("MTE3", 5, SUB)
            if barrier:
                k.wait_cross_core("MTE2", 5, SUB)
    with k.vector(1):
        k.copy_gm2ub(ub, "t")
        k.sync_notify("MTE2", "MTE3", 0)
        k.sync_wait("MTE2", "MTE3", 0)
        k.copy_ub2gm("out", ub)


def _subblock_run(**params):
    gm = {"t": ((8, 16), "float32"), "out": ((8, 16), "float32")}
    return aj.run(_subblock, {}, gm, params=params, jit=False)


def test_inter_subblock_is_a_barrier_between_the_aivs():
    good = _subblock_run(setters=(0, 1))
    assert good.report().verdict is V.OK, good.report().message
    np.testing.assert_array_equal(np.asarray(good.outputs["out"]), 3.0)
    table = events(good.report())
    for core in ("AIV0", "AIV1"):
        row = table[(5, core)]
        assert (row["sets"], row["waits"], row["set pipes"], row["wait pipes"]) == ("1", "1", "MTE3", "MTE2")
        assert row["modes"] == "INTER_SUBBLOCK" and row["signals left"] == "0"
    racy = _subblock_run(setters=(), barrier=False)  # nothing orders AIV1's load after AIV0's store
    assert racy.report().verdict is V.RACE, racy.report().message
    race = racy.findings()[0]
    store, load = at(_subblock, 'k.copy_ub2gm("t"'), at(_subblock, 'k.copy_gm2ub(ub, "t")')
    assert race.kind is Finding.RACE and "on GM:t bytes" in race.message
    assert {race.site, race.other} == {f"copy_ub2gm at {store} (AIV0.MTE3)", f"copy_gm2ub at {load} (AIV1.MTE2)"}
    bad = _subblock_run(setters=(0,)).report()  # AIV1's half of the barrier is missing: neither AIV goes on
    assert bad.verdict is V.DEADLOCK
    wait = at(_subblock, "wait_cross_core")
    for core in ("AIV0", "AIV1"):
        stuck = f"{wait} ({core}.MTE2) waits for cross-core event 5 (INTER_SUBBLOCK) from the other AIV's barrier half"
        assert stuck in bad.message


def test_inter_subblock_deadlock_names_the_missing_set():
    bad = _subblock_run(setters=(0,)).report()
    assert "AIV1 never ran set_cross_core(event_id=5, INTER_SUBBLOCK)" in bad.message
    assert "AIV0 never ran" not in bad.message  # the AIV that set its half is not blamed


def test_inter_subblock_on_the_cube_and_inter_block_are_rejected():
    def cube_sub(k):
        with k.cube():
            k.set_cross_core("FIX", 0, SUB)

    with pytest.raises(ValueError, match=r"rule 'INTER_SUBBLOCK'.*the AIC has no part in it"):
        run(cube_sub)

    def inter(k):
        with k.vector(0):
            k.set_cross_core("MTE3", 0, INTER)

    with pytest.raises(ValueError, match=r"rule 'INTER_BLOCK'.*several AI Core blocks.*one block"):
        run(inter)


def test_pipe_rules_at_trace_time():
    def vector_fix(k):
        with k.vector(0):
            k.set_cross_core("FIX", 0)  # an AIV has no FIX pipe

    with pytest.raises(ValueError, match=r"rule 'cross-core pipe'.*the AIV has no pipe FIX"):
        run(vector_fix)

    def scalar(k):
        with k.cube():
            k.set_cross_core("S", 0)

    with pytest.raises(ValueError, match=r"rule 'cross-core pipe'.*PIPE_S is not allowed"):
        run(scalar)


# --- counts: set twice, leftover, mode mismatch --------------------------------------------------
def _set_set(k, waits, ack=False):
    """The cube sets event 6 twice, each AIV waits ``waits`` times; ``ack``: each AIV acknowledges its first
    signal on event 10 and the cube waits for both before its second set (program text orders nothing)."""
    with k.cube():
        k.set_cross_core("FIX", 6)
        if ack:
            k.wait_cross_core("FIX", 10)
        k.set_cross_core("FIX", 6)
    for sub in (0, 1):
        with k.vector(sub):
            k.wait_cross_core("V", 6)
            if ack:
                k.set_cross_core("V", 10)
            for _ in range(waits - 1):
                k.wait_cross_core("V", 6)


def test_set_twice_without_a_wait_is_a_sync_error_in_the_strict_model():
    good = rep_of(_set_set, waits=2, ack=True)  # set, ack, set: the first signal is taken before the second set
    assert good.verdict is V.OK, good.message
    assert events(good)[(6, "AIC")]["sets"] == "2" and events(good)[(6, "AIV0")]["waits"] == "2"
    first, second = (at(_set_set, 'k.set_cross_core("FIX", 6)', nth) for nth in (0, 1))
    merged = f"{second} (AIC.FIX) sets cross-core event 6 while it still holds set_cross_core at"
    one = run(_set_set, waits=1)  # set, set: bit semantics lose the second signal
    rep = one.report()
    assert rep.verdict is V.SYNC_ERROR, rep.message
    assert rep.op == "set_cross_core" and rep.location == second
    assert [f.kind for f in one.findings()] == [Finding.MERGED_SIGNAL]
    assert merged in rep.message and f"{first} (AIC.FIX)'s signal: one is lost" in rep.message
    two = run(_set_set, waits=2)  # the second wait of each AIV starves on the lost signal
    rep = two.report()
    assert rep.verdict is V.DEADLOCK  # ranked above the MERGED_SIGNAL that causes it
    assert [f.kind for f in two.findings()] == [Finding.DEADLOCK, Finding.MERGED_SIGNAL]
    assert Finding.MERGED_SIGNAL.verdict == "SYNC_ERROR" and merged in rep.message
    starved = at(_set_set, 'k.wait_cross_core("V", 6)', nth=1)
    for core in ("AIV0", "AIV1"):
        assert f"{starved} ({core}.V) waits for cross-core event 6 (INTRA_BLOCK) from AIC" in rep.message


def test_counter_model_allows_two_sets_but_each_needs_its_wait():
    counter = aj.get_chip("a2").replace(cross_core_max_count=15)
    both = rep_of(_set_set, counter, waits=2)
    assert both.verdict is V.OK, both.message
    assert events(both)[(6, "AIC")]["sets"] == "2" and events(both)[(6, "AIV1")]["waits"] == "2"
    one = rep_of(_set_set, counter, waits=1)
    assert one.verdict is V.LEFTOVER
    second = at(_set_set, 'k.set_cross_core("FIX", 6)', nth=1)
    left = f"still set when the kernel ends; set by set_cross_core at {second}"
    assert left in one.message
    assert "OVERFLOW" not in one.message and "MERGED_SIGNAL" not in one.message  # a leftover, not a lost signal
    assert events(one)[(6, "AIV0")]["signals left"] == "1 (to be consumed here)"
    assert events(one)[(6, "AIV1")]["signals left"] == "1 (to be consumed here)"


def _leftover(k, wait):
    for sub in (0, 1):
        with k.vector(sub):
            k.set_cross_core("MTE3", 7)
    if wait:
        with k.cube():
            k.wait_cross_core("MTE1", 7)


def test_a_set_never_waited_is_leftover_naming_the_event():
    good = rep_of(_leftover, wait=True)
    assert good.verdict is V.OK, good.message
    result = run(_leftover, wait=False)
    bad = result.report()
    assert bad.verdict is V.LEFTOVER
    assert bad.op == "set_cross_core"
    found = result.findings()
    assert [f.kind for f in found] == [Finding.LEFTOVER, Finding.LEFTOVER]  # each AIV's set, every finding
    site = at(_leftover, "set_cross_core")
    for f, core in zip(found, ("AIV0", "AIV1")):
        assert f.site == f"set_cross_core at {site} ({core}.MTE3)"
        assert f"is still set when the kernel ends; set by {f.site}" in f.message
    assert events(bad)[(7, "AIV0")]["sets"] == "1" and events(bad)[(7, "AIV1")]["sets"] == "1"


def _two_slots_left(k, waits):
    """A ping-pong's RELEASE line for slots 0 and 1 (events 2 and 3), the cube waiting for ``waits`` of them."""
    for sub in (0, 1):
        with k.vector(sub):
            k.range(2, lambda i: k.set_cross_core("MTE3", 2 + i % 2))
    with k.cube():
        for event in (2, 3)[:waits]:
            k.wait_cross_core("MTE1", event)


def test_one_line_leaving_two_events_set_is_a_finding_for_each():
    """The leftovers are one per site and resource left set: the line that set events 2 and 3 is named for each
    (one finding per site named event 2 alone)."""
    assert rep_of(_two_slots_left, waits=2).verdict is V.OK  # the good twin
    found = run(_two_slots_left, waits=0).findings()
    site = at(_two_slots_left, "set_cross_core")
    want = [(event, core) for core in ("AIV0", "AIV1") for event in (2, 3)]
    assert len(found) == len(want)
    for f, (event, core) in zip(found, want):
        assert f.kind is Finding.LEFTOVER
        holders = "(AIV0 -> AIC holds 1 signal(s), AIV1 -> AIC holds 1 signal(s)"
        assert f.message.startswith(f"LEFTOVER: cross-core event {event} {holders}"), f.message
        assert f"set by set_cross_core at {site} ({core}.MTE3)" in f.message
    one = run(_two_slots_left, waits=1).findings()  # event 2 waited for: event 3 is left, on each AIV
    assert [f.message.split(" (")[0] for f in one] == ["LEFTOVER: cross-core event 3"] * 2


def test_a_cross_core_leftover_names_the_receiver():
    """docs/cross-core.md: a leftover names the sender, receiver, id and the last set (here AIC holds both)."""
    for f in run(_leftover, wait=False).findings():
        assert "AIC" in f.message, f.message


def test_event_table_shows_signals_left_at_a_receiver_that_never_waited():
    bad = rep_of(_leftover, wait=False)
    assert bad.verdict is V.LEFTOVER
    assert events(bad)[(7, "AIC")]["signals left"] == "2 (to be consumed here)"


def _modes(k, wait_mode):
    with k.cube():
        k.set_cross_core("FIX", 8, INTRA)
    with k.vector(0):
        k.wait_cross_core("V", 8, wait_mode)
    with k.vector(1):
        k.wait_cross_core("V", 8, INTRA)


def test_set_and_wait_with_different_modes_is_a_sync_error():
    good = rep_of(_modes, "950", wait_mode=INTRA)
    assert good.verdict is V.OK, good.message
    bad = rep_of(_modes, "950", wait_mode=UNICAST)
    assert bad.verdict is V.SYNC_ERROR
    assert bad.op == "wait_cross_core"
    wait, set_ = at(_modes, "k.wait_cross_core"), at(_modes, "k.set_cross_core")
    assert (
        f"cross-core event 8 is waited with sync_mode UNICAST_BLOCK by wait_cross_core at {wait} (AIV0.V) "
        f"and set with INTRA_BLOCK by set_cross_core at {set_} (AIC.FIX): a sync-mode mismatch"
    ) in bad.message


# --- program text orders nothing across cores: a wait cycle does ---------------------------------
def _wait_written_first(k, cycle):
    """Both AIVs wait for event 9 (written before the cube's set) and acknowledge on event 10; ``cycle``: the
    cube waits for the acknowledgement on the pipe of its set, before the set."""
    for sub in (0, 1):
        with k.vector(sub):
            k.wait_cross_core("V", 9)
            k.set_cross_core("V", 10)
    with k.cube():
        if cycle:
            k.wait_cross_core("FIX", 10)
        k.set_cross_core("FIX", 9)
        if not cycle:
            k.wait_cross_core("FIX", 10)


def test_a_wait_written_before_its_set_is_fine_a_wait_cycle_deadlocks():
    good = rep_of(_wait_written_first, "950", cycle=False)
    assert good.verdict is V.OK, good.message
    assert events(good)[(9, "AIV0")]["waits"] == "1" and events(good)[(10, "AIC")]["waits"] == "1"
    bad = rep_of(_wait_written_first, "950", cycle=True)
    assert bad.verdict is V.DEADLOCK
    cube, aiv = at(_wait_written_first, 'k.wait_cross_core("FIX", 10)'), at(_wait_written_first, '"V", 9')
    assert f"{cube} (AIC.FIX) waits for cross-core event 10 (INTRA_BLOCK) from AIV0 and AIV1" in bad.message
    for core in ("AIV0", "AIV1"):
        assert f"{aiv} ({core}.V) waits for cross-core event 9 (INTRA_BLOCK) from AIC" in bad.message
        assert f"{core} is itself stuck (see its entry), so its set never comes: a wait cycle" in bad.message
    assert "AIC is itself stuck (see its entry)" in bad.message


def _wait_first_other_mode(k, wait_mode):
    with k.vector(0):
        k.wait_cross_core("V", 9, wait_mode)  # written first: nothing is blocked by program text
    with k.cube():
        k.set_cross_core("FIX", 9, UNICAST, peer=0)


def test_a_set_of_another_mode_into_a_waiting_wait_reports_the_mismatch():
    good = rep_of(_wait_first_other_mode, "950", wait_mode=UNICAST)
    assert good.verdict is V.OK, good.message
    result = run(_wait_first_other_mode, "950", wait_mode=INTRA)
    bad = result.report()
    assert bad.verdict is V.SYNC_ERROR, bad.message  # a mismatch, not a deadlock
    assert Finding.DEADLOCK not in [f.kind for f in result.findings()]
    wait, set_ = at(_wait_first_other_mode, "k.wait_cross_core"), at(_wait_first_other_mode, "k.set_cross_core")
    assert (
        f"cross-core event 9 is waited with sync_mode INTRA_BLOCK by wait_cross_core at {wait} (AIV0.V) "
        f"and set with UNICAST_BLOCK by set_cross_core at {set_} (AIC.FIX)"
    ) in bad.message


# --- event ids -------------------------------------------------------------------------------------
def _traced_id(k, ev):
    with k.cube():
        k.set_cross_core("FIX", ev)
    for sub in (0, 1):
        with k.vector(sub):
            k.wait_cross_core("V", ev)


@functools.cache
def _ids_under_vmap():
    ids = jnp.array([0, 5, 15, 16, -1], jnp.int32)
    return jax.vmap(lambda ev: aj.run(_traced_id, {}, {}, params={"ev": ev}, sanitize=False))(ids)


def test_traced_event_id_under_vmap():
    result = _ids_under_vmap()
    assert [V(int(v)) for v in result.verdict] == [V.OK, V.OK, V.OK, V.SYNC_ERROR, V.SYNC_ERROR]
    set_, wait = at(_traced_id, "set_cross_core"), at(_traced_id, "wait_cross_core")
    for i, ev in ((3, 16), (4, -1)):
        found = result.findings(i)
        assert [f.kind for f in found] == [Finding.SYNC_ERROR] * 3  # the set and both waits, every finding
        assert [f.site for f in found] == [
            f"set_cross_core at {set_} (AIC.FIX)",
            f"wait_cross_core at {wait} (AIV0.V)",
            f"wait_cross_core at {wait} (AIV1.V)",
        ]
        assert all(f"event_id {ev} is outside [0, 16) on chip a2" in f.message for f in found)
    assert result.findings(2) == ()


def test_a_vmapped_result_reports_each_scenario():
    result = _ids_under_vmap()
    assert result.report(3).op == "set_cross_core"
    assert events(result.report(2))[(15, "AIC")]["sets"] == "1"


def test_a_traced_event_id_out_of_range_names_the_range():
    assert "event_id 16 is outside [0, 16) on chip a2" in _ids_under_vmap().findings(3)[0].message


def test_static_event_id_out_of_range_raises():
    assert rep_of(_traced_id, ev=15).verdict is V.OK
    with pytest.raises(ValueError, match=r"rule 'event id range'.*event_id 16 is outside \[0, 16\)"):
        run(_traced_id, ev=16)


# --- A2 blocks the whole core, 950 only the named pipe -------------------------------------------
def _stuck_then_copy(k, set_first):
    """AIV0 waits on V, then loads (MTE2) and stores (MTE3); ``set_first`` (traced): the cube sets the event."""
    ub = k.alloc("UB", (8, 16), "float32", name="ub")
    with k.cube():
        k.cond(set_first, lambda: k.set_cross_core("FIX", 11))
    with k.vector(0):
        k.wait_cross_core("V", 11)
        k.copy_gm2ub(ub, "x")  # MTE2
        k.sync_notify("MTE2", "MTE3", 0)
        k.sync_wait("MTE2", "MTE3", 0)
        k.copy_ub2gm("out", ub)  # MTE3
    with k.vector(1):
        k.cond(set_first, lambda: k.wait_cross_core("V", 11))


_X = np.arange(128, dtype=np.float32).reshape(8, 16) + 1


@functools.cache
def _stuck_runs(chip):
    """``{set_first: Result}``, one compilation per chip."""
    return {
        flag: aj.run(
            _stuck_then_copy,
            {"x": _X},
            {"out": ((8, 16), "float32")},
            chip=chip,
            params={"set_first": jnp.bool_(flag)},
            sanitize=False,  # blocking needs no race sanitizer; it would double the compile time
        )
        for flag in (True, False)
    }


@pytest.mark.parametrize("chip", ["a2", "950"])
def test_a2_wait_holds_every_pipe_950_only_the_named_one(chip):
    runs = _stuck_runs(chip)
    good = runs[True]
    assert good.report().verdict is V.OK, good.report().message
    np.testing.assert_array_equal(np.asarray(good.outputs["out"]), _X)
    rep = runs[False].report()
    assert rep.verdict is V.DEADLOCK
    wait = at(_stuck_then_copy, 'k.wait_cross_core("V", 11)')
    assert f"{wait} (AIV0.V) waits for cross-core event 11 (INTRA_BLOCK) from AIC" in rep.message
    assert "AIC never ran set_cross_core(event_id=11)" in rep.message
    held = f"copy_gm2ub at {at(_stuck_then_copy, 'k.copy_gm2ub')} (AIV0.MTE2)"
    if chip == "a2":  # MTE2 and MTE3 are held too: the load never runs
        assert held in rep.message
    else:  # only V is held: the load and the store run
        assert held not in rep.message and "(AIV0.MTE3)" not in rep.message
        np.testing.assert_array_equal(np.asarray(runs[False].outputs["out"]), _X)


def test_a2_deadlock_says_the_wait_holds_every_pipe():
    """It lists AIV0.MTE2 'behind an earlier instruction' and the MTE3 flag as one 'no set delivers'."""
    assert "holds every pipe of AIV0" in _stuck_runs("a2")[False].report().message


def test_a2_outputs_keep_nothing_a_held_pipe_never_ran():
    """On A2 the stuck wait holds MTE2 and MTE3: the store never runs and ``out`` stays zero on the device. On 950
    it holds V alone: the load and the store run, as in the good twin (``set_first``)."""
    np.testing.assert_array_equal(np.asarray(_stuck_runs("a2")[False].outputs["out"]), 0)
    np.testing.assert_array_equal(np.asarray(_stuck_runs("950")[False].outputs["out"]), _X)


# 950 (the wait holds V alone) is slow: a2's first scenario is the twin whose store runs (9 s a compile)
@pytest.mark.parametrize("chip", ["a2", pytest.param("950", marks=pytest.mark.slow)])
def test_a_vmapped_run_writes_gm_only_where_each_scenario_ran(chip):
    """The same outputs with the set traced per scenario (the control plane's run traced too): GM holds what each
    scenario's device wrote before it stopped."""

    def out(set_first):
        spec = {"out": ((8, 16), "float32")}
        return aj.run(_stuck_then_copy, {"x": _X}, spec, chip=chip, params={"set_first": set_first}, sanitize=False)

    got = jax.vmap(lambda f: out(f).outputs["out"])(jnp.array([True, False]))
    np.testing.assert_array_equal(np.asarray(got[0]), _X)
    np.testing.assert_array_equal(np.asarray(got[1]), 0 if chip == "a2" else _X)


# --- races a cross-core event prevents -------------------------------------------------------------
def _move_then_read(k, with_event):
    """AIC: C = A @ B, move C to AIV0's UB; AIV0 reads UB (row_max). ``with_event`` traced: cond both ways."""
    a1 = k.alloc("L1", (16, 16), "float16", name="a1")
    b1 = k.alloc("L1", (16, 16), "float16", name="b1")
    a0 = k.alloc("L0A", (16, 16), "float16", name="a0")
    b0 = k.alloc("L0B", (16, 16), "float16", name="b0")
    c = k.alloc("L0C", (16, 16), "float32", name="c")
    ub = k.alloc("UB", (16, 16), "float32", name="ub")
    mx = k.alloc("UB", (16, 1), "float32", name="mx")
    with k.cube():
        k.copy_gm2l1_nd2nz(a1, "a")
        k.copy_gm2l1_nd2nz(b1, "b")
        k.sync_notify("MTE2", "MTE1", 0)
        k.sync_wait("MTE2", "MTE1", 0)
        k.copy_l12l0a(a0, a1)
        k.copy_l12l0b(b0, b1, transpose=True)
        k.sync_notify("MTE1", "M", 0)
        k.sync_wait("MTE1", "M", 0)
        k.set_mmad_direction("n")
        k.matmul(c, a0, b0, phase=AccPhase.Final)
        k.move_to_vec(ub, c, acc_to_vec_mode=AccToVecMode.SingleModeVec0, phase=STPhase.Final)
        k.cond(with_event, lambda: k.set_cross_core("FIX", 0))
    for sub in (0, 1):
        with k.vector(sub):
            k.cond(with_event, lambda: k.wait_cross_core("V", 0))
    with k.vector(0):
        k.row_max(mx, ub)
        k.sync_notify("V", "MTE3", 0)
        k.sync_wait("V", "MTE3", 0)
        k.copy_ub2gm("out", mx)


_RNG = np.random.default_rng(0)
_A = _RNG.uniform(-1, 1, (16, 16)).astype(np.float16)
_B = _RNG.uniform(-1, 1, (16, 16)).astype(np.float16)


@functools.cache
def _move_runs():
    io = ({"a": _A, "b": _B}, {"out": ((16, 1), "float32")})
    return {flag: aj.run(_move_then_read, *io, params={"with_event": jnp.bool_(flag)}) for flag in (True, False)}


def test_aiv_reading_a_move_without_the_event_races():
    runs = _move_runs()
    good = runs[True].report()
    assert good.verdict is V.OK, good.message
    s = _A.astype(np.float64) @ _B.astype(np.float64)
    np.testing.assert_allclose(np.asarray(runs[True].outputs["out"]), s.max(1, keepdims=True), rtol=1e-5, atol=1e-5)
    bad = runs[False].report()
    assert bad.verdict is V.RACE
    race, *rest = runs[False].findings()
    move = f"move_to_vec at {at(_move_then_read, 'k.move_to_vec')} (AIC.FIX)"
    read = f"row_max at {at(_move_then_read, 'k.row_max')} (AIV0.V)"
    assert race.kind is Finding.RACE and "on UB@AIV0 bytes [0, 1024)" in race.message
    assert {race.site, race.other} == {move, read}
    assert "nothing orders them" in race.message and "cross-core event" in race.message
    assert [f.kind for f in rest] == [Finding.UNINITIALIZED]  # no write happens before the read: every finding
    assert f"UB@AIV0 bytes [0, 1024) of tile `ub` by {read}" in rest[0].message


def test_a_missing_ready_reads_raw_and_the_fix_sets_after_the_move():
    """semantics §8: a missing READY reads RAW; the fix is the READY event from the move to the read."""
    bad = _move_runs()[False].report()
    assert bad.op == "row_max"
    assert "RACE (RAW) on UB@AIV0 bytes [0, 1024)" in bad.message
    assert (
        "set_cross_core(pipe=FIX, event_id=id) on AIC after the move_to_vec and "
        "wait_cross_core(pipe=V, event_id=id) on AIV0 before the row_max"
    ) in bad.message


# --- the event table and pipe warnings --------------------------------------------------------------
def test_event_table_lists_sets_and_waits_per_core_with_pipes_and_modes():
    def kernel(k, barrier):
        with k.cube():
            k.set_cross_core("FIX", 0)
        for sub in (0, 1):
            with k.vector(sub):
                k.wait_cross_core("V" if sub == 0 else "MTE2", 0)
                k.set_cross_core("MTE3", 3)
        for sub in barrier:
            with k.vector(sub):
                k.set_cross_core("V" if sub == 0 else "MTE3", 12, SUB)
        for sub in (0, 1):
            with k.vector(sub):
                k.wait_cross_core("V" if sub == 0 else "MTE3", 12, SUB)
        with k.cube():
            k.wait_cross_core("MTE1", 3)

    rep = rep_of(kernel, barrier=(0, 1))
    assert rep.verdict is V.OK, rep.message
    assert rep.events.startswith("cross-core events:") and rep.events in str(rep)
    t = events(rep)
    assert list(t) == [
        (0, "AIC"),
        (0, "AIV0"),
        (0, "AIV1"),
        (3, "AIC"),
        (3, "AIV0"),
        (3, "AIV1"),
        (12, "AIV0"),
        (12, "AIV1"),
    ]
    assert t[(0, "AIV0")]["wait pipes"] == "V" and t[(0, "AIV1")]["wait pipes"] == "MTE2"
    assert t[(3, "AIV0")]["set pipes"] == "MTE3" and t[(3, "AIC")]["wait pipes"] == "MTE1"
    assert t[(3, "AIC")]["waits"] == "1" and t[(3, "AIV1")]["sets"] == "1"
    assert t[(12, "AIV0")]["modes"] == "INTER_SUBBLOCK" and t[(12, "AIV1")]["wait pipes"] == "MTE3"
    assert t[(12, "AIV0")]["sets"] == t[(12, "AIV0")]["waits"] == t[(12, "AIV1")]["sets"] == "1"
    assert all(row["signals left"] == "0" for row in t.values())
    half = events(rep_of(kernel, barrier=(0,)))  # AIV1's half missing: the barrier never opens
    assert half[(12, "AIV0")]["sets"] == "1" and half[(12, "AIV0")]["waits"] == "0" and (12, "AIV1") not in half
    # a kernel without cross-core events has no table
    assert rep_of(lambda k: k.sync_notify("MTE2", "MTE1", 0) or k.sync_wait("MTE2", "MTE1", 0)).events == ""


def _vector_then_set(k, pipe):
    ub = k.alloc("UB", (8, 16), "float32", name="ub")
    for sub in (0, 1):
        with k.vector(sub):
            k.fill(ub, 1.0)  # V
            k.set_cross_core(pipe, 1)  # no store between: the data op before the set is on V
    with k.cube():
        k.wait_cross_core("MTE1", 1)


def test_set_on_a_pipe_other_than_the_data_op_before_it_warns():
    good = rep_of(_vector_then_set, pipe="V")
    assert good.verdict is V.OK and good.warnings == []
    bad = rep_of(_vector_then_set, pipe="MTE3")
    assert bad.verdict is V.OK  # a warning, not a verdict
    assert len(bad.warnings) == 1
    assert "a cross-core set runs on a pipe other than the one of the data op before it" in bad.warnings[0]
    assert "set_cross_core at" in bad.warnings[0]


def test_wait_on_a_pipe_other_than_the_data_op_after_it_warns():
    def kernel(k, pipe):
        ub = k.alloc("UB", (8, 16), "float32", name="ub")
        with k.cube():
            k.set_cross_core("FIX", 0)
        for sub in (0, 1):
            with k.vector(sub):
                k.wait_cross_core(pipe, 0)
                k.fill(ub, 2.0)  # V: the wait should hold V

    good = rep_of(kernel, "950", pipe="V")
    assert good.verdict is V.OK and good.warnings == []
    bad = rep_of(kernel, "950", pipe="MTE2")
    assert bad.verdict is V.OK
    assert len(bad.warnings) == 1
    assert "a cross-core wait holds a pipe other than the one of the data op after it" in bad.warnings[0]
