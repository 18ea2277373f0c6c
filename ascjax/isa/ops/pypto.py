"""PyPTO-Pro's ``matmul`` / ``matmul_acc`` / ``store`` with phases, and the framework's auto M -> FIX sync.

A phase drives the unit flag (``AccPhase``/``STPhase``: Partial = KEEP, Final = UPDATE).
Without a phase the framework inserts a software sync after the matmul (set on M) and before
the store (wait on FIX); with a phase it inserts none (seed 000). The recorder
(``ascjax.front._recorder``) records that pair for the control plane: a phase-less store is ordered
after the last phase-less matmul of its tile. Phases may be traced (0 = no phase), so one
compiled kernel sweeps every combination.
"""

from __future__ import annotations

import enum

from ...core import Buffer
from ...core._memory import Tile
from ...engine._state import State
from .cube import mmad
from .fixpipe import fixpipe
from .move import _expect, _need
from .ub_move import AccToVecMode, copy_l0c2ub


class AtomicType(enum.IntEnum):
    """PyPTO-Pro ``store(..., atomic=)``: overwrite GM (``AtomicNone``) or add to it element-wise (``AtomicAdd``)."""

    AtomicNone = 0
    AtomicAdd = 1


def atomic_add(atomic) -> bool:
    """Whether a store's ``atomic`` (an ``AtomicType``, a bool or None) asks for an atomic add."""
    if atomic is None or isinstance(atomic, (bool, AtomicType)):
        return bool(atomic)
    raise ValueError(f"store atomic= takes pl.AtomicType.AtomicNone / AtomicAdd (or a bool), got {atomic!r}")


def matmul_sizes(lhs: Tile, rhs: Tile, m=None, k=None, n=None) -> tuple:
    """A matmul's (m, k, n): the tiles' unless given (a tail's valid sizes, traced allowed)."""
    return (lhs.rows if m is None else m, lhs.cols if k is None else k, rhs.cols if n is None else n)


def matmul(state: State, dst: Tile, lhs: Tile, rhs: Tile, bias: Tile | None = None, *, phase=None, m=None, k=None,
           n=None) -> State:  # fmt: skip
    """``pl.matmul``: dst = lhs x rhs (+ bias), sizes from the tiles (or ``m``, ``k``, ``n``: a tail's); overwrites
    dst."""
    m, k, n = matmul_sizes(lhs, rhs, m, k, n)
    return mmad(state, dst, lhs, rhs, m, k, n, unit_flag_mode=phase, c_matrix_init_val=bias is None, bias=bias)


def matmul_acc(state: State, dst: Tile, acc: Tile, lhs: Tile, rhs: Tile, *, phase=None, m=None, k=None,
               n=None) -> State:  # fmt: skip
    """``pl.matmul_acc``: dst = acc + lhs x rhs, accumulating in L0C (``acc`` must be ``dst``)."""
    _need(acc == dst, f"matmul_acc accumulates in place: acc {acc} must be dst {dst}")
    return mmad(state, dst, lhs, rhs, *matmul_sizes(lhs, rhs, m, k, n), unit_flag_mode=phase)


def store(
    state: State, dst: str, src: Tile, offsets=(0, 0), *, phase=None, relu: bool = False, scale=None, atomic=None,
    m=None, n=None, quant_mode: str | None = None,
) -> State:  # fmt: skip
    """``pl.store`` of an L0C tile to GM (fixpipe, Nz -> ND) at ``offsets`` (row, col; traced allowed).

    ``scale`` is the fixpipe quantisation scale: a float (per tensor) or a GM vector name (per
    channel), see ``fixpipe(quant_scale=...)``. ``atomic=AtomicType.AtomicAdd`` adds the
    result to GM instead of overwriting it; ``m`` / ``n`` (traced allowed): only that top-left region (a tail);
    ``quant_mode``: the fixpipe's mode where the GM dtype does not name it (HiFloat8, held as uint8 codes).
    """
    _expect(src, Buffer.L0C, "src")
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
        m=m,
        n=n,
        quant_mode=quant_mode,
    )


def move_to_vec(
    state: State, dst: Tile, src: Tile, *, acc_to_vec_mode=AccToVecMode.SingleModeVec0, phase=None, relu: bool = False,
    m=None, n=None, scale=None,
) -> State:  # fmt: skip
    """``pl.move`` of an L0C tile to the AIVs' UB (FIX), split by ``acc_to_vec_mode``; phases as for ``store``;
    ``m`` / ``n``: a tail's region of ``src`` (the split divides it); ``scale``: a per-tensor quantisation."""
    _expect(src, Buffer.L0C, "src")
    return copy_l0c2ub(state, dst, src, acc_to_vec_mode=acc_to_vec_mode, relu=relu, unit_flag_mode=phase, m=m, n=n,
                       quant_scale=scale)  # fmt: skip
