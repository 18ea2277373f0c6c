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
from ._tables import _accesses, _pairs


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
    program order computes what the device does (``result.reordered`` found no pair)."""
    reordered = tuple(int(x) for x in np.asarray(result.reordered))
    if reordered[0] < 0:
        return None
    t = record.template
    op = {name: np.asarray(x) for name, x in record.operands.items()}
    start, end = np.asarray(result.start), np.asarray(result.leave)  # a request is done with its source as it leaves
    acc = _accesses(t, t.n_instances)
    lo, hi = (np.empty(acc["inst"].size, np.int64) for _ in range(2))
    on = np.empty(acc["inst"].size, bool)
    for write, prefix in ((False, "rd"), (True, "wr")):
        k = acc["write"] == write
        inst, slot = acc["inst"][k], acc["slot"][k]
        lo[k], hi[k] = op[f"{prefix}_lo"][inst, slot], op[f"{prefix}_hi"][inst, slot]
        on[k] = op[f"{prefix}_on"][inst, slot] & op[f"{prefix}_ok"][inst, slot] & (start[inst] >= 0)
    pairs = _pairs(t, acc)
    a, b = acc["inst"][pairs[:, 0]], acc["inst"][pairs[:, 1]]
    live = on[pairs[:, 0]] & on[pairs[:, 1]] & (t.core[a] == t.core[b])
    live &= np.maximum(lo[pairs[:, 0]], lo[pairs[:, 1]]) < np.minimum(hi[pairs[:, 0]], hi[pairs[:, 1]])
    live &= (end[a] >= 0) & (end[b] >= 0)  # both completed (a deadlock leaves some undone)
    a_first, b_first = live & (end[a] <= start[b]), live & (end[b] <= start[a])  # neither: unordered (a race)
    first = np.concatenate([a[a_first], b[b_first]])
    second = np.concatenate([b[a_first], a[b_first]])

    entry = t.entry
    one_pass = np.asarray([t.loops[entry[f]] == t.loops[entry[s]] for f, s in zip(first, second)], bool)
    one_pass &= np.all(t.iteration[first] == t.iteration[second], axis=1) & (entry[first] != entry[second])
    against = t.pidx[first] > t.pidx[second]
    unfixable = None
    across = np.flatnonzero(against & ~one_pass)  # ran against program order across two iterations
    if across.size:
        unfixable = (int(first[across[0]]), int(second[across[0]]))

    n_entries = len(t.entries)
    edges: dict = {}
    for f, s in zip(first[one_pass], second[one_pass]):
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
