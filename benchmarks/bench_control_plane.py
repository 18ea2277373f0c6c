"""Engine v2's control plane: 1,024 distinct seed-000 K-loop scenarios as one vmap against a Python loop.

python benchmarks/bench_control_plane.py [--scenarios 1024] [--repeats 5] [--json]

The record is seed 000's K-split matmul as ``kernels/phases.py`` issues it (64 x 64 f16 tiles,
a double handshake MTE2 <-> MTE1 <-> M per K step, the unit flag between the mmads and the
store), written straight into ``ascjax.engine.RecordBuilder``. A scenario is its four phases
(first, middle, last ``matmul`` and the ``store``: none, Partial or Final) and its trip count
(1..16 K steps, up to a static maximum of 16): the scenarios are all distinct. Without a
phase the framework's M -> FIX software sync is recorded as a flag pair. The loop calls the
jitted single-scenario control plane once per scenario and reads its verdict; the sweep is one
jitted ``vmap``. Calls are interleaved and repeated; medians and minimums are reported.
This times the control plane alone (``ascjax.sweep`` runs both planes: ``bench_sweep.py``).

A last row runs the loop's shape with almost nothing in a step (four queues, a table lookup, the
earliest start, one event written) the same way: what a ``vmap`` can gain over a loop of single
runs on this machine, whatever the step holds. On a 2-core CPU a single run's step costs XLA's
per-operation dispatch and a vmapped step its arithmetic, and that row comes out well under 50x
(13-26x on a 2-core VM).
"""

import itertools
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
from _timing import claim, interleaved_seconds, main

from ascjax.engine import UF_OFF, RecordBuilder, UnitFlagRole, run_control, state_bytes, verdict

TILE_M = TILE_N = TILE_K = 64
HALF_BYTES, FLOAT_BYTES = 2, 4
MAX_STEPS = 16
AUTO_SYNC_ID = 7  # the event id the framework's inserted M -> FIX sync uses
PHASES = (UF_OFF, 2, 3)  # none, AccPhase/STPhase Partial, Final


