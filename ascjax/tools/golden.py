"""Golden data: a case's GM inputs and outputs as device bytes, ``.npy`` files and a manifest.

A device test harness loads ``NAME.bin`` into GM as is and compares what the kernel writes with
the ``.bin`` of each output (``python -m ascjax compare``). The files depend only on the case
and its seed: no timestamps, sorted JSON keys, so rewriting them changes no byte (jit or not).
See ``docs/golden.md``.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re

import numpy as np

from ..core import Verdict
from ..core import _dtypes as dtypes
from ..core.formats.device_bytes import to_device_bytes
from ._case import Case, build_case, run_case, split_target
from ._manifest import MANIFEST
from .compare import TOLERANCES

_SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


def _declared_dtype(spec) -> str:
    """Device dtype of an output spec: ``(shape, dtype)`` or anything with ``.dtype``."""
    return dtypes.dtype_name(spec.dtype if hasattr(spec, "dtype") else spec[1])


def _npy_bytes(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)
    return buf.getvalue()


def _reference_miss(c: Case, outputs: dict) -> str | None:
    """Why the outputs miss the case's reference (|out - ref| > atol + rtol * |ref|), or None."""
    if c.reference is None:
        return None
    for name, want in c.reference(c.inputs).items():
        got = np.asarray(outputs[name]).astype(np.float64)
        want = np.asarray(want).astype(np.float64)
        diff = np.abs(got - want)
        bad = ~(diff <= c.atol + c.rtol * np.abs(want))
        if bad.any():
            return (
                f"output {name!r} misses the case's reference at {int(bad.sum())} of {bad.size} elements "
                f"(max abs err {float(np.nanmax(diff)):.3g}, atol {c.atol:g}, rtol {c.rtol:g})"
            )
    return None


def _resolve(case: str | Case, seed: int | None) -> tuple[str, Case]:
    if isinstance(case, Case):
        if seed is not None:
            raise ValueError(
                f"case {case.name!r} is already built, so seed {seed} cannot draw its inputs: pass FILE::CASE instead"
            )
        return case.name, case
    path, name = split_target(case)
    return case, build_case(path, name, seed=seed)


def write_golden(case: str | Case, out_dir, *, seed: int | None = None, jit: bool = True, result=None) -> dict:
    """Run ``case`` (``"FILE::CASE"`` or a built ``Case``) and write its golden data to ``out_dir``.

    ``result``: a ``ascjax.Result`` of this very case, to write without running it again.

    Writes ``NAME.bin`` (device bytes: little-endian, 4-bit types packed two per byte) and
    ``NAME.npy`` for every GM input and output, then ``manifest.json``; returns the manifest.
    Refuses (ValueError) when the verdict is not OK or the outputs miss the case's reference:
    golden data of a broken kernel is useless.
    """
    target, c = _resolve(case, seed)
    if result is None:
        result, rep, _ = run_case(c, jit=jit)
    else:
        rep = result.report()
    how = f"`python -m ascjax run {target}`" if "::" in target else "`ascjax.run_case(case)`"
    if rep.verdict is not Verdict.OK:
        raise ValueError(
            f"{target} ends with verdict {rep.verdict.label} (expected ok): golden data of a broken kernel is "
            f"useless, so none was written; see {how} for the report"
        )
    if not result.device_outputs:
        reason = next(w for w in rep.warnings if "the outputs are not the device's" in w)
        raise ValueError(f"{target}: {reason} No golden data was written")
    outputs = {name: np.asarray(x) for name, x in result.outputs.items()}
    miss = _reference_miss(c, outputs)
    if miss:
        raise ValueError(f"{target}: {miss}: golden data of a wrong result is useless, so none was written")

    tensors = [("input", name, np.asarray(x), dtypes.dtype_name(np.asarray(x).dtype)) for name, x in c.inputs.items()]
    tensors += [("output", name, outputs[name], _declared_dtype(spec)) for name, spec in c.outputs.items()]
    for _, name, _, _ in tensors:
        if not _SAFE_NAME.fullmatch(name) or name == os.path.splitext(MANIFEST)[0]:
            raise ValueError(
                f"GM tensor {name!r} cannot name a file: golden data needs names of letters, digits, '_', '.', '-' "
                f"(not {os.path.splitext(MANIFEST)[0]!r}): rename it in the case"
            )
    os.makedirs(out_dir, exist_ok=True)
    entries = []
    for role, name, array, dtype in tensors:
        raw, npy = to_device_bytes(array, dtype), _npy_bytes(array)
        for suffix, data in ((".bin", raw), (".npy", npy)):
            with open(os.path.join(out_dir, name + suffix), "wb") as f:
                f.write(data)
        entries.append(
            {
                "name": name,
                "role": role,
                "shape": [int(s) for s in array.shape],
                "dtype": dtype,
                "layout": "ND",
                "bytes": len(raw),
                "sha256_bin": hashlib.sha256(raw).hexdigest(),
                "sha256_npy": hashlib.sha256(npy).hexdigest(),
            }
        )
    out_dtypes = sorted({dtype for role, _, _, dtype in tensors if role == "output"})
    manifest = {
        "case": target,
        "chip": str(c.chip),
        "seed": seed,
        "verdict": rep.verdict.label,
        "tolerance": {
            "atol": c.atol,
            "rtol": c.rtol,
            "compare_default": {d: {"rtol": TOLERANCES[d][0], "atol": TOLERANCES[d][1]} for d in out_dtypes},
        },
        "tensors": entries,
    }
    with open(os.path.join(out_dir, MANIFEST), "w", encoding="utf-8", newline="\n") as f:
        f.write(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest
