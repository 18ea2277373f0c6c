"""The control plane's ranked findings in words: what happened, at which kernel lines, and what to change.

Reads the record's template (sites, spaces, flag bits, counters) and the ``ControlResult``
only. Each finding names its instruction's site and loop iteration; a race names both
accesses, the buffer and the bytes; a deadlock lists every pipe that cannot go on and what it
waits for; a leftover names the signal and who set it.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from ..core import (
    AIC,
    AIV0,
    AIV1,
    BOUNDS_TRIP_COUNT,
    BOUNDS_WHAT,
    CORE_NAMES,
    HAZARD_NAMES,
    N_PIPES,
    RAW,
    SMALL_TILE,
    WAR,
    Finding,
    Pipe,
    SyncMode,
)
from ..engine import UNIT_FLAG_BLOCK_BYTES, Sync, UnitFlagRole
from ..engine._checks import FAULT_DETAIL
from ..engine._log import DETAIL_A, DETAIL_B, ENTRY, INST, KIND, OTHER
from ._slot_mapping import SlotMismatch, slot_mismatches

#: what a leftover row's detail ``a`` says is still set
_LEFT = ("intra-core flag", "cross-core event", "INTER_SUBBLOCK barrier half", "L0C unit flag")


#: unit-flag modes by value, and the PyPTO-Pro phase each stands for
_MODES = {0: ("DISABLE", "no phase"), 2: ("ENABLE_KEEP", "Partial"), 3: ("ENABLE_UPDATE", "Final")}


def mode_text(mode: int, role: UnitFlagRole, pl: bool = False) -> str:
    """``ENABLE_KEEP (AccPhase.Partial)`` for an mmad, ``... (STPhase.Partial)`` for a read, in both spellings;
    ``pl``: the kernel is written in ``ascjax.pl``, so its phase comes first (``AccPhase.Partial (ENABLE_KEEP)``)."""
    name, phase = _MODES.get(int(mode), (f"mode {int(mode)}", "?"))
    if int(mode) == 0:
        return "no phase (DISABLE)" if pl else f"{name} (no phase)"
    phase = f"{'AccPhase' if role is UnitFlagRole.WRITER else 'STPhase'}.{phase}"
    return f"{phase} ({name})" if pl else f"{name} ({phase})"


#: ``ENABLE_UPDATE (STPhase.Final)`` in a fix: the mode, then the phase it stands for
_MODE_THEN_PHASE = re.compile(r"(ENABLE_\w+|DISABLE) \(((?:AccPhase|STPhase)\.\w+)\)")


def phases_first(text: str) -> str:
    """A fix in PyPTO-Pro's words: ``ENABLE_UPDATE (STPhase.Final)`` -> ``phase=STPhase.Final (ENABLE_UPDATE)``."""
    return _MODE_THEN_PHASE.sub(r"phase=\2 (\1)", text)


#: how a PyPTO-Pro kernel's calls begin (``ascjax.pypto_pro`` spells its sites so)
PYPTO_PREFIX = "pl."


def _cross_call(verb: str, pypto: bool) -> str:
    """``set_cross_core`` / ``wait_cross_core``, as the kernel's front end spells it."""
    return f"{'pl.system.' if pypto else ''}{verb}_cross_core"


def _pipe(pipe, pypto: bool) -> str:
    return f"pl.PipeType.{pipe}" if pypto else str(pipe)


def _flag_calls(src, dst, pypto: bool) -> tuple[str, str]:
    """The intra-core flag pair ``src -> dst`` with an open id, as the kernel's front end spells it."""
    if pypto:
        args = f"set_pipe=pl.PipeType.{src}, wait_pipe=pl.PipeType.{dst}, event_id=id"
        return f"pl.system.sync_src({args})", f"pl.system.sync_dst({args})"
    return f"sync_notify({src}, {dst}, id)", f"sync_wait({src}, {dst}, id)"


def _flag_pair(src, dst, pypto: bool) -> str:
    if pypto:
        return " / ".join(_flag_calls(src, dst, True))
    return f"sync_notify / sync_wait({src}, {dst})"


def _unit_flag_fix(want: int, last_role, last_mode: int) -> str:
    """What to change when a unit-flag wait for ``want`` cannot be met, from who touched the blocks last."""
    if want == 1 and last_role is UnitFlagRole.WRITER and last_mode == 2:
        return "the last mmad on this tile must use ENABLE_UPDATE (AccPhase.Final) - rule 'Final closing'."
    if want == 1 and last_role is UnitFlagRole.READER:
        return (
            "an earlier read already drained these blocks (UPDATE clears the flag): use ENABLE_KEEP "
            "(STPhase.Partial) for all reads but the last, or let an mmad with UPDATE refill them first."
        )
    if want == 1:
        return (
            "the mmad that produces these blocks must enable the unit flag and end with ENABLE_UPDATE "
            "(AccPhase.Final), or use DISABLE on both sides with M -> FIX sync_notify / sync_wait."
        )
    if last_role is UnitFlagRole.READER and last_mode == 2:
        return "the last read of this tile must use ENABLE_UPDATE (STPhase.Final) to hand it back to the cube."
    return (
        "every block an mmad sets to 1 must be drained by a read with ENABLE_UPDATE (STPhase.Final) of the volume "
        "the mmad wrote, or reset the flags with set_l0c_copy_config(is_clean_unit_flag=True) after a PIPE_ALL barrier."
    )


def where(t, inst: int) -> str:
    """``name at file:line (core.pipe)`` of instance ``inst`` of template ``t``, with its loop iteration."""
    name, site, core, pipe, _ = t.entries[int(t.entry[inst])]
    it = [int(i) for i in t.iteration[inst] if i >= 0]
    loop = f" in loop iteration ({', '.join(map(str, it))})" if it else ""
    return f"{site} ({CORE_NAMES[core]}.{Pipe(pipe)}){loop}"


