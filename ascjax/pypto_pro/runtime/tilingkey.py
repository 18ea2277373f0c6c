"""Tiling keys: a kernel compiled once per combination of a few compile-time fields.

A tiling key is a plain class whose attributes are ``TilingKeyField(bits=, values=)``; ``@pl.jit(tiling_key=Cls)``
makes each field a name the kernel reads as a constant (``if UseMask == 0:`` picks an arm while the kernel is read),
and ``kernel[stream, block_dim, {"UseMask": 1}](...)`` launches the specialisation for one key. The class may give
``is_valid(key)`` (``key``: the field values in declaration order) to rule combinations out.

The fields pack side by side into one 64-bit key, each holding the index of its value in ``bits`` bits, so a field
offers at most ``2 ** bits`` values. Every mistake is a ``TilingKeyError`` (a ``ValueError``) naming the class and
field: at ``@pl.jit`` for the class, at launch for the key.
"""

from __future__ import annotations

import itertools

#: the bits of the packed key (one 64-bit tiling key per launch)
TILING_KEY_BITS = 64


class TilingKeyError(ValueError):
    """A tiling-key class or a launch's key that breaks a rule."""


class TilingKeyField:
    """One field of a tiling key: ``bits`` wide, taking one of ``values`` (distinct ints)."""

    def __init__(self, *, bits: int, values) -> None:
        self.bits = bits
        self.values = list(values)
        self.name: str | None = None

    def __set_name__(self, owner, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"TilingKeyField(bits={self.bits}, values={self.values})"


class TilingKeySchema:
    """A tiling-key class, checked: its fields in declaration order, their bit offsets and the valid keys."""

    def __init__(self, cls) -> None:
        if not isinstance(cls, type):
            raise TilingKeyError(f"rule 'tiling key': tiling_key= takes a class, got {type(cls).__name__}")
        self.cls = cls
        self.fields = [value for value in vars(cls).values() if isinstance(value, TilingKeyField)]
        if not self.fields:
            raise TilingKeyError(f"rule 'tiling key': class {cls.__name__} has no TilingKeyField attribute")
        is_valid = vars(cls).get("is_valid")
        if is_valid is not None and not callable(cls.is_valid):
            raise TilingKeyError(f"rule 'tiling key': {cls.__name__}.is_valid is not callable")
        self.is_valid = None if is_valid is None else cls.is_valid
        self.offsets = {}
        offset = 0
        for field in self.fields:
            self._check_field(field)
            self.offsets[field.name] = offset
            offset += field.bits
        if offset > TILING_KEY_BITS:
            raise TilingKeyError(
                f"rule 'tiling key': class {cls.__name__}'s fields take {offset} bits; a tiling key has "
                f"{TILING_KEY_BITS}"
            )

    def _check_field(self, field: TilingKeyField) -> None:
        where = f"field {self.cls.__name__}.{field.name}"
        if not isinstance(field.bits, int) or isinstance(field.bits, bool) or field.bits <= 0:
            raise TilingKeyError(f"rule 'tiling key': {where} needs bits > 0, got {field.bits!r}")
        if not field.values:
            raise TilingKeyError(f"rule 'tiling key': {where} has no values")
        bad = [v for v in field.values if not isinstance(v, int) or isinstance(v, bool)]
        if bad:
            raise TilingKeyError(f"rule 'tiling key': {where} takes int values, got {bad[0]!r}")
        if len(set(field.values)) != len(field.values):
            raise TilingKeyError(f"rule 'tiling key': {where} lists a value twice: {field.values}")
        if len(field.values) > 1 << field.bits:
            raise TilingKeyError(
                f"rule 'tiling key': {where} has {len(field.values)} values, more than its {field.bits} bits hold "
                f"({1 << field.bits})"
            )

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(field.name for field in self.fields)

    def valid_keys(self) -> list[tuple]:
        """Every combination of the fields' values that ``is_valid`` accepts (all of them without it)."""
        combos = itertools.product(*(field.values for field in self.fields))
        return [combo for combo in combos if self.is_valid is None or self.is_valid(combo)]

    def pack(self, key: dict) -> int:
        """The 64-bit key: each field's value index at its offset."""
        return sum(field.values.index(key[field.name]) << self.offsets[field.name] for field in self.fields)

    def check(self, key) -> dict:
        """A launch's key, checked against the class: a dict naming every field once, each a value it offers."""
        name = self.cls.__name__
        if not isinstance(key, dict):
            raise TilingKeyError(f"rule 'tiling key': launch with kernel[stream, block_dim, {{...}}], a dict of "
                                 f"{name}'s fields, got {type(key).__name__}")  # fmt: skip
        if sorted(key) != sorted(self.names):
            raise TilingKeyError(f"rule 'tiling key': the key names {sorted(key)}, but {name} has {sorted(self.names)}")
        for field in self.fields:
            if key[field.name] not in field.values:
                raise TilingKeyError(
                    f"rule 'tiling key': {name}.{field.name} = {key[field.name]!r} is not one of its values "
                    f"{field.values}"
                )
        combo = tuple(key[n] for n in self.names)
        if self.is_valid is not None and not self.is_valid(combo):
            raise TilingKeyError(f"rule 'tiling key': {name}.is_valid refuses the key {key}")
        return dict(key)
