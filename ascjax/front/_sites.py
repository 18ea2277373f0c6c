"""Kernel lines: where in the user's kernel an instruction was issued or a trace-time error was raised.

``caller`` finds the kernel line of the instruction being recorded (its site, ``op at file:line``), of a
freed tile and of an unused input's warning; ``locate`` appends the kernel line to a trace-time error's
message.
"""

from __future__ import annotations

import os
import sys

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # ascjax/


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
