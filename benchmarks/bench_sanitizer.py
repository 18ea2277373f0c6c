"""Cost of the sanitizer: the 1024^3 f16 K-loop matmul (tiles 128) with all checks on, off, and jnp.dot.

python benchmarks/bench_sanitizer.py [--size 1024] [--json]
"""

import argparse
import json
import pathlib
import sys

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "kernels"))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from _timing import best_seconds, machine  # noqa: E402
from matmul import matmul_case  # noqa: E402

import ascjax as aj  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    case = matmul_case(args.size, args.size, args.size)
    a, b = (jnp.asarray(case.inputs[n]) for n in ("a", "b"))

    def emulate(sanitize):
        @jax.jit
        def go(a, b):
            r = aj.run(case.kernel, {"a": a, "b": b}, case.outputs, params=case.params, sanitize=sanitize)
            return r.outputs["c"], r.verdict

        return go

    reference = jax.jit(lambda a, b: jnp.dot(a, b, preferred_element_type=jnp.float32))
    rows = {}
    for name, fn in (("jnp.dot", reference), ("checks off", emulate(False)), ("checks on", emulate(True))):
        first, best = best_seconds(fn, a, b, repeats=args.repeats)
        rows[name] = {"compile_and_first_s": round(first, 3), "run_s": round(best, 5)}
    out_on, verdict = emulate(True)(a, b)
    err = float(np.max(np.abs(np.asarray(out_on, np.float64) - case.reference(case.inputs)["c"])))
    result = {
        "benchmark": f"K-loop matmul {args.size}^3 f16, tiles 128",
        "machine": machine(),
        "verdict": aj.Verdict(int(verdict)).label,
        "max_abs_err": err,
        "rows": rows,
        "checks_on_over_off": round(rows["checks on"]["run_s"] / rows["checks off"]["run_s"], 3),
        "checks_on_over_jnp_dot": round(rows["checks on"]["run_s"] / rows["jnp.dot"]["run_s"], 3),
        "checks_off_over_jnp_dot": round(rows["checks off"]["run_s"] / rows["jnp.dot"]["run_s"], 3),
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"{result['benchmark']}  ({result['machine']})  verdict {result['verdict']}, max err {err:.2g}")
        for name, r in rows.items():
            print(f"  {name:11s} run {r['run_s'] * 1e3:9.2f} ms   compile+first {r['compile_and_first_s']:7.2f} s")
        print(
            f"  checks on / off = {result['checks_on_over_off']}x, on / jnp.dot = {result['checks_on_over_jnp_dot']}x, "
            f"off / jnp.dot = {result['checks_off_over_jnp_dot']}x"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
