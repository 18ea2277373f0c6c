"""The instruction registry: one declaration per instruction, and what is bound to it."""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pytest

import ascjax as aj
from ascjax import isa, ops, pl
from ascjax.core import BUFFERS, Buffer, CoreKind, InstrKind, Pipe
from ascjax.core._memory import Tile
from ascjax.engine import Costs, Sync
from ascjax.front._program import Program

F16, F32 = "float16", "float32"


def _tile_params(instr: isa.Instruction) -> set[str]:
    """The user-facing parameters of an instruction's data function annotated as tiles."""
    return {name for name, p in instr.signature.parameters.items() if "Tile" in str(p.annotation)}


@pytest.mark.parametrize("name", sorted(isa.instructions()))
def test_every_tile_parameter_is_a_declared_operand_in_a_buffer_its_pipe_may_touch(name):
    instr = isa.lookup(name)
    declared = {op.param for op in instr.operands}
    assert _tile_params(instr) <= declared, f"{name}: undeclared tile parameters {_tile_params(instr) - declared}"
    for op in instr.operands:
        assert op.buffers, f"{name}.{op.param} names no buffer"
        if instr.pipe is not None:
            for b in op.buffers:
                assert instr.pipe in (BUFFERS[b].writers if op.write else BUFFERS[b].readers), (name, op, b)


def test_the_cost_inputs_are_fields_of_costs_and_every_field_prices_an_instruction():
    fields = {f.name for f in dataclasses.fields(Costs)}
    used = set()
    for instr in isa.instructions().values():
        assert set(instr.cost) <= fields, f"{instr.name} names unknown cost fields {set(instr.cost) - fields}"
        used |= set(instr.cost)
    assert fields - used == set(), f"no instruction declares {fields - used}"


def test_program_has_one_method_per_instruction_with_its_signature():
    for name, instr in isa.instructions().items():
        method = getattr(Program, name)
        params = list(inspect.signature(method).parameters)
        assert params[0] == "self" and params[1:] == list(instr.signature.parameters), name
        assert instr.summary in method.__doc__


def test_kinds_sync_effects_and_routes():
    assert isa.lookup("mmad").kind is isa.lookup("matmul_mx").kind is InstrKind.MMAD
    assert isa.lookup("fixpipe").kind is isa.lookup("move_to_vec").kind is InstrKind.L0C_READ
    assert isa.lookup("add").kind is InstrKind.VECTOR and isa.lookup("no_such_op") is None
    assert isa.lookup("wait_cross_core").sync is Sync.CROSS_WAIT and isa.lookup("sync_notify").sync is Sync.SET_FLAG
    assert (
        isa.route(Buffer.GM, Buffer.L1).name == "copy_gm2l1" and isa.route(Buffer.L0C, Buffer.UB).name == "move_to_vec"
    )
    assert isa.route(Buffer.L0A, Buffer.L1) is None


def test_effects_name_the_tiles_and_byte_ranges_an_issue_reads_and_writes():
    a = Tile("a", Buffer.L0A, 0, 16, 16, F16, aj.Format.ZZ)
    b = Tile("b", Buffer.L0B, 512, 16, 16, F16, aj.Format.ZN)
    c = Tile("c", Buffer.L0C, 1024, 16, 16, F32, aj.Format.NZ)
    effects = isa.lookup("mmad").effects((c, a, b, 16, 16, 16), {})
    assert [(e.operand.param, e.operand.write, e.buffer, e.byte_range) for e in effects] == [
        ("c", True, Buffer.L0C, (1024, 1024 + 16 * 16 * 4)),
        ("a", False, Buffer.L0A, (0, 512)),
        ("b", False, Buffer.L0B, (512, 1024)),
    ]
    (src, dst) = isa.lookup("fixpipe").effects(("out", c), {"m": 16})
    assert (src.tile, dst.gm, dst.byte_range, dst.operand.write) == (c, "out", None, True)


def _square(state, out: Tile, src: Tile, *, sub: int):
    """A toy data function: ``out = src * src`` (composed of the vector unit's mul)."""
    return ops.binary(state, "mul", out, src, src, sub=sub)


SQUARE = isa.Instruction(
    "toy_square", _square, InstrKind.VECTOR, CoreKind.VECTOR, Pipe.V, "out = src * src (a toy instruction)",
    operands=(isa.Operand("out", (Buffer.UB,), write=True), isa.Operand("src", (Buffer.UB,))),
    cost=("vector_bytes_per_cycle",),
)  # fmt: skip


def _square_kernel(k):
    x = k.alloc("UB", (16, 16), F32, name="x")
    y = k.alloc("UB", (16, 16), F32, name="y")
    with k.vector(0):
        k.copy_gm2ub(x, "x")
        k.sync_notify("MTE2", "V", 0)
        k.sync_wait("MTE2", "V", 0)
        k.toy_square(y, x)
        k.sync_notify("V", "MTE3", 0)
        k.sync_wait("V", "MTE3", 0)
        k.copy_ub2gm("y", y)


def test_a_toy_instruction_added_through_the_extension_point_runs():
    if isa.lookup("toy_square") is None:
        isa.register(SQUARE)
    x = np.linspace(-2, 2, 256, dtype=np.float32).reshape(16, 16)
    result = aj.run(_square_kernel, {"x": x}, {"y": ((16, 16), F32)})
    assert result.report().verdict is aj.Verdict.OK, result.report().message
    np.testing.assert_array_equal(np.asarray(result.outputs["y"]), x * x)

    def on_the_cube(k):
        k.toy_square(k.alloc("UB", (16, 16), F32), k.alloc("UB", (16, 16), F32))

    with pytest.raises(ValueError, match=r"toy_square runs on a vector core \(AIV\), but it was issued on the cube"):
        aj.run(on_the_cube, {}, {})


def test_a_declaration_that_contradicts_the_buffer_table_or_the_registry_is_refused():
    with pytest.raises(ValueError, match=r"bad_copy on pipe MTE2 writes L0A, which only pipes MTE1 write"):
        isa.Instruction(
            "bad_copy", ops.copy_l12l0a, InstrKind.MOVE, CoreKind.CUBE, Pipe.MTE2, "L1 -> L0A on the wrong pipe",
            operands=(isa.Operand("dst", (Buffer.L0A,), write=True),),
        )  # fmt: skip
    with pytest.raises(ValueError, match=r"operand 'tile' is not a parameter of copy_l12l0a"):
        isa.Instruction(
            "bad_param", ops.copy_l12l0a, InstrKind.MOVE, CoreKind.CUBE, Pipe.MTE1, "a misspelt operand",
            operands=(isa.Operand("tile", (Buffer.L0A,), write=True),),
        )  # fmt: skip
    with pytest.raises(ValueError, match=r"an instruction named 'mmad' is already registered"):
        isa.register(dataclasses.replace(isa.lookup("mmad")))
    with pytest.raises(ValueError, match=r"the path GM -> L1 is already copy_gm2l1"):
        isa.register(dataclasses.replace(SQUARE, name="toy_route"), routes=[("GM", "L1")])
    assert isa.lookup("toy_route") is None


def test_the_tile_language_dispatches_paths_through_the_registry():
    def bad_load(k):
        pl.load(k.alloc("L0A", (16, 16), F16), "x")

    with pytest.raises(ValueError, match=r"pl.load writes Mat \(L1\) or Vec \(UB\) tiles, got `"):
        aj.run(bad_load, {"x": np.zeros((16, 16), np.float16)}, {})
