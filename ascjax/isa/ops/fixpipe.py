"""``fixpipe`` (pipe FIX): L0C -> GM with Nz -> ND conversion, ReLU, casts and quantisation
(``ascjax.formats.quant``), plus the fixpipe/cube configuration ops that live on the scalar pipe."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ...core import Buffer, Finding, Format
from ...core._memory import Tile
from ...core.formats import quant
from ...core.layout import from_fractal, to_fractal
from ...engine import Fault
from ...engine._state import State
from ._machine import executes, outside, poison, racy_read, select, static_int
from .move import _expect, _need
from .unit_flag import mode_value

MMAD_DIRECTION_M = 0  # SetMMColumnMajor / asc_set_mmad_direction_m: M first
MMAD_DIRECTION_N = 1  # SetMMRowMajor / asc_set_mmad_direction_n: N first

_HIF8_NAN = 0x80


def _concrete(x):
    """``x`` as a NumPy array when its value is known at trace time, else None."""
    try:
        return np.asarray(x)
    except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
        return None


def scale_operand(state: State, scale):
    """(scale values, kind) of a ``quant_scale``: None, a scalar ("tensor") or a vector ("channel")."""
    if scale is None:
        return None, None
    if isinstance(scale, str):
        _need(scale in state.gm, f"quant_scale names GM tensor {scale!r}, which is not an input of this kernel")
        _need(
            scale not in state.gm_outputs,
            f"quant_scale GM tensor {scale!r} is a kernel output: per-channel scales are read-only inputs",
        )
        scale = state.gm[scale]
    values = _concrete(scale)  # before jnp.asarray: inside a trace that would stage a constant
    scale = jnp.asarray(scale)
    _need(
        jnp.issubdtype(scale.dtype, jnp.floating),
        f"quant_scale holds float scales (the hardware reads float32 bits 13..31), got dtype {scale.dtype}",
    )
    if scale.ndim == 2 and scale.shape[0] == 1:
        scale = scale[0]
    _need(scale.ndim <= 1, f"quant_scale is one scale or a vector of per-column scales, got shape {scale.shape}")
    _need(
        values is None or bool(np.all(np.isfinite(values))),
        "rule 'quant scale': a quantisation scale must be finite (the 950 fixpipe rejects inf/NaN scales)",
    )
    return scale.astype(jnp.float32), ("tensor" if scale.ndim == 0 else "channel")


def fixpipe_faults(src: Tile, gm_shape, *, m=None, n=None, src_row=0, src_col=0, dst_row=0, dst_col=0, nz2nd=True):
    """The rules a fixpipe's traced sizes and offsets may break, in order: m and n within the L0C region, then
    (ND output) the (m x n) block at (dst_row, dst_col) within the GM tensor. Static ones are checked at the call."""
    m = src.rows - src_row if m is None else m
    n = src.cols - src_col if n is None else n
    win_r = static_int(m) if static_int(m) is not None else src.padded[0] - src_row
    win_c = static_int(n) if static_int(n) is not None else src.padded[1] - src_col
    out = [
        Fault(Finding.BOUNDS, outside(v, limit), what, v, limit) for v, limit, what in ((m, win_r, 0), (n, win_c, 2))
    ]
    if nz2nd and len(gm_shape) == 2 and not all(static_int(v) is not None for v in (m, n, dst_row, dst_col)):
        for v, size, limit, what in ((dst_row, m, gm_shape[0], 3), (dst_col, n, gm_shape[1], 4)):
            v = jnp.asarray(v, jnp.int32)
            out.append(Fault(Finding.BOUNDS, (v < 0) | (v + size > limit), what, v, limit - jnp.asarray(size)))
    return out


def fixpipe(
    state: State,
    dst: str,
    src,
    *,
    m=None,
    n=None,
    src_row: int = 0,
    src_col: int = 0,
    dst_row=0,
    dst_col=0,
    nz2nd: bool = True,
    relu: bool = False,
    unit_flag_mode=None,
    quant_scale=None,
    quant_mode: str | None = None,
    quant_offset: int = 0,
    atomic: bool = False,
) -> State:
    """``asc_copy_l0c2gm``: move the (m x n) region at (src_row, src_col) of L0C tile ``src`` to GM.

    ``nz2nd=True`` (CFG_ROW_MAJOR) writes ND at (dst_row, dst_col) of the 2-D GM tensor ``dst``;
    ``nz2nd=False`` (CFG_NZ) keeps Nz: ``dst`` is then 4-D (n/16, m/16, 16, 16). ``m``, ``n``,
    ``dst_row``, ``dst_col`` and ``unit_flag_mode`` may be traced.

    The L0C dtype and the dtype of ``dst`` select the conversion (docs/numerics.md): f32 -> f16 /
    bf16 (F322F16 / F322BF16, round to nearest even), f32 -> int8/uint8 (QF322B8_PRE), int32 ->
    f16 (DEQF16), int32 -> int8/uint8 (REQ8); on 950 also f32 -> float8_e4m3fn (QF322FP8_PRE),
    int32 -> bf16 (QS322BF16_PRE) and scaled f32 -> f32/f16/bf16. ``quant_mode`` names the mode
    (needed for HiFloat8, held as uint8: ``"QF322HIF8_PRE"``; a ``V`` prefix is implied by a
    vector scale). ``quant_scale`` is one scale (float, traced allowed) or one per output column
    (a 1-D array, or the name of a 1-D float32 GM input); the hardware reads it in (1, 8, 10)
    format. ``quant_offset`` (in [-256, 255]) is added by the int8/uint8 modes. Float outputs
    follow CTRL[48] (``set_ctrl_saturation``); ``relu`` zeroes negative L0C values. With
    ``Options.straight_through`` the rounding and saturation are differentiated as the identity.
    ``atomic`` adds the converted result to GM instead of overwriting it (``SetAtomicAdd``).
    """
    _expect(src, Buffer.L0C, "src")
    _need(dst in state.gm, f"GM tensor {dst!r} is not an input or output of this kernel: have {sorted(state.gm)}")
    _need(
        dst in state.gm_outputs,
        f"GM tensor {dst!r} is a kernel input, and inputs are read-only: declare it in outputs (workspaces too)",
    )
    g = state.gm[dst]
    scale, scale_kind = scale_operand(state, quant_scale)
    q, out_dtype = quant.resolve(
        src.dtype,
        jnp.dtype(g.dtype).name,
        arch=state.chip.arch,
        chip=state.chip.name,
        mode=quant_mode,
        scale=scale_kind,
    )
    lo, hi = quant.OFFSET_RANGE
    _need(
        isinstance(quant_offset, (int, np.integer)) and lo <= quant_offset <= hi,
        f"rule 'quant offset': quant_offset is a static 9-bit integer in [{lo}, {hi}], got {quant_offset!r}",
    )
    _need(
        quant_offset == 0 or q.offset,
        f"rule 'quant offset': only the int8/uint8 modes (QF322B8_PRE, REQ8) add an offset, not {q.name}",
    )
    _need(
        nz2nd or jnp.dtype(g.dtype).itemsize >= 2,
        f"fixpipe keeping Nz with an 8-bit output ({out_dtype}) merges channels into 16 x 32 fractals, which "
        "ascjax does not model: use nz2nd=True",
    )
    mode_value(unit_flag_mode, writer=False)  # a phase of the other side is refused; the flag is the control plane's
    m = src.rows - src_row if m is None else m
    n = src.cols - src_col if n is None else n
    _need(
        src_row % 16 == 0 and src_col % 16 == 0,
        f"rule 'fractal alignment': fixpipe source offset ({src_row}, {src_col}) must be a multiple of 16",
    )
    win_r = static_int(m) if static_int(m) is not None else src.padded[0] - src_row
    win_c = static_int(n) if static_int(n) is not None else src.padded[1] - src_col
    _need(
        0 <= src_row and src_row + win_r <= src.padded[0] and 0 <= src_col and src_col + win_c <= src.padded[1],
        f"rule 'bounds': a {win_r}x{win_c} region at ({src_row}, {src_col}) does not fit {src}",
    )
    # a traced size or offset outside its range moves nothing: the control plane's BOUNDS finding
    execute = executes(fixpipe_faults(src, g.shape, m=m, n=n, src_row=src_row, src_col=src_col, dst_row=dst_row,
                                      dst_col=dst_col, nz2nd=nz2nd))  # fmt: skip
    if nz2nd:
        _need(g.ndim == 2, f"fixpipe with nz2nd writes a 2-D GM tensor, {dst!r} has shape {g.shape}")
        if all(static_int(v) is not None for v in (m, n, dst_row, dst_col)):
            rows, cols, r0, c0 = (static_int(v) for v in (m, n, dst_row, dst_col))
            _need(
                r0 >= 0 and c0 >= 0 and r0 + rows <= g.shape[0] and c0 + cols <= g.shape[1],
                f"rule 'GM window': fixpipe writes a {rows}x{cols} block of {src} at ({r0}, {c0}) of GM output "
                f"{dst!r}, which is {g.shape[0]}x{g.shape[1]}: declare {dst!r} large enough or pass m / n",
            )
    else:
        for v, name in ((m, "m"), (n, "n"), (dst_row, "dst_row"), (dst_col, "dst_col")):
            _need(static_int(v) is not None, f"fixpipe keeping Nz needs a static {name}")
        _need(
            dst_row == 0 and dst_col == 0, "fixpipe keeping Nz writes a whole 4-D GM tensor: dst_row/dst_col must be 0"
        )
        want = ((n + 15) // 16, (m + 15) // 16, 16, 16)
        _need(
            tuple(g.shape) == want,
            f"fixpipe keeping Nz writes shape {want} for a {m}x{n} region, GM tensor {dst!r} is {tuple(g.shape)}",
        )
        win_r, win_c = want[1] * 16, want[0] * 16  # whole fractals, padding included

    racy = racy_read()
    data = from_fractal(state.tile(src), Format.NZ)[src_row : src_row + win_r, src_col : src_col + win_c]
    if scale_kind == "channel":  # scale j applies to output column j of the region
        limit = static_int(n) if static_int(n) is not None else win_c
        _need(
            scale.shape[0] >= limit,
            f"rule 'quant scale': the per-channel scale vector has {scale.shape[0]} entries, but the fixpipe "
            f"moves {limit} columns" + ("" if static_int(n) is not None else " (n is traced: the whole window)"),
        )
        scale = jnp.pad(scale[:win_c], (0, max(0, win_c - scale.shape[0])), constant_values=1.0)
    # poison_races: a NaN an earlier racy read left in L0C survives the conversion's saturation
    carried = jnp.isnan(data) if state.options.poison_races and jnp.issubdtype(data.dtype, jnp.floating) else False
    data = quant.apply(
        data, q, out_dtype, scale=scale, offset=quant_offset, relu=relu, saturate=state.aic.saturation,
        straight_through=state.options.straight_through,
    )  # fmt: skip
    racy = jnp.asarray(racy) | carried
    if out_dtype == "hifloat8":  # its NaN code, not uint8's poison
        data = jnp.where(racy & state.options.poison_races, jnp.uint8(_HIF8_NAN), data)
    else:
        data = poison(data, racy, state.options)
    _need(
        not atomic or out_dtype != "hifloat8",
        "rule 'atomic dtype': an atomic add of HiFloat8 codes is not modelled: store float16/float32 and convert",
    )
    track = dst in state.gm_written  # a launch merges the blocks' GM by what each wrote
    written = None
    if nz2nd and execute is True and static_int(m) == win_r and static_int(n) == win_c:
        # the whole window, known to be inside the tensor (no fault can hold): one in-place block write
        start = (jnp.asarray(dst_row, jnp.int32), jnp.asarray(dst_col, jnp.int32))
        old = jax.lax.dynamic_slice(g, start, data.shape) if atomic else 0
        new = jax.lax.dynamic_update_slice(g, (old + data).astype(g.dtype) if atomic else data.astype(g.dtype), start)
        if track:
            written = jnp.ones(data.shape, bool)
    elif nz2nd:
        rows_ok = jnp.arange(win_r) < m
        cols_ok = jnp.arange(win_c) < n
        # rows/columns past the valid m x n are padding: they are routed past the tensor and dropped
        ri = jnp.where(rows_ok & execute, dst_row + jnp.arange(win_r), g.shape[0])
        ci = jnp.where(cols_ok & execute, dst_col + jnp.arange(win_c), g.shape[1])
        at = g.at[ri[:, None], ci[None, :]]
        new = at.add(data, mode="drop") if atomic else at.set(data, mode="drop")
        if track:
            written = jnp.zeros(g.shape, bool).at[ri[:, None], ci[None, :]].set(True, mode="drop")
    else:
        fractals = to_fractal(data, Format.NZ, 16)
        new = select(execute, g + fractals if atomic else fractals, g)
        if track:
            written = jnp.broadcast_to(jnp.asarray(execute), g.shape)
    state = eqx.tree_at(lambda s: s.gm[dst], state, new)
    if track and written is not None and written.shape != g.shape:  # the block's marks, at its window
        return state.mark_gm(dst, written, atomic, start)
    return state.mark_gm(dst, written, atomic) if track else state


def set_l0c_copy_config(
    state: State, *, relu_pre_addr: int = 0, quant_pre_addr: int = 0, is_clean_unit_flag: bool = False
) -> State:
    """``asc_set_l0c_copy_config`` / ``SetFixPipeConfig``: with ``is_clean_unit_flag`` every L0C unit flag is reset
    to 0 (the unit flags are the control plane's: this data function computes nothing)."""
    return state


def set_mmad_direction(state: State, direction: str) -> State:
    """``asc_set_mmad_direction_m`` ("m": M first, SetMMColumnMajor) or ``_n`` ("n": N first, SetMMRowMajor)."""
    value = {"m": MMAD_DIRECTION_M, "n": MMAD_DIRECTION_N}.get(str(direction).lower())
    _need(value is not None, f"mmad direction is 'm' (M first) or 'n' (N first), got {direction!r}")
    return eqx.tree_at(lambda s: s.aic.mmad_direction, state, jnp.asarray(value, jnp.int32))


def set_ctrl_saturation(state: State, saturating: bool = True) -> State:
    """CTRL[48] via ``asc_set_ctrl``: saturation mode (inf -> +-max, NaN -> 0) or not (inf/NaN propagate)."""
    return eqx.tree_at(lambda s: s.aic.saturation, state, jnp.asarray(saturating, bool))
