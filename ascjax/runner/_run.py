"""``run``: a kernel on one AI Core block, on the two planes, under ``jax.jit``: outputs, verdict, every finding.

The kernel is traced twice into one compiled program (``ascjax.runner._planes.planes``): the control plane runs
its record (the sync hardware of semantics §8, every finding ranked, the timeline) and the data
plane computes its buffers. A ``Result`` holds both; under ``vmap`` it holds a batch of each.
"""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..core import EXCEPTIONS, MESSAGES, Verdict, exact_jit
from ..core._chip import Chip, get_chip
from ..core._numerics import compiled_on_its_own
from ..core._options import Options
from ..engine import ControlOptions, ControlResult, Costs, Record, default_costs, run_cycles
from ..engine._state import State
from ..front._tracing import gm_inputs, output_spec
from ..report._explain import Explained
from ..report._poison import poison_words
from ..report._report import Report
from ..report._timeline import Timeline
from ._check import CheckResult, verdict_codes
from ._planes import (
    planes,
    planes_cached,
    planes_data_traced,
    planes_jit,
    planes_per_scenario,
    planes_priced,
    resolve_control,
)

#: ``run_cycles`` as one program per record template: its eager ops, and its scan (a new body each call), would
#: compile on every call of ``Result.cycles``.
_run_cycles = exact_jit(run_cycles)


@exact_jit
def _batched_cycles(record: Record, control: ControlResult, costs: Costs, costs_axis: int | None):
    """``run_cycles`` of every scenario of a batched result (``costs_axis``: 0 where the costs are batched too)."""
    one = lambda ops, found, c: run_cycles(Record(record.template, ops), found, c)  # noqa: E731
    return jax.vmap(one, in_axes=(0, 0, costs_axis))(record.operands, control, costs)


class Result(eqx.Module):
    """Outputs (GM tensors named in ``outputs``, from the data plane), its final buffers, the record and what the
    control plane found in it (a batch of each under ``vmap``)."""

    outputs: dict[str, jax.Array]
    state: State  # the data plane's buffers at the end: GM, the tiles, the config registers
    record: Record
    control: ControlResult
    costs: Costs
    chip: Chip = eqx.field(static=True)

    @property
    def verdict(self) -> jax.Array:
        """int32 verdict code: the most severe finding's (a batch of them under ``vmap``); see ``ascjax.Verdict``."""
        return verdict_codes(self.control)

    @property
    def ok(self) -> bool:
        return bool(np.all(np.asarray(self.verdict) == Verdict.OK))

    @property
    def device_outputs(self) -> bool:
        """Whether the outputs are the device's. False when sync ran a later instruction of a core before an
        earlier one whose bytes it shares and the data plane could not compute them in that order; the report
        says which two."""
        return bool(np.all(np.asarray(self.control.reordered) < 0))

    @property
    def cycles(self) -> jax.Array:
        """The run's cycles (float32, whole; one per scenario under ``vmap``), differentiable by the costs:
        ``jax.grad`` of it by a ``Costs`` field is how many times that cost lies on the critical path
        (``engine.run_cycles``)."""
        if not self.batched:
            return _run_cycles(self.record, self.control, self.costs)
        costs_axis = 0 if jnp.ndim(self.costs.mmad_head_cycles) > 0 else None
        return _batched_cycles(self.record, self.control, self.costs, costs_axis)

    @property
    def batched(self) -> bool:
        """Whether this result holds a batch of scenarios (a ``vmap`` over ``run``)."""
        return np.ndim(self.control.n_findings) > 0

    def checked(self, index: int | None = None) -> CheckResult:
        """What the control plane found, in words: every finding ranked, the timeline (``index``: one scenario of
        a batch)."""
        record, control = self.record, self.control
        if self.batched:
            if index is None:
                raise ValueError(
                    f"this result holds a batch of {np.shape(self.control.n_findings)[0]} runs: pass index= to pick one"
                )
            pick = lambda x: np.asarray(x)[index]  # noqa: E731  (every leaf of a vmapped result is batched)
            control = jax.tree_util.tree_map(pick, control)
            record = Record(record.template, jax.tree_util.tree_map(pick, record.operands))
            costs = jax.tree_util.tree_map(pick, self.costs)
        elif index not in (None, 0):
            raise ValueError(f"this result holds one run: index={index} picks none")
        else:
            costs = self.costs
        return CheckResult.of(record, control, self.chip, costs)

    def findings(self, index: int | None = None) -> tuple:
        """Every finding in words, most severe first (``ascjax.report.FindingText``)."""
        return self.checked(index).findings

    def timeline(self, index: int | None = None, advice: bool = False) -> Timeline:
        """The run on a time axis: spans, stuck pipes, ``summary()``, ``to_perfetto()``, ``plot()``; with ``advice``,
        the summary and trace carry ``advice()`` too."""
        timeline = self.checked(index).timeline()
        return dataclasses.replace(timeline, advice=self.advice(index)) if advice else timeline

    def advice(self, index: int | None = None) -> tuple[str, ...]:
        """What-if advice with numbers, each line from running the control plane again with one change
        (``CheckResult.advice``)."""
        return self.checked(index).advice()

    def report(self, index: int | None = None) -> Report:
        """Explain the run (pass ``index`` to pick one scenario of a vmapped batch); with a RAW race, how many
        output elements its racy reads can poison."""
        checked = self.checked(index)
        rep = checked.report()
        outputs = {name: (int(np.prod(np.shape(v)[int(self.batched) :])), np.dtype(v.dtype).itemsize)
                   for name, v in self.outputs.items()}  # fmt: skip
        rep.poisoned = poison_words(checked.record, checked.result, outputs, self.state.options.poison_races)
        return rep

    def explain(self, index: int | None = None) -> Explained:
        """Seed 002's six checks of the cross-core design on this run, and the events by id and slot (``print`` it)."""
        return self.checked(index).explain()

    def check(self) -> Result:
        """Raise the typed error (``DeadlockError``, ``SyncError``...) if the verdict is not OK."""
        codes = np.atleast_1d(np.asarray(self.verdict))
        bad = np.flatnonzero(codes != Verdict.OK)
        if bad.size:
            index = int(bad[0]) if self.batched else None
            rep = self.report(index)
            prefix = f"scenario {index}: " if index is not None else ""
            raise EXCEPTIONS[rep.verdict](prefix + str(rep), rep)
        return self


