"""The data plane: a kernel's buffers computed by its instructions' data functions, and nothing else.

The kernel is traced on a data-only ``State`` (GM, the buffers, the config registers and the
TileGroup cursors; no sync, sanitizer or timing state). Every instruction runs its data
function, sync instructions compute nothing, and a core's instructions run in program order.

Concurrent sections hand data to each other at their cross-core waits, so their order comes
from the control plane, which has executed the record already (``schedule``). Each section is
cut at its cross-core waits into segments (the discovery of ``ascjax.engine._sections``); a segment is
keyed by the cycle its leading wait started in the control plane (the running maximum over its
section, so a section's keys never fall), and the segments of all sections run in key order.
A set's segment therefore runs before the segment of every wait that took its signal, and for a
kernel without races every order of this kind computes the same buffers. A wait that never ran
(a deadlock) stops its section there. A section's instructions after a pending cross-core
wait run after it, as on A2/A3, where such a wait stops its core.

A concrete schedule (the control plane run on the host) is resolved while the data plane is
traced: its keys' ranks choose every step's segment then, and a loop's steady state becomes one
``lax.scan`` of its period (``_compress``), so no step chooses a segment at run time.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..core import N_CORES, array_module
from ..core import _indexed as indexed
from . import _sections as sections
from ._control import ControlResult
from ._record import Record, Sync

#: Key of a wait that never ran: its segment and the rest of its section never run.
NEVER = float(np.inf)
#: Key of a wait that is switched off (a disabled iteration, ``when=False``): no constraint.
FREE = -1.0


#: A concrete schedule's rank of a wait that never ran (above every other rank); a switched-off wait ranks FREE.
NEVER_RANK = np.iinfo(np.int32).max
#: Most segment runs a concrete schedule traces in line (prologue, loop bodies, epilogue together) before the
#: data plane falls back to choosing each step's segment at run time: the bound on its compile's size.
MAX_INLINE_RUNS = 512
#: Longest period (in segment runs) ``_compress`` looks for.
MAX_PERIOD_RUNS = 128


class Schedule(eqx.Module):
    """Per core, the key of each cross-core wait instance of the record, in the core's program order.

    ``ranks`` (static): for a concrete schedule, the same keys as ranks (their order, ties kept; FREE and
    NEVER_RANK kept apart), so the data plane can choose every step's segment while it is traced. The order
    of segments depends only on how the keys compare, so runs whose keys compare alike share one compile."""

    wait_keys: tuple  # one float32 array per core [the core's cross-core waits]
    ranks: tuple | None = eqx.field(static=True, default=None)  # per core, a tuple of int ranks


def schedule(record: Record, result: ControlResult) -> Schedule:
    """The data plane's section order from a control-plane run of ``record`` (``keep_timeline`` on)."""
    t = record.template
    xp = array_module(record.operands["enable"], result.start)
    enable = xp.asarray(record.operands["enable"], bool)
    keys = []
    for core in range(N_CORES):
        inst = np.flatnonzero((t.core == core) & (t.sync == Sync.CROSS_WAIT))
        inst = inst[np.argsort(t.pidx[inst], kind="stable")]
        start = xp.asarray(result.start)[inst].astype(np.float32)
        keys.append(xp.where(~enable[inst], np.float32(FREE), xp.where(start >= 0, start, np.float32(NEVER))))
    return Schedule(tuple(keys), _ranks(keys) if xp is np else None)


def _ranks(keys: list) -> tuple:
    """Per core, its keys as ranks among every core's: FREE stays FREE, NEVER is NEVER_RANK, a start its place."""
    starts = np.unique(np.concatenate([k[(k != FREE) & (k != NEVER)] for k in keys]))
    ranks = []
    for k in keys:
        r = np.searchsorted(starts, k).astype(np.int64)
        ranks.append(tuple(int(x) for x in np.where(k == FREE, int(FREE), np.where(k == NEVER, NEVER_RANK, r))))
    return tuple(ranks)


