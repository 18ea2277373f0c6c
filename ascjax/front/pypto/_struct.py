"""``pl.struct`` and ``pl.struct_array``: records of scalars a kernel updates as it runs.

Each field (each element of a list field) is a carried-value slot of the state (``front._carried``), so a field
assigned in a ``pl.range`` loop or under an ``if`` on a traced value carries its value out of it, on each core
separately, as a loop's index or a ping-pong toggle does. A struct array indexed by a run-time value (``ring[task
% 4].slot``) reads and writes the slot that index picks. Structs are made before the sections, where the state
is laid out, or inside a section from slots the kernel reserves; a static index outside a list or array is
refused (a traced one reads and writes within the state's slots, as a clamped index).
"""

from __future__ import annotations

import contextvars

import numpy as np

from .. import _carried as carried
from .._program import current

#: carried slots a kernel reserves at its top for the structs and valid-shape tiles its sections make (a section is
#: traced once per segment: it cannot add slots, and each trace takes the same reserved ones, in the order it makes them)
SECTION_STRUCT_SLOTS = 256
#: inside a section's trace: [the next free reserved slot, the end of the reservation]
SECTION_POOL: contextvars.ContextVar = contextvars.ContextVar("section_struct_pool", default=None)


def reserve() -> int:
    """Reserve the slots for the structs the sections make (at the top of the kernel); the first one."""
    return carried.extend(current(), [0] * SECTION_STRUCT_SLOTS)


def slots_for(values: list) -> int:
    """The first of ``len(values)`` slots holding ``values``: new slots before the sections, reserved ones in a
    section (set to the values on the section's core)."""
    k = current()
    if not k._in_section:
        return carried.extend(k, values)
    pool = SECTION_POOL.get()
    if pool is None or pool[0] + len(values) > pool[1]:
        raise ValueError(
            f"rule 'struct': the structs a section makes take more than the {SECTION_STRUCT_SLOTS} slots reserved for "
            "them: make the large ones before the sections"
        )
    first = pool[0]
    pool[0] += len(values)
    for i, value in enumerate(values):
        carried.store(k, first + i, carried.kind_of(value), value)
    return first


def _static(value) -> int | None:
    return int(value) if isinstance(value, (int, np.integer)) else None


def _checked(index, size: int, what: str):
    static = _static(index)
    if static is not None and not 0 <= static < size:
        raise IndexError(f"rule 'struct index': index {static} of {what} is outside [0, {size})")
    return index


class _Layout:
    """Where a struct's fields live: per field its first slot offset, kind and length (None: a scalar field)."""

    def __init__(self, type_name: str, fields: dict):
        if not fields:
            raise TypeError(f"rule 'struct': pl.struct({type_name!r}) needs at least one field")
        self.type_name = type_name
        self.fields: dict = {}
        self.initial: list = []
        for name, value in fields.items():
            values = list(value) if isinstance(value, (list, tuple)) else [value]
            kinds = {carried.kind_of(v) for v in values}
            if None in kinds or len(kinds) != 1:
                raise TypeError(
                    f"rule 'struct': field {type_name}.{name} = {value!r}: a field is a scalar or a list of scalars "
                    "of one type"
                )
            length = len(values) if isinstance(value, (list, tuple)) else None
            self.fields[name] = (len(self.initial), kinds.pop(), length)
            self.initial.extend(values)

    @property
    def stride(self) -> int:
        return len(self.initial)


class _ListField:
    """A struct's list field: ``s.arr[i]`` and ``s.arr[i] = v`` (``i`` static or traced)."""

    def __init__(self, first, kind: carried.Kind, length: int, what: str):
        self._first, self._kind, self._length, self._what = first, kind, length, what

    def __len__(self) -> int:
        return self._length

    def __iter__(self):
        return (self[i] for i in range(self._length))

    def __getitem__(self, index):
        return carried.load(current(), self._first + _checked(index, self._length, self._what), self._kind)

    def __setitem__(self, index, value) -> None:
        carried.store(current(), self._first + _checked(index, self._length, self._what), self._kind, value)


class Struct:
    """One record: its fields read and assigned by attribute (``s.count += 1``)."""

    def __init__(self, layout: _Layout, first):
        object.__setattr__(self, "_layout", layout)
        object.__setattr__(self, "_first", first)

    def _field(self, name: str):
        layout = object.__getattribute__(self, "_layout")
        if name not in layout.fields:
            raise AttributeError(f"struct {layout.type_name} has no field {name!r} (it has {', '.join(layout.fields)})")
        offset, kind, length = layout.fields[name]
        return object.__getattribute__(self, "_first") + offset, kind, length

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        slot, kind, length = self._field(name)
        if length is not None:
            return _ListField(slot, kind, length, f"{self._layout.type_name}.{name}")
        return carried.load(current(), slot, kind)

    def __setattr__(self, name: str, value) -> None:
        slot, kind, length = self._field(name)
        if length is None:
            carried.store(current(), slot, kind, value)
            return
        values = list(value) if isinstance(value, (list, tuple, _ListField)) else None
        if values is None or len(values) != length:
            raise TypeError(f"rule 'struct': list field {name!r} holds {length} values, got {value!r}")
        for i, item in enumerate(values):
            carried.store(current(), slot + i, kind, item)

    def __repr__(self) -> str:
        return f"pl.struct({self._layout.type_name!r}, {', '.join(self._layout.fields)})"


class StructArray:
    """``size`` records of one layout: ``ring[i]`` (``i`` static or traced) is the record at ``i``."""

    def __init__(self, size: int, layout: _Layout, first: int):
        self._size, self._layout, self._first = size, layout, first

    def __len__(self) -> int:
        return self._size

    def __getitem__(self, index) -> Struct:
        index = _checked(index, self._size, f"struct array {self._layout.type_name}[{self._size}]")
        return Struct(self._layout, self._first + index * self._layout.stride)

    def __iter__(self):
        raise TypeError("rule 'struct': a struct array is indexed (ring[i]), not iterated")


def struct(type_name: str, **fields) -> Struct:
    """``pl.struct("Name", field=initial, ...)``: a record of scalars (or lists of scalars)."""
    if not isinstance(type_name, str):
        raise TypeError(f"rule 'struct': pl.struct takes its type name first, a string, got {type_name!r}")
    layout = _Layout(type_name, fields)
    return Struct(layout, slots_for(layout.initial))


def struct_array(size: int, type_name: str, **fields) -> StructArray:
    """``pl.struct_array(size, "Name", field=initial, ...)``: ``size`` records, each starting at the initials."""
    if _static(size) is None or size < 1:
        raise TypeError(f"rule 'struct': pl.struct_array's size is a static int >= 1, got {size!r}")
    layout = _Layout(type_name, fields)
    return StructArray(int(size), layout, slots_for(layout.initial * int(size)))
