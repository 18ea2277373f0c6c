"""The timing model's inputs: the per-chip cost table, and the cycles one instruction takes on its pipe.

Every ``Costs`` field is an array, so a sweep may vary it and ``jax.grad`` differentiate with
respect to it. The cycle functions are the single place an instruction's price is written: the
record takes each issue's cycles from them.
"""

from __future__ import annotations

import functools

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._options import SyncLatency

# cube rate classes (Costs.cube_macs_per_cycle is indexed by these)
CUBE_F16, CUBE_INT8, CUBE_F32, CUBE_FP8, CUBE_INT4, CUBE_MX_FP8, CUBE_MX_FP4 = 0, 1, 2, 3, 4, 5, 6
_CUBE_CLASS = {
    "float16": CUBE_F16,
    "bfloat16": CUBE_F16,
    "int8": CUBE_INT8,
    "float32": CUBE_F32,
    "float8_e4m3fn": CUBE_FP8,
    "float8_e5m2": CUBE_FP8,
    "hifloat8": CUBE_FP8,
    "int4": CUBE_INT4,
}
_MX_CUBE_CLASS = {
    "float8_e4m3fn": CUBE_MX_FP8,
    "float8_e5m2": CUBE_MX_FP8,
    "float4_e2m1fn": CUBE_MX_FP4,
    "float4_e1m2": CUBE_MX_FP4,
}
# fixpipe output classes (Costs.fix_elements_per_cycle)
FIX_F32, FIX_F16, FIX_INT32, FIX_B8 = 0, 1, 2, 3
_FIX_CLASS = {
    "float32": FIX_F32,
    "float16": FIX_F16,
    "bfloat16": FIX_F16,
    "int32": FIX_INT32,
    "int8": FIX_B8,
    "uint8": FIX_B8,  # also HiFloat8 codes
    "float8_e4m3fn": FIX_B8,
    "hifloat8": FIX_B8,
}


def cube_class(dtype: str, mx: bool = False) -> int:
    """Rate class of an mmad whose A operand is ``dtype`` (``mx``: an MmadMx with E8M0 scales)."""
    return (_MX_CUBE_CLASS if mx else _CUBE_CLASS)[dtype]


def fix_class(dtype: str) -> int:
    return _FIX_CLASS[dtype]


class Costs(eqx.Module):
    """Per-chip cost table. Every field is an array (sweepable); sources are in ``default_costs``."""

    cube_macs_per_cycle: Float[Array, " 7"]  # f16/bf16, int8, f32, fp8/hif8, int4, MX fp8, MX fp4
    mmad_head_cycles: Float[Array, ""]
    mte2_bytes_per_cycle: Float[Array, ""]
    gm_read_latency_cycles: Float[Array, ""]
    l1_to_l0a_bytes_per_cycle: Float[Array, ""]
    l1_to_l0b_bytes_per_cycle: Float[Array, ""]
    l1_to_l0b_transposed_bytes_per_cycle: Float[Array, ""]
    l1_to_bt_bytes_per_cycle: Float[Array, ""]
    l1_to_scale_bytes_per_cycle: Float[Array, ""]  # L1 -> ScaleLeft / ScaleRight (MX scales)
    fix_elements_per_cycle: Float[Array, " 4"]  # output f32, f16/bf16, int32, 8-bit (int8/uint8/fp8/hif8)
    mte3_bytes_per_cycle: Float[Array, ""]  # UB -> GM (vector cores)
    ub_to_l1_bytes_per_cycle: Float[Array, ""]  # UB -> L1 insert (MTE3)
    vector_bytes_per_cycle: Float[Array, ""]  # add / mul / max class (vector cores)
    vector_transcendental_elements_per_cycle: Float[Array, ""]  # exp / ln / sqrt / div class
    gm_write_latency_cycles: Float[Array, ""]
    gm_bytes_per_cycle: Float[Array, ""]  # the chip's GM (HBM) bandwidth, shared by the cores of a launch
    mte1_fixed_cycles: Float[Array, ""]  # per MTE1 copy, before its bytes
    fix_fixed_cycles: Float[Array, ""]  # per fixpipe / L0C -> UB move, before its fractals
    vector_fixed_cycles: Float[Array, ""]  # per V instruction, before its elements
    flag_latency_cycles: Float[Array, ""]
    cross_core_latency_cycles: Float[Array, ""]
    unit_flag_latency_cycles: Float[Array, ""]
    scalar_cycles: Float[Array, ""]

    def replace(self, **changes) -> Costs:
        """A copy with some costs changed (values become float32 arrays)."""
        return eqx.tree_at(
            lambda c: [getattr(c, k) for k in changes], self, [jnp.asarray(v, jnp.float32) for v in changes.values()]
        )


