"""Shared steps of every op: issue on a pipe, record the first error, block a pipe."""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp

from ..kinds import Pipe
from ..results import Verdict
from ..state import State


def issue(state: State, pipe: Pipe) -> tuple[State, jnp.ndarray]:
    """Count the op and say whether it executes: its pipe and the scalar unit are not blocked."""
    blocked = state.aic.wait.blocked
    active = ~blocked[int(pipe)] & ~blocked[int(Pipe.S)]
    return eqx.tree_at(lambda s: s.seq, state, state.seq + 1), active


def fail(state: State, cond, code: Verdict, op: int, pipe: Pipe, a=0, b=0, c=0) -> State:
    """Record error ``code`` when ``cond`` holds and no error was recorded before."""
    err = state.error
    first = jnp.asarray(cond) & (err.code == Verdict.OK)

    def pick(new, old):
        return jnp.where(first, jnp.asarray(new, jnp.int32), old)

    new = type(err)(
        code=pick(int(code), err.code),
        op=pick(op, err.op),
        seq=pick(state.seq, err.seq),
        pipe=pick(int(pipe), err.pipe),
        a=pick(a, err.a),
        b=pick(b, err.b),
        c=pick(c, err.c),
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
) -> State:
    """Block ``pipe`` for the rest of the run when ``cond`` holds, recording what it waits for."""
    w = state.aic.wait
    p = int(pipe)
    cond = jnp.asarray(cond) & ~w.blocked[p]

    def put(arr, new):
        return arr.at[p].set(jnp.where(cond, jnp.asarray(new, arr.dtype), arr[p]))

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
        loop=w.loop.at[p].set(jnp.where(cond, state.loop, w.loop[p])),
        mask=w.mask if mask is None else w.mask.at[p].set(jnp.where(cond, mask, w.mask[p])),
    )
    return eqx.tree_at(lambda s: s.aic.wait, state, new)


def hint_release(state: State, releases, op: int) -> State:
    """Note ``op`` as the first later op that would have released each blocked pipe in ``releases``."""
    w = state.aic.wait
    first = jnp.asarray(releases) & w.blocked & (w.hint_op < 0)
    return eqx.tree_at(lambda s: s.aic.wait.hint_op, state, jnp.where(first, op, w.hint_op))


def warn(state: State, cond, bit: int, op: int) -> State:
    """Record the first op that raised warning ``bit``."""
    first = jnp.asarray(cond) & (state.warn_op[bit] < 0)
    return eqx.tree_at(lambda s: s.warn_op, state, state.warn_op.at[bit].set(jnp.where(first, op, state.warn_op[bit])))


def in_range(value, limit) -> jnp.ndarray:
    """0 <= value <= limit, for a Python int or a traced value."""
    value = jnp.asarray(value)
    return (value >= 0) & (value <= limit)


def check_bounds(state: State, active, op: int, pipe: Pipe, value, limit: int, what: int) -> tuple[State, jnp.ndarray]:
    """BOUNDS error when an active op's ``value`` is outside [0, limit]; returns the ok bit."""
    ok = in_range(value, limit)
    return fail(state, active & ~ok, Verdict.BOUNDS, op, pipe, a=value, b=limit, c=what), ok


def static_int(x) -> int | None:
    """The value of a Python/NumPy integer, or None for a traced value."""
    try:
        return int(x)
    except (TypeError, Exception):
        return None
