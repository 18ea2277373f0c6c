"""Seed 002's six checks of a cross-core design, done on one run: what ``explain`` prints.

Seed 002 ends its design guide with six checks every Cube <-> Vector handshake must pass
[semantics §5]: slot mapping, event positions, pairing, execution counts, boundary paths and
participants. ``six_checks`` answers each from the run's findings and its record; the table
per event id and slot shows the sets and waits executed, their pipes, sync modes and counts (n,
or n + 1 with a pre-posted RELEASE) and what is left at the end. Reads the record, the
``ControlResult`` and the findings in words only (the report layer).
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from ..core import AIV0, AIV1, CORE_NAMES, Finding
from ..engine import ControlResult, Record, Sync
from ._event_table import event_rows, event_table
from ._finding_words import FindingText, where
from ._slot_mapping import Handshakes

#: seed 002's checks, in its order
CHECK_NAMES = ("slot mapping", "event positions", "pairing", "execution counts", "boundary paths", "participants")
#: the findings that fail check 3 (a wait that cannot be paired) and check 4 (a signal left or lost)
_PAIRING = (Finding.DEADLOCK, Finding.SYNC_ERROR, Finding.UNORDERED_SET)
_COUNTS = (Finding.LEFTOVER, Finding.OVERFLOW, Finding.MERGED_SIGNAL)
_CORE_OF_SITE = re.compile(r"\((" + "|".join(CORE_NAMES) + r")\.")


@dataclasses.dataclass(frozen=True)
class Check:
    """One of the six checks: ``ok`` True / False, or None where it does not apply; ``detail`` says why."""

    number: int
    name: str
    ok: bool | None
    detail: str

    @property
    def mark(self) -> str:
        return {True: "ok", False: "FAIL", None: "n/a"}[self.ok]


def _first_line(f: FindingText) -> str:
    """The finding's first line without its fix (the findings themselves say it)."""
    return f.message.splitlines()[0].partition(" Fix: ")[0]


def _more(items: list, what: str) -> str:
    return f" (+{len(items) - 1} more {what})" if len(items) > 1 else ""


