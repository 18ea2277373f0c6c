"""The control plane: the block's sync hardware and the sanitizer over a record, as one pure function.

``run_control`` plans the scenario's issue order (``_machine.plan``), runs the sync hardware as
an event loop (``_machine.execute``), checks every access against the events at once
(``_checks``) and ranks what it found (``_log``). The record's template enters as padded
tables (``_tables``): the program compiles once per size bucket, not per instruction, so a
longer kernel is a longer array, not a bigger program; ``sweep_control`` ``vmap``s it over
scenario operands.
"""

from __future__ import annotations

import dataclasses
import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Int

from ..core import (
    INTEGER_COMPILE,
    QUICK_COMPILE,
    RAW,
    HostFirst,
    KeptPrograms,
    array_module,
    host_call,
    jaxpr_call,
    jit_outside,
)
from . import _checks
from ._log import KIND, ranked
from ._machine import Col, Machine, execute, init_machine, plan
from ._options import ControlOptions, SyncLatency
from ._record import Record
from ._tables import Static, own_tables, static, tables

DEFAULT_OPTIONS = ControlOptions()  # the device's behaviour


class ControlResult(eqx.Module):
    """What the control plane found for one scenario (a batched one under ``sweep_control``)."""

    findings: Int[Array, "K 6"]  # rows (kind, entry, inst, other, a, b), most severe first; -1 past n_findings
    n_findings: Int[Array, ""]
    dropped: Int[Array, ""]  # distinct (kind, site) findings past ``max_findings``
    start: Int[Array, " N"]  # per instance, the cycle it started (-1: it never ran)
    end: Int[Array, " N"]  # the cycle it completed (a DMA request: landed) (-1: never)
    leave: Int[Array, " N"]  # the cycle it left its pipe, at or before ``end`` (the pipe is free from then) (-1: never)
    source: Int[Array, " N"]  # a wait that ran: the instance whose set (or unit-flag flip) it consumed (-1: none)
    racy: Bool[Array, " N"]  # per instance, it read bytes a write it is not ordered with wrote (RAW): poisoned data
    ran: Bool[Array, " N"]  # per instance, it started (a deadlock leaves the instances behind the stuck ones undone)
    # two conflicting instances of one core that sync ran against program order (the later one first), or -1
    # (``_checks.pair_checks``); ``ascjax.runner._planes.planes`` leaves only a pair its data plane could not compute
    # in that order
    reordered: Int[Array, " 2"]
    deadlocked: Bool[Array, ""]
    events: Int[Array, ""]  # events executed (two per instance that ran)
    machine: Machine  # the sync hardware at the end


#: The check groups of the sanitizer (``ControlOptions.sanitize``); the others are the hardware's own findings.
SANITIZER = frozenset({"races", "uninitialised"})


def _run(st: Static, op: dict, lat: SyncLatency, options: ControlOptions, sanitize=None) -> ControlResult:
    """The control plane of one padded record. ``sanitize``: the sanitizer switched by a traced boolean (a size
    class's program serves runs with it and without; its rows are computed and dropped when off), or None:
    ``options.sanitize``, static."""
    return _checked(st, op, options, *_loop(st, op, lat), sanitize=sanitize)


def _loop(st: Static, op: dict, lat: SyncLatency):
    """``(plan, machine at the end, events)``: the scenario's issue order and the sync hardware's event loop."""
    pl = plan(st, op)
    return (pl, *execute(st, pl, lat))


