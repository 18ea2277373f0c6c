"""``mmad``: C = A x B + C on the cube (pipe M), with the full ``asc_mmad`` parameter surface.

``mmad`` with ``mx=`` also runs ``MmadMx`` (E8M0-scaled MX operands, see ``ops/mmad_mx.py``).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from ...core import BOUNDS_WHAT, Buffer, Finding, Format, same_bits_dot_general
from ...core import _dtypes as dtypes
from ...core._chip import CHIPS
from ...core._memory import Tile
from ...core.formats import mx as mx_format
from ...core.formats import values
from ...core.layout import FRACTAL_ROWS, from_fractal, to_fractal
from ...engine import Fault
from ...engine._state import State
from ._machine import executes, outside, racy_read, select, static_int
from .move import _expect, _need, write_tile
from .unit_flag import mode_value


def _ceil16(x):
    return (x + 15) // 16 * 16


def check_dtypes(chip, a: Tile, b: Tile, c: Tile, bias: Tile | None, *, mx: bool = False) -> str:
    """Trace-time check of the (a, b) -> c combination against the chip's mmad (or MmadMx) table."""
    pair = (a.dtype, b.dtype)
    rule = "mmad_mx dtypes" if mx else "mmad dtypes"
    table = chip.mmad_mx_dtypes if mx else chip.mmad_dtypes
    if pair not in table:
        elsewhere = [
            other.name for other in CHIPS.values() if pair in (other.mmad_mx_dtypes if mx else other.mmad_dtypes)
        ]
        hint = f" ({pair[0]} x {pair[1]} is a chip {'/'.join(elsewhere)} combination)" if elsewhere else ""
        if not table:
            raise ValueError(
                f"rule '{rule}': chip {chip.name} (arch {chip.arch}) has no MX matmul (MmadMx / matmul_mx): "
                f"it is a chip 950 instruction{hint}"
            )
        valid = ", ".join(f"{x} x {y} -> {z}" for (x, y), z in table.items())
        raise ValueError(
            f"rule '{rule}': {pair[0]} x {pair[1]} is not supported on chip {chip.name}{hint}; valid: {valid}"
        )
    c_dtype = table[pair]
    if c.dtype != c_dtype:
        raise ValueError(f"rule '{rule}': {pair[0]} x {pair[1]} accumulates in {c_dtype}, but C {c} is {c.dtype}")
    if bias is not None and bias.dtype != c_dtype:
        raise ValueError(f"rule 'bias dtype': the bias must have C's dtype {c_dtype}, but {bias} is {bias.dtype}")
    return c_dtype


def _saturating_add(x, y):
    """int32 x + y, saturating instead of wrapping (integer mmad always saturates)."""
    s = x + y
    overflow = ((x >= 0) == (y >= 0)) & ((s >= 0) != (x >= 0))
    limit = jnp.where(x >= 0, jnp.iinfo(jnp.int32).max, jnp.iinfo(jnp.int32).min)
    return jnp.where(overflow, limit, s)


def _saturate(x, saturation, keep_nan: bool = False):
    """Saturation mode (CTRL[48] = 0): inf -> +-max, NaN -> 0; otherwise inf/NaN propagate. ``keep_nan``
    (``poison_races``): a NaN stays NaN, so the poison of a racy read survives saturation."""
    big = jnp.finfo(jnp.float32).max
    sat = jnp.clip(x, -big, big) if keep_nan else jnp.where(jnp.isnan(x), 0.0, jnp.clip(x, -big, big))
    return jnp.where(saturation, sat, x)


def mmad_limits(chip, c: Tile, a: Tile, b: Tile) -> tuple[int, int, int]:
    """The largest valid m, k and n of an mmad of these tiles (the cube's largest size bounds each)."""
    return (
        min(a.rows if a.fmt is not Format.ND else 1, c.rows, chip.max_mmad_dim),
        min(a.cols, b.rows, chip.max_mmad_dim),
        min(b.cols, c.cols, chip.max_mmad_dim),
    )


