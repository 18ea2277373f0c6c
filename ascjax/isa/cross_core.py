"""Cross-core events between the cube core and the vector cores (and between blocks): set / wait_cross_core."""

from __future__ import annotations

from ..core import CoreKind, InstrKind
from ..engine import Sync
from . import ops
from ._instruction import Instruction

_COST = ("cross_core_latency_cycles",)
INSTRUCTIONS = (
    (Instruction("set_cross_core", ops.set_cross_core, InstrKind.CROSS_CORE, CoreKind.ANY, None,
                 "signal event_id to the cores sync_mode routes it to (READY / RELEASE)", sync=Sync.CROSS_SET,
                 cost=_COST), ()),
    (Instruction("wait_cross_core", ops.wait_cross_core, InstrKind.CROSS_CORE, CoreKind.ANY, None,
                 "block pipe until event_id's signal arrives from the peer core, then consume it",
                 sync=Sync.CROSS_WAIT, cost=_COST), ()),
)  # fmt: skip
