"""The ``pypto`` package as PyPTO-Pro test files use it: ``@pypto.options(pass_options=...)``.

The options configure the device compiler's passes; the emulator runs the kernel as written, so they change
nothing here. Any other name of ``pypto`` is refused by name (``python -m ascjax pypto-test`` maps the module
``pypto`` here for the run).
"""

from __future__ import annotations


def options(**compiler_options):
    """``@pypto.options(...)``: device compiler options; the decorated test runs unchanged."""
    return lambda fn: fn


class UnmappedName(AttributeError):
    """A name of ``pypto`` that ascjax does not map."""


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    raise UnmappedName(f"pypto.{name} is not mapped by ascjax (of the pypto package it maps pypto.options)")
