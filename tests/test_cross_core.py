"""``set_cross_core`` / ``wait_cross_core`` (seed 002): routing per sync_mode, counts, misuse, the chip's
blocking rule, races they prevent, the event table and pipe warnings. Every bad program beside its twin.

Most kernels are tiny and vector-only: they run eagerly (``jit=False``), which after the first one
costs a fraction of a compilation each.
"""

import re

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ascjax as aj
from ascjax import AccPhase, AccToVecMode, STPhase, SyncMode

INTRA, UNICAST, SUB, INTER = SyncMode.INTRA_BLOCK, SyncMode.UNICAST_BLOCK, SyncMode.INTER_SUBBLOCK, SyncMode.INTER_BLOCK
V = aj.Verdict


def run(kernel, chip="a2", inputs=None, outputs=None, **params):
    return aj.run(kernel, inputs or {}, outputs or {}, chip=chip, params=params, jit=False)


def rep_of(kernel, chip="a2", **params):
    return run(kernel, chip, **params).report()


_pick = eqx.filter_jit(lambda state, i: jax.tree_util.tree_map(lambda x: x[i], state))


def report_at(result, i):
    """``result.report(i)`` with the per-scenario slice compiled once (eager slicing compiles per leaf)."""
    return aj.report(_pick(result.state, jnp.int32(i)))


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
    assert rep.op == "wait_cross_core"
    assert "AIV0.V is stuck at wait_cross_core" in rep.message
    assert "waits for cross-core event 0 (INTRA_BLOCK) from AIC" in rep.message
    assert "AIC set event 0 1 time(s) and every signal was consumed by an earlier wait" in rep.message
    assert "AIV1.V is stuck" not in rep.message  # AIV1 consumed its own signal


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
    assert "AIC.MTE1 is stuck at wait_cross_core" in bad.message
    assert "from AIV0 and AIV1" in bad.message
    assert "a cube wait needs a set from each of the two AIVs" in bad.message
    assert "AIV1 never ran set_cross_core(event_id=1)" in bad.message
    assert "AIV0 never ran" not in bad.message


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
    assert "AIV0.V is stuck at wait_cross_core" in bad.message
    assert "waits for cross-core event 2 (UNICAST_BLOCK) from AIC" in bad.message


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


# --- INTER_SUBBLOCK: AIV0 <-> AIV1 ----------------------------------------------------------------
def _subblock(k, second_setter):
    with k.vector(0):
        k.set_cross_core("V", 4, SUB)
    with k.vector(second_setter):
        k.set_cross_core("V", 5, SUB)
    with k.vector(1):
        k.wait_cross_core("V", 4, SUB)
    with k.vector(0):
        k.wait_cross_core("V", 5, SUB)


def test_inter_subblock_is_a_barrier_between_the_aivs():
    good = rep_of(_subblock, second_setter=1)
    assert good.verdict is V.OK, good.message
    table = events(good)
    assert table[(4, "AIV0")]["sets"] == "1" and table[(4, "AIV1")]["waits"] == "1"
    assert table[(5, "AIV1")]["sets"] == "1" and table[(5, "AIV0")]["waits"] == "1"
    assert table[(4, "AIV0")]["modes"] == "INTER_SUBBLOCK"
    bad = rep_of(_subblock, second_setter=0)  # AIV0 signals itself: its own wait never gets AIV1's set
    assert bad.verdict is V.DEADLOCK
    assert "AIV0.V is stuck at wait_cross_core" in bad.message
    assert "waits for cross-core event 5 (INTER_SUBBLOCK) from AIV1" in bad.message


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
def _set_set(k, waits, interleave=False):
    with k.cube():
        k.set_cross_core("FIX", 6)
    if interleave:
        for sub in (0, 1):
            with k.vector(sub):
                k.wait_cross_core("V", 6)
    with k.cube():
        k.set_cross_core("FIX", 6)
    for sub in (0, 1):
        with k.vector(sub):
            for _ in range(waits):
                k.wait_cross_core("V", 6)


def test_set_twice_without_a_wait_is_a_sync_error_in_the_strict_model():
    good = rep_of(_set_set, waits=1, interleave=True)  # set, wait, set, wait
    assert good.verdict is V.OK, good.message
    bad = rep_of(_set_set, waits=2)
    assert bad.verdict is V.SYNC_ERROR
    assert bad.op == "set_cross_core"
    assert "cross-core event 6 for AIV0 still holds 1 unconsumed signal(s)" in bad.message
    assert "bit semantics: the second set is lost" in bad.message


def test_counter_model_allows_two_sets_but_each_needs_its_wait():
    counter = aj.get_chip("a2").replace(cross_core_max_count=15)
    both = rep_of(_set_set, counter, waits=2)
    assert both.verdict is V.OK, both.message
    assert events(both)[(6, "AIC")]["sets"] == "2" and events(both)[(6, "AIV1")]["waits"] == "2"
    one = rep_of(_set_set, counter, waits=1)
    assert one.verdict is V.LEFTOVER
    assert "LEFTOVER cross-core event 6: AIC -> AIV0 still holds 1 signal(s)" in one.message
    assert "a counter of at most 15" not in one.message  # a leftover, not an overflow
    assert events(one)[(6, "AIV0")]["signals left"] == "1 (to be consumed here)"


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
    bad = rep_of(_leftover, wait=False)
    assert bad.verdict is V.LEFTOVER
    assert bad.op == "set_cross_core"
    assert re.search(r"LEFTOVER cross-core event 7: AIV[01] -> AIC still holds 1 signal\(s\)", bad.message)
    assert "every set must be consumed on every path" in bad.message
    assert events(bad)[(7, "AIV0")]["sets"] == "1" and events(bad)[(7, "AIV1")]["sets"] == "1"


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
    assert "cross-core event 8 is used with sync_mode UNICAST_BLOCK here and INTRA_BLOCK by set_cross_core" in (
        bad.message
    )


