"""PyPTO-Pro's parser errors (``pypto_pro.language.parser.diagnostics``): what reading a kernel raises.

PyPTO-Pro reports a kernel it refuses while it parses it as a ``ParserSyntaxError`` (it wraps the ``ValueError``
or ``TypeError`` a check raised) or a ``ParserTypeError``. ``@pl.jit`` here does the same for what it refuses while
it reads and records a kernel, so a test written against PyPTO-Pro catches the same class. A wrapped error is
still the ``ValueError`` / ``TypeError`` it was, and keeps its message (the rule, the values and the user's line).
"""

from __future__ import annotations


class ParserError(Exception):
    """A kernel refused while it is read."""


class ParserSyntaxError(ParserError, ValueError, TypeError):
    """A check on the kernel's source or its arguments failed (PyPTO-Pro's wrapper of ValueError / TypeError)."""


class ParserTypeError(ParserError, TypeError):
    """PyPTO-Pro's error for a closure variable or annotation of a type it cannot take. ascjax raises none: it
    reads closures as Python values. The name is here so that a file naming it imports."""
