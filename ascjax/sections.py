"""Concurrent sections: the cube program and the vector programs run side by side, as on the device.

A kernel written PyPTO-Pro style has one ``section_cube`` program and one ``section_vector``
program (run by each AIV), each with its own loop. A core that reaches a cross-core wait whose
signal has not arrived yields; another core runs until it sets that event. ascjax runs them
as a discrete-event simulation:

* Each section is cut at its cross-core waits into **segments**. A section is a sequence of
  regions: straight code, and top-level loops (``k.range`` / ``pl.range``) whose body is cut
  per iteration. Segment ``s`` of a region holds the ops after its ``s``-th wait, that wait
  first. Finding the cuts is a trace-time *discovery* pass that runs the section with every op
  switched off and counts the waits; each segment is then traced once, with only its own ops
  switched on (so a loop body is traced once per segment, never unrolled).
* A **scheduler** (a ``lax.scan`` with a static bound, so ``jax.grad`` works, in chunks of
  ``STEPS_PER_CHUNK`` steps that are skipped once every section is done) keeps each core's
  position (region, iteration, segment). Each step picks the runnable core with the earliest
  clock and runs its next segment with ``lax.switch``. A segment whose leading wait is not
  satisfied yields: its effects are dropped but the wait is recorded, and the core is stalled
  until another core makes progress. When every unfinished core is stalled, nothing can
  progress: the recorded waits are the deadlock.

Because a yield drops the whole segment, the ops after an unsatisfied wait run only after it
is satisfied on every pipe (A2/A3 semantics; on 950 the device may run later ops on other
pipes earlier). Waits inside ``k.cond`` or nested loops of a section are not supported: use
``wait_cross_core(..., when=pred)`` for a conditional wait.
"""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from . import indexed
from .core import N_CORES, N_PIPES
from .state import WaitKind

#: Scheduler steps per chunk: the scan runs the static worst-case number of steps, most of them
#: after every section has finished, and a finished chunk is skipped with one test.
STEPS_PER_CHUNK = 16


@dataclasses.dataclass
class Region:
    """Straight code (``trip`` 1) or a top-level loop of a section, with the waits one pass holds."""

    loop: bool
    trip: int = 1
    count: object = None  # traced trip count (<= trip) of a loop, or None
    waits: int = 0


class Gate:
    """Which ops of a section run while it is traced: none (discovery) or one segment's."""

    def __init__(self, discover: bool, region: int = 0, segment: int = 0, index=None):
        self.discover = discover
        self.target = (region, segment)
        self.index = index  # the iteration the target segment runs (a loop region)
        self.region = 0  # where the section's Python code is now
        self.waits = 0
        self.nested = 0  # inside k.cond / nested k.range
        self.regions = [Region(loop=False)]
        self.yielded = None  # traced: the segment's leading wait was not satisfied
        self.after_wait = None  # (wait, error, seq, warn_op) right after that wait: what a yield keeps

    @property
    def enabled(self) -> bool:
        return not self.discover and (self.region, self.waits) == self.target

    def count_wait(self, where: str) -> None:
        """A wait starts a new segment (inside a nested loop or a cond it cannot)."""
        if self.nested:
            raise ValueError(
                f"rule 'section waits': {where} inside k.cond or a nested loop of a concurrent section cannot be "
                "a yield point: write wait_cross_core(..., when=pred) at the section's top level or in its "
                "top-level loop body"
            )
        self.waits += 1
        if self.discover:
            self.regions[self.region].waits = max(self.regions[self.region].waits, self.waits)

    def enter_loop(self, trip: int, count) -> int:
        """A top-level loop begins: a new region (and another for the code after it)."""
        if self.discover:
            self.regions.append(Region(loop=True, trip=trip, count=count))
            self.regions.append(Region(loop=False))
        self.region += 1
        self.waits = 0
        return self.region

    def leave_loop(self) -> None:
        self.region += 1
        self.waits = 0


@dataclasses.dataclass
class Plan:
    core: int
    call: object  # runs the section (with its sub-block)
    subblock: int | None
    regions: list
    serial: int = -1  # the how-many-th section the kernel declared (names the section's issues in every trace)


