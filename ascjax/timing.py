"""Cycle timing model: a clock per pipe, costs from a per-chip table, and an event trace.

An executed op starts at the later of its pipe's clock and the times its waits are
satisfied (a SetFlag's set time plus the flag latency, the unit-flag blocks it waits for,
a barrier), and ends after its cost. A blocked pipe stops counting. Costs are arrays in a
``Costs`` module, so a ``vmap`` can sweep them and ``jax.grad`` can differentiate the
cycle count with respect to them.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from . import indexed
from .core import N_CORES
from .hazards import N_GLOBAL_PIPES

# why an op waited (events carry it)
REASON_NONE, REASON_FLAG, REASON_UNIT_FLAG, REASON_BARRIER, REASON_AUTO_SYNC, REASON_CROSS_CORE = 0, 1, 2, 3, 4, 5
REASONS = ("", "flag", "unit flag", "barrier", "auto sync", "cross-core event")
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
    flag_latency_cycles: Float[Array, ""]
    cross_core_latency_cycles: Float[Array, ""]
    unit_flag_latency_cycles: Float[Array, ""]
    scalar_cycles: Float[Array, ""]

    def replace(self, **changes) -> Costs:
        """A copy with some costs changed (values become float32 arrays)."""
        return eqx.tree_at(
            lambda c: [getattr(c, k) for k in changes], self, [jnp.asarray(v, jnp.float32) for v in changes.values()]
        )


def default_costs(chip) -> Costs:
    """The cost table of a chip; each number's source is given beside it (facts = ascend-facts.md)."""
    f = lambda x: jnp.asarray(x, jnp.float32)  # noqa: E731
    arch_3510 = chip.arch == "3510"
    return Costs(
        # facts §7 "Cube per cycle": f16/bf16 16x16x16, int8 16x16x32; f32 16x16x4 (2201) / 16x16x1 (3510);
        # fp8/hif8 16x16x32 (3510); int4 16x16x64 (2201); MX fp8 16x16x32 and MX fp4 16x16x64 (3510). A class
        # the chip lacks is never read (its dtype check fails first); it carries the other chip's figure
        cube_macs_per_cycle=f([4096, 8192, 256 if arch_3510 else 1024, 8192, 16384, 8192, 16384]),
        # facts §7: 4156 = 4096 + 60 in the published unit-flag measurement (a head paid once per run of mmads)
        mmad_head_cycles=f(60),
        # facts §7 platform ini ddr_rate: 32 B/cycle (910B), 31 (950PR)
        mte2_bytes_per_cycle=f(31 if arch_3510 else 32),
        # facts §7 PyPTO cost model: GM read 1400 cycles, write 300
        gm_read_latency_cycles=f(1400),
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
        gm_write_latency_cycles=f(300),  # facts §7 PyPTO cost model
        # fitted to the published unit-flag measurement (facts §1): 4225 - 4156 cycles without the unit flag
        # (M -> FIX software sync) and 4209 - 4156 with it; see docs/timing.md
        flag_latency_cycles=f(69),
        # estimate: no published figure for a cross-core event; the intra-core flag latency above
        cross_core_latency_cycles=f(69),
        unit_flag_latency_cycles=f(53),
        scalar_cycles=f(1),  # estimate: one scalar instruction
    )


