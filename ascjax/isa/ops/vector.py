"""Vector compute on UB tiles (pipe V of an AIV): elementwise, scalar, row reductions, broadcasts, casts, fill.

Every op reads and writes whole ND tiles of one AIV's UB (``sub`` 0 or 1), or with ``valid`` (rows, cols) their
top-left region (``ops.valid``: a tail tile); a UB -> UB copy also re-lays a tile out
between ND and Nz (PyPTO-Pro's ND2NZ before an insert into L1). Results are
computed in the tile dtype (f16/bf16 results rounded to nearest even, as IEEE arithmetic
does); ``exp``/``ln``/``sqrt`` use XLA's implementations, which need not match the vector
unit's last bit, and division by a scalar or a broadcast column may be 1 ulp off (XLA
computes ``x * (1 / s)``). Row reductions and ``expand_*`` broadcasts follow PyPTO-Pro: a reduced
tile is ``[rows, 1]``.
"""

from __future__ import annotations

import enum

import jax
import jax.numpy as jnp

from ...core import Buffer, Format, fold_sum
from ...core._memory import Tile
from ...core._straight_through import straight_through
from ...core.formats.saturate import order_key
from ...core.layout import from_fractal, pad_to, to_fractal
from ...engine._state import State
from ._machine import core_of, executes, poison, racy_read
from .move import _expect, _need
from .valid import check_valid, is_whole, valid_faults, valid_mask

BINARY = {
    "add": jnp.add,
    "sub": jnp.subtract,
    "mul": jnp.multiply,
    "div": jnp.divide,
    "max": jnp.maximum,
    "min": jnp.minimum,
}
UNARY = {
    "abs": jnp.abs,
    "exp": jnp.exp,
    "ln": jnp.log,
    "sqrt": jnp.sqrt,
    "relu": lambda x: jnp.maximum(x, jnp.zeros((), x.dtype)),
    "neg": jnp.negative,
    "rsqrt": jax.lax.rsqrt,
    "recip": jnp.reciprocal,
}


#: ``reduce(x, axis)`` keeping the axis; a sum folds in one fixed order (``core.fold_sum``), so its bits do not depend on
#: what XLA compiles around it (a ``vmap``, a launch's blocks). A max or min is the same whatever the order.
REDUCE = {
    "max": lambda x, axis: jnp.max(x, axis=axis, keepdims=True),
    "sum": fold_sum,
    "min": lambda x, axis: jnp.min(x, axis=axis, keepdims=True),
}
#: ops on the slow (transcendental) path of the vector unit [facts §7 Vector: Exp/Ln/Sqrt/Div 32 el/cycle]
TRANSCENDENTAL = {"exp", "ln", "sqrt", "div", "rsqrt", "recip"}


class RoundMode(enum.IntEnum):
    """PyPTO-Pro / Ascend C cast rounding modes."""

    CAST_NONE = 0  # the conversion's default: round to nearest even for floats, truncation for float -> int
    CAST_RINT = 1  # round to nearest, ties to even
    CAST_ROUND = 2  # round to nearest, ties away from zero
    CAST_FLOOR = 3
    CAST_CEIL = 4
    CAST_TRUNC = 5
    CAST_ODD = 6  # round to odd (von Neumann): inexact results get an odd last bit


def _ub(tile, what: str, *, nz: bool = False) -> None:
    """``tile`` is a UB tile, in ND unless ``nz`` (vector compute reads and writes rows; only a copy re-lays out)."""
    _expect(tile, Buffer.UB, what)
    _need(
        nz or tile.fmt is Format.ND,
        f"rule 'UB layout': vector compute reads and writes ND tiles, and {what} {tile} is {tile.fmt}: move it to an "
        "ND tile first (a UB -> UB copy / pl.move converts)",
    )


def _vec_op(state: State, sub: int, out: Tile, ins, compute, valid=None):
    """A V op of AIV ``sub``: ``out = compute(*ins)`` on the tiles' arrays (poisoned where its reads are racy); with a
    ``valid`` region of ``out`` (rows, cols), only that region is written."""
    core_of(sub)
    arrays = [state.tile(t, sub) for t in ins]
    value = compute(*arrays).astype(out.np_dtype).reshape(out.physical_shape)
    value = poison(value, racy_read() if ins else jnp.asarray(False), state.options)
    if not is_whole(valid, (out.rows, out.cols)):
        keep = valid_mask(valid, (out.rows, out.cols)) & executes(valid_faults(valid, (out.rows, out.cols)))
        value = jnp.where(keep, value, state.tile(out, sub))
    return state.with_tile(out, value, sub)


def _region(valid, tile: Tile, what: str):
    """``valid`` checked against ``tile`` (None: the whole tile)."""
    check_valid(valid, (tile.rows, tile.cols), what)
    return None if is_whole(valid, (tile.rows, tile.cols)) else valid


