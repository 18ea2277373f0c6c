"""The record's template as the control plane reads it: NumPy tables padded to size buckets.

Padding to buckets lets one compiled program serve every record of similar size: the tables
are traced arrays, and only the padded sizes are static. Small records are padded to a size
class (``SIZE_CLASSES``), so they all share one program. Built once per template and options
(cached), as NumPy arrays: the control plane's ``filter_jit`` traces them.

Besides the queues and sync resources, the tables hold the race check's windows: each write
with each group of another queue's accesses (one footprint, in program order) that overlaps
it. Footprints are static (tiles and windows are static; a traced slot choice picks among
known candidates), so which accesses can ever conflict is known now; the race check after the
event loop looks, per window, at the range of the group the write is unordered with.
"""

from __future__ import annotations

import functools

import equinox as eqx
import numpy as np
from jaxtyping import Array, Bool, Int

from ..core import AIC, Finding, Pipe, gpipe
from ._options import ControlOptions
from ._record import FAULT_KINDS, SUB, Sync, Template, UnitFlagRole

#: Pending signals one cross-core counter holds on a counter chip (the 16th overflows) [semantics §8].
COUNTER_DEPTH = 15
NEVER = np.int32(2**30)  # a time no event reaches
#: Smallest bucket of each padded size: small records (the tests', a first kernel) share one compiled program.
INSTANCE_FLOOR = 64
#: The most atoms a narrow access covers: the uninitialised-read check looks at that many for each of the many
#: narrow ones (a tile, a unit-flag block) and at the widest one's span only for the few wide ones (a store of a
#: GM output cut at every row): a K loop's 192 narrow writes and one wide one are 1,024 atom updates, not 16,384.
NARROW_SPAN = 4
#: Candidates one pass of the race check looks at per window (``_windows``). On the correct kernels a write is
#: unordered with at most 6 accesses of one window (flash attention at 64 KV tiles; ping-pong at 64 tiles: 3); a wider
#: range (a kernel missing its sync) takes more passes, never a larger program.
WINDOW_SLOTS = 8
WINDOW_FLOOR, WINDOW_SLOT_FLOOR = 16, 64
#: A record's own tables whose windows hold at most this many accesses in all take each window whole: one straight
#: pass, no search (a sweep's small record under ``vmap``: the searches and the loop of passes cost more there than
#: the few pairs they spare).
WHOLE_WINDOW_ACCESSES = 4096
#: Footprint pairs compared at once while the windows are built (a bound on that step's memory).
OVERLAP_CHUNK = 1 << 24
LIST_FLOOR = 8
READ_SLOT_FLOOR, WRITE_SLOT_FLOOR = 4, 2
#: The checks' groups of static finding rows, in the order the log concatenates them.
ROW_GROUPS = ("races", "small_tile", "sync_events", "event_ids", "uninitialised", "bounds", "faults")


