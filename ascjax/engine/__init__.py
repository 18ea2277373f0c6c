"""The engine layer: the instruction record, the control plane that runs over it, and the costs it is timed by.

Imports only ``ascjax.core``. Everything here is internal to ascjax: front ends record into a
``RecordBuilder``; ``run_control`` executes the record's sync hardware and sanitizer.
"""

from ._control import ControlResult as ControlResult
from ._control import reset_control_plane as reset_control_plane
from ._control import run_control as run_control
from ._control import run_control_as_host as run_control_as_host
from ._control import state_bytes as state_bytes
from ._control import sweep_control as sweep_control
from ._control import verdict as verdict
from ._costs import Costs as Costs
from ._costs import cube_class as cube_class
from ._costs import default_costs as default_costs
from ._costs import fix_class as fix_class
from ._costs import fix_fractal_cycles as fix_fractal_cycles
from ._costs import fixpipe_cycles as fixpipe_cycles
from ._costs import gm_read_flight as gm_read_flight
from ._costs import gm_write_flight as gm_write_flight
from ._costs import l0c_to_ub_cycles as l0c_to_ub_cycles
from ._costs import mmad_cycles as mmad_cycles
from ._costs import sync_latency as sync_latency
from ._costs import transfer_cycles as transfer_cycles
from ._costs import vector_cycles as vector_cycles
from ._critical import run_cycles as run_cycles

# the data plane: the buffers' state, the section plan and the execution of the record's data
from ._dataplane import Schedule as Schedule
from ._dataplane import schedule as schedule
from ._log import FINDING_FIELDS as FINDING_FIELDS
from ._lowering import scan_lowered as scan_lowered
from ._machine import Machine as Machine
from ._options import ControlOptions as ControlOptions
from ._options import SyncLatency as SyncLatency
from ._order import EmitOrder as EmitOrder
from ._order import emit_order as emit_order
from ._private import PrivateLoops as PrivateLoops
from ._private import private_loops as private_loops
from ._record import FAULT_KINDS as FAULT_KINDS
from ._record import GM_SPACE_PREFIX as GM_SPACE_PREFIX
from ._record import UF_KEEP as UF_KEEP
from ._record import UF_OFF as UF_OFF
from ._record import UF_UPDATE as UF_UPDATE
from ._record import UNIT_FLAG_BLOCK_BYTES as UNIT_FLAG_BLOCK_BYTES
from ._record import Fault as Fault
from ._record import Record as Record
from ._record import RecordBuilder as RecordBuilder
from ._record import Sync as Sync
from ._record import Template as Template
from ._record import UnitFlagRole as UnitFlagRole
from ._record import Window as Window
from ._sections import Plan as Plan
from ._state import State as State