def _checked(st: Static, op: dict, options: ControlOptions, pl, m: Machine, events, sanitize=None) -> ControlResult:
    """The checks and the ranked log of one event loop's run (``_run``'s ``sanitize``)."""
    log = _checks.Log(st, events)
    acc = _checks.Accesses(st, op, log)
    run = st.checked if options.sanitize or sanitize is not None else st.checked - SANITIZER
    # no listed read of bytes of no input: every read has something to read, and no write needs its landing
    landed = _checks.first_landed(st, acc) if "uninitialised" in run else None
    windows = _checks.Windows(st, op, pl, log, acc)
    race_rows, reordered = _checks.pair_checks(st, log, acc, windows, landed, races="races" in run)
    checks = {
        "races": lambda: race_rows,
        "small_tile": lambda: _checks.small_tile(st, op, log),
        "sync_events": lambda: _checks.sync_events(st, log),
        "event_ids": lambda: _checks.event_ids(st, op, log),
        "uninitialised": lambda: _checks.uninitialised(st, acc, landed),
        "bounds": lambda: _checks.bounds(st, acc),
        "faults": lambda: _checks.faults(st, op, log),
    }
    # a group with no row to check, or a sanitizer group with the sanitizer off, keeps its shape (the ranking's
    # segments are static) and has no valid row
    static_rows = {group: check() if group in run else _checks.no_rows(st, group) for group, check in checks.items()}
    if sanitize is not None:  # off: the rows no_rows gives, exactly
        for group in SANITIZER & run:
            none = _checks.no_rows(st, group)
            static_rows[group] = jax.tree.map(lambda got, no: jnp.where(sanitize, got, no), static_rows[group], none)
    end_rows = _checks.end_state(st, m, pl, events.kind.shape[0])
    findings, n_findings, dropped = ranked(st, static_rows, end_rows, options.max_findings)
    race = static_rows["races"]
    racy = jnp.zeros(st.n_instances, bool).at[race["inst"]].max(race["valid"] & (race["b"] == RAW))
    n = st.n_instances if options.keep_timeline else 0
    landed = jnp.where(log.end_t >= 0, log.end_t + pl.table[:, Col.FLIGHT], -1)  # a DMA request: after its flight
    return ControlResult(
        findings=findings, n_findings=n_findings, dropped=dropped, start=log.start_t[:n], end=landed[:n], leave=log.end_t[:n],
        source=log.source[:n], racy=racy, ran=log.start_t >= 0, reordered=reordered,
        deadlocked=m.stuck | ~m.done, events=jnp.sum(events.kind != 0).astype(jnp.int32), machine=m,
    )  # fmt: skip


#: A control-plane program outside other transformations mostly runs once per compile (a size class's: in
#: milliseconds, for a few small records; a record past the classes: its own program, its result cached), so it is
#: compiled for a quick first run (``core.QUICK_COMPILE``: XLA:CPU's element-wise emitters, LLVM without optimisation).
#: Compiled so, the seed K-loop's size class takes 1.6 s to trace, lower and compile (2.5 s with the fusion emitters,
#: 3.2 s with LLVM's optimisation too), and the two-section ping-pong's own program of 2,062 instances compiles in
#: 1.0 s instead of 2.1 s and runs in 0.22 s instead of 0.28 s (optimised: 1.7 s and 0.05 s; 2.8 s with the fusion
#: emitters). The control plane computes integers only, so its results do not depend on how it is compiled. Under a
#: ``vmap`` alone it is still a program of its own, compiled so; inside a bigger program (a jitted sweep, a traced
#: launch) it is optimised with it, and the blocks of a launch, many records of one template, run an optimised program
#: (``quick=False``, ``core.INTEGER_COMPILE``).
#: What a size class's program costs to trace, lower and compile so (1.6 s on a 2-core x86 VM), and what the host
#: takes per instance of a record to evaluate the control plane specialised to it (its own buckets and only the sync
#: hardware it uses: two events of a few hundred NumPy operations, 2-8 ms; the seed K-loop's 120 instances 0.24 s,
#: the ping-pong's 142 and flash attention's 484 (four KV tiles) 0.9 s and 2.8 s). A process evaluates a record on the
#: host until its size class's host runs have cost as much as that compile (``core.HostFirst``), so a command-line
#: run or a first kernel waits for no compile, and a process that runs many records compiles the class's program once.
CONTROL_COMPILE_S = 1.6
HOST_S_PER_INSTANCE = 0.008
_run_jit = jit_outside(_run, QUICK_COMPILE)
_run_optimised = jit_outside(_run, INTEGER_COMPILE)
#: One quick program per size class, as a record's own, held outside JAX's caches (``core.KeptPrograms``): a process
#: that drops them to bound its memory does not trace, lower and load a size class's program again.
_run_kept = KeptPrograms(_run, QUICK_COMPILE)
_run_shared = HostFirst(_run_kept, CONTROL_COMPILE_S)
#: From this many padded instances, a record's own program is two: its event loop, compiled with LLVM's optimisation
#: (each step runs about ten times faster so), and its checks, compiled without, in the caller's thread while the loop
#: compiles in another (``KeptPrograms.start``). Flash attention at 64 KV tiles (6,004 instances, 8,192 padded): as
#: one quick program, 0.75 s to compile and 0.75 s to run; its loop optimised 0.67 s to compile and 0.08 s to run,
#: while its checks compile in 0.35 s. Records of a few hundred instances run too few steps to repay the optimisation.
LOOP_OPTIMISED_INSTANCES = 2048
_loop_kept = KeptPrograms(_loop, INTEGER_COMPILE)
_checked_kept = KeptPrograms(_checked, QUICK_COMPILE)


