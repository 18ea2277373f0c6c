"""ascjax: a JAX-backed, differentiable, functional emulator of the Huawei Ascend AI Core."""

import os as _os

# XLA's "Very slow compile?" banners are C++ ERROR logs with no switch of their own; a run
# should not print them, so XLA's C++ logs stop below FATAL unless the user chose a level
# (it takes effect when ascjax is imported before jax).
_os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from . import isa, layout, ops, pl
from .case import Case, build_case, case, load_cases, run_case
from .check import CheckResult, check, control_options
from .chip import CHIPS, Chip, get_chip
from .compile_cache import enable_compile_cache
from .core import (
    AscjaxError,
    BoundsError,
    Buffer,
    DeadlockError,
    Format,
    LayoutError,
    LeftoverSignalError,
    Pipe,
    RaceError,
    SyncError,
    SyncMode,
    UninitializedError,
    Verdict,
)
from .engine import Costs, default_costs
from .launch import LaunchResult, launch
from .memory import Allocator, Tile
from .ops import AccPhase, AccToVecMode, RoundMode, STPhase, UnitFlagMode
from .options import Options
from .program import Program
from .report import Report
from .run import Result, run
from .state import State
from .sweep import SweepTable, sweep
from .tile_group import TileGroup, TileSlot
from .tracing import UnusedInputWarning

__version__ = "0.1.0"

__all__ = [
    "SweepTable",
    "sweep",
    "enable_compile_cache",
    "AccPhase",
    "AccToVecMode",
    "RoundMode",
    "SyncMode",
    "TileGroup",
    "TileSlot",
    "pl",
    "Options",
    "Costs",
    "default_costs",
    "Allocator",
    "AscjaxError",
    "BoundsError",
    "Buffer",
    "CHIPS",
    "Case",
    "CheckResult",
    "Chip",
    "DeadlockError",
    "Format",
    "LaunchResult",
    "LayoutError",
    "LeftoverSignalError",
    "Pipe",
    "Program",
    "Report",
    "Result",
    "STPhase",
    "State",
    "SyncError",
    "RaceError",
    "UninitializedError",
    "Tile",
    "UnusedInputWarning",
    "UnitFlagMode",
    "Verdict",
    "build_case",
    "case",
    "check",
    "control_options",
    "get_chip",
    "isa",
    "launch",
    "layout",
    "load_cases",
    "ops",
    "run",
    "run_case",
]
