"""The FIX pipe's L0C reads (fixpipe to GM, move L0C -> UB) and the cube's scalar control registers."""

from __future__ import annotations

import jax.numpy as jnp

from ..core import Buffer, CoreKind, InstrKind, Pipe
from ..engine import Sync, fixpipe_cycles, gm_write_flight, l0c_to_ub_cycles
from . import ops
from ._instruction import Instruction, Operand
from .ops.ub_move import AccToVecMode, split

GM, L0C, UB = Buffer.GM, Buffer.L0C, Buffer.UB
FIX_COST = ("fix_elements_per_cycle", "fix_fixed_cycles", "unit_flag_latency_cycles")
_TO_GM = (Operand("src", (L0C,)), Operand("dst", (GM,), write=True), Operand("quant_scale", (GM,)))
_TO_UB = (Operand("src", (L0C,)), Operand("dst", (UB,), write=True))


def _to_gm_sizes(a):
    src = a["src"]
    m = src.rows - a.get("src_row", 0) if a.get("m") is None else a["m"]
    n = src.cols - a.get("src_col", 0) if a.get("n") is None else a["n"]
    return m, n


def _to_gm(c, a, gm):
    return fixpipe_cycles(c, gm[a["dst"]].name, *_to_gm_sizes(a))


def _to_gm_bytes(a, gm):
    m, n = _to_gm_sizes(a)
    return m * n * gm[a["dst"]].itemsize


def _to_ub(c, a, gm):
    src = a["src"]
    m = src.rows if a.get("m") is None else a["m"]
    n = src.cols if a.get("n") is None else a["n"]
    (_, rows0, _, cols0), (_, rows1, _, cols1) = split(AccToVecMode(a["acc_to_vec_mode"]), m, n)
    return l0c_to_ub_cycles(c, a["dst"].dtype, jnp.maximum(rows0 * cols0, rows1 * cols1))


def _to_ub_faults(chip, a, shapes):
    """A move out of L0C's run-time region outside its L0C tile."""
    mode = a.get("acc_to_vec_mode", AccToVecMode.SingleModeVec0)
    return ops.l0c_to_ub_faults(a["src"], a["dst"], mode, a.get("m"), a.get("n"))


def _to_gm_faults(chip, a, shapes):
    """A fixpipe's traced sizes against its L0C region and its traced GM offsets against the output tensor."""
    sizes = {k: a[k] for k in ("m", "n", "src_row", "src_col", "dst_row", "dst_col", "nz2nd") if k in a}
    return ops.fixpipe_faults(a["src"], shapes[a["dst"]], **sizes)


def _store_faults(chip, a, shapes):
    """``store``'s traced (row, col) offsets and tail sizes against the output tensor: a fixpipe's."""
    row, col = a.get("offsets", (0, 0))
    return ops.fixpipe_faults(a["src"], shapes[a["dst"]], m=a.get("m"), n=a.get("n"), dst_row=row, dst_col=col)


def _read(name, data, summary, operands, cost, cycles, faults=None):
    to_gm = any(GM in op.buffers and op.write for op in operands)
    return Instruction(
        name, data, InstrKind.L0C_READ, CoreKind.CUBE, Pipe.FIX, summary, operands=operands, cost=cost,
        cycles=cycles, flight=gm_write_flight if to_gm else None, gm_bytes=_to_gm_bytes if to_gm else None,
        faults=faults,
    )  # fmt: skip


def _config(name, data, summary, sync=Sync.NONE):
    return Instruction(
        name, data, InstrKind.CONFIG, CoreKind.CUBE, Pipe.S, summary, sync=sync, cost=("scalar_cycles",),
        cycles=lambda c, a, gm: c.scalar_cycles,
    )  # fmt: skip


GM_COST = (*FIX_COST, "gm_write_latency_cycles", "gm_bytes_per_cycle")
INSTRUCTIONS = (
    (_read("fixpipe", ops.fixpipe, "L0C -> GM (Nz -> ND, cast, relu, quantise); the unit flag's reader side (STPhase)",
           _TO_GM, GM_COST, _to_gm, _to_gm_faults), ()),
    (_read("copy_l0c2gm", ops.fixpipe, "asc_copy_l0c2gm: fixpipe under its Ascend C name", _TO_GM, GM_COST,
           _to_gm, _to_gm_faults), ()),
    (_read("store", ops.store, "PyPTO-Pro store out of L0C: fixpipe with phase = STPhase",
           (*_TO_GM[:2], Operand("scale", (GM,))), GM_COST, _to_gm, _store_faults), ((L0C, GM),)),
    (_read("copy_l0c2ub", ops.copy_l0c2ub, "L0C -> UB of one or both AIVs (Nz -> ND, cast), on the cube's FIX pipe",
           _TO_UB, FIX_COST, _to_ub, _to_ub_faults), ()),
    (_read("move_to_vec", ops.move_to_vec, "PyPTO-Pro move out of L0C into UB with phase = STPhase", _TO_UB,
           FIX_COST, _to_ub, _to_ub_faults), ((L0C, UB),)),
    (_config("set_l0c_copy_config", ops.set_l0c_copy_config,
             "fixpipe's config register; is_clean_unit_flag=True resets every unit flag to 0", Sync.UF_RESET), ()),
    (_config("set_mmad_direction", ops.set_mmad_direction, "the order the cube walks M and N (unit-flag reads)"), ()),
    (_config("set_ctrl_saturation", ops.set_ctrl_saturation, "saturating float -> int conversions on the cube"), ()),
)  # fmt: skip
