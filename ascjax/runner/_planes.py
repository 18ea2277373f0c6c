"""A kernel on the two planes: its record through the control plane, its data on the data plane.

``planes`` traces the kernel twice into one program. The first trace records it
(``record_kernel``) and the control plane executes the record: the sync hardware of semantics
§8, every finding ranked, the timeline. The second trace computes the data (``ascjax.engine._dataplane``):
each instruction's data function on a data-only state, concurrent sections in the order the
control plane ran them.

What the control plane finds depends on the record's operands only (event ids, phases, slots, trip
counts, cycles), never on the data. ``planes_cached`` (what ``ascjax.run`` does) therefore records the
kernel on the host (``record_on_host``: traced, then evaluated in NumPy) and compiles two programs, the
control plane (shared by every record of its size class) and the data plane. It runs the control plane once per
distinct record and operands (``ControlCache``), so a kernel run again on other inputs (golden data,
a training step) pays for the data only. Under a transformation of the data alone (``grad`` or
``vmap`` over the inputs, ``jit`` around ``run``) the control plane is reused the same way
(``planes_data_traced``); where parameters or costs are traced, ``run`` uses ``planes_jit``:
everything as one program; under a ``vmap`` alone, each scenario's control plane on its own
(``planes_per_scenario``); under a ``grad`` or ``jvp`` by the costs alone, the concrete run with its
record priced again by the traced costs (``planes_priced``).
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib

import equinox as eqx
import jax
import numpy as np

from ..core import (
    QUICK_COMPILE,
    array_module,
    clear_host_caches,
    exact_jit,
    forget_batches,
    jit_outside,
    per_scenario,
)
from ..core._chip import Chip
from ..core._options import Options
from ..engine import (
    ControlOptions,
    EmitOrder,
    PrivateLoops,
    Record,
    emit_order,
    private_loops,
    reset_control_plane,
    run_control,
    run_control_as_host,
    sync_latency,
)
from ..engine import _dataplane as dataplane
from ..engine._state import State
from ..front._program import NeedsData, Program
from ..front._tracing import forget_recordings, initial_gm, record_kernel, record_on_host, record_traced, trace_kernel
from ..isa.ops._machine import NO_FAULTS


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
    emit: EmitOrder | None = None,
    no_faults: bool = False,
    ran: dataplane.Ran | None = None,
    private: PrivateLoops | None = None,
) -> State:
    """Trace ``kernel`` on a data-only state, its sections in ``order``; returns the state it leaves. The reads
    ``poison`` names racy write NaN (``options.poison_races``). ``block``: a launch's ``{"block_idx": b,
    "block_num": n}``; the state then keeps the GM write marks the launch's merge needs. ``emit``: the order a
    core's issues are computed in where it is not program order (``ascjax.engine.emit_order``); which of its
    edges the trace could not follow is noted in ``FOLLOWED``. ``no_faults``: no traced operand of the record
    faults (``faults_free``), so with loop lowering on, or a private loop to run, the data functions apply none
    of their fault conditions: each write replaces its tile whole and a loop's iterations can be computed apart
    (the 1024^3 matmul with its private loops: 16.8 -> 14.4 ms). Iteration by iteration the writes stay selects:
    XLA would fuse whole chains of copies into every product's operands and recompute them per element (that
    data plane: 48 -> 64 ms). ``ran``: the issues a deadlocked run started (None: all): an issue that writes GM and
    never ran leaves GM as it was. ``private``: the record's loops whose iterations use the on-chip buffers
    privately, computed as one ``vmap`` (``Options.parallel_loops``)."""
    names = tuple(name for name, _ in outputs)
    gm = initial_gm(inputs, outputs)
    state = State.create(chip, gm, names, options, track_gm_writes=block is not None)
    program = Program(chip, state, **(block or {}))
    program.sections_runner = lambda prog, plans: dataplane.run_sections(prog, plans, order)
    program.poison = poison
    program.ran = ran
    program.emit = emit
    if not (options.parallel_loops and private is not None and private.ids):
        private = None  # no loop to run as a vmap
    program.private_loops = private
    token = NO_FAULTS.set(no_faults and (options.lower_loops or private is not None))
    try:
        state = trace_kernel(kernel, program, params).state
    finally:
        NO_FAULTS.reset(token)
    if emit is not None:
        FOLLOWED[emit] = emit.unfixable or emit.violated(program.emitted)
    return state


#: Per ``EmitOrder`` a trace of the data plane used: the first pair of instances it could not compute in the order
#: they ran (None: every pair). Written while the data plane is traced, read after it ran (``device_order``).
FOLLOWED: dict = {}


def faults_free(record: Record) -> bool:
    """Whether no issue of a concrete ``record`` has a traced operand that breaks its rule (no BOUNDS or LAYOUT
    fault in any instance, run or not); False for a traced record."""
    whats = [x for name, x in record.operands.items() if name.endswith("_what")]
    return array_module(whats) is np and all(bool(np.all(np.asarray(x) < 0)) for x in whats)


def device_order(result, emit: EmitOrder | None):
    """``result`` with ``reordered`` the first pair the data plane did not compute in the order it ran (-1: none)."""
    if emit is None:
        return result
    pair = FOLLOWED.get(emit, tuple(int(x) for x in np.asarray(result.reordered)))
    return eqx.tree_at(lambda r: r.reordered, result, np.asarray(pair or (-1, -1), np.int32))  # a host value


def planes(
    kernel, chip: Chip, options: Options, control: ControlOptions, costs, inputs, spec: tuple, params: dict, block=None
):
    """``(state, record, control result)``: the data plane's final state, the record, what the control plane found
    (``block``: a launch's ``{"block_idx": b, "block_num": n}``; the state then keeps its GM write marks)."""
    record = record_kernel(kernel, inputs, dict(spec), chip=chip, params=params, costs=costs, block=block)
    result = run_control(record, control, sync_latency(costs))
    state, emit = data_after_control(kernel, chip, options, inputs, spec, params, record, result, block)
    return state, record, device_order(result, emit)


def data_after_control(kernel, chip: Chip, options: Options, inputs, spec: tuple, params: dict, record, result,
                       block=None):  # fmt: skip
    """``(state, emit order)``: the data plane of ``record`` traced in the order its control-plane ``result`` ran it
    (``poison_races`` from its racy reads, GM kept where a deadlock left it; the emit order only where ``result`` is
    concrete)."""
    order = dataplane.schedule(record, result)
    index = dataplane.PoisonIndex(record)
    poison = dataplane.Poison(index, result.racy) if options.poison_races else None
    emit = None if isinstance(result.start, jax.core.Tracer) else emit_order(record, result)  # concrete: not jitted
    private = None if block is not None else private_loops(record)
    state = execute_data(kernel, chip, options, inputs, spec, params, order, poison, block=block, emit=emit,
                         no_faults=faults_free(record), ran=dataplane.Ran.of(index, result), private=private)  # fmt: skip
    return state, emit


@exact_jit
def _data_jit(kernel, chip: Chip, options: Options, inputs, spec: tuple, params: dict, order, racy, index, emit,
              no_faults: bool, ran, private):  # fmt: skip
    poison = None if index is None else dataplane.Poison(index, racy)
    state = execute_data(kernel, chip, options, inputs, spec, params, order, poison, emit=emit, no_faults=no_faults,
                         ran=ran, private=private)  # fmt: skip
    return _without_inputs(state, inputs)


def _without_inputs(state: State, inputs: dict):
    """``(state, names)``: ``state`` without the GM tensors that are still ``inputs``'s own arrays (``names``), which
    the caller puts back (``_with_inputs``): a program returning an argument as it is copies it."""
    same = tuple(name for name, x in state.gm.items() if x is inputs.get(name))
    kept = {name: x for name, x in state.gm.items() if name not in same}
    return dataclasses.replace(state, gm=kept), same


def _with_inputs(out, inputs: dict) -> State:
    """``_without_inputs``'s state with its inputs put back."""
    state, same = out
    return dataclasses.replace(state, gm={**state.gm, **{name: inputs[name] for name in same}})


#: Records ``ControlCache`` keeps to find again by identity: the few a user runs again and again (a launch's blocks
#: are new records at every call, and are found by their operands).
SAME_KEPT = 8


class ControlCache:
    """The control plane's results by record and operands: the ``size`` most recent, the oldest dropped first.

    A record's template is static (one object per compiled recording); its operands are hashed with the
    sync latencies and the control options, so a hit is exactly a run the control plane would repeat. A record
    the host's recording reused (the same objects, read-only arrays: ``front.record_on_host``) is found by
    identity, without hashing its operands again.
    """

    def __init__(self, size: int = 32):
        self.size = size
        self._entries: collections.OrderedDict = collections.OrderedDict()
        self._same: collections.OrderedDict = collections.OrderedDict()  # id(record) -> (record, latency, ...)
        self.same_size = min(size, SAME_KEPT)
        self.misses = 0  # control-plane runs so far

    def clear(self) -> None:
        """Forget every result (the next run of each record runs its control plane)."""
        self._entries.clear()
        self._same.clear()

    def get(self, record, control: ControlOptions, latency, *, quick: bool = True, again: bool = True):
        """``(result, schedule, poison index, emit order, faults free, private loops)`` for ``record``: cached, or from
        one control-plane run (``quick``: as ``run_control``'s). ``again=False``: a record made for this call alone (a
        launch's block), not kept to be found by identity, where it would push out the records runs reuse."""
        same = self._same.get(id(record))
        if same is not None and same[0] is record and same[1] is latency and same[2] == control:
            return same[3]
        entry = self._get(record, control, latency, quick)
        read_only = all(not x.flags.writeable for x in jax.tree.leaves(record.operands) if isinstance(x, np.ndarray))
        if again and read_only:
            self._same[id(record)] = (record, latency, control, entry)  # kept alive, so the id stays its own
            while len(self._same) > self.same_size:
                self._same.popitem(last=False)
        return entry

    def _get(self, record, control: ControlOptions, latency, quick: bool):
        digest = hashlib.blake2b(repr(control).encode(), digest_size=16)
        operands, latency_leaves = jax.device_get((record.operands, jax.tree.leaves(latency)))  # one transfer
        for name, x in sorted(operands.items()) + [(str(i), x) for i, x in enumerate(latency_leaves)]:
            a = np.asarray(x)
            digest.update(f"{name}:{a.dtype}:{a.shape};".encode())
            digest.update(np.ascontiguousarray(a).tobytes())
        key = (id(record.template), digest.hexdigest())
        hit = self._entries.get(key)
        if hit is not None and hit[0] is record.template:
            self._entries.move_to_end(key)
            return hit[1:]
        self.misses += 1
        host = Record(record.template, operands)
        result = run_control(host, control, latency, quick=quick)  # the host copy: no second transfer
        order, index = dataplane.schedule(record, result), dataplane.PoisonIndex(record)
        entry = (
            record.template,
            result,
            order,
            index,
            emit_order(record, result),
            faults_free(host),
            private_loops(host),
        )
        self._entries[key] = entry
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)
        return entry[1:]


