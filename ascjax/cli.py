"""Command line: ``python -m ascjax list FILE`` and ``python -m ascjax run FILE::CASE``."""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from . import trace
from .case import build_case, load_cases, run_case
from .chip import CHIPS


def _split(target: str) -> tuple[str, str]:
    if "::" not in target:
        raise ValueError(f"expected FILE::CASE, got {target!r} (list the cases with `python -m ascjax list FILE`)")
    path, name = target.split("::", 1)
    return path, name


def _cmd_list(args) -> int:
    for name, fn in load_cases(args.file).items():
        doc = (fn.__doc__ or "").strip().splitlines()
        print(f"{args.file}::{name}" + (f"  - {doc[0]}" if doc else ""))
    return 0


def _cmd_run(args) -> int:
    path, name = _split(args.target)
    c = build_case(path, name)
    start = time.perf_counter()
    max_events = args.max_events if (args.trace or args.timeline) else 0
    result, rep, err = run_case(
        c,
        chip=args.chip,
        jit=not args.no_jit,
        sanitize=not args.no_sanitize,
        poison_races=args.poison_races,
        max_events=max_events,
    )
    if args.trace:
        trace.to_perfetto(result.state, args.trace)
    if args.timeline:
        trace.plot_timeline(result.state, args.timeline, title=f"{path}::{name}")
    seconds = time.perf_counter() - start
    nan_count = sum(int(np.isnan(np.asarray(v, np.float64)).sum()) for v in result.outputs.values())
    if args.json:
        out = rep.to_dict()
        out.update(
            case=f"{path}::{name}",
            expected=c.expect.label,
            max_abs_err=err,
            seconds=round(seconds, 3),
            nan_elements=nan_count,
        )
        print(json.dumps(out))
    else:
        print(rep)
        print("\n".join(trace.summary_text(rep.timing).splitlines()[1:]))  # per-pipe lines
        if rep.timing["events"] > rep.timing["events_kept"]:
            print(
                f"trace truncated: {rep.timing['events']} ops ran, the first {rep.timing['events_kept']} are kept (--max-events)"
            )
        if args.poison_races:
            print(f"outputs hold {nan_count} NaN element(s) after poisoning racy reads")
        if err is not None:
            verdict = "within" if err <= c.atol else "OUTSIDE"
            print(f"max abs err vs reference: {err:.3g} ({verdict} atol {c.atol:g})")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ascjax", description="Ascend AI Core emulator")
    sub = parser.add_subparsers(dest="command", required=True)
    p_list = sub.add_parser("list", help="list the cases a kernel file defines")
    p_list.add_argument("file")
    p_list.set_defaults(func=_cmd_list)
    p_run = sub.add_parser("run", help="run one case and print its verdict")
    p_run.add_argument("target", metavar="FILE::CASE")
    p_run.add_argument("--chip", choices=sorted(CHIPS), default=None, help="chip model (default: the case's)")
    p_run.add_argument("--json", action="store_true", help="print one JSON object")
    p_run.add_argument("--no-jit", action="store_true", help="run op by op without jax.jit")
    p_run.add_argument("--no-sanitize", action="store_true", help="skip race and uninitialised-read checks")
    p_run.add_argument("--poison-races", action="store_true", help="racy reads produce NaN in the outputs")
    p_run.add_argument("--trace", metavar="OUT.json", help="write a Chrome/Perfetto trace (open in ui.perfetto.dev)")
    p_run.add_argument("--timeline", metavar="OUT.png", help="draw the pipeline timeline (needs matplotlib)")
    p_run.add_argument("--max-events", type=int, default=16384, help="trace buffer size for --trace/--timeline")
    p_run.set_defaults(func=_cmd_run)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (FileNotFoundError, KeyError, ValueError, NotImplementedError, ImportError, SyntaxError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
        print(f"error: cannot run: {type(exc).__name__}: {message}", file=sys.stderr)
        return 2
