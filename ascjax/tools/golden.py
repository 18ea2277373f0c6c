"""Golden data: a case's GM inputs and outputs as device bytes, ``.npy`` files and a manifest.

A device test harness loads ``NAME.bin`` into GM as is and compares what the kernel writes with
the ``.bin`` of each output (``python -m ascjax compare``). The files depend only on the case
and its seed: no timestamps, sorted JSON keys, so rewriting them changes no byte (jit or not).
A set is written into a temporary folder beside its target and renamed into place, so an
interrupted run leaves the old set whole or none, never a mix. See ``docs/golden.md``.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import secrets
import shutil

import numpy as np

from ..core import Verdict
from ..core import _dtypes as dtypes
from ..core.formats.device_bytes import to_device_bytes
from . import _manifest
from ._case import Case, build_case, run_case, split_target
from ._manifest import MANIFEST
from .compare import TOLERANCES

_SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
#: name prefix of the folders a write keeps beside its target: the new set, then the old one moved aside
TEMP_PREFIX = ".golden-"
#: random bytes in a temporary folder's name
_TEMP_TOKEN_BYTES = 8


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
    golden data of a broken kernel is useless. The set replaces ``out_dir`` whole (written beside
    it, then renamed into place); an ``out_dir`` holding anything but a golden set is refused.
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
    files, entries = [], []
    for role, name, array, dtype in tensors:
        raw, npy = to_device_bytes(array, dtype), _npy_bytes(array)
        files += [(name + ".bin", raw), (name + ".npy", npy)]
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
        "tolerance": {  # the case's tolerance against its reference (none: compare uses the dtype's default)
            "atol": None if c.reference is None else c.atol,
            "rtol": None if c.reference is None else c.rtol,
            "compare_default": {d: {"rtol": TOLERANCES[d][0], "atol": TOLERANCES[d][1]} for d in out_dtypes},
        },
        "tensors": entries,
    }
    files.append((MANIFEST, (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode("utf-8")))
    _replace_set(out_dir, files)
    return manifest


def _write_file(path: str, data: bytes) -> None:
    """Write one file of a golden set (its own function, so that a test can interrupt a write)."""
    with open(path, "wb") as f:
        f.write(data)


def _make_temp_folder(parent: str, kind: str) -> str:
    """A new, empty folder in ``parent`` named ``TEMP_PREFIX`` + ``kind`` + random hex (the umask's mode)."""
    while True:
        path = os.path.join(parent, f"{TEMP_PREFIX}{kind}-{secrets.token_hex(_TEMP_TOKEN_BYTES)}")
        try:
            os.mkdir(path)
            return path
        except FileExistsError:
            continue


def _check_replaceable(out_dir: str) -> None:
    """Refuse (ValueError) to replace a folder holding anything but a golden set: it is the user's data."""
    if not os.path.isdir(out_dir):
        raise NotADirectoryError(f"{out_dir} exists and is not a folder: give --out a folder for the golden set")
    present = sorted(os.listdir(out_dir))
    if not present:
        return
    manifest = os.path.join(out_dir, MANIFEST)
    try:
        listed = {MANIFEST} | {os.path.basename(path) for path, _, _ in _manifest.set_files(manifest)}
        why = f"a file its {MANIFEST} lists"
    except (OSError, ValueError):
        listed, why = set(), f"part of a golden set (the folder has no readable {MANIFEST})"
    stray = next((name for name in present if name not in listed), None)
    if stray is not None:
        raise ValueError(
            f"{out_dir} holds {stray}, which is not {why}: golden replaces a golden set only, so nothing "
            "was written; give --out a new folder or move the file"
        )


def _replace_set(out_dir, files: list[tuple[str, bytes]]) -> None:
    """Write ``files`` (name, bytes) as the folder ``out_dir``, all or nothing.

    They go into a temporary folder beside ``out_dir``, which is renamed into place; an existing
    golden set is first renamed aside and deleted once the new one is in place.
    """
    target = os.path.realpath(os.fspath(out_dir))
    parent = os.path.dirname(target)
    if os.path.lexists(target):
        _check_replaceable(target)
        cwd = os.path.realpath(os.getcwd())
        if cwd == target or cwd.startswith(target + os.sep):
            raise ValueError(
                f"{target} holds the current folder, which replacing the set would delete: give --out a folder "
                "other than the current one or a parent of it"
            )
    os.makedirs(parent, exist_ok=True)
    fresh = _make_temp_folder(parent, "new")
    old = None
    try:
        for name, data in files:
            _write_file(os.path.join(fresh, name), data)
        if os.path.lexists(target):
            old = _make_temp_folder(parent, "old")
            os.replace(target, old)  # onto the empty folder just made
        os.rename(fresh, target)
    except BaseException:
        shutil.rmtree(fresh, ignore_errors=True)
        if old is not None and not os.path.lexists(target):
            os.rename(old, target)  # the old set back in place
        elif old is not None:
            shutil.rmtree(old, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old)


def verify_golden(folder) -> dict:
    """Check every file a golden folder's manifest lists (``.bin`` and ``.npy``) against its sha256 sums.

    Returns the manifest; raises ValueError naming the first missing or mismatching file, so a set
    mixed from two runs (say a file from another seed) is never used.
    """
    manifest = os.path.join(os.fspath(folder), MANIFEST)
    if not os.path.isfile(manifest):
        raise FileNotFoundError(f"no {MANIFEST} in {os.fspath(folder)}: not a golden folder")
    _manifest.verify(manifest, complete=True)
    return _manifest.read(manifest)