#: The control-plane results ``planes_cached`` and a launch reuse: enough for the blocks of a few launches (a block's
#: entry is its findings, timeline and data-plane order: kilobytes).
CONTROL_CACHE = ControlCache(size=512)


def clear_caches() -> None:
    """Forget every compiled program, traced recording, record and control-plane result, as a fresh process starts
    (to time a first run, or to free memory)."""
    jax.clear_caches()
    CONTROL_CACHE.clear()
    FOLLOWED.clear()
    forget_recordings()
    reset_control_plane()
    clear_host_caches()
    forget_batches()


def planes_cached(kernel, chip: Chip, options: Options, control: ControlOptions, costs, inputs, spec: tuple,
                  params: dict):  # fmt: skip
    """``planes`` as a host recording and two compiled programs, the control plane's run reused for equal records and operands
    (``CONTROL_CACHE``). Arguments must be concrete (not under a transformation)."""
    record, latency = record_on_host(kernel, chip, costs, inputs, spec, params)
    return _data_after(kernel, chip, options, inputs, spec, params, record, CONTROL_CACHE.get(record, control, latency))


def _data_after(kernel, chip: Chip, options: Options, inputs, spec: tuple, params: dict, record, control_run):
    """The data plane compiled on its own, in the order ``control_run`` (``ControlCache.get``'s) gives."""
    result, order, index, emit, no_faults, private = control_run
    ran = dataplane.Ran.of(index, result)  # static: one compiled data plane per set of undone instances
    racy, index = (result.racy, index) if options.poison_races else (None, None)
    state = _with_inputs(_data_jit(kernel, chip, options.for_data_plane(), inputs, spec, params, order, racy, index,
                                   emit, no_faults, ran, private), inputs)  # fmt: skip
    return state, record, device_order(result, emit)


def planes_data_traced(kernel, chip: Chip, options: Options, control: ControlOptions, costs, inputs, spec: tuple,
                       params: dict):  # fmt: skip
    """``planes_cached`` for a run whose inputs are traced and whose parameters and costs are not (a ``grad`` or
    ``vmap`` over the data, a ``jit`` around ``run``): the record, made from the inputs' shapes, and the control
    plane run now, on the host (cached); the caller's transformation holds the data plane alone, compiled as in
    ``planes_cached``. A kernel that reads GM contents while it is recorded is traced whole (``planes_jit``)."""
    try:
        with jax.core.eval_context():  # run now, on the host's values, whatever trace encloses the call
            shapes = {name: np.zeros(x.shape, x.dtype) for name, x in inputs.items()}
            record, latency = record_on_host(kernel, chip, costs, shapes, spec, params, shapes_only=True)
            control_run = CONTROL_CACHE.get(record, control, latency)
    except NeedsData:
        return planes_jit(kernel, chip, options, control, costs, inputs, spec, params)
    return _data_after(kernel, chip, options, inputs, spec, params, record, control_run)


#: What a record's scenarios cost to compile batched, its recording optimised and its integer control plane quick (the
#: seed K-loop: 1.5 + 2.0 s on a 2-core x86 VM, with their traces about 4 s): a vmap whose scenarios would cost more
#: on the host, one by one, runs them so.
BATCHED_CONTROL_COMPILE_S = 4.0


