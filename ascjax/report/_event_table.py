"""The cross-core event table of a run: seed 002's checklist done for the user.

Per event id and core: how many sets and waits ran, on which pipes and under which sync modes, and
how many signals the core still holds at the end. Reads the record's template, its operands and a
``ControlResult`` only (the report layer); empty when the kernel ran no cross-core event.
"""

from __future__ import annotations

import numpy as np

from ..core import CORE_NAMES, Pipe, SyncMode
from ..engine import ControlResult, Record, Sync

HEADER = ("event", "core", "sets", "waits", "set pipes", "wait pipes", "modes", "signals left")


def _names(values, order) -> str:
    return "/".join(str(v) for v in order if v in values) or "-"


def event_rows(record: Record, result: ControlResult) -> dict:
    """``{(event id, core): {"sets", "waits", "set pipes", "wait pipes", "modes", "left"}}`` of one scenario."""
    t = record.template
    ran = (np.asarray(result.start) >= 0) & np.asarray(record.operands["enable"]).reshape(-1).astype(bool)
    event_id = np.asarray(record.operands["event_id"]).reshape(-1)
    mode = np.asarray(record.operands["mode"]).reshape(-1)
    rows: dict = {}

    def row(ev, core):
        return rows.setdefault(
            (int(ev), int(core)), {"sets": 0, "waits": 0, "set pipes": set(), "wait pipes": set(), "modes": set(), "left": 0}
        )  # fmt: skip

    for inst in np.flatnonzero(np.isin(t.sync, (Sync.CROSS_SET, Sync.CROSS_WAIT)) & ran):
        r = row(event_id[inst], t.core[inst])
        pipe = Pipe(t.entries[int(t.entry[inst])][3])
        side = "set" if t.sync[inst] == Sync.CROSS_SET else "wait"
        r[f"{side}s"] += 1
        r[f"{side} pipes"].add(pipe)
        r["modes"].add(SyncMode(int(mode[inst])))
    count = np.asarray(result.machine.count)
    for c, (receiver, _sender) in enumerate(t.channel_keys):
        for e, ev in enumerate(t.cross_ids):
            if count[c, e] > 0:
                row(ev, receiver)["left"] += int(count[c, e])
    return rows


def event_table(record: Record, result: ControlResult) -> str:
    """The table as text (``cross-core events:`` and one line per event id and core); empty without events."""
    rows = event_rows(record, result)
    if not rows:
        return ""
    lines = [HEADER]
    for (ev, core), r in sorted(rows.items()):
        lines.append((
            str(ev), CORE_NAMES[core], str(r["sets"]), str(r["waits"]), _names(r["set pipes"], Pipe),
            _names(r["wait pipes"], Pipe), _names({m.name for m in r["modes"]}, [m.name for m in SyncMode]),
            str(r["left"]) + (" (to be consumed here)" if r["left"] else ""),
        ))  # fmt: skip
    widths = [max(len(line[i]) for line in lines) for i in range(len(HEADER))]
    text = ["  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in lines]
    return "cross-core events:\n  " + "\n  ".join(text)
