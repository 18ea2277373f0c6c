"""The record prices each issue from its declaration and the ``Costs`` table, and the control plane's timeline
follows: figures computed by hand from the table's sources (ascend-facts §7)."""

from __future__ import annotations

import numpy as np
import pytest
from matmul import matmul_case

import ascjax as aj
from ascjax import isa
from ascjax.core import InstrKind
from ascjax.front._tracing import record_kernel

# the A2 table (ascjax.default_costs): rates from facts §7; latencies and fixed costs from the calibration
# kernels and the unit-flag measurement (docs/timing.md)
GM_READ, GM_WRITE, MTE2_BPC, MTE3_BPC = 188, 167, 32, 64
L0A_BPC, L0B_T_BPC, F16_MACS, HEAD, FIX_F32 = 256, 128, 4096, 61, 32
MTE1_FIXED = FIX_FIXED = 23.5
FLAG = 52


def _cycles_by_name(record) -> dict:
    """The cycles of each instruction name's first instance."""
    t = record.template
    cycles = np.asarray(record.operands["cycles"])
    out = {}
    for inst in range(t.n_instances):
        out.setdefault(t.entries[int(t.entry[inst])][0], int(cycles[inst]))
    return out


def test_each_issue_of_the_k_loop_matmul_is_priced_by_its_declaration():
    case = matmul_case(128, 128, 128)
    got = _cycles_by_name(record_kernel(case.kernel, case.inputs, case.outputs, params=case.params))
    tile_bytes = 128 * 128 * 2  # a 128 x 128 f16 tile
    assert got["copy_gm2l1_nd2nz"] == GM_READ + tile_bytes // MTE2_BPC  # 1212, of which 188 in flight
    assert got["copy_l12l0a"] == np.ceil(MTE1_FIXED + tile_bytes // L0A_BPC)  # 152
    assert got["copy_l12l0b"] == np.ceil(MTE1_FIXED + tile_bytes // L0B_T_BPC)  # transposed: 280
    assert got["mmad"] == HEAD + 128**3 // F16_MACS  # 573
    # the fixed cost, 64 fractals of 8 cycles, then the GM write: 703
    assert got["fixpipe"] == np.ceil(FIX_FIXED + (128 // 16) ** 2 * (256 // FIX_F32) + GM_WRITE)
    assert got["set_flag"] == got["wait_flag"] == 1  # the latency is the edge's


def test_costs_change_the_record_and_a_slower_gm_shows_in_the_timeline():
    case = matmul_case(128, 128, 128)
    slow = aj.default_costs(aj.get_chip("a2")).replace(gm_read_latency_cycles=2 * GM_READ)
    got = _cycles_by_name(record_kernel(case.kernel, case.inputs, case.outputs, params=case.params, costs=slow))
    assert got["copy_gm2l1_nd2nz"] == 2 * GM_READ + 128 * 128 * 2 // MTE2_BPC
    fast = aj.check(case.kernel, case.inputs, case.outputs, params=case.params)
    slower = aj.check(case.kernel, case.inputs, case.outputs, params=case.params, costs=slow)
    assert fast.verdict is slower.verdict is aj.Verdict.OK
    assert int(np.max(slower.result.end)) > int(np.max(fast.result.end))


def test_a_load_flag_store_chain_takes_the_hand_computed_cycles():
    """AIV0: GM -> UB (MTE2), SetFlag MTE2 -> MTE3, WaitFlag, UB -> GM (MTE3): the set starts as the load lands,
    the wait the flag latency after the set and the store after the wait, so the store ends at the sum."""

    def kernel(k):
        ub = k.alloc("UB", (32, 32), "float32")
        with k.vector(0):
            k.copy_gm2ub(ub, "x")
            k.sync_notify("MTE2", "MTE3", 0)
            k.sync_wait("MTE2", "MTE3", 0)
            k.copy_ub2gm("y", ub)

    x = np.zeros((32, 32), np.float32)
    found = aj.check(kernel, {"x": x}, {"y": ((32, 32), "float32")})
    assert found.verdict is aj.Verdict.OK
    nbytes = 32 * 32 * 4
    load = GM_READ + nbytes // MTE2_BPC  # 316
    store = GM_WRITE + nbytes // MTE3_BPC  # 231
    assert int(np.max(found.result.end)) == load + 1 + FLAG + 1 + store  # 601


def test_a_deadlock_says_how_many_cycles_ran_until_the_hang():
    case = aj.build_case("kernels/phases.py", "two_tile_pattern_with_eight_tiles")
    found = aj.check(case.kernel, case.inputs, case.outputs, params=case.params)
    assert found.verdict is aj.Verdict.DEADLOCK
    last = int(np.max(found.result.end))
    assert f"DEADLOCK: no pipe can go on after {last} cycles" in str(found)


@pytest.mark.parametrize("name", sorted(isa.instructions()))
def test_every_instruction_that_computes_has_a_price(name):
    instr = isa.instructions()[name]
    computes = instr.kind not in (InstrKind.FLAG, InstrKind.BARRIER, InstrKind.CROSS_CORE)
    assert (instr.cycles is not None) == computes, f"{name}: a {instr.kind} instruction"