class Timeline(eqx.Module):
    """Per-pipe clocks and counters, sync-edge times, and the fixed-shape event buffer."""

    pipe_t: Float[Array, " G"]  # cycle at which each pipe is free
    busy: Float[Array, " G"]
    stall: Float[Array, " G"]
    flag_t: Float[Array, "C P P E"]  # when each SetFlag bit was set, per core
    xc_t: Float[Array, "C C X"]  # when each cross-core cell (receiver, sender, id) was last set
    uf_t: Float[Array, " B"]  # when each L0C block's unit flag last flipped
    auto_t: Float[Array, " B"]  # when the framework's M -> FIX sync was set per block
    cube_ideal: Float[Array, ""]  # cycles the mmads' valid MACs take at peak
    mmad_end: Float[Array, ""]  # when the last mmad ended (a back-to-back mmad pays no head)
    ev_op: Int[Array, " E"]
    ev_pipe: Int[Array, " E"]
    ev_start: Float[Array, " E"]
    ev_end: Float[Array, " E"]
    ev_reason: Int[Array, " E"]
    ev_from: Int[Array, " E"]  # the op whose signal this op waited for (-1: none)
    ev_count: Int[Array, ""]  # events recorded (may exceed the buffer: then it was truncated)

    @staticmethod
    def empty(n_flag_shape: tuple, n_blocks: int, n_cross_ids: int, max_events: int) -> Timeline:
        z = jnp.zeros((N_GLOBAL_PIPES,), jnp.float32)
        e = max_events
        return Timeline(
            pipe_t=z,
            busy=z,
            stall=z,
            flag_t=jnp.zeros(n_flag_shape, jnp.float32),
            xc_t=jnp.zeros((N_CORES, N_CORES, n_cross_ids), jnp.float32),
            uf_t=jnp.zeros((n_blocks,), jnp.float32),
            auto_t=jnp.zeros((n_blocks,), jnp.float32),
            cube_ideal=jnp.zeros((), jnp.float32),
            mmad_end=jnp.full((), -1.0, jnp.float32),
            ev_op=jnp.full((e,), -1, jnp.int32),
            ev_pipe=jnp.zeros((e,), jnp.int32),
            ev_start=jnp.zeros((e,), jnp.float32),
            ev_end=jnp.zeros((e,), jnp.float32),
            ev_reason=jnp.zeros((e,), jnp.int32),
            ev_from=jnp.full((e,), -1, jnp.int32),
            ev_count=jnp.zeros((), jnp.int32),
        )


def schedule(state, g: int, op: int, active, cost, ready=0.0, reason=REASON_NONE, from_op=-1):
    """Run an op on global pipe ``g``: returns (state, start, end). Nothing changes when not ``active``."""
    t: Timeline = state.time
    prev = t.pipe_t[g]
    start = jnp.maximum(prev, ready)
    end = start + cost
    act = jnp.asarray(active)
    new = eqx.tree_at(
        lambda x: (x.pipe_t, x.busy, x.stall),
        t,
        (
            indexed.put(t.pipe_t, g, end, act),
            indexed.add(t.busy, g, jnp.where(act, cost, 0.0)),
            indexed.add(t.stall, g, jnp.where(act, start - prev, 0.0)),
        ),
    )
    if t.ev_op.shape[0]:
        i = jnp.minimum(t.ev_count, t.ev_op.shape[0] - 1)
        keep = act & (t.ev_count < t.ev_op.shape[0])

        def put(arr, value):
            return indexed.put(arr, i, value, keep)

        new = eqx.tree_at(
            lambda x: (x.ev_op, x.ev_pipe, x.ev_start, x.ev_end, x.ev_reason, x.ev_from, x.ev_count),
            new,
            (
                put(new.ev_op, op),
                put(new.ev_pipe, g),
                put(new.ev_start, start),
                put(new.ev_end, end),
                put(new.ev_reason, jnp.where(start > prev, reason, REASON_NONE)),
                put(new.ev_from, from_op),
                new.ev_count + act.astype(jnp.int32),
            ),
        )
    return eqx.tree_at(lambda s: s.time, state, new), start, end


def drain(start, ready, present, per_unit):
    """A pipe that processes units in order, unit j no earlier than ``ready[j]``: each unit's finish time.

    ``present`` masks the units that exist; each takes ``per_unit`` cycles. Closed form of
    T_j = max(T_{j-1}, ready_j) + d, with T_{-1} = start.
    """
    d = jnp.where(present, per_unit, 0.0)
    done = jnp.cumsum(d)
    before = done - d
    slack = jax.lax.cummax(jnp.where(present, ready - before, -jnp.inf))
    return done + jnp.maximum(start, slack)
