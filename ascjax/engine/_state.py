"""The machine state of the data plane: one immutable pytree threaded through every data function.

GM tensors, the on-chip tiles in physical layout, the cube's config registers (mmad direction,
saturation) and the TileGroup cursors. Synchronisation, findings and timing belong to the
control plane (``ascjax.engine``), which runs the kernel's record; a state holds none of them.
"""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Int

from ..core import Buffer
from ..core import _indexed as indexed
from ..core._chip import Chip
from ..core._options import Options

#: Bits of ``State.gm_written``: how a block wrote a GM element (a launch merges the blocks' GM by them).
GM_PLAIN = 1
GM_ATOMIC = 2


class Aic(eqx.Module):
    """The cube core: its buffers (tile name -> physical array) and config registers."""

    l1: dict[str, Array]
    l0a: dict[str, Array]
    l0b: dict[str, Array]
    l0c: dict[str, Array]
    bt: dict[str, Array]
    mmad_direction: Int[Array, ""]  # 0: M first (SetMMColumnMajor), 1: N first (SetMMRowMajor)
    saturation: Bool[Array, ""]  # CTRL[48] == 0: inf -> +-max, NaN -> 0

    @staticmethod
    def empty() -> Aic:
        """The cube core before a kernel: no tiles, M first, saturating."""
        return Aic(
            l1={}, l0a={}, l0b={}, l0c={}, bt={}, mmad_direction=jnp.zeros((), jnp.int32),
            saturation=jnp.ones((), bool),
        )  # fmt: skip


_BUFFER_FIELD = {
    Buffer.L1: "l1",
    Buffer.L0A: "l0a",
    Buffer.L0B: "l0b",
    Buffer.L0C: "l0c",
    Buffer.BT: "bt",
    # the MX scale domains sit beside L0A / L0B (tile names are unique, so they share the dicts)
    Buffer.SCALE_LEFT: "l0a",
    Buffer.SCALE_RIGHT: "l0b",
}


