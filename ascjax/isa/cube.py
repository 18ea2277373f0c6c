"""The cube's matmuls: ``mmad`` (and MX ``mmad_mx``) on pipe M, and PyPTO-Pro's ``matmul`` spellings with phases."""

from __future__ import annotations

from ..core import Buffer, CoreKind, InstrKind, Pipe
from ..engine import mmad_cycles
from . import ops
from ._instruction import Instruction, Operand

L0A, L0B, L0C, BT = Buffer.L0A, Buffer.L0B, Buffer.L0C, Buffer.BT
SCALES = (Buffer.SCALE_LEFT, Buffer.SCALE_RIGHT)
MMAD_COST = ("cube_macs_per_cycle", "mmad_head_cycles", "unit_flag_latency_cycles")
_MX = (Operand("scale_a", (Buffer.SCALE_LEFT,)), Operand("scale_b", (Buffer.SCALE_RIGHT,)))


def _cycles(c, a, gm):
    """The head and the compute of one mmad (the head is paid by every mmad here: the record has no notion yet of
    mmads streaming back to back)."""
    if "a" in a:  # mmad / mmad_mx: valid sizes (traced allowed)
        lhs, rhs, (m, k, n) = a["a"], a["b"], (a["m"], a["k"], a["n"])
    else:  # the PyPTO-Pro spellings: the tiles' sizes, or a tail's
        lhs, rhs = a["lhs"], a["rhs"]
        m, k, n = ops.matmul_sizes(lhs, rhs, a.get("m"), a.get("k"), a.get("n"))
    mx = a.get("mx") is not None or "scale_a" in a
    return c.mmad_head_cycles + mmad_cycles(c, lhs.dtype, rhs.c0, m, k, n, mx=mx)


def _faults(chip, a, gm_shapes):
    """An mmad's traced sizes against its tiles and the GEMV layout (the PyPTO-Pro spellings': a tail's sizes)."""
    if "a" not in a:
        if all(a.get(x) is None for x in ("m", "k", "n")):
            return ()
        sizes = ops.matmul_sizes(a["lhs"], a["rhs"], a.get("m"), a.get("k"), a.get("n"))
        return ops.mmad_faults(chip, a["dst"], a["lhs"], a["rhs"], *sizes)
    gemv = a.get("disable_gemv", True)  # mmad_mx never runs GEMV
    align = a.get("k_direction_align", False)
    return ops.mmad_faults(chip, a["c"], a["a"], a["b"], a["m"], a["k"], a["n"], gemv, align)


def _mmad(name, data, summary, operands):
    return Instruction(
        name, data, InstrKind.MMAD, CoreKind.CUBE, Pipe.M, summary, operands=operands, cost=MMAD_COST,
        cycles=_cycles, faults=_faults,
    )  # fmt: skip


INSTRUCTIONS = (
    (_mmad("mmad", ops.mmad, "C (L0C) = A (L0A) x B (L0B), or += C, + bias; the unit flag's writer side (AccPhase)",
           (Operand("c", (L0C,), write=True), Operand("a", (L0A,)), Operand("b", (L0B,)), Operand("bias", (BT,)),
            Operand("mx", SCALES))), ()),
    (_mmad("mmad_mx", ops.mmad_mx, "the MX (block-scaled) mmad of 950: E8M0 scales per 32 K elements",
           (Operand("c", (L0C,), write=True), Operand("a", (L0A,)), Operand("b", (L0B,)), *_MX,
            Operand("bias", (BT,)))), ()),
    (_mmad("matmul", ops.matmul, "dst = lhs @ rhs (+ bias); phase = AccPhase drives the unit flag",
           (Operand("dst", (L0C,), write=True), Operand("lhs", (L0A,)), Operand("rhs", (L0B,)),
            Operand("bias", (BT,)))), ()),
    (_mmad("matmul_acc", ops.matmul_acc, "dst = acc + lhs @ rhs (acc is dst)",
           (Operand("dst", (L0C,), write=True), Operand("acc", (L0C,)), Operand("lhs", (L0A,)),
            Operand("rhs", (L0B,)))), ()),
    (_mmad("matmul_mx", ops.matmul_mx, "the MX matmul with a phase",
           (Operand("dst", (L0C,), write=True), Operand("lhs", (L0A,)), Operand("rhs", (L0B,)), *_MX)), ()),
    (_mmad("matmul_mx_acc", ops.matmul_mx_acc, "dst = acc + matmul_mx(lhs, rhs, scale_a, scale_b)",
           (Operand("dst", (L0C,), write=True), Operand("acc", (L0C,)), Operand("lhs", (L0A,)),
            Operand("rhs", (L0B,)), *_MX)), ()),
)  # fmt: skip
