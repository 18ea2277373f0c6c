"""The order in which the data plane computes a core's instructions, from one concrete control-plane run.

The data plane traces a kernel in program order. The device does not run it so: issue is decoupled
(semantics §8), and sync may hold an instruction until a later one has run. Semantics §8's unit-flag
vector is an example: mmad; mmad; fixpipe; fixpipe on one L0C tile with mode 3, where the second mmad
waits until the first fixpipe has drained the flag, so the first fixpipe stores the first product.
Where two such instructions share bytes, program order computes what the device does not
(``ControlResult.reordered`` finds them).

``emit_order`` ranks the record's entries so that the data plane, sorting the issues it traces between
two trace boundaries (a *window*: straight code at one level, or one pass of a loop body) by rank,
computes every conflicting pair of one core in the order the control plane ran it. The rank is a
topological order of the entries under one edge per such pair of one iteration (first -> second),
ties broken by program order; an instruction that touches no bytes (a config register) keeps its
place. What no ranking of windows can follow is returned as ``unfixable``: a pair of two iterations of
a loop that ran against program order, or edges that contradict each other; ``EmitOrder.violated``
finds the edges the windows of a trace could not follow.
"""

from __future__ import annotations

import dataclasses
import functools
import heapq

import numpy as np

from ._record import Record, Sync
from ._tables import _accesses, _ranges, _windows

#: Accesses a window's range is walked by at first (then twice as many each step): most ranges hold none.
WALK_ACCESSES = 8


@dataclasses.dataclass(frozen=True, eq=False)
class EmitOrder:
    """Per entry its rank in every window, the edges a trace must follow, and the first pair none can."""

    rank: tuple[int, ...]  # per entry: windows sort their issues by it
    edges: tuple[tuple[int, int, int, int], ...]  # (entry first, entry second, instance first, instance second)
    unfixable: tuple[int, int] | None  # (instance that ran first, the earlier one in program order), or None
    tags: tuple  # per entry, the front end's tag of its issues (``Template.tags``)

    def _key(self):
        return (self.rank, self.edges, self.unfixable, self.tags)

    @functools.cached_property
    def entry_of(self) -> dict:
        """The entry of each tag (an issue with a tag of no entry keeps its place)."""
        return {tag: e for e, tag in enumerate(self.tags) if tag is not None}

    def __hash__(self):
        return hash(self._key())

    def __eq__(self, other):
        return isinstance(other, EmitOrder) and self._key() == other._key()

    def violated(self, emitted: dict) -> tuple[int, int] | None:
        """The first edge whose entries a trace emitted out of order (``emitted``: entry -> its place in the
        trace), as (instance first, instance second); None when the trace followed every edge."""
        for a, b, ia, ib in self.edges:
            if a in emitted and b in emitted and emitted[a] > emitted[b]:
                return ia, ib
        return None


def emit_order(record: Record, result) -> EmitOrder | None:
    """The ranking of ``record``'s entries for one concrete ``ControlResult`` (its timeline kept); None when
    program order computes what the device does (``result.reordered`` found no pair).

    The pairs are those of two queues of one core whose bytes overlap, at least one a write, both completed, one
    run before the other. Those of one pass (a loop iteration, or straight code) give the edges; they are compared
    pass by pass. A pair of two passes that ran against program order is ``unfixable``; it is found in the race
    check's windows (``_tables._windows``), where start and end times rise along a queue's program order, so what
    ran against it is a binary search away. Either way the work grows with the accesses, not with the square of a
    loop's trip count."""
    reordered = tuple(int(x) for x in np.asarray(result.reordered))
    if reordered[0] < 0:
        return None
    t = record.template
    acc, lo, hi, on = accesses_of_run(record, result)
    start, end = np.asarray(result.start), np.asarray(result.leave)  # a request is done with its source as it leaves
    done = on & (end[acc["inst"]] >= 0)  # a deadlock leaves some undone
    _, windows, passes = _of_template(t)
    runs = _Runs(acc, lo, hi, done, start, end, passes)
    first, second = runs.one_pass(t)
    return ranked(t, acc, first, second, runs.first_across(windows), reordered)


