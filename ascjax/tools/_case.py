"""Cases: named, runnable scenarios a kernel file defines (inputs, expected verdict, reference)."""

from __future__ import annotations

import dataclasses
import difflib
import glob
import importlib.util
import inspect
import os
import re
import sys
from collections.abc import Callable

import numpy as np

from ..core import Verdict


@dataclasses.dataclass
class Case:
    """One runnable scenario of a kernel."""

    kernel: Callable
    inputs: dict
    outputs: dict  # name -> (shape, dtype)
    params: dict = dataclasses.field(default_factory=dict)
    reference: Callable | None = None  # inputs -> {output name: expected array}
    atol: float = 0.0
    rtol: float = 0.0
    expect: Verdict = Verdict.OK
    chip: str = "a2"
    description: str = ""
    name: str = ""


def case(fn: Callable | None = None, *, name: str | None = None):
    """Mark a function that returns a ``Case`` as a runnable case of its file.

    It is called without arguments, or with ``seed=N`` when one is asked for (``build_case``,
    ``python -m ascjax golden --seed``): give it a ``seed`` keyword that draws the inputs.
    """

    def mark(f):
        f.__ascjax_case__ = name or f.__name__
        return f

    return mark(fn) if fn is not None else mark


def load_cases(path: str) -> dict[str, Callable]:
    """Import a kernel file and return its cases by name, in file order."""
    path = os.path.abspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no kernel file {path}")
    if not path.endswith(".py"):
        raise ValueError(f"{path} is not a Python file: cases live in a .py kernel file (e.g. kernels/unit_flag.py)")
    mod_name = "ascjax_kernel_" + os.path.splitext(os.path.basename(path))[0]
    if mod_name in sys.modules and getattr(sys.modules[mod_name], "__file__", None) == path:
        module = sys.modules[mod_name]
    else:
        spec = importlib.util.spec_from_file_location(mod_name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[mod_name] = module
        folder = os.path.dirname(path)
        added = folder not in sys.path
        if added:  # as ``python kernel.py`` does: a kernel file imports its neighbours
            sys.path.insert(0, folder)
        try:
            spec.loader.exec_module(module)
        finally:
            if added:
                sys.path.remove(folder)
    found = {}
    for value in vars(module).values():
        label = getattr(value, "__ascjax_case__", None)
        if label is not None and callable(value):
            found[label] = value
    return found


def split_target(target: str) -> tuple[str, str]:
    """``FILE::CASE`` -> (FILE, CASE), the way the command line names a case."""
    if "::" not in target:
        raise ValueError(f"expected FILE::CASE, got {target!r} (list the cases with `python -m ascjax list FILE`)")
    path, name = target.split("::", 1)
    return path, name


def _takes_seed(fn: Callable) -> bool:
    params = inspect.signature(fn).parameters.values()
    return any(p.name == "seed" or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def build_case(path: str, name: str, seed: int | None = None) -> Case:
    """Build case ``name`` of kernel file ``path``; a ``seed`` is passed to the case function to draw its inputs."""
    cases = load_cases(path)
    if name not in cases:
        raise KeyError(f"{path} defines no case {name!r}{_elsewhere(path, name, cases)}; it has: "
                       f"{', '.join(cases) or 'none'}")  # fmt: skip
    fn = cases[name]
    if seed is None:
        c = fn()
    elif _takes_seed(fn):
        c = fn(seed=seed)
    else:
        raise ValueError(
            f"case {name!r} of {path} takes no seed, so seed={seed} cannot change its inputs: "
            f"give its function a `seed` keyword that draws the inputs, or leave the seed out"
        )
    c.name = c.name or name
    doc = (fn.__doc__ or "").strip()
    if not c.description and doc:
        c.description = doc.splitlines()[0]
    return c


def _elsewhere(path: str, name: str, cases: dict) -> str:
    """Where a case the user named may be: a kernel file beside this one that marks a case of that name (read as
    text, not imported), else a close name in this file."""
    marked = re.compile(rf"^@[\w.]*case\b[^\n]*\n(?:@[^\n]*\n)*def {re.escape(name)}\(", re.M)
    here = os.path.abspath(path)
    for other in sorted(glob.glob(os.path.join(os.path.dirname(here), "*.py"))):
        if other != here:
            with open(other, encoding="utf-8", errors="replace") as f:
                if marked.search(f.read()):
                    where = os.path.join(os.path.dirname(path), os.path.basename(other))
                    return f" (a case of that name is in {where}: {where}::{name})"
    close = difflib.get_close_matches(name, list(cases), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def max_abs_err(outputs: dict, expected: dict) -> float:
    """Largest |output - expected| over every output the reference names (float64)."""
    worst = 0.0
    for name, want in expected.items():
        got = np.asarray(outputs[name]).astype(np.float64)
        diff = np.abs(got - np.asarray(want).astype(np.float64))
        worst = max(worst, float(np.max(diff)) if diff.size else 0.0)
    return worst


def run_case(
    c: Case,
    *,
    chip: str | None = None,
    jit: bool = True,
    sanitize: bool = True,
    poison_races: bool = False,
):
    """Run a case; returns (result, report, max_abs_err or None)."""
    from ..runner._run import run

    result = run(
        c.kernel,
        c.inputs,
        c.outputs,
        chip=chip or c.chip,
        params=c.params,
        jit=jit,
        sanitize=sanitize,
        poison_races=poison_races,
    )
    rep = result.report()
    err = None
    if c.reference is not None:
        err = max_abs_err(result.outputs, c.reference(c.inputs))
    return result, rep, err
