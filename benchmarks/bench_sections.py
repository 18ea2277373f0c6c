"""Concurrent sections: compile time against trip count, and the scheduler's cost against issue order.

python benchmarks/bench_sections.py [--tiles 16] [--json]

1. Compile (trace + lower + XLA compile) of the two-section ping-pong kernel at 4 and at 64
   tiles: the loops stay loops, so the two should be equal within 20 %.
2. Steady-state run time of the two-section kernel (a scheduler over segments) against its
   hand-interleaved twin (same math, issue order), side by side in one process.
"""

import argparse
import json
import pathlib
import sys
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from _timing import best_seconds, machine

import ascjax as aj
from ascjax import dtypes
from ascjax.options import Options
from ascjax.run import _execute
from ascjax.timing import default_costs

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "kernels"))
import pingpong  # noqa: E402


def _args(tiles, kernel, sanitize=True):
    chip = aj.get_chip("950")
    outputs = (("out", ((tiles * pingpong.ROWS, pingpong.D), dtypes.to_numpy_dtype("float32"))),)
    inputs = {k: jnp.asarray(v) for k, v in pingpong.inputs(n_max=tiles).items()}
    params = {"n": jnp.int32(tiles), "n_max": tiles}
    return (kernel, chip, Options(sanitize=sanitize), default_costs(chip), inputs, outputs, params)


def compile_seconds(tiles, kernel) -> float:
    jax.clear_caches()
    start = time.perf_counter()
    eqx.filter_jit(_execute).lower(*_args(tiles, kernel)).compile()
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiles", type=int, default=16, help="tiles for the run-time comparison")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    c4 = compile_seconds(4, pingpong.pingpong_sections_kernel)
    c64 = compile_seconds(64, pingpong.pingpong_sections_kernel)

    run = eqx.filter_jit(_execute)
    times = {}
    for name, kernel in (("interleaved", pingpong.pingpong_kernel), ("sections", pingpong.pingpong_sections_kernel)):
        a = _args(args.tiles, kernel)
        first, best = best_seconds(lambda a=a: run(*a).outputs["out"])
        x = pingpong.inputs(n_max=args.tiles)
        want = 2.0 * (x["x"].astype(np.float64) @ x["w"].astype(np.float64))
        assert np.allclose(np.asarray(run(*a).outputs["out"]), want, atol=1e-3), name
        times[name] = {"compile_and_first_s": first, "run_s": best}
    result = {
        "machine": machine(),
        "compile_s_4_tiles": c4,
        "compile_s_64_tiles": c64,
        "compile_ratio_64_over_4": c64 / c4,
        "tiles": args.tiles,
        "interleaved": times["interleaved"],
        "sections": times["sections"],
        "run_ratio_sections_over_interleaved": times["sections"]["run_s"] / times["interleaved"]["run_s"],
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"machine: {result['machine']}")
        print(f"compile, two-section ping-pong:  4 tiles {c4:.1f} s, 64 tiles {c64:.1f} s  (ratio {c64 / c4:.2f})")
        for name in ("interleaved", "sections"):
            t = times[name]
            print(
                f"{name:12s} {args.tiles} tiles: compile+first {t['compile_and_first_s']:.1f} s, run {t['run_s'] * 1e3:.1f} ms"
            )
        print(f"run-time ratio sections / interleaved: {result['run_ratio_sections_over_interleaved']:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
