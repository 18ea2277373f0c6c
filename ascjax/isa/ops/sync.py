"""Intra-core software sync: ``sync_notify`` / ``sync_wait`` (SetFlag / WaitFlag), ``sync_pipe`` barriers and the
buffer-id mutex ``mutex_lock`` / ``mutex_unlock`` (950).

A flag is one bit per (source pipe, destination pipe, event id). Notify sets it without
blocking (setting a bit that is already 1 is undefined on hardware: a finding); wait
blocks the destination pipe while it is 0, then clears it. The flags, the waits and the
barriers are the control plane's (``ascjax.engine``): these data functions check an issue's
static rules (a legal pipe pair, a static event id in range, a barrier's pipe) and compute nothing.
"""

from __future__ import annotations

from ...core import AIC, AIC_FLAG_PAIRS, AIV_FLAG_PAIRS, CORE_NAMES, Pipe, core_pipes
from ...engine._record import N_MUTEX_IDS
from ...engine._state import State
from ._machine import core_of, event_id_int
from .move import _need


def _pair(state: State, src, dst, event_id, what: str, core: int) -> None:
    """The static rules of a flag: a legal (src, dst) pair on ``core``, a static event id in range."""
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


def sync_notify(state: State, src, dst, event_id, *, sub: int | None = None) -> State:
    """``asc_sync_notify`` / ``SetFlag<SRC_DST>(id)``: on pipe ``src``, set the flag for ``dst``.

    ``sub`` None: on the AIC; 0 or 1: on that AIV (its own flags and pipes).
    """
    _pair(state, src, dst, event_id, "sync_notify", core_of(sub))
    return state


def sync_wait(state: State, src, dst, event_id, *, sub: int | None = None) -> State:
    """``asc_sync_wait`` / ``WaitFlag<SRC_DST>(id)``: pipe ``dst`` waits for the flag, then clears it."""
    _pair(state, src, dst, event_id, "sync_wait", core_of(sub))
    return state


def sync_pipe(state: State, pipe, *, sub: int | None = None) -> State:
    """``asc_sync_pipe`` / ``PipeBarrier<pipe>``: order one pipe, or with "ALL" wait for every pipe.

    PIPE_ALL orders every later op of the core after every earlier one; behind a blocked pipe
    it never completes and blocks the scalar unit (and so every pipe). A single-pipe barrier
    orders that pipe's own ops, which only matters for the M pipe's small-tile rule.
    """
    core_of(sub)
    if str(pipe).upper().removeprefix("PIPE_") != "ALL":
        pipe = Pipe.parse(pipe)
        _need(pipe is not Pipe.S, "rule 'barrier pipe': PipeBarrier orders one pipe or PIPE_ALL, not PIPE_S")
    return state


def _mutex(state: State, pipe, mutex_id, what: str, core: int) -> None:
    """The static rules of a mutex lock or unlock: a pipe of ``core``, a static id in range."""
    pipe = Pipe.parse(pipe)
    pipes = core_pipes(core)
    _need(
        pipe in pipes and pipe is not Pipe.S,
        f"rule 'mutex pipe': {what}(pipe={pipe}) runs on a pipe of the {CORE_NAMES[core][:3]}: one of "
        + ", ".join(str(p) for p in pipes if p is not Pipe.S),
    )
    mid = event_id_int(mutex_id, f"{what}(pipe={pipe})")
    if mid is not None:
        _need(0 <= mid < N_MUTEX_IDS, f"rule 'mutex id': mutex_id {mid} is outside [0, {N_MUTEX_IDS})")


def mutex_lock(state: State, pipe, mutex_id, *, sub: int | None = None) -> State:
    """``Mutex::Lock<pipe>(id)``: ``pipe`` waits until every lock group issued before it on ``mutex_id`` has unlocked
    (a group on the same pipe has, in pipe order)."""
    _mutex(state, pipe, mutex_id, "mutex_lock", core_of(sub))
    return state


def mutex_unlock(state: State, pipe, mutex_id, *, sub: int | None = None) -> State:
    """``Mutex::Unlock<pipe>(id)``: ends the group the lock on ``pipe`` opened, once ``pipe``'s work before it is done."""
    _mutex(state, pipe, mutex_id, "mutex_unlock", core_of(sub))
    return state
