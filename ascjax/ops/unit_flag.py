"""The L0C unit flag: one bit per 512 B block, the mmad <-> fixpipe handshake.

| instruction | waits until | KEEP (2) after | UPDATE (3) after |
| mmad (writes) | flag == 0 | stays 0 | flag := 1 |
| fixpipe (reads) | flag == 1 | stays 1 | flag := 0 |
"""

from __future__ import annotations

import enum

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import hazards
from ..core import AIC, Pipe
from ..memory import Tile
from ..state import State, WaitKind
from ._machine import block, hint_release

ROWS_PER_BLOCK = 8  # a 16 x 16 fp32/int32 fractal is 1024 B = two 512 B blocks of 8 rows


class UnitFlagMode(enum.IntEnum):
    """``asc_unit_flag_mode`` (MmadParams.unitFlag / Fixpipe unitFlag)."""

    DISABLE = 0
    ENABLE_KEEP = 2
    ENABLE_UPDATE = 3


class AccPhase(enum.IntEnum):
    """PyPTO-Pro phase of matmul / matmul_acc: Partial = KEEP, Final = UPDATE."""

    Partial = 2
    Final = 3


class STPhase(enum.IntEnum):
    """PyPTO-Pro phase of store / move out of L0C: Partial = KEEP, Final = UPDATE."""

    Partial = 2
    Final = 3


def mode_value(mode, *, writer: bool | None = None):
    """A unit-flag mode as int32 (None = DISABLE); traced integers pass through.

    ``writer``: the instruction writes L0C (an mmad takes an AccPhase) or reads it (a store or a
    move out of L0C takes an STPhase); the other side's phase is refused. A mode may also be
    named (``"ENABLE_UPDATE"``).
    """
    if mode is None:
        return jnp.int32(0)
    if writer is not None:
        wrong, right, side = (STPhase, AccPhase, "an mmad") if writer else (AccPhase, STPhase, "a store or move")
        if isinstance(mode, wrong):
            raise ValueError(
                f"rule 'phase side': {type(mode).__name__}.{mode.name} is the phase of the other side of the unit "
                f"flag; {side} takes {right.__name__} (here {right.__name__}.{mode.name})"
            )
    if isinstance(mode, str) and mode.strip().upper() in UnitFlagMode.__members__:
        mode = UnitFlagMode[mode.strip().upper()]
    if isinstance(mode, (enum.Enum, int, np.integer)) and not isinstance(mode, bool):
        value = int(mode)
        if value not in (0, 2, 3):
            raise ValueError(f"unit_flag_mode must be DISABLE (0), ENABLE_KEEP (2) or ENABLE_UPDATE (3), got {value}")
        return jnp.int32(value)
    if isinstance(mode, (jax.Array, np.ndarray)) and jnp.issubdtype(jnp.asarray(mode).dtype, jnp.integer):
        return jnp.asarray(mode, jnp.int32)
    raise ValueError(
        f"rule 'unit flag mode': unit_flag_mode={mode!r} is not a unit-flag mode: give UnitFlagMode.DISABLE / "
        "ENABLE_KEEP / ENABLE_UPDATE (0, 2, 3, or the name as a string), an AccPhase (mmad), an STPhase (store) "
        "or a traced integer"
    )


def mode_name(value: int) -> str:
    try:
        return UnitFlagMode(int(value)).name
    except ValueError:
        return f"mode {int(value)}"


