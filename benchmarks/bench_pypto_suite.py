"""hicann/pypto's PyPTO-Pro frontend tests, run unchanged through ``python -m ascjax pypto-test``: one row per file.

python benchmarks/bench_pypto_suite.py --suite PATH/python/tests/st/pypto_pro/frontend [--jobs 2] [--timeout 180]

Needs ``pip install 'ascjax[torch]'`` and a local checkout of the suite (nothing of it is copied here). Each file
runs in its own process under a time limit; a row says how its tests ended (pytest's counts), the verdicts of the
kernels they ran, and for a file that did not pass, the first rule or error it stopped at.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import pathlib
import re
import subprocess
import sys

#: the families the measure covers
FAMILIES = ("matmul", "fa", "datacopy", "element_wise", "control_flow", "bufferid", "tile_vector", "vf_api", "system")
_COUNTS = re.compile(r"(\d+) (passed|failed|skipped|error|errors|xfailed)")
_REASON = re.compile(r"(rule '[^']+'[^\n]*|[A-Za-z]*Error: [^\n]*|UnsupportedConstruct: [^\n]*)")


def run_file(path: pathlib.Path, timeout_s: float) -> dict:
    """One file under ``pypto-test``: its pytest counts, kernel verdicts and, where it did not pass, why."""
    cmd = [sys.executable, "-m", "ascjax", "pypto-test", str(path), "-x"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=path.parent)
    except subprocess.TimeoutExpired:
        return {"file": path.name, "status": "timeout", "counts": {}, "verdicts": [], "reason": f"over {timeout_s} s"}
    out = proc.stdout + proc.stderr
    tail = out.strip().splitlines()[-1] if out.strip() else ""
    counts = {kind.rstrip("s") if kind.startswith("error") else kind: int(n) for n, kind in _COUNTS.findall(tail)}
    verdicts = sorted(set(re.findall(r": (OK|DEADLOCK|RACE|LEFTOVER|SYNC_ERROR|BOUNDS|UNINITIALIZED)[,\s]", out)))
    passed = proc.returncode == 0 and counts.get("passed", 0) > 0
    reason = ""
    if not passed:
        errors = "\n".join(line[1:].strip() for line in out.splitlines() if line.startswith("E "))  # pytest's E lines
        found = _REASON.search(errors) or _REASON.search(out)
        reason = found.group(0)[:160] if found else tail[:160]
    status = "passed" if passed else ("skipped" if proc.returncode == 0 else "failed")
    return {"file": path.name, "status": status, "counts": counts, "verdicts": verdicts, "reason": reason}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", required=True, help="python/tests/st/pypto_pro/frontend of a hicann/pypto checkout")
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=180.0)
    parser.add_argument("--json", metavar="OUT.json")
    args = parser.parse_args(argv)
    suite = pathlib.Path(args.suite)
    if not suite.is_dir():
        print(f"error: no such folder: {suite}", file=sys.stderr)
        return 2
    files = [p for fam in args.families.split(",") for p in sorted((suite / fam).rglob("test_*.py"))]
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(lambda p: {**run_file(p, args.timeout), "family": p.relative_to(suite).parts[0]}, files))
    width = max((len(r["file"]) for r in rows), default=4)
    for r in rows:
        counts = " ".join(f"{n} {k}" for k, n in sorted(r["counts"].items()))
        print(
            f"{r['family']:<13} {r['file']:<{width}}  {r['status']:<8} {counts:<22} {','.join(r['verdicts']):<10} {r['reason']}"
        )
    passed = sum(r["status"] == "passed" for r in rows)
    print(f"\n{passed} of {len(rows)} files pass their own assertions ({100 * passed / max(len(rows), 1):.0f} %)")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
