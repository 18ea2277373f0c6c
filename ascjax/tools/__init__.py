"""Tools on top of running: case files, sweeps and their tables, golden data and its comparison,
the compile cache and the command line (`python -m ascjax`).
"""

from . import compare as compare
from . import golden as golden
from ._case import Case as Case
from ._case import build_case as build_case
from ._case import case as case
from ._case import load_cases as load_cases
from ._case import run_case as run_case
from ._compile_cache import enable_compile_cache as enable_compile_cache
from ._loops import LoopSummary as LoopSummary
from ._loops import summarise_loop as summarise_loop
from ._sweep import SweepTable as SweepTable
from ._sweep import sweep as sweep
