"""The kernel-writing facade: holds the current state at trace time so kernels read like Ascend C.

Every instruction declared in ``ascjax.isa`` is a method: ``k.mmad(c, a, b, m, k, n, ...)`` runs
``k.state = ops.mmad(k.state, c, a, b, m, k, n, ...)`` on the current core. The kernel as a whole
stays a pure function of its arrays. Loops written with ``Program.range``
are ``lax.scan``s, so they compile once whatever their trip count.

Ops run on the core of the current context: the cube core (AIC) by default, an AIV inside
``with k.vector(sub):`` or a ``Program.section_vector`` body. Cube ops (mmad, fixpipe,
L1/L0 moves) refuse to run on a vector core and vector ops on the cube core.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import isa
from ..core import N_CORES, Buffer, CoreKind, InstrKind
from ..core import _indexed as indexed
from ..core._chip import Chip
from ..core._memory import Allocator, Tile
from ..engine import Sync, scan_lowered
from ..engine._sections import Gate, Plan
from ..engine._state import State
from ..isa.ops._machine import RACY_READ, static_int
from . import _sites as sites
from ._tile_group import TileGroup, TileSlot

_CURRENT: list = []  # the Program being traced (for the ascjax.pl tile language)
#: The most iterations one ``Program.range`` may run (2^24: minutes of emulation already).
MAX_TRIP_COUNT = 1 << 24
#: Rough cost of one emulated loop iteration on a CPU, for the refusal's estimate (an estimate, not a measurement
#: of the user's kernel).
ITERATION_US_ESTIMATE = 10
#: Most bytes the data plane's branches on a traced predicate may write for it to run both and select: a select of
#: a few tiles costs less than a conditional (the flash attention's pipeline stages: 17 % of its run on a CPU).
SELECT_MAX_BYTES = 256 * 1024
#: How deep ``Program.range`` loops may nest (an instance keeps one index per level; eight hold an 8-D tensor's loops).
MAX_LOOP_DEPTH = 8


#: Instructions whose only effect is on the sync hardware: the data plane skips them.
SYNC_KINDS = (InstrKind.FLAG, InstrKind.BARRIER, InstrKind.CROSS_CORE)


def _data(instr: isa.Instruction, args: tuple, kwargs: dict, racy, state: State) -> State:
    """``instr``'s data function on ``state``; its reads racy where ``racy`` says (None: poison off)."""
    if racy is None:
        return instr.data(state, *instr.bound, *args, **kwargs)
    token = RACY_READ.set(racy)
    try:
        return instr.data(state, *instr.bound, *args, **kwargs)
    finally:
        RACY_READ.reset(token)


def _where(pred, data, state: State) -> State:
    """``data(state)`` where ``pred`` (traced) holds, else ``state``: the leaves it replaced, selected."""
    new = data(state)
    return jax.tree.map(lambda x, old: x if x is old else jnp.where(pred, x, old), new, state)


def _gm_if(ran, data, state: State) -> State:
    """``data(state)`` where ``ran`` (traced) holds; else ``state``'s GM (and its write marks) as they were. Only
    the tensors the issue replaced are selected."""
    new = data(state)

    def keep(now: dict, before: dict) -> dict:
        return {k: v if v is before[k] else jnp.where(ran, v, before[k]) for k, v in now.items()}

    return dataclasses.replace(new, gm=keep(new.gm, state.gm), gm_written=keep(new.gm_written, state.gm_written))


#: The ``State`` fields (under ``aic``, or ``ub`` itself) that hold on-chip buffers: what a private loop batches.
_BUFFER_FIELDS = frozenset({"l1", "l0a", "l0b", "l0c", "bt"})


def _is_buffer(path) -> bool:
    """Whether the ``State`` leaf at ``path`` (``tree_flatten_with_path``'s) is an on-chip tile's data."""
    names = [getattr(key, "name", None) for key in path[:2]]
    return names[0] == "ub" or (names[0] == "aic" and names[1] in _BUFFER_FIELDS)


def current() -> Program:
    """The Program whose kernel is being traced (``ascjax.pl`` functions act on it)."""
    if not _CURRENT:
        raise RuntimeError("no kernel is being traced: call ascjax.pl functions inside a kernel given to ascjax.run")
    return _CURRENT[-1]


def check_body(fn, n_args: int, what: str, wanted: str) -> None:
    """Refuse a loop body or branch that cannot be called with the arguments ascjax passes it (rule 'body'), naming
    the call and what it takes, before tracing it: Python's own error would name only the function."""
    if not callable(fn):
        raise TypeError(f"rule 'body': {what} is {fn!r}, not a function; it takes {wanted}")
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin or C function: called as it is
        return
    try:
        signature.bind(*range(n_args))
    except TypeError:
        name = getattr(fn, "__qualname__", repr(fn))
        raise TypeError(f"rule 'body': {what} is {name}{signature}, which takes {wanted}") from None