@functools.lru_cache(maxsize=16)  # a launch's blocks share one template: made once, not once per block
def _of_template(t) -> tuple:
    """What ``emit_order`` reads of the template alone: its accesses, the race check's windows and each instance's
    pass (read-only: every run of the template shares them)."""
    acc = _accesses(t, t.n_instances)
    parts = (acc, _windows(t, acc), _passes(t))
    for x in (*acc.values(), *parts[1].values(), parts[2]):
        x.flags.writeable = False
    return parts


def accesses_of_run(record: Record, result):
    """The record's accesses (``_tables._accesses``) with their bytes in this run (``lo``, ``hi``) and whether they
    happened in it (``on``: switched on, in bounds, their instance started)."""
    op = {name: np.asarray(x) for name, x in record.operands.items()}
    start = np.asarray(result.start)
    acc = _of_template(record.template)[0]
    lo, hi = (np.empty(acc["inst"].size, np.int64) for _ in range(2))
    on = np.empty(acc["inst"].size, bool)
    for write, prefix in ((False, "rd"), (True, "wr")):
        k = acc["write"] == write
        inst, slot = acc["inst"][k], acc["slot"][k]
        lo[k], hi[k] = op[f"{prefix}_lo"][inst, slot], op[f"{prefix}_hi"][inst, slot]
        on[k] = op[f"{prefix}_on"][inst, slot] & op[f"{prefix}_ok"][inst, slot] & (start[inst] >= 0)
    return acc, lo, hi, on


def ranked(t, acc: dict, first, second, unfixable, reordered: tuple) -> EmitOrder:
    """The ranking from the pairs of one pass that ran in an order (``first``, ``second``: instances, in the pairs'
    order): an edge per pair of entries, the first pair giving its instances; each config register pinned among its
    core's instructions; a cycle unfixable as ``reordered``."""
    entry = t.entry
    n_entries = len(t.entries)
    edges: dict = {}
    for f, s in zip(first, second):
        edges.setdefault((int(entry[f]), int(entry[s])), (int(f), int(s)))
    touches = np.zeros(n_entries, bool)
    touches[entry[acc["inst"]]] = True
    config = [e for e in range(n_entries) if not touches[e] and t.entries[e][4] == Sync.NONE]
    for c in config:  # a config register keeps its place among the instructions of its core and loops
        for e in range(n_entries):
            if e != c and t.entries[e][2] == t.entries[c][2] and t.loops[e] == t.loops[c]:
                edges.setdefault((min(c, e), max(c, e)), (-1, -1))
    rank, cycle = _topological(n_entries, edges)
    if cycle and unfixable is None:
        unfixable = reordered
    kept = tuple((a, b, ia, ib) for (a, b), (ia, ib) in sorted(edges.items()) if ia >= 0 and a > b)
    return EmitOrder(rank=rank, edges=kept, unfixable=unfixable, tags=t.tags)


def _passes(t) -> np.ndarray:
    """Per instance, its pass: its core, its entry's loops and its loop indices, as one id (instances of one pass
    are one loop iteration's, or one level's straight code, of one core)."""
    loops_id = {loops: i for i, loops in enumerate(dict.fromkeys(t.loops))}
    of_entry = np.asarray([loops_id[loops] for loops in t.loops], np.int64)
    rows = np.column_stack([t.core, of_entry[t.entry], t.iteration]) if t.n_instances else np.zeros((0, 3))
    return np.unique(rows, axis=0, return_inverse=True)[1].reshape(-1)


