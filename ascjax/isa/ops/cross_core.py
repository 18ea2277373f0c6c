"""``set_cross_core`` / ``wait_cross_core``: events between the cube core and the vector cores (seed 002).

A set adds a signal to the counters its ``sync_mode`` routes it to; a wait needs a signal in
each of its counters, consumes them and is ordered after the sets. An unsatisfied wait blocks
its pipe (A2/A3: every pipe of its core). The counters and the waits are the control plane's
(``ascjax.engine``): these data functions check an issue's static rules (the pipe, the mode on
this chip and core, ``peer``, a static event id in range) and compute nothing.
"""

from __future__ import annotations

from ...core import AIC, AIC_PIPES, AIV_PIPES, CORE_NAMES, Pipe, SyncMode
from ...engine._state import State
from ._machine import core_of, event_id_int
from .move import _need


def _check(state: State, what: str, pipe, event_id, sync_mode, core: int, peer: int | None) -> None:
    """The static rules of a cross-core set or wait issued on ``core``."""
    pipe = Pipe.parse(pipe)
    mode = SyncMode.parse(sync_mode)
    chip = state.chip
    where = f"{what}(pipe={pipe}, event_id={event_id}, sync_mode={mode.name}) on {CORE_NAMES[core]}"
    pipes = AIC_PIPES if core == AIC else AIV_PIPES
    _need(pipe in pipes, f"rule 'cross-core pipe': {where}: the {CORE_NAMES[core][:3]} has no pipe {pipe}")
    if mode is SyncMode.INTER_BLOCK:
        raise ValueError(
            f"rule 'INTER_BLOCK': {where} synchronises several AI Core blocks; ascjax runs one block per `run`, "
            "and `ascjax.launch` runs its blocks without inter-block events: split the work into two launches, "
            "store with an atomic add, or use INTRA_BLOCK between the cube and vector cores of one block"
        )
    _need(
        pipe is not Pipe.S,
        f"rule 'cross-core pipe': {where}: PIPE_S is not allowed in modes 1 and 2; name the pipe of the data "
        "operation next to it (FIX after a move out of L0C, MTE3 after a store or insert, V / MTE2 / MTE1 before a read)",
    )
    if mode is SyncMode.INTER_SUBBLOCK:
        _need(core != AIC, f"rule 'INTER_SUBBLOCK': {where}: the mode orders the two AIVs; the AIC has no part in it")
    if mode is SyncMode.UNICAST_BLOCK:
        _need(
            chip.unicast_block,
            f"rule 'UNICAST_BLOCK': {where}: chip {chip.name} supports INTER_BLOCK, INTER_SUBBLOCK and INTRA_BLOCK "
            "only (UNICAST is Ascend C mode 4, 950 only)",
        )
    if core == AIC and mode is SyncMode.UNICAST_BLOCK:
        _need(peer in (0, 1), f"rule 'UNICAST_BLOCK': {where}: a cube unicast names its AIV: peer=0 or peer=1")
    else:
        _need(peer is None, f"{where}: peer= only applies to a cube UNICAST_BLOCK set or wait")
    ev = event_id_int(event_id, where)
    n = chip.cross_event_ids
    if ev is not None:
        _need(0 <= ev < n, f"rule 'event id range': {where}: event_id {ev} is outside [0, {n})")


def set_cross_core(
    state: State, pipe, event_id, sync_mode=SyncMode.INTRA_BLOCK, *, sub=None, peer=None, when=True
) -> State:
    """``pl.system.set_cross_core``: on ``pipe`` of the AIC (``sub=None``) or AIV ``sub``, signal ``event_id``.

    The signal goes out once the pipe's earlier work is done. ``event_id`` may be traced. A cube
    ``UNICAST_BLOCK`` set names its AIV with ``peer``. ``when`` (traced allowed) makes the set
    conditional: False skips it.
    """
    _check(state, "set_cross_core", pipe, event_id, sync_mode, core_of(sub), peer)
    return state


def wait_cross_core(
    state: State, pipe, event_id, sync_mode=SyncMode.INTRA_BLOCK, *, sub=None, peer=None, when=True
) -> State:
    """``pl.system.wait_cross_core``: ``pipe`` of the AIC (``sub=None``) or AIV ``sub`` waits for ``event_id``.

    Under ``INTRA_BLOCK`` a cube wait needs a set from each AIV. On A2/A3 the wait holds every
    pipe of its core, on 950 only ``pipe``: later ops on other pipes are not ordered after it.
    ``when`` (traced allowed) makes the wait conditional (e.g. Engram's cold start).
    """
    _check(state, "wait_cross_core", pipe, event_id, sync_mode, core_of(sub), peer)
    return state