def _run_quick(st: Static, op: dict, lat: SyncLatency, options: ControlOptions) -> ControlResult:
    """``_run`` as a quick program of its own; a long record's as its optimised loop and its quick checks."""
    if st.n_instances < LOOP_OPTIMISED_INSTANCES:
        return _run_jit(st, op, lat, options)
    loop_out = _loop_kept.start(st, op, lat)  # compiles in its own thread from here
    _checked_kept.start(st, op, options, *loop_out)
    return _checked_kept(st, op, options, *_loop_kept(st, op, lat))


#: A record past the size classes, run outside transformations, has a program of its own: on the host (its own tables,
#: evaluated in NumPy) while that costs less than compiling it. Most such records are past a class by one table (24
#: flags, say), not by their length: 64 instances take 0.3-0.5 s on the host against a 2-3.5 s compile.
_run_own = HostFirst(_run_quick, CONTROL_COMPILE_S)


def reset_control_plane() -> None:
    """Forget the padded tables, which size classes run compiled and their kept programs."""
    _run_shared.reset()
    _run_own.reset()
    for kept in (_run_kept, _loop_kept, _checked_kept):
        kept.clear()
    tables.cache_clear()
    own_tables.cache_clear()
    _own_machine.cache_clear()


def _pad_operands(op: dict, st: Static) -> dict:
    """Operands padded to the bucketed instance count (padding instances are in no queue: they never run)."""
    slots = {"rd": st.n_read_slots, "wr": st.n_write_slots}
    out = {}
    for name, x in op.items():
        widths = [(0, st.n_instances - x.shape[0])] + [(0, slots.get(name[:2], 0) - x.shape[-1])] * (x.ndim - 1)
        traced = isinstance(x, jax.core.Tracer)  # concrete: padded on the host, no program compiled per shape
        out[name] = jnp.pad(x, widths) if traced else np.pad(np.asarray(x), widths)
    return out