class _Runs:
    """The accesses of one control-plane run: which happened (``done``), their bytes, and when their instances ran.

    A pair is a write access ``w`` and an access ``x`` of another queue whose footprints overlap, ``w`` first in
    access order where both write (the race check's pairs); it is live where both are done and their bytes in this
    run overlap. Its *order* lists the pairs whose write ran first (by write, then other access), then those whose
    other ran first: the first pair a rule picks is the first in that order."""

    def __init__(self, acc, lo, hi, done, start, end, pass_of):
        self.acc, self.lo, self.hi, self.done = acc, lo, hi, done
        self.inst = acc["inst"].astype(np.int64)
        self.start, self.end = start[self.inst], end[self.inst]  # per access, its instance's times
        self.pass_of = pass_of[self.inst]

    def _pair(self, w, x):
        """Whether (write ``w``, access ``x``), of two queues with overlapping footprints, is a live pair."""
        acc = self.acc
        once = ~acc["write"][x] | (w < x)  # a write-write pair is listed once
        both = self.done[w] & self.done[x]
        return once & both & (np.maximum(self.lo[w], self.lo[x]) < np.minimum(self.hi[w], self.hi[x]))

    def one_pass(self, t) -> tuple[np.ndarray, np.ndarray]:
        """(first instance, second instance) of every live pair of one pass, two entries, in the pairs' order."""
        acc = self.acc
        space = t.atom_space[np.clip(acc["lo"], 0, max(t.n_atoms - 1, 0))] if t.n_atoms else np.zeros_like(acc["lo"])
        key = self.pass_of * (int(space.max(initial=0)) + 1) + space
        order = np.argsort(key, kind="stable")
        k = key[order]
        starts = np.flatnonzero(np.concatenate([[True], k[1:] != k[:-1]]))
        sizes = np.diff(np.concatenate([starts, [k.size]]))
        w = np.repeat(order, np.repeat(sizes, sizes))  # every access against every access of its pass and space
        x = order[_ranges(np.repeat(starts, sizes), np.repeat(sizes, sizes))]
        keep = acc["write"][w] & (acc["queue"][w] != acc["queue"][x])
        keep &= (acc["lo"][w] < acc["hi"][x]) & (acc["lo"][x] < acc["hi"][w])
        w, x = w[keep], x[keep]
        keep = self._pair(w, x)  # (two queues: two instances, so two entries of one pass)
        w, x = w[keep], x[keep]
        w_first, x_first = self.end[w] <= self.start[x], self.end[x] <= self.start[w]  # neither: a race
        ordered = [np.lexsort((x[k], w[k])) for k in (w_first, x_first)]  # (both: instances of no duration)
        first = np.concatenate([self.inst[w[w_first]][ordered[0]], self.inst[x[x_first]][ordered[1]]])
        second = np.concatenate([self.inst[x[w_first]][ordered[0]], self.inst[w[x_first]][ordered[1]]])
        return first, second

    def first_across(self, win: dict) -> tuple[int, int] | None:
        """The first live pair of two passes of one core that ran against program order, as (instance that ran
        first, the earlier one in program order); None where there is none.

        Per same-core window (a write and a group of another queue, split at the write's place in program order),
        the accesses before the write that started after it ended form one range, found by binary search (starts
        rise along a queue), and so do those after the write that ended before it started; each range is walked
        for its first live pair of two passes, a few accesses at a time."""
        same_core = win["split"] >= 0
        w = win["write"][same_core].astype(np.int64)
        g_start, g_len = win["start"][same_core].astype(np.int64), win["length"][same_core].astype(np.int64)
        split = g_start + win["split"][same_core]
        members = win["order"].astype(np.int64)
        big = np.iinfo(np.int64).max
        group = np.zeros(members.size + 1, np.int64)
        group[g_start] = 1
        group = np.cumsum(group[:-1])  # the searched groups' members apart (others only follow one)
        started, ended = (_rising(group, times[members]) for times in (self.start, self.end))
        ok = self.done[w]
        # the write ran first, the other earlier in program order: started once the write had ended
        lo_a = _first_at_least(started, g_start, split, np.where(ok, self.end[w], big))
        found = self._first_live(w, members, lo_a, np.where(ok, split, lo_a))
        if found is None:  # the other ran first, later in program order: ended before the write started
            hi_b = _first_at_least(ended, split, g_start + g_len, np.where(ok, self.start[w] + 1, big))
            found = self._first_live(w, members, split, np.where(ok, hi_b, split))
            if found is None:
                return None
            return int(self.inst[found[1]]), int(self.inst[found[0]])
        return int(self.inst[found[0]]), int(self.inst[found[1]])

    def _first_live(self, w, members, lo, hi) -> tuple[int, int] | None:
        """The first (write, other access) in the pairs' order among ``w[i]`` and the members in ``[lo[i], hi[i])``
        that form a live pair of two passes (per window its first read, else its first write, among them)."""
        acc, none = self.acc, np.iinfo(np.int64).max
        reads = np.concatenate([[0], np.cumsum(~acc["write"][members])])  # reads among the first p members
        cursor, width = lo.copy(), np.full(lo.shape, WALK_ACCESSES, np.int64)
        read_at, write_at = np.full(lo.shape, -1, np.int64), np.full(lo.shape, -1, np.int64)
        active = cursor < hi
        while active.any():
            i = np.flatnonzero(active)
            n = width[i]
            p = np.repeat(cursor[i], n) + _ranges(np.zeros(i.size, np.int64), n)
            row = np.repeat(np.arange(i.size), n)
            inside = p < np.repeat(hi[i], n)
            p, row = p[inside], row[inside]
            x = members[p]
            live = self._pair(w[i[row]], x) & (self.pass_of[w[i[row]]] != self.pass_of[x])
            is_write = acc["write"][x]
            for at, kind in ((read_at, ~is_write), (write_at, is_write)):
                hit = live & kind
                first = np.full(i.size, none)
                np.minimum.at(first, row[hit], p[hit])
                new = (at[i] < 0) & (first < none)
                at[i[new]] = first[new]
            cursor[i] = np.minimum(cursor[i] + n, hi[i])
            width[i] = n * 2
            # a window is settled once it has a read (reads come first in access order), or a write and no read left
            reads_left = reads[hi] > reads[cursor]
            active = (cursor < hi) & (read_at < 0) & (reads_left | (write_at < 0))
        other = np.where(read_at >= 0, read_at, write_at)
        has = other >= 0
        if not has.any():
            return None
        pairs = np.stack([w[has], members[other[has]]], axis=1)
        best = pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))[0]]
        return int(best[0]), int(best[1])


