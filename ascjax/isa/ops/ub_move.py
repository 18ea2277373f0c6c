"""Data paths of the vector cores: GM <-> UB (MTE2 / MTE3), UB -> L1 ``insert`` (MTE3, ND -> Nz),
and L0C -> UB ``move`` (the cube's FIX pipe, honouring unit flags, split between the AIVs).

``acc_to_vec_mode`` (PyPTO-Pro ``move``) decides which AIV receives which part of the L0C
region: ``SingleModeVec0``/``SingleModeVec1`` send all of it to one AIV; ``DualModeSplitM``
gives AIV0 the first ceil(M/2) rows and AIV1 the rest (M=33 -> 17/16); ``DualModeSplitN``
splits whole 16-column fractals, AIV0 taking ceil(fractals/2) of them (N=33 -> 32/1,
N=65 -> 48/17, N<=16 all on AIV0). Each part lands at (0, 0) of the AIV's ``dst`` tile. The region may be a
run-time tail: the parts are then traced and each AIV's ``dst`` keeps what lies outside its part.
"""

from __future__ import annotations

import enum

import equinox as eqx
import jax
import jax.numpy as jnp

from ...core import Buffer, Format
from ...core._memory import Tile
from ...core.formats import quant
from ...core.layout import from_fractal, pad_to, to_fractal
from ...engine._state import State
from ._machine import core_of, executes, poison, racy_read, select, static_int
from .fixpipe import scale_operand
from .move import _expect, _need, checked_offsets, offset_faults
from .unit_flag import mode_value
from .valid import check_valid, is_whole, valid_faults, valid_mask, window_index


class AccToVecMode(enum.IntEnum):
    """PyPTO-Pro ``acc_to_vec_mode`` of ``move`` out of L0C."""

    SingleModeVec0 = 0
    SingleModeVec1 = 1
    DualModeSplitM = 2
    DualModeSplitN = 3


#: DualModeSplitN divides the columns in whole fractals of this many columns
SPLIT_N_FRACTAL_COLS = 16


