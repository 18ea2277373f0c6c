"""ND <-> fractal layout transforms (Nz, Zz, Zn, Nn), the conversions the hardware does on the fly.

A fractal is a 16 x c0 block stored row-major (Zn: c0 x 16 stored column-major, i.e. the
Nz image of the transpose; Nn, the MX scale_b layout, is likewise the Zz image of the
transpose). Physical arrays are 4-D so that every element sits where the hardware keeps it:
flattening a physical array gives buffer order.
"""

from __future__ import annotations

import jax.numpy as jnp

from ._kinds import Format

FRACTAL_ROWS = 16


def _ceil(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def fractal_unit(fmt: Format, c0: int) -> tuple[int, int]:
    """(rows, cols) of one fractal of a logical matrix in format ``fmt``."""
    if fmt in (Format.NZ, Format.ZZ):
        return FRACTAL_ROWS, c0
    if fmt in (Format.ZN, Format.NN):
        return c0, FRACTAL_ROWS
    return 1, 1


def padded_shape(rows: int, cols: int, fmt: Format, c0: int) -> tuple[int, int]:
    """Logical shape rounded up to whole fractals."""
    ru, cu = fractal_unit(fmt, c0)
    return _ceil(rows, ru), _ceil(cols, cu)


def physical_shape(rows: int, cols: int, fmt: Format, c0: int) -> tuple[int, ...]:
    """Shape of the array that holds a (rows x cols) matrix in format ``fmt``."""
    rp, cp = padded_shape(rows, cols, fmt, c0)
    if fmt is Format.NZ:
        return (cp // c0, rp // FRACTAL_ROWS, FRACTAL_ROWS, c0)
    if fmt is Format.ZZ:
        return (rp // FRACTAL_ROWS, cp // c0, FRACTAL_ROWS, c0)
    if fmt is Format.ZN:
        return (rp // c0, cp // FRACTAL_ROWS, FRACTAL_ROWS, c0)
    if fmt is Format.NN:
        return (cp // FRACTAL_ROWS, rp // c0, FRACTAL_ROWS, c0)
    return (rows, cols)


def pad_to(x, rows: int, cols: int):
    """Zero-pad a 2-D array at the bottom/right to (rows, cols)."""
    return jnp.pad(x, ((0, rows - x.shape[0]), (0, cols - x.shape[1])))


def to_fractal(nd, fmt: Format, c0: int):
    """Padded ND matrix (a multiple of the fractal in both dims) -> physical array."""
    rp, cp = nd.shape
    if fmt is Format.NZ:
        return nd.reshape(rp // FRACTAL_ROWS, FRACTAL_ROWS, cp // c0, c0).transpose(2, 0, 1, 3)
    if fmt is Format.ZZ:
        return nd.reshape(rp // FRACTAL_ROWS, FRACTAL_ROWS, cp // c0, c0).transpose(0, 2, 1, 3)
    if fmt is Format.ZN:
        return to_fractal(nd.T, Format.NZ, c0)
    if fmt is Format.NN:
        return to_fractal(nd.T, Format.ZZ, c0)
    return nd


def from_fractal(phys, fmt: Format):
    """Physical array -> padded ND matrix (inverse of ``to_fractal``)."""
    if fmt is Format.NZ:
        c1, r1, r0, c0 = phys.shape
        return phys.transpose(1, 2, 0, 3).reshape(r1 * r0, c1 * c0)
    if fmt is Format.ZZ:
        r1, c1, r0, c0 = phys.shape
        return phys.transpose(0, 2, 1, 3).reshape(r1 * r0, c1 * c0)
    if fmt is Format.ZN:
        return from_fractal(phys, Format.NZ).T
    if fmt is Format.NN:
        return from_fractal(phys, Format.ZZ).T
    return phys


def nd_to_nz(x, c0: int):
    """Any ND matrix -> Nz physical array, zero-padding rows to 16 and columns to c0."""
    rp, cp = padded_shape(x.shape[0], x.shape[1], Format.NZ, c0)
    return to_fractal(pad_to(x, rp, cp), Format.NZ, c0)


def nz_to_nd(phys, rows: int, cols: int):
    """Nz physical array -> the top-left (rows x cols) ND matrix."""
    return from_fractal(phys, Format.NZ)[:rows, :cols]
