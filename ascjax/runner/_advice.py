"""What-if advice: the control plane run again with one change, and the cycles the change saves.

Each line is a measurement on the kernel, not a formula: the record's operands (or the sync latencies)
are changed, the control plane runs again on them (the program its size class already compiled) and
the line says what the run's cycles became. The changes:

- one DMA pipe's GM latency hidden (its requests' flight 0): the most that more buffers in flight
  (double-buffering) or earlier copies could hide on that pipe;
- one sync edge kind's latency 0 (intra-core flag, unit flag, cross-core event): what those hand-offs
  cost on the critical path;
- the bound pipe at twice its rate: how much of the run it holds.

A change that saves under ``MIN_SAVING`` of the cycles is left out. Beside them, ``gm_traffic`` says
what the run moved to and from GM against one pipe's and the chip's bandwidth.
"""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from ..core import pipe_name
from ..engine import Record, Sync, run_control, sync_latency

#: a change that saves less than this share of the run's cycles is not advice
MIN_SAVING = 0.01
#: the sync edge kinds a what-if zeroes: (``SyncLatency`` field, the words for its hand-offs)
SYNC_EDGES = (
    ("flag_cycles", "the intra-core flag hand-offs (set -> wait latency)"),
    ("unit_flag_cycles", "the unit-flag hand-offs between mmad and fixpipe"),
    ("cross_core_cycles", "the cross-core event hand-offs"),
)


@dataclasses.dataclass(frozen=True)
class WhatIf:
    """One change, the run's cycles with it, and the cycles it saves."""

    change: str
    cycles: int
    saved_cycles: int
    total_cycles: int

    def __str__(self) -> str:
        share = 100 * self.saved_cycles / max(self.total_cycles, 1)
        return f"{self.change}: ~{self.saved_cycles:,} cycles fewer ({share:.0f} %, {self.cycles:,} in all)"


def _cycles(result) -> int:
    return int(np.max(np.asarray(result.end), initial=0))


def what_ifs(record: Record, result, chip, costs, control) -> tuple[WhatIf, ...]:
    """The changes that save at least ``MIN_SAVING`` of the run's cycles, the largest saving first (one scenario;
    none for a deadlocked run, whose cycles are not its length)."""
    if bool(np.asarray(result.deadlocked)):
        return ()
    total = _cycles(result)
    t = record.template
    ops = {k: np.asarray(v) for k, v in record.operands.items()}
    latency = sync_latency(costs)
    queue = np.asarray(t.queues)[np.asarray(t.queue)]  # per instance, its global queue (core * N_PIPES + pipe)
    changes = []
    for q in np.unique(queue[ops["flight_cycles"] > 0]):  # the DMA pipes with requests to or from GM
        on = (queue == q) & (ops["flight_cycles"] > 0)
        hidden = {**ops, "cycles": np.where(on, ops["cycles"] - ops["flight_cycles"], ops["cycles"]),
                  "flight_cycles": np.where(on, 0, ops["flight_cycles"])}  # fmt: skip
        words = f"hiding {pipe_name(int(q))}'s GM latency (more buffers in flight: double-buffering)"
        changes.append((words, hidden, latency))
    for field, words in SYNC_EDGES:
        if int(np.asarray(getattr(latency, field))) > 0:
            zero = eqx.tree_at(lambda lat, f=field: getattr(lat, f), latency, jnp.zeros((), jnp.int32))
            changes.append((f"without {words}", ops, zero))
    bound = _bound_queue(queue, result)
    if bound is not None:
        on = (queue == bound) & (np.asarray(t.sync) == Sync.NONE)
        transfer = ops["cycles"] - ops["flight_cycles"]
        faster = {**ops, "cycles": np.where(on, ops["flight_cycles"] + np.maximum(-(-transfer // 2), 1), ops["cycles"])}
        changes.append((f"{pipe_name(int(bound))} (the busiest pipe) at twice its rate", faster, latency))
    found = []
    for words, operands, lat in changes:
        cycles = _cycles(run_control(Record(t, operands), control, lat))
        if total - cycles >= MIN_SAVING * total:
            found.append(WhatIf(words, cycles, total - cycles, total))
    return tuple(sorted(found, key=lambda w: -w.saved_cycles))


def _bound_queue(queue, result):
    """The global queue (``queue``: per instance) busiest over the run (its instructions' cycles on the pipe, flights
    left out), or None."""
    ran = np.asarray(result.start) >= 0
    if not ran.any():
        return None
    on_pipe = np.where(ran, np.asarray(result.leave) - np.asarray(result.start), 0)
    busy = np.bincount(queue, weights=on_pipe, minlength=int(queue.max()) + 1)
    return int(np.argmax(busy)) if busy.max() > 0 else None


def gm_traffic(record: Record, result, chip, costs) -> str | None:
    """What the run moved to and from GM, and at what rate against one MTE2's and the chip's bandwidth (None: no GM
    traffic)."""
    ran = np.asarray(result.start) >= 0
    moved = int(np.sum(np.where(ran, np.asarray(record.operands["gm_bytes"]), 0)))
    total = _cycles(result)
    if moved == 0 or total == 0:
        return None
    rate = moved / total
    pipe, chip_rate = float(np.asarray(costs.mte2_bytes_per_cycle)), float(np.asarray(costs.gm_bytes_per_cycle))
    return (
        f"GM traffic: {moved:,} bytes in {total:,} cycles, {rate:.1f} B/cycle: {100 * rate / pipe:.0f} % of one "
        f"MTE2's {pipe:g} B/cycle, {100 * rate / chip_rate:.1f} % of the chip's {chip_rate:g} B/cycle ({chip.name})"
    )