def mmad_faults(chip, c: Tile, a: Tile, b: Tile, m, k, n, disable_gemv=False, k_direction_align=False) -> list[Fault]:
    """The rules an mmad's traced sizes may break, in the order they are checked: m, k and n within their tiles,
    k rounded up to 16 within them (an fp32 mmad with ``k_direction_align``), then the GEMV layout (m == 1 runs
    GEMV, which reads A as ND; other sizes read a fractal A) of an mmad whose sizes are all valid and nonzero.
    A fault is False where the sizes are static (those rules are checked at the call)."""
    limits = mmad_limits(chip, c, a, b)
    out = [Fault(Finding.BOUNDS, outside(v, limits[i]), i, v, limits[i]) for i, v in enumerate((m, k, n))]
    if k_direction_align and a.dtype == "float32":
        limit = min(a.padded[1], b.padded[0])
        aligned = (jnp.asarray(k) + FRACTAL_ROWS - 1) // FRACTAL_ROWS * FRACTAL_ROWS
        bad = outside(k, limit) if static_int(k) is not None else outside(aligned, limit)
        out.append(Fault(Finding.BOUNDS, bad, BOUNDS_WHAT.index("k (aligned)"), aligned, limit))
    if all(static_int(v) is not None for v in (m, k, n, disable_gemv)):
        return out
    sizes_ok = ~functools.reduce(lambda x, y: x | y, (jnp.asarray(f.bad) for f in out))
    gemv = (jnp.asarray(m) == 1) & (~jnp.asarray(disable_gemv, bool) if chip.gemv_can_be_disabled else True)
    nonzero = (jnp.asarray(m) > 0) & (jnp.asarray(k) > 0) & (jnp.asarray(n) > 0)
    out.append(Fault(Finding.LAYOUT, sizes_ok & nonzero & (gemv != (a.fmt is Format.ND)), 0, m, gemv))
    return out


