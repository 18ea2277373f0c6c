"""Seed 002's first check, slot mapping: does each side of a ping-pong handshake pick the slot its event is for?

A cross-core set follows the accesses its core made since its previous set; for a TileGroup
those are slots (`s[0]`, `s[1]`): a READY is set after writing them, a RELEASE after reading
them. The wait that consumed the set guards the accesses its core makes until its next wait.
When such an access lands on another slot of the same TileGroup than the set's, the slot
expression of one side disagrees with the event id of the other [semantics §5, check 1]: the
read of `s[0]` waited on the READY of `s[1]`. Reads the record's template and operands and a
``ControlResult`` only (the report layer).
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from ..engine import ControlResult, Record, Sync

_SLOT_NAME = re.compile(r"^(?P<group>.+)\[(?P<slot>\d+)\]$")


@dataclasses.dataclass(frozen=True)
class SlotMismatch:
    """An access on a TileGroup slot other than the one its handshake's set was for."""

    access: int  # the instance that touched the other slot
    wait: int  # the wait before it on its core, whose signal came from ``set``
    set: int
    group: str  # the TileGroup's name
    slot: int  # the slot ``access`` touched
    set_slots: tuple[int, ...]  # the slots the setter's core touched before ``set``
    ready: bool  # True: ``access`` reads (the set was its READY); False: it overwrites (the set was its RELEASE)
    event_id: int  # the wait's event id