def _blocked_then_set(k, set_mode):
    with k.vector(0):
        k.wait_cross_core("V", 9, INTRA)  # issued first: blocked in issue order
    with k.cube():
        k.set_cross_core("FIX", 9, set_mode, peer=0 if set_mode is UNICAST else None)


def test_a_wait_issued_before_its_set_deadlocks_with_a_hint():
    rep = rep_of(_blocked_then_set, "950", set_mode=INTRA)
    assert rep.verdict is V.DEADLOCK
    assert "AIV0.V is stuck at wait_cross_core" in rep.message
    assert "set_cross_core at" in rep.message and "issued later, would release this wait" in rep.message


def test_a_set_of_another_mode_into_a_blocked_wait_reports_the_mismatch():
    rep = rep_of(_blocked_then_set, "950", set_mode=UNICAST)
    assert "would release this wait" not in rep.message
    assert "UNICAST_BLOCK" in rep.message and "sync_mode" in rep.message


# --- event ids -------------------------------------------------------------------------------------
def _traced_id(k, ev):
    with k.cube():
        k.set_cross_core("FIX", ev)
    for sub in (0, 1):
        with k.vector(sub):
            k.wait_cross_core("V", ev)


def test_traced_event_id_under_vmap():
    ids = jnp.array([0, 5, 15, 16, -1], jnp.int32)
    result = jax.vmap(lambda ev: aj.run(_traced_id, {}, {}, params={"ev": ev}, sanitize=False))(ids)
    assert [V(int(v)) for v in result.verdict] == [V.OK, V.OK, V.OK, V.SYNC_ERROR, V.SYNC_ERROR]
    for i, ev in ((3, 16), (4, -1)):
        rep = report_at(result, i)
        assert rep.op == "set_cross_core"
        assert f"event_id {ev} is outside [0, 16) on chip a2" in rep.message
    ok = report_at(result, 2)
    assert events(ok)[(15, "AIC")]["sets"] == "1"


def test_static_event_id_out_of_range_raises():
    assert rep_of(_traced_id, ev=15).verdict is V.OK
    with pytest.raises(ValueError, match=r"rule 'event id range'.*event_id 16 is outside \[0, 16\)"):
        run(_traced_id, ev=16)


# --- A2 blocks the whole core, 950 only the named pipe -------------------------------------------
def _stuck_then_copy(k, set_first):
    """AIV0 waits on V, then loads (MTE2) and stores (MTE3); ``set_first`` (traced) issues the cube's set before."""
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


@pytest.mark.parametrize("chip", ["a2", "950"])
def test_a2_wait_holds_every_pipe_950_only_the_named_one(chip):
    x = np.arange(128, dtype=np.float32).reshape(8, 16) + 1
    runs = {
        flag: aj.run(
            _stuck_then_copy,
            {"x": x},
            {"out": ((8, 16), "float32")},
            chip=chip,
            params={"set_first": jnp.bool_(flag)},
            sanitize=False,  # blocking needs no race sanitizer; it would double the compile time
        )
        for flag in (True, False)
    }  # one compilation per chip
    good = runs[True]
    assert good.report().verdict is V.OK, good.report().message
    np.testing.assert_array_equal(np.asarray(good.outputs["out"]), x)
    rep = runs[False].report()
    assert rep.verdict is V.DEADLOCK
    assert "AIV0.V is stuck at wait_cross_core" in rep.message
    out = np.asarray(runs[False].outputs["out"])
    if chip == "a2":  # MTE2 and MTE3 are held too: no load, no store
        np.testing.assert_array_equal(out, 0)
        assert "On chip a2 a cross-core wait holds every pipe of AIV0" in rep.message
    else:  # only V is held: the load and the store run
        np.testing.assert_array_equal(out, x)
        assert "holds every pipe" not in rep.message


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


def test_aiv_reading_a_move_without_the_event_races():
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (16, 16)).astype(np.float16)
    b = rng.uniform(-1, 1, (16, 16)).astype(np.float16)
    io = ({"a": a, "b": b}, {"out": ((16, 1), "float32")})
    runs = {flag: aj.run(_move_then_read, *io, params={"with_event": jnp.bool_(flag)}) for flag in (True, False)}
    good = runs[True].report()
    assert good.verdict is V.OK, good.message
    s = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(np.asarray(runs[True].outputs["out"]), s.max(1, keepdims=True), rtol=1e-5, atol=1e-5)
    bad = runs[False].report()
    assert bad.verdict is V.RACE
    assert bad.op == "row_max"
    assert "RACE (RAW) on UB of AIV0 granules 0..1 (bytes [0, 1024), tile `ub`)" in bad.message
    assert "move" in bad.message and "AIC.FIX" in bad.message and "AIV0.V" in bad.message
    assert "set_cross_core(pipe=FIX, event_id=id) on AIC after the move" in bad.message


# --- the event table and pipe warnings --------------------------------------------------------------
def test_event_table_lists_sets_and_waits_per_core_with_pipes_and_modes():
    def kernel(k):
        with k.cube():
            k.set_cross_core("FIX", 0)
        for sub in (0, 1):
            with k.vector(sub):
                k.wait_cross_core("V" if sub == 0 else "MTE2", 0)
                k.set_cross_core("MTE3", 3)
        with k.vector(0):
            k.set_cross_core("V", 12, SUB)
        with k.vector(1):
            k.wait_cross_core("MTE3", 12, SUB)
        with k.cube():
            k.wait_cross_core("MTE1", 3)

    rep = rep_of(kernel)
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
    assert all(row["signals left"] == "0" for row in t.values())
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
