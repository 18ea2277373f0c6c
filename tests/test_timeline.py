"""The control plane's run on a time axis (``ascjax.timeline``): spans, consumed signals as flows, stuck pipes,
the summary against hand-computed cycles, the Perfetto trace and the picture."""

from __future__ import annotations

import json

import jax.numpy as jnp
import numpy as np
import pytest
from conftest import KERNELS

import ascjax as aj
from ascjax.core import AIV0, Pipe

GM_READ, GM_WRITE, MTE2_BPC, MTE3_BPC, FLAG = 188, 167, 32, 64, 52  # the A2 table, as tests/test_record_costs.py


def _chain(k):
    """AIV0: GM -> UB, SetFlag MTE2 -> MTE3, WaitFlag, UB -> GM."""
    ub = k.alloc("UB", (32, 32), "float32")
    with k.vector(0):
        k.copy_gm2ub(ub, "x")
        k.sync_notify("MTE2", "MTE3", 0)
        k.sync_wait("MTE2", "MTE3", 0)
        k.copy_ub2gm("y", ub)


def _check(kernel, **kw):
    return aj.check(kernel, {"x": np.zeros((32, 32), np.float32)}, {"y": ((32, 32), "float32")}, **kw)


def test_a_load_flag_store_chain_is_a_span_per_instruction_with_the_hand_computed_cycles():
    tl = _check(_chain).timeline()
    transfer = 32 * 32 * 4 // MTE2_BPC  # the load leaves MTE2 after its bytes and lands after its latency
    load, store = GM_READ + transfer, GM_WRITE + 32 * 32 * 4 // MTE3_BPC  # 316, 231
    assert [(s.op, s.pipe, s.start_cycle, s.end_cycle) for s in tl.spans] == [
        ("copy_gm2ub", Pipe.MTE2, 0, load),
        ("set_flag", Pipe.MTE2, load, load + 1),  # behind the load: it starts once the load has landed
        ("wait_flag", Pipe.MTE3, load + 1 + FLAG, load + 1 + FLAG + 1),
        ("copy_ub2gm", Pipe.MTE3, load + 1 + FLAG + 1, load + 1 + FLAG + 1 + store),
    ]
    assert all(s.core == AIV0 for s in tl.spans) and "test_timeline.py" in tl.spans[2].site
    assert tl.spans[2].source == tl.spans[1].inst  # the wait consumed the set's signal
    info = tl.summary()
    assert info["cycles"] == tl.cycles == load + 1 + FLAG + 1 + store  # 601
    # busy while the load runs and is in flight (it left MTE2 after its bytes: ``transfer``), then the set
    assert tl.spans[0].leave_cycle == transfer
    assert info["pipes"]["AIV0.MTE2"] == {"busy_cycles": load + 1, "stall_cycles": 0, "end_cycle": load + 1}
    assert info["pipes"]["AIV0.MTE3"]["stall_cycles"] == load + 1 + FLAG  # idle until the signal arrived
    assert info["bound"] == "MTE2" and info["stuck"] == [] and info["cube_peak_fraction"] == 0.0


def test_the_trace_has_a_track_per_pipe_in_use_and_a_flow_per_consumed_signal(tmp_path):
    path = tmp_path / "t.json"
    _check(_chain).timeline().to_perfetto(str(path))
    doc = json.loads(path.read_text())
    threads = {(e["pid"], e["args"]["name"]) for e in doc["traceEvents"] if e.get("name") == "thread_name"}
    assert threads == {(AIV0, "MTE2"), (AIV0, "MTE3")}  # each core shows only its own pipes
    slices = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert len(slices) == 4 and slices[2]["args"]["waited_for"].startswith("sync_notify at")
    flights = [e for e in doc["traceEvents"] if e["ph"] in "be" and e.get("cat") == "in flight"]
    assert [(e["ph"], e["id"]) for e in flights] == [("b", 0), ("e", 0), ("b", 3), ("e", 3)]  # the load, the store
    assert slices[0]["dur"] == 32 * 32 * 4 // MTE2_BPC / 1850.0  # the load holds MTE2 for its bytes only
    starts = {e["id"] for e in doc["traceEvents"] if e["ph"] == "s"}
    assert starts and starts == {e["id"] for e in doc["traceEvents"] if e["ph"] == "f"}  # complete pairs
    assert doc["otherData"]["cycles"] == 601


def test_a_deadlock_shows_the_stuck_pipe_from_the_cycle_it_went_idle_and_its_twin_shows_none(tmp_path):
    """A wait on a flag nobody sets: MTE3 has run nothing, so its marker starts at cycle 0; the chain has none."""

    def never_set(k):
        ub = k.alloc("UB", (32, 32), "float32")
        with k.vector(0):
            k.copy_gm2ub(ub, "x")
            k.sync_wait("MTE2", "MTE3", 0)
            k.copy_ub2gm("y", ub)

    bad = _check(never_set)
    assert bad.verdict is aj.Verdict.DEADLOCK
    tl = bad.timeline()
    assert [(s.core, s.pipe, s.op, s.since_cycle) for s in tl.stuck] == [(AIV0, Pipe.MTE3, "wait_flag", 0)]
    assert "AIV0.MTE3: sync_wait at" in tl.summary()["stuck"][0]
    doc = tl.to_perfetto()
    marker = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["name"].startswith("stuck: sync_wait")]
    assert len(marker) == 1 and marker[0]["args"]["since_cycle"] == 0
    assert _check(_chain).timeline().stuck == ()


def test_the_stuck_instruction_is_the_first_enabled_one_of_its_queue():
    """A queue holds only the enabled instances: a switched-off wait before the stuck one is not its head."""

    def skipped_then_stuck(k, on):
        with k.vector(0):
            k.wait_cross_core("V", 3, when=on)  # off: not in the V queue
            k.wait_cross_core("V", 4)  # nobody sets it

    found = aj.check(skipped_then_stuck, {}, {}, params={"on": jnp.bool_(False)})
    line = skipped_then_stuck.__code__.co_firstlineno + 3
    assert [s.site for s in found.timeline().stuck] == [f"wait_cross_core at tests/test_timeline.py:{line}"]


def test_a_cross_core_wait_names_the_set_it_took_and_the_picture_is_drawn(tmp_path):
    pytest.importorskip("matplotlib")
    case = aj.build_case(str(KERNELS / "vec_cube.py"), "vec_cube_one_aiv_sets")  # only AIV0 sets: a deadlock
    found = aj.check(case.kernel, case.inputs, case.outputs, chip=case.chip, params=case.params)
    tl = found.timeline()
    stuck = {(s.pipe, s.op) for s in tl.stuck}
    assert (Pipe.MTE1, "wait_cross_core") in stuck
    by_inst = {s.inst: s for s in tl.spans}
    sets = [s for s in tl.spans if s.op == "set_cross_core"]
    assert sets and all(s.core != 0 for s in sets)  # the AIVs' sets ran
    assert all(
        by_inst[s.source].op in ("set_flag", "set_cross_core", "mmad", "fixpipe") for s in tl.spans if s.source >= 0
    )
    path = tmp_path / "t.png"
    tl.plot(str(path))
    assert path.read_bytes()[:4] == b"\x89PNG"


def test_a_run_that_kept_no_timeline_says_so():
    found = _check(_chain, options=aj.engine.ControlOptions(keep_timeline=False))
    with pytest.raises(ValueError, match="keep_timeline"):
        found.timeline()
