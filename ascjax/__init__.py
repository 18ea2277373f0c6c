"""ascjax: a JAX-backed, differentiable, functional emulator of the Huawei Ascend AI Core."""

import os as _os

# XLA's "Very slow compile?" banners are C++ ERROR logs with no switch of their own; a run
# should not print them, so XLA's C++ logs stop below FATAL unless the user chose a level
# (it takes effect when ascjax is imported before jax).
_os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from . import isa
from .core import (
    CHIPS,
    Allocator,
    AscjaxError,
    BoundsError,
    Buffer,
    Chip,
    DeadlockError,
    Format,
    LayoutError,
    LeftoverSignalError,
    Options,
    Pipe,
    RaceError,
    SyncError,
    SyncMode,
    Tile,
    UninitializedError,
    Verdict,
    formats,
    get_chip,
    layout,
)
from .engine import Costs, State, default_costs
from .front import Program, TileGroup, TileSlot, UnusedInputWarning, pl
from .isa import ops
from .isa.ops import AccPhase, AccToVecMode, RoundMode, STPhase, UnitFlagMode
from .report import Report
from .runner import CheckResult, LaunchResult, Result, check, clear_caches, control_options, launch, run
from .tools import (
    Case,
    LoopSummary,
    SweepTable,
    build_case,
    case,
    compare,
    enable_compile_cache,
    golden,
    load_cases,
    run_case,
    summarise_loop,
    sweep,
)

__version__ = "0.1.0"

__all__ = [
    "LoopSummary",
    "summarise_loop",
    "SweepTable",
    "sweep",
    "enable_compile_cache",
    "clear_caches",
    "AccPhase",
    "AccToVecMode",
    "RoundMode",
    "SyncMode",
    "TileGroup",
    "TileSlot",
    "pl",
    "formats",
    "compare",
    "golden",
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