def _rising(group: np.ndarray, times: np.ndarray) -> np.ndarray:
    """``times`` (-1: the instance did not run or end) along each group, each -1 replaced by the time before it in
    its group (0 at its start): times rise along a queue where they are known, so these rise along each group."""
    span = int(times.max(initial=0)) + 1
    return np.maximum.accumulate(group * span + np.maximum(times, 0)) - group * span


def _first_at_least(values: np.ndarray, lo: np.ndarray, hi: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Per row, the first place in ``[lo, hi)`` where ``values`` (rising there) is at least ``target`` (``hi``:
    none), by a bisection of every row at once."""
    lo, hi = lo.copy(), hi.copy()
    while True:
        open_ = lo < hi
        if not open_.any():
            return lo
        mid = (lo + hi) // 2
        below = open_ & (values[np.minimum(mid, values.size - 1)] < target)
        lo = np.where(below, mid + 1, lo)
        hi = np.where(open_ & ~below, mid, hi)


def _topological(n: int, edges: dict) -> tuple[tuple[int, ...], bool]:
    """Entries in an order that follows ``edges`` (the smallest entry first among those free); whether a cycle
    left some edges unfollowed (those entries then keep program order)."""
    succ: list[list[int]] = [[] for _ in range(n)]
    indegree = np.zeros(n, np.int64)
    for a, b in edges:
        succ[a].append(b)
        indegree[b] += 1
    free = [e for e in range(n) if indegree[e] == 0]
    heapq.heapify(free)
    order = []
    while free:
        e = heapq.heappop(free)
        order.append(e)
        for s in succ[e]:
            indegree[s] -= 1
            if indegree[s] == 0:
                heapq.heappush(free, s)
    cycle = len(order) < n
    placed = set(order)
    order += [e for e in range(n) if e not in placed]
    rank = np.empty(n, np.int64)
    rank[np.asarray(order, np.int64)] = np.arange(n)
    return tuple(int(r) for r in rank), cycle
