"""Kernel lines: where in the user's kernel an instruction was issued or a trace-time error was raised.

``issue_location`` finds the kernel line of the instruction being recorded (its site, ``op at file:line``,
and the call's line where that is in a helper of the kernel); ``caller`` the line of a freed tile and of an
unused input's warning; ``locate`` appends the kernel line to a trace-time error's message.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import sys
import sysconfig

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # ascjax/
#: Python's own library, never the user's line (``inspect`` raising for a call that does not bind, say); installed
#: packages may sit under it, and are not it.
_STDLIB_DIR = os.path.abspath(sysconfig.get_paths()["stdlib"]) + os.sep
_INSTALLED_DIRS = tuple({os.path.abspath(sysconfig.get_paths()[k]) + os.sep for k in ("purelib", "platlib")})


#: how the kernel spells the operation being issued (``pl.move`` in a PyPTO-Pro kernel), where a front end says so
_SPELLING: contextvars.ContextVar = contextvars.ContextVar("spelling", default=None)


@contextlib.contextmanager
def spelled(name: str):
    """Inside the block, the instructions issued are named ``name`` in sites and reports (the front end's spelling of
    the call that issues them, not the instruction it lowers to). An outer spelling wins: ``pl.store_tile`` calls
    ``pl.store`` and reads as ``pl.store_tile``."""
    token = _SPELLING.set(_SPELLING.get() or name)
    try:
        yield
    finally:
        _SPELLING.reset(token)


def spelling(default: str) -> str:
    """The front end's spelling of the operation being issued, else ``default`` (the instruction's name)."""
    return _SPELLING.get() or default


def short_path(path: str) -> str:
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


def _user_frame(frame):
    """The first frame from ``frame`` outward that is outside the ascjax package (and JAX): the user's code."""
    while frame is not None and not _outside(frame.f_code.co_filename):
        frame = frame.f_back
    return frame


def caller() -> tuple[str, int]:
    """First stack frame outside the ascjax package: the user's kernel line."""
    frame = _user_frame(sys._getframe(1))
    return ("<unknown>", 0) if frame is None else (os.path.abspath(frame.f_code.co_filename), frame.f_lineno)


def issue_location() -> str:
    """``file:line`` of the user's line that issued the instruction being recorded. Where that line is in a helper
    of the kernel (a function user code called, such as a ``_sync(src, dst)`` pair), `` via :line`` adds the call:
    every call of the helper then has a line of its own. A line of the kernel, a loop body or a branch (called by
    ascjax) stands alone."""
    frame = _user_frame(sys._getframe(1))
    if frame is None:
        return "<unknown>:0"
    here = f"{short_path(frame.f_code.co_filename)}:{frame.f_lineno}"
    call = frame.f_back
    if call is None or not _outside(call.f_code.co_filename) or call.f_code.co_filename.startswith("<"):
        return here
    same = os.path.abspath(call.f_code.co_filename) == os.path.abspath(frame.f_code.co_filename)
    return f"{here} via {'' if same else short_path(call.f_code.co_filename)}:{call.f_lineno}"


def _outside(path: str) -> bool:
    if path.startswith("<frozen"):  # the import machinery
        return False
    path = os.path.abspath(path)
    stdlib = path.startswith(_STDLIB_DIR) and not path.startswith(_INSTALLED_DIRS)
    if stdlib or path.startswith(_PACKAGE_DIR + os.sep):
        return False
    return "/jax/" not in path and "/equinox/" not in path


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
