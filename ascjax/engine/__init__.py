"""The engine layer: the instruction record and the control plane that runs over it.

Imports only ``ascjax.core``. Everything here is internal to ascjax: front ends record into a
``RecordBuilder``; ``run_control`` executes the record's sync hardware and sanitizer.
"""

from ._control import ControlResult as ControlResult
from ._control import run_control as run_control
from ._control import state_bytes as state_bytes
from ._control import sweep_control as sweep_control
from ._control import verdict as verdict
from ._log import FINDING_FIELDS as FINDING_FIELDS
from ._machine import Machine as Machine
from ._options import ControlOptions as ControlOptions
from ._options import SyncLatency as SyncLatency
from ._record import UF_KEEP as UF_KEEP
from ._record import UF_OFF as UF_OFF
from ._record import UF_UPDATE as UF_UPDATE
from ._record import UNIT_FLAG_BLOCK_BYTES as UNIT_FLAG_BLOCK_BYTES
from ._record import Record as Record
from ._record import RecordBuilder as RecordBuilder
from ._record import Sync as Sync
from ._record import Template as Template
from ._record import UnitFlagRole as UnitFlagRole
from ._record import Window as Window
