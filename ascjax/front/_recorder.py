"""Recording a kernel: every instruction a ``Program`` issues becomes an entry of the engine's record.

The recorder turns an issue into what the control plane needs, from the instruction's
declaration (``ascjax.isa``): its pipe, the byte ranges its operands read and write (a
TileGroup slot as its candidate slots and the traced index), its sync effect, and its part in
the L0C unit-flag handshake. A kernel is recorded without computing data (a dry run): the
control plane then checks its synchronisation. Spaces: each on-chip buffer of the AIC, the
UB of each AIV, and one space per GM tensor (an input is initialised). A GM access of a 2-D
tensor covers the full rows its window touches, at its (traced) row offset.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from .. import isa
from ..core import AIC, AIV0, BOUNDS_TRIP_COUNT, Buffer, Finding, Format, InstrKind, Pipe
from ..core._chip import Chip
from ..core._memory import Tile
from ..engine import GM_SPACE_PREFIX, Costs, Fault, RecordBuilder, Sync, UnitFlagRole, Window, default_costs
from ..isa.ops._machine import static_int
from ..isa.ops.fixpipe import set_mmad_direction
from ..isa.ops.ub_move import AccToVecMode, split
from ..isa.ops.unit_flag import mode_value
from . import _sites as sites

#: the flag-triple marker of the framework's inserted M -> FIX sync (PyPTO-Pro matmul / store without a phase)
AUTO_SYNC = "auto"
#: an mmad over fewer fractals than this may overlap the next accumulating one [seed 004 "small tile"]
SMALL_TILE_FRACTALS = 10
FRACTAL_ROWS = 16
#: a unit-flag read whose order the mmad direction does not match (shown when its unit flag is on)
DIRECTION_NOTE = (
    "unit flag on, but the mmad direction does not match this read's order (NZ2ND and moves to UB read N first: "
    "set_mmad_direction('n'); Nz kept reads M first: set_mmad_direction('m')). The result is right, the "
    "unit-flag overlap is lost; set_mmad_direction('{wanted}') before the mmads"
)


def _ceil_div(a, b):
    return -(-a // b)


class Recorder:
    """A ``RecordBuilder`` and the spaces of one block of ``chip`` whose GM holds ``gm`` (``inputs`` initialised);
    each issue's cycles come from its declaration and ``costs`` (default: the chip's table)."""

    def __init__(self, chip: Chip, gm: dict, inputs, costs: Costs | None = None):
        self.chip = chip
        self.costs = default_costs(chip) if costs is None else costs
        self.gm_dtypes = {name: np.dtype(x.dtype) for name, x in gm.items()}
        self.builder = RecordBuilder(n_flag_ids=chip.intra_event_ids, n_cross_ids=chip.cross_event_ids)
        self.spaces: dict = {}
        for buffer, size in chip.buffer_bytes.items():
            cores = (AIV0, AIV0 + 1) if buffer is Buffer.UB else (AIC,)
            for core in cores:
                label = f"UB@AIV{core - AIV0}" if buffer is Buffer.UB else str(buffer)
                self.spaces[(buffer, core)] = self.builder.space(label, size)
        self.gm_shapes = {name: (tuple(x.shape), np.dtype(x.dtype).itemsize) for name, x in gm.items()}
        for name, array in gm.items():
            nbytes = int(np.prod(array.shape)) * np.dtype(array.dtype).itemsize
            self.spaces[("GM", name)] = self.builder.space(
                GM_SPACE_PREFIX + name, max(nbytes, 1), initialised=name in inputs
            )
        self.mmad_direction = "m"  # set_mmad_direction's last value (the register starts M first)
        #: L0C tile name -> whether its last matmul had no phase (so the framework's M -> FIX sync is pending)
        self.auto: dict = {}
        self._auto_ids: dict = {}

    def l0c_allocated(self, tile: Tile) -> None:
        self.auto[tile.name] = jnp.asarray(False)

    # --- one issue ------------------------------------------------------------------------
    def issue(self, instr: isa.Instruction, core: int, args: tuple, kwargs: dict, tag=None) -> None:
        """Record one issue; its main entry carries ``tag`` (the front end's name for the issue)."""
        with self.builder.tagged(tag):
            self._issue(instr, core, args, kwargs)

    def _issue(self, instr: isa.Instruction, core: int, args: tuple, kwargs: dict) -> None:
        a = instr.arguments(args, kwargs)
        site = f"{sites.spelling(instr.name)} at {sites.issue_location()}"
        b = self.builder
        with b.on(core):
            if instr.sync in (Sync.SET_FLAG, Sync.WAIT_FLAG):
                flag = b.set_flag if instr.sync is Sync.SET_FLAG else b.wait_flag
                flag(a["src"], a["dst"], a["event_id"], site=site)
            elif instr.sync in (Sync.MUTEX_LOCK, Sync.MUTEX_UNLOCK):
                mutex = b.mutex_lock if instr.sync is Sync.MUTEX_LOCK else b.mutex_unlock
                mutex(a["pipe"], a["mutex_id"], site=site)
            elif instr.sync is Sync.PIPE_BARRIER:
                b.barrier(a["pipe"], site=site)
            elif instr.sync in (Sync.CROSS_SET, Sync.CROSS_WAIT):
                cross = b.cross_set if instr.sync is Sync.CROSS_SET else b.cross_wait
                with b.when(a["when"]):
                    cross(a["pipe"], a["event_id"], a["sync_mode"], subblock=a["peer"] or 0, site=site)
            elif instr.sync is Sync.UF_RESET and a.get("is_clean_unit_flag"):
                b.unit_flag_reset(site=site)
            elif instr.kind is InstrKind.CONFIG or instr.sync is Sync.UF_RESET:
                if instr.data is set_mmad_direction:
                    self.mmad_direction = str(a["direction"]).lower()
                b.instruction(instr.name, Pipe.S, site=site, cycles=self._cycles(instr, a))
            else:
                self._data(instr, core, a, site)

    def trip_count(self, core: int, trip_max: int, count) -> None:
        """A loop's traced trip count, checked against its static maximum where the scalar unit reads it: past it
        (or negative) is a BOUNDS finding, never clamped."""
        where = sites.issue_location()
        count = jnp.asarray(count, jnp.int32)
        bad = (count < 0) | (count > trip_max)
        with self.builder.on(core):
            self.builder.instruction(
                "range", Pipe.S, site=f"range at {where}",
                faults=(Fault(Finding.BOUNDS, bad, BOUNDS_TRIP_COUNT, count, trip_max),),
            )  # fmt: skip

    def _price(self, instr: isa.Instruction, a: dict):
        """Cycles of one issue on its pipe as its declaration prices them (a float of the costs; at least one)."""
        if instr.cycles is None:
            return jnp.ones((), jnp.float32)
        return jnp.maximum(jnp.asarray(instr.cycles(self.costs, a, self.gm_dtypes), jnp.float32), 1.0)

    def _cycles(self, instr: isa.Instruction, a: dict):
        """Whole cycles of one issue on its pipe (at least one), from its declaration's price."""
        return jnp.ceil(self._price(instr, a)).astype(jnp.int32)

    def _data(self, instr, core, a, site):
        reads, writes, l0c = [], [], None
        effects = instr.effects_of(a)
        first_tile = next((x.tile for x in effects if x.tile is not None), None)
        for access in effects:
            tile = access.tile
            if tile is not None and tile.buffer is Buffer.L0C:
                l0c = tile
            target = writes if access.operand.write else reads
            if tile is None:
                target.append(self._gm_spec(access.gm, a, instr, first_tile))
            elif tile.buffer is Buffer.UB and core == AIC:  # L0C -> UB: the AIVs the split mode sends parts to
                for sub in _receivers(a, l0c):
                    target.append(self._tile_spec(tile, AIV0 + sub))
            else:
                space_core = AIC if tile.buffer is not Buffer.UB else core
                region = _write_region(a, tile) if access.operand.write else None
                if tile.buffer is Buffer.L0C and instr.kind in (InstrKind.MMAD, InstrKind.L0C_READ):
                    region = _fractal_rows(_region(a, tile, traced_rows=True), tile)  # the m x n written / drained
                target.extend(self._region_specs(tile, space_core, region))
        extra = {}
        accumulate = False
        nop = False
        if instr.kind is InstrKind.MMAD:
            head = jnp.asarray(self.costs.mmad_head_cycles, jnp.float32)
            extra.update(head_cycles=jnp.ceil(head).astype(jnp.int32), head_price=head)
            accumulate = _accumulates(a)
            m, n = _mn(a)
            nop = _nop(a)
            extra.update(
                uf_role=UnitFlagRole.WRITER, small_tile=_ceil_div(m, FRACTAL_ROWS) * _ceil_div(n, FRACTAL_ROWS)
                < SMALL_TILE_FRACTALS, accumulate=accumulate, nop=nop,
            )  # fmt: skip
            if "acc" not in a:  # matmul_acc names what it accumulates as an operand
                reads += [
                    (*spec[:3], accumulate)
                    for spec in self._region_specs(l0c, AIC, _fractal_rows(_region(a, l0c, traced_rows=True), l0c))
                ]
            if nop is not False:  # a no-op (m, k or n is 0) reads and writes nothing
                reads, writes = ([(*spec[:3], spec[3] & ~nop) for spec in specs] for specs in (reads, writes))
        elif instr.kind is InstrKind.L0C_READ:
            extra.update(uf_role=UnitFlagRole.READER)
            wanted = "n" if a.get("nz2nd", True) else "m"  # NZ2ND and the moves to UB read N first
            if self.mmad_direction != wanted:
                extra.update(note=DIRECTION_NOTE.format(wanted=wanted))
        if "uf_role" in extra:
            mode = mode_value(a.get("unit_flag_mode", a.get("phase")), writer=instr.kind is InstrKind.MMAD)
            mode = mode if nop is False else jnp.where(nop, 0, mode)  # a no-op mmad sets and waits for no flag
            ranges, choice, stride = self._uf_blocks(l0c, _region(a, l0c))
            extra.update(uf_mode=mode, uf_blocks=ranges, uf_choice=choice, uf_stride=stride, phased="phase" in a)
            if "phase" in a and instr.kind is InstrKind.L0C_READ:
                self._auto_wait(l0c, mode == 0, site)
        price = self._price(instr, a)
        cycles = jnp.ceil(price).astype(jnp.int32)
        extra.update(price=price)
        if instr.flight is not None:
            flight = jnp.asarray(instr.flight(self.costs, a, self.gm_dtypes), jnp.float32)
            extra.update(flight_cycles=jnp.ceil(flight).astype(jnp.int32), flight_price=flight)
        if instr.gm_bytes is not None:
            extra.update(gm_bytes=jnp.asarray(instr.gm_bytes(a, self.gm_dtypes), jnp.int32))
        shapes = {name: shape for name, (shape, _) in self.gm_shapes.items()}
        faults = tuple(instr.faults(self.chip, a, shapes)) if instr.faults is not None else ()
        self.builder.instruction(
            instr.name, instr.pipe, site=site, reads=reads, writes=writes, cycles=cycles, faults=faults, **extra
        )
        if "phase" in a and instr.kind is InstrKind.MMAD:
            for name, chosen in _picked(l0c):
                self.auto[name] = jnp.where(chosen, extra["uf_mode"] == 0, self.auto.get(name, False))

    def _gm_spec(self, name: str, a: dict, instr: isa.Instruction, tile: Tile | None):
        """The rows of GM tensor ``name`` the window of a copy to or from ``tile`` touches, at a traced row, and of
        each row its columns (all of them for a GM operand other than the window, such as a scale vector)."""
        space = self.spaces[("GM", name)]
        shape, itemsize = self.gm_shapes[name]
        size = self.builder.spaces[space].size_bytes
        row_bytes = shape[-1] * itemsize
        if len(shape) == 2 and instr.kind is InstrKind.SCALAR:  # one element
            at = jnp.asarray(a["row"], jnp.int32), jnp.asarray(a["col"], jnp.int32)
            return Window(space, 0, size, row_bytes, at[0], 1, columns=(at[1], 1))
        if len(shape) != 2 or tile is None or instr.kind is InstrKind.L0C_READ and not a.get("nz2nd", True):
            return (space, (0, size))  # not a row-major matrix window: the whole tensor
        offsets = a.get("offsets") or (0, 0)
        row = a.get("row", a.get("dst_row", offsets[0]))
        rows = a.get("rows") if a.get("rows") is not None else a.get("m")
        length = rows if rows is not None and not isinstance(rows, (int, np.integer)) else None
        rows = tile.rows if rows is None or length is not None else int(rows)
        rows = min(rows, shape[0])
        row = jnp.asarray(row, jnp.int32)
        columns = None
        if name in (a.get("src"), a.get("dst")):  # the window's tensor: its columns (a tail's, else the tile's)
            cols = a.get("cols") if a.get("cols") is not None else a.get("n")
            cols = tile.cols if cols is None else cols
            columns = (jnp.asarray(a.get("col", a.get("dst_col", offsets[1])), jnp.int32), jnp.asarray(cols, jnp.int32))
        if length is not None:  # a run-time tail: its rows from the row (at most the tile's)
            length = jnp.clip(jnp.asarray(length, jnp.int32), 0, rows)
        return Window(space, 0, size, row_bytes, row, rows, length=length, columns=columns)

    def _region_specs(self, tile: Tile, core: int, region) -> list:
        """The access specs of a static (row0, rows, col0, cols) region of ``tile``: its rows of an ND tile, one
        run per column of fractals of an Nz tile (each a candidate per TileGroup slot); the whole tile where there
        is no region, it is traced, or the format is another."""
        static = region is not None and all(isinstance(v, (int, np.integer)) for v in region)
        if region is not None and not static and tile.fmt is Format.NZ:
            if all(isinstance(v, (int, np.integer)) for v in (region[0], region[1], region[3])):
                return self._traced_col_specs(tile, core, region)
            return self._traced_rows_specs(tile, core, region)
        if not static or tile.fmt not in (Format.ND, Format.NZ):
            return [self._tile_spec(tile, core)]
        runs = _runs(tile, *(int(v) for v in region))
        space = self._named(tile, core)
        bases, choice = _candidates(tile)
        return [(space, [(b + lo, b + hi) for b in bases], choice, True) for lo, hi in runs]

    def _traced_rows_specs(self, tile: Tile, core: int, region) -> list:
        """``_region_specs`` of an Nz tile's region whose rows alone are traced (whole fractals: an mmad's m): per
        column of fractals, one candidate per count of fractal rows (per TileGroup slot), chosen by the rows."""
        row0, rows, col0, cols = region
        if not all(isinstance(v, (int, np.integer)) for v in (row0, col0, cols)):
            return [self._tile_spec(tile, core)]
        counts = (tile.padded[0] - row0) // FRACTAL_ROWS  # candidates: 1 .. counts fractal rows
        per_count = [_runs(tile, row0, r * FRACTAL_ROWS, col0, cols) for r in range(1, counts + 1)]
        bases, slot = _candidates(tile)
        pick = jnp.clip(jnp.asarray(rows, jnp.int32) // FRACTAL_ROWS, 1, counts) - 1
        choice = jnp.asarray(slot, jnp.int32) * counts + pick
        space = self._named(tile, core)
        return [
            (
                space,
                [(b + lo, b + hi) for b in bases for lo, hi in column],
                choice,
                True,
            )  # fmt: skip
            for column in zip(*per_count)  # one column of fractals: its run at each count
        ]

    def _traced_col_specs(self, tile: Tile, core: int, region) -> list:
        """``_region_specs`` of an Nz tile's region whose first column alone is traced (an insert at a run-time
        column): per column of fractals it covers, one candidate per aligned first column (per TileGroup slot),
        chosen by the column (one off its grid, which the op's BOUNDS finding reports, picks the nearest below)."""
        row0, rows, col0, cols = region
        width = _ceil_div(cols, tile.c0) * tile.c0
        n_firsts = (tile.padded[1] - width) // tile.c0 + 1
        if n_firsts < 1:
            return [self._tile_spec(tile, core)]
        per_first = [_runs(tile, row0, rows, k * tile.c0, cols) for k in range(n_firsts)]
        bases, slot = _candidates(tile)
        pick = jnp.clip(jnp.asarray(col0, jnp.int32) // tile.c0, 0, n_firsts - 1)
        choice = jnp.asarray(slot, jnp.int32) * n_firsts + pick
        space = self._named(tile, core)
        return [
            (space, [(b + lo, b + hi) for b in bases for lo, hi in column], choice, True)
            for column in zip(*per_first)  # one column of fractals of the region: its run at each first column
        ]

    def _tile_spec(self, tile: Tile, core: int):
        """(space, candidate byte ranges, choice, when) of a tile: one range, or one per TileGroup slot."""
        bases, choice = _candidates(tile)
        ranges = [(b, b + tile.nbytes) for b in bases]
        return (self._named(tile, core), ranges, choice, True)

    def _named(self, tile: Tile, core: int) -> int:
        """The space ``tile`` lies in, with the tile's bytes (each slot's, for a TileGroup) named in the record."""
        space = self.spaces[(tile.buffer, core)]
        for t in getattr(tile, "candidates", None) or (tile,):
            bases, _ = _candidates(t)
            for k, b in enumerate(bases):
                name = t.name if len(bases) == 1 else f"{t.name}[{k}]"  # a TileGroup's slots: `s[0]`, `s[1]`
                self.builder.name_region(space, b, b + t.nbytes, name)
        return space

    def _uf_blocks(self, tile: Tile, region):
        """The L0C blocks a (row0, rows, col0, cols) region of an Nz ``tile`` touches: candidate ranges (one per
        TileGroup slot), the choice, and the (period, run) stride when the region has fewer rows than the tile.

        Column j of fractals holds blocks ``j * 2 * m1 + row // 8`` (a 16 x 16 fp32 fractal is two 512 B blocks).
        """
        per = self.chip.unit_flag_block_bytes
        m1 = tile.physical_shape[1]
        row_bytes = FRACTAL_ROWS * tile.np_dtype.itemsize  # one row of a 16-column fractal
        rows_per_block = per // row_bytes
        period = m1 * FRACTAL_ROWS // rows_per_block  # blocks per column of fractals
        row0, rows, col0, cols = region
        first_col, end_col = col0 // FRACTAL_ROWS, _ceil_div(col0 + cols, FRACTAL_ROWS)
        first_row, end_row = row0 // rows_per_block, _ceil_div(row0 + rows, rows_per_block)
        run = end_row - first_row
        lo = first_col * period + first_row
        hi = (end_col - 1) * period + first_row + run
        bases, choice = _candidates(tile)
        ranges = [(b // per + lo, b // per + hi) for b in bases]
        return ranges, choice, ((0, 0) if run == period else (period, run))

    def _auto_wait(self, tile: Tile, no_phase, site):
        """The framework's M -> FIX sync before a phase-less store of a tile a phase-less matmul wrote last.

        The set is recorded on M at the store's place in the program: M runs in order, so it completes
        after every matmul issued before it, the last one on this tile among them. A second store of the
        tile before another matmul needs none: FIX runs in order, after the first store's wait."""
        pending, event_id, picked = jnp.asarray(False), jnp.int32(0), _picked(tile)
        for name, chosen in picked:  # one L0C tile, or the one a run-time index picks
            if name not in self._auto_ids:
                self._auto_ids[name] = len(self._auto_ids)
            if self._auto_ids[name] >= self.builder.n_flag_ids:
                raise ValueError(f"more than {self.builder.n_flag_ids} L0C tiles take the framework's M -> FIX sync")
            mine = self.auto.get(name, jnp.asarray(False)) & no_phase & chosen
            self.auto[name] = self.auto.get(name, jnp.asarray(False)) & ~mine  # later stores: the mmad is waited for
            pending, event_id = pending | mine, jnp.where(chosen, self._auto_ids[name], event_id)
        if len(picked) == 1:
            event_id = self._auto_ids[picked[0][0]]
        triple = (AIC, Pipe.M, Pipe.FIX, AUTO_SYNC)
        for sync, pipe in ((Sync.SET_FLAG, Pipe.M), (Sync.WAIT_FLAG, Pipe.FIX)):
            self.builder.instruction(
                "framework M -> FIX sync", pipe, site=site, sync=sync, event_id=event_id, flag_triple=triple,
                enable=pending,
            )  # fmt: skip


def _picked(tile: Tile) -> list:
    """(name, whether it is the one accessed) per tile ``tile`` may be: itself, or each of a ``TileChoice``'s."""
    candidates = getattr(tile, "candidates", None)
    if not candidates:
        return [(tile.name, jnp.asarray(True))]
    return [(t.name, tile.ok & (tile.choice == j)) for j, t in enumerate(candidates)]


def _candidates(tile: Tile):
    """(start addresses, choice) of a tile: one candidate, or one per TileGroup slot or per tile of a
    ``TileChoice``, chosen by its traced index (an index out of range chooses no candidate: a bounds finding)."""
    candidates = getattr(tile, "candidates", None)
    if candidates:
        return [t.addr for t in candidates], jnp.where(tile.ok, tile.choice, len(candidates))
    slot = getattr(tile, "slot", None)
    if slot is None:
        return [tile.addr], 0
    return [tile.addr + k * tile.stride_bytes for k in range(tile.depth)], jnp.where(tile.ok, slot, tile.depth)


def _receivers(a: dict, l0c: Tile | None) -> tuple[int, ...]:
    """The AIVs a move out of L0C delivers a part to (for a run-time region: those its largest, the whole tile,
    reaches; an AIV whose part is empty as it runs is still recorded as written)."""
    mode = AccToVecMode(a.get("acc_to_vec_mode", AccToVecMode.SingleModeVec0))
    m = a.get("m") if a.get("m") is not None else l0c.rows
    n = a.get("n") if a.get("n") is not None else l0c.cols
    if static_int(m) is None or static_int(n) is None:
        m, n = l0c.rows, l0c.cols
    return tuple(sub for sub, (_, rows, _, cols) in enumerate(split(mode, m, n)) if rows and cols)


def _runs(tile: Tile, row0: int, rows: int, col0: int, cols: int) -> list[tuple[int, int]]:
    """The byte runs (from the tile's start) of a static region of an ND tile (its rows: one run) or an Nz tile (one
    run per column of fractals)."""
    padded_rows, padded_cols = tile.padded
    if tile.fmt is Format.ND:
        row_bytes = padded_cols * tile.np_dtype.itemsize
        return [(row0 * row_bytes, (row0 + rows) * row_bytes)]
    row_bytes = tile.c0 * tile.np_dtype.itemsize  # one row of a fractal
    column = padded_rows * row_bytes
    first, end = col0 // tile.c0, _ceil_div(col0 + cols, tile.c0)
    return [(j * column + row0 * row_bytes, j * column + (row0 + rows) * row_bytes) for j in range(first, end)]


def _write_region(a: dict, tile: Tile):
    """The region of ``tile`` a copy writes where its arguments place it (an insert, a GM -> L1 copy), else None."""
    src = a.get("src")
    if tile.buffer is Buffer.L1 and isinstance(src, Tile) and src.buffer is Buffer.UB:  # insert at (row, col)
        return a["row"], src.rows, a["col"], src.cols
    placed = not all(v is None or isinstance(v, (int, np.integer)) and v == 0
                     for v in (a.get(k) for k in ("dst_row", "dst_col", "rows", "cols")))  # fmt: skip
    if "dst_row" in a and "dst_col" in a and isinstance(src, str) and placed:  # copy_gm2l1 into part of the tile
        row, col = a["dst_row"], a["dst_col"]
        rows = tile.rows - row if a.get("rows") is None else a["rows"]
        cols = tile.cols - col if a.get("cols") is None else a["cols"]
        if all(isinstance(v, (int, np.integer)) for v in (row, col, rows, cols)):
            return row, rows, col, cols
    return None


def _region(a: dict, l0c: Tile, traced_rows: bool = False) -> tuple:
    """(row0, rows, col0, cols) of ``l0c`` an mmad writes or a read drains; the whole tile where sizes are traced,
    but for ``traced_rows`` a traced m alone stays (its rows: ``_region_specs``'s candidates)."""
    whole = (0, l0c.rows, 0, l0c.cols)
    m, n = a.get("m"), a.get("n")
    row0, col0 = a.get("src_row", 0), a.get("src_col", 0)
    values = (row0, m if m is not None else l0c.rows, col0, n if n is not None else l0c.cols)
    static = [isinstance(v, (int, np.integer)) for v in values]
    if not all(static):
        rows_alone = static == [True, False, True, True]
        if traced_rows and rows_alone and values[3]:
            return int(row0), values[1], int(col0), int(values[3])
        return whole
    if values[1] == 0 or values[3] == 0:  # a no-op mmad: it takes no part in the handshake (its mode is 0)
        return whole
    return tuple(int(v) for v in values)


def _fractal_rows(region, tile: Tile):
    """A (row0, rows, col0, cols) region of an L0C tile widened to whole 16-row fractals: the cube writes and
    the fixpipe reads a fractal's rows together."""
    row0, rows, col0, cols = region
    first = row0 // FRACTAL_ROWS * FRACTAL_ROWS
    if not isinstance(rows, (int, np.integer)):  # traced: whole fractals, the end clipped to the tile
        end = jnp.minimum((row0 + rows + FRACTAL_ROWS - 1) // FRACTAL_ROWS * FRACTAL_ROWS, tile.padded[0])
        return first, end - first, col0, cols
    end = min(_ceil_div(row0 + rows, FRACTAL_ROWS) * FRACTAL_ROWS, tile.padded[0])
    return first, end - first, col0, cols


def _accumulates(a: dict):
    """Whether an mmad adds to what L0C holds (it reads C) rather than overwriting it."""
    if "acc" in a:
        return True
    if "c_matrix_init_val" not in a:
        return False  # matmul / matmul_mx: dst = lhs @ rhs
    init = jnp.asarray(a["c_matrix_init_val"], bool) | jnp.asarray(a["c_matrix_source"], bool)
    return ~init & (a.get("bias") is None)


def _nop(a: dict):
    """Whether an mmad is a no-op (m, k or n is 0): False when its sizes say statically it is not, else a bool
    (an array when a size is traced)."""
    if "a" not in a and all(a.get(x) is None for x in ("m", "k", "n")):
        return False  # the PyPTO-Pro spellings multiply whole tiles, unless given a tail's sizes
    sizes = [a[x] for x in ("m", "k", "n")] if "a" in a else list(_pypto_sizes(a))
    if all(isinstance(v, (int, np.integer)) for v in sizes):
        return jnp.asarray(True) if any(int(v) == 0 for v in sizes) else False
    return (jnp.asarray(sizes[0]) == 0) | (jnp.asarray(sizes[1]) == 0) | (jnp.asarray(sizes[2]) == 0)


def _mn(a: dict):
    """An mmad's m and n (the tiles' sizes for the PyPTO-Pro spellings, or a tail's)."""
    if "a" in a:
        return jnp.asarray(a["m"]), jnp.asarray(a["n"])
    m, _, n = _pypto_sizes(a)
    return m, n


def _pypto_sizes(a: dict) -> tuple:
    """A PyPTO-Pro matmul's (m, k, n): the tiles' unless given."""
    return isa.ops.matmul_sizes(a["lhs"], a["rhs"], a.get("m"), a.get("k"), a.get("n"))