class Static(eqx.Module):
    """The padded template: traced arrays plus the few sizes that are static."""

    entry: Int[Array, " N"]
    core: Int[Array, " N"]
    queue: Int[Array, " N"]
    pidx: Int[Array, " N"]
    sync: Int[Array, " N"]
    uf_role: Int[Array, " N"]
    flag_base: Int[Array, " N"]
    flag_scale: Int[Array, " N"]
    cross_base: Int[Array, " N"]
    cross_scale: Int[Array, " N"]
    cross_ids: Int[Array, " E"]  # the event id of each counter id
    channels: Int[Array, "N 2"]
    channel_alt: Int[Array, "N 4"]
    fence: Bool[Array, " N"]
    qlist: Int[Array, "Q L"]  # instances of each queue in order (-1 padding)
    queue_core: Int[Array, " Q"]
    fence_list: Int[Array, "3 Fm"]  # instances that are fences, per core in program order (-1 padding)
    atom_init: Bool[Array, " A"]
    uf_valid: Bool[Array, " U"]
    uf_start: Int[Array, " U"]  # the first L0C block of each unit-flag atom
    uf_stride: Int[Array, "N 2"]  # (period, run) of an instance's unit-flag blocks (0, 0: all of its range)
    channel_valid: Bool[Array, " C"]
    sub_channel: Bool[Array, " C"]  # an INTER_SUBBLOCK barrier channel
    # every used access slot: reads first, then writes (index into the operands' reads and writes, concatenated)
    acc_flat: Int[Array, " M"]
    acc_inst: Int[Array, " M"]
    acc_slot: Int[Array, " M"]
    acc_write: Bool[Array, " M"]
    acc_valid: Bool[Array, " M"]  # a real access (the last is always padding: lists that compute, not only
    # report, are padded with it)
    # the race check's windows (``_windows``): a write access and a group of another queue's accesses (one footprint,
    # in program order) that overlaps it
    win_acc: Int[Array, " M"]  # every access, group after group (padding: the padding access)
    win_write: Int[Array, " T"]  # the window's write (an access)
    win_start: Int[Array, " T"]  # its group: where it begins in ``win_acc`` and how long it is
    win_length: Int[Array, " T"]
    win_width: Int[Array, " T"]  # its slots: at most ``WINDOW_SLOTS`` (taken whole: its length)
    win_queue: Int[Array, " T"]  # the group's queue
    # on one core, where the group's accesses after the write in program order begin (-1: across cores)
    win_split: Int[Array, " T"]
    win_valid: Bool[Array, " T"]
    slot_win: Int[Array, " S"]  # per slot of a pass, its window and its place in it
    slot_place: Int[Array, " S"]
    slot_valid: Bool[Array, " S"]
    race_inst: Int[Array, " Nr"]  # instances that appear in a window
    race_place: Int[Array, " N"]  # per instance, its index in race_inst (0 where it has none)
    # which accesses the other checks look at
    # reads whose footprint holds bytes of no input, and the writes that may land on such bytes: each list the
    # narrow accesses (at most ``NARROW_SPAN`` atoms) first, ``uninit_narrow_rows`` rows, then the wide ones
    uninit_reads: Int[Array, " Mu"]
    uninit_writes: Int[Array, " Mw"]
    bound_accs: Int[Array, " Mb"]  # accesses with a traced slot choice
    id_inst: Int[Array, " Mi"]  # sync instructions with a traced event id
    fault_inst: Int[Array, " Mf"]  # instances a traced operand may fault, one row per (instance, kind)
    fault_kind: Int[Array, " Mf"]  # the row's kind (a member of FAULT_KINDS; padding: 0)
    fault_valid: Bool[Array, " Mf"]
    sync_inst: Int[Array, " Ms"]  # per finding a sync effect can raise: the instruction, the finding,
    sync_kind: Int[Array, " Ms"]  # and whether its completion (a set) or its start (a cross-core wait) raises it
    sync_at_end: Bool[Array, " Ms"]
    m_list: Int[Array, " L"]  # the AIC's M queue (-1 padding; all -1 when the record has none)
    # the finding log: the (kind, site) segments of the rows above, most severe first, split around LEFTOVER
    seg_major: Int[Array, "S1 D1"]  # rows of each segment of a kind before LEFTOVER (sentinel padded)
    seg_minor: Int[Array, "S2 D2"]  # and after it
    n_flags: int = eqx.field(static=True)
    n_entries: int = eqx.field(static=True)
    n_flag_ids: int = eqx.field(static=True)
    n_cross_ids: int = eqx.field(static=True)
    depth: int = eqx.field(static=True)  # ring depth
    uninit_narrow_rows: int = eqx.field(static=True)  # rows of narrow reads in ``uninit_reads``
    uninit_narrow_write_rows: int = eqx.field(static=True)
    uninit_span: int = eqx.field(static=True)  # the most atoms one wide listed read covers
    uninit_write_span: int = eqx.field(static=True)
    n_read_slots: int = eqx.field(static=True)
    n_write_slots: int = eqx.field(static=True)
    # what the record uses: the loop and the checks leave out what it does not (a smaller program, a cheaper step;
    # a size class's program has everything)
    has_flags: bool = eqx.field(static=True)  # intra-core set / wait flags
    has_cross: bool = eqx.field(static=True)  # cross-core sets and waits
    has_barrier: bool = eqx.field(static=True)  # PIPE_ALL barriers
    has_unit_flags: bool = eqx.field(static=True)  # unit-flag readers, writers or resets
    has_mutex: bool = eqx.field(static=True)  # mutex locks and unlocks
    cross_windows: bool = eqx.field(static=True)  # a race-check window across cores
    whole_windows: bool = eqx.field(static=True)  # every window's slots hold it whole (``WHOLE_WINDOW_ACCESSES``)
    checked: frozenset = eqx.field(static=True)  # the row groups (``ROW_GROUPS``) with a row to check
    shared: bool = eqx.field(static=True)  # padded to a size class (one compiled program serves many records)

    @property
    def n_instances(self) -> int:
        return self.entry.shape[0]

    @property
    def n_queues(self) -> int:
        return self.qlist.shape[0]

    @property
    def n_atoms(self) -> int:
        return self.atom_init.shape[0]

    @property
    def n_counters(self) -> int:
        return self.cross_ids.shape[0]


