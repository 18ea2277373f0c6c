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
from .engine import Costs as Costs
from .engine import cube_class as cube_class
from .engine import default_costs as default_costs
from .engine import fix_class as fix_class
from .hazards import N_GLOBAL_PIPES

# why an op waited (events carry it)
REASON_NONE, REASON_FLAG, REASON_UNIT_FLAG, REASON_BARRIER, REASON_AUTO_SYNC, REASON_CROSS_CORE = 0, 1, 2, 3, 4, 5
REASONS = ("", "flag", "unit flag", "barrier", "auto sync", "cross-core event")


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