@functools.cache
def default_costs(chip) -> Costs:
    """The cost table of a chip; each number's source is given beside it (facts = ascend-facts.md). Made once per chip
    (every run without ``costs`` takes it), of read-only host arrays."""

    def f(x):  # host arrays: a default table is never a tracer
        a = np.array(x, np.float32)
        a.flags.writeable = False
        return a

    arch_3510 = chip.arch == "3510"
    return Costs(
        # facts §7 "Cube per cycle": f16/bf16 16x16x16, int8 16x16x32; f32 16x16x4 (2201) / 16x16x1 (3510);
        # fp8/hif8 16x16x32 (3510); int4 16x16x64 (2201); MX fp8 16x16x32 and MX fp4 16x16x64 (3510). A class
        # the chip lacks is never read (its dtype check fails first); it carries the other chip's figure
        cube_macs_per_cycle=f([4096, 8192, 256 if arch_3510 else 1024, 8192, 16384, 8192, 16384]),
        # fitted to calibration kernel 1 (docs/timing.md, one AIC, 8192^3 half, 64^3 base blocks): 125 cycles per
        # dependent mmad = 64 of compute + 61 of head; an mmad that streams behind another on M pays none
        mmad_head_cycles=f(61),
        # facts §7 platform ini ddr_rate: 32 B/cycle (910B), 31 (950PR)
        mte2_bytes_per_cycle=f(31 if arch_3510 else 32),
        # fitted to calibration kernel 2 (one AIV, z = x + y, 8 KB single-buffered copies): its MTE2 time of
        # 700 cycles per tile (two 8 KB reads in flight together: 2 x 256 at 32 B/cycle, then the latency). In
        # flight: a request leaves MTE2 after its bytes, so latencies overlap
        gm_read_latency_cycles=f(188),
        # facts §7 MTE1: L1->L0A 256 B/cycle; L1->L0B 128 (2201) / 256 (3510); transposed 128; L1->BT 32
        l1_to_l0a_bytes_per_cycle=f(256),
        l1_to_l0b_bytes_per_cycle=f(256 if arch_3510 else 128),
        l1_to_l0b_transposed_bytes_per_cycle=f(128),
        l1_to_bt_bytes_per_cycle=f(32),
        l1_to_scale_bytes_per_cycle=f(32),  # facts §7 MTE1: MX scales 32 B/cycle (3510)
        # facts §7 Fixpipe: f32 no-quant 32 el/cycle and f16/bf16 64 el/cycle (3510); 2201 f32->f16 64 el/cycle,
        # f32 and int32 without quantisation: estimate, the 3510 figure (32 el/cycle); 8-bit outputs 64 el/cycle
        # (3510 fp8/hif8/int8, 2201 f32->int8)
        fix_elements_per_cycle=f([32, 64, 32, 64]),
        mte3_bytes_per_cycle=f(64),  # facts §7 A2 platform ini ub->ddr 64 B/cycle (950: same, estimate)
        ub_to_l1_bytes_per_cycle=f(128),  # facts §7: A2 platform ini ub->l1 128; 3510 UB->L1 128
        vector_bytes_per_cycle=f(256),  # facts §7 Vector: 256 B/cycle (A2/A3), 256 B per beat (950)
        vector_transcendental_elements_per_cycle=f(32),  # facts §7: Exp/Ln/Sqrt/Div 32 el/cycle (A2/A3)
        # fitted to calibration kernel 2: MTE3 time of 295 cycles per 8 KB write = 128 at 64 B/cycle + the latency
        gm_write_latency_cycles=f(167),
        # estimate: no authoritative HBM figure (facts §7). A2/A3 about 1.5 TB/s (32 B/cycle x 24 cores x 1.85 GHz
        # is 1.4 TB/s) = 811 B/cycle at 1.85 GHz; 950PR 1.6 TB/s (press, low confidence) = 970 at 1.65 GHz
        gm_bytes_per_cycle=f(970 if arch_3510 else 811),
        # fitted to calibration kernel 1: MTE1 143 cycles per 8 KB L0A + 8 KB L0B = 32 + 64 bytes-cycles + 2 x 23.5
        mte1_fixed_cycles=f(23.5),
        fix_fixed_cycles=f(23.5),  # estimate: no published figure; the MTE1 fixed cost (both are cube DMA engines)
        # fitted to calibration kernel 2: 86 cycles per 4096-element half Add = 32 at 256 B/cycle + 54
        vector_fixed_cycles=f(54),
        # estimate: no published figure for an intra-core flag; the unit-flag latency below (both are one flag
        # bit's hand-off between two pipes of the cube)
        flag_latency_cycles=f(52),
        # estimate: no published figure for a cross-core event; the intra-core flag latency above
        cross_core_latency_cycles=f(52),
        # derived from the published unit-flag measurement (facts §1), its only constant: 4209 - 4157 (the
        # 4096 cycles of eight streaming mmads and one 61-cycle head)
        unit_flag_latency_cycles=f(52),
        scalar_cycles=f(1),  # estimate: one scalar instruction
    )