def raise_if_failed(result, verdict):
    """``throw=True``: the typed error on the host, ``eqx.branched_error_if`` under a trace."""
    if isinstance(verdict, jax.core.Tracer):
        messages = [MESSAGES[v] for v in Verdict]
        return eqx.branched_error_if(result, verdict != Verdict.OK, verdict, messages)
    return result.check()


def run(
    kernel,
    inputs: dict,
    outputs: dict,
    *,
    chip: str | Chip = "a2",
    params: dict | None = None,
    throw: bool = False,
    jit: bool = True,
    sanitize: bool = True,
    poison_races: bool = False,
    options: Options | None = None,
    control: ControlOptions | None = None,
    costs: Costs | None = None,
) -> Result:
    """Run ``kernel(k, **params)`` on one AI Core of ``chip`` (several blocks: ``ascjax.launch``).

    **Arguments:**

    - ``kernel``: a function of a ``ascjax.Program`` ``k`` (and ``params``) that allocates
      tiles and issues ops.
    - ``inputs``: GM input tensors by name; ``outputs``: GM output tensors as ``name: (shape, dtype)``
      (zero-filled before the run, or holding the input of the same name: an output updated in place).
    - ``params``: extra keyword arguments for the kernel; arrays among them are traced, so a
      ``jax.vmap`` over them sweeps scenarios with one compilation (under a ``vmap`` alone, of the data plane: each
      distinct scenario's control plane runs as a single run's while that costs less than compiling it batched).
    - ``throw``: raise the typed error when the verdict is not OK. Keep it False under ``vmap``.
    - ``sanitize``: happens-before race and uninitialised-read checks (on by default);
      ``poison_races``: a read the control plane finds racy writes NaN (integers: INT_MIN), so the race shows in
      the outputs; ``options``: an ``ascjax.Options`` instead (also ``straight_through`` gradients).
    - ``control``: the execution model's choices (``ascjax.engine.ControlOptions``; default: the device's on
      ``chip``, see ``ascjax.control_options``).
    - ``costs``: the timing model's ``ascjax.Costs`` (default: the chip's table; arrays, so a
      ``vmap`` may sweep them).

    **Returns:** a ``Result`` with ``outputs``, ``state``, ``verdict``, ``findings()``, ``timeline()`` and
    ``report()``.
    """
    chip = get_chip(chip)
    options = options or Options(sanitize=sanitize, poison_races=poison_races)
    control = resolve_control(chip, options, control)
    costs = default_costs(chip) if costs is None else costs
    inputs = gm_inputs(inputs)
    spec = output_spec(outputs)
    args = (kernel, chip, options, control, costs, inputs, spec, dict(params or {}))
    traced = lambda tree: any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(tree))
    if not jit:
        how = planes
    elif traced(costs) and not traced((args[-1], jax.lax.stop_gradient(costs))):  # a grad or jvp by the costs alone
        how = planes_priced
    elif traced((args[-1], costs)):  # the record's operands are traced: one program, or per scenario under a vmap
        how = planes_per_scenario if compiled_on_its_own() else planes_jit
    else:  # inside a jit / eval_shape a new array is a tracer: the control plane then runs on the host, aside
        how = planes_data_traced if traced(inputs) or traced(jnp.zeros(())) else planes_cached
    state, record, found = how(*args)
    result = Result({name: state.gm[name] for name, _ in spec}, state, record, found, costs, chip)
    return raise_if_failed(result, result.verdict) if throw else result
