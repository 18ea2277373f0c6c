"""Intra-core software sync: ``sync_notify`` / ``sync_wait`` (SetFlag / WaitFlag) and ``sync_pipe`` barriers.

A flag is one bit per (source pipe, destination pipe, event id). Notify sets it without
blocking (setting a bit that is already 1 is undefined on hardware: a SYNC_ERROR); wait
blocks the destination pipe while it is 0, then clears it.
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp

from .. import hazards, sites, timing
from ..hazards import AIC
from ..kinds import AIC_FLAG_PAIRS, N_PIPES, Pipe
from ..results import SYNC_EVENT_RANGE, SYNC_SET_TWICE, Verdict
from ..state import State, WaitKind
from ._machine import block, clock_op, fail, hint_release, issue, static_int
from .move import _need


def _pair(state: State, src, dst, event_id, what: str):
    src, dst = Pipe.parse(src), Pipe.parse(dst)
    _need(
        (src, dst) in AIC_FLAG_PAIRS,
        f"rule 'flag pipes': {what}({src} -> {dst}) is not a legal pair on the AIC; legal: "
        + ", ".join(f"{a}->{b}" for a, b in sorted(AIC_FLAG_PAIRS)),
    )
    ev = static_int(event_id)
    n = state.chip.intra_event_ids
    if ev is not None:
        _need(0 <= ev < n, f"rule 'event id range': event_id {ev} is outside [0, {n}) on chip {state.chip.name}")
    return src, dst


def _event(state: State, active, op, pipe, event_id):
    """Range check of a (possibly traced) event id; returns state, ok bit and a safe index."""
    n = state.chip.intra_event_ids
    ev = jnp.asarray(event_id, jnp.int32)
    ok = (ev >= 0) & (ev < n)
    state = fail(state, active & ~ok, Verdict.SYNC_ERROR, op, pipe, a=SYNC_EVENT_RANGE, b=ev, c=n)
    return state, ok, jnp.clip(ev, 0, n - 1)


def sync_notify(state: State, src, dst, event_id) -> State:
    """``asc_sync_notify`` / ``SetFlag<SRC_DST>(id)``: on pipe ``src``, set the flag for ``dst``."""
    src, dst = _pair(state, src, dst, event_id, "sync_notify")
    op = sites.register("sync_notify", src, f"{src} -> {dst} event {event_id}")
    state, active = issue(state, src)
    state, ok, ev = _event(state, active, op, src, event_id)
    run = active & ok
    aic = state.aic
    already = aic.flags[src, dst, ev]
    state = fail(state, run & already, Verdict.SYNC_ERROR, op, src, a=SYNC_SET_TWICE, b=ev, c=int(src) * 8 + int(dst))
    w = state.aic.wait
    releases = run & (w.kind == WaitKind.FLAG) & (w.lo == int(src)) & (w.hi == int(dst)) & (w.count == ev)
    state = hint_release(state, releases, op)
    flags = aic.flags.at[src, dst, ev].set(aic.flags[src, dst, ev] | run)
    flag_op = aic.flag_op.at[src, dst, ev].set(jnp.where(run, op, aic.flag_op[src, dst, ev]))
    # the flag carries the notifier's clock: everything src did before is ordered before the wait
    flag_vc = aic.flag_vc.at[src, dst, ev].set(
        jnp.where(run, hazards.clock(state, AIC, src), aic.flag_vc[src, dst, ev])
    )
    state, _, set_at = clock_op(state, src, op, run, 0.0)  # sets once src's earlier work is done
    flag_t = state.time.flag_t.at[src, dst, ev].set(jnp.where(run, set_at, state.time.flag_t[src, dst, ev]))
    return eqx.tree_at(
        lambda s: (s.aic.flags, s.aic.flag_op, s.aic.flag_vc, s.time.flag_t), state, (flags, flag_op, flag_vc, flag_t)
    )


def sync_wait(state: State, src, dst, event_id) -> State:
    """``asc_sync_wait`` / ``WaitFlag<SRC_DST>(id)``: pipe ``dst`` waits for the flag, then clears it."""
    src, dst = _pair(state, src, dst, event_id, "sync_wait")
    op = sites.register("sync_wait", dst, f"{src} -> {dst} event {event_id}")
    state, active = issue(state, dst)
    state, ok, ev = _event(state, active, op, dst, event_id)
    run = active & ok
    aic = state.aic
    is_set = aic.flags[src, dst, ev]
    state = block(
        state,
        run & ~is_set,
        dst,
        op,
        WaitKind.FLAG,
        1,
        lo=int(src),
        hi=int(dst),
        count=ev,
        last_op=aic.flag_op[src, dst, ev],
    )
    flags = aic.flags.at[src, dst, ev].set(is_set & ~run)
    state = hazards.join(state, AIC, dst, aic.flag_vc[src, dst, ev], when=run & is_set)
    ready = state.time.flag_t[src, dst, ev] + state.costs.flag_latency_cycles
    state, _, _ = clock_op(state, dst, op, run & is_set, 0.0, ready, timing.REASON_FLAG, aic.flag_op[src, dst, ev])
    return eqx.tree_at(lambda s: s.aic.flags, state, flags)


def sync_pipe(state: State, pipe) -> State:
    """``asc_sync_pipe`` / ``PipeBarrier<pipe>``: order one pipe, or with "ALL" wait for every pipe.

    PIPE_ALL orders every later op of the core after every earlier one; behind a blocked pipe
    it never completes and blocks the scalar unit (and so every pipe). A single-pipe barrier
    orders that pipe's own ops, which only matters for the M pipe's small-tile rule.
    """
    if str(pipe).upper().removeprefix("PIPE_") == "ALL":
        op = sites.register("sync_pipe", Pipe.S, "PIPE_ALL")
        state, active = issue(state, Pipe.S)
        w = state.aic.wait
        stuck = w.blocked & (jnp.arange(w.op.shape[0]) != int(Pipe.S))
        first = jnp.argmin(jnp.where(stuck, w.seq, jnp.iinfo(jnp.int32).max))
        state = block(state, active & jnp.any(stuck), Pipe.S, op, WaitKind.BARRIER, first, last_op=w.op[first])
        done = active & ~jnp.any(stuck)
        core = slice(hazards.gpipe(AIC, 0), hazards.gpipe(AIC, 0) + N_PIPES)
        state, _, end = clock_op(state, Pipe.S, op, done, 0.0, jnp.max(state.time.pipe_t[core]), timing.REASON_BARRIER)
        pipe_t = state.time.pipe_t.at[core].set(
            jnp.where(done, jnp.maximum(state.time.pipe_t[core], end), state.time.pipe_t[core])
        )
        state = eqx.tree_at(lambda s: s.time.pipe_t, state, pipe_t)
        if state.options.sanitize:
            merged = jnp.max(state.vc[core], axis=0)
            vc = state.vc.at[core].set(jnp.where(done, jnp.maximum(state.vc[core], merged[None, :]), state.vc[core]))
            state = eqx.tree_at(lambda s: s.vc, state, vc)
        return state
    pipe = Pipe.parse(pipe)
    _need(pipe is not Pipe.S, "rule 'barrier pipe': PipeBarrier orders one pipe or PIPE_ALL, not PIPE_S")
    op = sites.register("sync_pipe", pipe, f"PIPE_{pipe}")
    state, active = issue(state, pipe)
    state, _, _ = clock_op(state, pipe, op, active, 0.0)
    if pipe is Pipe.M:
        own = hazards.clock(state, AIC, Pipe.M)[hazards.gpipe(AIC, Pipe.M)]
        state = eqx.tree_at(lambda s: s.aic.m_barrier, state, jnp.where(active, own, state.aic.m_barrier))
    return state
