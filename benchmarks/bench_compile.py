"""Compile time against trip count: flash attention at 4 and at 64 KV tiles, and the two-section ping-pong.

python benchmarks/bench_compile.py [--json]

Each figure is trace + lower + XLA compile of one block with all checks on, after
``jax.clear_caches()`` and without the persistent compilation cache. A loop of ascjax is a
``lax.scan`` (and concurrent sections a scan over their segments), so the compile time
must not grow with the number of iterations: the 64-tile figure should equal the 4-tile one
within 20 %.
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


def flash_attention_seconds(kv_tiles: int, head_dim=64) -> float:
    seq_kv = kv_tiles * 64
    x = {n: jnp.asarray(v) for n, v in fa.inputs(64, seq_kv, head_dim).items()}
    return compile_seconds(
        fa.flash_attention_kernel, "950", x, {"out": (x["q"].shape, "float16")}, fa.params(64, seq_kv, head_dim)
    )


def pingpong_seconds(tiles: int) -> float:
    x = {n: jnp.asarray(v) for n, v in pingpong.inputs(n_max=tiles).items()}
    outputs = {"out": ((tiles * pingpong.ROWS, pingpong.D), "float32")}
    return compile_seconds(
        pingpong.pingpong_sections_kernel, "950", x, outputs, {"n": jnp.int32(tiles), "n_max": tiles}
    )


def measure(few=4, many=64) -> dict:
    timings = {
        "flash attention (64 queries, d 64)": {
            f"{few}_tiles_s": flash_attention_seconds(few),
            f"{many}_tiles_s": flash_attention_seconds(many),
        },
        "two-section ping-pong": {f"{few}_tiles_s": pingpong_seconds(few), f"{many}_tiles_s": pingpong_seconds(many)},
    }
    claims = []
    for name, t in timings.items():
        ratio = t[f"{many}_tiles_s"] / t[f"{few}_tiles_s"]
        claims.append(claim(f"compile {name}: {many} / {few} KV tiles", ratio, 1.2))
        claims.append(claim(f"compile {name}: {few} / {many} KV tiles", 1 / ratio, 1.2))
    return {"benchmark": f"compile time at {few} and {many} tiles (checks on)", "timings": timings, "claims": claims}


if __name__ == "__main__":
    raise SystemExit(main(__doc__, measure))
