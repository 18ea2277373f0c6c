"""Data movement into the cube: GM -> L1 (MTE2, ND -> Nz) and L1 -> L0A / L0B / BiasTable (MTE1)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ...core import BOUNDS_WHAT, Buffer, Finding, Format
from ...core._memory import Tile
from ...core.layout import from_fractal, pad_to, to_fractal
from ...engine import Fault
from ...engine._state import State
from ._machine import _need, executes, poison, racy_read, select, static_int
from .valid import check_valid, valid_faults, window_index


def _expect(tile: Tile, buffers, what: str) -> None:
    _need(isinstance(tile, Tile), f"{what} must be a Tile, got {type(tile).__name__}")
    buffers = buffers if isinstance(buffers, tuple) else (buffers,)
    _need(tile.buffer in buffers, f"{what} must be a tile in {'/'.join(map(str, buffers))}, got {tile}")


def write_tile(state: State, tile: Tile, phys, execute, racy=False) -> State:
    """Store ``phys`` into ``tile`` if the op executes (an op whose traced operand faults writes nothing)."""
    phys = poison(phys.astype(tile.np_dtype), racy, state.options)
    return state.with_tile(tile, select(execute, phys, state.tile(tile)))


#: the BOUNDS_WHAT indices of a window's (row, column) offsets
OFFSET_WHATS = (BOUNDS_WHAT.index("row offset"), BOUNDS_WHAT.index("column offset"))


def offset_faults(offsets, limits, units) -> list[Fault]:
    """The traced (row, col) offsets of a window as ``Fault`` s: each must lie in [0, limit] on its unit's grid
    (static offsets are checked at the call)."""
    out = []
    for value, limit, unit, what in zip(offsets, limits, units, OFFSET_WHATS):
        if static_int(value) is None or static_int(limit) is None:  # a tail's limit may be traced too
            v = jnp.asarray(value, jnp.int32)
            out.append(Fault(Finding.BOUNDS, (v < 0) | (v > limit) | (v % unit != 0), what, v, limit))
    return out


def checked_offsets(offsets, limits, units):
    """Bounds and alignment of (possibly traced) offsets: a static one is checked here, a traced one gives the ok
    bit (an offset out of range is the control plane's BOUNDS finding, and the op moves nothing)."""
    for value, limit, unit, what in zip(offsets, limits, units, OFFSET_WHATS):
        v = static_int(value)
        if v is not None and static_int(limit) is not None:
            _need(0 <= v <= limit, f"rule 'bounds': {BOUNDS_WHAT[what]} {v} is outside [0, {limit}]")
            _need(v % unit == 0, f"rule 'fractal alignment': {BOUNDS_WHAT[what]} {v} is not a multiple of {unit}")
    return executes(offset_faults(offsets, limits, units))  # static where nothing can fault


def gm2l1_window(dst: Tile, gm_shape, *, row=0, col=0, rows=None, cols=None, dst_row=0, dst_col=0):
    """(offsets, their limits, their units) of ``copy_gm2l1``'s GM window."""
    rows = dst.rows - dst_row if rows is None else rows
    cols = dst.cols - dst_col if cols is None else cols
    return (row, col), (gm_shape[0] - rows, gm_shape[1] - cols), (1, 1)


def l1_window(src: Tile, need, row, col):
    """(offsets, their limits, their units) of an MTE1 copy reading the ``need`` top-left part of a window at
    (row, col) of ``src``: the window lies in its padded shape, on its fractal grid."""
    rp, cp = src.padded
    units = (16, src.c0) if src.fmt is Format.NZ else (1, 1)
    return (row, col), (rp - need[0], cp - need[1]), units


def l1_need(name: str, dst: Tile, transpose: bool = False) -> tuple[int, int]:
    """The part of its L1 window an MTE1 copy ``name`` into ``dst`` reads (rows, cols of the L1 tile)."""
    flip = transpose if name == "copy_l12l0a" else not transpose
    if name == "copy_l12bt":
        return (1, dst.cols)
    return (dst.cols, dst.rows) if flip else (dst.rows, dst.cols)


def copy_gm2l1(
    state: State, dst: Tile, src: str, *, row=0, col=0, rows=None, cols=None, dst_row: int = 0, dst_col: int = 0
) -> State:
    """MTE2: copy the (rows x cols) window at (row, col) of GM tensor ``src`` into L1 tile ``dst``.

    An Nz tile gets the ND -> Nz conversion (``asc_copy_gm2l1_nd2nz``), columns zero-padded
    to whole fractals; an ND tile gets a plain copy. ``row``/``col`` may be traced.
    """
    _expect(dst, Buffer.L1, "dst")
    _need(src in state.gm, f"GM tensor {src!r} is not an input or output of this kernel: have {sorted(state.gm)}")
    g = state.gm[src]
    _need(g.ndim == 2, f"GM tensor {src!r} must be 2-D (ND) for copy_gm2l1, has shape {g.shape}")
    _need(
        jnp.dtype(g.dtype) == dst.np_dtype,
        f"GM tensor {src!r} is {g.dtype} but {dst} is {dst.dtype}: copy_gm2l1 does not convert",
    )
    if dst_row == 0 and dst_col == 0 and any(v is not None and static_int(v) is None for v in (rows, cols)):
        return _tail_gm2l1(state, dst, g, row, col, rows, cols)
    rows = dst.rows - dst_row if rows is None else static_int(rows)
    cols = dst.cols - dst_col if cols is None else static_int(cols)
    _need(
        rows <= g.shape[0] and cols <= g.shape[1],
        f"rule 'bounds': a {rows}x{cols} window does not fit GM tensor {src!r} of shape {tuple(g.shape)}",
    )
    _need(
        dst_row + rows <= dst.rows and dst_col + cols <= dst.cols,
        f"rule 'bounds': a {rows}x{cols} window at ({dst_row}, {dst_col}) does not fit {dst}",
    )
    unit_r, unit_c = (16, dst.c0) if dst.fmt is Format.NZ else (1, 1)
    _need(
        dst_row % unit_r == 0 and dst_col % unit_c == 0,
        f"rule 'fractal alignment': destination offset ({dst_row}, {dst_col}) of {dst} must be a multiple of ({unit_r}, {unit_c})",
    )
    execute = checked_offsets(*gm2l1_window(dst, g.shape, row=row, col=col, rows=rows, cols=cols))
    window = jax.lax.dynamic_slice(g, (jnp.asarray(row, jnp.int32), jnp.asarray(col, jnp.int32)), (rows, cols))
    nd = from_fractal(state.tile(dst), dst.fmt)
    span_c = min(-(-cols // unit_c) * unit_c, nd.shape[1] - dst_col)  # nd2nz pads each row to 32 B
    window = pad_to(window, rows, span_c).astype(nd.dtype)
    if window.shape == nd.shape:  # the whole tile: what it held before is not read
        nd = window
    else:
        nd = jax.lax.dynamic_update_slice(nd, window, (dst_row, dst_col))
    return write_tile(state, dst, to_fractal(nd, dst.fmt, dst.c0), execute, racy_read())


def _tail_gm2l1(state: State, dst: Tile, g, row, col, rows, cols) -> State:
    """``copy_gm2l1`` of a traced ``rows x cols`` window (a tail): the region's rows, each padded with zeros to
    whole fractal columns as ND2NZ writes them; the rest of ``dst`` is kept and nothing past the tensor is read."""
    region = (dst.rows if rows is None else rows, dst.cols if cols is None else cols)
    check_valid(region, (dst.rows, dst.cols), "copy_gm2l1")
    window = gm2l1_window(dst, g.shape, row=row, col=col, rows=region[0], cols=region[1])
    execute = executes([*offset_faults(*window), *valid_faults(region, (dst.rows, dst.cols))])
    nd = from_fractal(state.tile(dst), dst.fmt)
    height, width = nd.shape
    r, c = window_index(row, height, g.shape[0]), window_index(col, width, g.shape[1])
    unit_c = dst.c0 if dst.fmt is Format.NZ else 1
    valid_rows, valid_cols = (jnp.asarray(v, jnp.int32) for v in region)
    span = (valid_cols + unit_c - 1) // unit_c * unit_c  # a row's columns padded to whole fractals
    rows_in = (jnp.arange(height) < valid_rows)[:, None]
    data = jnp.where(rows_in & (jnp.arange(width) < valid_cols)[None, :], g[r][:, c].astype(nd.dtype), 0)
    written = rows_in & (jnp.arange(width) < span)[None, :] & execute
    return write_tile(state, dst, to_fractal(jnp.where(written, data, nd), dst.fmt, dst.c0), True, racy_read())


def copy_gm2l1_nd2nz(
    state: State, dst: Tile, src: str, *, row=0, col=0, rows=None, cols=None, dst_row: int = 0, dst_col: int = 0
) -> State:
    """``asc_copy_gm2l1_nd2nz``: ``copy_gm2l1`` into an Nz tile."""
    _need(dst.fmt is Format.NZ, f"copy_gm2l1_nd2nz writes Nz, but {dst} is {dst.fmt}")
    return copy_gm2l1(state, dst, src, row=row, col=col, rows=rows, cols=cols, dst_row=dst_row, dst_col=dst_col)


def _window(state, src: Tile, shape, need, row, col):
    """(ok bit, the ``shape`` window of ``src`` (as ND) at (row, col)); its ``need`` top-left part must lie in
    ``src``.

    Past ``need`` the window is destination padding: where it runs beyond ``src`` it reads zeros.
    """
    src_nd = from_fractal(state.tile(src), src.fmt)
    _need(
        need[0] <= src_nd.shape[0] and need[1] <= src_nd.shape[1],
        f"rule 'bounds': a {need[0]}x{need[1]} window does not fit {src} (padded {src_nd.shape[0]}x{src_nd.shape[1]})",
    )
    ok = checked_offsets(*l1_window(src, need, row, col))
    r0, c0 = static_int(row), static_int(col)
    if r0 is not None and c0 is not None:  # static: a slice, padded only where the window runs past ``src``
        part = src_nd[r0 : r0 + shape[0], c0 : c0 + shape[1]]
        return ok, jnp.pad(part, ((0, shape[0] - part.shape[0]), (0, shape[1] - part.shape[1])))
    src_nd = jnp.pad(src_nd, ((0, shape[0]), (0, shape[1])))  # traced offsets must never clamp
    start = (jnp.asarray(row, jnp.int32), jnp.asarray(col, jnp.int32))
    return ok, jax.lax.dynamic_slice(src_nd, start, shape)


def copy_l12l0a(state: State, dst: Tile, src: Tile, *, transpose: bool = False, row=0, col=0) -> State:
    """MTE1: load A into L0A in the chip's fractal format (Zz on A2/A3, Nz on 950).

    ``src`` (L1, Nz) holds A, or Aᵀ with ``transpose=True``; (row, col) picks a fractal-aligned
    window of ``src``. An ND L0A tile (for GEMV, m == 1) takes a plain copy of an ND L1 tile.
    """
    _expect(dst, Buffer.L0A, "dst")
    _expect(src, Buffer.L1, "src")
    _need(src.dtype == dst.dtype, f"copy_l12l0a does not convert: {src} vs {dst}")
    _need(
        (src.fmt is Format.ND) == (dst.fmt is Format.ND),
        f"copy_l12l0a copies ND to ND (GEMV) or Nz to {state.chip.a_format}: got {src.fmt} -> {dst.fmt}",
    )
    _need(not (transpose and dst.fmt is Format.ND), "copy_l12l0a: transpose needs fractal tiles, not ND")
    rp, cp = dst.padded
    shape, need = ((cp, rp), (dst.cols, dst.rows)) if transpose else ((rp, cp), (dst.rows, dst.cols))
    ok, a = _window(state, src, shape, need, row, col)
    a = a.T if transpose else a
    return write_tile(state, dst, to_fractal(a, dst.fmt, dst.c0), ok, racy_read())


def copy_l12l0b(state: State, dst: Tile, src: Tile, *, transpose: bool = False, row=0, col=0) -> State:
    """MTE1: load B (K x N) into L0B in Zn format.

    Zn is bit for bit the Nz image of Bᵀ, so a plain copy takes an L1 Nz tile holding Bᵀ
    (N x K, as seed 004 keeps B in GM); ``transpose=True`` takes an L1 tile holding B (K x N).
    """
    _expect(dst, Buffer.L0B, "dst")
    _expect(src, Buffer.L1, "src")
    _need(src.dtype == dst.dtype, f"copy_l12l0b does not convert: {src} vs {dst}")
    _need(src.fmt is Format.NZ, f"copy_l12l0b reads an Nz L1 tile, got {src}")
    kp, np_ = dst.padded
    if transpose:
        ok, b = _window(state, src, (kp, np_), (dst.rows, dst.cols), row, col)
    else:
        ok, bt = _window(state, src, (np_, kp), (dst.cols, dst.rows), row, col)
        b = bt.T
    return write_tile(state, dst, to_fractal(b, Format.ZN, dst.c0), ok, racy_read())


def copy_l12bt(state: State, dst: Tile, src: Tile, *, col=0) -> State:
    """MTE1: load a bias row (1 x N) from an ND L1 tile into the BiasTable (f16/bf16 -> f32 on the way)."""
    _expect(dst, Buffer.BT, "dst")
    _expect(src, Buffer.L1, "src")
    _need(src.fmt is Format.ND, f"copy_l12bt reads an ND L1 tile, got {src}")
    convert = {("float16", "float32"), ("bfloat16", "float32")}
    _need(
        src.dtype == dst.dtype or (src.dtype, dst.dtype) in convert,
        f"copy_l12bt converts only f16/bf16 -> float32, not {src.dtype} -> {dst.dtype}",
    )
    ok, row = _window(state, src, (1, dst.cols), (1, dst.cols), 0, col)
    return write_tile(state, dst, row.astype(dst.np_dtype), ok, racy_read())