def _same_shape(out: Tile, *tiles: Tile) -> None:
    for t in tiles:
        _need(
            (t.rows, t.cols) == (out.rows, out.cols),
            f"rule 'vector shapes': {t} and {out} differ in shape; elementwise ops take equal tiles",
        )


def binary(state: State, kind: str, out: Tile, lhs: Tile, rhs, *, valid=None, sub: int) -> State:
    """``out = lhs (op) rhs`` elementwise; ``rhs`` is a tile of the same shape or a scalar (traced allowed); ``valid``
    (rows, cols): only that top-left region (a tail)."""
    _need(kind in BINARY, f"unknown vector op {kind!r}: expected one of {sorted(BINARY)}")
    _ub(out, "out")
    _ub(lhs, "lhs")
    fn = BINARY[kind]
    if isinstance(rhs, Tile):
        _ub(rhs, "rhs")
        _same_shape(out, lhs, rhs)
        _need(lhs.dtype == rhs.dtype == out.dtype, f"rule 'vector dtypes': {kind} needs one dtype: {lhs}, {rhs}, {out}")
        return _vec_op(state, sub, out, (lhs, rhs), fn, _region(valid, out, kind))
    _same_shape(out, lhs)
    _need(lhs.dtype == out.dtype, f"rule 'vector dtypes': {kind}s needs one dtype: {lhs}, {out}")
    scalar = jnp.asarray(rhs, lhs.np_dtype)
    return _vec_op(state, sub, out, (lhs,), lambda x: fn(x, scalar), _region(valid, out, kind))


def unary(state: State, kind: str, out: Tile, src: Tile, *, valid=None, sub: int) -> State:
    """``out = f(src)`` elementwise for f in abs, exp, ln, sqrt, relu, neg, rsqrt, recip (``valid``: a tail region
    only)."""
    _need(kind in UNARY, f"unknown vector op {kind!r}: expected one of {sorted(UNARY)}")
    _ub(out, "out")
    _ub(src, "src")
    _same_shape(out, src)
    _need(src.dtype == out.dtype, f"rule 'vector dtypes': {kind} keeps the dtype ({src} -> {out}); cast first")
    return _vec_op(state, sub, out, (src,), UNARY[kind], _region(valid, out, kind))


def reduce_rows(state: State, kind: str, out: Tile, src: Tile, *, valid=None, sub: int) -> State:
    """Row reduction (max, min, sum) of ``src`` into the ``[rows, 1]`` tile ``out``; ``valid`` (rows, cols) of
    ``src``: only those columns of those rows are reduced."""
    return _reduce(state, kind, out, src, 1, sub, valid)


def reduce_cols(state: State, kind: str, out: Tile, src: Tile, *, valid=None, sub: int) -> State:
    """Column reduction (max, min, sum) of ``src`` into the ``[1, cols]`` tile ``out``.

    The statistics of a transposed (DN) score tile: one value per column, i.e. per query.
    """
    return _reduce(state, kind, out, src, 0, sub, valid)


#: the element a reduction ignores: where a valid region masks its source
_IDENTITY = {"max": -jnp.inf, "min": jnp.inf, "sum": 0}


def _ignored(kind: str, dtype):
    if jnp.issubdtype(dtype, jnp.integer):
        info = jnp.iinfo(dtype)
        return {"max": info.min, "min": info.max, "sum": 0}[kind]
    return _IDENTITY[kind]


def _reduce(state: State, kind: str, out: Tile, src: Tile, axis: int, sub: int, valid=None) -> State:
    _need(kind in REDUCE, f"unknown reduction {kind!r}: expected one of {sorted(REDUCE)}")
    _ub(out, "out")
    _ub(src, "src")
    name = ("col_", "row_")[axis] + kind
    want = (src.rows, 1) if axis == 1 else (1, src.cols)
    _need(
        (out.rows, out.cols) == want,
        f"rule '{('column', 'row')[axis]} reduction': {name} of {src} gives a [{want[0]}, {want[1]}] tile, got {out}",
    )
    _need(src.dtype == out.dtype, f"rule 'vector dtypes': {name} keeps the dtype ({src} -> {out})")
    red = REDUCE[kind]
    valid = _region(valid, src, name)
    if valid is None:
        return _vec_op(state, sub, out, (src,), lambda x: red(x, axis))
    inside = valid_mask(valid, (src.rows, src.cols))
    ignored = jnp.asarray(_ignored(kind, src.np_dtype), src.np_dtype)
    kept = (valid[0], 1) if axis == 1 else (1, valid[1])  # the rows (columns) of out the region reaches
    return _vec_op(state, sub, out, (src,), lambda x: red(jnp.where(inside, x, ignored), axis), kept)


