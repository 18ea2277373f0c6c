"""Seed 000's K-loop under every (first, middle, last, store) phase choice: one jitted vmap, 81 verdicts.

The expected table is derived by hand from the rules in semantics.md §3 and §8 (the store on FIX runs as
soon as its unit-flag wait holds, not after the matmuls in program order) and the framework's auto-sync (a
phase-less store after a phase-less last matmul waits for every matmul); docs/sanitizer.md shows it, and the
last test keeps that page in step with the emulator.
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
    """The verdict of semantics §3 and §8 by hand: M runs the matmuls in order, FIX runs the store as soon as
    its wait holds (decoupled issue), the unit flag orders a phase on both sides only."""
    return hand_run(first, middle, last, store)[0]


def hand_run(first, middle, last, store) -> tuple[str, int | None]:
    """``(verdict, matmuls done when the store read L0C)`` by hand (None: the store never read)."""
    phases = [first] + [middle] * (STEPS - 2) + [last]
    auto = store == NONE and phases[-1] == NONE  # the framework's M -> FIX sync: after every matmul before it
    flag, i, read_at, consumed = 0, 0, None, None  # read_at: matmuls done when the store read; consumed: by whom
    while True:
        if read_at is None and (store == NONE and (not auto or i == STEPS) or store != NONE and flag == 1):
            read_at = i  # the store reads L0C now
            consumed = max((j for j in range(i) if phases[j] == FINAL), default=None) if store else None
            flag = 0 if store == FINAL else flag
        elif i < STEPS and (phases[i] == NONE or flag == 0):
            flag = 1 if phases[i] == FINAL else flag  # a Partial keeps the flag, no phase leaves it alone
            i += 1
        else:
            break
    if i < STEPS or read_at is None:
        return "deadlock", read_at  # a matmul waits for 0 or the store for 1, and nothing will flip the flag
    if not auto:
        before = consumed if consumed is not None else -1  # ordered before the read: up to the flag's setter
        after = next((j for j in range(read_at, STEPS) if phases[j] != NONE and store == FINAL), STEPS)
        if any(before < j < after for j in range(STEPS)):
            return "race", read_at  # a matmul writes L0C unordered with the store's read
    return ("leftover" if flag else "ok"), read_at


def hand_reads(first, middle, last, store) -> str:
    """What the store read, where the run is ordered (ok, leftover): every matmul's sum, or a partial one."""
    verdict, read_at = hand_run(first, middle, last, store)
    if verdict not in ("ok", "leftover"):
        return "-"
    return f"all {STEPS} matmuls" if read_at == STEPS else f"{read_at} of {STEPS} matmuls (partial)"


def test_81_phase_combinations_in_one_vmap():
    case = phase_case(PARTIAL, PARTIAL, FINAL, FINAL)
    grid = np.array(COMBOS, np.int32)

    @jax.jit
    def verdicts(first, middle, last, store):
        def one(f, m, last, s):
            params = {"first": f, "middle": m, "last": last, "store": s}
            r = aj.run(case.kernel, case.inputs, case.outputs, params=params)
            return r.verdict, r.control.reordered[0]

        return jax.vmap(one)(first, middle, last, store)

    codes, reordered = verdicts(*grid.T)
    got = [aj.Verdict(int(v)).label for v in codes]
    want = [hand_verdict(*c) for c in COMBOS]
    mismatches = [(c, g, w) for c, g, w in zip(COMBOS, got, want) if g != w]
    assert not mismatches, mismatches
    # an ordered run whose store read before the last matmul: the store ran before matmuls it follows in the kernel
    partial = [hand_reads(*c).endswith("(partial)") for c in COMBOS]
    ordered = [w in ("ok", "leftover") for w in want]
    ran_first = [bool(r >= 0) for r in np.asarray(reordered)]
    assert [p for p, o in zip(partial, ordered) if o] == [r for r, o in zip(ran_first, ordered) if o]
    assert sum(p and w == "ok" for p, w in zip(partial, want)) >= 2  # ok verdicts whose outputs are a partial sum
    assert want.count("ok") >= 5 and {"race", "deadlock", "leftover"} <= set(want)
    assert hand_verdict(PARTIAL, PARTIAL, FINAL, NONE) == "race"  # seed 000 error 2


def docs_table() -> str:
    rows = ["| first | middle | last | store | verdict | the store reads |", "|---|---|---|---|---|---|"]
    for c in COMBOS:
        rows.append("| " + " | ".join(NAMES[p] for p in c) + f" | {hand_verdict(*c)} | {hand_reads(*c)} |")
    return "\n".join(rows)


def test_docs_page_shows_the_table():
    text = DOCS.read_text()
    table = re.search(r"<!-- phase-table -->\n(.*?)\n<!-- /phase-table -->", text, re.S)
    assert table, "docs/sanitizer.md lost its phase table markers"
    assert table.group(1).strip() == docs_table(), (
        "regenerate with: PYTHONPATH=kernels python tests/test_phase_table.py"
    )


if __name__ == "__main__":
    print(docs_table())