@dataclasses.dataclass(frozen=True)
class FindingText:
    """One finding: its kind, the site of the instruction that raised it, the other site involved, the words."""

    kind: Finding
    site: str
    other: str | None
    message: str

    def __str__(self) -> str:
        return self.message


class _Words:
    def __init__(self, record, result, chip=None):
        self.chip = chip
        self.record = record
        self.t = record.template
        self.enable = np.asarray(record.operands["enable"]).reshape(-1)
        self.result = result
        self.start, self.end = np.asarray(result.start), np.asarray(result.end)
        names = (
            "uf_lo",
            "uf_hi",
            "uf_mode",
            "nop",
            "bounds_limit",
            "layout_limit",
            "bounds_what",
            "layout_what",
            "event_id",
            "mode",
        )
        self.ops = {k: np.asarray(record.operands[k]).reshape(-1) for k in names}
        n = self.t.n_instances
        self.slots = {  # [N, slots]: each access slot's atom run, in range, and on
            f"{p}_{x}": np.asarray(record.operands[f"{p}_{x}"]).reshape(n, -1 if n else 0)
            for p in ("rd", "wr") for x in ("lo", "hi", "ok", "on")
        }  # fmt: skip

    def where(self, inst: int) -> str:
        return where(self.t, inst)

    def atom(self, atom: int, last: int | None = None) -> str:
        """``L0C bytes [lo, hi) of tile `ac``` of atoms ``atom`` .. ``last`` (one space, contiguous)."""
        index = int(self.t.atom_space[atom])
        lo, hi = int(self.t.atom_bytes[atom, 0]), int(self.t.atom_bytes[atom if last is None else last, 1])
        return f"{self.t.spaces[index].name} bytes [{lo}, {hi}){self._tiles_of(index, lo, hi)}"

    def _tiles_of(self, index: int, lo: int, hi: int) -> str:
        """`` of tile `ac``` (or tiles) for bytes [lo, hi) of space ``index``; empty where no named tile holds them."""
        names = list(dict.fromkeys(n for s, a, b, n in self.t.regions if s == index and a < hi and lo < b))
        return f" of tile{'s' if len(names) > 1 else ''} {', '.join(f'`{n}`' for n in names)}" if names else ""

    def l0c_tiles(self, lo_block: int, hi_block: int) -> str:
        """The named L0C tiles of unit-flag blocks ``lo_block`` .. ``hi_block``, as ``atom`` names a range's."""
        l0c = [i for i, space in enumerate(self.t.spaces) if space.name == "L0C"]
        if not l0c:
            return ""
        return self._tiles_of(l0c[0], lo_block * UNIT_FLAG_BLOCK_BYTES, (hi_block + 1) * UNIT_FLAG_BLOCK_BYTES)

    def foot(self, inst: int, atom: int, write: bool) -> np.ndarray:
        """The atoms ``inst`` wrote (or read) in this run, and ``atom``, as a bool mask over atoms: each access
        slot's atom run as the record's operands give it (a traced slot or window offset as it was chosen)."""
        t, prefix = self.t, "wr" if write else "rd"
        valid = t.write_valid if write else t.read_valid
        lo, hi, ok, on = (self.slots[f"{prefix}_{name}"][inst] for name in ("lo", "hi", "ok", "on"))
        mask = np.zeros(t.n_atoms, bool)
        for slot in np.flatnonzero(valid[inst] & ok & on):
            mask[int(lo[slot]) : int(hi[slot])] = True
        mask[atom] = True
        return mask

    def run_of(self, atom: int, mask: np.ndarray) -> tuple[int, int]:
        """The first and last atom of the run of ``mask`` around ``atom`` that is contiguous in its space."""
        t, first, last = self.t, atom, atom
        while (
            first > 0
            and mask[first - 1]
            and t.atom_space[first - 1] == t.atom_space[atom]
            and (t.atom_bytes[first - 1, 1] == t.atom_bytes[first, 0])
        ):
            first -= 1
        while (
            last + 1 < t.n_atoms
            and mask[last + 1]
            and t.atom_space[last + 1] == t.atom_space[atom]
            and (t.atom_bytes[last + 1, 0] == t.atom_bytes[last, 1])
        ):
            last += 1
        return first, last

    def uninitialised_bytes(self, inst: int, atom: int) -> str:
        """The bytes around ``atom`` that ``inst`` reads and that no input holds and no instruction wrote before it."""
        t = self.t
        wrote = self.enable & (self.ops["bounds_what"] < 0) & (self.ops["layout_what"] < 0)  # a fault writes nothing
        if self.start.size:
            wrote &= (self.end >= 0) & (self.end <= self.start[inst])  # completed before the read started
        written = np.zeros(t.n_atoms, bool)
        for i, slot in zip(*np.nonzero(t.write_valid & wrote[:, None])):
            lo, hi = (int(x) for x in t.write_foot[i, slot])
            written[lo:hi] = True
        never = self.foot(inst, atom, False) & ~written & ~t.atom_init.astype(bool)
        return self.atom(*self.run_of(atom, never)) if never[atom] else self.atom(atom)

    def racy_bytes(self, inst: int, other: int, atom: int, hazard: int) -> str:
        """The bytes around ``atom`` both accesses of a race cover."""
        first_writes, second_writes = {RAW: (True, False), WAR: (False, True)}.get(hazard, (True, True))
        both = self.foot(other, atom, first_writes) & self.foot(inst, atom, second_writes)
        return self.atom(*self.run_of(atom, both)) if both[atom] else self.atom(atom)

    def flag(self, bit: int) -> str:
        (core, src, dst, *auto), event_id = self.t.flag_bits[bit]
        owner = "the framework's " if auto else ""
        return f"{owner}flag {Pipe(src)} -> {Pipe(dst)} event {event_id} on {CORE_NAMES[core]}"

    # --- one row per kind -----------------------------------------------------------------
    def row(self, row) -> FindingText:
        kind, inst, other = Finding(int(row[KIND])), int(row[INST]), int(row[OTHER])
        self.row_inst, self.row_other = inst, other
        a, b = int(row[DETAIL_A]), int(row[DETAIL_B])
        here = self.where(inst)
        there = self.where(other) if other >= 0 else None
        text = {
            Finding.DEADLOCK: self.deadlock,
            Finding.RACE: lambda: self.race(inst, other, a, b),
            Finding.LEFTOVER: lambda: self.leftover(here, a, b),
            Finding.UNINITIALIZED: lambda: (
                f"UNINITIALIZED read of {self.uninitialised_bytes(inst, a)} by {here}: no input holds those "
                "bytes and no write that happens before the read wrote them"
            ),
            Finding.BOUNDS: lambda: self.bounds(inst, here, a, b),
            Finding.LAYOUT: lambda: self.layout(inst, here, a),
        }.get(kind, lambda: self.sync(kind, here, there, a, b))()
        return FindingText(kind, here, there, text)

    def bounds(self, inst, here, a, b):
        if b < FAULT_DETAIL:
            group = self.group_of(inst, a, bool(b))
            operand = f"{'write' if b else 'read'} operand {a}"
            if group is None:
                return f"BOUNDS: {here} picks a TileGroup slot or window outside its range ({operand})"
            name, depth = group
            return (
                f"BOUNDS: {here} picks a slot outside TileGroup `{name}` (depth {depth}: `{name}[0]` .. "
                f"`{name}[{depth - 1}]`) for its {operand}, so the instruction does nothing: a traced index is never "
                f"taken modulo the depth (write `{name}[i % {depth}]`)"
            )
        what, limit = BOUNDS_WHAT[b - FAULT_DETAIL], int(self.ops["bounds_limit"][inst])
        if b - FAULT_DETAIL == BOUNDS_TRIP_COUNT:
            return (
                f"BOUNDS: {here}: trip count = {a} is outside [0, {limit}], the loop's static maximum; it ran "
                f"{min(max(a, 0), limit)} iterations. Raise the maximum (range({max(a, limit)}, ...)) or bound the count."
            )
        if 0 <= a <= limit:  # in range, off the grid of its tile's fractals
            return (
                f"BOUNDS: {here}: {what} = {a} is not a multiple of its tile's fractal, so the instruction does nothing"
            )
        return (
            f"BOUNDS: {here}: {what} = {a} is outside [0, {limit}], so the instruction does nothing "
            "(a traced value past its limit is never clamped)"
        )

    def group_of(self, inst: int, slot: int, write: bool) -> tuple[str, int] | None:
        """``(name, depth)`` of the TileGroup whose slots are the candidates of the access, or None (a window)."""
        t = self.t
        first, end = (int(x) for x in (t.write_foot if write else t.read_foot)[inst, slot])
        if end <= first:
            return None
        index = int(t.atom_space[first])
        lo, hi = int(t.atom_bytes[first, 0]), int(t.atom_bytes[end - 1, 1])
        names = [n for s, a, b, n in t.regions if s == index and lo <= a and b <= hi]
        slots = [re.fullmatch(r"(.+)\[(\d+)\]", n) for n in names]
        groups = {m.group(1) for m in slots if m}
        if len(groups) != 1 or not all(slots):
            return None
        return groups.pop(), len({m.group(2) for m in slots})

    def layout(self, inst, here, m):
        if int(self.ops["layout_limit"][inst]):
            return (
                f"LAYOUT: {here}: m = {m} runs GEMV, which reads A as ND, but A's L0A tile holds a fractal layout: "
                "load A into an ND tile for m == 1, or pass disable_gemv=True where the chip allows it"
            )
        return f"LAYOUT: {here}: A's L0A tile is ND, which only GEMV (m == 1) reads, but m = {m}"

    def race(self, inst, other, atom, hazard):
        lines = [f"RACE ({HAZARD_NAMES[hazard]}) on {self.racy_bytes(inst, other, atom, hazard)}"]
        lines += [f"  first:  {self.where(other)}", f"  second: {self.where(inst)}"]
        if hazard == SMALL_TILE:
            if self.pypto_spelled(inst):
                lines.append(f"  Fix: put pl.system.bar_m() between the accumulating {self.spelling(inst)}s.")
            else:
                lines.append("  Fix: put sync_pipe('M') (PipeBarrier<PIPE_M>) between the accumulating mmads.")
            return "\n".join(lines)
        roles = {UnitFlagRole(int(self.t.uf_role[i])): i for i in (inst, other)}
        if set(roles) == {UnitFlagRole.WRITER, UnitFlagRole.READER}:  # an mmad and a read of L0C
            lines += self.unit_flag_race(roles[UnitFlagRole.WRITER], roles[UnitFlagRole.READER])
            return "\n".join(lines)
        (first, first_core, first_pipe), (second, second_core, second_pipe) = self.who(other), self.who(inst)
        pypto = self.pypto_spelled(inst) or self.pypto_spelled(other)
        if pypto:  # the kernel's own calls, in PyPTO-Pro's words
            first, second = self.spelling(other), self.spelling(inst)
        mismatch = self.slot_mismatch(inst, other) if first_core != second_core else None
        late = self.set_on_another_pipe(inst, other) if first_core != second_core and mismatch is None else None
        if late is not None:  # seed 002: a cross-core set goes on the pipe of the producer's last write
            wait, event = late
            set_pipe, eid = self.who(event)[2], int(self.ops["event_id"][event])
            lines += [
                f"  the {self.where(event)} follows the {first} in {first_core}'s program, and the {second}'s core "
                f"waits for it at {self.location(wait)}, but it is set on "
                f"{set_pipe}, which does not wait for {first_pipe}: the signal can leave before the {first}'s data has.",
                f"  Fix: {_cross_call('set', pypto)}(pipe={_pipe(first_pipe, pypto)}, event_id={eid}), on the pipe of "
                f"the {first} "
                f"(the last write), or {_flag_pair(first_pipe, set_pipe, pypto)} before the set.",
            ]
            return "\n".join(lines)
        lines.append("  nothing orders them: no flag, unit-flag handshake, barrier or cross-core event leads from the "
                     "first to the second.")  # fmt: skip
        if mismatch is not None:
            lines += self.slot_words(mismatch)
        elif first_core != second_core:
            lines.append(
                f"  Fix: {_cross_call('set', pypto)}(pipe={_pipe(first_pipe, pypto)}, event_id=id) on {first_core} after "
                f"the {first} and {_cross_call('wait', pypto)}(pipe={_pipe(second_pipe, pypto)}, event_id=id) on "
                f"{second_core} before the "
                f"{second}."
            )
        elif first_pipe != second_pipe:
            notify, wait = _flag_calls(first_pipe, second_pipe, pypto)
            lines.append(f"  Fix: {notify} after the {first} and {wait} before the {second}.")
        return "\n".join(lines)

    def set_on_another_pipe(self, inst: int, other: int) -> tuple[int, int] | None:
        """``(wait, set)`` where ``other``'s core sets a cross-core event after ``other`` in its program, on another
        pipe than ``other``'s and with nothing between them that could order that pipe before the set (a flag set on
        ``other``'s pipe, a PIPE_ALL), and ``inst``'s core waited for that event id before ``inst``: the event is
        there, on the wrong pipe. None where no such pair ran."""
        t, ran = self.t, (self.start >= 0) if self.start.size else np.zeros(self.t.n_instances, bool)
        on, same_core = self.enable & ran, t.core == t.core[other]
        after = on & same_core & (t.pidx > t.pidx[other])
        sets = np.flatnonzero(after & (t.sync == Sync.CROSS_SET))
        if not sets.size:
            return None
        event = int(sets[np.argmin(t.pidx[sets])])  # the first cross-core set after the write
        between = np.flatnonzero(after & (t.pidx < t.pidx[event]))
        orders = [i for i in between if t.sync[i] == Sync.BARRIER_ALL
                  or (t.sync[i] == Sync.SET_FLAG and t.queue[i] == t.queue[other])]  # fmt: skip
        if t.queue[event] == t.queue[other] or orders:
            return None
        waits = np.flatnonzero(on & (t.sync == Sync.CROSS_WAIT) & (t.core == t.core[inst]) & (t.pidx < t.pidx[inst])
                               & (self.ops["event_id"] == self.ops["event_id"][event]))  # fmt: skip
        return (int(waits[np.argmax(t.pidx[waits])]), event) if waits.size else None

    def slot_mismatch(self, *insts: int) -> SlotMismatch | None:
        """The slot mismatch one of ``insts`` made (seed 002's check 1), if any: then that is the race's cause."""
        if not hasattr(self, "_mismatches"):
            self._mismatches = {m.access: m for m in slot_mismatches(self.record, self.result)}
        return next((self._mismatches[i] for i in insts if i in self._mismatches), None)

    def slot_words(self, m: SlotMismatch) -> list[str]:
        """The access, the wait before it and the set that wait took, by slot; the fix is the slot expression."""
        name, _, _ = self.who(m.access)
        role, did, does = ("READY", "writing", "read") if m.ready else ("RELEASE", "reading", "overwrite")
        set_slots = ", ".join(f"`{m.group}[{s}]`" for s in m.set_slots)
        theirs = "/".join(str(s) for s in m.set_slots)
        wait_site = self.location(m.wait)
        return [
            f"  slot mismatch: the {name} {'reads' if m.ready else 'overwrites'} `{m.group}[{m.slot}]` after "
            f"waiting at {wait_site} on event {m.event_id}, the {role} of {set_slots} (set by the {self.where(m.set)} "
            f"after {did} slot {theirs}): the {does} of slot {m.slot} waited on the {role} of slot {theirs}.",
            f"  Fix: the slot expression. The {name}'s TileGroup index and the wait's event_id must pick one slot, "
            f"from one expression on both sides (slot = i % depth: `{m.group}[slot]` and event_id=BASE + slot); "
            "no further event is needed.",
        ]

    def unit_flag_race(self, writer: int, reader: int) -> list[str]:
        """Both sides' phases, and the fix: the unit flag orders an mmad and its read only with a phase on both."""
        w_mode, r_mode = int(self.ops["uf_mode"][writer]), int(self.ops["uf_mode"][reader])
        w_name, r_name = self.who(writer)[0], self.who(reader)[0]
        pl = self.pl_spelled(writer) or self.pl_spelled(reader)
        if pl:
            w_name, r_name = self.spelling(writer), self.spelling(reader)
        lines = [
            f"  the {w_name} used {mode_text(w_mode, UnitFlagRole.WRITER, pl)}, the {r_name} "
            f"{mode_text(r_mode, UnitFlagRole.READER, pl)}: nothing orders them."
        ]
        if w_mode and not r_mode:
            lines.append(f"  Fix: give the {r_name} phase=STPhase.Final (unit_flag_mode=ENABLE_UPDATE): the unit flag "
                         "orders the pair only with a phase on both sides.")  # fmt: skip
        elif r_mode and not w_mode:
            lines.append(f"  Fix: give the last {w_name} phase=AccPhase.Final (unit_flag_mode=ENABLE_UPDATE): the unit "
                         "flag orders the pair only with a phase on both sides.")  # fmt: skip
        else:
            lines.append("  Fix: AccPhase.Final on the last mmad and STPhase.Final on the read, or DISABLE on both "
                         "with sync_notify / sync_wait(M, FIX).")  # fmt: skip
        return lines

    def spelling(self, inst: int) -> str:
        """The instruction as the kernel spells it (``matmul_acc`` in ``ascjax.pl``, ``mmad`` in a Program)."""
        return self.t.entries[int(self.t.entry[inst])][1].partition(" at ")[0]

    def location(self, inst: int) -> str:
        """The instruction's kernel line (``kernels/x.py:55 via :134``), without its name."""
        return self.t.entries[int(self.t.entry[inst])][1].partition(" at ")[2]

    def pypto_spelled(self, inst: int) -> bool:
        """The instruction was issued by a PyPTO-Pro kernel's call (``pl.move at ...``): its words are PyPTO-Pro's."""
        return self.spelling(inst).startswith(PYPTO_PREFIX)

    def pl_spelled(self, inst: int) -> bool:
        """The kernel gave this instruction a PyPTO-Pro phase (``matmul(..., phase=AccPhase.Partial)``), not a
        unit-flag mode: the words then speak of phases first."""
        return bool(self.t.phased[int(self.t.entry[inst])])

    def who(self, inst: int) -> tuple[str, str, Pipe]:
        name, _, core, pipe, _ = self.t.entries[int(self.t.entry[inst])]
        return name, CORE_NAMES[core], Pipe(pipe)

    def leftover(self, here, what, which):
        if what == 0:
            thing = self.flag(which)
        elif what == 3:
            lo, hi = (int(x) for x in self.t.uf_atom_blocks[which])
            thing = f"unit flag of L0C blocks {lo}..{hi - 1}"
        elif what == 1:
            thing = f"cross-core event {which}{self.holders(which)}"
        else:
            thing = f"{_LEFT[what]} {which}"
        return (
            f"LEFTOVER: {thing} is still set when the kernel ends; set by {here}: the next kernel on this core "
            "inherits it"
        )

    def holders(self, ev: int) -> str:
        """`` (AIC -> AIV0 holds 1 signal, ...)``: who still holds signals of cross-core event ``ev``."""
        t = self.t
        if ev not in t.cross_ids:
            return ""
        e, count = t.cross_ids.index(ev), np.asarray(self.result.machine.count)
        held = [
            f"{CORE_NAMES[s] if s < len(CORE_NAMES) else 'barrier'} -> {CORE_NAMES[r]} holds {int(count[c, e])} "
            "signal(s)" for c, (r, s) in enumerate(t.channel_keys) if count[c, e] > 0
        ]  # fmt: skip
        return f" ({', '.join(held)}; wait for it on the receiver or skip the set where no one waits)" if held else ""

    def sync(self, kind, here, there, a, b):
        if kind is Finding.DOUBLE_SET:
            return f"DOUBLE_SET: {here} sets {self.flag(a)} while it is still set (by {there}): one signal is lost"
        if kind is Finding.MERGED_SIGNAL:
            return f"MERGED_SIGNAL: {here} sets cross-core event {a} while it still holds {there}'s signal: one is lost"
        if kind is Finding.UNORDERED_SET:
            return (
                f"UNORDERED_SET: {here} sets cross-core event {a} again, but {there}, which took its previous signal, "
                "is not ordered before it: on other timings the set finds that signal still pending and one is lost "
                "(an event id serving two channels). Fix: give each channel its own event_id, or wait for the "
                "consumer's acknowledgement before setting the event again"
            )
        if kind is Finding.OVERFLOW:
            return f"OVERFLOW: {here} is the 16th pending signal of cross-core event {a}"
        if a == 1:
            mine, theirs = (SyncMode(int(self.ops["mode"][i])).name for i in (int(self.row_inst), int(self.row_other)))
            return (
                f"SYNC_ERROR: cross-core event {b} is waited with sync_mode {mine} by {here} and set with {theirs} "
                f"by {there}: a sync-mode mismatch.\n    Fix: set and wait of one event id must use the same sync_mode "
                "(seed 002)."
            )
        t, inst = self.t, self.row_inst
        cross = t.sync[inst] in (Sync.CROSS_SET, Sync.CROSS_WAIT)
        n = t.n_cross_ids if cross else t.n_flag_ids
        on = f" on chip {self.chip}" if self.chip else ""
        kind = "cross-core event ids" if cross else "flag event ids per pipe pair"
        return (
            f"SYNC_ERROR: {here} names event_id {b}: event_id {b} is outside [0, {n}){on} ({n} {kind}), so it "
            "synchronises nothing (a traced id is never wrapped)"
        )

    def deadlock(self) -> str:
        """Every queue with work left: its first instruction that never completed, and what it waits for."""
        t = self.t
        ran = self.end[self.end >= 0] if self.end.size else self.end
        when = f" after {int(ran.max())} cycles (the last instruction to complete)" if ran.size else ""
        lines = [f"DEADLOCK: no pipe can go on{when}"]
        for q in range(t.qlist.shape[0]):
            members = [int(i) for i in t.qlist[q, : int(t.qlen[q])] if self.enable[i]]
            stuck = next((i for i in members if self.end[i] < 0), None) if self.end.size else None
            if stuck is None:
                continue
            lines.append(f"  {self.where(stuck)} {self.waits_for(stuck)}")
        return "\n".join(lines)

    def waits_for(self, inst: int) -> str:
        t = self.t
        sync = Sync(int(t.sync[inst]))
        if self.start.size and self.start[inst] >= 0:
            return "started and never completed"
        barrier = self.issue_held_by(inst)
        if barrier is not None:
            return (
                f"was never issued: the scalar unit stops at {self.where(barrier)}, which never completed (a PIPE_ALL "
                "or scalar instruction holds the issue of everything after it)"
            )
        if sync is Sync.WAIT_FLAG and t.flag_base[inst] >= 0:
            bit = self.flag_bit(inst)
            if 0 <= bit < len(t.flag_bits):
                later = self.unrun_set(inst, bit)
                if later is None:
                    off = self.unrun_set(inst, bit, enabled=False)
                    if off is None:
                        return f"waits for {self.flag(bit)}, which no set delivers"
                    return (
                        f"waits for {self.flag(bit)}, which no set of this run delivers: {self.where(off)} would, but "
                        "this run leaves it out (its loop ran fewer iterations, or its branch was not taken). "
                        "Fix: a set for this wait on every path, whatever the trip count: pre-post one before the loop "
                        "and wait at the top of every iteration, or skip this wait where the loop did not run"
                    )
                if t.pidx[later] > t.pidx[inst]:
                    return (
                        f"waits for {self.flag(bit)}, which {self.where(later)}, issued later, would deliver: it never "
                        "ran, because the issue stops before it (this wait holds the issue of everything after it, "
                        "or an earlier fence does)"
                    )
                head = self.stuck_head(later)
                behind = f": it is queued behind {self.where(head)}" if head not in (None, later) else ""
                return f"waits for {self.flag(bit)}, which {self.where(later)} would deliver, but that set never ran{behind}"
        if sync is Sync.CROSS_WAIT:
            return self.cross_wait(inst)
        if sync is Sync.MUTEX_LOCK:
            return self.mutex_wait(inst)
        if sync is Sync.BARRIER_ALL:
            return "(PIPE_ALL) waits for the core's earlier instructions"
        role = UnitFlagRole(int(t.uf_role[inst]))
        if role is not UnitFlagRole.NONE:
            return self.unit_flag_wait(inst, role)
        held = self.held_by_cross_wait(inst)
        if held is not None:
            return (
                f"is held by {self.where(held)}, which never got its signal: on this chip a cross-core wait holds "
                f"every pipe of {CORE_NAMES[t.core[inst]]}"
            )
        return "waits behind an earlier instruction of its pipe or a fence of its core"

    def mutex_wait(self, inst: int) -> str:
        """A mutex lock that never got its turn: the group before it on its id, and why that one never unlocked."""
        t = self.t
        bit, core = self.flag_bit(inst), int(t.core[inst])
        what = f"mutex {int(self.ops['event_id'][inst])} of {CORE_NAMES[core]}"

        def on_id(kind):
            same = (t.sync == kind) & (t.core == core) & self.enable & (t.flag_base >= 0)
            return sorted(
                (int(i) for i in np.flatnonzero(same) if self.flag_bit(int(i)) == bit), key=lambda i: t.pidx[i]
            )

        before = [i for i in on_id(Sync.MUTEX_LOCK) if t.pidx[i] < t.pidx[inst]]
        if not before:
            return f"waits for {what}, which no earlier lock holds"
        holder = before[-1]
        unlock, depth = None, 0  # a group is locked and unlocked on one pipe; groups after it on the pipe nest
        pipe_events = sorted(
            (i for i in on_id(Sync.MUTEX_LOCK) + on_id(Sync.MUTEX_UNLOCK)
             if t.pidx[i] > t.pidx[holder] and t.queue[i] == t.queue[holder]),
            key=lambda i: t.pidx[i],
        )  # fmt: skip
        for i in pipe_events:
            if t.sync[i] == Sync.MUTEX_LOCK:
                depth += 1
            elif depth:
                depth -= 1
            else:
                unlock = i
                break
        if unlock is None:
            return (
                f"waits for {what}: the lock group before it, {self.where(holder)}, is never unlocked. Fix: unlock "
                "the mutex on the same pipe after the access it guards"
            )
        head = self.stuck_head(unlock)
        behind = f": it is queued behind {self.where(head)}" if head not in (None, unlock) else ""
        return (
            f"waits for {what}: the lock group before it, {self.where(holder)}, is released by "
            f"{self.where(unlock)}, which never ran{behind}"
        )

    def flag_bit(self, inst: int) -> int:
        """The flag bit a flag instruction names (its traced event id applied)."""
        t = self.t
        return int(t.flag_base[inst]) + int(t.flag_scale[inst]) * int(self.ops["event_id"][inst])

    def unrun_set(self, inst: int, bit: int, enabled: bool = True) -> int | None:
        """A set of flag ``bit`` in the program that never ran (the first in program order), or None. ``enabled``
        False: a set this run leaves out instead (a loop iteration past its trip count, a branch not taken)."""
        t = self.t
        if not self.start.size:
            return None
        sets = [
            int(i) for i in np.flatnonzero((t.sync == Sync.SET_FLAG) & (t.core == t.core[inst])
                                          & (self.enable == enabled) & (self.start < 0) & (t.flag_base >= 0))
            if self.flag_bit(int(i)) == bit
        ]  # fmt: skip
        return min(sets, key=lambda i: t.pidx[i]) if sets else None

    def stuck_head(self, inst: int) -> int | None:
        """The first instance of ``inst``'s queue that never completed (what the queue is stuck at), or None."""
        t = self.t
        q = int(t.queue[inst])
        members = [int(i) for i in t.qlist[q, : int(t.qlen[q])] if self.enable[i]]
        return next((i for i in members if self.end[i] < 0), None) if self.end.size else None

    def issue_held_by(self, inst: int) -> int | None:
        """An earlier PIPE_ALL or scalar instruction of ``inst``'s core that never completed (the first), which stops
        the issue before ``inst``; None when there is none."""
        t = self.t
        if not self.end.size:
            return None
        fences = np.flatnonzero(
            ((t.sync == Sync.BARRIER_ALL) | (t.queues[t.queue] % N_PIPES == int(Pipe.S))) & (t.core == t.core[inst])
            & (t.pidx < t.pidx[inst]) & self.enable & (self.end < 0)
        )  # fmt: skip
        return int(fences[np.argmin(t.pidx[fences])]) if fences.size else None

    def held_by_cross_wait(self, inst: int) -> int | None:
        """A stuck cross-core wait of ``inst``'s core, earlier in its program, on another pipe (None: none)."""
        t = self.t
        if not self.end.size:
            return None
        waits = np.flatnonzero(
            (t.sync == Sync.CROSS_WAIT) & (t.core == t.core[inst]) & (t.pidx < t.pidx[inst]) & self.enable
            & (self.end < 0) & (t.queue != t.queue[inst])
        )  # fmt: skip
        return int(waits[np.argmin(t.pidx[waits])]) if waits.size else None

    def cross_wait(self, inst: int) -> str:
        """The event a stuck cross-core wait needs, from whom, why each sender's signal never came, and the fix."""
        t = self.t
        ev, mode = int(self.ops["event_id"][inst]), SyncMode(int(self.ops["mode"][inst]))
        senders = [t.channel_keys[c][1] for c in t.channels[inst] if c >= 0]
        names = " and ".join("the other AIV's barrier half" if s >= len(CORE_NAMES) else CORE_NAMES[s] for s in senders)
        lines = [f"waits for cross-core event {ev} ({mode.name}) from {names}"]
        if len(senders) > 1 and t.core[inst] == AIC:
            lines.append("    (INTRA_BLOCK: a cube wait needs a set from each of the two AIVs.)")
        ran = (self.start >= 0) & self.enable if self.start.size else np.zeros(t.n_instances, bool)
        sets = ran & (t.sync == Sync.CROSS_SET) & (self.ops["event_id"] == ev)
        count = np.asarray(self.result.machine.count)
        e = t.cross_ids.index(ev) if ev in t.cross_ids else None
        for c in (c for c in t.channels[inst] if c >= 0):
            sender = t.channel_keys[c][1]
            if e is not None and count[c, e] > 0:
                continue  # this sender's signal is here: not what the wait lacks
            if sender >= len(CORE_NAMES):  # the INTER_SUBBLOCK barrier: both AIVs set the id
                for aiv in (AIV0, AIV1):
                    if not np.any(sets & (t.core == aiv) & (self.ops["mode"] == int(SyncMode.INTER_SUBBLOCK))):
                        lines.append(f"    {CORE_NAMES[aiv]} never ran set_cross_core(event_id={ev}, "
                                     "INTER_SUBBLOCK): the barrier needs a set from each AIV.")  # fmt: skip
                continue
            name = CORE_NAMES[sender]
            mine = sets & (t.core == sender)
            here_sets = int(np.sum(mine & np.any(t.channels == c, axis=1)))
            if self.core_stuck(sender) and not here_sets:
                lines.append(f"    {name} is itself stuck (see its entry), so its set never comes: a wait "
                             "cycle between the cores.")  # fmt: skip
            elif here_sets:
                lines.append(f"    {name} set event {ev} {here_sets} time(s) for it and every signal was taken by "
                             "an earlier wait: waits outnumber sets.")  # fmt: skip
            elif np.any(mine):
                went = sorted({CORE_NAMES[t.channel_keys[k][0]] for i in np.flatnonzero(mine) for k in t.channels[i]
                               if k >= 0})  # fmt: skip
                lines.append(f"    {name} set event {ev}, but for {' and '.join(went)}, not for {CORE_NAMES[t.core[inst]]}"
                             ": check the set's sync_mode and peer.")  # fmt: skip
            else:
                lines.append(f"    {name} never ran set_cross_core(event_id={ev}) on any path.")
        lines.append(
            "    Fix: set_cross_core after the producer's last write, wait_cross_core before the consumer's first "
            "read, with the same event_id and sync_mode on both sides. A RELEASE wait on a slot's first use needs a "
            "pre-posted RELEASE before the loop or a cold-start skip (seed 002: n+1 RELEASE sets and waits per slot "
            "used n times)."
        )
        return "\n".join(lines)

    def core_stuck(self, core: int) -> bool:
        """Whether a queue of ``core`` holds an instruction that never completed."""
        t = self.t
        for q in np.flatnonzero(t.queue_core == core):
            members = t.qlist[q, : int(t.qlen[q])]
            if any(self.enable[i] and self.end[i] < 0 for i in members):
                return True
        return False

    def unit_flag_wait(self, inst: int, role: UnitFlagRole) -> str:
        """The blocks a unit-flag wait finds in the wrong state, who touched them last, and the fix."""
        t, m = self.t, self.result.machine
        want = 0 if role is UnitFlagRole.WRITER else 1
        lo, hi = int(self.ops["uf_lo"][inst]), int(self.ops["uf_hi"][inst])
        flags, last = np.asarray(m.uf), np.asarray(m.uf_inst)
        wrong = [a for a in range(lo, hi) if a < flags.size and int(flags[a]) != want and self.in_run(inst, a)]
        if not wrong:
            return f"waits for unit flag = {want} on its L0C blocks"
        count = sum(int(t.uf_atom_blocks[a, 1] - t.uf_atom_blocks[a, 0]) for a in wrong)
        lo_block, hi_block = int(t.uf_atom_blocks[wrong[0], 0]), int(t.uf_atom_blocks[wrong[-1], 1]) - 1
        span = f"L0C blocks {lo_block}..{hi_block}"
        blocks = span if count == hi_block - lo_block + 1 else f"{count} of {span}"
        lines = [f"waits for unit flag = {want} on {blocks}{self.l0c_tiles(lo_block, hi_block)}"]
        toucher = int(last[wrong[0]])
        if toucher < 0:  # nothing flipped them: the last mmad of the program on them, if any, kept its flag
            toucher = self.last_writer(inst, wrong)
        nop = self.no_op_mmad(inst, wrong)
        if nop is not None:
            lines.append(f"    {self.where(nop)} is a no-op (its m, k or n is 0): it set no unit flag on them.")
        if toucher < 0:
            pending = self.unrun_writer(inst, wrong)
            if pending is not None:  # the flag's producer is stuck itself: its queue's entry says at what
                head = self.stuck_head(pending)
                behind = f": it is queued behind {self.where(head)}" if head not in (None, pending) else ""
                lines.append(f"    {self.where(pending)} would set them, but it never ran{behind}.")
                return "\n".join(lines)
            lines.append("    no mmad or L0C read touched those blocks before it.")
        else:
            mode, role = int(self.ops["uf_mode"][toucher]), UnitFlagRole(int(t.uf_role[toucher]))
            verb = "written" if role is UnitFlagRole.WRITER else "read"
            pl = self.pl_spelled(toucher)
            never = (
                ", which never sets the flag" if pl and want == 1 and role is UnitFlagRole.WRITER and mode == 2 else ""
            )
            lines.append(f"    those blocks were last {verb} by {self.where(toucher)} with {mode_text(mode, role, pl)}"
                         f"{never}.")  # fmt: skip
        fix = _unit_flag_fix(want, UnitFlagRole(int(t.uf_role[toucher])) if toucher >= 0 else None,
                             int(self.ops["uf_mode"][toucher]) if toucher >= 0 else 0)  # fmt: skip
        if self.pl_spelled(inst) or (toucher >= 0 and self.pl_spelled(toucher)):  # PyPTO-Pro's words and spelling
            writers = [i for i in (toucher, inst) if i >= 0 and t.uf_role[i] == UnitFlagRole.WRITER]
            name = self.spelling(writers[0]) if writers and self.pl_spelled(writers[0]) else "matmul"
            fix = phases_first(fix).replace("an mmad", f"a {name}").replace("mmad", name)
        lines.append("    Fix: " + fix)
        return "\n".join(lines)

    def last_writer(self, inst: int, atoms: list) -> int:
        """The last mmad on ``atoms`` that ran before ``inst`` in its core's program (-1: none)."""
        ran = self.start >= 0 if self.start.size else np.zeros(self.t.n_instances, bool)
        found = self._mmads_before(inst, atoms, ran)
        return found if found is not None else -1

    def unrun_writer(self, inst: int, atoms: list) -> int | None:
        """The last mmad on ``atoms`` before ``inst`` in its core's program that is in the program but never ran (the
        flag's producer, stuck behind something else), or None."""
        never = self.enable & (self.start < 0) if self.start.size else np.zeros(self.t.n_instances, bool)
        return self._mmads_before(inst, atoms, never)

    def _mmads_before(self, inst: int, atoms: list, among) -> int | None:
        """The last mmad of ``among`` (a mask over instances) on ``atoms`` before ``inst`` in its core's program."""
        t, lo, hi = self.t, self.ops["uf_lo"], self.ops["uf_hi"]
        found = np.flatnonzero(
            among & (t.uf_role == UnitFlagRole.WRITER) & (t.core == t.core[inst]) & (t.pidx < t.pidx[inst])
            & (lo <= atoms[0]) & (atoms[0] < hi)
        )  # fmt: skip
        return int(found[np.argmax(t.pidx[found])]) if found.size else None

    def no_op_mmad(self, inst: int, atoms: list) -> int | None:
        """The last no-op mmad (m, k or n is 0) on ``atoms`` before ``inst`` in its core's program, if any."""
        t, nop = self.t, np.asarray(self.ops["nop"])
        lo, hi = np.asarray(self.ops["uf_lo"]), np.asarray(self.ops["uf_hi"])
        found = [
            i for i in range(t.n_instances)
            if nop[i] and self.enable[i] and t.core[i] == t.core[inst] and t.pidx[i] < t.pidx[inst]
            and any(int(lo[i]) <= a < int(hi[i]) for a in atoms)
        ]  # fmt: skip
        return max(found, key=lambda i: int(t.pidx[i])) if found else None

    def in_run(self, inst: int, atom: int) -> bool:
        """Whether unit-flag atom ``atom`` is one of the instance's blocks (under its stride)."""
        period, run = (int(x) for x in self.t.uf_stride[inst])
        if not period:
            return True
        first = int(self.t.uf_atom_blocks[int(self.ops["uf_lo"][inst]), 0])
        return (int(self.t.uf_atom_blocks[atom, 0]) - first) % period < run


def describe(record, result, chip: str | None = None) -> list[FindingText]:
    """The findings of ``result`` (a ``run_control`` of ``record``), most severe first (``chip``: its name, for
    the words of a chip's limits)."""
    words = _Words(record, result, chip)
    rows = np.asarray(result.findings)[: int(result.n_findings)]
    return [words.row(row) for row in rows if int(row[ENTRY]) >= 0]
