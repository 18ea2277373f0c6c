"""How far a race reaches: the output elements racy reads can corrupt, known without running the data plane.

``poison_races`` makes every instance the control plane flags as reading racy bytes (RAW) write
NaN. This follows those writes through the record in the order the run touched the bytes (a read
at its instance's start, a write at its completion): an instance that reads a tainted byte taints
everything it writes, and one that reads none clears what it writes. What is tainted in a GM
tensor at the end bounds the elements ``poison_races`` turns NaN from above (an op that maps
elements one to one spreads the NaN less than over its whole write). Reads the record and a
``ControlResult`` only (the report layer).
"""

from __future__ import annotations

import numpy as np

from ..engine import GM_SPACE_PREFIX, ControlResult, Record


def poisoned_bytes(record: Record, result: ControlResult) -> dict[int, int]:
    """``{space index: bytes}`` the racy reads of one scenario can reach at the end (empty when none is racy)."""
    t = record.template
    racy = np.asarray(result.racy).reshape(-1)
    if not racy.any():
        return {}
    op = {k: np.asarray(record.operands[k]) for k in ("enable", "rd_lo", "rd_hi", "rd_on", "rd_ok", "wr_lo", "wr_hi",
                                                       "wr_on", "wr_ok")}  # fmt: skip
    start, end = np.asarray(result.start), np.asarray(result.end)
    ran = (start >= 0) & op["enable"].reshape(-1).astype(bool)

    def runs(prefix, valid):
        shape = valid.shape
        on = valid & op[f"{prefix}_on"].reshape(shape) & op[f"{prefix}_ok"].reshape(shape)
        return op[f"{prefix}_lo"].reshape(shape), op[f"{prefix}_hi"].reshape(shape), on

    reads, writes = runs("rd", t.read_valid), runs("wr", t.write_valid)
    # (time, 0: write / 1: read, instance): a write completing at t is seen by a read starting at t
    events = [(int(end[i]), 0, int(i)) for i in np.flatnonzero(ran & (end >= 0))]
    events += [(int(start[i]), 1, int(i)) for i in np.flatnonzero(ran)]
    tainted, poisoned = np.zeros(t.n_atoms, bool), np.zeros(t.n_instances, bool)
    for _, write, inst in sorted(events):
        lo, hi, on = writes if write == 0 else reads
        atoms = [(int(lo[inst, r]), int(hi[inst, r])) for r in np.flatnonzero(on[inst])]
        if write == 0:
            for a, b in atoms:
                tainted[a:b] = poisoned[inst]
        else:
            poisoned[inst] = racy[inst] or any(tainted[a:b].any() for a, b in atoms)
    size = t.atom_bytes[:, 1] - t.atom_bytes[:, 0]
    out: dict[int, int] = {}
    for atom in np.flatnonzero(tainted):
        out[int(t.atom_space[atom])] = out.get(int(t.atom_space[atom]), 0) + int(size[atom])
    return out


def poison_words(record: Record, result: ControlResult, outputs: dict, poisoned: bool = False) -> str:
    """``the race can poison up to N of the M elements of output `out` ...``; empty when no racy read reaches an
    output. ``outputs``: ``{name: (elements, bytes per element)}`` of the GM outputs; ``poisoned``: the run poisoned
    its racy reads already (the words then say where to see them, not how to)."""
    reached = poisoned_bytes(record, result)
    if not reached:
        return ""
    spaces = record.template.spaces
    parts = []
    for name, (elements, itemsize) in outputs.items():
        index = next((i for i, s in enumerate(spaces) if s.name in (name, GM_SPACE_PREFIX + name)), None)
        if index is not None and reached.get(index):
            parts.append(f"up to {min(reached[index] // max(itemsize, 1), elements):,} of the {elements:,} elements of "
                         f"output `{name}`")  # fmt: skip
    if not parts:
        return "the racy reads reach no output element (their data dies on chip)"
    if poisoned:
        return f"the racy reads can poison {', '.join(parts)}: this run poisoned them, so they are NaN in the outputs"
    return (
        f"the racy reads can poison {', '.join(parts)}: run with --poison-races "
        "(Options(poison_races=True)) to see them as NaN"
    )