def kloop_record(first, middle, last, store, trip):
    """Seed 000's K loop with traced phases and a traced trip count (at most ``MAX_STEPS``)."""
    b = RecordBuilder()
    tile_ab = TILE_M * TILE_K * HALF_BYTES
    tile_c = TILE_M * TILE_N * FLOAT_BYTES
    gm_a = b.space("GM:a", MAX_STEPS * tile_ab, initialised=True)
    gm_b = b.space("GM:b", MAX_STEPS * tile_ab, initialised=True)
    gm_out = b.space("GM:out", tile_c)
    l1a, l1b = b.space("L1:a_l1", tile_ab), b.space("L1:b_l1", tile_ab)
    l0a, l0b, l0c = b.space("L0A:al", tile_ab), b.space("L0B:br", tile_ab), b.space("L0C:ac", tile_c)
    blocks = [(0, tile_c // 512)]
    b.set_flag("MTE1", "MTE2", 0)
    b.set_flag("M", "MTE1", 0)
    windows = [(i * tile_ab, (i + 1) * tile_ab) for i in range(MAX_STEPS)]
    with b.loop(MAX_STEPS, trip) as i:
        b.wait_flag("MTE1", "MTE2", 0)
        b.instruction("copy_gm2l1_nd2nz", "MTE2", reads=[(gm_a, windows, i)], writes=[(l1a, (0, tile_ab))], cycles=90)
        b.instruction("copy_gm2l1_nd2nz", "MTE2", reads=[(gm_b, windows, i)], writes=[(l1b, (0, tile_ab))], cycles=90)
        b.set_flag("MTE2", "MTE1", 0)
        b.wait_flag("MTE2", "MTE1", 0)
        b.wait_flag("M", "MTE1", 0)
        b.instruction("copy_l12l0a", "MTE1", reads=[(l1a, (0, tile_ab))], writes=[(l0a, (0, tile_ab))], cycles=40)
        b.instruction("copy_l12l0b", "MTE1", reads=[(l1b, (0, tile_ab))], writes=[(l0b, (0, tile_ab))], cycles=40)
        b.set_flag("MTE1", "MTE2", 0)
        b.set_flag("MTE1", "M", 0)
        b.wait_flag("MTE1", "M", 0)
        phase = jnp.where(i == 0, first, jnp.where(i == trip - 1, last, middle))
        b.instruction(
            "mmad", "M", reads=[(l0a, (0, tile_ab)), (l0b, (0, tile_ab)), (l0c, [(0, tile_c)], 0, i > 0)],
            writes=[(l0c, (0, tile_c))], uf_role=UnitFlagRole.WRITER, uf_mode=phase, uf_blocks=blocks,
            accumulate=i > 0, cycles=64,
        )  # fmt: skip
        b.set_flag("M", "MTE1", 0)
        b.set_flag("M", "FIX", AUTO_SYNC_ID, enable=(i == trip - 1) & (phase == UF_OFF))
    b.wait_flag("MTE1", "MTE2", 0)
    b.wait_flag("M", "MTE1", 0)
    b.wait_flag("M", "FIX", AUTO_SYNC_ID, enable=store == UF_OFF)
    b.instruction(
        "fixpipe", "FIX", reads=[(l0c, (0, tile_c))], writes=[(gm_out, (0, tile_c))],
        uf_role=UnitFlagRole.READER, uf_mode=store, uf_blocks=blocks, cycles=80,
    )  # fmt: skip
    return b.build()


def scenario_grid(n: int) -> dict:
    """``n`` distinct (phases, trip count) scenarios."""
    rows = [(*p, t) for t in range(1, MAX_STEPS + 1) for p in itertools.product(PHASES, repeat=4)]
    if n > len(rows):
        raise ValueError(f"only {len(rows)} distinct scenarios exist, asked for {n}")
    grid = np.asarray(rows[:n], np.int32)
    return {key: jnp.asarray(grid[:, j]) for j, key in enumerate(("first", "middle", "last", "store", "trip"))}


def _verdict(p):
    return verdict(run_control(kloop_record(**p)))


FLOOR_QUEUES, FLOOR_TABLE_ROWS, FLOOR_COLUMNS = 4, 256, 26


def _floor_loop(seed, steps: int):
    """The shape of the control plane's loop with almost nothing in it: ``steps`` steps over four queues, each
    looking up its queues' heads in a table, starting the earliest one and writing its event. What a Python loop of
    single runs against one ``vmap`` can gain on this machine when each step does next to nothing."""
    table = (jnp.arange(FLOOR_TABLE_ROWS * FLOOR_COLUMNS, dtype=jnp.int32).reshape(FLOOR_TABLE_ROWS, -1) * 7) % 50

    def step(carry, _):
        pos, free_t, vc, now = carry
        head = (pos * 5 + seed) % FLOOR_TABLE_ROWS
        rows = table[head]
        start = jnp.maximum(free_t, rows[:, 3] + now)
        q = jnp.argmin(start)
        hit = jnp.arange(FLOOR_QUEUES) == q
        now = start[q]
        pos, free_t = jnp.where(hit, pos + 1, pos), jnp.where(hit, now + rows[:, 5], free_t)
        vc = jnp.where(hit[:, None], vc + 1, vc)
        return (pos, free_t, vc, now), (q, head[q], now, vc[q])

    zeros = jnp.zeros(FLOOR_QUEUES, jnp.int32)
    carry, events = jax.lax.scan(step, (zeros, zeros, jnp.zeros((FLOOR_QUEUES,) * 2, jnp.int32), seed), None, steps)
    return carry[3] + sum(jnp.sum(e) for e in events)


def floor_ratio(scenarios: int, steps: int, repeats: int) -> float:
    """Python loop / ``vmap`` for ``_floor_loop`` (minimums of interleaved calls)."""
    seeds = jnp.arange(scenarios, dtype=jnp.int32)
    one = jax.jit(lambda s: _floor_loop(s, steps))
    swept = jax.jit(jax.vmap(lambda s: _floor_loop(s, steps)))
    t = interleaved_seconds({"loop": (lambda: [one(s) for s in seeds], ()), "vmap": (swept, (seeds,))}, repeats)
    return t["loop"]["min_s"] / t["vmap"]["min_s"]


def measure(scenarios=1024, repeats=5) -> dict:
    grid = scenario_grid(scenarios)
    one = jax.jit(_verdict)
    swept = jax.jit(jax.vmap(_verdict))
    host = {k: np.asarray(v) for k, v in grid.items()}

    def looped():
        return [int(one({k: v[i] for k, v in host.items()})) for i in range(scenarios)]

    def sweep():
        return np.asarray(swept(grid))

    start = time.perf_counter()
    by_loop = looped()
    loop_first = time.perf_counter() - start
    start = time.perf_counter()
    by_sweep = sweep()
    sweep_first = time.perf_counter() - start
    if list(map(int, by_sweep)) != by_loop:
        raise AssertionError("the vmapped sweep and the Python loop disagree on a verdict")
    loop_s, sweep_s = [], []
    for _ in range(repeats):  # interleaved
        for fn, out in ((looped, loop_s), (sweep, sweep_s)):
            start = time.perf_counter()
            fn()
            out.append(time.perf_counter() - start)
    ratio_median = statistics.median(loop_s) / statistics.median(sweep_s)
    ratio_min = min(loop_s) / min(sweep_s)
    seed = {k: v[0] for k, v in grid.items()} | {"trip": jnp.asarray(8)}
    # as a sweep carries it: inside the vmapped program the record keeps its own buckets (no size class)
    bytes_per_scenario = state_bytes(jax.jit(lambda: run_control(kloop_record(**seed)))())
    counts = {int(v): int(c) for v, c in zip(*np.unique(by_sweep, return_counts=True))}
    steps = 2 * kloop_record(**seed).template.n_instances  # the loop's events at the largest trip count
    floor = floor_ratio(scenarios, steps, repeats)
    return {
        "benchmark": f"control plane (engine v2): {scenarios} distinct seed-000 K-loop scenarios",
        "verdicts": counts,
        "timings": {
            "Python loop of the jitted run": {
                "compile_and_first_s": loop_first,
                "median_s": statistics.median(loop_s),
                "min_s": min(loop_s),
            },
            "one jitted vmap": {
                "compile_and_first_s": sweep_first,
                "median_s": statistics.median(sweep_s),
                "min_s": min(sweep_s),
            },
        },  # fmt: skip
        "claims": [
            claim("control plane: Python loop / vmap (median)", ratio_median, 50, ">="),
            claim("control plane: Python loop / vmap (min)", ratio_min, 50, ">="),
            claim("the loop's shape with a 10-operation step: Python loop / vmap (min; this machine's ceiling)", floor),
            claim("control plane: machine state per seed-000 scenario", bytes_per_scenario / 1024, 8, "<=", " KiB"),
        ],
    }


if __name__ == "__main__":
    raise SystemExit(main(__doc__, measure, scenarios=1024, repeats=5))
