"""Op sites: every issued instruction is registered at trace time with its source line.

The state carries only integer op ids; :func:`site` turns one back into the op's name,
pipe, source location and a description for reports. The registry is process-wide so ids
stay valid when a jitted kernel is served from the compilation cache.
"""

from __future__ import annotations

import dataclasses
import os
import sys

from .kinds import Pipe

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


@dataclasses.dataclass(frozen=True)
class Site:
    op: str  # e.g. "mmad", "fixpipe", "sync_wait"
    pipe: Pipe
    file: str
    line: int
    detail: str  # static description: tiles, flags, modes known at trace time
    core: str = "AIC"
    loop_depth: int = 0  # how many enclosing emulated loops (their indices go with errors)

    @property
    def location(self) -> str:
        return f"{_short(self.file)}:{self.line}"

    def __str__(self) -> str:
        return f"{self.op} at {self.location} (pipe {self.pipe})"


_SITES: list[Site] = []
_LOOP_DEPTH = [0]
_INDEX: dict[Site, int] = {}


def _short(path: str) -> str:
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


def _caller() -> tuple[str, int]:
    """First stack frame outside the ascjax package: the user's kernel line."""
    frame = sys._getframe(1)
    while frame is not None:
        path = os.path.abspath(frame.f_code.co_filename)
        if not path.startswith(_PACKAGE_DIR + os.sep) and "/jax/" not in path and "/equinox/" not in path:
            return path, frame.f_lineno
        frame = frame.f_back
    return "<unknown>", 0


def register(op: str, pipe: Pipe, detail: str = "", core: int | str = "AIC") -> int:
    """Register the op being issued from the caller's source line; return its id."""
    if not isinstance(core, str):
        core = ("AIC", "AIV0", "AIV1")[core]
    file, line = _caller()
    site_ = Site(op, Pipe(pipe), file, line, detail, core, _LOOP_DEPTH[0])
    if site_ not in _INDEX:
        _INDEX[site_] = len(_SITES)
        _SITES.append(site_)
    return _INDEX[site_]


def site(op_id: int) -> Site | None:
    """The site of an op id, or None for -1 (no op)."""
    op_id = int(op_id)
    return _SITES[op_id] if 0 <= op_id < len(_SITES) else None


class loop_scope:
    """Context manager: ops registered inside belong to one more enclosing loop."""

    def __enter__(self):
        _LOOP_DEPTH[0] += 1

    def __exit__(self, *exc):
        _LOOP_DEPTH[0] -= 1
