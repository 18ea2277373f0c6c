"""The leaf layer: the vocabulary (buffers, formats, pipes), the block's topology, verdicts and findings.

Nothing here imports from the rest of ascjax: the leaf modules first, then the chips, tiles,
options, dtypes, layouts and numeric formats built on them.
"""

# the chips, the allocator's tiles, the run options, dtypes and layouts: built on the vocabulary above
from . import formats as formats
from . import layout as layout
from ._buffers import ARCH_2201 as ARCH_2201
from ._buffers import ARCH_3510 as ARCH_3510
from ._buffers import BUFFERS as BUFFERS
from ._buffers import CHIP_GRANULE_BYTES as CHIP_GRANULE_BYTES
from ._buffers import BufferRow as BufferRow
from ._buffers import alignments as alignments
from ._buffers import capacities as capacities
from ._chip import CHIPS as CHIPS
from ._chip import Chip as Chip
from ._chip import get_chip as get_chip
from ._dtypes import dtype_name as dtype_name
from ._dtypes import to_numpy_dtype as to_numpy_dtype
from ._findings import HAZARD_NAMES as HAZARD_NAMES
from ._findings import RAW as RAW
from ._findings import SMALL_TILE as SMALL_TILE
from ._findings import WAR as WAR
from ._findings import WAW as WAW
from ._findings import Finding as Finding
from ._host import array_module as array_module
from ._host_eval import eval_jaxpr as eval_jaxpr
from ._host_eval import needed_inputs as needed_inputs
from ._host_first import HostFirst as HostFirst
from ._host_first import clear_host_caches as clear_host_caches
from ._host_first import host_call as host_call
from ._kinds import AIC_FLAG_PAIRS as AIC_FLAG_PAIRS
from ._kinds import AIC_PIPES as AIC_PIPES
from ._kinds import AIV_FLAG_PAIRS as AIV_FLAG_PAIRS
from ._kinds import AIV_PIPES as AIV_PIPES
from ._kinds import N_PIPES as N_PIPES
from ._kinds import Buffer as Buffer
from ._kinds import CoreKind as CoreKind
from ._kinds import Format as Format
from ._kinds import InstrKind as InstrKind
from ._kinds import Pipe as Pipe
from ._kinds import SyncMode as SyncMode
from ._memory import Allocator as Allocator
from ._memory import Tile as Tile
from ._numerics import EXACT_COMPILE as EXACT_COMPILE
from ._numerics import exact_jit as exact_jit
from ._numerics import fold_sum as fold_sum
from ._numerics import jit_outside as jit_outside
from ._options import Options as Options
from ._topology import AIC as AIC
from ._topology import AIV0 as AIV0
from ._topology import AIV1 as AIV1
from ._topology import CORE_NAMES as CORE_NAMES
from ._topology import N_CORES as N_CORES
from ._topology import N_QUEUES as N_QUEUES
from ._topology import core_pipes as core_pipes
from ._topology import gpipe as gpipe
from ._topology import pipe_name as pipe_name
from ._verdicts import BOUNDS_TRIP_COUNT as BOUNDS_TRIP_COUNT
from ._verdicts import BOUNDS_WHAT as BOUNDS_WHAT
from ._verdicts import EXCEPTIONS as EXCEPTIONS
from ._verdicts import MESSAGES as MESSAGES
from ._verdicts import SYNC_CROSS_MODE as SYNC_CROSS_MODE
from ._verdicts import SYNC_CROSS_PENDING as SYNC_CROSS_PENDING
from ._verdicts import SYNC_EVENT_RANGE as SYNC_EVENT_RANGE
from ._verdicts import SYNC_SET_TWICE as SYNC_SET_TWICE
from ._verdicts import AscjaxError as AscjaxError
from ._verdicts import BoundsError as BoundsError
from ._verdicts import DeadlockError as DeadlockError
from ._verdicts import LayoutError as LayoutError
from ._verdicts import LeftoverSignalError as LeftoverSignalError
from ._verdicts import RaceError as RaceError
from ._verdicts import SyncError as SyncError
from ._verdicts import UninitializedError as UninitializedError
from ._verdicts import Verdict as Verdict
