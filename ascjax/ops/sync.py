"""Intra-core software sync: ``sync_notify`` / ``sync_wait`` (SetFlag / WaitFlag) and ``sync_pipe`` barriers.

A flag is one bit per (source pipe, destination pipe, event id). Notify sets it without
blocking (setting a bit that is already 1 is undefined on hardware: a SYNC_ERROR); wait
blocks the destination pipe while it is 0, then clears it.
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp

from .. import hazards, indexed, sites, timing
from ..core import (
    AIC,
    AIC_FLAG_PAIRS,
    AIV_FLAG_PAIRS,
    CORE_NAMES,
    N_PIPES,
    SYNC_EVENT_RANGE,
    SYNC_SET_TWICE,
    Pipe,
    Verdict,
)
from ..state import State, WaitKind, flag_slot
from ._machine import block, clock_op, core_of, event_id_int, fail, hint_release, issue
from .move import _need


def _pair(state: State, src, dst, event_id, what: str, core: int):
    src, dst = Pipe.parse(src), Pipe.parse(dst)
    legal = AIC_FLAG_PAIRS if core == AIC else AIV_FLAG_PAIRS
    _need(
        (src, dst) in legal,
        f"rule 'flag pipes': {what}({src} -> {dst}) is not a legal pair on the {CORE_NAMES[core][:3]}; legal: "
        + ", ".join(f"{a}->{b}" for a, b in sorted(legal))
        + ("" if core == AIC else " (cube pipes M/MTE1/FIX are not on a vector core; use a cross-core event)"),
    )
    ev = event_id_int(event_id, f"{what}({src} -> {dst})")
    n = state.chip.intra_event_ids
    if ev is not None:
        _need(0 <= ev < n, f"rule 'event id range': event_id {ev} is outside [0, {n}) on chip {state.chip.name}")
    return src, dst


def _event(state: State, active, op, pipe, event_id, core: int):
    """Range check of a (possibly traced) event id; returns state, ok bit and a safe index."""
    n = state.chip.intra_event_ids
    ev = jnp.asarray(event_id, jnp.int32)
    ok = (ev >= 0) & (ev < n)
    state = fail(state, active & ~ok, Verdict.SYNC_ERROR, op, pipe, a=SYNC_EVENT_RANGE, b=ev, c=n, core=core)
    return state, ok, jnp.clip(ev, 0, n - 1)


def sync_notify(state: State, src, dst, event_id, *, sub: int | None = None) -> State:
    """``asc_sync_notify`` / ``SetFlag<SRC_DST>(id)``: on pipe ``src``, set the flag for ``dst``.

    ``sub`` None: on the AIC; 0 or 1: on that AIV (its own flags and pipes).
    """
    core = core_of(sub)
    src, dst = _pair(state, src, dst, event_id, "sync_notify", core)
    if state.data_only:  # the data plane: the static checks above are all a sync instruction has
        return state
    op = sites.register("sync_notify", src, f"{src} -> {dst} event {event_id}", core=core)
    state, active = issue(state, src, core, data=False)
    state, ok, ev = _event(state, active, op, src, event_id, core)
    run = active & ok
    f = state.flags
    at = (core, src, dst, ev)
    already = f.bits[at]
    state = fail(
        state, run & already, Verdict.SYNC_ERROR, op, src, a=SYNC_SET_TWICE, b=ev, c=int(src) * 8 + int(dst), core=core
    )
    w = state.wait
    g_dst = hazards.gpipe(core, dst)
    releases = (
        run
        & (jnp.arange(w.op.shape[0]) == g_dst)
        & (w.kind == WaitKind.FLAG)
        & (w.lo == int(src))
        & (w.hi == int(dst))
        & (w.count == ev)
    )
    state = hint_release(state, releases, op)
    # the flag carries the notifier's clock: everything src did before is ordered before the wait
    new = type(f)(
        bits=indexed.put(f.bits, at, already | run),
        op=indexed.put(f.op, at, op, run),
        vc=indexed.put(f.vc, (flag_slot(core, src, dst), ev), hazards.clock(state, core, src), run),
    )
    state, _, set_at = clock_op(state, src, op, run, 0.0, core=core)  # sets once src's earlier work is done
    flag_t = indexed.put(state.time.flag_t, at, set_at, run)
    return eqx.tree_at(lambda s: (s.flags, s.time.flag_t), state, (new, flag_t))


def sync_wait(state: State, src, dst, event_id, *, sub: int | None = None) -> State:
    """``asc_sync_wait`` / ``WaitFlag<SRC_DST>(id)``: pipe ``dst`` waits for the flag, then clears it."""
    core = core_of(sub)
    src, dst = _pair(state, src, dst, event_id, "sync_wait", core)
    if state.data_only:  # the data plane: the static checks above are all a sync instruction has
        return state
    op = sites.register("sync_wait", dst, f"{src} -> {dst} event {event_id}", core=core)
    state, active = issue(state, dst, core, data=False)
    state, ok, ev = _event(state, active, op, dst, event_id, core)
    run = active & ok
    f = state.flags
    at = (core, src, dst, ev)
    is_set = f.bits[at]
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
        last_op=f.op[at],
        core=core,
    )
    bits = indexed.put(f.bits, at, is_set & ~run)
    state = hazards.join(state, core, dst, f.vc[flag_slot(core, src, dst), ev], when=run & is_set)
    ready = state.time.flag_t[at] + state.costs.flag_latency_cycles
    state, _, _ = clock_op(state, dst, op, run & is_set, 0.0, ready, timing.REASON_FLAG, f.op[at], core=core)
    return eqx.tree_at(lambda s: s.flags.bits, state, bits)


def sync_pipe(state: State, pipe, *, sub: int | None = None) -> State:
    """``asc_sync_pipe`` / ``PipeBarrier<pipe>``: order one pipe, or with "ALL" wait for every pipe.

    PIPE_ALL orders every later op of the core after every earlier one; behind a blocked pipe
    it never completes and blocks the scalar unit (and so every pipe). A single-pipe barrier
    orders that pipe's own ops, which only matters for the M pipe's small-tile rule.
    """
    core = core_of(sub)
    if str(pipe).upper().removeprefix("PIPE_") == "ALL":
        if state.data_only:
            return state
        op = sites.register("sync_pipe", Pipe.S, "PIPE_ALL", core=core)
        state, active = issue(state, Pipe.S, core, data=False)
        w = state.wait
        pipes = slice(hazards.gpipe(core, 0), hazards.gpipe(core, 0) + N_PIPES)
        stuck = w.blocked[pipes] & (jnp.arange(N_PIPES) != int(Pipe.S))
        first = jnp.argmin(jnp.where(stuck, w.seq[pipes], jnp.iinfo(jnp.int32).max))
        state = block(
            state, active & jnp.any(stuck), Pipe.S, op, WaitKind.BARRIER, first, last_op=w.op[pipes][first], core=core
        )
        done = active & ~jnp.any(stuck)
        t = state.time.pipe_t[pipes]
        state, _, end = clock_op(state, Pipe.S, op, done, 0.0, jnp.max(t), timing.REASON_BARRIER, core=core)
        pipe_t = state.time.pipe_t.at[pipes].set(jnp.where(done, jnp.maximum(state.time.pipe_t[pipes], end), t))
        state = eqx.tree_at(lambda s: s.time.pipe_t, state, pipe_t)
        if state.options.sanitize:
            merged = jnp.max(state.vc[pipes], axis=0)
            vc = state.vc.at[pipes].set(jnp.where(done, jnp.maximum(state.vc[pipes], merged[None, :]), state.vc[pipes]))
            state = eqx.tree_at(lambda s: s.vc, state, vc)
        return state
    pipe = Pipe.parse(pipe)
    _need(pipe is not Pipe.S, "rule 'barrier pipe': PipeBarrier orders one pipe or PIPE_ALL, not PIPE_S")
    if state.data_only:
        return state
    op = sites.register("sync_pipe", pipe, f"PIPE_{pipe}", core=core)
    state, active = issue(state, pipe, core, data=False)
    state, _, _ = clock_op(state, pipe, op, active, 0.0, core=core)
    if pipe is Pipe.M and core == AIC and state.options.sanitize:  # the small-tile rule's clock
        own = hazards.clock(state, AIC, Pipe.M)[hazards.gpipe(AIC, Pipe.M)]
        state = eqx.tree_at(lambda s: s.aic.m_barrier, state, jnp.where(active, own, state.aic.m_barrier))
    return state
