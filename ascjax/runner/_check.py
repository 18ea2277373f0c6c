"""``check``: a kernel's synchronisation checked without computing data (a dry run), every finding ranked.

The kernel is recorded by its front end (``ascjax.front.record_kernel``) and its record run by the
control plane (semantics §8: per-pipe queues with decoupled issue, flags, unit flags, cross-core
counters, happens-before). Nothing is computed but the sync hardware, so a check is fast; it
reports every finding, most severe first, as ``run`` does beside the data it computes.
"""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import numpy as np

from ..core import Finding, Verdict, array_module
from ..core._chip import Chip, get_chip
from ..engine import (
    ControlOptions,
    ControlResult,
    Costs,
    Record,
    default_costs,
    run_control,
    sync_latency,
)
from ..engine._log import ENTRY
from ..front._tracing import gm_inputs, output_spec, record_kernel, record_on_host
from ..report._event_table import event_table
from ..report._explain import Explained, explain
from ..report._finding_words import FindingText, describe
from ..report._report import Report
from ..report._run_warnings import run_warnings
from ..report._timeline import Timeline
from ._advice import gm_traffic, what_ifs

#: the verdict code of each finding kind, indexed by ``Finding``
_VERDICT_OF_FINDING = np.asarray([int(Verdict[f.verdict]) for f in sorted(Finding, key=int)], np.int32)


def verdict_codes(result: ControlResult) -> jax.Array:
    """int32 verdict of each scenario: the most severe finding's (findings are ranked), else OK."""
    kind, n = result.findings[..., 0, 0], result.n_findings
    xp = array_module(kind, n)  # concrete: no eager op to compile
    kind, n = xp.asarray(kind), xp.asarray(n)
    return xp.where(n > 0, xp.asarray(_VERDICT_OF_FINDING)[xp.maximum(kind, 0)], np.int32(Verdict.OK)).astype(np.int32)


def control_options(chip: Chip, **changes) -> ControlOptions:
    """The device's execution model on ``chip``: on A2/A3 a cross-core wait holds its whole core [facts §3 "Wait"];
    a chip whose cross-core ids hold more than one signal counts them. ``changes`` override fields."""
    fields = {
        "cross_wait_blocks_core": chip.cross_core_wait_blocks_core,
        "counter_chip": chip.cross_core_max_count > 1,
        **changes,
    }
    return ControlOptions(**fields)


