"""The machine state: one immutable pytree threaded through every op.

Data (GM tensors, on-chip tiles in physical layout) sits beside what the hardware keeps
for synchronisation (unit-flag bits, SetFlag bits) and what the emulator keeps to explain
a run (wait records per pipe, the first error, the op counter, loop indices).
"""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Int

from . import indexed
from .chip import Chip
from .core import AIC, AIC_FLAG_PAIRS, AIV0, AIV1, AIV_FLAG_PAIRS, N_CORES, N_PIPES, Buffer, Pipe
from .cross_core import CrossCore
from .granules import buffer_granules, gm_grid
from .hazards import N_GLOBAL_PIPES, READERS, Shadow, clock_width, shadow_key
from .options import Options
from .timing import Costs, Timeline, default_costs

#: Nesting depth of loops whose indices are recorded with errors.
MAX_LOOP_DEPTH = 4
#: Warning bits (the run still computes; the report lists them).
N_WARNINGS = 3
WARN_DIRECTION = 0  # unit flag on, mmad direction differs from the fixpipe's read order
WARN_SET_PIPE = 1  # a cross-core set on a pipe other than the one of the data op before it
WARN_WAIT_PIPE = 2  # a cross-core wait on a pipe other than the one of the data op after it
#: Bits of ``State.gm_written``: how a block wrote a GM element (a launch merges the blocks' GM by them).
GM_PLAIN = 1
GM_ATOMIC = 2


class WaitKind:
    UNIT_FLAG = 0  # waits for L0C unit-flag blocks
    FLAG = 1  # waits for a SetFlag bit (src pipe, dst pipe, event id)
    BARRIER = 2  # PIPE_ALL barrier waiting for a blocked pipe
    CROSS_CORE = 3  # waits for a cross-core event (value: sync mode, count: event id, lo/hi: source cores)


class PipeWait(eqx.Module):
    """Per-pipe record (every pipe of the block) of the wait that blocked it (op == -1: the pipe is running)."""

    op: Int[Array, " P"]
    seq: Int[Array, " P"]
    kind: Int[Array, " P"]
    value: Int[Array, " P"]  # awaited flag value; for a barrier the pipe it waits for
    lo: Int[Array, " P"]  # unit flag: first unsatisfied block; flag: src pipe
    hi: Int[Array, " P"]  # unit flag: last unsatisfied block; flag: dst pipe
    count: Int[Array, " P"]  # unit flag: number of unsatisfied blocks; flag: event id
    last_op: Int[Array, " P"]  # the op that last touched what it waits for
    last_mode: Int[Array, " P"]  # that op's unit_flag_mode
    hint_op: Int[Array, " P"]  # an op issued later that would have released the wait
    loop: Int[Array, "P L"]
    mask: Bool[Array, "P B"]  # the L0C blocks a unit-flag wait waits on
    all_pipes: Bool[Array, " P"]  # the wait stops every pipe of its core (a cross-core wait on A2/A3)

    @staticmethod
    def empty(n_blocks: int) -> PipeWait:
        neg = jnp.full((N_GLOBAL_PIPES,), -1, jnp.int32)
        zero = jnp.zeros((N_GLOBAL_PIPES,), jnp.int32)
        return PipeWait(
            op=neg,
            seq=zero,
            kind=zero,
            value=zero,
            lo=zero,
            hi=zero,
            count=zero,
            last_op=neg,
            last_mode=zero,
            hint_op=neg,
            loop=jnp.zeros((N_GLOBAL_PIPES, MAX_LOOP_DEPTH), jnp.int32),
            mask=jnp.zeros((N_GLOBAL_PIPES, n_blocks), bool),
            all_pipes=jnp.zeros((N_GLOBAL_PIPES,), bool),
        )

    @property
    def blocked(self) -> Bool[Array, " P"]:
        return self.op >= 0


class ErrorRecord(eqx.Module):
    """The first error of a run (code 0: none). Fields a..e depend on the code."""

    code: Int[Array, ""]
    op: Int[Array, ""]
    seq: Int[Array, ""]
    core: Int[Array, ""]
    pipe: Int[Array, ""]
    a: Int[Array, ""]
    b: Int[Array, ""]
    c: Int[Array, ""]
    d: Int[Array, ""]
    e: Int[Array, ""]
    loop: Int[Array, " L"]

    @staticmethod
    def empty() -> ErrorRecord:
        z = jnp.zeros((), jnp.int32)
        return ErrorRecord(z, z - 1, z, z, z, z, z, z, z, z, jnp.zeros((MAX_LOOP_DEPTH,), jnp.int32))


