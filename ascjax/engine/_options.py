"""The control plane's static choices of execution model, and its sweepable sync latencies."""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Int


@dataclasses.dataclass(frozen=True)
class ControlOptions:
    """Static choices of the execution model (device behaviour by default)."""

    wait_blocks_issue: bool = False  # "issue blocks on every wait": each wait is a fence
    cross_wait_blocks_core: bool = False  # A2/A3: a cross-core wait is a fence of its core
    counter_chip: bool = False  # cross-core counters 0..15 (else bits: a second set merges)
    sanitize: bool = True  # races and uninitialised reads (happens-before); off: only the hardware's own findings
    max_findings: int = 32  # distinct (kind, site) findings kept; more are counted in ``dropped``
    keep_timeline: bool = True  # per-instance start and end cycles

    def for_program(self) -> ControlOptions:
        """The options as the control plane's program reads them: the choices the tables fold in (``_tables``: the
        fences, the counter depth, what a lost signal raises) at their defaults, so that records whose tables hold
        them share one program, its compile and its host trace."""
        return dataclasses.replace(self, wait_blocks_issue=False, cross_wait_blocks_core=False, counter_chip=False)


class SyncLatency(eqx.Module):
    """Cycles from a signal's set completing to its wait being able to start, per edge kind (sweepable)."""

    flag_cycles: Int[Array, ""] = eqx.field(default_factory=lambda: jnp.asarray(0, jnp.int32))
    unit_flag_cycles: Int[Array, ""] = eqx.field(default_factory=lambda: jnp.asarray(0, jnp.int32))
    cross_core_cycles: Int[Array, ""] = eqx.field(default_factory=lambda: jnp.asarray(0, jnp.int32))
