"""Command line: ``python -m ascjax list FILE``, ``run FILE::CASE``, ``check FILE::CASE``, ``golden FILE::CASE``,
``compare``, ``sweep``, ``pypto FILE[::KERNEL]`` and ``pypto-test FILE``."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import sys
import threading
import time

import numpy as np

from ..core._chip import CHIPS
from ..report import _timeline as timeline
from . import _pypto_file
from ._case import build_case, load_cases, run_case, split_target
from ._compile_cache import enable_compile_cache
from ._manifest import MANIFEST
from .compare import compare_files
from .golden import write_golden

#: After this long a person at a terminal is told once that the kernel is compiling.
COMPILE_NOTICE_S = 2.0


@contextlib.contextmanager
def compile_notice(stream=None, after_s: float = COMPILE_NOTICE_S):
    """Say once on ``stream`` (stderr; only a terminal) when the work inside takes longer than ``after_s``."""
    stream = sys.stderr if stream is None else stream
    timer = None
    if stream.isatty():
        timer = threading.Timer(after_s, lambda: print("compiling the kernel (cached for next time)...", file=stream))
        timer.daemon = True
        timer.start()
    try:
        yield
    finally:
        if timer is not None:
            timer.cancel()


ADVICE_HELP = "what-if advice with numbers: the control plane run again with one change per line"


def _cmd_list(args) -> int:
    for name, fn in load_cases(args.file).items():
        doc = (fn.__doc__ or "").strip().splitlines()
        print(f"{args.file}::{name}" + (f"  - {doc[0]}" if doc else ""))
    return 0


def _cmd_run(args) -> int:
    path, name = split_target(args.target)
    c = build_case(path, name)
    start = time.perf_counter()
    with compile_notice():
        result, rep, err = run_case(
            c,
            chip=args.chip,
            jit=not args.no_jit,
            sanitize=not args.no_sanitize,
            poison_races=args.poison_races,
        )
    advice = result.advice() if args.advice else ()
    if args.trace or args.timeline:
        run = dataclasses.replace(result.timeline(), advice=advice)
        if args.trace:
            run.to_perfetto(args.trace)
        if args.timeline:
            run.plot(args.timeline, title=f"{path}::{name}")
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
            advice=list(advice),
        )
        print(json.dumps(out))
    else:
        print(rep)
        print("\n".join(timeline.summary_text({**rep.timing, "advice": advice}).splitlines()[1:]))  # per pipe...
        if args.poison_races:
            print(f"outputs hold {nan_count} NaN element(s) after poisoning racy reads")
        if err is not None:
            verdict = "within" if err <= c.atol else "OUTSIDE"
            print(f"max abs err vs reference: {err:.3g} ({verdict} atol {c.atol:g})")
    return 0


def _cmd_check(args) -> int:
    from ..runner._check import check

    path, name = split_target(args.target)
    c = build_case(path, name)
    with compile_notice():
        found = check(c.kernel, c.inputs, c.outputs, chip=args.chip or c.chip, params=c.params)
    run = found.timeline(advice=args.advice)
    if args.trace:
        run.to_perfetto(args.trace)
    if args.timeline:
        run.plot(args.timeline, title=f"{path}::{name}")
    info = run.summary()
    if args.json:
        findings = [
            {"kind": f.kind.name.lower(), "site": f.site, "other": f.other, "message": f.message}
            for f in found.findings
        ]
        doc = {
            "case": f"{path}::{name}",
            "verdict": found.verdict.label,
            "expected": c.expect.label,
            "findings": findings,
        }
        print(json.dumps({**doc, **{k: v for k, v in info.items() if k != "pipes"}, "dropped": found.dropped}))
    else:
        print(found)
        print(timeline.summary_text(info))
    return 0


def _cmd_explain(args) -> int:
    from ..runner._check import check

    path, name = split_target(args.target)
    c = build_case(path, name)
    with compile_notice():
        found = check(c.kernel, c.inputs, c.outputs, chip=args.chip or c.chip, params=c.params)
    print(f"{path}::{name}: {found.verdict.name}")
    print(found.explain())
    return 0


def _cmd_golden(args) -> int:
    with compile_notice():
        manifest = write_golden(args.target, args.out, seed=args.seed, jit=not args.no_jit)
    names = " ".join(t["name"] + ".bin" for t in manifest["tensors"])
    print(f"wrote {os.path.join(args.out, '')}{names} (+ .npy) and {MANIFEST}")
    return 0


def _shape(text: str) -> tuple[int, ...]:
    try:
        shape = tuple(int(s) for s in text.split(","))
    except ValueError:
        shape = ()
    if not shape or any(s < 0 for s in shape):
        raise ValueError(f"--shape {text!r} is not a shape: give sizes separated by commas, e.g. --shape 64,64")
    return shape


def _cmd_compare(args) -> int:
    shape = _shape(args.shape) if args.shape else None
    result = compare_files(
        args.expected, args.actual, args.dtype, rtol=args.rtol, atol=args.atol, shape=shape, manifest=args.manifest
    )
    print(json.dumps(result.to_dict(), allow_nan=False) if args.json else result)
    return 0 if result.passed else 1


def _grid_value(text: str):
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    raise ValueError(f"--grid values are numbers, got {text!r}")


def parse_grid(specs: list[str]) -> dict:
    """``['first=0,2,3', 'store=0,3']`` -> the cartesian product as scenario columns."""
    axes = {}
    for spec in specs:
        name, eq, values = spec.partition("=")
        if not eq or not name.strip() or not values.strip():
            raise ValueError(f"--grid takes NAME=V1,V2,..., got {spec!r}")
        if name.strip() in axes:
            raise ValueError(f"--grid names {name.strip()!r} twice: give its values once")
        axes[name.strip()] = [_grid_value(v.strip()) for v in values.split(",")]
    mesh = np.meshgrid(*axes.values(), indexing="ij")
    return {name: m.reshape(-1) for name, m in zip(axes, mesh)}


def _cmd_sweep(args) -> int:
    from ._sweep import sweep

    path, name = split_target(args.target)
    c = build_case(path, name)
    if not args.grid:
        raise ValueError("sweep needs at least one --grid NAME=V1,V2,...")
    columns = parse_grid(args.grid)
    start = time.perf_counter()
    with compile_notice():
        table = sweep(c, columns, chip=args.chip, chunk_size=args.chunk, progress=None)
    seconds = time.perf_counter() - start
    print(table.summary(max_rows=args.rows))
    print(f"{len(table)} scenarios in {seconds:.1f} s")
    if args.csv:
        table.to_csv(args.csv)
        print(f"wrote {args.csv}")
    if args.json:
        table.to_json(args.json)
        print(f"wrote {args.json}")
    return 0


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage mistake as one line on stderr (exit status 2): the command, the mistake, and where the
    usage is (``--help``), instead of the whole usage block. Its subcommands' parsers are of this class too."""

    def error(self, message: str):
        self.exit(2, f"error: {self.prog}: {message} (see {self.prog} --help)\n")


