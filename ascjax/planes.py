"""A kernel run on the two planes: its record through the control plane, its data on the data plane.

``run_planes`` traces the kernel twice into one compiled program. The first trace records it
(``record_kernel``) and the control plane executes the record: the sync hardware of semantics
§8, every finding ranked, the timeline. The second trace computes the data (``ascjax.dataplane``):
each instruction's data function on a data-only state, concurrent sections in the order the
control plane ran them. Outputs are bit-identical to the version-1 engine's wherever the kernel
is free of races and deadlocks (``tests/test_planes.py`` checks every OK case of ``kernels/``).
"""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax

from . import dataplane
from .check import CheckResult
from .chip import Chip, get_chip
from .core import Verdict
from .engine import ControlOptions, ControlResult, Costs, Record, default_costs, run_control, sync_latency
from .finding_words import describe
from .options import Options
from .program import Program
from .run import _trace, gm_inputs, initial_gm, output_spec, record_kernel
from .state import State


@dataclasses.dataclass(frozen=True)
class PlanesResult:
    """The GM outputs the data plane computed, and what the control plane found (an ``ascjax.CheckResult``)."""

    outputs: dict
    check: CheckResult

    @property
    def verdict(self) -> Verdict:
        return self.check.verdict


def execute_data(
    kernel,
    chip: Chip,
    options: Options,
    inputs: dict,
    outputs: tuple,
    params: dict,
    order: dataplane.Schedule,
    poison: dataplane.Poison | None = None,
) -> State:
    """Trace ``kernel`` on a data-only state, its sections in ``order``; returns the state it leaves. The reads
    ``poison`` names racy write NaN (``options.poison_races``)."""
    names = tuple(name for name, _ in outputs)
    state = State.create(chip, initial_gm(inputs, outputs), names, options, data_only=True)
    program = Program(chip, state)
    program.sections_runner = lambda prog, plans: dataplane.run_sections(prog, plans, order)
    program.poison = poison
    return _trace(kernel, program, params).state


def _planes(kernel, chip: Chip, options: Options, control: ControlOptions, costs, inputs, spec: tuple, params: dict):
    record = record_kernel(kernel, inputs, dict(spec), chip=chip, params=params, costs=costs)
    result = run_control(record, control, sync_latency(costs))
    order = dataplane.schedule(record, result)
    poison = dataplane.Poison(record, result.racy) if options.poison_races else None  # its tables cost a pass
    state = execute_data(kernel, chip, options, inputs, spec, params, order, poison)
    return state, record, result


_planes_jit = eqx.filter_jit(_planes)


def run_planes(
    kernel,
    inputs: dict,
    outputs: dict,
    *,
    chip: str | Chip = "a2",
    params: dict | None = None,
    options: Options | None = None,
    control: ControlOptions | None = None,
    costs: Costs | None = None,
    jit: bool = True,
) -> PlanesResult:
    """Run ``kernel(k, **params)`` on one block of ``chip`` on the two planes (arguments as for ``ascjax.run``).

    ``options`` (``ascjax.Options``) holds the data plane's choices (``straight_through``; ``poison_races``: a
    read the control plane finds racy writes NaN);
    ``control`` (``ascjax.engine.ControlOptions``) the execution model's; ``costs`` (``ascjax.Costs``) price the
    instructions and sync edges the control plane times. Differentiable: ``jax.grad``
    flows through the data plane to the inputs.
    """
    chip = get_chip(chip)
    control = control or ControlOptions()
    spec = output_spec(outputs)
    costs = default_costs(chip) if costs is None else costs
    args = (kernel, chip, options or Options(), control, costs, gm_inputs(inputs), spec, dict(params or {}))
    state, record, result = (_planes_jit if jit else _planes)(*args)
    return PlanesResult({name: state.gm[name] for name, _ in spec}, _checked(record, result, chip, costs))


def _checked(record: Record, result: ControlResult, chip: Chip, costs: Costs) -> CheckResult:
    if isinstance(result.n_findings, jax.core.Tracer):  # under a transformation: the words wait for the host
        return CheckResult(record, result, (), chip, costs)
    return CheckResult(record, result, tuple(describe(record, result)), chip, costs)
