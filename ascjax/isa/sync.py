"""Intra-core synchronisation: SetFlag / WaitFlag between two pipes of one core, and PipeBarrier."""

from __future__ import annotations

from ..core import CoreKind, InstrKind
from ..engine import Sync
from . import ops
from ._instruction import Instruction

_FLAG_COST = ("flag_latency_cycles",)
INSTRUCTIONS = (
    (Instruction("sync_notify", ops.sync_notify, InstrKind.FLAG, CoreKind.ANY, None,
                 "SetFlag(src, dst, event_id) on pipe src: hands the event to pipe dst", sync=Sync.SET_FLAG,
                 cost=_FLAG_COST), ()),
    (Instruction("sync_wait", ops.sync_wait, InstrKind.FLAG, CoreKind.ANY, None,
                 "WaitFlag(src, dst, event_id) on pipe dst: blocks dst until src's SetFlag, then clears it",
                 sync=Sync.WAIT_FLAG, cost=_FLAG_COST), ()),
    (Instruction("sync_pipe", ops.sync_pipe, InstrKind.BARRIER, CoreKind.ANY, None,
                 "PipeBarrier<PIPE_X> (in order on its pipe; on M it closes a small-tile chain), or PIPE_ALL: a "
                 "fence for every pipe of the core", sync=Sync.PIPE_BARRIER), ()),
)  # fmt: skip
