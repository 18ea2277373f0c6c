"""Seed 000's K-loop under every (first, middle, last, store) phase choice: one jitted vmap, 81 verdicts.

The expected table is derived by hand from the rules in semantics.md §3 and the framework's
auto-sync (a phase-less store is ordered after the last phase-less matmul only); docs/sanitizer.md
shows it, and the last test keeps that page in step with the emulator.
"""

import itertools
import pathlib
import re

import jax
import numpy as np
from phases import STEPS, phase_case

import ascjax as aj

NONE, PARTIAL, FINAL = 0, 2, 3
NAMES = {NONE: "none", PARTIAL: "Partial", FINAL: "Final"}
COMBOS = list(itertools.product((NONE, PARTIAL, FINAL), repeat=4))
DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs" / "sanitizer.md"


def hand_verdict(first, middle, last, store) -> str:
    flag, last_run, last_final, last_none = 0, -1, -1, -1
    for i in range(STEPS):
        phase = first if i == 0 else last if i == STEPS - 1 else middle
        if phase and flag == 1:
            return "deadlock"  # the matmul waits for 0; nothing before it in issue order clears the flag
        last_run = i
        if phase == FINAL:
            flag, last_final = 1, i
        if phase == NONE:
            last_none = i
    if store and flag == 0:
        return "deadlock"  # the store waits for 1 that no Final matmul set
    ordered_after = last_final if store else last_none  # unit flag edge, or the framework's M -> FIX sync
    if last_run > ordered_after:
        return "race"  # the store reads L0C before the last matmul is known to be done
    if store == FINAL:
        flag = 0
    return "leftover" if flag else "ok"


def test_81_phase_combinations_in_one_vmap():
    case = phase_case(PARTIAL, PARTIAL, FINAL, FINAL)
    grid = np.array(COMBOS, np.int32)

    @jax.jit
    def verdicts(first, middle, last, store):
        def one(f, m, last, s):
            params = {"first": f, "middle": m, "last": last, "store": s}
            return aj.run(case.kernel, case.inputs, case.outputs, params=params).verdict

        return jax.vmap(one)(first, middle, last, store)

    got = [aj.Verdict(int(v)).label for v in verdicts(*grid.T)]
    want = [hand_verdict(*c) for c in COMBOS]
    mismatches = [(c, g, w) for c, g, w in zip(COMBOS, got, want) if g != w]
    assert not mismatches, mismatches
    assert want.count("ok") >= 5 and {"race", "deadlock", "leftover"} <= set(want)
    assert hand_verdict(PARTIAL, PARTIAL, FINAL, NONE) == "race"  # seed 000 error 2


def docs_table() -> str:
    rows = ["| first | middle | last | store | verdict |", "|---|---|---|---|---|"]
    for c in COMBOS:
        rows.append("| " + " | ".join(NAMES[p] for p in c) + f" | {hand_verdict(*c)} |")
    return "\n".join(rows)


def test_docs_page_shows_the_table():
    text = DOCS.read_text()
    table = re.search(r"<!-- phase-table -->\n(.*?)\n<!-- /phase-table -->", text, re.S)
    assert table, "docs/sanitizer.md lost its phase table markers"
    assert table.group(1).strip() == docs_table(), "regenerate with: python tests/test_phase_table.py"


if __name__ == "__main__":
    print(docs_table())
