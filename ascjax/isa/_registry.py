"""The registry: every instruction by name and by path, the lookups the front ends make."""

from __future__ import annotations

from types import MappingProxyType

from ..core import Buffer
from ._instruction import Instruction

_BY_NAME: dict[str, Instruction] = {}
#: (src buffer, dst buffer) -> the instruction ``pl.load`` / ``pl.store`` / ``pl.move`` issue for that path
_ROUTES: dict[tuple[Buffer, Buffer], Instruction] = {}


def register(instruction: Instruction, *, routes=()) -> Instruction:
    """Add ``instruction``: ``Program`` then has a method of its name (the extension point).

    ``routes=[(src, dst), ...]`` also make it the instruction the tile language's path dispatch
    (``pl.load`` / ``store`` / ``move``) issues between those buffers. A name or route that is
    already taken is refused.
    """
    if not isinstance(instruction, Instruction):
        raise TypeError(f"register takes an ascjax.isa.Instruction, got {type(instruction).__name__}")
    if instruction.name in _BY_NAME:
        raise ValueError(f"an instruction named {instruction.name!r} is already registered")
    routes = [(Buffer.parse(src), Buffer.parse(dst)) for src, dst in routes]
    for path in routes:
        if path in _ROUTES:
            raise ValueError(f"the path {path[0]} -> {path[1]} is already {_ROUTES[path].name}")
    _BY_NAME[instruction.name] = instruction
    _ROUTES.update(dict.fromkeys(routes, instruction))
    return instruction


def lookup(name: str) -> Instruction | None:
    """The instruction a ``Program`` method name stands for, or None."""
    return _BY_NAME.get(name)


def instructions() -> MappingProxyType:
    """Every registered instruction, by name, in registration order."""
    return MappingProxyType(_BY_NAME)


def routes() -> tuple[tuple[Buffer, Buffer], ...]:
    """Every (src, dst) path an instruction serves."""
    return tuple(_ROUTES)


def route(src: Buffer, dst: Buffer) -> Instruction | None:
    """The instruction that moves data from ``src`` to ``dst``, or None where no path exists."""
    return _ROUTES.get((src, dst))
