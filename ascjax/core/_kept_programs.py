"""Programs compiled ahead of time and held here, not in JAX's caches: a shared program survives ``jax.clear_caches``.

A process that bounds its memory drops JAX's compiled programs now and then (a test worker after a file, a
long sweep script). A program many calls share (the control plane of a size class) then goes back to be traced,
lowered and loaded again: 1-2 s each time on a 2-core x86 VM, for a program that takes milliseconds to run.
``KeptPrograms`` compiles one program per argument structure (``program_key``) with ``jax.jit(...).lower(...)
.compile(...)`` and keeps the executable itself, so only its own ``clear`` (``ascjax.clear_caches``) drops it.

XLA compiles without holding Python's lock, so a program can compile in a thread of its own while the caller
traces and compiles another (``KeptPrograms.start``): two programs that run one after the other take the longer
of their two compiles, not the sum.
"""

from __future__ import annotations

import collections
import contextvars
import threading
from concurrent.futures import Future

import equinox as eqx
import jax
import numpy as np

from ._numerics import accepted


def program_key(args) -> tuple:
    """What names one program of a function: the arguments' structure, static values and array shapes."""
    return _key(*eqx.partition(args, eqx.is_array))


def _is_value(x) -> bool:
    """An argument the program takes as an array: an array, or the shape and dtype of one (``start``)."""
    return eqx.is_array(x) or isinstance(x, jax.ShapeDtypeStruct)


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
        dynamic, static = eqx.partition(args, _is_value)
        dynamic = jax.tree.map(np.asarray, dynamic)  # host arrays: no weak types to differ from the compiled ones
        compiled, out_static = self._entry(dynamic, static, background=False)[1].result()
        return eqx.combine(compiled(dynamic), out_static)

    def start(self, *args):
        """The program for ``args`` (arrays, or ``jax.ShapeDtypeStruct`` of them) traced and lowered in a thread of its
        own and compiled there, unless held already; returns its outputs' shapes and dtypes once it is lowered (a
        later call waits for the compile)."""
        dynamic, static = eqx.partition(args, _is_value)
        dynamic = jax.tree.map(lambda x: jax.ShapeDtypeStruct(np.shape(x), x.dtype), dynamic)
        return self._entry(dynamic, static, background=True)[0].result()

    def _entry(self, dynamic, static, background: bool) -> tuple[Future, Future]:
        """``(output shapes, (executable, static outputs))`` of the program, as futures: held, or made now."""
        key = _key(dynamic, static)
        hit = self._programs.get(key)
        if hit is None:
            hit = self._programs[key] = (Future(), Future())
            while len(self._programs) > self.kept:
                self._programs.popitem(last=False)
            make = contextvars.copy_context().run
            if background:
                threading.Thread(target=make, args=(self._compile, key, dynamic, static, *hit), daemon=True).start()
            else:
                make(self._compile, key, dynamic, static, *hit)
        else:
            self._programs.move_to_end(key)
        return hit

    def _compile(self, key, dynamic, static, shapes: Future, program: Future) -> None:
        out_static = []

        def arrays_out(d):
            arrays, rest = eqx.partition(self.fun(*eqx.combine(d, static)), eqx.is_array)
            out_static.append(rest)
            return arrays

        try:
            lowered = jax.jit(arrays_out).lower(dynamic)
            out = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), lowered.out_info)
            shapes.set_result(eqx.combine(out, out_static[0]))
            program.set_result((lowered.compile(accepted(self.compiler_options)), out_static[0]))
        except BaseException as error:  # the caller's thread raises it
            for future in (shapes, program):
                if not future.done():
                    future.set_exception(error)
            self._programs.pop(key, None)
            if not isinstance(error, Exception):
                raise

    def clear(self) -> None:
        """Drop the held programs."""
        self._programs.clear()

    def __len__(self) -> int:
        return len(self._programs)
