"""The vector cores' compute on UB (pipe V): elementwise, reductions, broadcasts, copies, fills and casts."""

from __future__ import annotations

import inspect

from ..core import Buffer, CoreKind, InstrKind, Pipe
from ..core._memory import Tile
from ..engine import vector_cycles
from . import ops
from ._instruction import Instruction, Operand
from .ops.valid import valid_faults

UB = (Buffer.UB,)
OUT = Operand("out", UB, write=True)
FAST_COST = ("vector_bytes_per_cycle", "vector_fixed_cycles")
SLOW_COST = (
    "vector_transcendental_elements_per_cycle",
    "vector_fixed_cycles",
)  # exp / ln / sqrt / div (ops.vector.TRANSCENDENTAL)


#: the element size a V instruction without tile inputs (``fill``) is priced at
FILL_ITEMSIZE = 4


def _priced(ins: tuple, transcendental: bool):
    """The cycles of a V instruction reading the tiles among ``ins``: its largest tile at its widest dtype."""

    def cycles(c, a, gm):
        tiles = [a["out"], *(a[p] for p in ins if isinstance(a[p], Tile))]
        elements = max(t.rows * t.cols for t in tiles)
        if a.get("valid") is not None:  # a tail: the region's elements
            elements = a["valid"][0] * a["valid"][1]
        itemsize = max(t.np_dtype.itemsize for t in tiles) if len(tiles) > 1 else FILL_ITEMSIZE
        return vector_cycles(c, elements, itemsize, transcendental)

    return cycles


def _valid_faults(region_of: str):
    """The traced valid region's BOUNDS faults, against the tile ``region_of`` names."""

    def faults(chip, a, shapes):
        tile = a[region_of]
        return valid_faults(a.get("valid"), (tile.rows, tile.cols))

    return faults


def _vector(name, data, summary, ins, *, bound=(), region_of="out"):
    transcendental = bool(bound) and bound[0] in ops.vector.TRANSCENDENTAL
    return Instruction(
        name, data, InstrKind.VECTOR, CoreKind.VECTOR, Pipe.V, summary,
        operands=(OUT, *(Operand(p, UB) for p in ins)), bound=bound,
        cost=SLOW_COST if transcendental else FAST_COST, cycles=_priced(ins, transcendental),
        faults=_valid_faults(region_of) if "valid" in inspect.signature(data).parameters else None,
    )  # fmt: skip


_BINARY = [
    _vector(k, ops.binary, f"out = lhs {k} rhs elementwise (rhs a tile or a scalar)", ("lhs", "rhs"), bound=(k,))
    for k in ops.vector.BINARY
]
_UNARY = [_vector(k, ops.unary, f"out = {k}(src) elementwise", ("src",), bound=(k,)) for k in ops.vector.UNARY]
_REDUCE = [
    _vector(f"{axis}_{k}", fn, f"the {axis} {k} of src into a {shape} tile", ("src",), bound=(k,), region_of="src")
    for axis, fn, shape in (("row", ops.reduce_rows, "[rows, 1]"), ("col", ops.reduce_cols, "[1, cols]"))
    for k in ops.vector.REDUCE
]
_EXPAND = [
    _vector(f"expand_{k}", ops.expand, f"out = src {k} vec, vec a row or column broadcast", ("src", "vec"), bound=(k,))
    for k in ("add", "sub", "mul", "div")
]


def _vector_function_cycles(c, a, gm):
    """Estimate: one pass over the largest tile the function touches, at the V pipe's streaming rate (its register
    program's own length is not counted)."""
    tiles = (*a["reads"], *a["writes"])
    if not tiles:
        return c.vector_fixed_cycles
    largest = max(tiles, key=lambda t: t.rows * t.cols)
    return vector_cycles(c, largest.rows * largest.cols, largest.np_dtype.itemsize, False)


def _fillpad_cycles(c, a, gm):
    """One pass over the destination (its pad is written too)."""
    out = a["out"]
    return vector_cycles(c, out.rows * out.cols, out.np_dtype.itemsize, False)


FILLPAD = Instruction(
    "fillpad", ops.fillpad, InstrKind.VECTOR, CoreKind.VECTOR, Pipe.V,
    "out = src's valid region at the top left, the pad value elsewhere (PyPTO-Pro fillpad)",
    operands=(OUT, Operand("src", UB)), cost=FAST_COST, cycles=_fillpad_cycles, faults=_valid_faults("src"),
)  # fmt: skip

VECTOR_FUNCTION = Instruction(
    "vector_function", ops.vector_function, InstrKind.VECTOR, CoreKind.VECTOR, Pipe.V,
    "a vector function (pl.vector_function): register code over the UB tiles it loads and stores",
    operands=(Operand("reads", UB), Operand("writes", UB, write=True)), cost=FAST_COST,
    cycles=_vector_function_cycles,
)  # fmt: skip
INSTRUCTIONS = tuple(
    (instr, routes)
    for instr, routes in (
        *((i, ()) for i in (*_BINARY, *_UNARY, *_REDUCE, *_EXPAND)),
        (_vector("copy_ub2ub", ops.copy, "a UB -> UB copy of the same element count", ("src",)), ((UB[0], UB[0]),)),
        (_vector("fill", ops.fill, "out[:] = value", ()), ()),
        (_vector("cast", ops.cast, "out = src in out's dtype, rounded by mode", ("src",)), ()),
        (FILLPAD, ()),
        (VECTOR_FUNCTION, ()),
    )
)
