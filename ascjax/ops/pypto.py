"""PyPTO-Pro's ``matmul`` / ``matmul_acc`` / ``store`` with phases, and the framework's auto M -> FIX sync.

A phase drives the unit flag (``AccPhase``/``STPhase``: Partial = KEEP, Final = UPDATE).
Without a phase the framework inserts a software sync after the matmul (set on M) and before
the store (wait on FIX); with a phase it inserts none (seed 000). The inserted pair is
modelled as the happens-before edge it creates: a phase-less store is ordered after the
last phase-less matmul that wrote its L0C blocks, and after nothing else. Phases may be
traced (0 = no phase), so one compiled kernel sweeps every combination.
"""

from __future__ import annotations

import enum

import equinox as eqx
import jax.numpy as jnp

from .. import hazards, timing
from ..core import AIC, Buffer, Pipe
from ..memory import Tile
from ..state import State
from ._machine import core_running
from .cube import mmad
from .fixpipe import fixpipe
from .move import _expect, _need
from .ub_move import AccToVecMode, copy_l0c2ub
from .unit_flag import block_window, mode_value, region_mask


class AtomicType(enum.IntEnum):
    """PyPTO-Pro ``store(..., atomic=)``: overwrite GM (``AtomicNone``) or add to it element-wise (``AtomicAdd``)."""

    AtomicNone = 0
    AtomicAdd = 1


def atomic_add(atomic) -> bool:
    """Whether a store's ``atomic`` (an ``AtomicType``, a bool or None) asks for an atomic add."""
    if atomic is None or isinstance(atomic, (bool, AtomicType)):
        return bool(atomic)
    raise ValueError(f"store atomic= takes pl.AtomicType.AtomicNone / AtomicAdd (or a bool), got {atomic!r}")


def _no_phase(phase):
    return mode_value(phase) == 0


def _auto_set(state: State, c: Tile, rows: int, cols: int, when) -> State:
    """The framework's set_flag(M -> FIX) after a phase-less matmul: its blocks remember the M clocks."""
    if state.data_only:
        return state
    mask = region_mask(c, state.chip, 0, -(-rows // 16) * 16, 0, -(-cols // 16) * 16)
    issued = when & ~state.wait.blocked[hazards.gpipe(AIC, Pipe.M)] & core_running(state, AIC)
    done_at = state.time.pipe_t[hazards.gpipe(AIC, Pipe.M)]
    state = eqx.tree_at(lambda s: s.time.auto_t, state, jnp.where(issued & mask, done_at, state.time.auto_t))
    if not state.options.sanitize:
        return state
    own = hazards.clock(state, AIC, Pipe.M)
    lo, hi = block_window(c, state.chip)
    vc = jnp.where((issued & mask[lo:hi])[:, None], own[None, :], state.aic.auto_vc[lo:hi])
    return eqx.tree_at(lambda s: s.aic.auto_vc, state, state.aic.auto_vc.at[lo:hi].set(vc))


def _auto_wait(state: State, c: Tile, row0, rows, col0, cols, when) -> State:
    """The framework's wait_flag(M -> FIX) before a phase-less store of blocks a phase-less matmul wrote."""
    if state.data_only:
        return state
    mask = region_mask(c, state.chip, row0, rows, col0, cols)
    issued = when & ~state.wait.blocked[hazards.gpipe(AIC, Pipe.FIX)] & core_running(state, AIC)
    ready = jnp.max(jnp.where(mask, state.time.auto_t, 0.0)) + state.costs.flag_latency_cycles
    state, _, _ = timing.schedule(state, hazards.gpipe(AIC, Pipe.FIX), -1, issued, 0.0, ready, timing.REASON_AUTO_SYNC)
    if not state.options.sanitize:
        return state
    lo, hi = block_window(c, state.chip)
    signalled = jnp.max(jnp.where(mask[lo:hi, None], state.aic.auto_vc[lo:hi], -1), axis=0)
    return hazards.join(state, AIC, Pipe.FIX, signalled, when=when)


def matmul(state: State, dst: Tile, lhs: Tile, rhs: Tile, bias: Tile | None = None, *, phase=None) -> State:
    """``pl.matmul``: dst = lhs x rhs (+ bias), sizes from the tiles; overwrites dst."""
    state = mmad(
        state,
        dst,
        lhs,
        rhs,
        lhs.rows,
        lhs.cols,
        rhs.cols,
        unit_flag_mode=phase,
        c_matrix_init_val=bias is None,
        bias=bias,
    )
    return _auto_set(state, dst, lhs.rows, rhs.cols, _no_phase(phase))


def matmul_acc(state: State, dst: Tile, acc: Tile, lhs: Tile, rhs: Tile, *, phase=None) -> State:
    """``pl.matmul_acc``: dst = acc + lhs x rhs, accumulating in L0C (``acc`` must be ``dst``)."""
    _need(acc == dst, f"matmul_acc accumulates in place: acc {acc} must be dst {dst}")
    state = mmad(state, dst, lhs, rhs, lhs.rows, lhs.cols, rhs.cols, unit_flag_mode=phase)
    return _auto_set(state, dst, lhs.rows, rhs.cols, _no_phase(phase))


def store(
    state: State, dst: str, src: Tile, offsets=(0, 0), *, phase=None, relu: bool = False, scale=None, atomic=None
) -> State:
    """``pl.store`` of an L0C tile to GM (fixpipe, Nz -> ND) at ``offsets`` (row, col; traced allowed).

    ``scale`` is the fixpipe quantisation scale: a float (per tensor) or a GM vector name (per
    channel), see ``fixpipe(quant_scale=...)``. ``atomic=AtomicType.AtomicAdd`` adds the
    result to GM instead of overwriting it.
    """
    _expect(src, Buffer.L0C, "src")
    state = _auto_wait(state, src, 0, src.rows, 0, src.cols, _no_phase(phase))
    return fixpipe(
        state,
        dst,
        src,
        dst_row=offsets[0],
        dst_col=offsets[1],
        relu=relu,
        unit_flag_mode=phase,
        quant_scale=scale,
        atomic=atomic_add(atomic),
    )


def move_to_vec(
    state: State, dst: Tile, src: Tile, *, acc_to_vec_mode=AccToVecMode.SingleModeVec0, phase=None, relu: bool = False
) -> State:
    """``pl.move`` of an L0C tile to the AIVs' UB (FIX), split by ``acc_to_vec_mode``; phases as for ``store``."""
    _expect(src, Buffer.L0C, "src")
    state = _auto_wait(state, src, 0, src.rows, 0, src.cols, _no_phase(phase))
    return copy_l0c2ub(state, dst, src, acc_to_vec_mode=acc_to_vec_mode, relu=relu, unit_flag_mode=phase)
