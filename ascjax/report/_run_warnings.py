"""The warnings of a run: what is legal but likely wrong or slow, beside the findings (which are errors).

- a cross-core set on a pipe other than that of the data op before it on its core: it may signal
  before that op's data is out (seed 002);
- a cross-core wait on a pipe other than that of the data op after it: on 950 that op is not held;
- the front end's notes of the instructions that ran (a unit-flag read whose order the mmad direction
  does not match, ``ascjax.front._recorder.DIRECTION_NOTE``);
- outputs that are not the device's: sync made a later instruction of a core run before an earlier one
  whose bytes it shares, and the data plane could not compute them in that order
  (``ControlResult.reordered``; ``reordered_warning``).

Reads the record's template and operands and a ``ControlResult`` only (the report layer); each warning
names the instruction's kernel line, once per line.
"""

from __future__ import annotations

import numpy as np

from ..core import Pipe
from ..engine import ControlResult, Record, Sync, UnitFlagRole
from ._finding_words import where

SET_PIPE = (
    "a cross-core set runs on a pipe other than the one of the data op before it ({data} on {pipe}); it may "
    "signal before that op's data is out (seed 002: set on FIX after a move out of L0C, on MTE3 after a store or "
    "insert, on V after vector compute)."
)
WAIT_PIPE = (
    "a cross-core wait holds a pipe other than the one of the data op after it ({data} on {pipe}); on 950 that "
    "op is not held (seed 002: wait on MTE2 before a GM load, on V before computing on UB a move filled, on MTE1 "
    "before moving L1 -> L0)."
)


REORDERED = (
    "the outputs are not the device's: {first} ran before {earlier} on the device (sync held {held} until "
    "{ran} was done, and they share bytes), and ascjax's data plane could not compute them in that order (it "
    "follows the device's order within straight code and within one pass of a loop body, not across a k.cond, "
    "a loop or two iterations, nor in a launch, a sweep or under vmap). Issue {ran} before {held} in the kernel, "
    "the order they run in, for outputs that are the device's."
)


EARLY_READ = (
    "the outputs are not the device's: {first} ran before {earlier} on the device, because its unit-flag wait took "
    "the flag {setter} set (ENABLE_UPDATE, AccPhase.Final): it read L0C after that {name} and the ones before it only, "
    "a partial sum, where ascjax's data plane computes the kernel's order. Only the last {name} of an accumulation "
    "may set the flag (rule 'Final closing'): give the earlier ones ENABLE_KEEP (AccPhase.Partial)."
)


def reordered_warning(record: Record, result: ControlResult) -> str | None:
    """The warning of a run whose data plane order is not the device's (one scenario), or None. Where a read of L0C
    ran early because an mmad before the end of its accumulation set the unit flag (the mmad held back accumulates
    onto what the read took), the warning says that instead: the kernel's phases are the mistake, not the order it
    issues in."""
    first, earlier = (int(x) for x in np.asarray(result.reordered))
    if first < 0:
        return None
    t = record.template
    site = lambda inst: t.entries[int(t.entry[inst])][1]  # noqa: E731
    source = np.asarray(result.source)
    setter = int(source[first]) if first < source.size else -1
    accumulates = np.asarray(record.operands["accumulate"]).reshape(-1)
    if (
        t.uf_role[first] == UnitFlagRole.READER
        and t.uf_role[earlier] == UnitFlagRole.WRITER
        and setter >= 0
        and t.uf_role[setter] == UnitFlagRole.WRITER
        and t.pidx[setter] < t.pidx[earlier]
        and accumulates[earlier]  # the mmad that ran late adds onto what the read took
    ):
        return EARLY_READ.format(first=where(t, first), earlier=where(t, earlier), setter=where(t, setter),
                                 name=_name(t, setter))  # fmt: skip
    return REORDERED.format(first=site(first), earlier=site(earlier), held=_name(t, earlier), ran=_name(t, first))


def run_warnings(record: Record, result: ControlResult) -> list[str]:
    """The warnings of one scenario: outputs not the device's first, then in program order of the instruction
    each names."""
    t = record.template
    ran = (np.asarray(result.start) >= 0) & np.asarray(record.operands["enable"]).reshape(-1).astype(bool)
    uf_mode = np.asarray(record.operands["uf_mode"]).reshape(-1)
    data = ran & (t.sync == Sync.NONE) & (t.read_valid.any(axis=1) | t.write_valid.any(axis=1))
    found: dict = {}  # site -> text, first per site

    def note(inst, text):
        site = t.entries[int(t.entry[inst])][1]
        found.setdefault(site, f"{site}: {text}")

    noted = np.asarray([n is not None for n in t.notes], bool)[t.entry] & (uf_mode != 0)
    for core in np.unique(t.core):
        order = np.flatnonzero((t.core == core) & ran)
        order = order[np.argsort(t.pidx[order], kind="stable")]
        data_at = np.flatnonzero(data[order])  # positions in ``order`` of the data ops
        for k in np.flatnonzero(np.isin(t.sync[order], (Sync.CROSS_SET, Sync.CROSS_WAIT)) | noted[order]):
            inst = order[k]
            if t.sync[inst] == Sync.CROSS_SET:
                j = np.searchsorted(data_at, k) - 1
                other, text = (order[data_at[j]] if j >= 0 else None), SET_PIPE
            elif t.sync[inst] == Sync.CROSS_WAIT:
                j = np.searchsorted(data_at, k, side="right")
                other, text = (order[data_at[j]] if j < data_at.size else None), WAIT_PIPE
            else:
                note(inst, t.notes[int(t.entry[inst])])
                continue
            if other is not None and _pipe(t, other) != _pipe(t, inst):
                note(inst, text.format(data=_name(t, other), pipe=_pipe(t, other)))
    reordered = reordered_warning(record, result)
    return [reordered] * (reordered is not None) + list(found.values())


def _pipe(t, inst) -> Pipe:
    return Pipe(t.entries[int(t.entry[inst])][3])


def _name(t, inst) -> str:
    return t.entries[int(t.entry[inst])][0]