class Aic(eqx.Module):
    """The cube core: its buffers (tile name -> physical array) and sync hardware."""

    l1: dict[str, Array]
    l0a: dict[str, Array]
    l0b: dict[str, Array]
    l0c: dict[str, Array]
    bt: dict[str, Array]
    unit_flag: Int[Array, " B"]  # one bit per 512 B block of L0C
    uf_last_op: Int[Array, " B"]  # last mmad/fixpipe that touched each block
    uf_last_mode: Int[Array, " B"]  # and its unit_flag_mode
    uf_set_op: Int[Array, " B"]  # the UPDATE that last set each block to 1
    mmad_direction: Int[Array, ""]  # 0: M first (SetMMColumnMajor), 1: N first (SetMMRowMajor)
    saturation: Bool[Array, ""]  # CTRL[48] == 0: inf -> +-max, NaN -> 0
    # happens-before edges carried by the sync hardware (vector clocks of the signaller)
    uf_vc: Int[Array, "B G"]  # clock of the UPDATE that last flipped each unit-flag block
    auto_vc: Int[Array, "B G"]  # clock of the last phase-less matmul per block (framework M->FIX sync)
    m_barrier: Int[Array, ""]  # the M pipe's own clock at its last PipeBarrier<PIPE_M>

    @staticmethod
    def empty(chip: Chip, width: int, data_only: bool = False) -> Aic:
        """The cube core before a kernel; ``data_only`` (the data plane): its buffers and config registers only."""
        n_blocks = chip.l0c_blocks
        if data_only:
            none = dict.fromkeys(("unit_flag", "uf_last_op", "uf_last_mode", "uf_set_op", "uf_vc", "auto_vc"))
            return Aic(
                l1={}, l0a={}, l0b={}, l0c={}, bt={}, mmad_direction=jnp.zeros((), jnp.int32),
                saturation=jnp.ones((), bool), m_barrier=None, **none,
            )  # fmt: skip
        return Aic(
            l1={},
            l0a={},
            l0b={},
            l0c={},
            bt={},
            unit_flag=jnp.zeros((n_blocks,), jnp.int32),
            uf_last_op=jnp.full((n_blocks,), -1, jnp.int32),
            uf_last_mode=jnp.zeros((n_blocks,), jnp.int32),
            uf_set_op=jnp.full((n_blocks,), -1, jnp.int32),
            mmad_direction=jnp.zeros((), jnp.int32),
            saturation=jnp.ones((), bool),
            uf_vc=jnp.zeros((n_blocks, width), jnp.int32),
            auto_vc=jnp.full((n_blocks, width), -1, jnp.int32),
            m_barrier=jnp.zeros((), jnp.int32),
        )


#: The legal SetFlag (core, src pipe, dst pipe) triples in a fixed order: a flag's vector
#: clocks are kept for these only (47 a block, not 3 x 7 x 7 = 147).
FLAG_SLOTS = tuple(
    (core, src, dst)
    for core, pairs in ((AIC, AIC_FLAG_PAIRS), (AIV0, AIV_FLAG_PAIRS), (AIV1, AIV_FLAG_PAIRS))
    for src, dst in sorted(pairs)
)
_FLAG_SLOT = {triple: i for i, triple in enumerate(FLAG_SLOTS)}


def flag_slot(core: int, src: Pipe, dst: Pipe) -> int:
    """Row of ``SyncFlags.vc`` that holds the clocks of flag ``src -> dst`` on ``core`` (a legal pair)."""
    return _FLAG_SLOT[(core, src, dst)]


class SyncFlags(eqx.Module):
    """Intra-core SetFlag bits of every core: [core, src pipe, dst pipe, event id]."""

    bits: Bool[Array, "C P P E"]
    op: Int[Array, "C P P E"]  # the notify that set each bit
    vc: Int[Array, "F E G"]  # that notify's vector clock (the edge a wait joins), per legal pair (``flag_slot``)

    @staticmethod
    def empty(chip: Chip, width: int) -> SyncFlags:
        shape = (N_CORES, N_PIPES, N_PIPES, chip.intra_event_ids)
        return SyncFlags(
            bits=jnp.zeros(shape, bool),
            op=jnp.full(shape, -1, jnp.int32),
            vc=jnp.zeros((len(FLAG_SLOTS), chip.intra_event_ids, width), jnp.int32),
        )


