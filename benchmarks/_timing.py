"""Shared by the benchmarks: timing (compile each program once, then call them in turn, round after round,
and keep each one's median and minimum), the machine line, and the claim rows every benchmark reports (a
measured ratio against its target)."""

import argparse
import json
import os
import platform
import time

import jax
import numpy as np


def interleaved_seconds(calls: dict, repeats: int = 5) -> dict:
    """Per name of ``calls`` (name -> (fn, args) or (fn, args, repeats)): ``compile_and_first_s``, ``run_s`` (the
    median of its steady-state calls) and ``min_s``. Every program is compiled first; then each round calls every
    program once, in turn, so the peers share the machine's drift (a row with fewer repeats sits out the last)."""
    first, seen = {}, {name: [] for name in calls}
    for name, (fn, args, *_) in calls.items():
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        first[name] = time.perf_counter() - start
    for round_ in range(max([repeats, *(c[2] for c in calls.values() if len(c) > 2)])):
        for name, (fn, args, *reps) in calls.items():
            if round_ < (reps[0] if reps else repeats):
                start = time.perf_counter()
                jax.block_until_ready(fn(*args))
                seen[name].append(time.perf_counter() - start)
    return {
        name: {"compile_and_first_s": first[name], "run_s": float(np.median(t)), "min_s": float(np.min(t))}
        for name, t in seen.items()
    }


def machine() -> str:
    dev = jax.devices()[0]
    return f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, jax {jax.__version__} on {dev.platform} ({dev.device_kind})"


def claim(name: str, value: float, target: float | None = None, sense: str = "<=", unit: str = "x") -> dict:
    """One row of the summary: ``value`` (a ratio, or an error) against its ``target`` (None: reported only)."""
    if target is None:
        return {"claim": name, "value": float(f"{value:.4g}"), "unit": unit, "target": "-", "met": None}
    met = value <= target if sense == "<=" else value >= target
    return {"claim": name, "value": float(f"{value:.4g}"), "unit": unit, "target": f"{sense} {target:g}", "met": met}


def verdict_word(met) -> str:
    return "-" if met is None else "met" if met else "NOT met"


def fmt_seconds(s: float) -> str:
    return f"{s * 1e3:.2f} ms" if s < 1 else f"{s:.2f} s"


def print_details(result: dict) -> None:
    """A benchmark's timing rows (and per-chip memory rows)."""
    for name, t in result["timings"].items():
        parts = [f"{k.removesuffix('_s')} {fmt_seconds(v)}" for k, v in t.items() if k.endswith("_s")]
        print(f"  {name:42s} " + ", ".join(parts))
    for chip, c in result.get("chips", {}).items():
        parts = ", ".join(f"{k} {v / 1024:.0f}" for k, v in c["state_bytes_by_part"].items())
        print(
            f"  {chip:4s} physical {c['physical_bytes'] / 1024:.0f} KiB, state {c['state_bytes'] / 1024:.0f} KiB "
            f"({parts})"
        )


def main(doc: str, measure, **options) -> int:
    """Run one benchmark from its own command line: ``options`` are its int flags and defaults."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    for name, default in options.items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, default=default)
    parser.add_argument("--json", action="store_true")
    args = vars(parser.parse_args())
    as_json = args.pop("json")
    result = measure(**args)
    if as_json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"{result['benchmark']}  ({machine()})")
    print_details(result)
    for c in result["claims"]:
        print(f"  {c['claim']:55s} {c['value']:>10g}{c['unit']:<2s} target {c['target']:<8s} {verdict_word(c['met'])}")
    return 0