def expand(state: State, kind: str, out: Tile, src: Tile, vec: Tile, *, valid=None, sub: int) -> State:
    """``expand_sub`` / ``expand_mul`` / ``expand_div`` / ``expand_add``: ``out = src (op) vec``.

    ``vec`` is a ``[rows, 1]`` column (broadcast along each row) or a ``[1, cols]`` row
    (broadcast down each column, the DN statistics of a transposed tile).
    """
    _need(kind in ("add", "sub", "mul", "div"), f"unknown expand op {kind!r}: expected add, sub, mul or div")
    for t, what in ((out, "out"), (src, "src"), (vec, "vec")):
        _ub(t, what)
    _same_shape(out, src)
    _need(
        (vec.rows, vec.cols) in ((src.rows, 1), (1, src.cols)),
        f"rule 'expand': the broadcast operand of {src} must be a [{src.rows}, 1] column or a [1, {src.cols}] "
        f"row, got {vec}",
    )
    _need(src.dtype == vec.dtype == out.dtype, f"rule 'vector dtypes': expand_{kind} needs one dtype")
    fn = BINARY[kind]
    return _vec_op(state, sub, out, (src, vec), fn, _region(valid, out, f"expand_{kind}"))


def copy(state: State, out: Tile, src: Tile, *, sub: int) -> State:
    """UB -> UB copy on V (``pl.move`` between Vec tiles): same dtype and element count.

    Elements keep their row-major order, so a ``[1, n]`` row becomes an ``[n, 1]`` column: the
    ND/DN views of one vector, as PyPTO-Pro kernels use them for row statistics.
    """
    _ub(out, "out", nz=True)
    _ub(src, "src", nz=True)
    _need(
        out.dtype == src.dtype and out.rows * out.cols == src.rows * src.cols,
        f"rule 'vector copy': a UB -> UB copy keeps dtype and element count: {src} -> {out} (cast to convert)",
    )
    if Format.NZ in (out.fmt, src.fmt):  # ND <-> Nz (PyPTO-Pro's ND2NZ before an insert into L1): the same matrix
        _need(
            (out.rows, out.cols) == (src.rows, src.cols),
            f"rule 'vector copy': a copy that changes the layout keeps the shape: {src} -> {out}",
        )
        return _vec_op(state, sub, out, (src,), lambda x: _relaid(x, src, out))
    return _vec_op(state, sub, out, (src,), lambda x: x.reshape(out.rows, out.cols))


def _relaid(x, src: Tile, out: Tile):
    """``src``'s physical array ``x`` as ``out``'s: through the matrix, the padding of ``out``'s fractals zero."""
    nd = from_fractal(x, src.fmt)[: src.rows, : src.cols] if src.fmt is Format.NZ else x
    padded = pad_to(nd, *out.padded)
    return to_fractal(padded, out.fmt, out.c0) if out.fmt is Format.NZ else padded


def fill(state: State, out: Tile, value, *, valid=None, sub: int) -> State:
    """``out[:] = value`` (a Python number or a traced scalar)."""
    _ub(out, "out")
    v = jnp.asarray(value, out.np_dtype)
    return _vec_op(state, sub, out, (), lambda: jnp.broadcast_to(v, (out.rows, out.cols)), _region(valid, out, "fill"))


def fillpad(state: State, out: Tile, src: Tile, value, *, valid=None, sub: int) -> State:
    """``out`` holds ``src``'s valid region (``valid``, rows x cols, traced allowed; None: all of ``src``) at its
    top left and ``value`` (the pad) everywhere else; ``out`` may be larger than ``src`` (PyPTO-Pro ``fillpad``'s
    EXPAND) or ``src`` itself (INPLACE)."""
    _ub(out, "out")
    _ub(src, "src")
    _need(
        out.rows >= src.rows and out.cols >= src.cols,
        f"rule 'fillpad shapes': {out} is smaller than {src}: the destination covers the source",
    )
    _need(out.dtype == src.dtype, f"rule 'vector dtypes': fillpad copies one dtype: {src} into {out}")
    region = (src.rows, src.cols) if valid is None else valid
    check_valid(region, (src.rows, src.cols), "fillpad")
    keep = valid_mask(region, (out.rows, out.cols)) & executes(valid_faults(region, (src.rows, src.cols)))
    pad = jnp.asarray(value, out.np_dtype)

    def compute(s):
        placed = jnp.pad(s[: src.rows, : src.cols], ((0, out.rows - src.rows), (0, out.cols - src.cols)))
        return jnp.where(keep, placed, pad)

    return _vec_op(state, sub, out, (src,), compute)


