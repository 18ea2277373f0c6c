"""End of a run: blocked pipes become a deadlock, signals still set become a leftover."""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp

from .core import N_PIPES, Verdict
from .state import ErrorRecord, State

LEFTOVER_UNIT_FLAG = 0
LEFTOVER_FLAG = 1
LEFTOVER_CROSS_CORE = 2


def finish(state: State) -> State:
    """Fold the end-of-run checks into the error record (the earliest error wins).

    A leftover names the first signal still set: an L0C unit flag, then an intra-core flag,
    then a cross-core event. For a flag, ``b`` is ``core * P * P + src * P + dst`` and ``c``
    the event id; for a cross-core event ``b`` is ``receiver * 3 + sender``, ``c`` the id
    and ``d`` the count left.
    """
    err = state.error
    w = state.wait
    big = jnp.iinfo(jnp.int32).max
    first_pipe = jnp.argmin(jnp.where(w.blocked, w.seq, big))
    deadlock = jnp.any(w.blocked) & ((err.code == Verdict.OK) | (w.seq[first_pipe] < err.seq))

    uf = state.aic.unit_flag != 0
    uf_first = jnp.argmax(uf)
    n_ev = state.flags.bits.shape[-1]
    flags = state.flags.bits.reshape(-1)
    fl_first = jnp.argmax(flags)
    n_xc = state.xc.count.shape[-1]
    xc = state.xc.count.reshape(-1) > 0
    xc_first = jnp.argmax(xc)
    no_error = (err.code == Verdict.OK) & ~deadlock
    left_uf = no_error & jnp.any(uf)
    left_fl = no_error & ~left_uf & jnp.any(flags)
    left_xc = no_error & ~left_uf & ~left_fl & jnp.any(xc)

    def pick(dead, luf, lfl, lxc, old):
        value = jnp.where(left_xc, lxc, old)
        value = jnp.where(left_fl, lfl, value)
        value = jnp.where(left_uf, luf, value)
        return jnp.where(deadlock, dead, value).astype(jnp.int32)

    fl_core_pair, fl_ev = jnp.divmod(fl_first, n_ev)
    fl_core, fl_pair = jnp.divmod(fl_core_pair, N_PIPES * N_PIPES)
    fl_src = fl_pair // N_PIPES
    xc_cell, xc_ev = jnp.divmod(xc_first, n_xc)
    core, pipe = jnp.divmod(first_pipe, N_PIPES)
    new = ErrorRecord(
        code=pick(Verdict.DEADLOCK, Verdict.LEFTOVER, Verdict.LEFTOVER, Verdict.LEFTOVER, err.code),
        op=pick(
            w.op[first_pipe],
            state.aic.uf_set_op[uf_first],
            state.flags.op.reshape(-1)[fl_first],
            state.xc.set_op.reshape(-1)[xc_first],
            err.op,
        ),
        seq=pick(w.seq[first_pipe], state.seq, state.seq, state.seq, err.seq),
        core=pick(core, 0, fl_core, xc_cell % 3, err.core),
        pipe=pick(pipe, 0, fl_src, 0, err.pipe),
        a=pick(first_pipe, LEFTOVER_UNIT_FLAG, LEFTOVER_FLAG, LEFTOVER_CROSS_CORE, err.a),
        b=pick(0, uf_first, fl_core_pair, xc_cell, err.b),
        c=pick(0, jnp.sum(uf), fl_ev, xc_ev, err.c),
        d=pick(0, 0, 0, state.xc.count.reshape(-1)[xc_first], err.d),
        e=err.e,
        loop=jnp.where(deadlock, w.loop[first_pipe], err.loop),
    )
    return eqx.tree_at(lambda s: s.error, state, new)