def run_sections(program, plans: list, order: Schedule) -> None:
    """Run the sections ``plans`` on ``program.state`` in the order ``order`` gives their segments."""
    for plan in plans:
        plan.regions = sections.discover(program, plan)
    if not any(region.waits for plan in plans for region in plan.regions):
        for plan in plans:  # nothing hands data across cores at a wait: program order is the order
            program._run_section(plan)
        return
    n_plans, r_max = len(plans), max(len(p.regions) for p in plans)
    table = np.zeros((n_plans, r_max, max(r.waits + 1 for p in plans for r in p.regions)), np.int32)
    n_segs = np.ones((n_plans, r_max), np.int32)
    waits = np.zeros((n_plans, r_max), np.int32)
    wait_base = np.zeros((n_plans, r_max), np.int32)  # index of the region's first wait in its core's order
    branches, total = [], 0
    for p, plan in enumerate(plans):
        base = program.cross_waits[plan.core]
        for r, region in enumerate(plan.regions):
            n_segs[p, r], waits[p, r], wait_base[p, r] = region.waits + 1, region.waits, base
            base += region.waits * max(region.trip, 1)
            total += (region.waits + 1) * max(region.trip, 1)
            for s in range(region.waits + 1):
                table[p, r, s] = len(branches)
                branches.append(_segment(program, plan, r, s))
        program.cross_waits[plan.core] = base
    trips = _concrete_trips(plans)
    if order.ranks is not None and trips is not None:
        ranks = [order.ranks[p.core] for p in plans]
        pieces = _compress(_steps(ranks, table, n_segs, waits, wait_base, trips))
        if pieces is not None:
            program.state = _run_pieces(program.state, pieces, branches)
            return
    idle = len(branches)
    branches.append(lambda state, index: state)
    padding = [sections.Region(loop=False, trip=0)]
    trip = jnp.stack([jnp.stack([_trip(r) for r in p.regions + padding * (r_max - len(p.regions))]) for p in plans])
    n_regions = jnp.asarray([len(p.regions) for p in plans], jnp.int32)
    width = max(1, *(int(order.wait_keys[p.core].shape[0]) for p in plans))
    keys = jnp.stack([jnp.pad(order.wait_keys[p.core], (0, width - order.wait_keys[p.core].shape[0]),
                              constant_values=NEVER) for p in plans])  # fmt: skip
    table_j, n_segs_j, waits_j, base_j = map(jnp.asarray, (table, n_segs, waits, wait_base))
    plan_ids = jnp.arange(n_plans)

    def skip_empty(r):  # regions that run no iteration (a loop whose count is 0)
        for _ in range(r_max):
            r = jnp.where((r < n_regions) & (trip[plan_ids, jnp.clip(r, 0, r_max - 1)] == 0), r + 1, r)
        return r

    def step(carry, _):
        state, r, i, s, key = carry
        rc = jnp.clip(r, 0, r_max - 1)
        at = base_j[plan_ids, rc] + i * waits_j[plan_ids, rc] + s - 1
        lead = jnp.where(s > 0, keys[plan_ids, jnp.clip(at, 0, width - 1)], FREE)
        nxt = jnp.maximum(key, lead)
        runnable = (r < n_regions) & (nxt < NEVER)
        p = jnp.argmin(jnp.where(runnable, nxt, NEVER))
        go = runnable[p]
        state = jax.lax.switch(jnp.where(go, table_j[p, rc[p], s[p]], idle), branches, state, i[p])
        more_seg = s[p] + 1 < n_segs_j[p, rc[p]]
        more_iter = i[p] + 1 < trip[p, rc[p]]
        r2 = jnp.where(more_seg | more_iter, r[p], r[p] + 1)
        i2 = jnp.where(more_seg, i[p], jnp.where(more_iter, i[p] + 1, 0))
        s2 = jnp.where(more_seg, s[p] + 1, 0)
        r2 = skip_empty(indexed.put(r, p, r2))[p]

        def put(old, new):
            return indexed.put(old, p, new, go)

        return (state, put(r, r2), put(i, i2), put(s, s2), put(key, nxt[p])), None

    zeros = jnp.zeros((n_plans,), jnp.int32)
    carry = (program.state, skip_empty(zeros), zeros, zeros, jnp.full((n_plans,), FREE, jnp.float32))
    (program.state, *_), _ = jax.lax.scan(step, carry, None, length=total)


def _concrete_trips(plans: list) -> list | None:
    """Per plan, each region's trip count; None when one is traced."""
    trips = []
    for plan in plans:
        counts = []
        for region in plan.regions:
            if region.count is None:
                counts.append(region.trip)
            elif isinstance(region.count, jax.core.Tracer):
                return None
            else:
                counts.append(int(np.clip(int(region.count), 0, region.trip)))
        trips.append(counts)
    return trips