def scenario_key(fixed: tuple, static, shapes: dict):
    """``per_scenario``'s key for a run or launch: what it computes beyond its scenarios' arrays (``fixed``, the static
    part of the costs and parameters, the inputs' shapes); None where a parameter JAX cannot hash (no batch kept)."""
    static_leaves, static_def = jax.tree.flatten(static)
    input_shapes = tuple((name, x.shape, x.dtype.str) for name, x in shapes.items())
    key = (*fixed, static_def, tuple(static_leaves), input_shapes)
    try:
        hash(key)
    except TypeError:
        return None
    return key


def planes_per_scenario(kernel, chip: Chip, options: Options, control: ControlOptions, costs, inputs, spec: tuple,
                        params: dict):  # fmt: skip
    """``planes_jit`` for a run whose parameters or costs a ``vmap`` alone traces (a sweep in the user's eager
    ``vmap``): each distinct scenario recorded on the host and its control plane run as a concrete record's is
    (``run_control``: a size class's program, or the host), one by one (``core.per_scenario``); the data plane
    compiled batched, in the order each scenario's control plane ran it. One batched program holding the control
    plane compiled for 3.7-5.4 s on a 2-core x86 VM; a scenario on the host takes milliseconds to a second. Past
    ``BATCHED_CONTROL_COMPILE_S`` of host time, the scenarios left run batched. A kernel that reads GM contents while
    it is recorded is traced whole (``planes_jit``)."""
    shapes = {name: np.zeros(x.shape, x.dtype) for name, x in inputs.items()}
    dynamic, static = eqx.partition((costs, params), eqx.is_array)
    templates = []  # the record's template, one for every scenario (the recording's trace is shared)

    def recorded(dynamic):  # a scenario's record operands and sync latencies, traced
        costs, params = eqx.combine(dynamic, static)
        record, latency = record_traced(kernel, chip, costs, shapes, spec, params, shapes_only=True)
        templates.append(record.template)
        return record.operands, latency

    def controlled(operands, latency):
        return run_control_as_host(Record(templates[0], operands), control, latency)

    def traced(dynamic):  # what each scenario's host run computes, traced: its shapes, and a batched program's
        operands, latency = recorded(dynamic)
        return operands, controlled(operands, latency)

    def batched(in_axes, dynamic):  # every scenario at once: the recording exact, the integer control plane quick
        operands, latency = exact_jit(jax.vmap(recorded, in_axes=in_axes))(dynamic)
        return operands, jit_outside(jax.vmap(controlled), QUICK_COMPILE)(operands, latency)

    def on_host(dynamic):
        costs, params = eqx.combine(dynamic, static)
        record, latency = record_on_host(kernel, chip, costs, shapes, spec, params, shapes_only=True)
        return record.operands, run_control(record, control, latency)

    key = scenario_key((kernel, chip, spec, control), static, shapes)
    try:
        operands, result = per_scenario(traced, on_host, key, BATCHED_CONTROL_COMPILE_S, batched)(dynamic)
    except NeedsData:
        return planes_jit(kernel, chip, options, control, costs, inputs, spec, params)
    record = Record(templates[0], operands)
    state, _ = _data_traced_jit(kernel, chip, options.for_data_plane(), inputs, spec, params, record, result)
    return state, record, result


