"""MX matmul (``MmadMx``; PyPTO-Pro ``matmul_mx`` / ``matmul_mx_acc``) and the MTE1 load of its E8M0 scales.

[facts §4 "Matmul", §6 "MX"; asc-devkit ``MmadMx.md``; PyPTO-Pro ``matmul_mx.md``] Chip 950 only.
A (L0A, Nz) and B (L0B, Zn) hold MXFP8 (e4m3fn / e5m2) or MXFP4 (e2m1 / e1m2) elements, one family
on both sides; ``scale_a`` [M, K/32] (ScaleLeft, Zz) and ``scale_b`` [K/32, N] (ScaleRight, Nn) hold
E8M0 scales in 16 x 2 fractals. The instruction finds the scales by address, ``addr(scale) =
addr(data) >> 4``: a scale tile anywhere else is ignored by the hardware and the result is
silently wrong, so ascjax refuses it at trace time. K is a multiple of 64; fp8 A/B start on
1024 B, fp4 on 512 B.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ...core import Buffer, Format
from ...core._memory import MX_SCALE_DTYPE, Tile
from ...core.formats import mx
from ...core.layout import fractal_unit, from_fractal, to_fractal
from ...engine._state import State
from ._machine import racy_read, static_int
from .cube import mmad
from .move import _expect, _need, checked_offsets, offset_faults, write_tile

_ALIGN = {"MXFP8": 1024, "MXFP4": 512}  # A/B start addresses of an MmadMx [asc-devkit MmadMx.md]


def _no_slot(*tiles: Tile) -> None:
    for t in tiles:
        _need(
            getattr(t, "slot", None) is None,
            f"mmad_mx operands must be plain tiles: {t} is a TileGroup slot, whose traced address the MX scale "
            "address rule (scale = data >> 4) cannot be checked for; allocate the MX tiles with k.alloc",
        )


def check_mx_operands(state: State, a: Tile, b: Tile, scale_a: Tile, scale_b: Tile, k) -> str:
    """Trace-time rules of an MmadMx: family, K, scale shapes, the scale address rule, alignment."""
    _expect(a, Buffer.L0A, "a")
    _expect(b, Buffer.L0B, "b")
    _expect(scale_a, Buffer.SCALE_LEFT, "scale_a")
    _expect(scale_b, Buffer.SCALE_RIGHT, "scale_b")
    _no_slot(a, b, scale_a, scale_b)
    fam_a, fam_b = mx.family(a.dtype), mx.family(b.dtype)
    families = ", ".join(f"{name} ({' / '.join(members)})" for name, members in mx.FAMILIES.items())
    _need(
        fam_a is not None and fam_a == fam_b,
        f"rule 'MX family': mmad_mx multiplies MXFP8 by MXFP8 or MXFP4 by MXFP4 elements, got A {a.dtype} and "
        f"B {b.dtype}; the families are {families}",
    )
    _need(
        a.fmt is Format.NZ,
        f"rule 'MX layout': mmad_mx reads A in Nz (it has no GEMV mode), but {a} holds {a.fmt}",
    )
    _need(
        a.cols == b.rows and a.cols % mx.K_MULTIPLE == 0,
        f"rule 'MX K': A's K ({a.cols}) and B's K ({b.rows}) must be equal and a multiple of {mx.K_MULTIPLE}",
    )
    k_static = static_int(k)
    _need(
        k_static is not None and k_static % mx.K_MULTIPLE == 0,
        f"rule 'MX K': mmad_mx needs a static k that is a multiple of {mx.K_MULTIPLE}, got {k!r}",
    )
    kb = a.cols // mx.BLOCK
    _need(
        (scale_a.rows, scale_a.cols) == (a.rows, kb),
        f"rule 'MX scale shape': scale_a must be [M, K/32] = [{a.rows}, {kb}] for {a}, got {scale_a}",
    )
    _need(
        (scale_b.rows, scale_b.cols) == (kb, b.cols),
        f"rule 'MX scale shape': scale_b must be [K/32, N] = [{kb}, {b.cols}] for {b}, got {scale_b}",
    )
    for data, scale, name in ((a, scale_a, "scale_a"), (b, scale_b, "scale_b")):
        want = data.addr >> 4
        _need(
            scale.addr == want,
            f"rule 'MX scale address': {name} {scale} must start at address {want:#x} = {data.buffer} address "
            f"{data.addr:#x} >> 4, where the MmadMx reads it (a scale elsewhere is ignored and the result is wrong): "
            f"allocate it with addr={want:#x}",
        )
    align = _ALIGN[fam_a]
    for t in (a, b):
        _need(
            t.addr % align == 0,
            f"rule 'MmadMx alignment': {fam_a} operands start on {align} B, but {t} is at {t.addr:#x}",
        )
    return fam_a


def mmad_mx(
    state: State,
    c: Tile,
    a: Tile,
    b: Tile,
    scale_a: Tile,
    scale_b: Tile,
    m,
    k,
    n,
    *,
    unit_flag_mode=None,
    c_matrix_source=False,
    c_matrix_init_val=False,
    bias: Tile | None = None,
) -> State:
    """``MmadMx``: C[m x n] = (scale_a ⊗ A)[m x k] x (scale_b ⊗ B)[k x n] + C_init on pipe M.

    Every 32 K elements share one E8M0 scale ``2^(e - 127)``. ``m``, ``n`` and ``unit_flag_mode``
    may be traced; ``k`` is static (a multiple of 64). C_init as in ``ascjax.ops.mmad``. Each
    32-element block is accumulated in float32 and scaled exactly; the blocks are summed in
    float32 (the hardware's internal order is not documented).
    """
    check_mx_operands(state, a, b, scale_a, scale_b, k)
    return mmad(
        state,
        c,
        a,
        b,
        m,
        k,
        n,
        unit_flag_mode=unit_flag_mode,
        disable_gemv=True,
        c_matrix_source=c_matrix_source,
        c_matrix_init_val=c_matrix_init_val,
        bias=bias,
        mx=(scale_a, scale_b),
    )


def matmul_mx(state: State, dst: Tile, lhs: Tile, rhs: Tile, scale_a: Tile, scale_b: Tile, *, phase=None) -> State:
    """``pl.matmul_mx``: dst = (scale_a ⊗ lhs) x (scale_b ⊗ rhs), sizes from the tiles; overwrites dst."""
    return mmad_mx(
        state,
        dst,
        lhs,
        rhs,
        scale_a,
        scale_b,
        lhs.rows,
        lhs.cols,
        rhs.cols,
        unit_flag_mode=phase,
        c_matrix_init_val=True,
    )


def matmul_mx_acc(
    state: State, dst: Tile, acc: Tile, lhs: Tile, rhs: Tile, scale_a: Tile, scale_b: Tile, *, phase=None
) -> State:
    """``pl.matmul_mx_acc``: dst = acc + (scale_a ⊗ lhs) x (scale_b ⊗ rhs) (``acc`` must be ``dst``)."""
    _need(acc == dst, f"matmul_mx_acc accumulates in place: acc {acc} must be dst {dst}")
    return mmad_mx(state, dst, lhs, rhs, scale_a, scale_b, lhs.rows, lhs.cols, rhs.cols, unit_flag_mode=phase)


def copy_l12scale_faults(dst: Tile, src: Tile, *, row=0, col=0) -> list:
    """The traced (row, col) offsets of ``copy_l12scale``'s window into ``src``: within it, on its fractal grid."""
    limits = (src.padded[0] - dst.padded[0], src.padded[1] - dst.padded[1])
    return offset_faults((row, col), limits, fractal_unit(src.fmt, src.c0))


def copy_l12scale(state: State, dst: Tile, src: Tile, *, row=0, col=0) -> State:
    """MTE1: E8M0 scales L1 -> ScaleLeft (Zz) / ScaleRight (Nn), a plain copy (PyPTO-Pro ``move``).

    ``src`` is an L1 tile in the destination's format (``copy_gm2l1`` converts GM's ND scales
    into it); (row, col), traced allowed, picks a fractal-aligned window of it.
    """
    _expect(dst, (Buffer.SCALE_LEFT, Buffer.SCALE_RIGHT), "dst")
    _expect(src, Buffer.L1, "src")
    _need(
        src.dtype == MX_SCALE_DTYPE and dst.dtype == MX_SCALE_DTYPE,
        f"copy_l12scale moves E8M0 scales ({MX_SCALE_DTYPE}): got {src.dtype} -> {dst.dtype}",
    )
    _need(
        src.fmt is dst.fmt,
        f"copy_l12scale is a plain copy: {dst} holds {dst.fmt}, so the L1 tile must too, got {src}; allocate it "
        f"with fmt='{dst.fmt}' (copy_gm2l1 converts ND scales into it)",
    )
    src_nd = from_fractal(state.tile(src), src.fmt)
    rows, cols = dst.padded
    _need(
        rows <= src_nd.shape[0] and cols <= src_nd.shape[1],
        f"rule 'bounds': {dst} (padded {rows}x{cols}) does not fit in {src} (padded {src_nd.shape[0]}x{src_nd.shape[1]})",
    )
    unit_r, unit_c = fractal_unit(src.fmt, src.c0)
    execute = checked_offsets((row, col), (src_nd.shape[0] - rows, src_nd.shape[1] - cols), (unit_r, unit_c))
    window = jax.lax.dynamic_slice(src_nd, (jnp.asarray(row, jnp.int32), jnp.asarray(col, jnp.int32)), (rows, cols))
    return write_tile(state, dst, to_fractal(window, dst.fmt, dst.c0), execute, racy_read())