def _cmd_pypto(args) -> int:
    path, _, name = args.target.partition("::")
    kernel = _pypto_file.pick_kernel(path, name or None)
    arguments = _pypto_file.random_arguments(kernel, args.seed)
    with compile_notice():
        written = kernel.outputs(**arguments, block_dim=args.block_dim)
        for tensor in written:  # outputs start at zero
            arguments[tensor] = np.zeros_like(arguments[tensor])
        result = kernel(**arguments) if args.block_dim is None else kernel[None, args.block_dim](**arguments)
    outputs = ", ".join(sorted(written)) or "none"
    print(f"{path}::{kernel.__name__}: inputs drawn with seed {args.seed}; outputs {outputs}")
    print(result.report())
    return 0


def _cmd_pypto_test(args) -> int:
    """An upstream-style PyPTO-Pro test file under pytest, with pypto_pro, pypto and torch.npu mapped to ascjax."""
    try:
        import pytest
        import torch  # noqa: F401 - the test files' own reference
    except ImportError as exc:
        raise ImportError(f"pypto-test needs {exc.name}: pip install 'ascjax[torch]'") from None
    if not os.path.isfile(args.file):
        raise FileNotFoundError(f"no such file: {args.file}")
    plugin = [
        "-p",
        "ascjax.tools._pypto_plugin",
        "-p",
        "no:cacheprovider",
        "-o",
        "addopts=",
        "-q",
        "-W",
        "ignore::pytest.PytestAssertRewriteWarning",
    ]  # fmt: skip (ascjax is imported before pytest starts)
    return int(pytest.main([args.file, *plugin, *args.pytest_args]))


