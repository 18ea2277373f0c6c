"""Sweep throughput: 1,024 distinct scenarios of the K-loop kernel as one vmap against a Python loop.

python benchmarks/bench_sweep.py [--scenarios 1024] [--json]

The kernel is seed 000's K-split matmul (``kernels/phases.py``: 64 x 64 f16 tiles, AccPhase on
the first, middle and last ``matmul`` and STPhase on the ``store``), here over up to 16 K steps
(K = 1,024), with all checks and the timing model on. Each scenario is distinct: one of the 81
phase combinations times a trip count of 1 to 16 K steps, all traced (1,024 of the 1,296, spread
evenly). ``ascjax.sweep`` runs them as one jitted ``vmap`` and builds its table; the Python loop
calls the jitted single-scenario run once per scenario and reads what a table row holds
(verdict, offending op, cycles, and with the checks the pair sync ran against the kernel's order), as a user
without ``vmap`` would. Both are timed after their
compilation, with all checks on and with the race checks off.
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
MAX_STEPS = 16
KEYS = ("first", "middle", "last", "store", "steps")


def phase_grid(n: int) -> dict:
    """``n`` distinct scenarios: phase combinations (first, middle, last, store) times trip counts."""
    combos = list(itertools.product(range(1, MAX_STEPS + 1), *[PHASES] * 4))
    if n > len(combos):
        raise ValueError(f"at most {len(combos)} distinct scenarios, got {n}")
    picked = [combos[i] for i in np.arange(n) * len(combos) // n]  # spread over every trip count
    grid = np.array([(*phase, steps) for steps, *phase in picked], np.int32)
    return {key: grid[:, i] for i, key in enumerate(KEYS)}


def kloop_case() -> aj.Case:
    """Seed 000's K loop with ``MAX_STEPS`` tiles of K in A and B."""
    rng = np.random.default_rng(11)
    k_total = MAX_STEPS * phases.TILE_K
    return aj.Case(
        kernel=phases.kloop_kernel,
        inputs={
            "a": rng.uniform(-1, 1, (phases.M, k_total)).astype(np.float16),
            "b": rng.uniform(-1, 1, (k_total, phases.N)).astype(np.float16),
        },
        outputs={"out": ((phases.M, phases.N), "float32")},
        params={"max_steps": MAX_STEPS},
    )


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
    def one(first, middle, last, store, steps):
        p = {"first": first, "middle": middle, "last": last, "store": store, "steps": steps, "max_steps": MAX_STEPS}
        r = aj.run(case.kernel, inputs, case.outputs, params=p, options=options)
        row = r.verdict, r.control.findings[0, 1], jnp.max(r.control.end)  # what a table row holds
        return (*row, r.control.reordered) if options.sanitize else row  # with the checks, the reordered pair too

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
    case = kloop_case()
    grid = phase_grid(n)
    timings, claims, counts = {}, [], {}
    for label, options in (("checks + timing", aj.Options()), ("timing only", aj.Options(sanitize=False))):
        sweep_first, sweep_s, loop_first, loop_s, table = _compare(case, grid, n, options, repeats)
        counts[label] = table.counts()
        timings[f"ascjax.sweep, {label}"] = {"compile_and_first_s": sweep_first, "run_s": sweep_s}
        timings[f"Python loop, {label}"] = {"compile_and_first_s": loop_first, "run_s": loop_s}
        claims.append(claim(f"sweep ({label}): Python loop / vmap sweep", loop_s / sweep_s, 50, ">="))
    return {
        "benchmark": f"sweep of {n} distinct scenarios (phases x trip count), K-loop 64x64 f16 tiles, up to {MAX_STEPS} K steps",
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
