"""Cross-core events between the cube core (AIC) and the two vector cores (AIV0, AIV1).

An event carries only "you may proceed". The hardware keeps, per receiving core, a signal
count per event id; ascjax keeps it per (receiving core, sending core, event id) so that a
cube ``INTRA_BLOCK`` wait can need both AIVs to have set (the A5 lowering waits on ``id``
and ``id + 16``, one per AIV), and so that a report can name who set what.

| sync_mode | a set from | reaches | a wait at | needs |
|---|---|---|---|---|
| INTRA_BLOCK | AIC | AIV0 and AIV1 | AIC | a set from AIV0 and one from AIV1 |
| INTRA_BLOCK | AIV s | AIC | AIV s | a set from the AIC |
| UNICAST_BLOCK | AIC (``subblock`` s) | AIV s | AIC (``subblock`` s) | a set from AIV s |
| UNICAST_BLOCK | AIV s | AIC | AIV s | a set from the AIC |
| INTER_SUBBLOCK | AIV s | AIV 1-s | AIV s | a set from AIV 1-s |
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Int

from .core import AIC, AIV0, AIV1, N_CORES, SyncMode


def routes(mode: SyncMode, core: int, subblock: int = 0) -> tuple[tuple[int, int], ...]:
    """The (receiving core, sending core) cells a set by ``core`` increments (and a wait there consumes).

    For a set the sender is ``core``; for a wait the receiver is ``core``: ``wait_cells``.
    """
    if mode is SyncMode.INTRA_BLOCK:
        return ((AIV0, AIC), (AIV1, AIC)) if core == AIC else ((AIC, core),)
    if mode is SyncMode.UNICAST_BLOCK:
        return ((AIV0 + subblock, AIC),) if core == AIC else ((AIC, core),)
    if mode is SyncMode.INTER_SUBBLOCK:
        return ((AIV0 + AIV1 - core, core),)
    raise ValueError(mode)


def wait_cells(mode: SyncMode, core: int, subblock: int = 0) -> tuple[tuple[int, int], ...]:
    """The (receiving, sending) cells a wait by ``core`` needs a signal in (all of them)."""
    if mode is SyncMode.INTRA_BLOCK:
        return ((AIC, AIV0), (AIC, AIV1)) if core == AIC else ((core, AIC),)
    if mode is SyncMode.UNICAST_BLOCK:
        return ((AIC, AIV0 + subblock),) if core == AIC else ((core, AIC),)
    if mode is SyncMode.INTER_SUBBLOCK:
        return ((core, AIV0 + AIV1 - core),)
    raise ValueError(mode)


class CrossCore(eqx.Module):
    """Signal counts per (receiving core, sending core, event id), who set them, and per-id statistics."""

    count: Int[Array, "C C E"]
    mode: Int[Array, "C C E"]  # sync_mode of the last set into each cell (-1: none yet)
    set_op: Int[Array, "C C E"]  # the op that last set each cell
    vc: Int[Array, "C C E G"]  # vector clock of that set (the happens-before edge a wait joins)
    n_set: Int[Array, "C E"]  # per core and id: sets executed
    n_wait: Int[Array, "C E"]  # waits satisfied
    set_pipes: Int[Array, "C E"]  # bit mask of the pipes sets ran on
    wait_pipes: Int[Array, "C E"]
    modes: Int[Array, "C E"]  # bit mask of the sync modes used (sets and waits)

    @staticmethod
    def empty(chip, width: int) -> CrossCore:
        n = chip.cross_event_ids
        cells = (N_CORES, N_CORES, n)
        per = jnp.zeros((N_CORES, n), jnp.int32)
        return CrossCore(
            count=jnp.zeros(cells, jnp.int32),
            mode=jnp.full(cells, -1, jnp.int32),
            set_op=jnp.full(cells, -1, jnp.int32),
            vc=jnp.zeros((*cells, width), jnp.int32),
            n_set=per,
            n_wait=per,
            set_pipes=per,
            wait_pipes=per,
            modes=per,
        )