def bucket(n: int, floor: int) -> int:
    """``n`` rounded up to a power of two (at least ``floor``): records of similar size share one compile."""
    return max(floor, 1 << max(int(n) - 1, 0).bit_length())


def _pad(x, shape, fill):
    out = np.full(shape, fill, np.asarray(x).dtype)
    out[tuple(slice(0, d) for d in np.shape(x))] = x
    return out


def static(t: Template, options: ControlOptions, shared: bool = True) -> Static:
    """The padded tables of ``t`` (NumPy; ``filter_jit`` traces them). ``shared``: pad a small record to its size
    class, so that one compiled control plane serves every record of the class; else to the record's own
    buckets (the control plane is part of a bigger program anyway, a sweep's or a transformed run's)."""
    return tables(t, options) if shared else own_tables(t, options)


#: Size classes: every padded size of a record that fits one of them is the class's, so the records of the tests, the
#: seed cases and a first kernel share a handful of compiled control planes (its compile costs seconds, a padded step
#: microseconds). A record past every class keeps its own power-of-two buckets.
_SMALL = {
    "instances": 128, "queues": 16, "queue_length": 64, "channels": 4, "uf_atoms": 8, "fences": 16,
    "counters": 2, "atoms": 1024, "accesses": 256, "windows": 256, "window_slots": 512, "race_rows": 128, "sync_rows": 64,
    "id_rows": 16, "uninit_rows": 128, "uninit_write_rows": 128, "uninit_wide_rows": 32, "uninit_wide_write_rows": 32,
    "bound_rows": 32, "fault_rows": 16, "seg_major_rows": 32, "seg_major_depth": 64, "seg_minor_rows": 32,
    "seg_minor_depth": 64, "uninit_span": 128, "uninit_write_span": 128, "flags": 16, "entries": 64, "read_slots": 16,
    "write_slots": 8,
}  # fmt: skip
_MEDIUM = {
    "instances": 512, "queues": 16, "queue_length": 256, "channels": 4, "uf_atoms": 16, "fences": 64,
    "counters": 4, "atoms": 4096, "accesses": 1024, "windows": 2048, "window_slots": 4096, "race_rows": 512, "sync_rows": 256,
    "id_rows": 64, "uninit_rows": 512, "uninit_write_rows": 512, "uninit_wide_rows": 128, "uninit_wide_write_rows": 128,
    "bound_rows": 128, "fault_rows": 64, "seg_major_rows": 64, "seg_major_depth": 256, "seg_minor_rows": 64,
    "seg_minor_depth": 256, "uninit_span": 128, "uninit_write_span": 128, "flags": 16, "entries": 128, "read_slots": 32,
    "write_slots": 16,
}  # fmt: skip
SIZE_CLASSES = (
    _SMALL,
    _MEDIUM,
    # the second with all 16 cross-core ids, as a ping-pong's FIFOs of ids use them (its machine four times wider): such
    # records (170-380 instances) were past the second by their ids alone, each compiling a program of its own
    {**_MEDIUM, "counters": 16, "seg_minor_rows": 128},
)


@functools.lru_cache(maxsize=64)  # one set of padded tables per record and options, not one per call
def tables(t: Template, options: ControlOptions) -> Static:
    """The template padded to its size class (or its own buckets), with the options folded in (NumPy, on the
    host)."""
    natural: dict = {}

    def measure(name: str, n: int, floor: int) -> int:
        natural[name] = max(natural.get(name, 0), bucket(n, floor))
        return natural[name]

    own = _build(t, options, measure)
    for sizes in SIZE_CLASSES:
        if all(natural[name] <= sizes[name] for name in natural):
            return _build(t, options, lambda name, n, floor, sizes=sizes: sizes[name], shared=True)
    return own


@functools.lru_cache(maxsize=64)
def own_tables(t: Template, options: ControlOptions) -> Static:
    """The template padded to its own power-of-two buckets."""
    return _build(t, options, lambda name, n, floor: bucket(n, floor))


