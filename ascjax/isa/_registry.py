"""The registry: every instruction by name, and the lookups front ends and reports make."""

from __future__ import annotations

from types import MappingProxyType

from ..core import Buffer, InstrKind
from ._instruction import Instruction

_BY_NAME: dict[str, Instruction] = {}
_BY_SITE: dict[str, Instruction] = {}
#: (src buffer, dst buffer) -> the instruction ``pl.load`` / ``pl.store`` / ``pl.move`` issue for that path
_ROUTES: dict[tuple[Buffer, Buffer], Instruction] = {}


def register(instruction: Instruction, *, routes=()) -> Instruction:
    """Add ``instruction``: ``Program`` then has a method of its name (the extension point).

    ``routes=[(src, dst), ...]`` also make it the instruction the tile language's path dispatch
    (``pl.load`` / ``store`` / ``move``) issues between those buffers. A name or route that is
    already taken is refused, and so is a site name another instruction reports as another kind.
    """
    if not isinstance(instruction, Instruction):
        raise TypeError(f"register takes an ascjax.isa.Instruction, got {type(instruction).__name__}")
    if instruction.name in _BY_NAME:
        raise ValueError(f"an instruction named {instruction.name!r} is already registered")
    routes = [(Buffer.parse(src), Buffer.parse(dst)) for src, dst in routes]
    for path in routes:
        if path in _ROUTES:
            raise ValueError(f"the path {path[0]} -> {path[1]} is already {_ROUTES[path].name}")
    for name in instruction.site_names:
        other = _BY_SITE.get(name)
        if other is not None and other.kind is not instruction.kind:
            raise ValueError(
                f"{instruction.name} reports as {name!r}, a site of {other.name} (kind {other.kind}), not of kind "
                f"{instruction.kind}"
            )
    _BY_NAME[instruction.name] = instruction
    for name in instruction.site_names:
        _BY_SITE.setdefault(name, instruction)
    _ROUTES.update(dict.fromkeys(routes, instruction))
    return instruction


def lookup(name: str) -> Instruction | None:
    """The instruction a ``Program`` method name stands for, or None."""
    return _BY_NAME.get(name)


def instructions() -> MappingProxyType:
    """Every registered instruction, by name, in registration order."""
    return MappingProxyType(_BY_NAME)


def kind_of(site_name: str) -> InstrKind | None:
    """The kind of the instruction an op site names (what reports dispatch on), or None."""
    instr = _BY_SITE.get(site_name)
    return None if instr is None else instr.kind


def routes() -> tuple[tuple[Buffer, Buffer], ...]:
    """Every (src, dst) path an instruction serves."""
    return tuple(_ROUTES)


def route(src: Buffer, dst: Buffer) -> Instruction | None:
    """The instruction that moves data from ``src`` to ``dst``, or None where no path exists."""
    return _ROUTES.get((src, dst))