@dataclasses.dataclass(frozen=True)
class CheckResult:
    """The record of a kernel, what the control plane found in it, and the findings in words."""

    record: Record
    result: ControlResult
    findings: tuple[FindingText, ...]
    chip: Chip
    costs: Costs  # what priced the instructions and sync edges of the timeline
    control: ControlOptions | None = None  # the control plane's options of the run (None: the chip's device model)

    @classmethod
    def of(cls, record: Record, result: ControlResult, chip: Chip, costs: Costs, control=None) -> CheckResult:
        """The findings of one scenario put in words (under a transformation the words wait for the host)."""
        if isinstance(result.n_findings, jax.core.Tracer):
            return cls(record, result, (), chip, costs, control)
        return cls(record, result, tuple(describe(record, result, chip.name)), chip, costs, control)

    @property
    def verdict(self) -> Verdict:
        """The most severe finding's verdict (OK when there is none)."""
        return Verdict.OK if not self.findings else Verdict[self.findings[0].kind.verdict]

    @property
    def dropped(self) -> int:
        """Distinct findings past ``ControlOptions.max_findings``."""
        return int(np.asarray(self.result.dropped))

    def timeline(self, index: int | None = None, advice: bool = False) -> Timeline:
        """The run on a time axis (``index``: one scenario of a batch): spans, stuck pipes, summary, trace, picture;
        with ``advice``, its summary and trace carry ``advice()`` too."""
        timeline = Timeline.of(self.record, self.result, self.chip, index)
        if not advice:
            return timeline
        if index is not None:
            raise ValueError("advice is one scenario's: pick it with the result's checked(index) first")
        return dataclasses.replace(timeline, advice=self.advice())

    def advice(self) -> tuple[str, ...]:
        """What-if advice with numbers, each line from running the control plane again with one change (hidden GM
        latency, no sync latency of one kind, the busiest pipe at twice its rate; ``runner._advice``), after
        the run's GM traffic against the bandwidths."""
        control = self.control or control_options(self.chip)
        traffic = gm_traffic(self.record, self.result, self.chip, self.costs)
        changes = what_ifs(self.record, self.result, self.chip, self.costs, control)
        return (*([traffic] if traffic else []), *(str(w) for w in changes))

    def report(self) -> Report:
        """The findings, the warnings, the cross-core event table and the timeline's summary as a ``Report``."""
        location = op = None
        if self.findings:
            site = self.record.template.entries[int(np.asarray(self.result.findings)[0, ENTRY])][1]
            op, _, location = site.partition(" at ")  # the kernel's spelling (sync_wait, not wait_flag)
        message = f"OK (chip {self.chip.name})" if not self.findings else str(self)
        return Report(
            self.verdict, message, location, op, run_warnings(self.record, self.result), self.chip.name,
            self.timeline().summary(), event_table(self.record, self.result),
        )  # fmt: skip

    def explain(self) -> Explained:
        """Seed 002's six checks of the cross-core design on this run, and the events by id and slot (``print`` it)."""
        return explain(self.record, self.result, self.findings)

    def __str__(self) -> str:
        if not self.findings:
            return (
                "OK: no deadlock, race, leftover signal, lost signal, uninitialised read or bounds error (semantics §8)"
            )
        head = f"{self.verdict.name}: {len(self.findings)} finding(s), most severe first"
        more = [f"... and {self.dropped} more (raise ControlOptions.max_findings)"] if self.dropped else []
        return "\n".join([head, *(str(f) for f in self.findings), *more])


def check(
    kernel,
    inputs: dict,
    outputs: dict,
    *,
    chip: str | Chip = "a2",
    params: dict | None = None,
    options: ControlOptions | None = None,
    costs: Costs | None = None,
) -> CheckResult:
    """Check ``kernel(k, **params)``'s synchronisation on one block of ``chip`` without computing data.

    ``inputs`` / ``outputs`` are as for ``ascjax.run`` (only their shapes and dtypes matter);
    ``options`` (``ascjax.engine.ControlOptions``) picks the execution model's variants and how
    many findings are kept. Arrays among ``params`` are traced, as in ``run``: a traced size, offset or trip
    count past its limit is a finding (BOUNDS, LAYOUT). The data functions run only abstractly: no data is
    computed, and their trace-time checks (dtypes, alignment, shapes, flag pipes) raise as in ``run``.
    ``costs`` (``ascjax.Costs``, default: the chip's table) price each instruction and sync edge, so the
    timeline and the order of concurrent events are the timing model's.
    """
    chip = get_chip(chip)
    options = options or control_options(chip)
    costs = default_costs(chip) if costs is None else costs
    inputs, spec, params = gm_inputs(inputs), output_spec(outputs), dict(params or {})
    if any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves((inputs, params, costs))):
        record, result = _recorded_and_run(kernel, inputs, spec, chip, params, costs, options)
    else:  # the recording on the host, and the control plane its size class shares with other kernels
        record, latency = record_on_host(kernel, chip, costs, inputs, spec, params)
        result = run_control(record, options, latency)
    return CheckResult.of(record, result, chip, costs, options)


@eqx.filter_jit
def _recorded_and_run(kernel, inputs: dict, spec: tuple, chip: Chip, params: dict, costs: Costs, options):
    """Under a transformation: the recording's array work and the control plane as one program."""
    record = record_kernel(kernel, inputs, dict(spec), chip=chip, params=params, costs=costs)
    return record, run_control(record, options, sync_latency(costs))


__all__ = ["CheckResult", "check", "control_options", "verdict_codes"]
