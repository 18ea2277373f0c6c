"""The instruction record: what a traced kernel executed, as a static template plus dynamic operands.

A front end (``Program``, ``ascjax.pl``) tells a ``RecordBuilder`` each instruction it issues:
its core and pipe, the byte ranges it reads and writes, its sync effect and its cost. The
builder keeps the template (everything static: kinds, queues, candidate ranges, sites) in
NumPy and the operands (everything a scenario may change: slot choices, event ids, unit-flag
modes, trip counts, cycles) as JAX arrays. A loop body is recorded once: inside
``builder.loop(trip_max)`` the loop index is an array over all iterations, so each operand
comes out stacked per iteration. ``build()`` lays the template out as one stream per core,
in program order, and numbers the static resources the control plane keeps state for.

Byte ranges are exact: every range of a buffer (all candidates of a dynamic choice too) cuts
the buffer into *atoms*, the pieces no two ranges split differently; an access is then a run
of atoms [semantics §8 "Granularity"].
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..core import AIC, AIV0, AIV1, CORE_NAMES, N_CORES, Finding, Pipe, SyncMode, array_module, core_pipes, gpipe

#: Sender index of the INTER_SUBBLOCK barrier's counters (receiver AIVk, sender SUB).
SUB = N_CORES
#: Bytes per L0C unit-flag block [semantics §3].
UNIT_FLAG_BLOCK_BYTES = 512


class Sync(enum.IntEnum):
    """The sync effect of an instruction (what the control plane does beyond its accesses)."""

    NONE = 0  # accesses only (and a unit flag, if its mode enables one)
    SET_FLAG = 1  # intra-core SetFlag: the (src, dst, id) bit := 1 at completion
    WAIT_FLAG = 2  # intra-core WaitFlag on dst: blocks while the bit is 0, then clears it
    BARRIER_ALL = 3  # PIPE_ALL: a fence that starts once every earlier instruction of its core is done
    PIPE_BARRIER = 4  # PipeBarrier<PIPE_X>: its pipe is in order anyway; on M it closes the small-tile chain
    CROSS_SET = 5  # set_cross_core: +1 on the counters its mode routes to
    CROSS_WAIT = 6  # wait_cross_core: blocks while a needed counter is 0, then takes one signal from each
    UF_RESET = 7  # set_l0c_copy_config(enable_unit_flag=True): every unit flag := 0
    # a buffer-id mutex (950: ``Mutex::Lock<pipe>(id)``, PyPTO-Pro ``mutex_lock``): lock groups on one id are
    # granted in the order the scalar unit issues them, each once the group before it has unlocked
    MUTEX_LOCK = 8  # blocks until every earlier lock group on its (core, id) has unlocked
    MUTEX_UNLOCK = 9  # releases its group at completion


#: Mutex ids per core: 0-27 for the user, 28-31 reserved (facts §3 "Mutex"); PyPTO-Pro takes all 32.
N_MUTEX_IDS = 32
#: The pipe pair a mutex's flag-bit slots are filed under (a triple no SetFlag / WaitFlag can have).
MUTEX_TRIPLE = ("mutex", "mutex")


class UnitFlagRole(enum.IntEnum):
    """How an instruction takes part in the L0C unit-flag handshake [semantics §3]."""

    NONE = 0
    WRITER = 1  # mmad: waits for flag 0; mode 3 sets 1
    READER = 2  # fixpipe / move out of L0C: waits for flag 1; mode 3 sets 0


#: Unit-flag modes (``UnitFlagMode``): 0 off, 2 keep, 3 update.
UF_OFF, UF_KEEP, UF_UPDATE = 0, 2, 3


#: The prefix of a GM tensor's space name (``Space.name``): ``GM:`` and the tensor's name.
GM_SPACE_PREFIX = "GM:"


@dataclasses.dataclass(frozen=True)
class Space:
    """One named byte space the record accesses (a GM tensor, ``GM_SPACE_PREFIX`` + its name, or an on-chip buffer of
    one core)."""

    name: str
    size_bytes: int
    initialised: bool  # its bytes hold data before the kernel (a GM input)


@dataclasses.dataclass(frozen=True)
class Window:
    """An access that moves inside ``[lo, hi)`` of ``space``: ``units`` units of ``unit_bytes`` from unit
    ``start`` (an int or traced) of that range, e.g. the rows a GM window at a traced row offset touches.
    ``length`` (traced, at most ``units``): of those, only the first ``length`` (a run-time tail's rows).
    ``columns`` (first, count; traced allowed): the elements of each unit it touches (None: all of them), so two
    windows on the same rows but apart columns do not overlap."""

    space: int
    lo: int
    hi: int
    unit_bytes: int
    start: object
    units: int
    when: object = True
    length: object = None
    columns: tuple | None = None


@dataclasses.dataclass
class _Access:
    space: int
    ranges: tuple[tuple[int, int], ...]  # candidate byte ranges [lo, hi) (a window: the range it moves in)
    choice: object  # which candidate (an int, or an array broadcast to the loop shape); a window: its start unit
    write: bool
    when: object = True  # the access happens (a bool, or an array: an mmad's accumulate read)
    window: tuple[int, int] | None = None  # (unit bytes, units) of a Window
    length: object = None  # a Window's traced length in units (None: all of its units)
    columns: tuple | None = None  # a Window's (first, count) elements of each unit (None: all of them)

    @property
    def traced(self) -> bool:
        """The choice is an array: whether it names a candidate is known only when the record runs."""
        return not isinstance(self.choice, (int, np.integer))


#: the kinds of finding a traced operand can raise, and the operand names each keeps (``bounds_what``...)
FAULT_KINDS = (Finding.BOUNDS, Finding.LAYOUT)
FAULT_NAMES = ("bounds", "layout")


class Fault(NamedTuple):
    """A rule a traced operand may break: where ``bad`` holds, the issue is a ``kind`` finding and accesses nothing.

    ``what`` names the operand (``core.BOUNDS_WHAT`` for BOUNDS, 0 for the GEMV layout), ``value`` is what it
    was and ``limit`` the largest value allowed (the reports quote them)."""

    kind: Finding
    bad: object  # bool or a traced bool (per iteration inside a loop)
    what: int
    value: object = 0
    limit: object = 0


def _faults(faults) -> tuple[dict, tuple[bool, ...], object]:
    """Per fault kind the first fault that holds (what, value, limit; what -1: none), which kinds can fault at all,
    and whether any holds (None where none can)."""
    operands, can, faulty = {}, [], None
    for kind, name in zip(FAULT_KINDS, FAULT_NAMES):
        what, value, limit = jnp.int32(-1), jnp.int32(0), jnp.int32(0)
        live = [f for f in faults if f.kind is kind and f.bad is not False]
        for f in reversed(live):  # the first listed wins
            bad = jnp.asarray(f.bad, bool)
            what = jnp.where(bad, f.what, what)
            value = jnp.where(bad, jnp.asarray(f.value, jnp.int32), value)
            limit = jnp.where(bad, jnp.asarray(f.limit, jnp.int32), limit)
            faulty = bad if faulty is None else faulty | bad
        operands.update({f"{name}_what": what, f"{name}_value": value, f"{name}_limit": limit})
        can.append(bool(live))
    return operands, tuple(can), faulty


def _unless(spec, faulty):
    """An access spec that does not happen where ``faulty`` holds."""
    if isinstance(spec, Window):
        return dataclasses.replace(spec, when=jnp.asarray(spec.when, bool) & ~faulty)
    if len(spec) == 2:
        return (spec[0], [spec[1]], 0, ~faulty)
    if len(spec) == 3:
        return (*spec, ~faulty)
    return (*spec[:3], jnp.asarray(spec[3], bool) & ~faulty)


@dataclasses.dataclass
class _Entry:
    """One instruction of the template (a loop body's entry stands for every iteration)."""

    core: int
    pipe: Pipe
    sync: Sync
    name: str
    site: str
    loops: tuple[int, ...]  # ids of the enclosing loops, outermost first
    accesses: list[_Access]
    operands: dict  # name -> int or array broadcast to the loop shape
    channels: tuple = ()  # cross-core counters (receiver, sender) a set increments / a wait needs
    flag_triple: tuple | None = None  # (core, src, dst) of a SetFlag / WaitFlag
    uf_role: UnitFlagRole = UnitFlagRole.NONE
    uf_ranges: tuple[tuple[int, int], ...] = ()  # candidate L0C block ranges
    uf_stride: tuple[int, int] = (0, 0)  # (period, run) in blocks: only the first run of every period (0: all)
    static_id: int | None = None  # the event id when it is a Python int (checked now), else None
    faults: tuple[bool, ...] = (False,) * len(FAULT_KINDS)  # per kind: a traced operand may fault
    tag: object = None  # the front end's name for the issue it came from (``RecordBuilder.tagged``)
    note: str | None = None  # the front end's advice about the issue, shown where its instance runs
    phased: bool = False  # its unit-flag mode came from a PyPTO-Pro phase (AccPhase / STPhase), not a mode


@dataclasses.dataclass
class _Loop:
    trip_max: int
    items: list


class RecordBuilder:
    """Collects a kernel's instructions; ``build()`` turns them into a ``Record``.

    **Arguments:** ``n_flag_ids``: intra-core event ids per (src, dst) pair (a chip property:
    8 on A2/A3/950 [semantics §7]); ``n_cross_ids``: cross-core event ids (16 [semantics §5]).
    """

    def __init__(self, *, n_flag_ids: int = 8, n_cross_ids: int = 16):
        self.n_flag_ids = n_flag_ids
        self.n_cross_ids = n_cross_ids
        self.spaces: list[Space] = []
        self.regions: dict[tuple[int, int, int], str] = {}
        self._root: list = []
        self._items = self._root
        self._loops: list[tuple[int, int, object]] = []  # (loop id, trip_max, enable) of open loops
        self._n_loops = 0
        self._scans = 0  # open ``scan`` bodies (inside one, operands are per iteration and enables scalars)
        self._when: list = []  # the predicates of the open ``when`` blocks
        self.core = AIC

    # --- structure ------------------------------------------------------------------------

    def space(self, name: str, size_bytes: int, *, initialised: bool = False) -> int:
        """Declare a byte space and return its index."""
        if any(s.name == name for s in self.spaces):
            raise ValueError(f"space {name!r} is declared twice")
        self.spaces.append(Space(name, int(size_bytes), initialised))
        return len(self.spaces) - 1

    def name_region(self, space: int, lo: int, hi: int, name: str) -> None:
        """Name bytes ``[lo, hi)`` of ``space`` (a tile), so a finding on them can say whose bytes they are."""
        self.regions.setdefault((space, int(lo), int(hi)), name)

    @contextlib.contextmanager
    def on(self, core: int):
        """Record the instructions of the block on ``core`` (AIC, AIV0, AIV1)."""
        if core not in (AIC, AIV0, AIV1):
            raise ValueError(f"core must be AIC (0), AIV0 (1) or AIV1 (2), got {core!r}")
        outer, self.core = self.core, core
        try:
            yield
        finally:
            self.core = outer

    @contextlib.contextmanager
    def when(self, pred):
        """Record the instructions inside as happening only where ``pred`` holds (a branch of a ``cond``)."""
        self._when.append(jnp.asarray(pred, bool))
        try:
            yield
        finally:
            self._when.pop()

    @contextlib.contextmanager
    def tagged(self, tag):
        """Tag the last instruction recorded inside (a front end's issue: its main entry, after any it adds)."""
        items = self._items
        before = len(items)
        yield
        if self._items is items and len(items) > before and isinstance(items[-1], _Entry):
            items[-1].tag = tag

    @property
    def loop_shape(self) -> tuple[int, ...]:
        return tuple(trip for _, trip, _ in self._loops)

    @contextlib.contextmanager
    def loop(self, trip_max: int, trip=None):
        """A loop recorded once: yields the iteration index as an array over all iterations.

        ``trip`` (an int or a traced scalar, at most ``trip_max``) is how many iterations run;
        the others are disabled in the control plane.
        """
        trip_max = int(trip_max)
        if trip_max < 0:
            raise ValueError(f"a loop runs a non-negative number of times, got trip_max={trip_max}")
        if self._scans:
            raise ValueError("an array loop cannot be recorded inside a scan body: use builder.scan for the inner loop")
        depth = len(self._loops)
        shape = (1,) * depth + (trip_max,)
        index = jnp.arange(trip_max, dtype=jnp.int32).reshape(shape)
        enable = index < (trip_max if trip is None else jnp.asarray(trip, jnp.int32))
        if self._loops:
            enable = enable & self._loops[-1][2][..., None]
        node = _Loop(trip_max, [])
        self._items.append(node)
        outer = self._items
        self._items = node.items
        self._loops.append((self._n_loops, trip_max, enable))
        self._n_loops += 1
        try:
            yield index
        finally:
            self._loops.pop()
            self._items = outer

    def scan(self, body, carry, trip_max: int, trip=None):
        """A loop whose body also computes data: ``body(carry, i) -> carry`` runs under ``lax.scan``.

        The instructions the body records are the loop's entries, traced once; their operands
        (per iteration inside the body) come out of the scan stacked, as ``loop`` would give them.
        Iterations at or past ``trip`` (an int or a traced scalar, at most ``trip_max``) are
        disabled and leave ``carry`` as it was. Scans nest; an array ``loop`` may not sit inside
        one, nor a scan inside an array loop. Returns the final carry.
        """
        trip_max = int(trip_max)
        if trip_max < 0:
            raise ValueError(f"a loop runs a non-negative number of times, got trip_max={trip_max}")
        if len(self._loops) > self._scans:
            raise ValueError("a scan cannot be recorded inside an array loop: use builder.scan for both")
        trip = trip_max if trip is None else jnp.asarray(trip, jnp.int32)
        outer = self._enable()
        node = _Loop(trip_max, [])
        self._items.append(node)
        lid = self._n_loops
        self._n_loops += 1

        def step(c, i):
            node.items.clear()  # the body is traced once; a retrace records it afresh
            on = outer & (i < trip)
            items, self._items = self._items, node.items
            self._loops.append((lid, trip_max, on))
            self._scans += 1
            try:
                new = body(c, i)
            finally:
                self._scans -= 1
                self._loops.pop()
                self._items = items
            kept = jax.tree.map(lambda a, b: jnp.where(on, a, b), new, c)
            return kept, [_dynamic(e) for e in _entries(node.items, [])]

        carry, stacked = jax.lax.scan(step, carry, jnp.arange(trip_max, dtype=jnp.int32))
        for e, values in zip(_entries(node.items, []), stacked):
            _set_dynamic(e, values)
        return carry

    # --- instructions ---------------------------------------------------------------------

    def instruction(
        self,
        name: str,
        pipe: Pipe,
        *,
        site: str = "",
        reads=(),
        writes=(),
        sync: Sync = Sync.NONE,
        cycles=1,
        head_cycles=0,
        flight_cycles=0,
        gm_bytes=0,
        price=None,
        head_price=None,
        flight_price=None,
        enable=True,
        uf_role: UnitFlagRole = UnitFlagRole.NONE,
        uf_mode=UF_OFF,
        uf_blocks=(),
        uf_choice=0,
        uf_stride=(0, 0),
        small_tile=False,
        accumulate=False,
        nop=False,
        event_id=0,
        mode: SyncMode | None = None,
        flag_triple=None,
        channels=(),
        faults=(),
        note=None,
        phased=False,
    ) -> None:
        """Record one instruction on the current core.

        ``reads`` / ``writes``: ``(space, (lo, hi))``, or ``(space, [(lo, hi), ...], choice)`` with a
        dynamic choice among candidate byte ranges, or ``(space, ranges, choice, when)`` for an
        access that happens only where ``when`` holds. ``uf_blocks``: candidate L0C block ranges of a unit-flag instruction;
        ``uf_stride=(period, run)``: of each range only the first ``run`` blocks of every ``period`` (a region of
        fewer rows than its Nz tile: one run per column of fractals). ``head_cycles``: of ``cycles``, what an mmad
        saves when it streams (it starts as the previous instruction of its pipe completes: its pipeline is full).
        ``flight_cycles``: of ``cycles``, the trailing part a DMA request is in flight (the GM latency): its pipe
        takes the next request meanwhile, and a set or barrier on the pipe waits for it to land. ``gm_bytes``: the
        bytes it moves to or from GM (a launch's cores share the chip's GM bandwidth for them). ``price``,
        ``head_price``, ``flight_price``: ``cycles``, ``head_cycles`` and ``flight_cycles`` before they were rounded to
        whole cycles (floats of the costs; default: the whole cycles), what ``jax.grad`` of the cycles follows.
        ``small_tile``: an mmad over fewer than 10 fp32 fractals; ``accumulate``: it adds to L0C; ``nop``: an
        mmad whose m, k or n is 0, which accesses nothing and takes no part in the unit-flag handshake (the
        front end records it so; reports name it). ``faults``: ``Fault`` s of its traced operands; an issue
        where one holds is a finding of its kind and accesses nothing (the first of a kind is reported).
        ``note``: advice a report shows for each instance that runs (not a finding).
        """
        pipe = Pipe.parse(pipe)
        if pipe not in core_pipes(self.core):
            raise ValueError(f"{name} runs on pipe {pipe}, which {CORE_NAMES[self.core]} does not have")
        fault_operands, can_fault, faulty = _faults(faults)
        if faulty is not None:
            reads, writes = ([_unless(spec, faulty) for spec in specs] for specs in (reads, writes))
        accesses = [self._access(name, spec, False) for spec in reads] + [
            self._access(name, spec, True) for spec in writes
        ]
        loops = tuple(lid for lid, _, _ in self._loops)
        operands = {
            "enable": self._enable() & jnp.asarray(enable, bool),
            "cycles": jnp.asarray(cycles, jnp.int32),
            "head_cycles": jnp.asarray(head_cycles, jnp.int32),
            # at most all but one of its cycles: a request occupies its pipe for at least one
            "flight_cycles": jnp.clip(
                jnp.asarray(flight_cycles, jnp.int32), 0, jnp.maximum(jnp.asarray(cycles) - 1, 0)
            ),
            "gm_bytes": jnp.asarray(gm_bytes, jnp.int32),
            "price": jnp.asarray(cycles if price is None else price, jnp.float32),
            "head_price": jnp.asarray(head_cycles if head_price is None else head_price, jnp.float32),
            "flight_price": jnp.asarray(flight_cycles if flight_price is None else flight_price, jnp.float32),
            "uf_mode": jnp.asarray(uf_mode, jnp.int32),
            "uf_choice": jnp.asarray(uf_choice, jnp.int32),
            "small_tile": jnp.asarray(small_tile, bool),
            "accumulate": jnp.asarray(accumulate, bool),
            "nop": jnp.asarray(nop, bool),
            "event_id": jnp.asarray(event_id, jnp.int32),
            "mode": jnp.asarray(-1 if mode is None else int(mode), jnp.int32),
            **fault_operands,
        }
        uf_ranges = tuple((int(lo), int(hi)) for lo, hi in uf_blocks)
        if uf_role is not UnitFlagRole.NONE and not uf_ranges:
            raise ValueError(f"{name} takes part in the unit-flag handshake but names no L0C blocks")
        period, run = (int(x) for x in uf_stride)
        if period and not 0 < run <= period:
            raise ValueError(f"{name}: a unit-flag stride runs 0 < run <= period blocks, got run {run} of {period}")
        self._items.append(
            _Entry(
                self.core, pipe, Sync(sync), name, site, loops, accesses, operands,
                channels=tuple(channels), flag_triple=flag_triple, uf_role=UnitFlagRole(uf_role), uf_ranges=uf_ranges,
                uf_stride=(period, run),
                static_id=int(event_id) if isinstance(event_id, (int, np.integer)) else None, faults=can_fault,
                note=note, phased=bool(phased),
            )
        )  # fmt: skip

    def _enable(self):
        on = self._loops[-1][2] if self._loops else jnp.asarray(True)
        for pred in self._when:
            on = on & pred
        return on

    def _access(self, name, spec, write) -> _Access:
        when = True
        if isinstance(spec, Window):
            size = self.spaces[spec.space].size_bytes
            whole = spec.unit_bytes > 0 and (spec.hi - spec.lo) % spec.unit_bytes == 0
            if not (0 <= spec.lo < spec.hi <= size and whole):
                raise ValueError(
                    f"{name}: a window moves in whole {spec.unit_bytes} B units of [{spec.lo}, {spec.hi}) inside "
                    f"{self.spaces[spec.space].name} ({size} B)"
                )
            total = (spec.hi - spec.lo) // spec.unit_bytes
            if not 0 < spec.units <= total:
                raise ValueError(f"{name}: a window of {spec.units} units does not fit the {total} units it moves in")
            start = spec.start
            if isinstance(start, (int, np.integer)) and not 0 <= int(start) <= total - spec.units:
                raise ValueError(f"{name} starts a {spec.units}-unit window at unit {int(start)} of {total}")
            return _Access(
                spec.space,
                ((spec.lo, spec.hi),),
                start,
                write,
                spec.when,
                window=(spec.unit_bytes, spec.units),
                length=spec.length,
                columns=spec.columns,
            )
        if len(spec) == 2:
            space, rng = spec
            ranges, choice = (tuple(rng),), 0
        elif len(spec) == 3:
            space, ranges, choice = spec
        else:
            space, ranges, choice, when = spec
        ranges = tuple((int(lo), int(hi)) for lo, hi in ranges)
        if isinstance(choice, (int, np.integer)) and not 0 <= int(choice) < len(ranges):
            raise ValueError(f"{name} chooses candidate {int(choice)} of {len(ranges)} byte ranges")
        size = self.spaces[space].size_bytes
        for lo, hi in ranges:
            if not 0 <= lo < hi <= size:
                raise ValueError(
                    f"{name} accesses bytes [{lo}, {hi}) of {self.spaces[space].name}, which holds {size} bytes"
                )
        return _Access(space, ranges, choice, write, when)

    def set_flag(self, src, dst, event_id=0, *, site="", enable=True):
        """Intra-core SetFlag<src_dst>(event_id): executes on ``src`` (only where ``enable`` holds)."""
        self._flag(Sync.SET_FLAG, Pipe.parse(src), Pipe.parse(src), Pipe.parse(dst), event_id, site, enable)

    def wait_flag(self, src, dst, event_id=0, *, site="", enable=True):
        """Intra-core WaitFlag<src_dst>(event_id): executes on ``dst`` (only where ``enable`` holds)."""
        self._flag(Sync.WAIT_FLAG, Pipe.parse(dst), Pipe.parse(src), Pipe.parse(dst), event_id, site, enable)

    def _flag(self, sync, pipe, src, dst, event_id, site, enable):
        self._check_id(event_id, self.n_flag_ids, "set/wait flag")
        name = "set_flag" if sync is Sync.SET_FLAG else "wait_flag"
        triple = (self.core, src, dst)
        self.instruction(name, pipe, site=site, sync=sync, event_id=event_id, flag_triple=triple, enable=enable)

    def mutex_lock(self, pipe, mutex_id, *, site="", enable=True):
        """``Mutex::Lock<pipe>(mutex_id)`` on the current core: ``pipe`` waits until the lock groups issued before it on
        ``mutex_id`` have unlocked."""
        self._mutex(Sync.MUTEX_LOCK, pipe, mutex_id, site, enable)

    def mutex_unlock(self, pipe, mutex_id, *, site="", enable=True):
        """``Mutex::Unlock<pipe>(mutex_id)``: releases the group its lock opened, once ``pipe``'s work before it is done."""
        self._mutex(Sync.MUTEX_UNLOCK, pipe, mutex_id, site, enable)

    def _mutex(self, sync, pipe, mutex_id, site, enable):
        self._check_id(mutex_id, N_MUTEX_IDS, "mutex")
        name = "mutex_lock" if sync is Sync.MUTEX_LOCK else "mutex_unlock"
        triple = (self.core, *MUTEX_TRIPLE)
        self.instruction(name, pipe, site=site, sync=sync, event_id=mutex_id, flag_triple=triple, enable=enable)

    def barrier(self, pipe="ALL", *, site=""):
        """``PipeBarrier<pipe>``; ``"ALL"`` is the PIPE_ALL fence (it runs on the issuer, S)."""
        if str(pipe).upper().removeprefix("PIPE_") == "ALL":
            self.instruction("barrier_all", Pipe.S, site=site, sync=Sync.BARRIER_ALL)
        else:
            self.instruction("pipe_barrier", pipe, site=site, sync=Sync.PIPE_BARRIER)

    def unit_flag_reset(self, *, site=""):
        """``set_l0c_copy_config(enable_unit_flag=True)``: every unit flag := 0, on S."""
        self.instruction("unit_flag_reset", Pipe.S, site=site, sync=Sync.UF_RESET)

    def cross_set(self, pipe, event_id, mode=SyncMode.INTRA_BLOCK, *, subblock=0, point_to_point=False, site=""):
        """``set_cross_core(pipe, event_id, mode)`` on the current core."""
        self._cross(Sync.CROSS_SET, pipe, event_id, mode, subblock, point_to_point, site)

    def cross_wait(self, pipe, event_id, mode=SyncMode.INTRA_BLOCK, *, subblock=0, point_to_point=False, site=""):
        """``wait_cross_core(pipe, event_id, mode)`` on the current core."""
        self._cross(Sync.CROSS_WAIT, pipe, event_id, mode, subblock, point_to_point, site)

    def _cross(self, sync, pipe, event_id, mode, subblock, point_to_point, site):
        mode = SyncMode.parse(mode)
        self._check_id(event_id, self.n_cross_ids, "cross-core")
        routes = _set_channels if sync is Sync.CROSS_SET else _wait_channels
        name = "set_cross_core" if sync is Sync.CROSS_SET else "wait_cross_core"
        channels = routes(mode, self.core, subblock, point_to_point)
        self.instruction(name, pipe, site=site, sync=sync, event_id=event_id, mode=mode, channels=channels)

    @staticmethod
    def _check_id(event_id, limit, what):
        if isinstance(event_id, (int, np.integer)) and not 0 <= int(event_id) < limit:
            raise ValueError(f"{what} event_id must lie in [0, {limit}), got {int(event_id)}")
        if isinstance(event_id, float):
            raise TypeError(f"{what} event_id must be an integer, got {event_id!r}")

    def build(self) -> Record:
        return _build(self)


def _set_channels(mode, core, subblock, point_to_point):
    if mode is SyncMode.INTRA_BLOCK:
        return ((AIV0, AIC), (AIV1, AIC)) if core == AIC else ((AIC, core),)
    if mode is SyncMode.UNICAST_BLOCK:
        return ((AIV0 + subblock, AIC),) if core == AIC else ((AIC, core),)
    if mode is SyncMode.INTER_SUBBLOCK:
        if core == AIC:
            raise ValueError("INTER_SUBBLOCK synchronises the two AIVs: the cube core cannot set it")
        other = AIV0 + AIV1 - core
        return ((other, core),) if point_to_point else ((AIV0, SUB), (AIV1, SUB))
    raise ValueError(f"sync_mode {mode.name} is not modelled inside one block")


def _wait_channels(mode, core, subblock, point_to_point):
    if mode is SyncMode.INTRA_BLOCK:
        return ((AIC, AIV0), (AIC, AIV1)) if core == AIC else ((core, AIC),)
    if mode is SyncMode.UNICAST_BLOCK:
        return ((AIC, AIV0 + subblock),) if core == AIC else ((core, AIC),)
    if mode is SyncMode.INTER_SUBBLOCK:
        if core == AIC:
            raise ValueError("INTER_SUBBLOCK synchronises the two AIVs: the cube core cannot wait on it")
        return ((core, AIV0 + AIV1 - core),) if point_to_point else ((core, SUB),)
    raise ValueError(f"sync_mode {mode.name} is not modelled inside one block")


# --- the built record -----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False)
class Template:
    """Everything static about a record (NumPy arrays over instances, plus resource tables)."""

    entries: tuple  # the template entries (name, site, core, pipe, sync) by entry index
    tags: tuple  # the front end's tag of each entry (``RecordBuilder.tagged``; None: untagged)
    notes: tuple  # the front end's advice of each entry (None: none)
    phased: tuple  # per entry: its unit-flag mode came from a phase argument (the words then speak of phases)
    loops: tuple  # the ids of each entry's enclosing loops, outermost first
    spaces: tuple[Space, ...]
    entry: np.ndarray  # [N] template entry of each instance
    iteration: np.ndarray  # [N, max loop depth] loop indices of each instance (-1 beyond its depth)
    core: np.ndarray  # [N]
    queue: np.ndarray  # [N] local queue index
    pidx: np.ndarray  # [N] position in its core's program order
    sync: np.ndarray  # [N] Sync
    uf_role: np.ndarray  # [N]
    flag_base: np.ndarray  # [N] its flag bit is flag_base + flag_scale * event_id (-1: it names none)
    flag_scale: np.ndarray  # [N] 0: the id is static and flag_base is its bit; 1: a traced id picks in a block
    flag_bits: tuple  # ((core, src, dst), event id) of each flag bit
    cross_base: np.ndarray  # [N] its counter id is cross_base + cross_scale * event_id (static ids: compacted)
    cross_scale: np.ndarray  # [N]
    cross_ids: tuple  # the event id of each counter id
    id_traced: np.ndarray  # [N] bool: a sync instruction whose event id is traced (checked when it runs)
    faults: np.ndarray  # [N, len(FAULT_KINDS)] bool: a traced operand of the instance may fault, per kind
    channels: np.ndarray  # [N, 2] cross-core channel indices (-1: none)
    read_valid: np.ndarray  # [N, Rr] bool: the instance has a read in that slot
    write_valid: np.ndarray  # [N, Rw] bool
    read_span: np.ndarray  # [N, Rr] the most atoms any candidate range of the slot covers (a window: its units)
    write_span: np.ndarray  # [N, Rw]
    read_foot: np.ndarray  # [N, Rr, 2] atoms any candidate of the slot may cover: [first, end) (0, 0: none)
    write_foot: np.ndarray  # [N, Rw, 2]
    read_traced: np.ndarray  # [N, Rr] bool: the slot's choice is traced (checked when it runs)
    write_traced: np.ndarray  # [N, Rw]
    queues: np.ndarray  # [QL] global queue index of each local queue
    qlist: np.ndarray  # [QL, L] instances of each queue in order (-1 padding)
    qlen: np.ndarray  # [QL]
    queue_core: np.ndarray  # [QL]
    atom_space: np.ndarray  # [A] the space each atom belongs to
    atom_bytes: np.ndarray  # [A, 2] byte range of each atom
    atom_init: np.ndarray  # [A] bool: an input's bytes
    uf_atom_blocks: np.ndarray  # [UA, 2] L0C block range of each unit-flag atom
    uf_stride: np.ndarray  # [N, 2] (period, run) of its unit-flag blocks (0, 0: the whole range)
    channel_keys: tuple  # (receiver, sender) per cross-core channel
    channel_alt: np.ndarray  # [N, 4] other channels of a wait's receiver (a mode mismatch consumes from them)
    n_flag_ids: int
    n_cross_ids: int
    #: (space, lo, hi, name) of each named byte range a front end declared (a tile, each TileGroup slot)
    regions: tuple = ()

    @property
    def n_instances(self) -> int:
        return int(self.entry.shape[0])

    @property
    def n_queues(self) -> int:
        return int(self.queues.shape[0])

    @property
    def n_atoms(self) -> int:
        return int(self.atom_space.shape[0])


class Record(eqx.Module):
    """A traced kernel: the static ``template`` and its dynamic ``operands`` (JAX arrays over instances).

    ``operands`` may carry leading batch axes under ``vmap``; the control plane reads them as data.
    """

    template: Template = eqx.field(static=True)
    operands: dict


def _dynamic(e: _Entry) -> dict:
    """An entry's per-iteration values: its operands, and its accesses' traced choices and conditions."""
    out = {f"op:{k}": jnp.asarray(v) for k, v in e.operands.items()}
    for j, a in enumerate(e.accesses):
        if a.traced:
            out[f"choice:{j}"] = jnp.asarray(a.choice, jnp.int32)
        if not isinstance(a.when, bool):
            out[f"when:{j}"] = jnp.asarray(a.when, bool)
        if a.length is not None:
            out[f"length:{j}"] = jnp.asarray(a.length, jnp.int32)
        if a.columns is not None:
            out[f"col0:{j}"], out[f"cols:{j}"] = (jnp.asarray(x, jnp.int32) for x in a.columns)
    return out


def _set_dynamic(e: _Entry, values: dict) -> None:
    """Put an entry's values, stacked by a scan, back in place of the body's tracers."""
    for key, v in values.items():
        kind, name = key.split(":")
        if kind == "op":
            e.operands[name] = v
        elif kind == "choice":
            e.accesses[int(name)].choice = v
        elif kind == "length":
            e.accesses[int(name)].length = v
        elif kind == "col0":
            e.accesses[int(name)].columns = (v, e.accesses[int(name)].columns[1])
        elif kind == "cols":
            e.accesses[int(name)].columns = (e.accesses[int(name)].columns[0], v)
        else:
            e.accesses[int(name)].when = v


def _flatten(items, path, out):
    """Instances in program order: (entry, loop indices) pairs."""
    for item in items:
        if isinstance(item, _Loop):
            for i in range(item.trip_max):
                _flatten(item.items, (*path, i), out)
        else:
            out.append((item, path))


def _entries(items, out):
    for item in items:
        if isinstance(item, _Loop):
            _entries(item.items, out)
        else:
            out.append(item)
    return out


def _atoms(spaces, entries):
    """Cut every space at every range boundary any access may use."""
    cuts = [{0, s.size_bytes} for s in spaces]
    for e in entries:
        for a in e.accesses:
            for lo, hi in a.ranges:
                cuts[a.space].update((lo, hi) if a.window is None else range(lo, hi + 1, a.window[0]))
    atom_space, atom_bytes, first = [], [], []
    for sid, c in enumerate(cuts):
        edges = sorted(c)
        first.append((len(atom_space), {edge: i for i, edge in enumerate(edges)}))
        for lo, hi in zip(edges[:-1], edges[1:]):
            atom_space.append(sid)
            atom_bytes.append((lo, hi))
    return np.asarray(atom_space, np.int32), np.asarray(atom_bytes, np.int64).reshape(-1, 2), first


def _atom_run(first, space, lo, hi):
    base, place = first[space]  # each edge's place among its space's sorted cuts
    return base + place[lo], base + place[hi]


class _Layout:
    """Where each instance's operands come from: every entry's value broadcast to its loop shape,
    flattened and concatenated, then one gather in program order (indices computed once)."""

    def __init__(self, entries, flat):
        self.entries = entries
        position = {id(e): i for i, e in enumerate(entries)}
        offsets, total = [], 0
        for e in entries:
            offsets.append(total)
            total += int(np.prod(e.operands["enable"].shape, dtype=np.int64))
        self.entry = np.asarray([position[id(e)] for e, _ in flat], np.int32)
        self.index = np.asarray(
            [
                offsets[position[id(e)]] + (int(np.ravel_multi_index(path, e.operands["enable"].shape)) if path else 0)
                for e, path in flat
            ],
            np.int32,
        )

    def gather(self, values: list, dtype):
        """Per entry one value (static, or an array over the entry's loops), for every instance. A NumPy array
        when every value is static: only the traced columns become operations of the recording's program."""
        if not self.entries:
            return np.zeros((0,), dtype)
        chunks, run = [], []
        for e, v in zip(self.entries, values):
            shape = e.operands["enable"].shape
            if isinstance(v, jax.core.Tracer):  # a concrete value stays on the host (an eager op would compile)
                chunks.extend([np.concatenate(run)] if run else [])
                chunks.append(jnp.broadcast_to(jnp.asarray(v, dtype), shape).reshape(-1))
                run = []
            else:
                run.append(np.broadcast_to(np.asarray(v, dtype), shape).reshape(-1))
        if not chunks:
            return np.concatenate(run)[self.index]
        chunks.extend([np.concatenate(run)] if run else [])
        return jnp.take(jnp.concatenate(chunks), jnp.asarray(self.index))

    def pick(self, tables: list, choices: list):
        """Per instance, row ``choice`` of its entry's [n_candidates, 2] table, and whether the choice was in range."""
        counts = np.asarray([len(tables[i]) for i in range(len(self.entries))], np.int32)
        bases = np.concatenate([[0], np.cumsum(np.maximum(counts, 1))[:-1]]).astype(np.int32)
        rows = [np.asarray(t, np.int32).reshape(-1, 2) if len(t) else np.full((1, 2), -1, np.int32) for t in tables]
        table = np.concatenate(rows) if rows else np.zeros((1, 2), np.int32)
        choice = self.gather(choices, jnp.int32)
        xp = array_module(choice)
        count, base = counts[self.entry], bases[self.entry]
        ok = (choice >= 0) & (choice < count)
        return xp.take(table, base + xp.clip(choice, 0, np.maximum(count, 1) - 1), axis=0), ok


def _build(b: RecordBuilder) -> Record:
    entries = _entries(b._root, [])
    flat: list = []
    _flatten(b._root, (), flat)
    n = len(flat)
    atom_space, atom_bytes, first = _atoms(b.spaces, entries)
    atom_init = np.asarray([b.spaces[s].initialised for s in atom_space], bool)

    # unit-flag atoms: cut L0C blocks at every candidate range of every unit-flag instruction
    uf_cuts = sorted({x for e in entries for r in e.uf_ranges for x in _uf_runs(r, e.uf_stride)})
    uf_atom_blocks = np.asarray(list(zip(uf_cuts[:-1], uf_cuts[1:])), np.int32).reshape(-1, 2)

    # queues, program order, fences
    gq = np.asarray([gpipe(e.core, e.pipe) for e, _ in flat], np.int32)
    queues = np.unique(gq) if n else np.zeros((1,), np.int32)
    local = {int(q): i for i, q in enumerate(queues)}
    queue = np.asarray([local[int(q)] for q in gq], np.int32)
    core = np.asarray([e.core for e, _ in flat], np.int32)
    pidx = np.zeros(n, np.int32)
    for c in range(N_CORES):
        idx = np.flatnonzero(core == c)
        pidx[idx] = np.arange(idx.size)
    qlen = np.bincount(queue, minlength=len(queues)).astype(np.int32)
    qlist = np.full((len(queues), max(int(qlen.max(initial=0)), 1)), -1, np.int32)
    for q in range(len(queues)):
        members = np.flatnonzero(queue == q)
        qlist[q, : members.size] = members

    # flag bits and cross-core channels actually used
    flag_bits, flag_of = _flag_bits(entries, b.n_flag_ids)
    flag_base = np.asarray([flag_of[id(e)][0] for e, _ in flat], np.int32).reshape(n)
    flag_scale = np.asarray([flag_of[id(e)][1] for e, _ in flat], np.int32).reshape(n)
    cross_ids, cross_of = _cross_ids(entries, b.n_cross_ids)
    cross_base = np.asarray([cross_of[id(e)][0] for e, _ in flat], np.int32).reshape(n)
    cross_scale = np.asarray([cross_of[id(e)][1] for e, _ in flat], np.int32).reshape(n)
    keys = sorted({ch for e in entries for ch in e.channels})
    key_index = {k: i for i, k in enumerate(keys)}
    channels = np.full((n, 2), -1, np.int32)
    channel_alt = np.full((n, 4), -1, np.int32)
    for i, (e, _) in enumerate(flat):
        for j, ch in enumerate(e.channels):
            channels[i, j] = key_index[ch]
        if e.sync is Sync.CROSS_WAIT:
            alt = [key_index[k] for k in keys if k[0] == e.core and k not in e.channels]
            channel_alt[i, : len(alt)] = alt

    layout = _Layout(entries, flat)
    operands = {
        name: layout.gather([e.operands[name] for e in entries], dtype)
        for name, dtype in (
            ("enable", bool), ("cycles", jnp.int32), ("head_cycles", jnp.int32), ("flight_cycles", jnp.int32), ("gm_bytes", jnp.int32),
            ("price", jnp.float32), ("head_price", jnp.float32), ("flight_price", jnp.float32), ("uf_mode", jnp.int32),
            ("small_tile", bool),
            ("accumulate", bool), ("nop", bool), ("event_id", jnp.int32), ("mode", jnp.int32),
            *((f"{k}_{f}", jnp.int32) for k in FAULT_NAMES for f in ("what", "value", "limit")),
        )
    }  # fmt: skip
    reads = _access_slots(layout, first, "rd", write=False)
    writes = _access_slots(layout, first, "wr", write=True)
    operands.update(reads[0])
    operands.update(writes[0])
    operands.update(_uf_operands(layout, uf_cuts))

    depth = max((len(p) for _, p in flat), default=0)
    iteration = np.full((n, max(depth, 1)), -1, np.int32)
    for i, (_, p) in enumerate(flat):
        iteration[i, : len(p)] = p
    template = Template(
        entries=tuple((e.name, e.site, e.core, e.pipe, e.sync) for e in entries),
        tags=tuple(e.tag for e in entries),
        notes=tuple(e.note for e in entries),
        phased=tuple(e.phased for e in entries),
        loops=tuple(e.loops for e in entries),
        spaces=tuple(b.spaces),
        regions=tuple((space, lo, hi, name) for (space, lo, hi), name in sorted(b.regions.items())),
        entry=layout.entry,
        iteration=iteration,
        core=core,
        queue=queue,
        pidx=pidx,
        sync=np.asarray([int(e.sync) for e, _ in flat], np.int32),
        uf_role=np.asarray([int(e.uf_role) for e, _ in flat], np.int32),
        uf_stride=np.asarray([e.uf_stride for e, _ in flat], np.int32).reshape(n, 2),
        flag_base=flag_base,
        flag_scale=flag_scale,
        flag_bits=flag_bits,
        cross_base=cross_base,
        cross_scale=cross_scale,
        cross_ids=cross_ids,
        id_traced=np.asarray([e.sync is not Sync.NONE and e.static_id is None for e, _ in flat], bool).reshape(n),
        faults=np.asarray([e.faults for e, _ in flat], bool).reshape(n, len(FAULT_KINDS)),
        channels=channels,
        read_valid=reads[1],
        write_valid=writes[1],
        read_span=reads[2],
        write_span=writes[2],
        read_foot=reads[3],
        write_foot=writes[3],
        read_traced=reads[4],
        write_traced=writes[4],
        queues=queues.astype(np.int32),
        qlist=qlist,
        qlen=qlen,
        queue_core=(queues // len(Pipe)).astype(np.int32),
        atom_space=atom_space,
        atom_bytes=atom_bytes,
        atom_init=atom_init,
        uf_atom_blocks=uf_atom_blocks,
        channel_keys=tuple(keys),
        channel_alt=channel_alt,
        n_flag_ids=b.n_flag_ids,
        n_cross_ids=b.n_cross_ids,
    )
    return Record(template, operands)


def _access_slots(layout: _Layout, first, prefix: str, write: bool):
    """The reads (or the writes) of every instance as slots: ``{prefix}_lo`` / ``_hi`` [N, R], the atom run
    of each access; ``_ok``: its choice was in range; ``_on``: it happens. Also the [N, R] slot-in-use mask
    and, per instance and slot, the most atoms a candidate covers (the control plane looks at that many) and the
    atoms all candidates together may cover (its footprint)."""
    n = layout.index.shape[0]
    of = [[a for a in e.accesses if a.write == write] for e in layout.entries]
    width = max(max((len(x) for x in of), default=0), 1)
    los, his, oks, ons, c0s, c1s = [], [], [], [], [], []
    foot = np.zeros((len(layout.entries), width, 2), np.int32)
    span = np.ones((len(layout.entries), width), np.int32)
    traced = np.zeros((len(layout.entries), width), bool)
    for j in range(width):
        at = [x[j] if j < len(x) else None for x in of]
        tables = [[_atom_run(first, a.space, lo, hi) for lo, hi in a.ranges] if a else [] for a in at]
        windowed = [a is not None and a.window is not None for a in at]
        picked, ok = layout.pick(tables, [a.choice if a and not w else 0 for a, w in zip(at, windowed)])
        has = np.asarray([a is not None for a in at], bool)[layout.entry]
        lo, hi = picked[:, 0], picked[:, 1]
        if any(windowed):  # a window: ``units`` atoms from its start (its range is cut at every unit)
            is_win = np.asarray(windowed)[layout.entry]
            start = layout.gather([a.choice if w else 0 for a, w in zip(at, windowed)], jnp.int32)
            units = np.asarray([a.window[1] if w else 0 for a, w in zip(at, windowed)])[layout.entry]
            if any(w and a.length is not None for a, w in zip(at, windowed)):  # a run-time tail: fewer units
                lengths = [a.length if w and a.length is not None else (a.window[1] if w else 0)
                           for a, w in zip(at, windowed)]  # fmt: skip
                units = jnp.clip(layout.gather(lengths, jnp.int32), 0, units)
            xp = array_module(start, lo, ok, units)
            inside = (start >= 0) & (start + units <= hi - lo)
            ok = xp.where(is_win, inside, ok)
            lo, hi = xp.where(is_win, lo + start, lo), xp.where(is_win, lo + start + units, hi)
        los.append(lo)
        his.append(hi)
        c0, c1 = _columns(layout, at, windowed)
        c0s.append(c0)
        c1s.append(c1)
        oks.append(ok | ~has)
        ons.append(layout.gather([a.when if a else True for a in at], bool))
        for e, t in enumerate(tables):
            if t:
                foot[e, j] = (min(lo for lo, _ in t), max(hi for _, hi in t))
                traced[e, j] = at[e].traced
                span[e, j] = max(at[e].window[1] if windowed[e] else max(hi - lo for lo, hi in t), 1)
    valid = np.asarray([[j < len(x) for j in range(width)] for x in of], bool).reshape(-1, width)[layout.entry]
    stack = lambda xs: array_module(*xs).stack(xs, 1).reshape(n, width)
    names = ("lo", "hi", "ok", "on", "c0", "c1")
    operands = {f"{prefix}_{name}": stack(col) for name, col in zip(names, (los, his, oks, ons, c0s, c1s))}
    return (
        operands, valid.reshape(n, width), span[layout.entry].reshape(n, width), foot[layout.entry].reshape(n, width, 2),
        traced[layout.entry].reshape(n, width),
    )  # fmt: skip


#: the column bound of an access with no column range: past every column
ALL_COLUMNS = np.iinfo(np.int32).max


def _columns(layout, at: list, windowed: list):
    """Per instance, the [first, end) elements of each unit that one access slot touches: a window's columns, else
    all of them (0, ``ALL_COLUMNS``)."""
    ranged = [w and a.columns is not None for a, w in zip(at, windowed)]
    first = layout.gather([a.columns[0] if r else 0 for a, r in zip(at, ranged)], jnp.int32)
    count = layout.gather([a.columns[1] if r else ALL_COLUMNS for a, r in zip(at, ranged)], jnp.int32)
    if not any(ranged):
        return first, count
    xp = array_module(first, count)
    return first, xp.where(count >= ALL_COLUMNS - first, ALL_COLUMNS, first + count)  # never past ALL_COLUMNS


def _flag_bits(entries, n_flag_ids: int):
    """The flag bits the record uses and, per entry, (base, scale) of its bit. A (core, src, dst) triple whose
    ids are all static gets one bit per id it uses; one with a traced id gets a block of every id (``N_MUTEX_IDS``
    for a mutex's triple). A mutex's bits are its slots: the machine keeps its grants apart from the flags."""
    by_triple: dict = {}
    for e in entries:
        if e.flag_triple is not None:
            by_triple.setdefault(e.flag_triple, set()).add(e.static_id)
    bits, base = [], {}
    for triple in sorted(by_triple, key=repr):
        ids = by_triple[triple]
        if None in ids:
            base[triple] = len(bits)
            bits.extend((triple, i) for i in range(N_MUTEX_IDS if triple[1:] == MUTEX_TRIPLE else n_flag_ids))
        else:
            for i in sorted(ids):
                base[(triple, i)] = len(bits)
                bits.append((triple, i))
    of = {}
    for e in entries:
        if e.flag_triple is None:
            of[id(e)] = (-1, 0)
        elif e.flag_triple in base:
            of[id(e)] = (base[e.flag_triple], 1)
        else:
            of[id(e)] = (base[(e.flag_triple, e.static_id)], 0)
    return tuple(bits), of


def _cross_ids(entries, n_cross_ids: int):
    """The cross-core ids the record uses (all of them once any is traced) and, per entry, (base, scale)."""
    cross = [e for e in entries if e.sync in (Sync.CROSS_SET, Sync.CROSS_WAIT)]
    if any(e.static_id is None for e in cross):
        return tuple(range(n_cross_ids)), {id(e): (0, 1) for e in entries}
    ids = sorted({e.static_id for e in cross}) or [0]
    index = {i: k for k, i in enumerate(ids)}
    return tuple(ids), {id(e): (index.get(e.static_id, 0), 0) for e in entries}


def _uf_runs(rng, stride):
    """The block boundaries of a unit-flag range: its ends, and each run's ends under a stride."""
    lo, hi = rng
    period, run = stride
    if not period:
        return (lo, hi)
    starts = range(lo, hi, period)
    return (lo, hi, *starts, *(min(x + run, hi) for x in starts))


def _uf_operands(layout: _Layout, uf_cuts):
    """``uf_lo`` / ``uf_hi`` [N]: the unit-flag atom run; ``uf_ok``: its choice was in range."""
    n = layout.index.shape[0]
    if n == 0 or not uf_cuts:
        z = np.zeros((n,), np.int32)
        return {"uf_lo": z, "uf_hi": z, "uf_ok": np.ones((n,), bool)}
    tables = [[(uf_cuts.index(lo), uf_cuts.index(hi)) for lo, hi in e.uf_ranges] for e in layout.entries]
    picked, ok = layout.pick(tables, [e.operands["uf_choice"] for e in layout.entries])
    has = np.asarray([bool(e.uf_ranges) for e in layout.entries])[layout.entry]
    return {"uf_lo": picked[:, 0], "uf_hi": picked[:, 1], "uf_ok": ok | ~has}
