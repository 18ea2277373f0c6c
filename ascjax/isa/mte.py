"""The MTE copies: GM -> L1 / UB (MTE2), L1 -> L0A / L0B / BiasTable / MX scales (MTE1), UB -> GM / L1 (MTE3)."""

from __future__ import annotations

import jax.numpy as jnp

from ..core import Buffer, CoreKind, Format, InstrKind, Pipe
from ..engine import gm_read_flight, gm_write_flight, transfer_cycles
from . import ops
from ._instruction import Instruction, Operand
from .ops import move, ub_move
from .ops.valid import valid_faults

GM, L1, L0A, L0B, BT, UB = Buffer.GM, Buffer.L1, Buffer.L0A, Buffer.L0B, Buffer.BT, Buffer.UB
SCALES = (Buffer.SCALE_LEFT, Buffer.SCALE_RIGHT)
MTE2_COST = ("mte2_bytes_per_cycle", "gm_read_latency_cycles", "gm_bytes_per_cycle")  # the last: a launch's share
MTE1_COST = ("mte1_fixed_cycles",)
MTE3_COST = ("mte3_bytes_per_cycle", "gm_write_latency_cycles", "gm_bytes_per_cycle")


def _gm_to_l1_bytes(a, gm):
    dst = a["dst"]
    rows = dst.rows - a.get("dst_row", 0) if a.get("rows") is None else a["rows"]
    cols = dst.cols - a.get("dst_col", 0) if a.get("cols") is None else a["cols"]
    return rows * cols * dst.np_dtype.itemsize


def _gm_to_l1(c, a, gm):
    return transfer_cycles(_gm_to_l1_bytes(a, gm), c.mte2_bytes_per_cycle, c.gm_read_latency_cycles)


def _gm_to_ub_bytes(a, gm):
    dst = a["dst"]
    if a.get("rows") is None and a.get("cols") is None:
        return dst.nbytes
    rows = dst.rows if a.get("rows") is None else a["rows"]
    cols = dst.cols if a.get("cols") is None else a["cols"]
    return rows * cols * dst.np_dtype.itemsize


def _gm_to_ub(c, a, gm):
    return transfer_cycles(_gm_to_ub_bytes(a, gm), c.mte2_bytes_per_cycle, c.gm_read_latency_cycles)


def _ub_to_gm_bytes(a, gm):
    src = a["src"]
    rows = src.rows if a["rows"] is None else a["rows"]
    cols = src.cols if a["cols"] is None else a["cols"]
    return rows * cols * gm[a["dst"]].itemsize


def _ub_to_gm(c, a, gm):
    return transfer_cycles(_ub_to_gm_bytes(a, gm), c.mte3_bytes_per_cycle, c.gm_write_latency_cycles)