#: Rows (and columns) of one cube fractal, and the elements the fixpipe drains as one unit.
FRACTAL_ROWS = 16
FRACTAL_ELEMENTS = FRACTAL_ROWS * FRACTAL_ROWS


def _ceil_to(x, unit: int):
    return (jnp.asarray(x) + unit - 1) // unit * unit


def transfer_cycles(nbytes, bytes_per_cycle, latency_cycles=0.0):
    """A copy of ``nbytes`` at ``bytes_per_cycle``, then ``latency_cycles`` (the GM latency of an MTE2 / MTE3
    transfer, in flight once the bytes have left the pipe; none on chip)."""
    return latency_cycles + nbytes / bytes_per_cycle


def gm_read_flight(costs: Costs, arguments=None, gm_dtypes=None):
    """A GM read is in flight for the read latency after it leaves MTE2 (an ``Instruction.flight``)."""
    return costs.gm_read_latency_cycles


def gm_write_flight(costs: Costs, arguments=None, gm_dtypes=None):
    """A GM write is in flight for the write latency after it leaves MTE3 or FIX (an ``Instruction.flight``)."""
    return costs.gm_write_latency_cycles


def mmad_cycles(costs: Costs, a_dtype: str, k0: int, m, k, n, *, mx: bool = False):
    """The cube's compute for an ``m x k x n`` mmad: its sizes padded to whole fractals (16, ``k0``, 16) at the MAC
    rate of ``a_dtype`` (an MmadMx: of its MX class). Excludes the head (``Costs.mmad_head_cycles``)."""
    macs = _ceil_to(m, FRACTAL_ROWS) * _ceil_to(n, FRACTAL_ROWS) * _ceil_to(k, k0)
    return macs.astype(jnp.float32) / costs.cube_macs_per_cycle[cube_class(a_dtype, mx)]


def fix_fractal_cycles(costs: Costs, out_dtype: str):
    """The FIX pipe's time for one 16 x 16 fractal of L0C converted to ``out_dtype``."""
    return FRACTAL_ELEMENTS / costs.fix_elements_per_cycle[fix_class(out_dtype)]


def fixpipe_cycles(costs: Costs, out_dtype: str, m, n):
    """A fixpipe of an ``m x n`` region of L0C to GM: the FIX fixed cost, its fractals drained one after another,
    then the GM write latency, in flight (without waiting for any unit flag: what the drain costs on its own)."""
    fractals = _ceil_to(m, FRACTAL_ROWS) * _ceil_to(n, FRACTAL_ROWS) // FRACTAL_ELEMENTS
    return costs.fix_fixed_cycles + fractals * fix_fractal_cycles(costs, out_dtype) + costs.gm_write_latency_cycles


def l0c_to_ub_cycles(costs: Costs, out_dtype: str, elements):
    """A move of ``elements`` out of L0C into UB (the larger part when it feeds both AIVs at once)."""
    return (
        costs.fix_fixed_cycles + elements / costs.fix_elements_per_cycle[FIX_F32 if out_dtype == "float32" else FIX_F16]
    )


def vector_cycles(costs: Costs, elements: int, itemsize: int, transcendental: bool):
    """A V instruction over ``elements`` of ``itemsize`` bytes: the vector fixed cost, then bytes at the vector
    width, or elements at the exp / ln / sqrt / div rate; at least one cycle."""
    if transcendental:
        cycles = elements / costs.vector_transcendental_elements_per_cycle
    else:
        cycles = elements * itemsize / costs.vector_bytes_per_cycle
    return jnp.maximum(costs.vector_fixed_cycles + cycles, 1.0)


def sync_latency(costs: Costs) -> SyncLatency:
    """The control plane's latency of each sync edge kind, in whole cycles, from the cost table."""

    def whole(x):
        return jnp.ceil(jnp.asarray(x, jnp.float32)).astype(jnp.int32)

    return SyncLatency(
        flag_cycles=whole(costs.flag_latency_cycles),
        unit_flag_cycles=whole(costs.unit_flag_latency_cycles),
        cross_core_cycles=whole(costs.cross_core_latency_cycles),
    )