def _method(instr: isa.Instruction):
    """The ``Program`` method of a registered instruction: it issues ``instr`` on the current core."""

    def method(self, *args, **kwargs):
        self._issue(instr, args, kwargs)

    method.__name__ = instr.name
    method.__qualname__ = f"Program.{instr.name}"
    method.__doc__ = f"{instr.summary} ({instr.kind} on {instr.core}, pipe {instr.pipe or 'named by the arguments'})."
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY), *instr.signature.parameters.values()]
    method.__signature__ = instr.signature.replace(parameters=params)
    return method


class GroupHandle:
    """A ``TileGroup`` bound to a Program: ``current()``, ``next()``, ``previous()`` and ``group[i]``.

    The cursor is per core (each core's program walks its own copy); the first ``next()``
    returns slot 0. ``group[i]`` does not move it and is not taken modulo depth.
    """

    def __init__(self, program: Program, group: TileGroup):
        self.program = program
        self.group = group

    @property
    def depth(self) -> int:
        return self.group.depth

    def __len__(self) -> int:
        return self.group.depth

    def _pos(self):
        return self.program._state.cursors[self.group.name][self.program.core]  # the cursors: no window to run

    def current(self) -> TileSlot:
        return self.group.slot(jnp.maximum(self._pos(), 0) % self.depth)

    def previous(self) -> TileSlot:
        return self.group.slot((self._pos() - 1) % self.depth)

    def next(self) -> TileSlot:
        k = self.program
        if not k._go():
            return self.current()
        name, core = self.group.name, k.core
        step = 1 if k._pred is None else jnp.where(k._pred, 1, 0)  # in a branch run in line: where it is taken
        cursors = {**k._state.cursors, name: indexed.add(k._state.cursors[name], core, step)}
        k._state = eqx.tree_at(lambda s: s.cursors, k._state, cursors)  # the issues waiting in a window keep them
        return self.current()

    def __getitem__(self, index) -> TileSlot:
        """Slot ``index``: a static index out of range raises here; a traced one is a BOUNDS finding of the ops
        that access the slot (they access nothing)."""
        return self.group.slot(index)

    def __str__(self) -> str:
        return str(self.group)


class NeedsData(Exception):
    """A kernel read GM contents (``Program.gm``) while it was recorded from its inputs' shapes alone."""


