"""Programs compiled ahead of time and held here, not in JAX's caches: a shared program survives ``jax.clear_caches``.

A process that bounds its memory drops JAX's compiled programs now and then (a test worker after a file, a
long sweep script). A program many calls share (the control plane of a size class) then goes back to be traced,
lowered and loaded again: 1-2 s each time on a 2-core x86 VM, for a program that takes milliseconds to run.
``KeptPrograms`` compiles one program per argument structure (``program_key``) with ``jax.jit(...).lower(...)
.compile(...)`` and keeps the executable itself, so only its own ``clear`` (``ascjax.clear_caches``) drops it.
"""

from __future__ import annotations

import collections

import equinox as eqx
import jax
import numpy as np

from ._numerics import accepted


def program_key(args) -> tuple:
    """What names one program of a function: the arguments' structure, static values and array shapes."""
    return _key(*eqx.partition(args, eqx.is_array))


def _key(dynamic, static) -> tuple:
    leaves, treedef = jax.tree.flatten(dynamic)
    static_leaves, static_def = jax.tree.flatten(static)
    return treedef, static_def, tuple(static_leaves), tuple((np.shape(x), np.dtype(x.dtype)) for x in leaves)


#: How many programs a ``KeptPrograms`` holds (the least recently called goes first): a process's size classes and
#: the option sets it runs them with.
PROGRAMS_KEPT = 16


class KeptPrograms:
    """``fun(*args)`` compiled with ``compiler_options``, one executable per ``program_key``, held here. Call it
    outside JAX transformations (its arrays are taken as host values); its non-array outputs are those of the
    trace."""

    def __init__(self, fun, compiler_options: dict, kept: int = PROGRAMS_KEPT):
        self.fun = fun
        self.compiler_options = dict(compiler_options)
        self.kept = kept
        self._programs: collections.OrderedDict = collections.OrderedDict()

    def __call__(self, *args):
        dynamic, static = eqx.partition(args, eqx.is_array)
        key = _key(dynamic, static)
        dynamic = jax.tree.map(np.asarray, dynamic)  # host arrays: no weak types to differ from the compiled ones
        hit = self._programs.get(key)
        if hit is None:
            hit = self._programs[key] = self._compile(dynamic, static)
            while len(self._programs) > self.kept:
                self._programs.popitem(last=False)
        else:
            self._programs.move_to_end(key)
        compiled, out_static = hit
        return eqx.combine(compiled(dynamic), out_static)

    def _compile(self, dynamic, static) -> tuple:
        out_static = []

        def arrays_out(d):
            arrays, rest = eqx.partition(self.fun(*eqx.combine(d, static)), eqx.is_array)
            out_static.append(rest)
            return arrays

        compiled = jax.jit(arrays_out).lower(dynamic).compile(accepted(self.compiler_options))
        return compiled, out_static[0]

    def clear(self) -> None:
        """Drop the held programs."""
        self._programs.clear()

    def __len__(self) -> int:
        return len(self._programs)
