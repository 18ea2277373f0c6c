"""The L0C unit flag's modes: one bit per 512 B block, the mmad <-> fixpipe handshake.

| instruction | waits until | KEEP (2) after | UPDATE (3) after |
| mmad (writes) | flag == 0 | stays 0 | flag := 1 |
| fixpipe (reads) | flag == 1 | stays 1 | flag := 0 |

The handshake itself is the control plane's (``ascjax.engine``); the data functions and the
recorder read an instruction's mode with ``mode_value``.
"""

from __future__ import annotations

import enum

import jax
import jax.numpy as jnp
import numpy as np


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
    hint = ""
    phase = mode.strip().capitalize() if isinstance(mode, str) else None
    if phase in AccPhase.__members__:  # a phase's name as a string: name the enum member of this side
        sides = {True: [AccPhase], False: [STPhase], None: [AccPhase, STPhase]}[writer]
        hint = f" (for phase {phase} write {' or '.join(f'{e.__name__}.{phase}' for e in sides)})"
    raise ValueError(
        f"rule 'unit flag mode': unit_flag_mode={mode!r} is not a unit-flag mode{hint}: give UnitFlagMode.DISABLE / "
        "ENABLE_KEEP / ENABLE_UPDATE (0, 2, 3, or the name as a string), an AccPhase (mmad), an STPhase (store) "
        "or a traced integer"
    )
