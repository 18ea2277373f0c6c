"""Shared steps of every op: issue on a pipe, record the first error, block a pipe."""

from __future__ import annotations

import contextvars

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from .. import granules, hazards, indexed, timing
from ..core import AIC, AIV0, Buffer, Pipe, Verdict
from ..state import WARN_WAIT_PIPE, State

#: On the data plane: whether the issue whose data function runs now reads racy data (``ascjax.dataplane.Poison``).
RACY_READ = contextvars.ContextVar("racy_read", default=False)


def core_of(sub: int | None) -> int:
    """The core an op runs on: the AIC for ``sub=None``, AIV0 / AIV1 for ``sub`` 0 / 1."""
    if sub is None:
        return AIC
    if sub not in (0, 1):
        raise ValueError(f"sub-block index must be 0 or 1 (an AI Core has two AIVs), got {sub!r}")
    return AIV0 + sub


def core_running(state: State, core: int) -> jnp.ndarray:
    """No wait that stops every pipe of ``core`` (the scalar unit's, or a cross-core wait on A2/A3) is pending."""
    w = state.wait
    first = hazards.gpipe(core, Pipe.S)
    pipes = slice(first, first + len(Pipe))
    return ~w.blocked[first] & ~jnp.any(w.blocked[pipes] & w.all_pipes[pipes])


def issue(state: State, pipe: Pipe, core: int = AIC, data: bool = True) -> tuple[State, jnp.ndarray]:
    """Count the op and say whether it executes: neither its pipe nor its core is blocked.

    An executing op advances its pipe's own vector-clock component (program order). A data
    op (``data=True``: not a sync op) settles the pipe check of a cross-core wait before it.
    """
    if state.data_only:  # the data plane: every op executes
        return state, jnp.asarray(True)
    g = hazards.gpipe(core, pipe)
    active = ~state.wait.blocked[g] & core_running(state, core)
    state = eqx.tree_at(lambda s: s.seq, state, state.seq + 1)
    if data:
        log = state.issue_log
        pending = log.wait_op[core]
        state = warn(state, active & (pending >= 0) & (log.wait_pipe[core] != int(pipe)), WARN_WAIT_PIPE, pending)
        new = type(log)(
            data_pipe=indexed.put(log.data_pipe, core, int(pipe), active),
            wait_op=indexed.put(log.wait_op, core, -1, active),
            wait_pipe=log.wait_pipe,
        )
        state = eqx.tree_at(lambda s: s.issue_log, state, new)
    return hazards.tick(state, core, pipe, active), active


def fail(state: State, cond, code: Verdict, op: int, pipe: Pipe, a=0, b=0, c=0, d=0, e=0, core=0, seq=None) -> State:
    """Record error ``code`` when ``cond`` holds and no error was recorded before.

    ``seq`` dates the error earlier than the current op (an error that belongs to a wait
    issued before, so that it wins over that wait's deadlock).
    """
    if state.data_only:  # the data plane reports nothing: the control plane finds it
        return state
    err = state.error
    first = jnp.asarray(cond) & (err.code == Verdict.OK)

    def pick(new, old):
        return jnp.where(first, jnp.asarray(new, jnp.int32), old)

    new = type(err)(
        code=pick(int(code), err.code),
        op=pick(op, err.op),
        seq=pick(state.seq if seq is None else seq, err.seq),
        core=pick(core, err.core),
        pipe=pick(int(pipe), err.pipe),
        a=pick(a, err.a),
        b=pick(b, err.b),
        c=pick(c, err.c),
        d=pick(d, err.d),
        e=pick(e, err.e),
        loop=jnp.where(first, state.loop, err.loop),
    )
    return eqx.tree_at(lambda s: s.error, state, new)


def block(
    state: State,
    cond,
    pipe: Pipe,
    op: int,
    kind: int,
    value,
    *,
    lo=0,
    hi=0,
    count=0,
    last_op=-1,
    last_mode=0,
    mask=None,
    core: int = AIC,
    all_pipes=False,
) -> State:
    """Block ``pipe`` of ``core`` for the rest of the run when ``cond`` holds, recording what it waits for.

    With ``all_pipes`` the wait stops every pipe of the core (a cross-core wait on A2/A3).
    """
    if state.data_only:
        return state
    w = state.wait
    p = hazards.gpipe(core, pipe)
    cond = jnp.asarray(cond) & ~w.blocked[p]

    def put(arr, new):
        return indexed.put(arr, p, new, cond)

    new = type(w)(
        op=put(w.op, op),
        seq=put(w.seq, state.seq),
        kind=put(w.kind, kind),
        value=put(w.value, value),
        lo=put(w.lo, lo),
        hi=put(w.hi, hi),
        count=put(w.count, count),
        last_op=put(w.last_op, last_op),
        last_mode=put(w.last_mode, last_mode),
        hint_op=w.hint_op,
        loop=indexed.put(w.loop, p, state.loop, cond),
        mask=w.mask if mask is None else indexed.put(w.mask, p, mask, cond),
        all_pipes=put(w.all_pipes, all_pipes),
    )
    return eqx.tree_at(lambda s: s.wait, state, new)


