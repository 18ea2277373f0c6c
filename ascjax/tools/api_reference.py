"""The API reference a reader of the repository finds without a built site: every ``Program`` method and every
``ascjax.pl`` function with its whole signature, rendered from the instruction registry and the functions
themselves, so the page cannot disagree with the code.

``python -m ascjax.tools.api_reference > docs/api/reference.md`` writes it; a test checks that the page in the
repository is the one this renders.
"""

from __future__ import annotations

import inspect
import sys

from .. import isa
from ..front import Program, pl

#: The instruction families in the order the page lists them: the ``ascjax.isa`` module that declares each.
FAMILIES = (
    ("mte", "Data movement (MTE1, MTE2, MTE3)"),
    ("cube", "The cube: mmad and matmul"),
    ("fixpipe", "The fixpipe: L0C out, config registers"),
    ("vector", "Vector compute on UB"),
    ("scalar", "The scalar unit"),
    ("sync", "Flags, barriers, mutexes"),
    ("cross_core", "Cross-core events"),
)
#: ``Program`` members that are not instructions but belong on the page: the allocator, loops, branches, sections.
PROGRAM_MEMBERS = (
    "alloc", "free", "tile_group", "range", "cond", "cube", "vector", "section_cube", "section_vector",
    "get_block_idx", "get_subblock_idx", "gm",
)  # fmt: skip


def _signature(fn, drop_self: bool = True) -> str:
    """``fn``'s signature as it reads in a call (annotations kept as written, ``self`` dropped)."""
    sig = inspect.signature(fn)
    params = list(sig.parameters.values())
    if drop_self and params and params[0].name == "self":
        params = params[1:]
    return str(sig.replace(parameters=params, return_annotation=inspect.Signature.empty))


def _first_line(doc: str | None) -> str:
    """A docstring's first paragraph on one line (a table cell)."""
    if not doc:
        return ""
    return " ".join(inspect.cleandoc(doc).split("\n\n")[0].split()).replace("|", "\\|")


def _instruction_table(title: str, instrs) -> list[str]:
    """A section of the page: one row per instruction, by name."""
    lines = ["", f"## {title}", "", "| call | kind, core, pipe | what |", "|---|---|---|"]
    for instr in sorted(instrs, key=lambda i: i.name):
        where = f"{instr.kind}, {instr.core}, {instr.pipe or 'named by the arguments'}"
        call = f"k.{instr.name}{_signature(getattr(Program, instr.name))}"
        lines.append(f"| `{call}` | {where} | {_first_line(instr.summary)} |")
    return lines


def render() -> str:
    """The whole page, as Markdown."""
    lines = [
        "# API reference: `Program` and `ascjax.pl`",
        "",
        "Rendered from the code by `python -m ascjax.tools.api_reference` (a test keeps this page current). Every",
        "`Program` instruction method issues the instruction of that name from the registry (`ascjax.isa`); its",
        "signature is the instruction's data function's, less the state. Guides: [concepts](../concepts.md),",
        "[tile language](../tile-language.md), [PyPTO-Pro kernels](../pypto.md).",
        "",
        "## `Program`: allocation, loops, branches, sections",
        "",
        "| method | what |",
        "|---|---|",
    ]
    for name in PROGRAM_MEMBERS:
        member = getattr(Program, name, None)
        if member is None:
            continue
        member = member.fget if isinstance(member, property) else member
        lines.append(f"| `k.{name}{_signature(member)}` | {_first_line(member.__doc__)} |")
    listed = set()
    for family, title in FAMILIES:
        instrs = [instr for instr, _ in getattr(isa, family).INSTRUCTIONS]
        lines += _instruction_table(f"`Program` instructions: {title}", instrs)
        listed.update(instr.name for instr in instrs)
    others = [instr for name, instr in isa.instructions().items() if name not in listed]
    if others:  # registered outside ascjax.isa (``isa.register``)
        lines += _instruction_table("`Program` instructions: registered by the user", others)
    lines += ["", "## `ascjax.pl`: the tile language", "", "| call | what |", "|---|---|"]
    for name in sorted(pl.__all__):
        fn = getattr(pl, name)
        if inspect.isfunction(fn):
            lines.append(f"| `pl.{name}{_signature(fn, drop_self=False)}` | {_first_line(fn.__doc__)} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