class State(eqx.Module):
    """Everything one AI Core block holds as data during a run."""

    chip: Chip = eqx.field(static=True)
    options: Options = eqx.field(static=True)
    tiles: tuple = eqx.field(static=True)  # every Tile allocated so far (static metadata)
    gm_outputs: tuple = eqx.field(static=True)  # names of the GM tensors the kernel may write
    gm: dict[str, Array]
    gm_written: dict[str, Array]  # launch only (else empty): per GM output, per element GM_PLAIN | GM_ATOMIC bits
    aic: Aic
    ub: tuple[dict[str, Array], dict[str, Array]]  # each AIV's UB tiles (same layout, own data)
    cursors: dict[str, Array]  # TileGroup cursors (slot of current())
    # values a kernel's loops and branches carry (``ascjax.front._carried``): per core, one int32 and one float32
    # column per slot; empty unless a front end declared slots
    scalars: dict[str, Array]

    @staticmethod
    def create(
        chip: Chip, gm: dict, outputs=(), options: Options | None = None, *, track_gm_writes: bool = False
    ) -> State:
        """The state before a kernel's first op; ``track_gm_writes`` keeps the write marks a launch merges."""
        gm_written = {name: jnp.zeros(jnp.shape(gm[name]), jnp.uint8) for name in outputs} if track_gm_writes else {}
        return State(
            chip=chip, options=options or Options(), tiles=(), gm_outputs=tuple(outputs),
            gm={name: jnp.asarray(x) for name, x in gm.items()}, gm_written=gm_written, aic=Aic.empty(), ub=({}, {}),
            cursors={}, scalars={},
        )  # fmt: skip

    def mark_gm(self, name: str, written, atomic: bool, start=None) -> State:
        """Record which elements of GM output ``name`` an op wrote, with an atomic add or a plain
        store; a no-op outside a launch. ``written``: a bool mask of the whole tensor, or with
        ``start`` of the window there (only that window of the marks is read and written)."""
        if name not in self.gm_written:
            return self
        bit = jnp.uint8(GM_ATOMIC if atomic else GM_PLAIN)
        marks = self.gm_written[name]
        if start is None:
            marks = marks | jnp.where(written, bit, jnp.uint8(0))
        else:
            window = jax.lax.dynamic_slice(marks, start, written.shape) | jnp.where(written, bit, jnp.uint8(0))
            marks = jax.lax.dynamic_update_slice(marks, window, start)
        return eqx.tree_at(lambda s: s.gm_written[name], self, marks)

    def add_tile(self, tile, depth: int | None = None) -> State:
        """A state with storage for a newly allocated tile (zero-filled; a TileGroup stacks ``depth`` slots)."""
        shape = tile.physical_shape if depth is None else (depth, *tile.physical_shape)
        zeros = jnp.zeros(shape, tile.np_dtype)
        if tile.buffer is Buffer.UB:
            ub = tuple({**store, tile.name: zeros} for store in self.ub)
            return dataclasses.replace(self, ub=ub, tiles=(*self.tiles, tile))
        field = _BUFFER_FIELD[tile.buffer]
        store = {**getattr(self.aic, field), tile.name: zeros}
        aic = dataclasses.replace(self.aic, **{field: store})
        return dataclasses.replace(self, aic=aic, tiles=(*self.tiles, tile))

    def tile_at(self, buffer: Buffer, addr: int):
        """The most recently allocated tile of ``buffer`` that starts at ``addr`` (or None)."""
        hits = [t for t in self.tiles if t.buffer is buffer and t.addr == addr]
        return hits[-1] if hits else None

    def _store(self, tile, sub: int | None):
        if tile.buffer is Buffer.UB:
            if sub not in (0, 1):
                raise ValueError(f"{tile} is in UB, which each AIV has its own of: name the sub-block (0 or 1)")
            store = self.ub[sub]
        else:
            store = getattr(self.aic, _BUFFER_FIELD[tile.buffer])
        if tile.key not in store:
            raise ValueError(f"{tile} was not allocated in this kernel's state")
        return store

    def tile(self, tile, sub: int | None = None) -> Array:
        """The physical array of a tile (a UB tile: of AIV ``sub``; a TileGroup slot: that slot; a view: the viewed
        tile's elements in its shape; a choice among tiles: the chosen one's)."""
        candidates = getattr(tile, "candidates", None)
        if candidates:
            return jax.lax.select_n(tile.choice, *(self.tile(t, sub) for t in candidates))
        data = self._store(tile, sub)[tile.key]
        slot = getattr(tile, "slot", None)
        data = data if slot is None else data[slot]
        return data if tile.storage is None else data.reshape(tile.physical_shape)

    def with_tile(self, tile, value, sub: int | None = None) -> State:
        """A state whose tile holds ``value`` (same shape and dtype); a choice among tiles writes the chosen one (none
        where its index was out of range)."""
        value = value.astype(tile.np_dtype).reshape(tile.physical_shape)
        candidates = getattr(tile, "candidates", None)
        if candidates:
            state = self
            for j, t in enumerate(candidates):
                state = state.with_tile(t, jnp.where(tile.ok & (tile.choice == j), value, state.tile(t, sub)), sub)
            return state
        slot = getattr(tile, "slot", None)
        store = dict(self._store(tile, sub))
        if tile.storage is not None:  # a view: the viewed tile's (or slot's) elements, in its shape
            value = value.reshape(store[tile.key].shape[1:] if slot is not None else store[tile.key].shape)
        if slot is not None:  # a TileGroup slot; one whose index was out of range writes nothing
            value = jnp.where(tile.ok, value, store[tile.key][slot])
            value = indexed.put(store[tile.key], slot, value)
        store[tile.key] = value
        if tile.buffer is Buffer.UB:
            ub = tuple(store if i == sub else self.ub[i] for i in (0, 1))
            return eqx.tree_at(lambda s: s.ub, self, ub)
        field = _BUFFER_FIELD[tile.buffer]
        return eqx.tree_at(lambda s: getattr(s.aic, field), self, store)
