"""The golden manifest (``manifest.json``): what each tensor file of a golden folder holds.

``write_golden`` writes it; ``compare`` reads a tensor's dtype, shape and layout from it, so a
device output is compared as what the kernel declared, not as what the user remembers.
"""

from __future__ import annotations

import json
import os

MANIFEST = "manifest.json"


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


def entry(manifest_path: str, paths) -> dict | None:
    """The manifest's tensor named like one of ``paths`` (``NAME.bin`` / ``NAME.npy``), or None."""
    try:
        with open(manifest_path, encoding="utf-8") as f:
            tensors = json.load(f)["tensors"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{manifest_path} is not a golden manifest (no readable 'tensors' list): {exc}") from None
    by_name = {t.get("name"): t for t in tensors if isinstance(t, dict)}
    for path in paths:
        stem = os.path.splitext(os.path.basename(os.fspath(path)))[0]
        if stem in by_name:
            return by_name[stem]
    return None
