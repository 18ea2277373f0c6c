"""Run every benchmark and print one table of claims (measured value, target, met).

python benchmarks/run.py [--only matmul,sweep,...] [--quick] [--json] [--out results.json]

Each benchmark compiles its programs once and times steady-state runs side by side with its
reference in this one process (the persistent compilation cache stays off, so compile
figures are real). ``--quick`` shrinks every size for a smoke run; the figures in
docs/performance.md come from the full sizes.
"""

import argparse
import json
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import bench_compile  # noqa: E402
import bench_control_plane  # noqa: E402
import bench_flash_attention  # noqa: E402
import bench_matmul  # noqa: E402
import bench_memory  # noqa: E402
import bench_sections  # noqa: E402
import bench_sweep  # noqa: E402
import bench_timing_accuracy  # noqa: E402
from _timing import fmt_seconds, machine, print_details, verdict_word  # noqa: E402

#: name -> (full-size call, quick call)
BENCHMARKS = {
    "matmul": (lambda: bench_matmul.measure(1024), lambda: bench_matmul.measure(256, repeats=2)),
    "flash_attention": (
        lambda: bench_flash_attention.measure(2048, 128),
        lambda: bench_flash_attention.measure(128, 64, repeats=1),
    ),
    "sweep": (lambda: bench_sweep.measure(1024), lambda: bench_sweep.measure(64, repeats=1)),
    "control_plane": (lambda: bench_control_plane.measure(1024), lambda: bench_control_plane.measure(64, repeats=1)),
    "compile": (lambda: bench_compile.measure(4, 64), lambda: bench_compile.measure(2, 8, repeats=1)),
    "sections": (lambda: bench_sections.measure(16), lambda: bench_sections.measure(4)),
    "memory": (bench_memory.measure, bench_memory.measure),
    "timing_accuracy": (bench_timing_accuracy.measure, lambda: bench_timing_accuracy.measure(2)),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help=f"comma-separated subset of {','.join(BENCHMARKS)}")
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run, not the recorded figures)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON instead of the table")
    parser.add_argument("--out", help="also write the JSON results to this file")
    args = parser.parse_args()
    names = [n.strip() for n in args.only.split(",") if n.strip()] or list(BENCHMARKS)
    unknown = sorted(set(names) - set(BENCHMARKS))
    if unknown:
        parser.error(f"unknown benchmark(s) {unknown}: choose from {list(BENCHMARKS)}")
    results = {"machine": machine(), "quick": args.quick, "benchmarks": {}}
    for name in names:
        start = time.perf_counter()
        print(f"running {name} ...", file=sys.stderr, flush=True)
        results["benchmarks"][name] = BENCHMARKS[name][1 if args.quick else 0]()
        results["benchmarks"][name]["wall_s"] = time.perf_counter() - start
    if args.out:
        pathlib.Path(args.out).write_text(json.dumps(results, indent=2))
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"machine: {results['machine']}{'  (--quick sizes)' if args.quick else ''}\n")
    for r in results["benchmarks"].values():
        print(f"{r['benchmark']}  [{fmt_seconds(r['wall_s'])}]")
        print_details(r)
    claims = [c for r in results["benchmarks"].values() for c in r["claims"]]
    width = max(len(c["claim"]) for c in claims)
    print(f"\n{'claim':{width}s}  {'measured':>12s}  {'target':8s}  result")
    for c in claims:
        print(f"{c['claim']:{width}s}  {c['value']:>11g}{c['unit']:1s}  {c['target']:8s}  {verdict_word(c['met'])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