def _steps(ranks: list, table, n_segs, waits, wait_base, trips: list) -> list:
    """The segments ``run_sections``'s loop runs, chosen on the host from a concrete schedule's ranks: a list of
    ``(branch, iteration)``. The same choice as the traced loop's (the runnable plan of the lowest key, the
    first on a tie) until no plan can run."""
    n_plans = len(trips)

    def skip_empty(p, region):
        while region < len(trips[p]) and trips[p][region] == 0:
            region += 1
        return region

    r = [skip_empty(p, 0) for p in range(n_plans)]  # per plan: its region, iteration, segment and last key
    i, s, key = [0] * n_plans, [0] * n_plans, [int(FREE)] * n_plans
    steps = []
    while True:
        best, best_key = -1, NEVER_RANK
        for p in range(n_plans):
            if r[p] >= len(trips[p]):
                continue
            nxt = key[p]
            if s[p] > 0:
                at = int(wait_base[p, r[p]] + i[p] * waits[p, r[p]] + s[p] - 1)
                nxt = max(nxt, ranks[p][at] if at < len(ranks[p]) else NEVER_RANK)
            if nxt < best_key:
                best, best_key = p, nxt
        if best < 0:
            return steps
        p, rp = best, r[best]
        steps.append((int(table[p, rp, s[p]]), i[p]))
        key[p] = best_key
        if s[p] + 1 < n_segs[p, rp]:
            s[p] += 1
        elif i[p] + 1 < trips[p][rp]:
            i[p], s[p] = i[p] + 1, 0
        else:
            r[p], i[p], s[p] = skip_empty(p, rp + 1), 0, 0


