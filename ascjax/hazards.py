"""Happens-before race detection: vector clocks per pipe and shadow state per granule.

Every pipe of the block (3 cores x 7 pipes) owns a vector clock. An executed op ticks its
pipe's own component; sync edges (SetFlag -> WaitFlag, unit-flag handshakes, barriers, the
framework's auto M->FIX sync) join the waiter's clock with the signaller's. Each granule of
a tracked buffer remembers its last writer (pipe, time, op) and, per reader pipe, the last
read since that write. An access that is not ordered after a conflicting one is a race
(RAW / WAR / WAW), whatever the latencies would be.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Int

from . import indexed
from .core import AIC, AIV0, AIV1, N_CORES, N_PIPES, RAW, WAR, WAW, Buffer, Pipe, Verdict, gpipe

N_GLOBAL_PIPES = N_CORES * N_PIPES


def clock_width(options) -> int:
    """Components of every vector clock the state carries: one per pipe of the block, none
    when not sanitizing (the happens-before edges are then never read, so they are not kept)."""
    return N_GLOBAL_PIPES if options.sanitize else 0


#: Which pipes read each kind of buffer (their last-read times are kept per granule).
READERS = {
    Buffer.L1: (gpipe(AIC, Pipe.MTE1), gpipe(AIC, Pipe.FIX)),
    Buffer.L0A: (gpipe(AIC, Pipe.M),),
    Buffer.L0B: (gpipe(AIC, Pipe.M),),
    Buffer.L0C: (gpipe(AIC, Pipe.M), gpipe(AIC, Pipe.FIX)),
    Buffer.BT: (gpipe(AIC, Pipe.M),),
    Buffer.GM: tuple(gpipe(core, Pipe.MTE2) for core in range(N_CORES)),
    # each AIV's own UB: its vector pipe computes on it, its MTE3 stores or inserts from it
    Buffer.UB: tuple(gpipe(core, pipe) for core in (AIV0, AIV1) for pipe in (Pipe.V, Pipe.MTE3)),
    Buffer.SCALE_LEFT: (gpipe(AIC, Pipe.M),),  # MX scales (950)
    Buffer.SCALE_RIGHT: (gpipe(AIC, Pipe.M),),
}


class Shadow(eqx.Module):
    """Per-granule access history of one buffer or GM tensor."""

    w_pipe: Int[Array, " n"]  # global pipe of the last writer, -1 if none
    w_time: Int[Array, " n"]  # that pipe's own clock when it wrote
    w_op: Int[Array, " n"]
    r_time: Int[Array, "n R"]  # per reader pipe: its clock at the last read since the write (0: none)
    r_op: Int[Array, "n R"]
    written: Bool[Array, " n"]  # initialised (written, or a kernel input)

    @staticmethod
    def empty(grid: tuple, n_readers: int) -> Shadow:
        """History of a grid of granules (1-D on chip, (rows, granules per row) in GM) nothing touched yet."""
        neg = jnp.full(grid, -1, jnp.int32)
        return Shadow(
            w_pipe=neg,
            w_time=jnp.zeros(grid, jnp.int32),
            w_op=neg,
            r_time=jnp.zeros((*grid, n_readers), jnp.int32),
            r_op=jnp.full((*grid, n_readers), -1, jnp.int32),
            written=jnp.zeros(grid, bool),
        )


def shadow_key(buffer: Buffer, gm_name: str | None = None, sub: int | None = None) -> str:
    """Name of a shadow: ``GM:<tensor>``, ``UB0``/``UB1`` (one UB per AIV) or the buffer's name."""
    if buffer is Buffer.GM:
        return f"GM:{gm_name}"
    return f"UB{sub}" if buffer is Buffer.UB else buffer.name


def _first_last(mask, to_global):
    """Global indices of the first and last set granule of a flattened window mask."""
    idx = jnp.arange(mask.shape[0])
    return to_global(jnp.argmax(mask)), to_global(jnp.max(jnp.where(mask, idx, 0)))