def _ub_to_l1(c, a, gm):
    src, dst = a["src"], a["dst"]
    unit = dst.c0 if dst.fmt is Format.NZ else 1
    span = jnp.minimum(-(-src.cols // unit) * unit, dst.padded[1] - a["col"])  # Nz pads rows to whole fractals
    return transfer_cycles(src.rows * span * src.np_dtype.itemsize, c.ub_to_l1_bytes_per_cycle)


def _on_chip(field):
    """An MTE1 copy of its destination tile at the ``Costs`` rate ``field``, after the MTE1 fixed cost."""
    return lambda c, a, gm: c.mte1_fixed_cycles + transfer_cycles(a["dst"].nbytes, getattr(c, field))


def _to_l0b(c, a, gm):
    rate = c.l1_to_l0b_transposed_bytes_per_cycle if a["transpose"] else c.l1_to_l0b_bytes_per_cycle
    return c.mte1_fixed_cycles + transfer_cycles(a["dst"].nbytes, rate)


def _gm2l1_faults(chip, a, shapes):
    sizes = {k: a[k] for k in ("row", "col", "rows", "cols", "dst_row", "dst_col") if k in a}
    return ops.offset_faults(*move.gm2l1_window(a["dst"], shapes[a["src"]], **sizes))


def _region_faults(tile, a):
    """A tail copy's traced region outside its tile."""
    if a.get("rows") is None and a.get("cols") is None:
        return []
    region = (tile.rows if a.get("rows") is None else a["rows"], tile.cols if a.get("cols") is None else a["cols"])
    return valid_faults(region, (tile.rows, tile.cols))


def _gm2ub_faults(chip, a, shapes):
    sizes = {k: a[k] for k in ("row", "col", "rows", "cols") if k in a}
    window = ub_move.gm2ub_window(a["dst"], shapes[a["src"]], **sizes)
    return [*ops.offset_faults(*window), *_region_faults(a["dst"], a)]


def _ub2gm_faults(chip, a, shapes):
    sizes = {k: a[k] for k in ("row", "col", "rows", "cols") if k in a}
    window = ub_move.ub2gm_window(a["src"], shapes[a["dst"]], **sizes)
    return [*ops.offset_faults(*window), *_region_faults(a["src"], a)]


def _insert_faults(chip, a, shapes):
    """An insert's run-time (row, col) outside its L1 tile or off its fractal grid."""
    return ops.offset_faults(*ub_move.insert_window(a["dst"], a["src"], a.get("row", 0), a.get("col", 0)))


def _l1_faults(name):
    """An MTE1 copy's traced window offsets into its L1 source."""

    def faults(chip, a, shapes):
        need = move.l1_need(name, a["dst"], a.get("transpose", False))
        return ops.offset_faults(*move.l1_window(a["src"], need, a.get("row", 0), a.get("col", 0)))

    return faults


def _scale_faults(chip, a, shapes):
    """``copy_l12scale``'s traced window offsets into its L1 source."""
    return ops.copy_l12scale_faults(a["dst"], a["src"], row=a.get("row", 0), col=a.get("col", 0))


def _copy(name, data, pipe, core, src, dst, summary, *, cost, cycles, gm_bytes=None, faults=None):
    """A copy; one to or from GM (``gm_bytes``) is in flight for the GM latency after it leaves its pipe."""
    flight = gm_read_flight if GM in src else gm_write_flight if GM in dst else None
    if (flight is None) != (gm_bytes is None):
        raise ValueError(f"{name}: a copy to or from GM names its GM bytes, and only such a copy")
    cost = (*cost, *MTE1_COST) if pipe is Pipe.MTE1 else cost
    return Instruction(
        name, data, InstrKind.MOVE, core, pipe, summary,
        operands=(Operand("src", src), Operand("dst", dst, write=True)), cost=cost, cycles=cycles, flight=flight,
        gm_bytes=gm_bytes, faults=faults,
    )  # fmt: skip


CUBE, VECTOR = CoreKind.CUBE, CoreKind.VECTOR
#: (instruction, the pl paths (src, dst) it serves)
INSTRUCTIONS = (
    (_copy("copy_gm2l1", ops.copy_gm2l1, Pipe.MTE2, CUBE, (GM,), (L1,), "a GM window into an L1 tile (ND, or ND -> Nz)",
           cost=MTE2_COST, cycles=_gm_to_l1, gm_bytes=_gm_to_l1_bytes, faults=_gm2l1_faults),
     ((GM, L1),)),
    (_copy("copy_gm2l1_nd2nz", ops.copy_gm2l1_nd2nz, Pipe.MTE2, CUBE, (GM,), (L1,),
           "a GM window into an Nz L1 tile", cost=MTE2_COST, cycles=_gm_to_l1, gm_bytes=_gm_to_l1_bytes,
           faults=_gm2l1_faults), ()),
    (_copy("copy_l12l0a", ops.copy_l12l0a, Pipe.MTE1, CUBE, (L1,), (L0A,), "an L1 tile into L0A (the mmad's A)",
           cost=("l1_to_l0a_bytes_per_cycle",), cycles=_on_chip("l1_to_l0a_bytes_per_cycle"),
           faults=_l1_faults("copy_l12l0a")), ((L1, L0A),)),
    (_copy("copy_l12l0b", ops.copy_l12l0b, Pipe.MTE1, CUBE, (L1,), (L0B,), "an L1 tile into L0B (the mmad's B)",
           cost=("l1_to_l0b_bytes_per_cycle", "l1_to_l0b_transposed_bytes_per_cycle"), cycles=_to_l0b,
           faults=_l1_faults("copy_l12l0b")), ((L1, L0B),)),
    (_copy("copy_l12bt", ops.copy_l12bt, Pipe.MTE1, CUBE, (L1,), (BT,), "an L1 row into the BiasTable",
           cost=("l1_to_bt_bytes_per_cycle",), cycles=_on_chip("l1_to_bt_bytes_per_cycle"),
           faults=_l1_faults("copy_l12bt")), ((L1, BT),)),
    (_copy("copy_l12scale", ops.copy_l12scale, Pipe.MTE1, CUBE, (L1,), SCALES,
           "MX scales from L1 into ScaleLeft / ScaleRight (950)", cost=("l1_to_scale_bytes_per_cycle",),
           cycles=_on_chip("l1_to_scale_bytes_per_cycle"), faults=_scale_faults), ((L1, SCALES[0]), (L1, SCALES[1]))),
    (_copy("copy_gm2ub", ops.copy_gm2ub, Pipe.MTE2, VECTOR, (GM,), (UB,), "a GM window into a UB tile",
           cost=MTE2_COST, cycles=_gm_to_ub, gm_bytes=_gm_to_ub_bytes, faults=_gm2ub_faults), ((GM, UB),)),
    (_copy("copy_ub2gm", ops.copy_ub2gm, Pipe.MTE3, VECTOR, (UB,), (GM,), "a UB tile into a GM window",
           cost=MTE3_COST, cycles=_ub_to_gm, gm_bytes=_ub_to_gm_bytes, faults=_ub2gm_faults),
     ((UB, GM),)),
    (_copy("insert", ops.copy_ub2l1, Pipe.MTE3, VECTOR, (UB,), (L1,), "TINSERT: a UB tile into an L1 tile, ND -> Nz",
           cost=("ub_to_l1_bytes_per_cycle",), cycles=_ub_to_l1, faults=_insert_faults), ((UB, L1),)),
    (_copy("copy_ub2l1", ops.copy_ub2l1, Pipe.MTE3, VECTOR, (UB,), (L1,), "a UB tile into an L1 tile, ND -> Nz",
           cost=("ub_to_l1_bytes_per_cycle",), cycles=_ub_to_l1, faults=_insert_faults), ()),
)  # fmt: skip