def _compress(steps: list) -> list | None:
    """``steps`` as pieces ``(reps, runs)``: a single run (``reps`` None, ``runs`` one ``(branch, iteration)``), or
    ``reps`` repeats of a period of runs ``(branch, first iteration, iteration step)``. Greedy: at each place the
    period that covers the most steps, so a loop's steady state is one piece whatever its trip count. None once
    more than ``MAX_INLINE_RUNS`` runs would be traced in line."""
    b = np.asarray([x[0] for x in steps], np.int64)
    it = np.asarray([x[1] for x in steps], np.int64)
    pieces, t, n, inline = [], 0, len(steps), 0
    while t < n:
        best_period, best_reps = 0, 1
        for period in range(1, min(MAX_PERIOD_RUNS, (n - t) // 2) + 1):
            reps = 1 + _matched(b, it, t, period) // period
            if reps >= 2 and reps * period > best_reps * max(best_period, 1):
                best_period, best_reps = period, reps
        if best_period:
            runs = tuple((int(b[t + j]), int(it[t + j]), int(it[t + best_period + j] - it[t + j]))
                         for j in range(best_period))  # fmt: skip
            pieces.append((best_reps, runs))
            t += best_period * best_reps
        else:
            runs = ((int(b[t]), int(it[t])),)
            pieces.append((None, runs))
            t += 1
        inline += len(runs)
        if inline > MAX_INLINE_RUNS:
            return None
    return pieces


def _matched(b, it, t: int, period: int) -> int:
    """How many steps from ``t + period`` on repeat the step ``period`` before them (the same branch, the
    iteration advanced as from the first period to the second), compared a chunk at a time."""
    advance = it[t + period : t + 2 * period] - it[t : t + period]
    matched, n, chunk = 0, len(b), 4 * period
    while t + period + matched < n:
        lo = t + matched
        hi = min(n - period, lo + chunk)
        want = advance[np.arange(lo - t, hi - t) % period]
        same = (b[lo + period : hi + period] == b[lo:hi]) & (it[lo + period : hi + period] - it[lo:hi] == want)
        if not same.all():
            return matched + int(np.argmin(same))
        matched, chunk = matched + hi - lo, chunk * 4
    return matched


def _run_pieces(state, pieces: list, branches: list):
    """Run ``_compress``'s pieces: a single run in line, a period as the body of a ``lax.scan`` over its repeats."""
    for reps, runs in pieces:
        if reps is None:
            ((branch, index),) = runs
            state = branches[branch](state, jnp.int32(index))
            continue

        def body(state, k, runs=runs):
            for branch, first, step in runs:
                state = branches[branch](state, first + k * step)
            return state, None

        state, _ = jax.lax.scan(body, state, jnp.arange(reps, dtype=jnp.int32))
    return state


def _trip(region: sections.Region):
    if region.count is None:
        return jnp.int32(region.trip)
    return jnp.clip(jnp.asarray(region.count, jnp.int32), 0, region.trip)


def _segment(program, plan, region: int, segment: int):
    def run(state, index):
        gate = sections.Gate(discover=False, region=region, segment=segment, index=index)
        return program._run_gated(gate, plan, state)

    return run


class PoisonIndex:
    """Where each issue of a record finds its instance (static, hashable): by its tag (which section it is in
    and its place in that section's trace, the same in the record and in every trace of the data plane) and the
    indices of its loops."""

    def __init__(self, record: Record):
        t = record.template
        self.entry_of = {tag: e for e, tag in enumerate(t.tags) if tag is not None}
        self.instances = {}  # entry -> its instances, indexed by its loops' indices (outermost first)
        for e in set(self.entry_of.values()):
            inst = np.flatnonzero(t.entry == e)
            if not inst.size:  # a loop that runs no iteration: its issues are traced, never run
                continue
            iters = t.iteration[inst]
            depth = int(np.sum(iters[0] >= 0))
            shape = tuple(int(x) + 1 for x in iters[:, :depth].max(axis=0)) if depth else ()
            table = np.zeros(shape, np.int32)
            if depth:
                table[tuple(iters[:, :depth].T)] = inst
            else:
                table[()] = inst[0]
            self.instances[e] = table
        self._key = (tuple(sorted(self.entry_of.items(), key=repr)),
                     tuple((e, v.shape, v.tobytes()) for e, v in sorted(self.instances.items())))  # fmt: skip

    def __hash__(self):
        return hash(self._key)

    def __eq__(self, other):
        return isinstance(other, PoisonIndex) and self._key == other._key

    def table(self, tag):
        """The instances of the issue ``tag`` indexed by its loops' indices (None: an issue of no instance)."""
        return self.instances.get(self.entry_of.get(tag))


class Poison:
    """``poison_races`` on the data plane: which issues read racy data, from the control plane's run.

    The control plane flags the instances that read bytes a write they are not ordered with wrote
    (``ControlResult.racy``). An issue finds its instance through the ``PoisonIndex``; while its data
    function runs, its reads are racy where that instance's are, and the value it writes is NaN
    (integers: INT_MIN).
    """

    def __init__(self, index: PoisonIndex, racy):
        self.index = index
        self.racy = racy

    def racy_read(self, tag, loop_index):
        """Whether the issue ``tag`` at loop indices ``loop_index`` (outermost first) reads racy data."""
        table = self.index.table(tag)
        if table is None:
            return jnp.asarray(False)
        return jnp.asarray(self.racy)[_at(table, loop_index)]


def _at(table: np.ndarray, loop_index):
    """The element of ``table`` (shaped as an entry's ``PoisonIndex`` table) an issue's loop indices (outermost
    first) pick: a NumPy scalar outside loops, traced inside one."""
    index = tuple(jnp.asarray(i, jnp.int32) for i in loop_index[len(loop_index) - table.ndim :])
    return jnp.asarray(table)[index] if index else table[()]


class Ran:
    """Which issues the control plane's run started: a deadlock leaves the ones behind the stuck instructions
    undone, and the data plane then writes GM only where the device did (``Program`` skips, or selects under a
    trace, an issue that writes GM).

    ``never``: a concrete run's instances that never ran (static and hashable: one compiled data plane per set; a
    run that completes needs no ``Ran``), or ``ran``: a traced run's per-instance flags (``ControlResult.ran``).
    """

    def __init__(self, index: PoisonIndex, *, never: frozenset | None = None, ran=None):
        if (never is None) == (ran is None):
            raise ValueError("Ran takes the instances that never ran (concrete) or the traced flags, one of the two")
        self.index, self.never, self.flags = index, never, ran

    @classmethod
    def of(cls, index: PoisonIndex, result: ControlResult) -> Ran | None:
        """``result``'s run as a ``Ran``: None where every instance ran (nothing to gate)."""
        if isinstance(result.ran, jax.core.Tracer):
            return cls(index, ran=result.ran)
        never = frozenset(int(i) for i in np.flatnonzero(~np.asarray(result.ran)))
        return cls(index, never=never) if never else None

    def __hash__(self):
        return hash((self.index, self.never)) if self.flags is None else id(self)

    def __eq__(self, other):
        if self.flags is not None or not isinstance(other, Ran) or other.flags is not None:
            return self is other
        return self.index == other.index and self.never == other.never

    def ran(self, tag, loop_index):
        """Whether the issue ``tag`` at ``loop_index`` ran: a Python bool where that is known while tracing."""
        table = self.index.table(tag)
        if table is None:  # an issue of no instance: nothing of it ran or stopped in the control plane's run
            return True
        if self.flags is not None:
            return jnp.asarray(self.flags)[_at(table, loop_index)]
        undone = np.isin(table, list(self.never))
        if undone.all() or not undone.any():
            return not undone.any()
        return ~_at(undone, loop_index)
