"""Sweep throughput: 1,024 phase scenarios of the K-loop kernel as one vmap against a Python loop.

python benchmarks/bench_sweep.py [--scenarios 1024] [--json]

The kernel is seed 000's K-split matmul (``kernels/phases.py``: 64 x 64 x 512 f16, 8 K steps,
AccPhase on the first, middle and last ``matmul`` and STPhase on the ``store``, all traced),
with all checks and the timing model on. The scenarios cycle through the 81 phase
combinations. ``ascjax.sweep`` runs them as one jitted ``vmap`` and builds its table; the
Python loop calls the jitted single-scenario run once per scenario and reads what a table row
holds (verdict, offending op, cycles), as a user without ``vmap`` would. Both are timed after
their compilation, with all checks on and with the race checks off.
"""

import itertools
import pathlib
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from _timing import claim, main

import ascjax as aj

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "kernels"))
import phases  # noqa: E402

PHASES = (0, int(aj.AccPhase.Partial), int(aj.AccPhase.Final))
KEYS = ("first", "middle", "last", "store")


def phase_grid(n: int) -> dict:
    combos = np.array(list(itertools.product(PHASES, repeat=4)), np.int32)
    grid = np.resize(combos, (n, 4))
    return {key: grid[:, i] for i, key in enumerate(KEYS)}


def _compare(case, grid, n, options, repeats):
    """(sweep first, sweep best, loop first, loop best, table) for one set of checks."""

    def swept():
        return aj.sweep(case, grid, chunk_size=n, progress=False, options=options)

    start = time.perf_counter()
    table = swept()
    sweep_first = time.perf_counter() - start
    sweep_s = min(_seconds(swept) for _ in range(repeats))

    inputs = {name: jnp.asarray(x) for name, x in case.inputs.items()}

    @jax.jit
    def one(first, middle, last, store):
        p = {"first": first, "middle": middle, "last": last, "store": store}
        r = aj.run(case.kernel, inputs, case.outputs, params=p, options=options)
        return r.verdict, r.control.findings[0, 1], jnp.max(r.control.end)  # what a table row holds

    def looped():
        return [int(one(*(grid[key][i] for key in KEYS))[0]) for i in range(n)]

    start = time.perf_counter()
    verdicts = looped()
    loop_first = time.perf_counter() - start
    loop_s = min(_seconds(looped) for _ in range(repeats))
    if [int(v) for v in table.verdicts] != verdicts:
        raise AssertionError("the sweep and the Python loop disagree on a verdict")
    return sweep_first, sweep_s, loop_first, loop_s, table


def measure(scenarios=1024, repeats=3) -> dict:
    n = scenarios
    case = phases.kloop_recipe()
    grid = phase_grid(n)
    timings, claims, counts = {}, [], {}
    for label, options in (("checks + timing", aj.Options()), ("timing only", aj.Options(sanitize=False))):
        sweep_first, sweep_s, loop_first, loop_s, table = _compare(case, grid, n, options, repeats)
        counts[label] = table.counts()
        timings[f"ascjax.sweep, {label}"] = {"compile_and_first_s": sweep_first, "run_s": sweep_s}
        timings[f"Python loop, {label}"] = {"compile_and_first_s": loop_first, "run_s": loop_s}
        claims.append(claim(f"sweep ({label}): Python loop / vmap sweep", loop_s / sweep_s, 50, ">="))
    return {
        "benchmark": f"sweep of {n} phase scenarios, K-loop 64x64x512 f16",
        "verdicts": counts,
        "timings": timings,
        "claims": claims,
    }


def _seconds(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


if __name__ == "__main__":
    raise SystemExit(main(__doc__, measure, scenarios=1024))
