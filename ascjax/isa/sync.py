"""Intra-core synchronisation: SetFlag / WaitFlag between two pipes of one core, PipeBarrier, and the buffer-id
mutex (950)."""

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
    (Instruction("mutex_lock", ops.mutex_lock, InstrKind.FLAG, CoreKind.ANY, None,
                 "Mutex::Lock<pipe>(mutex_id): pipe waits until the lock groups issued before it on the id have "
                 "unlocked", sync=Sync.MUTEX_LOCK, cost=_FLAG_COST), ()),
    (Instruction("mutex_unlock", ops.mutex_unlock, InstrKind.FLAG, CoreKind.ANY, None,
                 "Mutex::Unlock<pipe>(mutex_id): releases the group its lock opened", sync=Sync.MUTEX_UNLOCK,
                 cost=_FLAG_COST), ()),
)  # fmt: skip
