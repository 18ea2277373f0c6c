"""Concurrent sections: the scheduler's run time against the same kernel in issue order.

python benchmarks/bench_sections.py [--tiles 16] [--json]

The depth-2 ping-pong of ``kernels/pingpong.py`` (the cube produces a 16 x 32 tile per step,
both AIVs scale and store it, READY / RELEASE events with a pre-posted RELEASE), as two
concurrent sections and as its hand-interleaved twin (same math, issue order), all checks
on, side by side in one process. (Compile time against the trip count: bench_compile.py.)
"""

import pathlib
import sys

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from _timing import claim, interleaved_seconds, main

import ascjax as aj
from ascjax.engine import default_costs
from ascjax.front._tracing import output_spec
from ascjax.runner._planes import planes

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "kernels"))
import pingpong  # noqa: E402


def measure(tiles=16) -> dict:
    chip = aj.get_chip("950")
    outputs = output_spec({"out": ((tiles * pingpong.ROWS, pingpong.D), "float32")})
    x = pingpong.inputs(n_max=tiles)
    inputs = {k: jnp.asarray(v) for k, v in x.items()}
    params = {"n": jnp.int32(tiles), "n_max": tiles}
    want = 2.0 * (x["x"].astype(np.float64) @ x["w"].astype(np.float64))
    run = eqx.filter_jit(planes)
    calls = {}
    for name, kernel in (
        ("hand-interleaved (issue order)", pingpong.pingpong_kernel),
        ("two sections (scheduler)", pingpong.pingpong_sections_kernel),
    ):
        args = (kernel, chip, aj.Options(), aj.control_options(chip), default_costs(chip), inputs, outputs, params)
        calls[name] = (lambda args=args: run(*args)[0].gm["out"], ())
        if not np.allclose(np.asarray(run(*args)[0].gm["out"]), want, atol=1e-3):
            raise AssertionError(f"{name}: wrong output")
    timings = interleaved_seconds(calls)
    ratio = timings["two sections (scheduler)"]["run_s"] / timings["hand-interleaved (issue order)"]["run_s"]
    return {
        "benchmark": f"two-section ping-pong, {tiles} tiles (checks on)",
        "timings": timings,
        "claims": [claim("sections: scheduler / issue order", ratio)],
    }


if __name__ == "__main__":
    raise SystemExit(main(__doc__, measure, tiles=16))