def run_control(
    record: Record, options: ControlOptions = DEFAULT_OPTIONS, latency: SyncLatency | None = None, *, quick: bool = True
):
    """Execute ``record``'s control plane; returns a ``ControlResult``.

    ``quick``: a record past the size classes, run outside transformations, gets a program of its own, evaluated on the
    host while that costs less than a compile, then compiled for a quick first run (``QUICK_COMPILE``); False compiles
    it optimised, for a caller that runs many records of one template (the blocks of a launch).

    Pure and jittable; ``vmap`` it over records whose operands carry a batch axis (see ``sweep_control``).
    The timeline (``start``, ``end``) is indexed by instance; a deadlock leaves unexecuted ones at -1. The sync
    hardware (``machine``) is sized by the record's own tables, whichever program ran it.
    """
    lat = SyncLatency() if latency is None else latency
    # its own program (not inside a trace): padded to a size class, so that other records reuse its compile
    concrete = not any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves((record.operands, lat)))
    st = static(record.template, options, concrete)
    ops, program = _pad_operands(record.operands, st), options.for_program()
    host_s = HOST_S_PER_INSTANCE * record.template.n_instances
    if st.shared:

        def on_host():  # the record's own tables: a program specialised to what it uses
            own = static(record.template, options, False)
            return host_call(_run, own, _pad_operands(record.operands, own), lat, program)

        switch = (st, ops, lat, dataclasses.replace(program, sanitize=True), np.asarray(options.sanitize))
        out = _in_own_tables(jax.device_get(_run_shared(switch, on_host, host_s)), record.template, options)
    elif concrete and quick:  # a record past the size classes: its own tables either way
        args = (st, ops, lat, program)
        out = _run_own(args, lambda: host_call(_run, *args), host_s)
    else:
        out = (_run_jit if quick else _run_optimised)(st, ops, lat, program)
    if array_module(out) is np:  # concrete: trimmed on the host (an eager slice per shape would compile)
        out = jax.device_get(out)
    return _per_instance(out, record.template, options)


def _per_instance(out: ControlResult, template, options: ControlOptions) -> ControlResult:
    """A padded run's result with its per-instance arrays trimmed to the record's instances."""
    n, n_all = (template.n_instances if options.keep_timeline else 0), template.n_instances
    trimmed = (out.start[:n], out.end[:n], out.leave[:n], out.source[:n], out.racy[:n_all], out.ran[:n_all])
    return eqx.tree_at(lambda r: (r.start, r.end, r.leave, r.source, r.racy, r.ran), out, trimmed)


def run_control_as_host(record: Record, options: ControlOptions = DEFAULT_OPTIONS, latency: SyncLatency | None = None):
    """``run_control`` of a traced ``record`` as the host evaluates a concrete one: on the record's own tables, the
    jaxpr ``host_call`` evaluates (``core.jaxpr_call``), so that a process evaluating its scenarios on the host
    traces their control plane once (a trace takes a second or two). The result has a concrete run's sizes."""
    lat = SyncLatency() if latency is None else latency
    own = static(record.template, options, False)
    out = jaxpr_call(_run, own, _pad_operands(record.operands, own), lat, options.for_program())
    return _per_instance(out, record.template, options)


def _in_own_tables(result: ControlResult, template, options: ControlOptions) -> ControlResult:
    """A concrete ``result`` with its sync hardware in the sizes of the record's own tables, as the host's and a traced
    run's are. A size class's program leaves it padded to the class: the own tables' entries first, then padding that
    no instance touches."""
    own = _own_machine(template, options)
    machine = jax.tree.map(lambda x, s: np.asarray(x)[tuple(slice(0, n) for n in s.shape)], result.machine, own)
    return eqx.tree_at(lambda r: r.machine, result, machine)


@functools.lru_cache(maxsize=64)
def _own_machine(template, options: ControlOptions):
    """The shapes of the sync hardware of ``template``'s own tables."""
    return jax.eval_shape(lambda: init_machine(static(template, options, False)))


def sweep_control(record: Record, options: ControlOptions = DEFAULT_OPTIONS, latency: SyncLatency | None = None):
    """``run_control`` vmapped over a leading scenario axis of every operand."""
    return jax.vmap(lambda ops: run_control(Record(record.template, ops), options, latency))(record.operands)


def verdict(result: ControlResult):
    """The most severe finding's ``Finding`` value (-1: none); a batched result gives one per scenario."""
    rows = result.findings[..., KIND]
    return jnp.where(result.n_findings > 0, rows[..., 0], -1).astype(jnp.int32)


def state_bytes(result: ControlResult) -> int:
    """Bytes of sync hardware the control plane carries through its loop for one scenario."""
    return int(sum(np.asarray(x).nbytes for x in jax.tree.leaves(result.machine)))