class Program:
    """One AI Core program being traced: its allocator and the state its ops thread.

    ``block_idx`` is the index of this block in a launch (traced int32; 0 in a plain ``run``),
    ``block_num`` the launch's ``block_dim`` (a static int; 1 in a plain ``run``).
    """

    def __init__(self, chip: Chip, state: State, *, block_idx=None, block_num: int = 1, recorder=None):
        self.chip = chip
        self.recorder = (
            recorder  # an ascjax.front._recorder.Recorder: record the issues (a dry run) instead of executing
        )
        self.shapes_only = False  # the GM inputs are stand-ins of their shapes: reading their contents is refused
        # the data plane in the device's order (``ascjax.engine.EmitOrder``): the issues traced since the last trace
        # boundary wait in a window, which runs them sorted by rank when anything reads the state
        self.emit = None
        self._window: list = []
        self.emitted: dict = {}  # entry -> its place among the issues the window ran, in the trace
        self._state = state
        self._block_idx = block_idx
        self.block_num = block_num
        self.allocator = Allocator(chip)
        self._depth = 0
        self.subblock: int | None = None  # None: ops run on the AIC; 0 / 1: on that AIV
        self.gate = None  # while a concurrent section is traced: which of its ops run (ascjax.engine._sections)
        self._pending: list = []  # top-level sections declared and not yet run
        self._freed: dict = {}  # tile -> the kernel line that freed it
        self.gm_named: set[str] = set()  # GM tensors the kernel's ops named or its scalar reads read
        self._in_section = False
        # tiles the sections declare (``declared``), by declaration: made while their section is discovered
        self._declared: dict = {}
        self._declarations: list = []  # per declaration, how it changes the state (kept across discovery)
        self._declaring = False
        self.declares_in_sections = False  # the recorder's sections are discovered first (front ends set it)
        self._pred = None  # the data plane, in a section's branch or loop run in line: where its issues take effect
        # the data plane: what runs concurrent sections, and the cross-core wait instances
        # recorded so far per core (the record's numbering, with every iteration of the enclosing loops)
        self.sections_runner = None
        self.cross_waits = [0] * N_CORES
        self._trips: list[int] = []  # static trip counts of the open loops
        self._loop_index: list = []  # the (traced) indices of the open loops
        self.poison = None  # the data plane's racy reads, from the control plane (``ascjax.engine._dataplane.Poison``)
        self.ran = None  # the issues the control plane's run started, where a deadlock left some undone (``Ran``)
        # the data plane: the loops whose iterations use the on-chip buffers privately (``engine.PrivateLoops``; None
        # with ``Options.parallel_loops`` off), and the tags of the issues each open loop's body traced so far
        self.private_loops = None
        self._body_tags: list[list] = []
        # every issue's tag: (section, region, place in that region), the same in every trace of the kernel: a
        # section is traced once per segment, and a trace that skips a top-level loop's body skips a region
        self._sections = 0
        self._tag_key = None
        self._tag_pos = {None: 0}

    @property
    def state(self) -> State:
        """The state the kernel's issues have left (the issues waiting in the window run first)."""
        if self._window:
            self._run_window()
        return self._state

    @state.setter
    def state(self, state: State) -> None:
        assert not self._window, "a state set while issues wait in the window would drop them"
        self._state = state

    def _run_window(self) -> None:
        """Run the issues traced since the last trace boundary, sorted by their entries' rank (``emit``)."""
        window, self._window = self._window, []
        for _, _, entry, data in sorted(window, key=lambda w: w[:2]):
            self._state = data(self._state)
            self.emitted[entry] = len(self.emitted)

    def _go(self) -> bool:
        """Whether an op issued now runs: sections declared before it run first; a gate may switch it off."""
        if self.gate is None:
            if self._pending and not self._in_section:
                self.flush()
            return True
        return self.gate.enabled

    def flush(self) -> None:
        """Run the top-level sections declared so far: on the data plane in the order the control plane ran them
        (``sections_runner``), else each in turn (the record holds each core's program; the control plane runs
        them together)."""
        # by core, not by source order: the schedule (and so the timing) does not depend on how sections are listed
        pending, self._pending = sorted(self._pending, key=lambda plan: plan.core), []
        if self.recorder is not None and self.declares_in_sections:
            for plan in pending:  # the tiles they declare, before any is traced (the data plane discovers anyway)
                self._run_gated(Gate(discover=True), plan)
        if self.recorder is None and self.sections_runner is not None and pending:
            self.sections_runner(self, pending)
            return
        for plan in pending:
            self._run_section(plan)

    @contextlib.contextmanager
    def _tagging(self, plan):
        """A trace of ``plan``'s section: its issues are numbered from 0 again, region by region."""
        outer, self._tag_key = self._tag_key, (plan.serial, 0)
        self._tag_pos[self._tag_key] = 0
        try:
            yield
        finally:
            self._tag_key = outer

    def _next_region(self) -> None:
        """A top-level loop of a section begins or ends: its issues are numbered in a region of their own."""
        serial, region = self._tag_key
        self._tag_key = (serial, region + 1)
        self._tag_pos[self._tag_key] = 0

    def _tag(self):
        key = self._tag_key
        pos = self._tag_pos[key]
        self._tag_pos[key] = pos + 1
        return (*(key or (None,)), pos)

    def _run_section(self, plan) -> None:
        outer = (self.subblock, self._in_section)
        self.subblock, self._in_section = plan.subblock, True
        try:
            with self._tagging(plan):
                plan.call()
        finally:
            self.subblock, self._in_section = outer

    def _run_gated(self, gate, plan, state=None):
        """Trace ``plan``'s section with ``gate`` deciding which ops run; returns the state it leaves. Discovery
        (every op off) runs on the current state and keeps only the tiles the section declares."""
        outer = (self.gate, self.subblock, self._in_section)
        self.gate, self.subblock, self._in_section = gate, plan.subblock, True
        if not gate.discover:
            gate.flat = plan.flat
        try:
            with self._tagging(plan):
                if gate.discover:
                    return self._discover(plan.call)
                return self._traced(self.state if state is None else state, plan.call, "concurrent section")
        finally:
            self.gate, self.subblock, self._in_section = outer

    def _discover(self, call) -> State:
        start, first = self.state, len(self._declarations)
        try:
            call()
        finally:
            self.state = start
        for declare in self._declarations[first:]:
            self.state = declare(self.state)
        return self.state

    @property
    def core(self) -> int:
        """Index of the current core: 0 AIC, 1 AIV0, 2 AIV1."""
        return 0 if self.subblock is None else 1 + self.subblock

    # -- cores and sections ------------------------------------------------------------
    @contextlib.contextmanager
    def vector(self, sub: int):
        """``with k.vector(sub):`` issue the ops inside on AIV ``sub`` (0 or 1)."""
        if sub not in (0, 1):
            raise ValueError(f"sub-block index must be 0 or 1 (an AI Core has two AIVs), got {sub!r}")
        outer, self.subblock = self.subblock, sub
        try:
            yield sub
        finally:
            self.subblock = outer

    @contextlib.contextmanager
    def cube(self):
        """``with k.cube():`` issue the ops inside on the cube core."""
        outer, self.subblock = self.subblock, None
        try:
            yield
        finally:
            self.subblock = outer

    def _top_level(self) -> bool:
        return self.gate is None and not self._in_section and self._depth == 0 and self.subblock is None

    def section_cube(self, body):
        """The cube core's program ``body()``. Usable as a decorator.

        Declared at the kernel's top level, sections run together, concurrently (see
        ``ascjax.engine._sections``), before the next top-level op or at the end of the kernel;
        inside a loop or branch a section runs at once, in issue order.
        """
        check_body(body, 0, "section_cube(body)", "no argument: def body(): ...")
        plan = Plan(core=0, call=body, subblock=None, regions=[], serial=self._next_section())
        if self._top_level():
            self._pending.append(plan)
        else:
            self._run_section(plan)
        return body

    def section_vector(self, body, *, subblocks=(0, 1)):
        """The vector cores' program ``body(sub)``, run by AIV0 (sub 0) and AIV1 (sub 1). Usable as a decorator.

        ``subblocks=(0,)``: AIV0 alone runs it (an AIV-only kernel, whose block is one vector core)."""
        check_body(body, 1, "section_vector(body)", "the sub-block index sub (0 or 1): def body(sub): ...")
        if not subblocks or not set(subblocks) <= {0, 1}:
            raise ValueError(
                f"section_vector runs on AIV0 and / or AIV1: subblocks must be drawn from (0, 1), got {subblocks!r}"
            )
        plans = [
            Plan(core=1 + sub, call=functools.partial(body, sub), subblock=sub, regions=[], serial=self._next_section())
            for sub in subblocks
        ]
        if self._top_level():
            self._pending.extend(plans)
        else:
            for plan in plans:
                self._run_section(plan)
        return body

    def _next_section(self) -> int:
        self._sections += 1
        return self._sections - 1

    @property
    def block_idx(self):
        """This block's index in the launch (traced int32, the same on all three cores; 0 in a plain run)."""
        return jnp.zeros((), jnp.int32) if self._block_idx is None else self._block_idx

    def get_block_idx(self):
        """``GetBlockIdx`` / PyPTO-Pro ``get_block_idx()``: ``block_idx`` on the cube core, ``block_idx * 2 + s`` on AIV s.

        A 1:2 mix kernel numbers its vector cores [0, 2 * block_num) (facts §3 "Topology").
        """
        if self.subblock is None:
            return self.block_idx
        return self.block_idx * 2 + self.subblock

    def get_subblock_idx(self) -> int:
        """The current AIV's index (0 or 1); an error on the cube core."""
        if self.subblock is None:
            raise ValueError("get_subblock_idx() is only meaningful in a vector section")
        return self.subblock

    # -- static allocation -------------------------------------------------------------
    def _no_alloc_in_section(self) -> None:
        if (self.gate is not None or self._in_section) and not self._declaring:
            raise ValueError(
                "rule 'section allocation': a concurrent section is traced once per segment, so it cannot allocate: "
                "allocate its tiles (k.alloc, k.tile_group) before the sections"
            )

    def alloc(self, buffer, shape, dtype, *, fmt=None, addr=None, name=None, view: bool = False) -> Tile:
        """Place a tile (checked at trace time: alignment, capacity, overlap, format); with ``view``, a tile at
        exactly the bytes of a live ND tile of its dtype is a view of it (``Allocator.alloc``)."""
        self._no_alloc_in_section()
        tile = self.allocator.alloc(buffer, shape, dtype, fmt=fmt, addr=addr, name=name, view=view)
        if tile.storage is not None:  # a view keeps no elements of its own
            return tile
        self._declare(lambda state: state.add_tile(tile))
        if self.recorder is not None and tile.buffer is Buffer.L0C:
            self.recorder.l0c_allocated(tile)
        return tile

    def _declare(self, change) -> None:
        """Give the state a new tile's storage (``change``); one a section declares is kept past its discovery."""
        self.state = change(self.state)
        if self._declaring:
            self._declarations.append(change)

    def declared(self, key, make):
        """A tile or tile group a concurrent section declares (``make()`` allocates it; ``key`` identifies the
        declaration): a section is traced once per segment, so its tiles are made once, while it is discovered
        with every op off (before any trace of it), and every trace gets the same one. Outside the sections,
        ``make()``."""
        if self.gate is None and not self._in_section:
            return make()
        if key in self._declared:
            return self._declared[key]
        if self.gate is not None and not self.gate.discover or self.gate is None and self._depth:
            raise ValueError(
                "rule 'section allocation': a tile declared inside a section is made while the section is "
                "discovered, before its loops and branches are traced; this one was first reached inside a "
                "traced loop or branch: declare it at the section's top level"
            )
        self._declaring = True
        try:
            made = self._declared[key] = make()
        finally:
            self._declaring = False
        return made

    def free(self, tile: Tile) -> None:
        """End a tile's live range so its bytes may be reused; a later op on it is refused."""
        self.allocator.free(tile)
        file, line = sites.caller()
        self._freed[tile] = f"{sites.short_path(file)}:{line}"

    def _check_operands(self, instr: isa.Instruction, args, kwargs) -> None:
        """Note the GM tensors ``instr`` names, and refuse a tile freed before it (and not allocated again since)."""
        for access in instr.effects(args, kwargs):
            x = access.tile
            if x is None:
                if access.gm in self._state.gm:
                    self.gm_named.add(access.gm)
            elif x in self._freed and x not in self.allocator.live[x.buffer]:
                raise ValueError(
                    f"rule 'use after free': {instr.name} {access}, which was freed at {self._freed[x]}: its "
                    "bytes may belong to another tile now; move the free after the tile's last use"
                )

    def tile_group(
        self, buffer, shape, dtype, depth: int, *, fmt=None, addr=None, name=None, view: bool = False, stride=None
    ) -> GroupHandle:
        """``make_tile_group``: ``depth`` equal tiles side by side (or ``stride`` bytes apart), picked by (traced) slot
        index; with ``view``, a group at exactly a live group's bytes views its slots (``Allocator.alloc_group``)."""
        if not isinstance(depth, int) or depth < 1:
            raise ValueError(f"TileGroup depth must be a positive int, got {depth!r}")
        self._no_alloc_in_section()
        tile, stride = self.allocator.alloc_group(
            buffer, shape, dtype, depth, fmt=fmt, addr=addr, name=name, view=view, stride=stride
        )
        group = TileGroup(tile, depth, stride)
        cursor = jnp.full((N_CORES,), -1, jnp.int32)
        if tile.storage is not None:  # a view keeps no elements of its own; its cursor is its own
            self._declare(lambda state: eqx.tree_at(lambda s: s.cursors, state, {**state.cursors, group.name: cursor}))
            return GroupHandle(self, group)

        def add(state: State) -> State:
            state = state.add_tile(tile, depth=depth)
            return eqx.tree_at(lambda s: s.cursors, state, {**state.cursors, group.name: cursor})

        self._declare(add)
        if self.recorder is not None and tile.buffer is Buffer.L0C:
            self.recorder.l0c_allocated(tile)
        return GroupHandle(self, group)

    # -- instructions (declared in ascjax.isa; Program has one method per registered instruction) ----------------
    def _issue(self, instr: isa.Instruction, args: tuple, kwargs: dict) -> None:
        """Issue ``instr`` on the current core: check its operands and core, then run its data function."""
        tag = self._tag()
        for tags in self._body_tags:
            tags.append(tag)
        self._check_operands(instr, args, kwargs)
        gate = self.gate
        if instr.sync is Sync.CROSS_WAIT and gate is not None:
            gate.count_wait(instr.name)
        if not self._go():
            return
        if instr.core is CoreKind.CUBE and self.subblock is not None:
            raise ValueError(
                f"{instr.name} runs on the cube core (AIC), but it was issued on AIV{self.subblock} (inside a vector "
                "section): move it to the cube section"
            )
        if instr.core is CoreKind.VECTOR and self.subblock is None:
            raise ValueError(
                f"{instr.name} runs on a vector core (AIV), but it was issued on the cube core: put it in a vector "
                "section (k.section_vector / with k.vector(sub))"
            )
        extra = {} if instr.core is CoreKind.CUBE else {"sub": self.subblock}
        if self.recorder is not None:  # the data function runs abstractly, for its trace-time checks only
            jax.eval_shape(lambda st: instr.data(st, *instr.bound, *args, **kwargs, **extra), self.state)
            self.recorder.issue(instr, self.core, args, kwargs, tag=tag)
            return
        if instr.kind in SYNC_KINDS:  # the data plane computes no sync (the recorder checked its static rules)
            if instr.sync is Sync.CROSS_WAIT and gate is None:
                self.cross_waits[self.core] += int(np.prod(self._trips, dtype=np.int64))
            return
        # the data plane: whether this issue reads racy data (from the control plane), and its data function
        racy = None if self.poison is None else self.poison.racy_read(tag, self._loop_index)
        data = functools.partial(_data, instr, args, {**kwargs, **extra}, racy)
        if self.ran is not None and instr.writes_gm:  # GM holds what the device wrote before it stopped
            ran = self.ran.ran(tag, self._loop_index)
            if ran is False:
                return
            if ran is not True:
                data = functools.partial(_gm_if, ran, data)
        if self._pred is not None:  # a branch or loop iteration run in line
            data = functools.partial(_where, self._pred, data)
        entry = None if self.emit is None else self.emit.entry_of.get(tag)
        if entry is None:
            self.state = data(self.state)
            return
        self._window.append((self.emit.rank[entry], len(self._window), entry, data))

    def __getattr__(self, name: str):
        if name.startswith("_"):  # an attribute not set yet (during __init__)
            raise AttributeError(name)
        instr = isa.lookup(name)  # an instruction registered after this module was imported
        if instr is None:
            raise AttributeError(f"Program has no method or instruction {name!r}")
        return functools.partial(_method(instr), self)

    def gm(self, name: str) -> jax.Array:
        """The current contents of a GM tensor (the kernel names it: a scalar read is a use)."""
        if self.shapes_only:
            raise NeedsData(name)
        self.gm_named.add(name)
        return self.state.gm[name]

    # -- loops -------------------------------------------------------------------------
    def _traced(self, state: State, fn, where: str) -> State:
        """Run ``fn()`` with ``state`` as the current state (inside a scan or cond body); return the new state."""
        before = jax.tree_util.tree_structure(state)
        outer, self.state = self.state, state
        try:
            fn()
            new = self.state
        finally:
            self.state = outer
        if jax.tree_util.tree_structure(new) != before:
            raise ValueError(
                f"the {where} body changed the state's structure: allocate tiles (k.alloc) before the {where}, "
                "not inside it"
            )
        return new

    def range(self, n: int, body, *, count=None) -> None:
        """Run ``body(i)`` for i in [0, n) as one ``lax.scan`` (the body is traced once).

        ``count`` (traced allowed, at most ``n``) runs only the first ``count`` iterations, so one
        compiled kernel sweeps trip counts up to the static maximum ``n``.
        """
        if not isinstance(n, int) or n < 0:
            raise ValueError(f"Program.range needs a static trip count >= 0, got {n!r}")
        check_body(body, 1, f"Program.range({n}, body)", "the loop index i: def body(i): ...")
        if n > MAX_TRIP_COUNT:
            raise ValueError(
                f"rule 'trip count': Program.range({n}) is past ascjax's limit of {MAX_TRIP_COUNT} iterations: an "
                f"emulated loop runs every iteration (about {n * ITERATION_US_ESTIMATE / 3.6e9:.3g} hours at an "
                f"estimated {ITERATION_US_ESTIMATE} us each): emulate a smaller problem of the same shape"
            )
        if self._depth >= MAX_LOOP_DEPTH:
            raise NotImplementedError(
                f"rule 'loop depth': ascjax records loops nested at most {MAX_LOOP_DEPTH} deep, and this one is "
                f"loop {self._depth + 1}: unroll a loop of static trip count (a Python for) or merge two loops"
            )
        value = None if count is None else static_int(count)
        if value is not None and not 0 <= value <= n:
            raise ValueError(f"rule 'trip count': count = {value} is outside [0, {n}], the loop's static maximum")
        if value == n:  # every iteration: the loop as if no count were given
            count = None
        region = self._in_section and self._depth == 0 and self._tag_key is not None
        if region:
            self._next_region()
        try:
            self._range(n, body, count)
        finally:
            if region:
                self._next_region()

    def _range(self, n: int, body, count) -> None:
        if self.gate is not None:
            self._gated_range(n, body, count)
            return
        if self._pending and not self._in_section:
            self.flush()
        if self.recorder is not None:
            if count is not None and static_int(count) is None:
                self.recorder.trip_count(self.core, n, count)
            self._scan(n, body, count)
            return
        if count is not None:  # a traced count past n is the recorder's BOUNDS finding (``Recorder.trip_count``)
            inner, limit = body, count
            body = lambda i: self.cond(i < limit, lambda: inner(i))  # noqa: E731
        self._scan(n, body)

    def _gated_range(self, n, body, count) -> None:
        """A loop inside a concurrent section: at the top level a region of its own; inside a top-level loop or a
        branch run in line, unrolled in line where it holds a cross-core wait; else part of one segment."""
        gate = self.gate
        if not gate.nested and (gate.inner or self._depth):
            key, mark, waits = gate.site(), gate.sites, gate.waits
            if gate.discover:
                first = self._tag_pos[self._tag_key]  # every iteration carries the tags of the record's one body
                self._unrolled(n, body, count, 0, first)
                if gate.waits == waits:  # no wait: it runs inside one segment
                    gate.sites = mark
                    return
                # per iteration: its waits, its issues, and the branches and loops met in it (``Gate.site``)
                gate.flat[key] = (gate.waits - waits, self._tag_pos[self._tag_key] - first, gate.sites - mark)
                for i in range(1, n):
                    self._unrolled(n, body, count, i, first)
                return
            if key in gate.flat:
                first, (per, issues, sites) = self._tag_pos[self._tag_key], gate.flat[key]
                for i in range(n):
                    if gate.reaches(per):
                        self._unrolled(n, body, count, i, first)
                    else:  # no op of the segment in it: the iteration passes its waits and sites untraced
                        gate.waits += per
                        gate.sites += sites
                self._tag_pos[self._tag_key] = first + issues
                return
        if gate.nested or gate.inner or self._depth:  # a nested loop runs inside one segment (it holds no wait)
            gate.nested += 1
            try:
                if gate.discover or not gate.enabled:  # ops off: the issues only take their tags
                    body(jnp.int32(0))
                else:
                    limit = n if count is None else count
                    self._scan(n, lambda i: self._cond(i < limit, lambda: body(i), None))
            finally:
                gate.nested -= 1
            return
        region = gate.enter_loop(n, count)
        # another region's trace runs the body too, every op off: the names it makes (tiles, tuples) outlive it
        index = gate.index if not gate.discover and gate.target[0] == region else jnp.int32(0)
        self._depth += 1
        self._loop_index.append(index)
        try:
            body(index)
        finally:
            self._depth -= 1
            self._loop_index.pop()
        gate.leave_loop()

    def _unrolled(self, n: int, body, count, i: int, first: int) -> None:
        """Iteration ``i`` of a section's inner loop run in line, its issues tagged from ``first`` on: they take
        effect where ``i < count``."""
        self._tag_pos[self._tag_key] = first
        if self._window:  # the previous iteration's issues: the emit order sorts within one iteration
            self._run_window()
        outer = self._pred
        if count is not None:
            self._pred = jnp.asarray(i < count) if outer is None else outer & (i < count)
        self._depth += 1
        self._trips.append(n)
        self._loop_index.append(jnp.int32(i))
        try:
            body(jnp.int32(i))
        finally:
            self._depth -= 1
            self._trips.pop()
            self._loop_index.pop()
            self._pred = outer

    def _scan(self, n: int, body, count=None) -> None:
        def step(state, i):
            self._depth += 1
            self._trips.append(n)
            self._loop_index.append(i)
            try:
                return self._traced(state, lambda: body(i), "loop"), None
            finally:
                self._depth -= 1
                self._trips.pop()
                self._loop_index.pop()

        if self.recorder is None:  # the data plane: the iterations' independent part batched where exact
            private, tags = self._private_buffers(), []
            leaves = private and functools.partial(private, tags, len(self._loop_index))
            self._body_tags.append(tags)
            try:
                lower = self.state.options.lower_loops
                self.state = scan_lowered(lambda s, i: step(s, i)[0], self.state, n, lower, private=leaves)
            finally:
                self._body_tags.pop()
            return
        rec = self.recorder

        def recorded(carry, i):  # the recorder's framework-sync state rides along with the state
            rec.auto = carry[1]
            return step(carry[0], i)[0], rec.auto

        self.state, rec.auto = rec.builder.scan(recorded, (self.state, rec.auto), n, trip=count)

    def _private_buffers(self):
        """For the data plane's loop about to be traced: a function of its body's issue tags and its depth giving
        per state leaf whether the loop's iterations use it privately (its on-chip buffers, where the record's
        ``private_loops`` says so; None: no leaf), or None where the loop is computed in order anyway."""
        if self.private_loops is None or self.gate is not None or self._in_section or self.emit is not None:
            return None
        buffers = [_is_buffer(path) for path, _ in jax.tree_util.tree_flatten_with_path(self.state)[0]]

        def private(tags, depth):
            return buffers if self.private_loops.private(tags, depth) else None

        return private

    def cond(self, pred, then, otherwise=None) -> None:
        """``if pred: then() else: otherwise()`` on a traced predicate (a ``lax.cond``).

        Both branches are traced once; under ``vmap`` both run and the state is selected.
        """

        for fn, name in ((then, "then"), (otherwise, "otherwise")):
            if fn is not None:
                check_body(fn, 0, f"Program.cond(pred, then, otherwise): {name}", "no argument: def branch(): ...")
        gate = self.gate
        if gate is not None and not gate.nested:  # inside a concurrent section: in line where it holds a wait
            key, mark, waits = gate.site(), gate.sites, gate.waits
            if gate.discover or key in gate.flat:
                self._flat_cond(pred, then, otherwise)
                if gate.discover and gate.waits == waits:  # no wait: one conditional inside a segment
                    gate.sites = mark
                else:
                    gate.flat[key] = None
                return
        if gate is not None:
            gate.nested += 1
            try:
                if gate.discover or not gate.enabled:  # ops off: the issues only take their tags
                    for fn in (then, otherwise):
                        if fn is not None:
                            fn()
                else:
                    self._cond(pred, then, otherwise)
            finally:
                gate.nested -= 1
            return
        if self._pending and not self._in_section:
            self.flush()
        self._cond(pred, then, otherwise)

    def _flat_cond(self, pred, then, otherwise) -> None:
        """A section's branch run in line: each side's issues where its predicate holds, so the cross-core waits in
        them cut the section into segments as the record numbers them (both sides, the taken one's enabled)."""
        gate, outer = self.gate, self._pred
        pred = jnp.asarray(pred, bool)
        gate.inner += 1
        try:
            for fn, taken in ((then, pred), (otherwise, ~pred)):
                if fn is not None:
                    self._pred = taken if outer is None else outer & taken
                    fn()
        finally:
            self._pred = outer
            gate.inner -= 1

    def _data_cond(self, pred, then, otherwise) -> State:
        """The data plane's branch on a traced ``pred``, each branch traced once: both run and a select keeps what
        they write where that is at most ``SELECT_MAX_BYTES`` (no conditional to dispatch, its operands not
        copied), else a ``lax.cond``. Both compute the same bits."""
        leaves, tree = jax.tree.flatten(self.state)

        def flat(fn):
            return lambda *xs: jax.tree.leaves(fn(jax.tree.unflatten(tree, xs)))

        branches = [jax.make_jaxpr(flat(fn))(*leaves) for fn in (then, otherwise)]
        written = [any(b.jaxpr.outvars[i] is not b.jaxpr.invars[i] for b in branches) for i in range(len(leaves))]
        calls = [functools.partial(jax.core.eval_jaxpr, b.jaxpr, b.consts) for b in branches]
        if sum(x.size * x.dtype.itemsize for x, w in zip(leaves, written, strict=True) if w) > SELECT_MAX_BYTES:
            out = jax.lax.cond(jnp.asarray(pred), *calls, *leaves)
        else:
            taken, other = calls[0](*leaves), calls[1](*leaves)
            out = [jnp.where(pred, x, y) if w else x for x, y, w in zip(taken, other, written, strict=True)]
        return jax.tree.unflatten(tree, out)

    def _cond(self, pred, then, otherwise) -> None:
        def branch(fn):
            return lambda state: self._traced(state, fn or (lambda: None), "branch")

        if self.recorder is None:
            if not isinstance(pred, jax.core.Tracer):  # a concrete predicate: its branch's state, no conditional
                # the other traced too, abstractly and in the recorder's order, so every later issue keeps its tag
                # (and finds its instance)
                start, taken = self.state, then if bool(pred) else otherwise
                for fn in (then, otherwise):
                    if fn is taken:
                        new = branch(fn)(start)
                    else:
                        jax.eval_shape(branch(fn), start)
                self.state = new
                return
            self.state = self._data_cond(pred, branch(then), branch(otherwise))
            return
        rec, pred = self.recorder, jnp.asarray(pred, bool)  # record both branches, each where it is taken
        start, start_auto, outs = self.state, rec.auto, []
        for fn, taken in ((then, pred), (otherwise, ~pred)):
            rec.auto = dict(start_auto)
            with rec.builder.when(taken):
                state = branch(fn)(start)
            outs.append((state, rec.auto))
        self.state, rec.auto = jax.tree.map(lambda x, y: jnp.where(pred, x, y), outs[0], outs[1])


for _instr in isa.instructions().values():
    setattr(Program, _instr.name, _method(_instr))
del _instr
