"""The scalar unit's element accesses (pipe S): ``setval_gm`` writes one element of a GM tensor."""

from __future__ import annotations

from ..core import Buffer, CoreKind, InstrKind, Pipe
from . import ops
from ._instruction import Instruction, Operand


def _faults(chip, a, shapes):
    return ops.offset_faults(*ops.scalar.setval_gm_window(shapes[a["dst"]], row=a["row"], col=a["col"]))


INSTRUCTIONS = (
    (Instruction("setval_gm", ops.setval_gm, InstrKind.SCALAR, CoreKind.ANY, Pipe.S,
                 "the scalar unit writes one element of a GM tensor (PyPTO-Pro setval, tensor[i] = value)",
                 operands=(Operand("dst", (Buffer.GM,), write=True),), cost=("scalar_cycles",),
                 cycles=lambda c, a, gm: c.scalar_cycles, faults=_faults), ()),
)  # fmt: skip