def main(argv=None) -> int:
    parser = _Parser(prog="python -m ascjax", description="Ascend AI Core emulator")
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
    p_run.add_argument("--advice", action="store_true", help=ADVICE_HELP)
    p_run.set_defaults(func=_cmd_run)
    p_check = sub.add_parser(
        "check", help="check one case's synchronisation without computing data and print every finding"
    )
    p_check.add_argument("target", metavar="FILE::CASE")
    p_check.add_argument("--chip", choices=sorted(CHIPS), default=None, help="chip model (default: the case's)")
    p_check.add_argument("--json", action="store_true", help="print one JSON object")
    p_check.add_argument("--trace", metavar="OUT.json", help="write a Chrome/Perfetto trace (open in ui.perfetto.dev)")
    p_check.add_argument("--timeline", metavar="OUT.png", help="draw the pipeline timeline (needs matplotlib)")
    p_check.add_argument("--advice", action="store_true", help=ADVICE_HELP)
    p_check.set_defaults(func=_cmd_check)
    p_explain = sub.add_parser(
        "explain", help="check one case and print seed 002's six cross-core checks and its events by id and slot"
    )
    p_explain.add_argument("target", metavar="FILE::CASE")
    p_explain.add_argument("--chip", choices=sorted(CHIPS), default=None, help="chip model (default: the case's)")
    p_explain.set_defaults(func=_cmd_explain)
    p_golden = sub.add_parser("golden", help="write a case's inputs and outputs as device bytes, .npy and a manifest")
    p_golden.add_argument("target", metavar="FILE::CASE")
    p_golden.add_argument("--out", metavar="DIR", required=True, help="folder for NAME.bin, NAME.npy, manifest.json")
    p_golden.add_argument("--seed", type=int, default=None, help="pass seed=N to the case function (draws the inputs)")
    p_golden.add_argument("--no-jit", action="store_true", help="run op by op without jax.jit (same bytes)")
    p_golden.set_defaults(func=_cmd_golden)
    p_cmp = sub.add_parser("compare", help="compare two tensor files (.bin device bytes or .npy); exit 1 on FAIL")
    p_cmp.add_argument("expected", metavar="EXPECTED")
    p_cmp.add_argument("actual", metavar="ACTUAL")
    p_cmp.add_argument(
        "--dtype",
        default=None,
        help="element type of both files (float32, bf16, int8, hif8...; default: the manifest's)",
    )
    p_cmp.add_argument(
        "--manifest", default=None, help="golden manifest naming the tensor (default: manifest.json beside a file)"
    )
    p_cmp.add_argument(
        "--rtol", type=float, default=None, help="relative tolerance (default: the manifest's, else the dtype's)"
    )
    p_cmp.add_argument(
        "--atol", type=float, default=None, help="absolute tolerance (default: the manifest's, else the dtype's)"
    )
    p_cmp.add_argument("--shape", metavar="64,64", default=None, help="shape of .bin files, for element coordinates")
    p_cmp.add_argument("--json", action="store_true", help="print the mismatch statistics as one JSON object")
    p_cmp.set_defaults(func=_cmd_compare)
    p_sweep = sub.add_parser("sweep", help="run a grid of scenarios of one case as one compiled vmap")
    p_sweep.add_argument("target", metavar="FILE::CASE")
    p_sweep.add_argument(
        "--grid", action="append", metavar="NAME=V1,V2", help="a kernel parameter or costs.FIELD and its values"
    )
    p_sweep.add_argument("--chip", choices=sorted(CHIPS), default=None, help="chip model (default: the case's)")
    p_sweep.add_argument("--chunk", type=int, default=1024, help="scenarios per compiled batch")
    p_sweep.add_argument("--rows", type=int, default=40, help="rows to print")
    p_sweep.add_argument("--csv", metavar="OUT.csv", help="write every row as CSV")
    p_sweep.add_argument("--json", metavar="OUT.json", help="write every row as JSON")
    p_sweep.set_defaults(func=_cmd_sweep)
    p_pypto = sub.add_parser("pypto", help="run a PyPTO-Pro kernel file unchanged (pypto_pro mapped to ascjax)")
    p_pypto.add_argument("target", metavar="FILE[::KERNEL]")
    p_pypto.add_argument("--seed", type=int, default=0, help="seed of the inputs drawn from the pl.Tensor annotations")
    p_pypto.add_argument("--block-dim", type=int, default=None, help="launch on this many blocks: kernel[None, N]")
    p_pypto.set_defaults(func=_cmd_pypto)
    p_test = sub.add_parser(
        "pypto-test", help="run a PyPTO-Pro test file unchanged under pytest (pypto_pro, pypto, torch.npu mapped)"
    )
    p_test.add_argument("file", metavar="FILE")
    p_test.add_argument("pytest_args", nargs=argparse.REMAINDER, help="passed to pytest (after --)")
    p_test.set_defaults(func=_cmd_pypto_test)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (OSError, KeyError, ValueError, NotImplementedError, ImportError, SyntaxError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
        print(f"error: cannot {args.command}: {type(exc).__name__}: {message}", file=sys.stderr)
        return 2


def console() -> None:
    """The ``ascjax`` command and ``python -m ascjax``: the compile cache on (a second run of the same kernel starts
    in seconds), then ``main``'s exit status."""
    enable_compile_cache()
    sys.exit(main())
