"""The front ends: `Program` (the Ascend C style facade: context, alloc, loops, sections), the
`pl` tile language (PyPTO-Pro), TileGroups, and the recording of a kernel into the engine's record.
"""

from . import pl as pl
from ._program import NeedsData as NeedsData
from ._program import Program as Program
from ._tile_group import TileGroup as TileGroup
from ._tile_group import TileSlot as TileSlot
from ._tracing import UnusedInputWarning as UnusedInputWarning
from ._tracing import forget_recordings as forget_recordings
from ._tracing import record_kernel as record_kernel
from ._tracing import record_on_host as record_on_host
from ._tracing import trace_kernel as trace_kernel
