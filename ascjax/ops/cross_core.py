"""``set_cross_core`` / ``wait_cross_core``: events between the cube core and the vector cores (seed 002).

A set adds a signal to the cells its ``sync_mode`` routes it to (see ``ascjax.cross_core``);
a wait needs a signal in each of its cells, consumes them and is ordered after the sets
(a happens-before edge). An unsatisfied wait blocks its pipe (A2/A3: every pipe of its core)
for the rest of the run in issue order; the report then calls it a deadlock. A set into an
id that still holds ``chip.cross_core_max_count`` signals is a ``SYNC_ERROR``, so is a wait
that finds its id set under another mode.
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp

from .. import hazards, indexed, sites, timing
from ..core import (
    AIC,
    AIC_PIPES,
    AIV_PIPES,
    CORE_NAMES,
    N_PIPES,
    SYNC_CROSS_MODE,
    SYNC_CROSS_PENDING,
    SYNC_EVENT_RANGE,
    Pipe,
    Verdict,
)
from ..cross_core import SyncMode, routes, wait_cells
from ..state import WARN_SET_PIPE, State, WaitKind
from ._machine import block, clock_op, core_of, event_id_int, fail, hint_release, issue, warn
from .move import _need


def _check(state: State, what: str, pipe, event_id, sync_mode, core: int, peer: int | None):
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
    return pipe, mode, peer or 0


def _event(state: State, active, op, pipe, core, event_id):
    n = state.chip.cross_event_ids
    ev = jnp.asarray(event_id, jnp.int32)
    ok = (ev >= 0) & (ev < n)
    state = fail(state, active & ~ok, Verdict.SYNC_ERROR, op, pipe, a=SYNC_EVENT_RANGE, b=ev, c=n, core=core)
    return state, ok, jnp.clip(ev, 0, n - 1)


def _begin(state: State, what: str, pipe, event_id, sync_mode, sub, peer, when):
    """Check and issue a set or wait: (state, core, pipe, mode, peer, op id, safe event id, whether it runs)."""
    core = core_of(sub)
    pipe, mode, peer_i = _check(state, what, pipe, event_id, sync_mode, core, peer)
    op = sites.register(what, pipe, f"event {event_id} {mode.name}", core=core)
    state, active = issue(state, pipe, core, data=False)
    active = active & jnp.asarray(when)
    state, ok, ev = _event(state, active, op, pipe, core, event_id)
    return state, core, pipe, mode, peer_i, op, ev, active & ok


def _stats(xc, core, ev, run, pipe: Pipe, mode: SyncMode, counter: str, pipes: str):
    """Count an executed set or wait per (core, id), with its pipe and mode bits."""

    def set_bit(arr, bit):
        return indexed.put(arr, (core, ev), indexed.get(arr, (core, ev)) | jnp.where(run, 1 << bit, 0))

    updates = {
        counter: indexed.add(getattr(xc, counter), (core, ev), run.astype(jnp.int32)),
        pipes: set_bit(getattr(xc, pipes), int(pipe)),
        "modes": set_bit(xc.modes, int(mode)),
    }
    return eqx.tree_at(lambda x: [getattr(x, k) for k in updates], xc, list(updates.values()))


def set_cross_core(
    state: State, pipe, event_id, sync_mode=SyncMode.INTRA_BLOCK, *, sub=None, peer=None, when=True
) -> State:
    """``pl.system.set_cross_core``: on ``pipe`` of the AIC (``sub=None``) or AIV ``sub``, signal ``event_id``.

    The signal goes out once the pipe's earlier work is done. ``event_id`` may be traced. A cube
    ``UNICAST_BLOCK`` set names its AIV with ``peer``. ``when`` (traced allowed) makes the set
    conditional: False skips it.
    """
    if state.data_only:  # the data plane: the static checks are all a sync instruction has
        _check(state, "set_cross_core", pipe, event_id, sync_mode, core_of(sub), peer)
        return state
    state, core, pipe, mode, peer_i, op, ev, run = _begin(
        state, "set_cross_core", pipe, event_id, sync_mode, sub, peer, when
    )
    log = state.issue_log
    state = warn(state, run & (log.data_pipe[core] >= 0) & (log.data_pipe[core] != int(pipe)), WARN_SET_PIPE, op)
    state, _, set_at = clock_op(state, pipe, op, run, 0.0, core=core)
    own = hazards.clock(state, core, pipe)
    cap = state.chip.cross_core_max_count
    for recv, send in routes(mode, core, peer_i):
        xc = state.xc
        cell = (recv, send, ev)
        full = xc.count[cell] >= cap
        state = fail(
            state, run & full, Verdict.SYNC_ERROR, op, pipe, a=SYNC_CROSS_PENDING, b=ev, c=xc.count[cell], d=recv,
            e=xc.set_op[cell], core=core,
        )  # fmt: skip
        w = state.wait
        pipes = slice(hazards.gpipe(recv, 0), hazards.gpipe(recv, 0) + N_PIPES)
        waiting = (w.kind[pipes] == WaitKind.CROSS_CORE) & (w.count[pipes] == ev) & w.blocked[pipes]
        wrong_mode = waiting & (w.value[pipes] != int(mode))
        which = jnp.argmax(wrong_mode)  # dated at the wait, so it is reported instead of that wait's deadlock
        state = fail(
            state, run & jnp.any(wrong_mode), Verdict.SYNC_ERROR, op, pipe, a=SYNC_CROSS_MODE, b=ev, c=int(mode),
            d=w.value[pipes][which], e=w.op[pipes][which], core=core, seq=w.seq[pipes][which],
        )  # fmt: skip
        releases = jnp.zeros_like(w.blocked).at[pipes].set(waiting & ~wrong_mode)
        state = hint_release(state, run & releases, op)
        xc = state.xc
        xc = eqx.tree_at(
            lambda x: (x.count, x.mode, x.set_op, x.vc),
            xc,
            (
                indexed.add(xc.count, cell, run.astype(jnp.int32)),
                indexed.put(xc.mode, cell, int(mode), run),
                indexed.put(xc.set_op, cell, op, run),
                indexed.put(xc.vc, cell, jnp.maximum(indexed.get(xc.vc, cell), own), run),
            ),
        )
        xc_t = indexed.put(state.time.xc_t, cell, set_at, run)
        state = eqx.tree_at(lambda s: (s.xc, s.time.xc_t), state, (xc, xc_t))
    xc = _stats(state.xc, core, ev, run, pipe, mode, "n_set", "set_pipes")
    return eqx.tree_at(lambda s: s.xc, state, xc)


def wait_cross_core(
    state: State, pipe, event_id, sync_mode=SyncMode.INTRA_BLOCK, *, sub=None, peer=None, when=True
) -> State:
    """``pl.system.wait_cross_core``: ``pipe`` of the AIC (``sub=None``) or AIV ``sub`` waits for ``event_id``.

    Under ``INTRA_BLOCK`` a cube wait needs a set from each AIV. On A2/A3 the wait holds every
    pipe of its core, on 950 only ``pipe``: later ops on other pipes are not ordered after it.
    ``when`` (traced allowed) makes the wait conditional (e.g. Engram's cold start).
    """
    if state.data_only:  # the data plane: the static checks are all a sync instruction has
        _check(state, "wait_cross_core", pipe, event_id, sync_mode, core_of(sub), peer)
        return state
    state, core, pipe, mode, peer_i, op, ev, run = _begin(
        state, "wait_cross_core", pipe, event_id, sync_mode, sub, peer, when
    )
    xc = state.xc
    cells = wait_cells(mode, core, peer_i)
    have = [xc.count[(r, s, ev)] > 0 for r, s in cells]
    satisfied = jnp.all(jnp.stack(have))
    for (r, s), h in zip(cells, have):
        other = h & (xc.mode[(r, s, ev)] != int(mode))
        state = fail(
            state, run & other, Verdict.SYNC_ERROR, op, pipe, a=SYNC_CROSS_MODE, b=ev, c=int(mode),
            d=xc.mode[(r, s, ev)], e=xc.set_op[(r, s, ev)], core=core,
        )  # fmt: skip
    last_set = xc.set_op[(*cells[0], ev)]
    if len(cells) > 1:  # name the sender still missing
        last_set = jnp.where(have[0], xc.set_op[(*cells[1], ev)], last_set)
    everywhere = state.chip.cross_core_wait_blocks_core
    state = block(
        state,
        run & ~satisfied,
        pipe,
        op,
        WaitKind.CROSS_CORE,
        int(mode),
        lo=cells[0][1],
        hi=cells[-1][1],
        count=ev,
        last_op=last_set,
        core=core,
        all_pipes=everywhere,
    )
    take = run & satisfied
    signal = jnp.max(jnp.stack([xc.vc[(r, s, ev)] for r, s in cells]), axis=0)
    ready = jnp.max(jnp.stack([state.time.xc_t[(r, s, ev)] for r, s in cells])) + state.costs.cross_core_latency_cycles
    count = xc.count
    for r, s in cells:
        count = indexed.add(count, (r, s, ev), -take.astype(jnp.int32))
    state = eqx.tree_at(lambda st: st.xc.count, state, count)
    held = tuple(AIC_PIPES if core == AIC else AIV_PIPES) if everywhere else (pipe,)
    for p in held:  # the wait holds these pipes until the signal arrives
        state = hazards.join(state, core, p, signal, when=take)
        if p is not pipe:
            g = hazards.gpipe(core, p)
            pipe_t = indexed.put(state.time.pipe_t, g, jnp.maximum(state.time.pipe_t[g], ready), take)
            state = eqx.tree_at(lambda st: st.time.pipe_t, state, pipe_t)
    state, _, _ = clock_op(
        state, pipe, op, take, 0.0, ready, timing.REASON_CROSS_CORE, xc.set_op[(*cells[0], ev)], core=core
    )
    log = state.issue_log
    state = eqx.tree_at(
        lambda st: (st.issue_log.wait_op, st.issue_log.wait_pipe),
        state,
        (
            indexed.put(log.wait_op, core, op, take),
            indexed.put(log.wait_pipe, core, int(pipe), take),
        ),
    )
    xc = _stats(state.xc, core, ev, take, pipe, mode, "n_wait", "wait_pipes")
    return eqx.tree_at(lambda st: st.xc, state, xc)