def mmad(
    state: State,
    c: Tile,
    a: Tile,
    b: Tile,
    m,
    k,
    n,
    *,
    unit_flag_mode=None,
    disable_gemv=False,
    c_matrix_source=False,
    c_matrix_init_val=False,
    bias: Tile | None = None,
    k_direction_align: bool = False,
    mx: tuple[Tile, Tile] | None = None,
) -> State:
    """``asc_mmad``: C[m x n] = A[m x k] x B[k x n] + C_init on pipe M.

    ``m, k, n`` are the valid sizes (traced values allowed; 0 makes a no-op). C_init is zero
    (``c_matrix_init_val``), the BiasTable row at address 0 (``c_matrix_source``), the explicit
    ``bias`` tile, or else L0C's contents. ``unit_flag_mode`` (DISABLE / ENABLE_KEEP /
    ENABLE_UPDATE, or an AccPhase) may be traced. With m == 1 the cube runs GEMV and reads A
    as ND (on 950 unless ``disable_gemv``). Low-precision operands (fp8, hifloat8 on 950;
    int4 on A2/A3) are decoded exactly and accumulated like the others.

    With ``mx=(scale_a, scale_b)`` it is an ``MmadMx`` whose blocks of 32 K elements are scaled
    by the E8M0 tiles (their static rules are checked by the caller, ``ops/mmad_mx.py``).
    """
    chip = state.chip
    _expect(c, Buffer.L0C, "c")
    _expect(a, Buffer.L0A, "a")
    _expect(b, Buffer.L0B, "b")
    if bias is not None:
        _expect(bias, Buffer.BT, "bias")
        _need(
            not (c_matrix_source is True or c_matrix_init_val is True),
            "mmad with an explicit bias tile initialises C from it: leave c_matrix_source / c_matrix_init_val unset",
        )
    c_dtype = check_dtypes(chip, a, b, c, bias, mx=mx is not None)
    mode_value(unit_flag_mode, writer=True)  # a phase of the other side is refused; the flag is the control plane's

    # static checks of the valid sizes where they are known at trace time
    limits = mmad_limits(chip, c, a, b)
    for what, value in enumerate((m, k, n)):
        v = static_int(value)
        if v is not None and not 0 <= v <= limits[what]:
            raise ValueError(f"rule 'mmad sizes': {'mkn'[what]} = {v} is outside [0, {limits[what]}] for {a}, {b}, {c}")
    dg = static_int(disable_gemv)
    gemv_allowed = None if dg is None else not (chip.gemv_can_be_disabled and dg)
    m_static = static_int(m)
    static_nop = any(static_int(v) == 0 for v in (m, k, n))  # a NOP reads nothing, in any layout
    if m_static is not None and gemv_allowed is not None and not static_nop:
        gemv_static = m_static == 1 and gemv_allowed
        if gemv_static and a.fmt is not Format.ND:
            fix = "pass disable_gemv=True or " if chip.gemv_can_be_disabled else ""
            raise ValueError(
                f"rule 'GEMV layout': m == 1 runs GEMV, which reads A as ND, but {a} holds {a.fmt}: {fix}load A into an ND L0A tile"
            )
        if not gemv_static and a.fmt is Format.ND:
            raise ValueError(f"rule 'GEMV layout': {a} is ND, which only GEMV (m == 1) reads, but m = {m_static}")

    bt_tile = bias
    if bias is None and c_matrix_source is not False and c_matrix_init_val is not True:
        bt_tile = state.tile_at(Buffer.BT, 0)
        _need(
            bt_tile is not None,
            "mmad with c_matrix_source=True reads the bias at BiasTable address 0, but no tile lives there",
        )
        _need(
            bt_tile.dtype == c_dtype, f"rule 'bias dtype': the bias must be {c_dtype}, but {bt_tile} is {bt_tile.dtype}"
        )

    # a traced size outside its tile (or a GEMV layout the A tile does not hold) runs nothing: a finding
    sizes = [static_int(v) for v in (m, k, n)]
    if all(v is not None for v in sizes):  # static: a Python bool (a write known to happen reads nothing old)
        execute = all(v > 0 for v in sizes)
    else:
        execute = (jnp.asarray(m) > 0) & (jnp.asarray(k) > 0) & (jnp.asarray(n) > 0)
    execute = executes(mmad_faults(chip, c, a, b, m, k, n, disable_gemv, k_direction_align), execute)

    # the product over C's padded shape; K beyond the valid k never contributes
    mc, nc = c.padded
    a_nd = from_fractal(state.tile(a), a.fmt)
    b_nd = from_fractal(state.tile(b), Format.ZN)
    kw = min(a_nd.shape[1], b_nd.shape[0])
    a_nd = jnp.pad(a_nd[:mc, :kw], ((0, max(0, mc - a_nd.shape[0])), (0, 0)))
    b_nd = jnp.pad(b_nd[:kw, :nc], ((0, 0), (0, max(0, nc - b_nd.shape[1]))))
    acc_dtype = jnp.dtype(c_dtype)
    # element values (hifloat8 / fp4 e1m2 codes decoded; fp8, fp4 e2m1, int4 converted exactly)
    a_nd = values.decode(a_nd, a.dtype).astype(acc_dtype)
    b_nd = values.decode(b_nd, b.dtype).astype(acc_dtype)
    if sizes[1] is None or sizes[1] < kw:  # a static k over every column masks nothing (and no select is left)
        k_valid = jnp.arange(kw) < k
        a_nd, b_nd = jnp.where(k_valid[None, :], a_nd, 0), jnp.where(k_valid[:, None], b_nd, 0)
    # the product is computed on its own (optimization barriers): how XLA sums it then does not depend on what it
    # would otherwise fuse into it, so every engine and every lowering of the kernel gets the same bits
    a_nd, b_nd = jax.lax.optimization_barrier((a_nd, b_nd))
    if mx is None:
        prod = same_bits_dot_general(a_nd, b_nd, (((1,), (0,)), ((), ())), acc_dtype)
    else:
        prod = _mx_product(state, mx, a_nd, b_nd)
    prod = jax.lax.optimization_barrier(prod)

    # the accumulation is elementwise, so it runs in C's physical (Nz) layout: one relayout (the product's), not two
    prod = to_fractal(prod, Format.NZ, 16)
    c_old = state.tile(c)
    init = c_old
    if bt_tile is not None:
        row = state.tile(bt_tile)[0, :nc]
        row = jnp.pad(row, (0, nc - row.shape[0]))
        from_bias = to_fractal(jnp.broadcast_to(row[None, :], (mc, nc)), Format.NZ, 16)
        init = from_bias if bias is not None else select(c_matrix_source, from_bias, init)
    if bias is None:
        init = select(c_matrix_init_val, jnp.zeros_like(init), init)
    if dtypes.is_float(c_dtype):
        result = _saturate(init + prod, state.aic.saturation, keep_nan=state.options.poison_races)
    else:
        result = _saturating_add(init, prod)
    if sizes[0] is not None and sizes[2] is not None:  # static: NumPy, so a full region is known to be full
        region = (np.arange(mc)[:, None] < _ceil16(sizes[0])) & (np.arange(nc)[None, :] < _ceil16(sizes[2]))
    else:
        m_pad, n_pad = _ceil16(jnp.asarray(m)), _ceil16(jnp.asarray(n))
        region = (jnp.arange(mc)[:, None] < m_pad) & (jnp.arange(nc)[None, :] < n_pad)
    c_new = select(to_fractal(region, Format.NZ, 16), result, c_old)
    return write_tile(state, c, c_new, execute, racy_read())


def _mx_product(state: State, mx: tuple[Tile, Tile], a_nd, b_nd):
    """(scale_a ⊗ A) x (scale_b ⊗ B) over C's padded shape (rows/columns of C past the A/B tiles, where
    the operands are zero, take scale 1.0)."""
    scale_a, scale_b = mx
    mc, kw = a_nd.shape
    nc = b_nd.shape[1]
    kb = kw // mx_format.BLOCK
    one = mx_format.E8M0_BIAS  # the E8M0 code of 1.0

    def fit(codes, rows, cols):
        codes = codes[:rows, :cols]
        return jnp.pad(codes, ((0, rows - codes.shape[0]), (0, cols - codes.shape[1])), constant_values=one)

    sa = fit(mx_format.scale_codes(from_fractal(state.tile(scale_a), Format.ZZ)), mc, kb)
    sb = fit(mx_format.scale_codes(from_fractal(state.tile(scale_b), Format.NN)), kb, nc)
    return mx_format.block_scaled_dot(a_nd, b_nd, sa, sb)