def access(state, key: str, readers: tuple, mask, core: int, pipe: Pipe, op: int, *, write: bool, active, start=0):
    """Check one access by (core, pipe) and record it. Returns (state, racy).

    ``mask`` covers a window of the shadow's granule grid that begins at ``start`` (an index
    or a tuple, traced allowed, already clamped so that the window lies inside the grid).
    """
    from .ops._machine import fail  # the error word lives with the op helpers

    if not state.options.sanitize:
        return state, jnp.asarray(False)
    g = gpipe(core, pipe)
    full: Shadow = state.shadows[key]
    grid = full.w_pipe.shape
    starts = tuple(start) if isinstance(start, tuple) else (start,)
    starts = tuple(jnp.asarray(s, jnp.int32) for s in starts)
    wshape = tuple(mask.shape)

    def cut(x):
        extra = x.shape[len(grid) :]
        return jax.lax.dynamic_slice(x, (*starts, *(jnp.int32(0),) * len(extra)), (*wshape, *extra)).reshape(
            (-1, *extra)
        )

    def to_global(i):
        local = jnp.unravel_index(i, wshape)
        return jnp.ravel_multi_index(tuple(s + li for s, li in zip(starts, local)), grid, mode="clip")

    sh = jax.tree_util.tree_map(cut, full)
    m = jnp.asarray(mask).reshape(-1) & active
    clock = state.vc[g]
    w_unordered = m & (sh.w_pipe >= 0) & (sh.w_time > clock[jnp.clip(sh.w_pipe, 0)])
    code = state.buffer_codes.index(key)
    if write:
        r_unordered = m[:, None] & (sh.r_time > clock[jnp.asarray(readers)][None, :])
        racy_g = w_unordered | jnp.any(r_unordered, axis=1)
        first = jnp.argmax(racy_g)
        lo, hi = _first_last(racy_g, to_global)
        is_waw = w_unordered[first]
        other = jnp.where(is_waw, sh.w_op[first], sh.r_op[first, jnp.argmax(r_unordered[first])])
        state = fail(
            state,
            jnp.any(racy_g),
            Verdict.RACE,
            op,
            pipe,
            a=jnp.where(is_waw, WAW, WAR),
            b=other,
            c=code,
            d=lo,
            e=hi,
            core=core,
        )
        new = Shadow(
            w_pipe=jnp.where(m, g, sh.w_pipe),
            w_time=jnp.where(m, clock[g], sh.w_time),
            w_op=jnp.where(m, op, sh.w_op),
            r_time=jnp.where(m[:, None], 0, sh.r_time),
            r_op=jnp.where(m[:, None], -1, sh.r_op),
            written=sh.written | m,
        )
    else:
        uninit = m & ~sh.written
        lo, hi = _first_last(uninit, to_global)
        state = fail(state, jnp.any(uninit), Verdict.UNINITIALIZED, op, pipe, a=code, b=lo, c=hi, core=core)
        racy_g = w_unordered
        lo, hi = _first_last(racy_g, to_global)
        state = fail(
            state,
            jnp.any(racy_g),
            Verdict.RACE,
            op,
            pipe,
            a=RAW,
            b=sh.w_op[jnp.argmax(racy_g)],
            c=code,
            d=lo,
            e=hi,
            core=core,
        )
        slot = readers.index(g)
        new = eqx.tree_at(
            lambda s: (s.r_time, s.r_op),
            sh,
            (
                sh.r_time.at[:, slot].set(jnp.where(m, clock[g], sh.r_time[:, slot])),
                sh.r_op.at[:, slot].set(jnp.where(m, op, sh.r_op[:, slot])),
            ),
        )

    def paste(whole, part):
        extra = whole.shape[len(grid) :]
        return jax.lax.dynamic_update_slice(
            whole, part.reshape((*wshape, *extra)), (*starts, *(jnp.int32(0),) * len(extra))
        )

    shadows = {**state.shadows, key: jax.tree_util.tree_map(paste, full, new)}
    return eqx.tree_at(lambda s: s.shadows, state, shadows), jnp.any(racy_g)


def tick(state, core: int, pipe: Pipe, active):
    """An executed op advances its pipe's own clock component."""
    if not state.options.sanitize:
        return state
    g = gpipe(core, pipe)
    return eqx.tree_at(lambda s: s.vc, state, indexed.add(state.vc, (g, g), jnp.asarray(active, jnp.int32)))


def join(state, core: int, pipe: Pipe, other, when=True):
    """Order (core, pipe) after the clock ``other`` (an edge other -> this pipe)."""
    if not state.options.sanitize:
        return state
    g = gpipe(core, pipe)
    joined = jnp.where(when, jnp.maximum(state.vc[g], other), state.vc[g])
    return eqx.tree_at(lambda s: s.vc, state, indexed.put(state.vc, g, joined))


def clock(state, core: int, pipe: Pipe):
    """The vector clock of (core, pipe) (no components when not sanitizing)."""
    if not state.options.sanitize:
        return jnp.zeros((0,), jnp.int32)
    return state.vc[gpipe(core, pipe)]
