"""``@pl.vector_function``: register-level vector code a kernel calls on its UB tiles, one instruction of pipe V.

A call inside a vector section issues ``vector_function`` (``ascjax.isa``): it reads the tiles the body loads from
and writes the tiles it stores to (found by running the body abstractly, ``_vf_runtime.vf_accesses``), and its data
is the body run on JAX over those tiles' contents (``_vf_runtime.run_vf``). A call from inside another vector
function runs inline, as the generated code does.
"""

from __future__ import annotations

import functools
import inspect

from ...core import Buffer
from ...core._memory import Tile
from .._program import current
from .._sites import spelled
from . import _vf_runtime

#: where a vector function's tile arguments are placed for the body (past every buffer: the body reads their
#: contents by position, and distinct arguments must not look like one address to its aliasing check)
_STAND_IN_ADDRESS, _STAND_IN_STRIDE = 1 << 40, 1 << 32


class VectorFunction:
    """A ``@pl.vector_function``: call it on tiles (and scalars) inside ``with pl.section_vector():``."""

    def __init__(self, fn, guard=None):
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.guard = guard  # guard(args, kwargs, issue): the locks auto_mutex puts around the call, or None

    def __call__(self, *args, **kwargs):
        if _vf_runtime.in_vector_function():
            return _vf_runtime.call_inline(self, args, kwargs)
        k = current()
        if k.subblock is None:
            raise ValueError(
                f"rule 'vector function': {self.__name__} runs on a vector core's V pipe: call it inside "
                "'with pl.section_vector():'"
            )
        bound = inspect.signature(self.fn).bind(*args, **kwargs)
        bound.apply_defaults()
        tiles = [name for name, value in bound.arguments.items() if isinstance(value, Tile)]
        for name in tiles:
            if bound.arguments[name].buffer is not Buffer.UB:
                raise ValueError(
                    f"rule 'vector function': {self.__name__}'s {name} is {bound.arguments[name]}; a vector function "
                    "works on Vec (UB) tiles"
                )
        # the body sees plain stand-ins (a tile-group slot's index may be a run-time value); contents by position
        stand_ins = {}
        for i, name in enumerate(tiles):
            tile = bound.arguments[name]
            stand_ins[name] = Tile(f"{tile.name}<{name}>", tile.buffer, _STAND_IN_ADDRESS + i * _STAND_IN_STRIDE,
                                   tile.rows, tile.cols, tile.dtype, tile.fmt)  # fmt: skip
        body_args = bound.arguments | stand_ins
        reads, writes = _vf_runtime.vf_accesses(self.fn, (), body_args)
        read_tiles = tuple(bound.arguments[n] for n in reads)
        write_tiles = tuple(bound.arguments[n] for n in writes)
        order = [*reads, *writes]

        def body(contents):
            given = {}
            for name, value in zip(order, contents):
                given.setdefault(stand_ins[name], value)
            new = _vf_runtime.run_vf(self.fn, (), body_args, given)
            return tuple(new[stand_ins[name]] for name in writes)

        def issue():
            with spelled(self.__name__):
                k.vector_function(body, read_tiles, write_tiles)

        if self.guard is None:
            issue()
        else:
            self.guard(args, kwargs, issue)

    def __repr__(self) -> str:
        return f"<pl.vector_function {self.__name__}>"


def vector_function(fn, guard=None) -> VectorFunction:
    """``@pl.vector_function``: ``fn`` as a vector function."""
    if not inspect.isfunction(fn):
        raise TypeError(f"@pl.vector_function decorates a function, got {fn!r}")
    return VectorFunction(fn, guard)