class Issue(eqx.Module):
    """Per core: the pipe of the last data op, and a cross-core wait not yet followed by one (for warnings)."""

    data_pipe: Int[Array, " C"]  # -1: no data op yet
    wait_op: Int[Array, " C"]  # -1: none pending
    wait_pipe: Int[Array, " C"]

    @staticmethod
    def empty() -> Issue:
        neg = jnp.full((N_CORES,), -1, jnp.int32)
        return Issue(neg, neg, neg)


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
    """Everything one AI Core block holds during a run."""

    chip: Chip = eqx.field(static=True)
    options: Options = eqx.field(static=True)
    tiles: tuple = eqx.field(static=True)  # every Tile allocated so far (static metadata)
    gm_outputs: tuple = eqx.field(static=True)  # names of the GM tensors the kernel may write
    buffer_codes: tuple = eqx.field(static=True)  # shadow keys, in the order errors refer to them
    gm: dict[str, Array]
    gm_written: dict[str, Array]  # launch only (else empty): per GM output, per element GM_PLAIN | GM_ATOMIC bits
    aic: Aic
    ub: tuple[dict[str, Array], dict[str, Array]]  # each AIV's UB tiles (same layout, own data)
    wait: PipeWait  # what each blocked pipe of the block waits for
    flags: SyncFlags
    xc: CrossCore  # cross-core event counters
    cursors: dict[str, Array]  # TileGroup cursors (slot of current())
    issue_log: Issue
    vc: Int[Array, "G G"]  # vector clock of every pipe of the block
    costs: Costs  # the timing model's cost table (arrays: a vmap may sweep them)
    time: Timeline  # cycle clocks per pipe and the event trace
    shadows: dict[str, Shadow]  # per-granule access history (empty when not sanitizing)
    error: ErrorRecord
    seq: Int[Array, ""]  # ops issued so far (orders errors)
    loop: Int[Array, " L"]  # current loop indices, outermost first
    warn_op: Int[Array, " W"]  # first op that raised each warning, -1 if none

    @staticmethod
    def create(
        chip: Chip,
        gm: dict,
        outputs=(),
        options: Options | None = None,
        costs: Costs | None = None,
        *,
        track_gm_writes: bool = False,
        data_only: bool = False,
    ) -> State:
        """The state before a kernel's first op; ``track_gm_writes`` keeps the write marks a launch merges.

        ``data_only``: the data plane's state (``ascjax.dataplane``): GM, the buffers, the config registers and
        the TileGroup cursors, and no sync, sanitizer or timing state (those fields are None).
        """
        options = options or Options()
        costs = (
            default_costs(chip) if costs is None else costs
        )  # data_only: ops still name it (their cycles are dead code)
        gm_written = {name: jnp.zeros(jnp.shape(gm[name]), jnp.uint8) for name in outputs} if track_gm_writes else {}
        if data_only:
            return State(
                chip=chip, options=dataclasses.replace(options, sanitize=False, max_events=0), tiles=(),
                gm_outputs=tuple(outputs), buffer_codes=(), gm={name: jnp.asarray(x) for name, x in gm.items()},
                gm_written=gm_written, aic=Aic.empty(chip, 0, data_only=True), ub=({}, {}), wait=None, flags=None, xc=None,
                cursors={}, issue_log=None, vc=None, costs=costs, time=None, shadows={}, error=None, seq=None,
                loop=None, warn_op=None,
            )  # fmt: skip
        width = clock_width(options)
        gm = {name: jnp.asarray(x) for name, x in gm.items()}
        shadows = {}  # an on-chip buffer's shadow is added with its first tile (add_tile)
        if options.sanitize:
            for name in outputs:
                grid = gm_grid(tuple(gm[name].shape), jnp.dtype(gm[name].dtype).name, options.gm_granule_bytes)[:2]
                shadows[shadow_key(Buffer.GM, name)] = Shadow.empty(grid, len(READERS[Buffer.GM]))
        return State(
            chip=chip,
            options=options,
            tiles=(),
            gm_outputs=tuple(outputs),
            buffer_codes=tuple(shadows),
            gm=gm,
            gm_written=gm_written,
            aic=Aic.empty(chip, width),
            ub=({}, {}),
            wait=PipeWait.empty(chip.l0c_blocks),
            flags=SyncFlags.empty(chip, width),
            xc=CrossCore.empty(chip, width),
            cursors={},
            issue_log=Issue.empty(),
            vc=jnp.zeros((N_GLOBAL_PIPES, width), jnp.int32),
            costs=costs,
            time=Timeline.empty(
                (N_CORES, N_PIPES, N_PIPES, chip.intra_event_ids),
                chip.l0c_blocks,
                chip.cross_event_ids,
                options.max_events,
            ),
            shadows=shadows,
            error=ErrorRecord.empty(),
            seq=jnp.zeros((), jnp.int32),
            loop=jnp.zeros((MAX_LOOP_DEPTH,), jnp.int32),
            warn_op=jnp.full((N_WARNINGS,), -1, jnp.int32),
        )

    @property
    def data_only(self) -> bool:
        """The data plane's state: buffers only (see ``create``)."""
        return self.error is None

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
        """A state with storage for a newly allocated tile (zero-filled; a TileGroup stacks ``depth`` slots).

        The tile's buffer gets its shadow with its first tile, so a kernel that never touches a
        buffer (a cube-only kernel and UB, a vector-only kernel and L1/L0) carries none for it.
        """
        shape = tile.physical_shape if depth is None else (depth, *tile.physical_shape)
        zeros = jnp.zeros(shape, tile.np_dtype)
        state = self._with_shadows(tile.buffer)
        if tile.buffer is Buffer.UB:
            ub = tuple({**store, tile.name: zeros} for store in state.ub)
            return dataclasses.replace(state, ub=ub, tiles=(*state.tiles, tile))
        field = _BUFFER_FIELD[tile.buffer]
        store = {**getattr(state.aic, field), tile.name: zeros}
        aic = dataclasses.replace(state.aic, **{field: store})
        return dataclasses.replace(state, aic=aic, tiles=(*state.tiles, tile))

    def _with_shadows(self, buffer: Buffer) -> State:
        """The state with a (fresh) shadow for ``buffer`` (UB: one per AIV) when sanitizing and it has none."""
        keys = [shadow_key(buffer, sub=sub) for sub in (0, 1)] if buffer is Buffer.UB else [shadow_key(buffer)]
        missing = [key for key in keys if key not in self.shadows]
        if not self.options.sanitize or not missing:
            return self
        grid = (buffer_granules(self.chip, buffer),)
        shadows = {**self.shadows, **{key: Shadow.empty(grid, len(READERS[buffer])) for key in missing}}
        return dataclasses.replace(self, shadows=shadows, buffer_codes=tuple(shadows))

    def tile_at(self, buffer: Buffer, addr: int):
        """The most recently allocated tile of ``buffer`` that starts at ``addr`` (or None)."""
        hits = [t for t in self.tiles if t.buffer is buffer and t.addr == addr]
        return hits[-1] if hits else None

    def _store(self, tile, sub: int | None):
        if tile.buffer is Buffer.UB:
            if sub not in (0, 1):
                raise ValueError(f"{tile} is in UB, which each AIV has its own of: name the sub-block (0 or 1)")
            return self.ub[sub]
        return getattr(self.aic, _BUFFER_FIELD[tile.buffer])

    def tile(self, tile, sub: int | None = None) -> Array:
        """The physical array of a tile (a UB tile: of AIV ``sub``; a TileGroup slot: that slot)."""
        store = self._store(tile, sub)
        if tile.name not in store:
            raise ValueError(f"{tile} was not allocated in this kernel's state")
        data = store[tile.name]
        slot = getattr(tile, "slot", None)
        return data if slot is None else data[slot]

    def with_tile(self, tile, value, sub: int | None = None) -> State:
        """A state whose tile holds ``value`` (same shape and dtype)."""
        value = value.astype(tile.np_dtype).reshape(tile.physical_shape)
        slot = getattr(tile, "slot", None)
        store = dict(self._store(tile, sub))
        if slot is not None:  # a TileGroup slot; one whose index was out of range writes nothing
            value = jnp.where(tile.ok, value, store[tile.name][slot])
            value = indexed.put(store[tile.name], slot, value)
        store[tile.name] = value
        if tile.buffer is Buffer.UB:
            ub = tuple(store if i == sub else self.ub[i] for i in (0, 1))
            return eqx.tree_at(lambda s: s.ub, self, ub)
        field = _BUFFER_FIELD[tile.buffer]
        return eqx.tree_at(lambda s: getattr(s.aic, field), self, store)