class Explained:
    """The six checks and the event table of one scenario."""

    def __init__(self, record: Record, result: ControlResult, findings: tuple[FindingText, ...]):
        self.record, self.result, self.findings = record, result, tuple(findings)
        self.t = record.template
        self.hs = Handshakes(record, result)
        self.rows = event_rows(record, result, self.hs)

    # --- the six checks -------------------------------------------------------------------
    def checks(self) -> tuple[Check, ...]:
        if not np.isin(self.t.sync, (Sync.CROSS_SET, Sync.CROSS_WAIT)).any():
            return tuple(Check(i + 1, n, None, "the kernel has no cross-core event") for i, n in enumerate(CHECK_NAMES))
        return (self.slot_mapping(), self.event_positions(), self.pairing(), self.counts(), self.boundary(),
                self.participants())  # fmt: skip

    def slot_mapping(self) -> Check:
        found = self.hs.mismatches()
        if not self.hs.groups:
            return Check(1, CHECK_NAMES[0], None, "no TileGroup slot is handed between cores")
        if not found:
            groups = ", ".join(f"`{g}`" for g in self.hs.groups)
            return Check(
                1, CHECK_NAMES[0], True, f"every access after a wait picks the slot its set was for ({groups})"
            )
        m = found[0]
        role = "READY" if m.ready else "RELEASE"
        theirs = "/".join(str(s) for s in m.set_slots)
        detail = (
            f"{'READY' if m.ready else 'RELEASE'} of slot {theirs} waited on for slot {m.slot}: "
            f"{where(self.t, m.access)} {'reads' if m.ready else 'overwrites'} `{m.group}[{m.slot}]` after waiting on "
            f"event {m.event_id}, the {role} of `{m.group}[{theirs}]`; fix the slot expression of one side"
            + _more(found, "accesses")
        )
        return Check(1, CHECK_NAMES[0], False, detail)

    def _kinds(self, kinds) -> list[FindingText]:
        return [f for f in self.findings if f.kind in kinds]

    def event_positions(self) -> Check:
        races = [f for f in self._kinds((Finding.RACE,)) if f.other and _core(f.site) != _core(f.other)]
        uninit = [f for f in self._kinds((Finding.UNINITIALIZED,))]
        bad = races + uninit
        if not bad:
            return Check(2, CHECK_NAMES[1], True,
                         "every READY is set after the last write and waited before the first read, every RELEASE "
                         "after the last read and before the next overwrite")  # fmt: skip
        return Check(2, CHECK_NAMES[1], False, _first_line(bad[0]) + _more(bad, "findings"))

    def pairing(self) -> Check:
        bad = self._kinds(_PAIRING)
        if not bad:
            return Check(3, CHECK_NAMES[2], True, "every wait took a set of its event id and sync mode; no wait cycle")
        return Check(3, CHECK_NAMES[2], False, _first_line(bad[0]) + _more(bad, "findings"))

    def counts(self) -> Check:
        bad = self._kinds(_COUNTS)
        if not bad:
            pre = sorted({ev for (ev, _), r in self.rows.items() if r["outside"] and r["sets"] and r["waits"] == 0})
            pre = [ev for ev in pre if any(k[0] == ev and r["sets"] > r["outside"] for k, r in self.rows.items())]
            extra = f"; events {', '.join(map(str, pre))} are pre-posted: n+1 sets and waits" if pre else ""
            return Check(4, CHECK_NAMES[3], True, f"sets and waits balance on every event id and slot{extra}")
        return Check(4, CHECK_NAMES[3], False, _first_line(bad[0]) + _more(bad, "findings"))

    def boundary(self) -> Check:
        bad = self._kinds((Finding.DEADLOCK, Finding.LEFTOVER, Finding.BOUNDS))
        sweep = ("this run's trip counts only: sweep the trip count over zero, one, an exact and a tail count "
                 "(python -m ascjax sweep FILE::CASE --grid PARAM=0,1,2,3) for the other paths")  # fmt: skip
        if not bad:
            return Check(5, CHECK_NAMES[4], True, f"every wait got its signal and none is left; {sweep}")
        kinds = " and ".join(sorted({f.kind.label for f in bad}))
        return Check(5, CHECK_NAMES[4], False, f"this run ends with {kinds} (checks 3 and 4); {sweep}")

    def participants(self) -> Check:
        by_event: dict = {}
        for (ev, core), r in self.rows.items():
            e = by_event.setdefault(ev, {"modes": set(), "aivs": set()})
            e["modes"] |= {m.name for m in r["modes"]}
            if core in (AIV0, AIV1) and (r["sets"] or r["waits"]):
                e["aivs"].add(core)
        alone = [ev for ev, e in by_event.items() if "INTRA_BLOCK" in e["modes"] and len(e["aivs"]) == 1]
        if alone:
            ev = alone[0]
            aiv = CORE_NAMES[next(iter(by_event[ev]["aivs"]))]
            return Check(6, CHECK_NAMES[5], False,
                         f"INTRA_BLOCK event {ev} ran on {aiv} only: the cube's wait needs both AIV sub-cores, its "
                         "set reaches both; use UNICAST_BLOCK for one AIV" + _more(alone, "events"))  # fmt: skip
        lone = [ev for ev, e in by_event.items() if not e["aivs"]]
        if lone:
            return Check(6, CHECK_NAMES[5], False,
                         f"event {lone[0]} ran on the AIC only: no AIV sets or waits it, so its signal reaches no "
                         "one; the AIV side of the handshake never ran" + _more(lone, "events"))  # fmt: skip
        modes = sorted(set().union(*(e["modes"] for e in by_event.values())))
        who = sorted({CORE_NAMES[a] for e in by_event.values() for a in e["aivs"]})
        return Check(6, CHECK_NAMES[5], True, f"{'/'.join(modes)}: {' and '.join(who)} on every event")

    def __str__(self) -> str:
        checks = self.checks()
        width = max(len(c.name) for c in checks)
        lines = ["seed 002's six checks of the cross-core design:"]
        lines += [f"  {c.number}  {c.name.ljust(width)}  {c.mark.ljust(4)}  {c.detail}" for c in checks]
        table = event_table(self.record, self.result, self.hs)
        if table:
            lines += [table, "  (count: n, one per use of the slot; n+1, one more outside the loop: a pre-posted "
                             "RELEASE, the final wait)"]  # fmt: skip
        return "\n".join(lines)


def _core(site: str) -> str:
    """The core a finding's ``where`` names: ``mul at f.py:9 (AIV0.V) in loop iteration (1)`` -> ``AIV0``."""
    m = _CORE_OF_SITE.search(site)
    return m[1] if m else ""


def explain(record: Record, result: ControlResult, findings) -> Explained:
    """The six checks and the event table of one scenario (``str()`` of it is what ``explain`` prints)."""
    return Explained(record, result, findings)