def _clear_cross_waits(state, core: int):
    """Unblock the pipes of ``core`` a yielded cross-core wait left recorded (the core retries it)."""
    w = state.wait
    g = np.arange(w.op.shape[0])
    mine = jnp.asarray((g // N_PIPES) == core) & (w.kind == WaitKind.CROSS_CORE)
    new = eqx.tree_at(
        lambda x: (x.op, x.all_pipes, x.hint_op),
        w,
        (jnp.where(mine, -1, w.op), w.all_pipes & ~mine, jnp.where(mine, -1, w.hint_op)),
    )
    return eqx.tree_at(lambda s: s.wait, state, new)


def discover(program, plan: Plan) -> list:
    """The regions of ``plan``'s section and the cross-core waits each holds (a pass with every op off)."""
    gate = Gate(discover=True)
    program._run_gated(gate, plan)
    return gate.regions


def _branch(program, plan: Plan, region: int, segment: int):
    def run(state, index):
        state = _clear_cross_waits(state, plan.core)
        gate = Gate(discover=False, region=region, segment=segment, index=index)
        new = program._run_gated(gate, plan, state)
        if gate.yielded is None:
            return new, jnp.asarray(True)
        y = gate.yielded
        kept = eqx.tree_at(lambda s: (s.wait, s.error, s.seq, s.warn_op), state, gate.after_wait)
        return jax.tree_util.tree_map(lambda a, b: jnp.where(y, a, b), kept, new), ~y

    return run


def run_concurrent(program, plans: list[Plan]):
    """Run the sections' programs concurrently on ``program.state`` (see the module docstring)."""
    for plan in plans:
        plan.regions = discover(program, plan)
    if not any(region.waits for plan in plans for region in plan.regions):
        for plan in plans:  # nothing can block across cores: issue order gives the same result
            program._run_section(plan)
        return
    n_plans = len(plans)
    r_max = max(len(p.regions) for p in plans)
    s_max = max(r.waits + 1 for p in plans for r in p.regions)
    table = np.zeros((n_plans, r_max, s_max), np.int32)
    n_segs = np.ones((n_plans, r_max), np.int32)
    n_regions = np.array([len(p.regions) for p in plans], np.int32)
    branches = []
    total = 0
    for pi, plan in enumerate(plans):
        for ri, region in enumerate(plan.regions):
            n_segs[pi, ri] = region.waits + 1
            total += (region.waits + 1) * max(region.trip, 1)
            for si in range(region.waits + 1):
                table[pi, ri, si] = len(branches)
                branches.append(_branch(program, plan, ri, si))
    trips = []
    for plan in plans:
        row = []
        for region in plan.regions + [Region(loop=False, trip=0)] * (r_max - len(plan.regions)):
            t = jnp.int32(region.trip)
            if region.count is not None:
                t = jnp.clip(jnp.asarray(region.count, jnp.int32), 0, region.trip)
            row.append(t)
        trips.append(jnp.stack(row))
    trip = jnp.stack(trips)  # [plans, regions]: iterations each region runs (code: 1)
    table_j, n_segs_j, n_regions_j = jnp.asarray(table), jnp.asarray(n_segs), jnp.asarray(n_regions)
    cores = [plan.core for plan in plans]

    def skip_empty(p, r):
        for _ in range(r_max):
            r = jnp.where((r < n_regions_j[p]) & (trip[p, jnp.clip(r, 0, r_max - 1)] == 0), r + 1, r)
        return r

    def advance(p, r, i, s):
        more_seg = s + 1 < n_segs_j[p, r]
        more_iter = i + 1 < trip[p, r]
        r2 = jnp.where(more_seg | more_iter, r, r + 1)
        i2 = jnp.where(more_seg, i, jnp.where(more_iter, i + 1, 0))
        s2 = jnp.where(more_seg, s + 1, 0)
        r2 = skip_empty(p, r2)
        return r2, i2, s2, r2 >= n_regions_j[p]

    r0 = jnp.stack([skip_empty(p, jnp.int32(0)) for p in range(n_plans)])
    zeros = jnp.zeros((n_plans,), jnp.int32)
    done0 = r0 >= n_regions_j
    steps = total * (n_plans + 1) + n_plans

    def clock(state):
        t = state.time.pipe_t.reshape(N_CORES, N_PIPES)
        return jnp.stack([jnp.max(t[c]) for c in cores])

    def go(carry):
        state, r, i, s, done, stalled = carry
        runnable = ~done & ~stalled
        p = jnp.argmin(jnp.where(runnable, clock(state), jnp.inf))
        index = table_j[p, r[p], s[p]]
        new_state, progressed = jax.lax.switch(index, branches, state, i[p])
        r2, i2, s2, d2 = advance(p, r[p], i[p], s[p])
        pick = lambda new, old: indexed.put(old, p, new, progressed)  # noqa: E731
        stalled = jnp.where(progressed, jnp.zeros_like(stalled), indexed.put(stalled, p, True))
        return new_state, pick(r2, r), pick(i2, i), pick(s2, s), pick(d2, done), stalled

    def step(carry, _):
        runnable = ~carry[4] & ~carry[5]
        return jax.lax.cond(jnp.any(runnable), go, lambda c: c, carry), None

    def chunk(carry, _):  # once every section has finished, the remaining chunks cost one test each
        runnable = ~carry[4] & ~carry[5]
        run = lambda c: jax.lax.scan(step, c, None, length=STEPS_PER_CHUNK)[0]  # noqa: E731
        return jax.lax.cond(jnp.any(runnable), run, lambda c: c, carry), None

    carry = (program.state, r0, zeros, zeros, done0, jnp.zeros((n_plans,), bool))
    (state, *_), _ = jax.lax.scan(chunk, carry, None, length=-(-steps // STEPS_PER_CHUNK))
    program.state = state
