"""Candidate findings into the run's log: the first of each (kind, site), most severe first.

Every check hands in rows ``(valid, kind, inst, other, a, b, step)``. A site is a template
entry (one line of the kernel, every loop iteration of it), so a K-loop's 64 iterations of one
mistake are one finding, reported at its first event. Which rows can belong to which (kind,
site) is static for every check but the end state's, so the tables hold each segment's rows
and the log takes a minimum per segment: gathers, no scatter. The leftovers (whose setter
is known only at the end) are deduplicated among themselves, one per site and resource left
set. The log holds the distinct findings in order of severity, then of the site's place in
the program (leftovers: in the order of the resources left set); past ``max_findings`` the
rest are counted in ``dropped``.
"""

from __future__ import annotations

import jax.numpy as jnp

from ._checks import BIG
from ._tables import ROW_GROUPS, Static

#: Fields of one finding row: kind, template entry (the site), instance, other instance, detail a, detail b.
KIND, ENTRY, INST, OTHER, DETAIL_A, DETAIL_B = range(6)
FINDING_FIELDS = 6
_FIELDS = ("kind", "inst", "other", "a", "b")


def _first_per_segment(rows: dict, members):
    """Per segment (a row of ``members``), its earliest valid row (index; the sentinel past the end: none)."""
    step = jnp.concatenate([jnp.where(rows["valid"], rows["step"], BIG), jnp.full((1,), BIG, jnp.int32)])
    at = jnp.argmin(step[members], axis=1)
    first = jnp.take_along_axis(members, at[:, None], axis=1)[:, 0]
    return first, step[first] < BIG


def _first_per_site(st: Static, rows: dict):
    """The end state's rows: each valid row that no earlier valid row of its kind, site and resource (what is left
    set and which one: a flag, a cross-core event, a unit flag's blocks) precedes. A line that leaves two events set
    (a ping-pong's RELEASE for each slot) is a finding for each."""
    k = rows["valid"].shape[0]
    entry = st.entry[jnp.clip(rows["inst"], 0, st.n_instances - 1)]
    same = entry[:, None] == entry[None, :]
    for field in ("kind", "a", "b"):
        same &= rows[field][:, None] == rows[field][None, :]
    earlier = jnp.tril(jnp.ones((k, k), bool), -1)
    dup = jnp.any(earlier & same & rows["valid"][None, :], axis=1)
    return rows["valid"] & ~dup


def ranked(st: Static, static_rows: dict, end_rows: dict, max_findings: int):
    """``(findings [K, 6], n_findings, dropped)`` from the checks' rows (by group) and the end state's rows.

    ``end_rows`` holds the deadlock first, then the leftovers."""
    rows = {f: jnp.concatenate([static_rows[g][f] for g in ROW_GROUPS]) for f in ("valid", "step", *_FIELDS)}
    major, major_ok = _first_per_segment(rows, st.seg_major)
    minor, minor_ok = _first_per_segment(rows, st.seg_minor)
    end_ok = _first_per_site(st, end_rows)
    pick = lambda r, i: {f: jnp.concatenate([r[f], jnp.full((1,), -1, jnp.int32)])[i] for f in _FIELDS}
    ordered = [
        ({f: end_rows[f][:1] for f in _FIELDS}, end_ok[:1]),  # the deadlock
        (pick(rows, major), major_ok),
        ({f: end_rows[f][1:] for f in _FIELDS}, end_ok[1:]),  # the leftovers
        (pick(rows, minor), minor_ok),
    ]
    cand = {f: jnp.concatenate([r[f] for r, _ in ordered]) for f in _FIELDS}
    present = jnp.concatenate([ok for _, ok in ordered])
    # the k-th kept row is the candidate where the running count of present ones reaches k + 1
    count = jnp.cumsum(present)
    nth = jnp.sum(count[None, :] < jnp.arange(1, max_findings + 1)[:, None], axis=1)
    total = count[-1]
    filled = jnp.arange(max_findings) < total
    at = jnp.clip(nth, 0, present.shape[0] - 1)
    entry = st.entry[jnp.clip(cand["inst"][at], 0, st.n_instances - 1)]
    table = jnp.stack([cand["kind"][at], entry, cand["inst"][at], cand["other"][at], cand["a"][at], cand["b"][at]], 1)
    findings = jnp.where(filled[:, None], table, -1)
    n_findings = jnp.minimum(total, max_findings).astype(jnp.int32)
    return findings, n_findings, (total - n_findings).astype(jnp.int32)
