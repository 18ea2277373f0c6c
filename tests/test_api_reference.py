"""The API reference page is the one the code renders, and every public call shows its named arguments."""

from __future__ import annotations

import inspect
import pathlib

import pytest

from ascjax import isa
from ascjax.front import Program, pl
from ascjax.tools import api_reference

PAGE = pathlib.Path(__file__).resolve().parents[1] / "docs" / "api" / "reference.md"


def test_the_reference_page_is_the_one_the_code_renders():
    assert PAGE.read_text(encoding="utf-8") == api_reference.render(), (
        "docs/api/reference.md is stale: run `python -m ascjax.tools.api_reference > docs/api/reference.md`"
    )


def _public_calls():
    for name in isa.instructions():
        yield f"Program.{name}", getattr(Program, name)
    for name in api_reference.PROGRAM_MEMBERS:
        yield f"Program.{name}", getattr(Program, name)
    for name in pl.__all__:
        if inspect.isfunction(getattr(pl, name)):
            yield f"pl.{name}", getattr(pl, name)


@pytest.mark.parametrize("name, fn", list(_public_calls()), ids=lambda x: x if isinstance(x, str) else "")
def test_no_public_call_hides_its_arguments_behind_kwargs(name, fn):
    kinds = {p.kind for p in inspect.signature(fn).parameters.values()}
    assert inspect.Parameter.VAR_KEYWORD not in kinds, f"{name}{inspect.signature(fn)} hides its keywords"


def test_an_instruction_method_shows_its_data_function_s_keywords():
    params = inspect.signature(Program.copy_gm2l1_nd2nz).parameters
    assert ["dst", "src", "row", "col", "rows", "cols", "dst_row", "dst_col"] == list(params)[1:]
    assert "copy_gm2l1_nd2nz(dst: 'Tile', src: 'str', *, row=0, col=0, rows=None, cols=None" in PAGE.read_text()