def tile_blocks(tile: Tile, chip):
    """Global block index of every (n1, m1, half) of an Nz L0C tile (traced for a TileGroup slot)."""
    n1, m1 = tile.physical_shape[:2]
    local = np.arange(n1 * m1 * 2).reshape(n1, m1, 2)
    ids = (tile.addr // chip.unit_flag_block_bytes) + local
    slot = getattr(tile, "slot", None)
    return ids if slot is None else ids + slot * (tile.stride_bytes // chip.unit_flag_block_bytes)


def block_window(tile: Tile, chip) -> tuple[int, int]:
    """Static [lo, hi) of the L0C blocks ``tile`` may touch (every slot of a TileGroup), so the
    sanitizer's per-block clocks are read and written there only, not over all of L0C."""
    n1, m1 = tile.physical_shape[:2]
    lo = tile.addr // chip.unit_flag_block_bytes
    span = n1 * m1 * 2
    if getattr(tile, "slot", None) is not None:
        span += (tile.depth - 1) * (tile.stride_bytes // chip.unit_flag_block_bytes)
    return lo, lo + span


def region_mask(tile: Tile, chip, row0, rows, col0, cols) -> jnp.ndarray:
    """bool[n_blocks]: the L0C blocks a (rows x cols) region at (row0, col0) of ``tile`` touches."""
    n1, m1 = tile.physical_shape[:2]
    r_lo = np.arange(m1)[None, :, None] * 16 + np.arange(2)[None, None, :] * ROWS_PER_BLOCK
    c_lo = np.arange(n1)[:, None, None] * 16
    rows_hit = (r_lo < row0 + rows) & (r_lo + ROWS_PER_BLOCK > row0)
    cols_hit = (c_lo < col0 + cols) & (c_lo + 16 > col0)
    local = rows_hit & cols_hit & (jnp.asarray(rows) > 0) & (jnp.asarray(cols) > 0)
    ids = tile_blocks(tile, chip).reshape(-1)
    return jnp.zeros((chip.l0c_blocks,), bool).at[ids].set(local.reshape(-1))


def handshake(
    state: State, active, op: int, pipe: Pipe, mask, mode, want: int, window: tuple[int, int]
) -> tuple[State, jnp.ndarray]:
    """Wait for every block in ``mask`` to hold ``want`` (if the mode enables the flag).

    Returns the state and whether the op executes. An unsatisfied wait blocks ``pipe``.
    On execution the blocks record the op; UPDATE flips them to ``1 - want``. ``window``
    (``block_window``) bounds the blocks ``mask`` may hold.
    """
    if state.data_only:  # the data plane: the control plane decides who waits
        return state, active
    aic = state.aic
    enabled = mode != int(UnitFlagMode.DISABLE)
    unsatisfied = mask & (aic.unit_flag != want)
    stuck = active & enabled & jnp.any(unsatisfied)
    idx = jnp.arange(unsatisfied.shape[0])
    lo = jnp.min(jnp.where(unsatisfied, idx, unsatisfied.shape[0]))
    hi = jnp.max(jnp.where(unsatisfied, idx, -1))
    lo_safe = jnp.clip(lo, 0, unsatisfied.shape[0] - 1)
    state = block(
        state,
        stuck,
        pipe,
        op,
        WaitKind.UNIT_FLAG,
        want,
        lo=lo,
        hi=hi,
        count=jnp.sum(unsatisfied),
        last_op=aic.uf_last_op[lo_safe],
        last_mode=aic.uf_last_mode[lo_safe],
        mask=unsatisfied,
    )
    execute = active & ~stuck
    touched = execute & mask
    update = execute & (mode == int(UnitFlagMode.ENABLE_UPDATE))
    flag = jnp.where(update & mask, 1 - want, aic.unit_flag)
    # happens-before: a satisfied wait orders this op after the UPDATE that set the awaited value
    if state.options.sanitize:
        lo, hi = window
        win, vc = mask[lo:hi], aic.uf_vc[lo:hi]
        signalled = jnp.max(jnp.where(win[:, None], vc, 0), axis=0)
        state = hazards.join(state, AIC, pipe, signalled, when=execute & enabled)
        own = hazards.clock(state, AIC, pipe)
        uf_vc = aic.uf_vc.at[lo:hi].set(jnp.where((update & win)[:, None], own[None, :], vc))
        state = eqx.tree_at(lambda s: s.aic.uf_vc, state, uf_vc)
    # a pipe blocked waiting for the value this op sets would have been released by it
    w = state.wait
    releases = update & (w.kind == WaitKind.UNIT_FLAG) & (w.value == 1 - want) & jnp.any(w.mask & mask, axis=1)
    state = hint_release(state, releases, op)
    sets = update & mask if want == 0 else jnp.zeros_like(mask)
    new_aic = eqx.tree_at(
        lambda a: (a.unit_flag, a.uf_last_op, a.uf_last_mode, a.uf_set_op),
        state.aic,
        (
            flag,
            jnp.where(touched, op, aic.uf_last_op),
            jnp.where(touched, mode, aic.uf_last_mode),
            jnp.where(sets, op, aic.uf_set_op),
        ),
    )
    return eqx.tree_at(lambda s: s.aic, state, new_aic), execute
