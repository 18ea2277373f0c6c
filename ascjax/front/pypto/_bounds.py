"""Static bounds of a kernel's run-time integers, so a ``pl.range`` whose stop is a run-time value still has a
static trip count to record.

A loop is recorded up to a static number of iterations, with the run-time count as its trip count. A kernel
computes such stops from its inputs' contents (``work_ranges[core_id, 1]``, ``actual_seq[b]``), block and loop
indices, and ``pl.min`` / ``pl.max`` of them (``pl.min(KL1, k - k_off)``). Those sources have known ranges: an
integer input tensor's values lie in its contents' ``[min, max]`` (known when the kernel is called), a block index
in ``[0, 2 * block_num)``, a loop index between its start and its last trip. The front end carries an interval
along with each run-time integer that the kernel computes from them by ``+ - * // %``, ``min``, ``max``, a
conditional expression or an index into a tuple of constants (interval arithmetic, so the bound holds for every
value the run can take), and a loop's static trip count is its stop's upper bound less its start's lower bound.

A value the front end cannot bound (a loop-carried scalar, a tile's contents) leaves its loop refused, naming the
line. A run whose trip count exceeds the bound (a sweep over inputs past the contents the kernel was recorded
with) is the recorder's BOUNDS finding, never a silently shortened loop.
"""

from __future__ import annotations

import math
import operator
import weakref

import jax
import numpy as np

from .._program import current

#: per Program: id of a traced integer -> (the value, its lowest, its highest); the value is kept so its id stays
#: its own while the recording lasts
_KNOWN: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _known() -> dict | None:
    """The intervals noted in the recording now running (None outside one: a vector function's body on JAX)."""
    try:
        return _KNOWN.setdefault(current(), {})
    except RuntimeError:
        return None


def _integer(value) -> bool:
    dtype = getattr(value, "dtype", None)
    return dtype is not None and np.ndim(value) == 0 and np.issubdtype(np.dtype(dtype), np.integer)


def of(value) -> tuple[int, int] | None:
    """``value``'s ``(lowest, highest)``: itself for a static int, the interval noted for a traced one, else None."""
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, (int, np.integer)):
        return int(value), int(value)
    if isinstance(value, jax.core.Tracer):
        found = (_known() or {}).get(id(value))
        return None if found is None or found[0] is not value else found[1:]
    if isinstance(value, jax.Array) and _integer(value):  # a concrete array (the jit's first, host recording)
        return int(value), int(value)
    return None


def note(value, bounds: tuple[int, int] | None):
    """Note that the traced integer ``value`` lies in ``bounds`` (None: unknown); returns ``value``."""
    known = _known() if bounds is not None and isinstance(value, jax.core.Tracer) and _integer(value) else None
    if known is not None:
        known[id(value)] = (value, int(bounds[0]), int(bounds[1]))
    return value


def _floordiv(a, b):
    if b[0] <= 0 <= b[1]:  # a divisor that may be zero or change sign: no bound
        return None
    corners = [x // y for x in a for y in b]
    return min(corners), max(corners)


def _mod(a, b):
    if b[0] != b[1] or b[0] <= 0:  # a static positive modulus: Python's (and JAX's) result lies in [0, m)
        return None
    m = b[0]
    if 0 <= a[0] and a[1] < m:
        return a
    return 0, m - 1


#: interval of ``a op b`` from the intervals of ``a`` and ``b``
_RULES = {
    operator.add: lambda a, b: (a[0] + b[0], a[1] + b[1]),
    operator.sub: lambda a, b: (a[0] - b[1], a[1] - b[0]),
    operator.mul: lambda a, b: (min(x * y for x in a for y in b), max(x * y for x in a for y in b)),
    operator.floordiv: _floordiv,
    operator.mod: _mod,
}


def binop(op, left, right, plain=None):
    """``op(left, right)`` (a Python binary operator, ``plain`` the operator it computes when ``op`` is in-place),
    its interval noted where both sides have one."""
    value = op(left, right)
    rule = _RULES.get(plain or op)
    if rule is not None and isinstance(value, jax.core.Tracer):
        a, b = of(left), of(right)
        if a is not None and b is not None:
            note(value, rule(a, b))
    return value


def hull(value, parts):
    """``value`` (a select among ``parts``) noted with the hull of their intervals, where each has one."""
    found = [of(p) for p in parts]
    if found and all(f is not None for f in found):
        note(value, (min(f[0] for f in found), max(f[1] for f in found)))
    return value


def fold(value, parts, pick):
    """``value`` (``min`` or ``max`` of ``parts``, ``pick`` that builtin) noted with ``pick`` of their bounds."""
    found = [of(p) for p in parts]
    if found and all(f is not None for f in found):
        note(value, (pick(f[0] for f in found), pick(f[1] for f in found)))
    return value


def trips(start, stop, step: int) -> int | None:
    """The most iterations ``range(start, stop, step)`` runs for any values the bounds allow (None: unknown)."""
    a, b = of(start), of(stop)
    if a is None or b is None:
        return None
    return max(0, math.ceil((b[1] - a[0]) / step))
