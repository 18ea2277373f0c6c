"""The quadratic definitions the engine's linear searches are checked against: every pair of accesses at once.

The engine never lists every pair of overlapping accesses (their number grows with the square of a loop's trip
count); it walks windows of queue order instead. These definitions list them all, for the tests' small records.
"""

from __future__ import annotations

import numpy as np

from ascjax.engine._order import EmitOrder, accesses_of_run, ranked


def every_pair(acc: dict) -> np.ndarray:
    """[P, 2] (write access, other access): every pair of accesses on two queues, at least one a write, whose
    footprints overlap, by write, then other access; a write-write pair once (the smaller write first)."""
    lo, hi, queue, write = acc["lo"], acc["hi"], acc["queue"], acc["write"]
    w = np.flatnonzero(write)
    hit = (lo[w][:, None] < hi[None, :]) & (lo[None, :] < hi[w][:, None]) & (queue[w][:, None] != queue[None, :])
    hit &= ~write[None, :] | (w[:, None] < np.arange(lo.size)[None, :])
    a, b = np.nonzero(hit)
    return np.stack([w[a], b], axis=1).astype(np.int32).reshape(-1, 2)


def emit_order_by_every_pair(record, result) -> EmitOrder | None:
    """``engine.emit_order`` over every pair at once: the live pairs of one core ordered in time give the edges
    (those of one pass, two entries) and the first that ran against program order across two passes is
    ``unfixable``, in the pairs' order (those whose write ran first, then those whose other access did)."""
    reordered = tuple(int(x) for x in np.asarray(result.reordered))
    if reordered[0] < 0:
        return None
    acc, lo, hi, on = accesses_of_run(record, result)
    t, start, end = record.template, np.asarray(result.start), np.asarray(result.leave)
    pairs = every_pair(acc)
    a, b = acc["inst"][pairs[:, 0]], acc["inst"][pairs[:, 1]]
    live = on[pairs[:, 0]] & on[pairs[:, 1]] & (t.core[a] == t.core[b])
    live &= np.maximum(lo[pairs[:, 0]], lo[pairs[:, 1]]) < np.minimum(hi[pairs[:, 0]], hi[pairs[:, 1]])
    live &= (end[a] >= 0) & (end[b] >= 0)
    a_first, b_first = live & (end[a] <= start[b]), live & (end[b] <= start[a])
    first = np.concatenate([a[a_first], b[b_first]])
    second = np.concatenate([b[a_first], a[b_first]])
    entry = t.entry
    one_pass = np.asarray([t.loops[entry[f]] == t.loops[entry[s]] for f, s in zip(first, second)], bool)
    one_pass &= np.all(t.iteration[first] == t.iteration[second], axis=1) & (entry[first] != entry[second])
    across = np.flatnonzero((t.pidx[first] > t.pidx[second]) & ~one_pass)
    unfixable = (int(first[across[0]]), int(second[across[0]])) if across.size else None
    return ranked(t, acc, first[one_pass], second[one_pass], unfixable, reordered)