def planes_priced(kernel, chip: Chip, options: Options, control: ControlOptions, costs, inputs, spec: tuple,
                  params: dict):  # fmt: skip
    """``planes_jit`` for a run whose costs a ``grad`` or ``jvp`` alone traces (their values are concrete): the
    concrete run at those values (its control plane cached, no program of its own), with its record priced again by
    the traced costs (the recording's cached trace evaluated by JAX), so that ``Result.cycles``, replayed along that
    run's binding constraints, has their derivative. The outputs do not depend on the costs. Traced whole, the run
    compiled for 4-5 s on a 2-core x86 VM. A kernel that reads GM contents while it is recorded is traced whole
    (``planes_jit``)."""
    at = jax.lax.stop_gradient(costs)
    shapes_only = any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(inputs))  # recorded as the run records
    how = planes_data_traced if shapes_only else planes_cached
    state, record, result = how(kernel, chip, options, control, at, inputs, spec, params)
    recorded = {name: np.zeros(x.shape, x.dtype) for name, x in inputs.items()} if shapes_only else inputs
    try:
        priced, _ = record_traced(kernel, chip, costs, recorded, spec, params, shapes_only=shapes_only)
    except NeedsData:
        return planes_jit(kernel, chip, options, control, costs, inputs, spec, params)
    assert priced.template == record.template, "a record priced again must be the run's record"
    return state, priced, result


@exact_jit
def _data_traced_jit(kernel, chip: Chip, options: Options, inputs, spec: tuple, params: dict, record, result):
    return data_after_control(kernel, chip, options, inputs, spec, params, record, result)


def resolve_control(chip: Chip, options: Options, control: ControlOptions | None) -> ControlOptions:
    """The control plane's options of a run: ``control`` or the chip's device model, with ``options.sanitize``."""
    from ._check import control_options

    control = control or control_options(chip)
    return control if options.sanitize else dataclasses.replace(control, sanitize=False)


#: A run whose parameters or costs are traced, compiled once per kernel and static arguments (inside a ``jit`` of the
#: user's, part of that program; under a ``vmap`` alone, a program of its own with ascjax's options).
planes_jit = exact_jit(planes)
