"""Pure ops: each is ``state -> state``, jit-able and usable inside ``lax.scan``."""

from . import scalar as scalar
from .cross_core import set_cross_core, wait_cross_core
from .cube import mmad, mmad_faults
from .fixpipe import (
    MMAD_DIRECTION_M,
    MMAD_DIRECTION_N,
    fixpipe,
    fixpipe_faults,
    set_ctrl_saturation,
    set_l0c_copy_config,
    set_mmad_direction,
)
from .mmad_mx import copy_l12scale, copy_l12scale_faults, matmul_mx, matmul_mx_acc, mmad_mx
from .move import copy_gm2l1, copy_gm2l1_nd2nz, copy_l12bt, copy_l12l0a, copy_l12l0b, offset_faults
from .pypto import matmul, matmul_acc, matmul_sizes, move_to_vec, store
from .scalar import setval_gm
from .sync import mutex_lock, mutex_unlock, sync_notify, sync_pipe, sync_wait
from .ub_move import AccToVecMode, copy_gm2ub, copy_l0c2ub, copy_ub2gm, copy_ub2l1, l0c_to_ub_faults, split
from .unit_flag import AccPhase, STPhase, UnitFlagMode
from .vector import (
    RoundMode,
    binary,
    cast,
    copy,
    expand,
    fill,
    fillpad,
    reduce_cols,
    reduce_rows,
    round_cast,
    unary,
)
from .vector_function import vector_function

__all__ = [
    "AccPhase",
    "AccToVecMode",
    "RoundMode",
    "binary",
    "cast",
    "copy_gm2ub",
    "copy_l0c2ub",
    "l0c_to_ub_faults",
    "copy_ub2gm",
    "copy_ub2l1",
    "copy",
    "expand",
    "fill",
    "fillpad",
    "move_to_vec",
    "reduce_cols",
    "reduce_rows",
    "round_cast",
    "set_cross_core",
    "split",
    "unary",
    "vector_function",
    "wait_cross_core",
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
    "fixpipe_faults",
    "matmul",
    "matmul_acc",
    "matmul_sizes",
    "mmad",
    "mmad_faults",
    "offset_faults",
    "copy_l12scale_faults",
    "mmad_mx",
    "matmul_mx",
    "matmul_mx_acc",
    "copy_l12scale",
    "set_ctrl_saturation",
    "set_l0c_copy_config",
    "set_mmad_direction",
    "setval_gm",
    "store",
    "mutex_lock",
    "mutex_unlock",
    "sync_notify",
    "sync_pipe",
    "sync_wait",
]
