"""Wall time against trip count: flash attention at 4 and at 64 KV tiles, and the two-section ping-pong.

python benchmarks/bench_compile.py [--long-tiles 512] [--json]

The claim is the wall time of a first ``ascjax.run`` with all checks on, as a fresh process
would run it (after ``ascjax.clear_caches()``, without the persistent compilation cache): the
recording, the control plane (on the host or compiled), the data plane's compile and the run. A
loop of ascjax is recorded once with its operands stacked and computed as a ``lax.scan``, so the
64-tile figure should equal the 4-tile one within 20 %. The compile of both planes as one program
(``planes`` under ``jit``, what a run with traced parameters compiles) is reported beside it. The
process runs one kernel first (its own first run pays for imports and JAX's first traces), then
the two sizes in turn, twice, and keeps each one's fastest. ``--long-tiles N`` also times both kernels' first run
at N (KV) tiles against their 4-tile one (no target: how a long loop's first run grows).
"""

import pathlib
import sys
import time

import equinox as eqx
import jax
import jax.numpy as jnp
from _timing import claim, main

import ascjax as aj
from ascjax.engine import default_costs
from ascjax.front._tracing import output_spec
from ascjax.runner._planes import planes

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "kernels"))
import flash_attention as fa  # noqa: E402
import pingpong  # noqa: E402


def first_run_seconds(kernel, chip, inputs, outputs, params) -> float:
    """A first ``run``'s wall time, every cache of this process cleared."""
    aj.clear_caches()
    start = time.perf_counter()
    jax.block_until_ready(aj.run(kernel, inputs, outputs, chip=chip, params=params).outputs)
    return time.perf_counter() - start


def compile_seconds(kernel, chip, inputs, outputs, params) -> float:
    chip = aj.get_chip(chip)
    args = (
        kernel,
        chip,
        aj.Options(),
        aj.control_options(chip),
        default_costs(chip),
        inputs,
        output_spec(outputs),
        params,
    )
    jax.clear_caches()
    start = time.perf_counter()
    eqx.filter_jit(planes).lower(*args).compile()
    return time.perf_counter() - start


def _flash_attention_args(kv_tiles: int, head_dim=64) -> tuple:
    seq_kv = kv_tiles * 64
    x = {n: jnp.asarray(v) for n, v in fa.inputs(64, seq_kv, head_dim).items()}
    return fa.flash_attention_kernel, "950", x, {"out": (x["q"].shape, "float16")}, fa.params(64, seq_kv, head_dim)


def _pingpong_args(tiles: int) -> tuple:
    x = {n: jnp.asarray(v) for n, v in pingpong.inputs(n_max=tiles).items()}
    outputs = {"out": ((tiles * pingpong.ROWS, pingpong.D), "float32")}
    return pingpong.pingpong_sections_kernel, "950", x, outputs, {"n": jnp.int32(tiles), "n_max": tiles}


#: Per kernel, its ``run`` arguments at a number of (KV) tiles.
KERNELS = {"flash attention (64 queries, d 64)": _flash_attention_args, "two-section ping-pong": _pingpong_args}


def seconds(kernel: str, tiles: int) -> dict:
    """``kernel``'s first run and its compile as one program at ``tiles`` tiles."""
    args = KERNELS[kernel](tiles)
    return {f"{tiles}_tiles_first_run_s": first_run_seconds(*args), f"{tiles}_tiles_compile_s": compile_seconds(*args)}


def measure(few=4, many=64, repeats=2, long_tiles=0) -> dict:
    seconds("two-section ping-pong", few)  # the process's own first run (imports, first traces) counts against neither
    timings = {name: {} for name in KERNELS}
    for _ in range(repeats):  # the sizes in turn, each keeping its fastest: the machine's drift on both
        for name in KERNELS:
            for tiles in (many, few):
                for key, value in seconds(name, tiles).items():
                    timings[name][key] = min(value, timings[name].get(key, value))
    claims = []
    for name, t in timings.items():
        for what, label in (("first_run", "first run"), ("compile", "compile as one program")):
            ratio = t[f"{many}_tiles_{what}_s"] / t[f"{few}_tiles_{what}_s"]
            target = 1.2 if what == "first_run" else None  # the claim is the wall time
            claims.append(claim(f"{label}, {name}: {many} / {few} tiles", ratio, target))
    if long_tiles:  # a long loop's first run against the short one's (no target)
        for name, args in KERNELS.items():
            longest = min(first_run_seconds(*args(long_tiles)) for _ in range(repeats))
            timings[name][f"{long_tiles}_tiles_first_run_s"] = longest
            ratio = longest / timings[name][f"{few}_tiles_first_run_s"]
            claims.append(claim(f"first run, {name}: {long_tiles} / {few} tiles", ratio, None))
    return {"benchmark": f"wall time at {few} and {many} tiles (checks on)", "timings": timings, "claims": claims}


if __name__ == "__main__":
    raise SystemExit(main(__doc__, measure, long_tiles=0))
