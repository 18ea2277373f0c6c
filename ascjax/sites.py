"""Op sites: every issued instruction is registered at trace time with its source line.

The state carries only integer op ids; ``site`` turns one back into the op's name,
pipe, source location and a description for reports. An id is a hash of the site, not its
registration number, so one kernel compiles to the same program in every process whatever
else was traced before: the persistent compilation cache then serves it to the next process
(the demo, each test worker, the CLI). Tracing registers the sites again, so ids stay valid
when a kernel comes from the cache.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import zlib

from .core import Pipe

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
        return f"{short_path(self.file)}:{self.line}"

    def __str__(self) -> str:
        return f"{self.op} at {self.location} (pipe {self.pipe})"


_LOOP_DEPTH = [0]
_INDEX: dict[Site, int] = {}
_BY_ID: dict[int, Site] = {}
_ID_MASK = 0x3FFFFFFF  # non-negative int32; -1 means "no op"


def short_path(path: str) -> str:
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


def caller() -> tuple[str, int]:
    """First stack frame outside the ascjax package: the user's kernel line."""
    frame = sys._getframe(1)
    while frame is not None:
        if _outside(frame.f_code.co_filename):
            return os.path.abspath(frame.f_code.co_filename), frame.f_lineno
        frame = frame.f_back
    return "<unknown>", 0


def _outside(path: str) -> bool:
    if path.startswith("<frozen"):  # the import machinery
        return False
    path = os.path.abspath(path)
    return not path.startswith(_PACKAGE_DIR + os.sep) and "/jax/" not in path and "/equinox/" not in path


def locate(exc: BaseException) -> None:
    """Append the user's line (the innermost traceback frame outside ascjax and JAX) to ``exc``'s message.

    A trace-time error then names the kernel line that caused it, also where only the message is
    shown (the command line prints one line)."""
    frame = None
    tb = exc.__traceback__
    while tb is not None:
        if _outside(tb.tb_frame.f_code.co_filename):
            frame = tb
        tb = tb.tb_next
    if frame is None or not exc.args or not isinstance(exc.args[0], str):
        return
    where = f"{short_path(frame.tb_frame.f_code.co_filename)}:{frame.tb_lineno}"
    if where not in exc.args[0]:
        exc.args = (f"{exc.args[0]} (at {where})", *exc.args[1:])


def register(op: str, pipe: Pipe, detail: str = "", core: int | str = "AIC") -> int:
    """Register the op being issued from the caller's source line; return its id."""
    if not isinstance(core, str):
        core = ("AIC", "AIV0", "AIV1")[core]
    file, line = caller()
    site_ = Site(op, Pipe(pipe), file, line, detail, core, _LOOP_DEPTH[0])
    if site_ not in _INDEX:
        key = "|".join(str(f) for f in (op, int(site_.pipe), file, line, detail, core, site_.loop_depth))
        op_id = zlib.crc32(key.encode()) & _ID_MASK
        while op_id in _BY_ID:  # a collision (rare): the next free id
            op_id = (op_id + 1) & _ID_MASK
        _INDEX[site_] = op_id
        _BY_ID[op_id] = site_
    return _INDEX[site_]


def site(op_id: int) -> Site | None:
    """The site of an op id, or None for -1 (no op)."""
    return _BY_ID.get(int(op_id))


class loop_scope:
    """Context manager: ops registered inside belong to one more enclosing loop."""

    def __enter__(self):
        _LOOP_DEPTH[0] += 1

    def __exit__(self, *exc):
        _LOOP_DEPTH[0] -= 1