def cast(state: State, out: Tile, src: Tile, *, mode: RoundMode = RoundMode.CAST_NONE, valid=None,
         sub: int) -> State:  # fmt: skip
    """``out = src`` converted to ``out``'s dtype with rounding ``mode``; integers saturate, NaN -> 0.

    With ``Options.straight_through`` the rounding is differentiated as the identity.
    """
    _ub(out, "out")
    _ub(src, "src")
    _same_shape(out, src)
    mode = RoundMode(mode)

    def convert(x):
        return round_cast(x, out.np_dtype, mode)

    compute = (lambda x: straight_through(x, convert)) if state.options.straight_through else convert
    return _vec_op(state, sub, out, (src,), compute, _region(valid, out, "cast"))


def _value(x, other):
    """``x`` as float32; an infinite neighbour counts as the next step past the largest finite value,
    so a tie between max and max + 1 ulp rounds away to inf as IEEE says."""
    finite = other.astype(jnp.float32)
    step = finite - jnp.nextafter(other, jnp.zeros_like(other)).astype(jnp.float32)
    return jnp.where(jnp.isinf(x) & jnp.isfinite(finite), finite + step, x.astype(jnp.float32))


def _round_half_away(v):
    whole = jnp.floor(jnp.abs(v))
    return jnp.sign(v) * (whole + (jnp.abs(v) - whole >= 0.5))


def round_cast(x, dtype, mode: RoundMode):
    """Convert ``x`` to ``dtype`` with rounding ``mode`` (host- and trace-safe, elementwise)."""
    dtype = jnp.dtype(dtype)
    if jnp.issubdtype(dtype, jnp.integer):
        info = jnp.iinfo(dtype)
        if jnp.issubdtype(x.dtype, jnp.integer):
            return jnp.clip(x.astype(jnp.int64), info.min, info.max).astype(dtype)
        f = x.astype(jnp.float32)
        rounded = {
            RoundMode.CAST_NONE: jnp.trunc,
            RoundMode.CAST_TRUNC: jnp.trunc,
            RoundMode.CAST_RINT: jnp.round,
            RoundMode.CAST_ROUND: _round_half_away,
            RoundMode.CAST_FLOOR: jnp.floor,
            RoundMode.CAST_CEIL: jnp.ceil,
        }.get(mode)
        if rounded is None:
            raise ValueError(f"rule 'cast mode': {mode.name} is not a float -> integer rounding")
        r = jnp.where(jnp.isnan(f), 0.0, rounded(f))
        return jnp.clip(r, info.min, info.max).astype(dtype)
    nearest = x.astype(dtype)
    if mode in (RoundMode.CAST_NONE, RoundMode.CAST_RINT) or jnp.issubdtype(x.dtype, jnp.integer):
        return nearest
    wide = x.astype(jnp.float32)
    # compared as ordered integers: XLA on CPU treats float32 subnormals as 0 in float comparisons. The barriers keep
    # each rounded value as it is when it is read back as float32: XLA with excess precision (a GPU's default) folds
    # a float32 -> f16 -> float32 round trip to its input
    key, back = order_key(wide), order_key(jax.lax.optimization_barrier(nearest).astype(jnp.float32))
    nan = jnp.isnan(wide)
    down = jnp.where(~nan & (back > key), jnp.nextafter(nearest, jnp.asarray(-jnp.inf, dtype)), nearest)
    up = jnp.where(~nan & (back < key), jnp.nextafter(nearest, jnp.asarray(jnp.inf, dtype)), nearest)
    down, up = jax.lax.optimization_barrier((down, up))
    exact = nan | (back == key)
    if mode is RoundMode.CAST_FLOOR:
        return down
    if mode is RoundMode.CAST_CEIL:
        return up
    if mode is RoundMode.CAST_TRUNC:
        return jnp.where(key >= 0, down, up)
    if mode is RoundMode.CAST_ROUND:
        tie_away = jnp.where(key >= 0, up, down)
        if dtype == jnp.bfloat16:  # bf16 shares float32's exponents: the midpoint of two neighbours is a float32
            k_lo, k_hi = order_key(down.astype(jnp.float32)), order_key(up.astype(jnp.float32))
            mid = k_lo + (k_hi - k_lo) // 2
            below, above = key < mid, key > mid
        else:  # the neighbours' distances are exact float32 differences of normal numbers
            d_lo = wide - _value(down, up)
            d_hi = _value(up, down) - wide
            below, above = d_lo < d_hi, d_hi < d_lo
        return jnp.where(exact, nearest, jnp.where(below, down, jnp.where(above, up, tie_away)))
    if mode is RoundMode.CAST_ODD:
        bits = jnp.dtype(f"uint{dtype.itemsize * 8}")
        odd_down = (jnp.asarray(down).view(bits) & 1) == 1
        return jnp.where(exact, nearest, jnp.where(odd_down, down, up))
    raise ValueError(f"rule 'cast mode': unknown rounding mode {mode!r}")
