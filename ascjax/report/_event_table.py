"""The cross-core event table of a run: seed 002's checklist done for the user.

Per event id and core: the TileGroup slots the event hands over (READY or RELEASE), how many sets
and waits ran, on which pipes and under which sync modes, whether the count is n (one per use)
or n+1 (a pre-posted set, a final wait outside the loop), and how many signals the core still
holds at the end. Reads the record's template, its operands and a ``ControlResult`` only (the
report layer); empty when the kernel ran no cross-core event.
"""

from __future__ import annotations

import numpy as np

from ..core import CORE_NAMES, Pipe, SyncMode
from ..engine import ControlResult, Record, Sync
from ._slot_mapping import Handshakes

HEADER = ("event", "slots", "core", "sets", "waits", "set pipes", "wait pipes", "modes", "count", "signals left")


def _names(values, order) -> str:
    return "/".join(str(v) for v in order if v in values) or "-"


def event_rows(record: Record, result: ControlResult, handshakes: Handshakes | None = None) -> dict:
    """``{(event id, core): {"slots", "sets", "waits", "set pipes", "wait pipes", "modes", "outside", "left"}}`` of
    one scenario (``outside``: its sets and waits that ran outside every loop)."""
    t = record.template
    hs = handshakes or Handshakes(record, result)
    mode = np.asarray(record.operands["mode"]).reshape(-1)
    rows: dict = {}
    roles: dict = {}  # event id -> {group: {role: count}, ...} and the slots of each group

    def row(ev, core):
        return rows.setdefault((int(ev), int(core)), {
            "sets": 0, "waits": 0, "set pipes": set(), "wait pipes": set(), "modes": set(), "outside": 0, "left": 0
        })  # fmt: skip

    for inst in np.flatnonzero(np.isin(t.sync, (Sync.CROSS_SET, Sync.CROSS_WAIT)) & hs.ran):
        r = row(hs.event_id[inst], t.core[inst])
        pipe = Pipe(t.entries[int(t.entry[inst])][3])
        side = "set" if t.sync[inst] == Sync.CROSS_SET else "wait"
        r[f"{side}s"] += 1
        r[f"{side} pipes"].add(pipe)
        r["modes"].add(SyncMode(int(mode[inst])))
        r["outside"] += not t.loops[int(t.entry[inst])]
        if side == "set":
            for g, (role, slots) in hs.roles(int(inst)).items():
                votes, seen = roles.setdefault(int(hs.event_id[inst]), {}).setdefault(g, ({}, set()))
                votes[role] = votes.get(role, 0) + 1
                seen.update(slots)
    count = np.asarray(result.machine.count)
    for c, (receiver, _sender) in enumerate(t.channel_keys):
        for e, ev in enumerate(t.cross_ids):
            if count[c, e] > 0:
                row(ev, receiver)["left"] += int(count[c, e])
    for (ev, _), r in rows.items():
        r["slots"] = _slots_text(hs.groups, roles.get(ev, {}))
    return rows


def _slots_text(groups: list[str], by_group: dict) -> str:
    """``READY s[0]``, ``READY p_t[0] / RELEASE s[0]``: the most frequent role of each TileGroup, its slots."""
    by_role: dict = {}
    for g, (votes, slots) in sorted(by_group.items()):
        role = max(sorted(votes), key=votes.get)
        by_role.setdefault(role, []).extend(f"{groups[g]}[{s}]" for s in sorted(slots))
    return " / ".join(f"{role} {' '.join(names)}" for role, names in sorted(by_role.items(), key=_ready_first)) or "-"


def _ready_first(item) -> bool:
    return item[0] != "READY"


def count_label(r: dict) -> str:
    """``n`` where every set and wait of the row ran in a loop (one per use); ``n+1`` where one more ran outside
    it (a pre-posted RELEASE, the final wait); ``once`` for a single one outside every loop."""
    total = r["sets"] + r["waits"]
    if not r["outside"]:
        return "n" if total else "-"
    if r["outside"] == total:
        return "once" if total == 1 else str(total)
    return f"n+{r['outside']}"


def event_table(record: Record, result: ControlResult, handshakes: Handshakes | None = None) -> str:
    """The table as text (``cross-core events:`` and one line per event id and core); empty without events."""
    rows = event_rows(record, result, handshakes)
    if not rows:
        return ""
    lines = [HEADER]
    for (ev, core), r in sorted(rows.items()):
        lines.append((
            str(ev), r["slots"], CORE_NAMES[core], str(r["sets"]), str(r["waits"]), _names(r["set pipes"], Pipe),
            _names(r["wait pipes"], Pipe), _names({m.name for m in r["modes"]}, [m.name for m in SyncMode]),
            count_label(r), str(r["left"]) + (" (to be consumed here)" if r["left"] else ""),
        ))  # fmt: skip
    widths = [max(len(line[i]) for line in lines) for i in range(len(HEADER))]
    text = ["  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in lines]
    return "cross-core events:\n  " + "\n  ".join(text)
