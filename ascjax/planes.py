"""A kernel on the two planes: its record through the control plane, its data on the data plane.

``planes`` traces the kernel twice into one program. The first trace records it
(``record_kernel``) and the control plane executes the record: the sync hardware of semantics
§8, every finding ranked, the timeline. The second trace computes the data (``ascjax.dataplane``):
each instruction's data function on a data-only state, concurrent sections in the order the
control plane ran them. ``ascjax.run`` is this under ``jax.jit``.
"""

from __future__ import annotations

import dataclasses

import equinox as eqx

from . import dataplane
from .chip import Chip
from .engine import ControlOptions, run_control, sync_latency
from .options import Options
from .program import Program
from .state import State
from .tracing import initial_gm, record_kernel, trace_kernel


def execute_data(
    kernel,
    chip: Chip,
    options: Options,
    inputs: dict,
    outputs: tuple,
    params: dict,
    order: dataplane.Schedule,
    poison: dataplane.Poison | None = None,
    block: dict | None = None,
) -> State:
    """Trace ``kernel`` on a data-only state, its sections in ``order``; returns the state it leaves. The reads
    ``poison`` names racy write NaN (``options.poison_races``). ``block``: a launch's ``{"block_idx": b,
    "block_num": n}``; the state then keeps the GM write marks the launch's merge needs."""
    names = tuple(name for name, _ in outputs)
    gm = initial_gm(inputs, outputs)
    state = State.create(chip, gm, names, options, track_gm_writes=block is not None)
    program = Program(chip, state, **(block or {}))
    program.sections_runner = lambda prog, plans: dataplane.run_sections(prog, plans, order)
    program.poison = poison
    return trace_kernel(kernel, program, params).state


def planes(
    kernel, chip: Chip, options: Options, control: ControlOptions, costs, inputs, spec: tuple, params: dict, block=None
):
    """``(state, record, control result)``: the data plane's final state, the record, what the control plane found
    (``block``: a launch's ``{"block_idx": b, "block_num": n}``; the state then keeps its GM write marks)."""
    record = record_kernel(kernel, inputs, dict(spec), chip=chip, params=params, costs=costs, block=block)
    result = run_control(record, control, sync_latency(costs))
    order = dataplane.schedule(record, result)
    poison = dataplane.Poison(record, result.racy) if options.poison_races else None  # its tables cost a pass
    state = execute_data(kernel, chip, options, inputs, spec, params, order, poison, block=block)
    return state, record, result


def resolve_control(chip: Chip, options: Options, control: ControlOptions | None) -> ControlOptions:
    """The control plane's options of a run: ``control`` or the chip's device model, with ``options.sanitize``."""
    from .check import control_options

    control = control or control_options(chip)
    return control if options.sanitize else dataclasses.replace(control, sanitize=False)


#: compiled once per kernel and static arguments (array inputs, parameters and costs are traced)
planes_jit = eqx.filter_jit(planes)
