"""Values a kernel's loops and branches carry: scalars a loop body rebinds (``task_id += 1``, a ping-pong toggle)
or a branch on a traced predicate assigns, held in the state per core.

A front end that reads the kernel's source knows every such name before the kernel runs, so it declares one
slot per name at the top of the kernel (``declare``), outside every section: the state's structure is then the
same in every trace (a loop's ``lax.scan``, a branch, a concurrent section traced once per segment). A loop
stores the value into its slot before its first iteration, each iteration loads it and stores the new value,
and the code after the loop loads it: the slot is the scan's carry, and a branch's ``select`` picks the taken
arm's value. Slots are per core, like TileGroup cursors, so both AIVs of a vector section carry their own.
"""

from __future__ import annotations

import dataclasses
import enum

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..core import N_CORES
from ..core import _indexed as indexed

#: the state's ``scalars`` columns: integers and booleans in one, floats in the other
INT_COLUMN, FLOAT_COLUMN = "int32", "float32"


class Kind(enum.Enum):
    """What a slot holds, fixed by the value stored before the loop or branch (its later values are cast to it)."""

    INT = "int"
    BOOL = "bool"
    FLOAT = "float"

    @property
    def column(self) -> str:
        return FLOAT_COLUMN if self is Kind.FLOAT else INT_COLUMN


def kind_of(value) -> Kind | None:
    """The slot kind of a scalar ``value`` (a Python or NumPy scalar, or a 0-d array); None for anything else."""
    if isinstance(value, (bool, np.bool_)):
        return Kind.BOOL
    if isinstance(value, (int, np.integer)):
        return Kind.INT
    if isinstance(value, (float, np.floating)):
        return Kind.FLOAT
    if isinstance(value, (jax.Array, np.ndarray)) and np.ndim(value) == 0:
        dtype = np.dtype(value.dtype)
        if dtype == np.bool_:
            return Kind.BOOL
        if np.issubdtype(dtype, np.integer):
            return Kind.INT
        if np.issubdtype(dtype, np.floating):
            return Kind.FLOAT
    return None


def declare(program, n_slots: int) -> None:
    """Give ``program``'s state ``n_slots`` zeroed slots on every core (before any section or loop)."""
    if n_slots <= 0:
        return
    state = program.state
    if state.scalars:
        raise ValueError("carried-value slots are declared once, at the top of the kernel")
    scalars = {
        INT_COLUMN: jnp.zeros((N_CORES, n_slots), jnp.int32),
        FLOAT_COLUMN: jnp.zeros((N_CORES, n_slots), jnp.float32),
    }
    program.state = dataclasses.replace(state, scalars=scalars)


def extend(program, values: list) -> int:
    """Append one slot per scalar of ``values`` on every core, each holding its value (a ``pl.struct``'s fields,
    made outside the sections and loops); the first new slot's index."""
    if program.gate is not None or program._in_section:
        raise ValueError(
            "rule 'section allocation': a concurrent section is traced once per segment, so it cannot add carried "
            "values: make the struct before the sections"
        )
    state = program.state
    first = state.scalars[INT_COLUMN].shape[1] if state.scalars else 0
    columns = {INT_COLUMN: [], FLOAT_COLUMN: []}
    for value in values:
        kind = kind_of(value)
        if kind is None:
            raise TypeError(f"a carried value is a scalar (int, float or bool), got {value!r}")
        for column, cells in columns.items():  # the slot is in both columns; its kind reads one
            cells.append(jnp.asarray(value if column == kind.column else 0).astype(column))
    scalars = {}
    for column, cells in columns.items():
        added = jnp.broadcast_to(jnp.stack(cells), (N_CORES, len(cells))) if cells else jnp.zeros((N_CORES, 0), column)
        scalars[column] = jnp.concatenate([state.scalars[column], added], axis=1) if state.scalars else added
    program.state = dataclasses.replace(state, scalars=scalars)
    return first


def store(program, slot: int, kind: Kind, value) -> None:
    """``value`` into ``slot`` on the current core, where the current issue runs (a gated section's other segments
    keep what their own iterations stored); outside the sections, on every core."""
    if not program._go():
        return
    column = program._state.scalars[kind.column]
    value = jnp.asarray(value).astype(column.dtype)
    if program._pred is not None:  # a section's branch or loop iteration run in line: where it is taken
        value = jnp.where(program._pred, value, load(program, slot, kind).astype(column.dtype))
    if program._in_section:
        updated = indexed.put(column, (program.core, slot), value)
    else:  # before the sections: every core starts from it
        start = (0, slot if isinstance(slot, (int, np.integer)) else jnp.asarray(slot, jnp.int32))
        updated = jax.lax.dynamic_update_slice(column, jnp.broadcast_to(value, (N_CORES, 1)), start)
    # the state's other fields untouched: the issues waiting in the data plane's window keep theirs
    program._state = eqx.tree_at(lambda s: s.scalars[kind.column], program._state, updated)


def load(program, slot: int, kind: Kind):
    """The value in ``slot`` on the current core (a 0-d int32, bool or float32 array)."""
    value = indexed.get(program._state.scalars[kind.column], (program.core, slot))
    return value.astype(bool) if kind is Kind.BOOL else value