def _build(t: Template, options: ControlOptions, size, shared: bool = False) -> Static:
    """The tables with every padded size from ``size(name, count, floor)`` (``shared``: a size class's)."""
    n, q = size("instances", t.n_instances, INSTANCE_FLOOR), size("queues", t.n_queues, 4)
    length = size("queue_length", t.qlist.shape[1], 16)
    n_channels, n_uf = size("channels", len(t.channel_keys), 2), size("uf_atoms", t.uf_atom_blocks.shape[0], 2)
    pipe_of = t.queues[t.queue] % len(Pipe)
    sync = t.sync
    fence = (sync == Sync.BARRIER_ALL) | (pipe_of == int(Pipe.S))
    if options.wait_blocks_issue:
        fence |= (sync == Sync.WAIT_FLAG) | (sync == Sync.CROSS_WAIT) | (sync == Sync.MUTEX_LOCK)
    if options.cross_wait_blocks_core:
        fence |= sync == Sync.CROSS_WAIT
    per_core = [np.flatnonzero((t.core == c) & fence) for c in range(3)]  # instances are in program order per core
    fence_list = np.full((3, size("fences", max(p.size for p in per_core) + 1, 4)), -1, np.int32)
    for c, p in enumerate(per_core):
        fence_list[c, : p.size] = p
    nu = t.uf_atom_blocks.shape[0]
    m_queue = [i for i, g in enumerate(t.queues) if int(g) == gpipe(AIC, Pipe.M)]
    m_list = _pad(t.qlist[m_queue[0]] if m_queue else np.full(1, -1, np.int32), length, -1)
    widths = (
        size("read_slots", t.read_valid.shape[1], READ_SLOT_FLOOR),
        size("write_slots", t.write_valid.shape[1], WRITE_SLOT_FLOOR),
    )
    acc = _accesses(t, n, widths)
    win = _windows(t, acc)
    race_inst = win["race_inst"]
    n_win = size("windows", len(win["write"]), WINDOW_FLOOR)
    whole = not shared and int(win["length"].sum()) <= WHOLE_WINDOW_ACCESSES
    width = win["length"] if whole else np.minimum(win["length"], WINDOW_SLOTS)
    n_slots = size("window_slots", int(width.sum()), WINDOW_SLOT_FLOOR)
    race_place = np.zeros(n, np.int32)
    race_place[race_inst] = np.arange(len(race_inst))
    uninit_reads, uninit_writes = _uninit(t, acc)
    narrow_reads, wide_reads = _by_span(uninit_reads, acc["span"])
    narrow_writes, wide_writes = _by_span(uninit_writes, acc["span"])
    bound_accs, id_inst = np.flatnonzero(acc["traced"]), np.flatnonzero(t.id_traced)
    fault_at = np.nonzero(t.faults)  # (instance, kind index), instances in order
    fault_inst = fault_at[0].astype(np.int32)
    fault_kind = np.asarray([int(FAULT_KINDS[j]) for j in fault_at[1]], np.int32)
    sync_rows = _sync_rows(t, options)
    rows = {
        "race_rows": size("race_rows", len(race_inst), 16), "sync_rows": size("sync_rows", len(sync_rows[0]), LIST_FLOOR),
        "id_rows": size("id_rows", len(id_inst), LIST_FLOOR), "uninit_rows": size("uninit_rows", len(narrow_reads), LIST_FLOOR),
        "uninit_wide_rows": size("uninit_wide_rows", len(wide_reads), LIST_FLOOR),
        "bound_rows": size("bound_rows", len(bound_accs), LIST_FLOOR), "fault_rows": size("fault_rows", len(fault_inst), LIST_FLOOR),
    }  # fmt: skip
    listed = lambda x, width: _pad(x, width, 0)
    valid = lambda x, width: _pad(np.ones(len(x), bool), width, False)
    groups = {  # every static finding row: (its instance, its kind) per group, the row count padded
        "races": (race_inst, Finding.RACE, rows["race_rows"]),
        "small_tile": (m_list, Finding.RACE, length),
        "sync_events": (sync_rows[0], sync_rows[1], rows["sync_rows"]),
        "event_ids": (id_inst, Finding.SYNC_ERROR, rows["id_rows"]),
        "uninitialised": (
            np.concatenate(
                [
                    _pad(acc["inst"][x], rows[r], -1)
                    for x, r in ((narrow_reads, "uninit_rows"), (wide_reads, "uninit_wide_rows"))
                ]
            ),
            Finding.UNINITIALIZED,
            rows["uninit_rows"] + rows["uninit_wide_rows"],
        ),
        "bounds": (acc["inst"][bound_accs], Finding.BOUNDS, rows["bound_rows"]),
        "faults": (fault_inst, fault_kind, rows["fault_rows"]),
    }
    seg_major, seg_minor = _segments(t, [groups[g] for g in ROW_GROUPS], size)
    span = lambda name, idx: size(name, int(acc["span"][idx].max(initial=1)), 1)
    m = size("accesses", acc["inst"].size + 1, LIST_FLOOR)  # at least one padding access, never live
    write_rows = (
        size("uninit_write_rows", len(narrow_writes), LIST_FLOOR),
        size("uninit_wide_write_rows", len(wide_writes), LIST_FLOOR),
    )
    return Static(
        entry=_pad(t.entry, n, 0), core=_pad(t.core, n, 0), queue=_pad(t.queue, n, 0), pidx=_pad(t.pidx, n, NEVER),
        sync=_pad(t.sync, n, 0), uf_role=_pad(t.uf_role, n, 0), flag_base=_pad(t.flag_base, n, -1),
        flag_scale=_pad(t.flag_scale, n, 0), cross_base=_pad(t.cross_base, n, 0),
        cross_scale=_pad(t.cross_scale, n, 0),
        cross_ids=_pad(np.asarray(t.cross_ids, np.int32), size("counters", len(t.cross_ids), 2), -1),
        channels=_pad(t.channels, (n, 2), -1), channel_alt=_pad(t.channel_alt, (n, 4), -1),
        fence=_pad(fence, n, False), qlist=_pad(t.qlist, (q, length), -1),
        queue_core=_pad(t.queues // len(Pipe), q, 0), fence_list=fence_list,
        atom_init=_pad(t.atom_init, size("atoms", t.n_atoms, 16), False), uf_valid=_pad(np.ones(nu, bool), n_uf, False),
        uf_start=_pad(t.uf_atom_blocks[:, 0], n_uf, 0), uf_stride=_pad(t.uf_stride, (n, 2), 0),
        channel_valid=_pad(np.ones(len(t.channel_keys), bool), n_channels, False),
        sub_channel=_pad(np.asarray([k[1] == SUB for k in t.channel_keys], bool), n_channels, False),
        acc_flat=_pad(acc["flat"], m, 0), acc_inst=_pad(acc["inst"], m, 0), acc_slot=_pad(acc["slot"], m, 0),
        acc_write=_pad(acc["write"], m, False), acc_valid=_pad(np.ones(acc["inst"].size, bool), m, False),
        win_acc=_pad(win["order"], m, m - 1), win_write=_pad(win["write"], n_win, m - 1),
        win_start=listed(win["start"], n_win), win_length=listed(win["length"], n_win), win_width=listed(width, n_win),
        win_queue=listed(win["queue"], n_win), win_split=_pad(win["split"], n_win, -1), win_valid=valid(width, n_win),
        slot_win=listed(np.repeat(np.arange(len(width)), width), n_slots),
        slot_place=listed(_ranges(np.zeros(len(width)), width), n_slots), slot_valid=valid(np.zeros(int(width.sum())), n_slots),
        race_inst=listed(race_inst, rows["race_rows"]), race_place=race_place,
        uninit_reads=np.concatenate([listed(narrow_reads, rows["uninit_rows"]), listed(wide_reads, rows["uninit_wide_rows"])]),
        uninit_writes=np.concatenate([_pad(x, r, m - 1) for x, r in zip((narrow_writes, wide_writes), write_rows)]),  # padding: never lands
        bound_accs=listed(bound_accs, rows["bound_rows"]), id_inst=listed(id_inst, rows["id_rows"]),
        fault_inst=listed(fault_inst, rows["fault_rows"]), fault_kind=listed(fault_kind, rows["fault_rows"]),
        fault_valid=valid(fault_inst, rows["fault_rows"]),
        sync_inst=listed(sync_rows[0], rows["sync_rows"]), sync_kind=listed(sync_rows[1], rows["sync_rows"]),
        sync_at_end=listed(sync_rows[2], rows["sync_rows"]),
        m_list=m_list, seg_major=seg_major, seg_minor=seg_minor,
        n_flags=size("flags", len(t.flag_bits), 8), n_entries=size("entries", len(t.entries), 32),
        n_flag_ids=t.n_flag_ids, n_cross_ids=t.n_cross_ids, depth=COUNTER_DEPTH if options.counter_chip else 1,
        uninit_narrow_rows=rows["uninit_rows"], uninit_narrow_write_rows=write_rows[0],
        uninit_span=span("uninit_span", wide_reads), uninit_write_span=span("uninit_write_span", wide_writes),
        n_read_slots=widths[0], n_write_slots=widths[1], whole_windows=whole,
        **_features(t, groups, win, shared), shared=shared,
    )  # fmt: skip


def _features(t: Template, groups: dict, win: dict, shared: bool) -> dict:
    """What the record uses of the sync hardware and the checks. A size class's program serves every record of the
    class, so it has everything (one program per class, not one per combination)."""
    sync = t.sync
    used = {
        "has_flags": bool(np.isin(sync, (Sync.SET_FLAG, Sync.WAIT_FLAG)).any()),
        "has_cross": bool(np.isin(sync, (Sync.CROSS_SET, Sync.CROSS_WAIT)).any()),
        "has_barrier": bool((sync == Sync.BARRIER_ALL).any()),
        "has_unit_flags": bool(((t.uf_role != UnitFlagRole.NONE) | (sync == Sync.UF_RESET)).any()),
        "has_mutex": bool(np.isin(sync, (Sync.MUTEX_LOCK, Sync.MUTEX_UNLOCK)).any()),
        "checked": frozenset(g for g in ROW_GROUPS if np.any(np.asarray(groups[g][0]) >= 0)),
        "cross_windows": bool(np.any(win["split"] < 0)),
    }
    if not shared:
        return used
    # a size class's program has everything but mutexes: a record with one gets a class of its own, so the records
    # without (all but PyPTO-Pro's auto_mutex kernels) keep a step without the mutex's work
    return {k: (frozenset(ROW_GROUPS) if k == "checked" else v if k == "has_mutex" else True) for k, v in used.items()}


def _accesses(t: Template, n: int, widths: tuple[int, int] | None = None) -> dict:
    """Every used access slot, reads then writes: its instance, slot, footprint, span (the most atoms a candidate
    covers) and flat operand index.

    The flat index addresses the reads' [n, Rr] operands followed by the writes' [n, Rw] (``widths``: the padded
    slot counts Rr, Rw; default: the record's own buckets)."""
    rr, rw = widths or (
        bucket(t.read_valid.shape[1], READ_SLOT_FLOOR),
        bucket(t.write_valid.shape[1], WRITE_SLOT_FLOOR),
    )
    parts = []
    for valid, foot, span, traced, width, base, write in (
        (t.read_valid, t.read_foot, t.read_span, t.read_traced, rr, 0, False),
        (t.write_valid, t.write_foot, t.write_span, t.write_traced, rw, n * rr, True),
    ):
        inst, slot = np.nonzero(valid)
        parts.append(dict(
            inst=inst, slot=slot, lo=foot[inst, slot, 0], hi=foot[inst, slot, 1], span=span[inst, slot],
            traced=traced[inst, slot], write=np.full(inst.size, write), flat=base + inst * width + slot,
        ))  # fmt: skip
    acc = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    acc["queue"] = t.queue[acc["inst"]] if acc["inst"].size else acc["inst"]
    for k in ("inst", "slot", "lo", "hi", "span", "flat"):
        acc[k] = acc[k].astype(np.int32)
    return acc


def _windows(t: Template, acc: dict) -> dict:
    """The race check's windows (``_checks.Windows``), built in time linear in the accesses and the windows.

    Every access is in one *group*: the accesses of one footprint (its atom range) on one queue, in program order;
    ``order`` lists the accesses group after group. A *window* is a write and a group of another queue whose footprint
    overlaps the write's: the candidate conflict pairs of that write on that queue, in the order the queue runs them.
    Happens-before is monotone along a queue, so the accesses a write is unordered with form one range of each
    window's group; the check looks at that range only (``WINDOW_SLOTS`` at a time), where the list of every
    overlapping pair grows with the square of a loop's trip count."""
    lo, hi, queue, write, inst = acc["lo"], acc["hi"], acc["queue"], acc["write"], acc["inst"]
    m = lo.size
    if not m:
        none = np.zeros(0, np.int32)
        return dict(order=none, write=none, start=none, length=none, queue=none, split=none, race_inst=none)
    space = t.atom_space[np.clip(lo, 0, max(t.n_atoms - 1, 0))] if t.n_atoms else np.zeros(m, np.int64)
    feet, foot = np.unique(np.stack([space, lo, hi], axis=1).reshape(-1, 3), axis=0, return_inverse=True)
    foot = foot.reshape(-1)
    order = np.lexsort((np.arange(m), inst, queue, foot))  # by footprint, queue, then program order
    key = foot[order].astype(np.int64) * max(t.n_queues, 1) + queue[order]
    first = np.flatnonzero(np.concatenate([[True], key[1:] != key[:-1]]))
    g_start, g_len = first, np.diff(np.concatenate([first, [m]]))
    g_foot, g_queue = foot[order[first]], queue[order[first]]
    f_first = np.searchsorted(g_foot, np.arange(len(feet)))  # each footprint's groups: contiguous
    f_count = np.searchsorted(g_foot, np.arange(len(feet)), side="right") - f_first
    # (a written footprint, a footprint overlapping it in the same space), in order of the first
    written = np.unique(foot[write])
    overlaps = []
    for part in np.array_split(written, max(1, written.size * len(feet) // OVERLAP_CHUNK + 1)):
        a, b = feet[part], feet
        hit = (a[:, None, 0] == b[None, :, 0]) & (a[:, None, 1] < b[None, :, 2]) & (b[None, :, 1] < a[:, None, 2])
        i, j = np.nonzero(hit)
        overlaps.append(np.stack([part[i], j], axis=1))
    fo = np.concatenate(overlaps) if overlaps else np.zeros((0, 2), np.int64)
    # (written footprint, group of an overlapping footprint), then (write, group) on another queue
    fg_foot = np.repeat(fo[:, 0], f_count[fo[:, 1]])
    fg_group = _ranges(f_first[fo[:, 1]], f_count[fo[:, 1]])
    per_foot = np.bincount(fg_foot, minlength=len(feet))
    fg_first = np.concatenate([[0], np.cumsum(per_foot)[:-1]])
    w = np.flatnonzero(write)
    tri_write = np.repeat(w, per_foot[foot[w]])
    tri_group = fg_group[_ranges(fg_first[foot[w]], per_foot[foot[w]])]
    keep = g_queue[tri_group] != queue[tri_write]
    tri_write, tri_group = tri_write[keep], tri_group[keep]
    queue_core = t.queues // len(Pipe)
    same_core = t.core[inst[tri_write]] == queue_core[g_queue[tri_group]]
    # a same-core window also holds the accesses that follow the write in program order: sync may run one first
    pidx = t.pidx[inst[order]].astype(np.int64)
    span = int(pidx.max(initial=0)) + 2
    flat_key = np.repeat(np.arange(len(first)), g_len) * span + pidx
    split = np.searchsorted(flat_key, tri_group * span + t.pidx[inst[tri_write]], side="right") - g_start[tri_group]
    used = np.unique(tri_group)
    listed = order[_ranges(g_start[used], g_len[used])]
    race_inst, _ = _members_of(np.concatenate([inst[tri_write], inst[listed]]), t.n_instances)
    return dict(
        order=order.astype(np.int32),
        write=tri_write.astype(np.int32),
        start=g_start[tri_group].astype(np.int32),
        length=g_len[tri_group].astype(np.int32),
        queue=g_queue[tri_group].astype(np.int32),
        split=np.where(same_core, split, -1).astype(np.int32),
        race_inst=race_inst,
    )


def _ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``concatenate([arange(s, s + c) for s, c in zip(starts, counts)])``, without the loop."""
    counts = np.asarray(counts, np.int64)
    total = int(counts.sum())
    if not total:
        return np.zeros(0, np.int64)
    ends = np.cumsum(counts)
    offset = np.repeat(np.asarray(starts, np.int64) - (ends - counts), counts)
    return np.arange(total, dtype=np.int64) + offset


def _members_of(inst: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct instances among ``inst`` (each below ``n``), in order, and each entry's place among them (what
    ``np.unique(..., return_inverse=True)`` gives, without sorting millions of pairs' instances)."""
    present = np.zeros(n, bool)
    present[inst.reshape(-1)] = True
    place = np.cumsum(present) - 1
    return np.flatnonzero(present), place[inst].astype(np.int32)


def _by_span(idx: np.ndarray, span_of: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``idx`` split, in order, into the accesses of at most ``NARROW_SPAN`` atoms and the wider ones."""
    narrow = span_of[idx] <= NARROW_SPAN
    return idx[narrow], idx[~narrow]


def _uninit(t: Template, acc: dict):
    """The reads whose footprint holds bytes of no input, and the writes that may land on those bytes."""
    not_init = np.concatenate([[0], np.cumsum(~t.atom_init)])  # prefix counts of atoms holding no input
    reads = np.flatnonzero(~acc["write"] & (not_init[acc["hi"]] > not_init[acc["lo"]]))
    w = np.flatnonzero(acc["write"])
    lo, hi = acc["lo"], acc["hi"]
    # +1 where a listed read's atoms begin, -1 where they end; then the prefix counts of the atoms a read covers
    edges = np.bincount(lo[reads], minlength=t.n_atoms + 1) - np.bincount(hi[reads], minlength=t.n_atoms + 1)
    read_atoms = np.concatenate([[0], np.cumsum(np.cumsum(edges)[:-1] > 0)])
    return reads.astype(np.int32), w[read_atoms[hi[w]] > read_atoms[lo[w]]].astype(np.int32)


def _sync_rows(t: Template, options: ControlOptions):
    """Per finding a sync effect can raise: (instance, kind, raised at completion)."""
    kinds = {Sync.SET_FLAG: [Finding.DOUBLE_SET], Sync.CROSS_WAIT: [Finding.SYNC_ERROR]}
    lost = Finding.OVERFLOW if options.counter_chip else Finding.UNORDERED_SET  # a counter chip queues signals
    kinds[Sync.CROSS_SET] = [Finding.MERGED_SIGNAL, lost]
    rows = [(i, kind, sync != Sync.CROSS_WAIT) for i, sync in enumerate(t.sync) for kind in kinds.get(sync, [])]
    inst, kind, at_end = zip(*rows) if rows else ((), (), ())
    return np.asarray(inst, np.int32), np.asarray(kind, np.int32), np.asarray(at_end, bool)


def _members(group: np.ndarray, n_groups: int) -> np.ndarray:
    """[n_groups, D] the items of each group (``group[i]``: item i's group, -1: none), padded with len(group)."""
    order = np.flatnonzero(group >= 0)
    order = order[np.argsort(group[order], kind="stable")]
    counts = np.bincount(group[order], minlength=n_groups) if order.size else np.zeros(n_groups, np.int64)
    out = np.full((n_groups, max(int(counts.max(initial=0)), 1)), len(group), np.int32)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    for g in range(n_groups):
        out[g, : counts[g]] = order[starts[g] : starts[g] + counts[g]]
    return out


def _segments(t: Template, groups: list, size):
    """The (kind, site) segments of the static rows, sorted by kind then site, as member tables: one for the
    kinds more severe than LEFTOVER, one for the others. Padding rows are in no segment."""
    inst, kind, row = [], [], 0
    for members, k, padded in groups:
        real = np.asarray(members) >= 0
        inst.append(np.where(real, members, -1))
        kind.append(np.broadcast_to(np.asarray(k, np.int64), real.shape))
        inst.append(np.full(padded - real.size, -1))
        kind.append(np.zeros(padded - real.size, np.int64))
        row += padded
    inst, kind = np.concatenate(inst), np.concatenate(kind)
    entry = np.where(inst >= 0, t.entry[np.clip(inst, 0, None)] if t.n_instances else 0, 0)
    key = np.where(inst >= 0, kind * (len(t.entries) + 1) + entry, -1)
    used = np.unique(key[key >= 0])
    group = np.where(key >= 0, np.searchsorted(used, key), -1)
    members = _members(group, len(used))
    major = used // (len(t.entries) + 1) < Finding.LEFTOVER
    split = {"seg_major": members[major], "seg_minor": members[~major]}
    shape = lambda name, m: (size(f"{name}_rows", m.shape[0], 8), size(f"{name}_depth", m.shape[1], 4))
    return tuple(_pad(m, shape(name, m), row) for name, m in split.items())