def split(mode: AccToVecMode, m, n) -> tuple[tuple, tuple]:
    """Per AIV: (row0, rows, col0, cols) of the L0C region it receives (rows or cols 0: nothing); ``m`` / ``n`` may
    be traced (a run-time tail), and so are then the parts."""
    mode = AccToVecMode(mode)
    if mode is AccToVecMode.SingleModeVec0:
        return (0, m, 0, n), (0, 0, 0, 0)
    if mode is AccToVecMode.SingleModeVec1:
        return (0, 0, 0, 0), (0, m, 0, n)
    if mode is AccToVecMode.DualModeSplitM:
        top = -(-m // 2)
        return (0, top, 0, n), (top, m - top, 0, n)
    fractals = -(-n // SPLIT_N_FRACTAL_COLS)
    left = -(-fractals // 2) * SPLIT_N_FRACTAL_COLS
    left = min(left, n) if static_int(n) is not None else jnp.minimum(left, n)
    return (0, m, 0, left), (0, m, left, n - left)


def l0c_to_ub_faults(src: Tile, dst: Tile, mode, m, n) -> list:
    """A move out of L0C's run-time region outside ``src``, or an AIV's part of it larger than ``dst``: BOUNDS (the
    move then moves nothing)."""
    region = (src.rows if m is None else m, src.cols if n is None else n)
    faults = valid_faults(region, (src.rows, src.cols))
    if all(static_int(v) is not None for v in region):
        return faults
    for _, rows, _, cols in split(AccToVecMode(mode), *region):
        faults += valid_faults((rows, cols), (dst.rows, dst.cols))
    return faults


def _gm(state: State, name: str, write: bool):
    _need(name in state.gm, f"GM tensor {name!r} is not an input or output of this kernel: have {sorted(state.gm)}")
    if write:
        _need(
            name in state.gm_outputs,
            f"GM tensor {name!r} is a kernel input, and inputs are read-only: declare it in outputs (workspaces too)",
        )
    g = state.gm[name]
    _need(g.ndim == 2, f"GM tensor {name!r} must be 2-D (ND) for a UB copy, has shape {g.shape}")
    return g


def _nd(tile: Tile, what: str) -> None:
    _need(
        tile.fmt is Format.ND,
        f"rule 'UB layout': {what} moves ND rows, and {tile} is {tile.fmt}: use an ND tile (a UB -> UB copy converts)",
    )


def gm2ub_window(dst: Tile, gm_shape, *, row=0, col=0, rows=None, cols=None):
    """(offsets, their limits, their units) of ``copy_gm2ub``'s GM window (the ``dst`` tile, or its top-left
    ``rows x cols``)."""
    rows = dst.rows if rows is None else rows
    cols = dst.cols if cols is None else cols
    return (row, col), (gm_shape[0] - rows, gm_shape[1] - cols), (1, 1)


def _tail(rows, cols, tile: Tile):
    """Whether ``rows x cols`` is a region other than statically the whole ``tile`` (a tail copy)."""
    return not is_whole(None if rows is None and cols is None else (
        tile.rows if rows is None else rows, tile.cols if cols is None else cols), (tile.rows, tile.cols))  # fmt: skip


def ub2gm_window(src: Tile, gm_shape, *, row=0, col=0, rows=None, cols=None):
    """(offsets, their limits, their units) of ``copy_ub2gm``'s GM window."""
    rows = src.rows if rows is None else rows
    cols = src.cols if cols is None else cols
    return (row, col), (gm_shape[0] - rows, gm_shape[1] - cols), (1, 1)


def copy_gm2ub(state: State, dst: Tile, src: str, *, row=0, col=0, rows=None, cols=None, sub: int) -> State:
    """MTE2 of AIV ``sub``: load the ``dst``-shaped window at (row, col) of GM tensor ``src`` (traced offsets allowed);
    ``rows`` / ``cols`` (traced allowed): only the top-left region that size (a tail; the rest of ``dst`` is kept)."""
    _expect(dst, Buffer.UB, "dst")
    _nd(dst, "copy_gm2ub")
    g = _gm(state, src, write=False)
    _need(g.dtype == dst.np_dtype, f"GM tensor {src!r} is {g.dtype} but {dst} is {dst.dtype}: a load does not convert")
    core_of(sub)
    if _tail(rows, cols, dst):
        region = (dst.rows if rows is None else rows, dst.cols if cols is None else cols)
        check_valid(region, (dst.rows, dst.cols), "copy_gm2ub")
        window_limits = gm2ub_window(dst, g.shape, row=row, col=col, rows=region[0], cols=region[1])
        execute = executes([*offset_faults(*window_limits), *valid_faults(region, (dst.rows, dst.cols))])
        r, c = window_index(row, dst.rows, g.shape[0]), window_index(col, dst.cols, g.shape[1])
        window = poison(g[r][:, c], racy_read(), state.options)
        keep = valid_mask(region, (dst.rows, dst.cols)) & execute
        return state.with_tile(dst, jnp.where(keep, window, state.tile(dst, sub)), sub)
    rows, cols = dst.rows, dst.cols
    _need(
        rows <= g.shape[0] and cols <= g.shape[1],
        f"rule 'bounds': {dst} is larger than GM tensor {src!r} of shape {tuple(g.shape)}",
    )
    execute = checked_offsets(*gm2ub_window(dst, g.shape, row=row, col=col))
    window = jax.lax.dynamic_slice(g, (jnp.asarray(row, jnp.int32), jnp.asarray(col, jnp.int32)), (rows, cols))
    window = poison(window, racy_read(), state.options)
    return state.with_tile(dst, select(execute, window, state.tile(dst, sub)), sub)


def copy_ub2gm(
    state: State, dst: str, src: Tile, *, row=0, col=0, rows=None, cols=None, atomic: bool = False, sub: int
) -> State:
    """MTE3 of AIV ``sub``: store the top-left (rows x cols) of UB tile ``src`` at (row, col) of GM tensor ``dst``.

    ``atomic`` adds to GM instead of overwriting it (``SetAtomicAdd`` / PyPTO-Pro
    ``store(..., atomic=AtomicType.AtomicAdd)``).
    """
    _expect(src, Buffer.UB, "src")
    _nd(src, "copy_ub2gm")
    g = _gm(state, dst, write=True)
    _need(g.dtype == src.np_dtype, f"GM tensor {dst!r} is {g.dtype} but {src} is {src.dtype}: a store does not convert")
    core_of(sub)
    if static_int(rows) is None and rows is not None or static_int(cols) is None and cols is not None:
        return _tail_store(state, dst, src, g, row, col, rows, cols, atomic, sub)
    rows = src.rows if rows is None else static_int(rows)
    cols = src.cols if cols is None else static_int(cols)
    _need(
        0 < rows <= min(src.rows, g.shape[0]) and 0 < cols <= min(src.cols, g.shape[1]),
        f"rule 'bounds': a {rows}x{cols} store does not fit {src} or GM tensor {dst!r} of shape {tuple(g.shape)}",
    )
    execute = checked_offsets(*ub2gm_window(src, g.shape, row=row, col=col, rows=rows, cols=cols))
    data = poison(state.tile(src, sub)[:rows, :cols], racy_read(), state.options)
    start = (jnp.asarray(row, jnp.int32), jnp.asarray(col, jnp.int32))
    old = jax.lax.dynamic_slice(g, start, (rows, cols))
    value = old + data if atomic else data
    new = jax.lax.dynamic_update_slice(g, select(execute, value, old), start)
    state = eqx.tree_at(lambda s: s.gm[dst], state, new)
    # a launch: remember the window for the merge of the blocks' GM
    return state.mark_gm(dst, jnp.broadcast_to(jnp.asarray(execute), (rows, cols)), atomic, start=start)


def _tail_store(state: State, dst: str, src: Tile, g, row, col, rows, cols, atomic: bool, sub: int) -> State:
    """``copy_ub2gm`` of a traced ``rows x cols`` region: the tile-sized window, its elements outside the region (or
    past the tensor) left as they were."""
    region = (src.rows if rows is None else rows, src.cols if cols is None else cols)
    check_valid(region, (src.rows, src.cols), "copy_ub2gm")
    limits = ub2gm_window(src, g.shape, row=row, col=col, rows=region[0], cols=region[1])
    execute = executes([*offset_faults(*limits), *valid_faults(region, (src.rows, src.cols))])
    r, c = window_index(row, src.rows, g.shape[0]), window_index(col, src.cols, g.shape[1])
    write = valid_mask(region, (src.rows, src.cols)) & execute
    data = poison(state.tile(src, sub)[: src.rows, : src.cols], racy_read(), state.options)
    old = g[r][:, c]
    value = jnp.where(write, old + data if atomic else data, old)
    # the window's rows and columns past the tensor are dropped (their clipped indices would repeat others)
    r_at = jnp.where(jnp.asarray(row, jnp.int32) + jnp.arange(src.rows) < g.shape[0], r, g.shape[0])
    c_at = jnp.where(jnp.asarray(col, jnp.int32) + jnp.arange(src.cols) < g.shape[1], c, g.shape[1])
    at = (r_at[:, None], c_at[None, :])
    state = eqx.tree_at(lambda s: s.gm[dst], state, g.at[at].set(value, mode="drop"))
    return state.mark_gm(dst, jnp.zeros(g.shape, bool).at[at].set(write, mode="drop"), atomic)


def copy_ub2l1(state: State, dst: Tile, src: Tile, *, row: int = 0, col: int = 0, sub: int) -> State:
    """``insert`` (TINSERT, MTE3 of AIV ``sub``): UB tile ``src`` (ND, or Nz) into L1 tile ``dst`` at (row, col)."""
    _expect(src, Buffer.UB, "src")
    _expect(dst, Buffer.L1, "dst")
    _need(src.dtype == dst.dtype, f"insert does not convert: {src} vs {dst}")
    execute = checked_offsets(*insert_window(dst, src, row, col))  # a run-time offset: a BOUNDS finding
    core_of(sub)
    unit_c = dst.c0 if dst.fmt is Format.NZ else 1
    span_c = -(-src.cols // unit_c) * unit_c  # whole fractal columns (zeros past the source's columns)
    if static_int(col) is not None:  # the static value: ``col`` itself may be a concrete traced array
        span_c = min(span_c, dst.padded[1] - static_int(col))
    span_c = min(span_c, dst.padded[1])
    old = state.tile(dst)
    nd = from_fractal(old, dst.fmt)
    matrix = state.tile(src, sub)
    if src.fmt is Format.NZ:  # an Nz UB tile (NZ2NZ): its matrix, fractal by fractal
        matrix = from_fractal(matrix, src.fmt)[: src.rows, : src.cols]
    part = poison(pad_to(matrix, src.rows, span_c), racy_read(), state.options)
    start = (jnp.asarray(row, jnp.int32), jnp.asarray(col, jnp.int32))
    nd = jax.lax.dynamic_update_slice(nd, part.astype(nd.dtype), start)
    return state.with_tile(dst, select(execute, to_fractal(nd, dst.fmt, dst.c0), old))


def insert_window(dst: Tile, src: Tile, row, col):
    """(offsets, their limits, their units) of an ``insert`` of ``src`` into ``dst`` at (row, col): inside ``dst``'s
    padded shape, on its fractal grid."""
    units = (16, dst.c0) if dst.fmt is Format.NZ else (1, 1)
    return (row, col), (dst.padded[0] - src.rows, dst.padded[1] - src.cols), units


def copy_l0c2ub(
    state: State,
    dst: Tile,
    src: Tile,
    *,
    acc_to_vec_mode: AccToVecMode = AccToVecMode.SingleModeVec0,
    m: int | None = None,
    n: int | None = None,
    relu: bool = False,
    unit_flag_mode=None,
    quant_scale=None,
) -> State:
    """``move`` L0C -> UB on the cube's FIX pipe: the (m x n) top-left of ``src`` (Nz) to the AIVs' ``dst`` (ND).

    The cast follows ``dst``'s dtype (f32 -> f16/bf16 round to nearest even). ``quant_scale`` (one scale, traced
    allowed) quantises on the way as ``fixpipe`` does into GM, in the mode ``dst``'s dtype names (f32 -> int8 /
    f16, int32 -> int8 / f16, ...). With the unit flag on it waits for the mmad's UPDATE like ``fixpipe``
    (``STPhase``).
    """
    _expect(src, Buffer.L0C, "src")
    _expect(dst, Buffer.UB, "dst")
    _nd(dst, "a move out of L0C into UB")
    q = None
    if quant_scale is None:
        allowed = ("float32", "float16", "bfloat16") if src.dtype == "float32" else ("int32",)
        _need(dst.dtype in allowed, f"rule 'move dtypes': {src} converts to {'/'.join(allowed)}, not {dst.dtype}")
    else:
        scale, kind = scale_operand(state, quant_scale)
        _need(kind == "tensor", f"rule 'move scale': a move out of L0C takes one scale, got shape {jnp.shape(scale)}")
        q, out_dtype = quant.resolve(src.dtype, dst.dtype, arch=state.chip.arch, chip=state.chip.name, scale=kind)
    faults = l0c_to_ub_faults(src, dst, acc_to_vec_mode, m, n)
    m = src.rows if m is None else m
    n = src.cols if n is None else n
    traced = static_int(m) is None or static_int(n) is None
    _need(
        traced or 0 < m <= src.rows and 0 < n <= src.cols,
        f"rule 'bounds': move of a {m}x{n} region out of {src} (sizes within the tile)",
    )
    mode_enum = AccToVecMode(acc_to_vec_mode)
    for sub, (_, rows, _, cols) in enumerate(() if traced else split(mode_enum, m, n)):  # run-time parts: faults
        _need(
            rows == 0 or (rows <= dst.rows and cols <= dst.cols),
            f"rule 'move split': {mode_enum.name} sends a {rows}x{cols} part of {src} to AIV{sub}, which does not "
            f"fit {dst}",
        )
    mode_value(unit_flag_mode, writer=False)  # a phase of the other side is refused; the flag is the control plane's
    data = poison(from_fractal(state.tile(src), Format.NZ), racy_read(), state.options)
    if q is not None:
        data = quant.apply(data, q, out_dtype, scale=scale, relu=relu, saturate=state.aic.saturation,
                           straight_through=state.options.straight_through)  # fmt: skip
    elif relu:
        data = jnp.maximum(data, 0)
    if traced:
        return _traced_parts(state, dst, data, split(mode_enum, m, n), executes(faults))
    for sub, (r0, rows, c0, cols) in enumerate(split(mode_enum, m, n)):
        if rows == 0 or cols == 0:
            continue
        old = state.tile(dst, sub)
        part = data[r0 : r0 + rows, c0 : c0 + cols].astype(dst.np_dtype)
        state = state.with_tile(dst, old.at[:rows, :cols].set(part), sub)
    return state


def _traced_parts(state: State, dst: Tile, data, parts, execute) -> State:
    """Each AIV's part of a run-time region of ``data`` (the L0C tile, ND) into the top-left of its ``dst``: a
    ``dst``-sized window at the part's start, masked to the part (the rest of ``dst`` is kept)."""
    padded = jnp.pad(data, ((0, dst.rows), (0, dst.cols)))  # a window at any start stays inside, unclamped
    for sub, (r0, rows, c0, cols) in enumerate(parts):
        if static_int(rows) == 0 or static_int(cols) == 0:
            continue
        start = (jnp.asarray(r0, jnp.int32), jnp.asarray(c0, jnp.int32))
        window = jax.lax.dynamic_slice(padded, start, (dst.rows, dst.cols)).astype(dst.np_dtype)
        keep = valid_mask((rows, cols), (dst.rows, dst.cols)) & execute
        state = state.with_tile(dst, jnp.where(keep, window, state.tile(dst, sub)), sub)
    return state
