"""A program run on the host (its jaxpr in NumPy) until compiling it would have cost less: ski rental.

A program shared by many calls (the control plane of a size class) is worth compiling once a
process calls it often; a process that calls it once or twice (a command-line run, a first
kernel) waits seconds for a compile to save milliseconds. ``HostFirst`` has each call evaluated
on the host (``host_call``: exact for integer programs) while what its program's calls have cost
there, plus the estimate for this one, stays under what the compile costs, and compiled from then
on: a process pays at most about twice what the cheaper of the two would have cost it.
"""

from __future__ import annotations

import collections
import time

import equinox as eqx
import jax

from ._host_eval import _BATCHED, _PROGRAMS, eval_jaxpr
from ._kept_programs import program_key

#: Per function and program: its jaxpr, the structure of its outputs and its static outputs.
_TRACED: collections.OrderedDict = collections.OrderedDict()
TRACED_KEPT = 32


def host_call(fn, *args):
    """``fn(*args)`` evaluated on the host: traced once per program, then its jaxpr in NumPy (``eval_jaxpr``)."""
    closed, out_def, out_static, dynamic = _traced(fn, args)
    return eqx.combine(jax.tree.unflatten(out_def, eval_jaxpr(closed, *jax.tree.leaves(dynamic))), out_static)


def jaxpr_call(fn, *args):
    """``fn(*args)`` of traced arguments as ``host_call``'s jaxpr computes it, evaluated by JAX: a program traced for
    the host is not traced again (that takes seconds for a control plane; evaluating its jaxpr, milliseconds)."""
    closed, out_def, out_static, dynamic = _traced(fn, args)
    out = jax.core.eval_jaxpr(closed.jaxpr, closed.consts, *jax.tree.leaves(dynamic))
    return eqx.combine(jax.tree.unflatten(out_def, out), out_static)


def _traced(fn, args) -> tuple:
    """``(jaxpr, output structure, static outputs, array arguments)`` of ``fn(*args)``, traced once per program."""
    key = (fn, program_key(args))
    hit = _TRACED.get(key)
    dynamic, static = eqx.partition(args, eqx.is_array)
    if hit is None:
        closed, out_struct, out_static = eqx.filter_make_jaxpr(lambda d: fn(*eqx.combine(d, static)))(dynamic)
        hit = _TRACED[key] = (closed, jax.tree.structure(out_struct), out_static)
        while len(_TRACED) > TRACED_KEPT:
            _TRACED.popitem(last=False)
    else:
        _TRACED.move_to_end(key)
    return (*hit, dynamic)


def clear_host_caches() -> None:
    """Forget the traced programs and their NumPy evaluators."""
    _TRACED.clear()
    _PROGRAMS.clear()
    _BATCHED.clear()


class HostFirst:
    """Per program of ``compiled`` (a jitted function), whether a call runs on the host or compiled: on the host while
    its program's host calls have cost less than ``compile_s`` seconds."""

    def __init__(self, compiled, compile_s: float):
        self.compiled = compiled
        self.compile_s = compile_s
        self._host_s: dict = {}  # per program: the seconds its host calls have taken
        self._compiled: set = set()

    def __call__(self, args: tuple, on_host, host_s: float):
        """``compiled(*args)``, or ``on_host()`` (the same result, computed on the host) where that is expected to
        take ``host_s`` seconds and the program's host calls so far leave room for it."""
        key = program_key(args)
        spent = self._host_s.get(key, 0.0)
        if key in self._compiled or spent + host_s > self.compile_s:
            self._compiled.add(key)
            return self.compiled(*args)
        start = time.perf_counter()
        out = on_host()
        self._host_s[key] = spent + time.perf_counter() - start
        return out

    def reset(self) -> None:
        """Forget what the host has cost and which programs run compiled."""
        self._host_s.clear()
        self._compiled.clear()

    def compiled_programs(self) -> int:
        """How many of its programs run compiled."""
        return len(self._compiled)
