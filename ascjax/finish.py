"""End of a run: blocked pipes become a deadlock, signals still set become a leftover."""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp

from .kinds import N_PIPES
from .results import Verdict
from .state import ErrorRecord, State

LEFTOVER_UNIT_FLAG = 0
LEFTOVER_FLAG = 1


def finish(state: State) -> State:
    """Fold the end-of-run checks into the error record (the earliest error wins)."""
    err = state.error
    w = state.aic.wait
    big = jnp.iinfo(jnp.int32).max
    first_pipe = jnp.argmin(jnp.where(w.blocked, w.seq, big))
    deadlock = jnp.any(w.blocked) & ((err.code == Verdict.OK) | (w.seq[first_pipe] < err.seq))

    uf = state.aic.unit_flag != 0
    uf_first = jnp.argmax(uf)
    flags = state.aic.flags.reshape(-1)
    fl_first = jnp.argmax(flags)
    n_ev = state.aic.flags.shape[2]
    no_error = (err.code == Verdict.OK) & ~deadlock
    left_uf = no_error & jnp.any(uf)
    left_fl = no_error & ~left_uf & jnp.any(flags)

    def pick(dead, luf, lfl, old):
        return jnp.where(deadlock, dead, jnp.where(left_uf, luf, jnp.where(left_fl, lfl, old))).astype(jnp.int32)

    src, rest = jnp.divmod(fl_first, N_PIPES * n_ev)
    dst, ev = jnp.divmod(rest, n_ev)
    new = ErrorRecord(
        code=pick(Verdict.DEADLOCK, Verdict.LEFTOVER, Verdict.LEFTOVER, err.code),
        op=pick(w.op[first_pipe], state.aic.uf_set_op[uf_first], state.aic.flag_op.reshape(-1)[fl_first], err.op),
        seq=pick(w.seq[first_pipe], state.seq, state.seq, err.seq),
        core=pick(0, 0, 0, err.core),
        pipe=pick(first_pipe, 0, src, err.pipe),
        a=pick(first_pipe, LEFTOVER_UNIT_FLAG, LEFTOVER_FLAG, err.a),
        b=pick(0, uf_first, src * N_PIPES + dst, err.b),
        c=pick(0, jnp.sum(uf), ev, err.c),
        d=err.d,
        e=err.e,
        loop=jnp.where(deadlock, w.loop[first_pipe], err.loop),
    )
    return eqx.tree_at(lambda s: s.error, state, new)
