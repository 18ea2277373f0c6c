"""Pure ops: each is ``state -> state``, jit-able and usable inside ``lax.scan``."""

from .cube import mmad
from .fixpipe import (
    MMAD_DIRECTION_M,
    MMAD_DIRECTION_N,
    fixpipe,
    set_ctrl_saturation,
    set_l0c_copy_config,
    set_mmad_direction,
)
from .move import copy_gm2l1, copy_gm2l1_nd2nz, copy_l12bt, copy_l12l0a, copy_l12l0b
from .pypto import matmul, matmul_acc, store
from .sync import sync_notify, sync_pipe, sync_wait
from .unit_flag import AccPhase, STPhase, UnitFlagMode

__all__ = [
    "AccPhase",
    "MMAD_DIRECTION_M",
    "MMAD_DIRECTION_N",
    "STPhase",
    "UnitFlagMode",
    "copy_gm2l1",
    "copy_gm2l1_nd2nz",
    "copy_l12bt",
    "copy_l12l0a",
    "copy_l12l0b",
    "fixpipe",
    "matmul",
    "matmul_acc",
    "mmad",
    "set_ctrl_saturation",
    "set_l0c_copy_config",
    "set_mmad_direction",
    "store",
    "sync_notify",
    "sync_pipe",
    "sync_wait",
]
