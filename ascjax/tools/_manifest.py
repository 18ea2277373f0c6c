"""The golden manifest (``manifest.json``): what each tensor file of a golden folder holds.

``write_golden`` writes it; ``compare`` reads a tensor's dtype, shape, layout and the case's
tolerance from it, so a device output is compared as what the kernel declared, not as what the
user remembers. Its sha256 sums tie the folder's files together: a file replaced by another run's
is refused rather than compared.
"""

from __future__ import annotations

import hashlib
import json
import os

MANIFEST = "manifest.json"
#: tensor file suffix -> the manifest entry key holding that file's sha256
HASH_KEYS = {".bin": "sha256_bin", ".npy": "sha256_npy"}
#: bytes read at a time while hashing a file
_HASH_CHUNK = 1 << 20


def find(paths, manifest=None) -> str | None:
    """The manifest to use: ``manifest`` when given, else a ``manifest.json`` beside one of ``paths``."""
    if manifest is not None:
        manifest = os.fspath(manifest)
        if not os.path.isfile(manifest):
            raise FileNotFoundError(f"no manifest {manifest}")
        return manifest
    for path in paths:
        beside = os.path.join(os.path.dirname(os.path.abspath(os.fspath(path))), MANIFEST)
        if os.path.isfile(beside):
            return beside
    return None


def read(manifest_path: str) -> dict:
    """The manifest's JSON object; ValueError when it has no readable ``tensors`` list."""
    try:
        with open(manifest_path, encoding="utf-8") as f:
            doc = json.load(f)
        tensors = doc["tensors"]
        if not isinstance(tensors, list):
            raise TypeError(f"'tensors' is a {type(tensors).__name__}, not a list")
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{manifest_path} is not a golden manifest (no readable 'tensors' list): {exc}") from None
    return doc


def _by_name(doc: dict) -> dict:
    return {t.get("name"): t for t in doc["tensors"] if isinstance(t, dict)}


def entry(manifest_path: str, paths) -> dict | None:
    """The manifest's tensor named like one of ``paths`` (``NAME.bin`` / ``NAME.npy``), or None."""
    by_name = _by_name(read(manifest_path))
    for path in paths:
        stem = os.path.splitext(os.path.basename(os.fspath(path)))[0]
        if stem in by_name:
            return by_name[stem]
    return None


def tolerance(manifest_path: str) -> tuple | None:
    """(rtol, atol) the manifest records for its case (``tolerance.rtol`` / ``.atol``; each None where the case had
    no reference to hold a tolerance against), or None without a tolerance entry."""
    recorded = read(manifest_path).get("tolerance")
    if recorded is None:
        return None
    pair = []
    for key in ("rtol", "atol"):
        value = recorded.get(key) if isinstance(recorded, dict) else None
        if value is None:
            pair.append(None)
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
            raise ValueError(
                f"{manifest_path} records tolerance.{key} {value!r}: a tolerance is a number of at least 0; "
                "regenerate the golden set (python -m ascjax golden) or give --rtol and --atol"
            )
        pair.append(float(value))
    return pair[0], pair[1]


def set_files(manifest_path: str) -> list[tuple[str, str, str | None]]:
    """Every file of the manifest's golden set: (path, hash key, recorded sha256 or None), in manifest order."""
    folder = os.path.dirname(os.path.abspath(manifest_path))
    files = []
    for name, tensor in _by_name(read(manifest_path)).items():
        for suffix, key in HASH_KEYS.items():
            files.append((os.path.join(folder, f"{name}{suffix}"), key, tensor.get(key)))
    return files


def in_set(manifest_path: str, path) -> bool:
    """Whether ``path`` is one of the manifest's golden files: in its folder, named after a tensor it lists."""
    real = os.path.realpath(os.fspath(path))
    return any(os.path.realpath(p) == real for p, _, _ in set_files(manifest_path))


def sha256(path) -> str:
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _regenerate(manifest_path: str) -> str:
    """The command that writes the manifest's golden set again."""
    try:
        doc = read(manifest_path)
    except ValueError:
        doc = {}
    case = doc.get("case")
    case = case if isinstance(case, str) and "::" in case else "FILE::CASE"
    seed = doc.get("seed")
    folder = os.path.dirname(manifest_path) or "."
    return f"python -m ascjax golden {case} --out {folder}" + ("" if seed is None else f" --seed {seed}")


def verify(manifest_path: str, *, skip=(), complete: bool = True) -> None:
    """Refuse (ValueError) a golden set whose files differ from the manifest's sha256 sums, naming the first.

    ``skip``: paths not checked (a device output written into the folder may differ).
    ``complete``: every listed file must be there and have a recorded hash (``verify_golden``); else
    the files present are checked against the hashes recorded (``compare`` of a partial copy).
    """
    skipped = {os.path.realpath(os.fspath(p)) for p in skip}
    for path, key, want in set_files(manifest_path):
        if os.path.realpath(path) in skipped:
            continue
        if not os.path.isfile(path):
            if complete:
                raise ValueError(
                    f"{path} is missing, but {manifest_path} lists it: the golden set is incomplete; regenerate it "
                    f"({_regenerate(manifest_path)})"
                )
            continue
        if want is None:
            if complete:
                raise ValueError(
                    f"{manifest_path} records no {key} for {os.path.basename(path)}, so the file cannot be checked: "
                    f"regenerate the golden set ({_regenerate(manifest_path)})"
                )
            continue
        got = sha256(path)
        if got != want:
            raise ValueError(
                f"{path} does not match {manifest_path}: its sha256 is {got}, the manifest records {want} ({key}); "
                f"the golden set is inconsistent (a file replaced, e.g. by another seed's run): regenerate it "
                f"({_regenerate(manifest_path)})"
            )