def _atom_slots(t) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Per atom, the TileGroup its bytes belong to (an index into the names, -1: none) and the slot; only the
    TileGroups more than one core touches (the ones a handshake hands over)."""
    group, slot, names = np.full(t.n_atoms, -1), np.full(t.n_atoms, -1), []
    for space, lo, hi, name in t.regions:
        m = _SLOT_NAME.match(name)
        if m is None:
            continue
        if m["group"] not in names:
            names.append(m["group"])
        inside = (t.atom_space == space) & (t.atom_bytes[:, 0] >= lo) & (t.atom_bytes[:, 1] <= hi)
        group[inside], slot[inside] = names.index(m["group"]), int(m["slot"])
    cores: dict = {}  # (group, space) -> the cores that touch its bytes
    for foot, valid in ((t.read_foot, t.read_valid), (t.write_foot, t.write_valid)):
        for inst, r in zip(*np.nonzero(valid)):
            atoms = np.arange(foot[inst, r, 0], foot[inst, r, 1])
            for g, space in set(zip(group[atoms].tolist(), t.atom_space[atoms].tolist())):
                if g >= 0:
                    cores.setdefault((g, space), set()).add(int(t.core[inst]))
    shared = sorted({g for (g, _), c in cores.items() if len(c) > 1})
    keep = np.isin(group, shared)
    renumber = {g: k for k, g in enumerate(shared)}
    group = np.where(keep, [renumber.get(int(g), -1) for g in group], -1)
    return group, np.where(keep, slot, -1), [names[g] for g in shared]


class _Touches:
    """Per instance, the (group, slot) pairs it reads and writes, as this scenario ran it."""

    def __init__(self, record: Record, group: np.ndarray, slot: np.ndarray):
        t, op = record.template, {k: np.asarray(v) for k, v in record.operands.items()}
        self.group, self.slot = group, slot
        self.sides = {}
        for write, prefix, valid in ((False, "rd", t.read_valid), (True, "wr", t.write_valid)):
            on = valid & op[f"{prefix}_on"].reshape(valid.shape) & op[f"{prefix}_ok"].reshape(valid.shape)
            self.sides[write] = (op[f"{prefix}_lo"].reshape(valid.shape), op[f"{prefix}_hi"].reshape(valid.shape), on)

    def of(self, inst: int, write: bool) -> set[tuple[int, int]]:
        lo, hi, on = self.sides[write]
        out = set()
        for r in np.flatnonzero(on[inst]):
            atoms = np.arange(lo[inst, r], hi[inst, r])
            atoms = atoms[self.group[atoms] >= 0]
            out.update(zip(self.group[atoms].tolist(), self.slot[atoms].tolist()))
        return out


class Handshakes:
    """The cross-core sets and waits of one scenario with the TileGroup slots each side touched."""

    def __init__(self, record: Record, result: ControlResult):
        t = self.t = record.template
        group, slot, self.groups = _atom_slots(t)
        self.touches = _Touches(record, group, slot)
        ran = self.ran = (np.asarray(result.start) >= 0) & np.asarray(record.operands["enable"]).reshape(-1).astype(
            bool
        )
        self.source = np.asarray(result.source)
        self.event_id = np.asarray(record.operands["event_id"]).reshape(-1)
        self.sets = np.flatnonzero((t.sync == Sync.CROSS_SET) & ran)
        self.waits = np.flatnonzero((t.sync == Sync.CROSS_WAIT) & ran & (self.source >= 0))
        self._order = {
            core: [int(i) for i in np.argsort(t.pidx, kind="stable") if t.core[i] == core and ran[i]]
            for core in np.unique(t.core).tolist()
        }
        self._pos = {i: k for order in self._order.values() for k, i in enumerate(order)}
        self.consumers: dict = {}  # set instance -> the waits that took its signal
        self._by_site: dict = {}  # (set site, event id) -> the waits that took a signal of such a set
        for wait in self.waits.tolist():
            src = int(self.source[wait])
            self.consumers.setdefault(src, []).append(wait)
            self._by_site.setdefault(self._site(src), []).append(wait)
        self._guarded: dict = {}

    def _site(self, inst: int) -> tuple[str, int]:
        return self.t.entries[int(self.t.entry[inst])][1], int(self.event_id[inst])

    def published(self, set_inst: int) -> tuple[dict, dict]:
        """``({group: slots written}, {group: slots read})`` by the set's core since its previous set."""
        order = self._order[int(self.t.core[set_inst])]
        k = first = self._pos[set_inst]
        while first > 0 and self.t.sync[order[first - 1]] != Sync.CROSS_SET:
            first -= 1
        wrote = set().union(*(self.touches.of(i, True) for i in order[first:k]))
        read = set().union(*(self.touches.of(i, False) for i in order[first:k]))
        return _by_group(wrote), _by_group(read)

    def guarded(self, wait: int) -> list[tuple[int, int, int, bool]]:
        """``(instance, group, slot, write)`` of every slot access of the wait's core after it, up to its next
        cross-core wait (the accesses the wait orders after the set it took)."""
        if wait not in self._guarded:
            order = self._order[int(self.t.core[wait])]
            k = last = self._pos[wait] + 1
            while last < len(order) and self.t.sync[order[last]] != Sync.CROSS_WAIT:
                last += 1
            self._guarded[wait] = [
                (i, g, s, w) for i in order[k:last] for w in (False, True) for g, s in sorted(self.touches.of(i, w))
            ]
        return self._guarded[wait]

    def roles(self, set_inst: int) -> dict:
        """``{group: (role, slots)}`` of a set: READY where the waits that took it read the group after (or, where
        they do not touch it, where the set's core wrote it), RELEASE where they only overwrite it (or the set's
        core only read it). A pre-posted set touched nothing before it: its slots are the ones its waits touch. A
        set whose signal a wait took together with another core's (INTRA_BLOCK) has the waits of its site."""
        wrote, read = self.published(set_inst)
        mine = {g: wrote.get(g, set()) | read.get(g, set()) for g in set(wrote) | set(read)}
        theirs: dict = {}
        for wait in self.consumers.get(set_inst) or self._by_site.get(self._site(set_inst), ()):
            for _, g, s, w in self.guarded(wait):
                if not mine or g in mine:
                    theirs.setdefault(g, {}).setdefault(s, set()).add(w)
        out = {}
        for g in sorted(set(mine) | (set(theirs) if not mine else set())):
            seen = theirs.get(g, {})
            consumer_reads = any(False in ws for ws in seen.values())
            ready = consumer_reads if seen else g in wrote
            slots = mine[g] if mine else {min(seen)}
            out[g] = ("READY" if ready else "RELEASE", tuple(sorted(slots)))
        return out

    def mismatches(self) -> list[SlotMismatch]:
        """Every access that touched another slot of a TileGroup than the set its wait consumed was for (the first
        per wait site, access site, group and slot), in program order per core."""
        t, found, seen = self.t, [], set()
        if not self.groups:
            return found
        for wait in self.waits.tolist():
            setter = int(self.source[wait])
            wrote, read = self.published(setter)
            mine = {g: wrote.get(g, set()) | read.get(g, set()) for g in set(wrote) | set(read)}
            for inst, g, s, write in self.guarded(wait):
                key = (int(t.entry[wait]), int(t.entry[inst]), g, s)
                if g in mine and s not in mine[g] and key not in seen:
                    seen.add(key)
                    found.append(SlotMismatch(
                        inst, wait, setter, self.groups[g], s, tuple(sorted(mine[g])), not write,
                        int(self.event_id[wait]),
                    ))  # fmt: skip
        return sorted(found, key=lambda m: (int(t.core[m.access]), int(t.pidx[m.access])))


def slot_mismatches(record: Record, result: ControlResult) -> list[SlotMismatch]:
    """``Handshakes(record, result).mismatches()``."""
    return Handshakes(record, result).mismatches()


def _by_group(pairs) -> dict:
    out: dict = {}
    for g, s in pairs:
        out.setdefault(g, set()).add(s)
    return out
