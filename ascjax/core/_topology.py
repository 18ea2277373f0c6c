"""The block's topology: its three cores and the pipe queues each one issues into.

A block is one cube core (AIC) and two vector cores (AIV0, AIV1) [semantics §1]. Every
(core, pipe) pair is one in-order queue [semantics §8]; queues are numbered
``core * N_PIPES + pipe`` so a queue index names both.
"""

from __future__ import annotations

from ._kinds import AIC_PIPES, AIV_PIPES, N_PIPES, Pipe

AIC, AIV0, AIV1 = 0, 1, 2
N_CORES = 3
CORE_NAMES = ("AIC", "AIV0", "AIV1")
N_QUEUES = N_CORES * N_PIPES


def core_pipes(core: int) -> tuple[Pipe, ...]:
    """The pipes a core has: S, MTE1, MTE2, M, FIX, MTE3 on the AIC; S, MTE2, V, MTE3 on an AIV."""
    return AIC_PIPES if core == AIC else AIV_PIPES


def gpipe(core: int, pipe: Pipe) -> int:
    """The queue index of ``pipe`` on ``core``."""
    return core * N_PIPES + int(pipe)


def pipe_name(queue: int) -> str:
    """``"AIC.FIX"`` for the queue index of the AIC's FIX pipe."""
    core, pipe = divmod(int(queue), N_PIPES)
    return f"{CORE_NAMES[core]}.{Pipe(pipe)}"