def hint_release(state: State, releases, op: int) -> State:
    """Note ``op`` as the first later op that would have released each blocked pipe in ``releases``."""
    if state.data_only:
        return state
    w = state.wait
    first = jnp.asarray(releases) & w.blocked & (w.hint_op < 0)
    return eqx.tree_at(lambda s: s.wait.hint_op, state, jnp.where(first, op, w.hint_op))


def warn(state: State, cond, bit: int, op: int) -> State:
    """Record the first op that raised warning ``bit``."""
    if state.data_only:
        return state
    first = jnp.asarray(cond) & (state.warn_op[bit] < 0)
    return eqx.tree_at(lambda s: s.warn_op, state, indexed.put(state.warn_op, bit, op, first))


def outside(value, limit):
    """Whether ``value`` lies outside [0, limit]: a Python bool when it is static, else traced."""
    v = static_int(value)
    if v is not None:
        return not 0 <= v <= limit
    return (jnp.asarray(value) < 0) | (jnp.asarray(value) > limit)


def event_id_int(event_id, where: str) -> int | None:
    """A static event id's value (None when traced); a float or bool id is refused, never truncated."""
    dtype = getattr(event_id, "dtype", None)
    if isinstance(event_id, (bool, float, np.bool_, np.floating)) or (
        dtype is not None and not jnp.issubdtype(dtype, jnp.integer)
    ):
        raise TypeError(f"rule 'event id': {where}: event_id must be an integer, got {event_id!r}")
    return static_int(event_id)


def static_int(x) -> int | None:
    """The value of a Python/NumPy integer, or None for a traced value."""
    try:
        return int(x)
    except (TypeError, Exception):
        return None


def touch_tile(
    state: State,
    tile,
    pipe: Pipe,
    op: int,
    *,
    write: bool,
    active,
    row0=0,
    rows=None,
    col0=0,
    cols=None,
    core: int = AIC,
    sub: int | None = None,
):
    """Race/initialisation check of an access by (``core``, ``pipe``) to a region of ``tile`` (default: all).

    A UB tile names its AIV with ``sub``; a TileGroup slot adds its (traced) slot offset.
    """
    if state.data_only:  # the data plane: a read is racy where the control plane found it so
        return state, jnp.asarray(False if write else RACY_READ.get())
    if not state.options.sanitize:
        return state, jnp.asarray(False)
    first, mask = granules.tile_window(tile, row0, rows, col0, cols)  # a slot's offset included
    key = hazards.shadow_key(tile.buffer, sub=sub)
    return hazards.access(
        state, key, hazards.READERS[tile.buffer], mask, core, pipe, op, write=write, active=active, start=first
    )


def touch_gm(
    state: State,
    name: str,
    pipe: Pipe,
    op: int,
    *,
    write: bool,
    active,
    row0=0,
    rows=None,
    col0=0,
    cols=None,
    max_rows=None,
    max_cols=None,
    core: int = AIC,
):
    """Race/initialisation check of an access to a region of GM tensor ``name`` (inputs are not tracked).

    ``max_rows`` / ``max_cols`` bound a traced region's size (default: the static ``rows`` / ``cols``).
    """
    if state.data_only:
        return state, jnp.asarray(False if write else RACY_READ.get())
    key = hazards.shadow_key(Buffer.GM, name)
    if not state.options.sanitize or key not in state.shadows:
        return state, jnp.asarray(False)
    g = state.gm[name]
    shape = tuple(g.shape)
    total_rows, total_cols = (shape[0], int(np.prod(shape[1:]))) if len(shape) >= 2 else (1, shape[0])
    rows = total_rows - row0 if rows is None else rows
    cols = total_cols - col0 if cols is None else cols
    max_rows = rows if max_rows is None else max_rows
    max_cols = cols if max_cols is None else max_cols
    start, mask = granules.gm_window(
        shape, jnp.dtype(g.dtype).name, state.options.gm_granule_bytes, row0, rows, col0, cols, max_rows, max_cols
    )
    return hazards.access(
        state, key, hazards.READERS[Buffer.GM], mask, core, pipe, op, write=write, active=active, start=start
    )


def poison(value, racy, options):
    """With ``poison_races``, data an op derived from a racy read becomes NaN (integers: INT_MIN)."""
    if not options.poison_races:
        return value
    bad = jnp.nan if jnp.issubdtype(value.dtype, jnp.floating) else jnp.iinfo(value.dtype).min
    return jnp.where(racy, jnp.asarray(bad, value.dtype), value)


def clock_op(state: State, pipe: Pipe, op: int, active, cost, ready=0.0, reason=0, from_op=-1, core: int = AIC):
    """Advance the cycle clock of (``core``, ``pipe``) for an executed op; returns (state, start, end)."""
    if state.data_only:
        return state, 0.0, 0.0
    return timing.schedule(state, hazards.gpipe(core, pipe), op, active, cost, ready, reason, from_op)
