"""What a rewritten PyPTO-Pro kernel calls (``_source``): sections, loops, branches and carried values, recorded
on the ``Program`` being traced.

A ``Runtime`` runs one trace of a kernel: it declares the kernel's carried-value slots, binds its arguments and
runs its rewritten body. Sections become ``Program.section_cube`` / ``section_vector``, ``pl.range`` loops
``Program.range`` (one ``lax.scan``, a traced trip count where the bounds are traced), branches on traced
scalars ``Program.cond``. Static Python (shapes, tiling constants, address arithmetic) is evaluated as it is
read, as PyPTO-Pro evaluates it.
"""

from __future__ import annotations

import builtins
import contextvars
import dataclasses
import functools
import operator
import types

import jax
import jax.numpy as jnp

from ...core._memory import Tile
from .. import _carried as carried
from .._program import GroupHandle, current
from .._tile_choice import choose
from .._tile_group import TileGroup, TileSlot
from . import _bounds, _struct
from ._source import Translation, UnsupportedConstruct, _free_values

#: the variable a ``make_tile`` result is being assigned to (the tile's name in reports)
TILE_NAME: contextvars.ContextVar = contextvars.ContextVar("tile_name", default=None)
#: the kernel being traced is AIV-only (vector sections, no cube one): each block is one vector core, AIV0
AIV_ONLY: contextvars.ContextVar = contextvars.ContextVar("aiv_only", default=False)


class Env(dict):
    """The kernel's local names: one dict, so the rewritten blocks share them without ``nonlocal``."""

    def __missing__(self, name):
        raise NameError(
            f"name {name!r} is not defined here: a name first assigned inside a section, a pl.range loop or an if "
            "on a traced value stays inside it; assign it before that block"
        )


@dataclasses.dataclass(frozen=True)
class Section:
    """``pl.section_cube()`` / ``pl.section_vector()``: the block of a ``with`` runs on that core."""

    core: str  # "cube" or "vector"


@dataclasses.dataclass(frozen=True)
class RangeSpec:
    """``pl.range(stop)`` / ``pl.range(start, stop, step=1)``: a recorded loop; bounds may be traced scalars."""

    start: object
    stop: object
    step: object

    def __iter__(self):
        raise TypeError(
            "pl.range is iterated by a kernel under @pl.jit (the front end reads the loop from the source); "
            "outside a kernel use Python's range"
        )


#: the most iterations a ``while`` loop may run while it is read (one that never ends is refused, not hung)
WHILE_ITERATIONS_LIMIT = 1 << 16


class _Jump(Exception):
    """A ``break``, ``continue`` or early ``return`` on its way to the loop or function it leaves."""

    def __init__(self, word: str, line: int, value=None):
        super().__init__(word)
        self.word, self.line, self.value = word, line, value


def _traced_jump(jump: _Jump, where: str) -> UnsupportedConstruct:
    return UnsupportedConstruct(
        f"rule 'construct': '{jump.word}' at line {jump.line} is taken {where}: ascjax records that as every path "
        "at once, so a jump there is not modelled; decide it on static values (a pl.range loop with static bounds "
        "unrolls) or guard the rest of the body with the if"
    )


@dataclasses.dataclass(frozen=True)
class _SlotOf:
    """The carried kind of a name holding a tile-group slot: its slot index is carried (an int; -1 for a slot out
    of range), and the slot of ``group`` at that index is bound after the block."""

    group: TileGroup

    @classmethod
    def of(cls, value: TileSlot) -> _SlotOf:
        return cls(TileGroup(value.base, value.depth, value.stride_bytes))

    def store(self, k, slot: int, name: str, value, line: int) -> None:
        if not isinstance(value, TileSlot) or value.name != self.group.name:
            raise UnsupportedConstruct(
                f"rule 'carried value': {name!r} (line {line}) became {type(value).__name__} {value!s}; it held a "
                f"slot of {self.group} before the block: a carried name keeps to the slots of one tile group"
            )
        carried.store(k, slot, carried.Kind.INT, jnp.where(value.ok, value.slot, -1))

    def load(self, k, slot: int) -> TileSlot:
        return self.group.slot(carried.load(k, slot, carried.Kind.INT))


def traced(value) -> bool:
    return isinstance(value, jax.core.Tracer)


def _static(value) -> bool:
    """Whether ``value`` holds no run-time value: plain tiles, tile groups, Python scalars and containers of them."""
    if isinstance(value, (tuple, list)):
        return all(_static(v) for v in value)
    if isinstance(value, dict):
        return all(_static(v) for v in value.values())
    if isinstance(value, types.SimpleNamespace):  # pl.make_tuple
        return all(_static(v) for v in vars(value).values())
    if isinstance(value, Tile):
        return getattr(value, "slot", None) is None and not getattr(value, "candidates", None)
    return isinstance(value, (int, float, str, type(None), GroupHandle))


def _ceil_div(a, b):
    return -(-a // b)


class Runtime:
    """One trace of a kernel rewritten by ``_source.Translation``."""

    def __init__(self, translation: Translation, constants: dict | None = None):
        self.translation = translation
        self.constants = dict(constants or {})  # the launch's tiling-key fields, a name in every function

    def run(self, arguments: dict):
        """Declare the slots, bind ``arguments`` (the kernel's parameters by name) and run the kernel's body."""
        kernel = self.translation.kernel
        k = current()
        carried.declare(k, self.translation.n_slots)
        self.struct_pool = _struct.reserve() if self.translation.section_slots else None
        k.declares_in_sections = self.translation.declares_in_sections
        env = Env({**self.constants, **_free_values(kernel.function), **arguments})
        token = AIV_ONLY.set(self.translation.aiv_only)
        try:
            return self._returned(kernel.code, env)
        finally:
            AIV_ONLY.reset(token)

    def _returned(self, code, env: Env):
        """Run a rewritten function; an early ``return`` gives its value."""
        try:
            return code(self, env)
        except _Jump as jump:
            if jump.word != "return":
                raise _traced_jump(jump, "outside any loop") from None
            return jump.value

    # -- jumps -------------------------------------------------------------------------
    @staticmethod
    def break_(line: int):
        raise _Jump("break", line)

    @staticmethod
    def continue_(line: int):
        raise _Jump("continue", line)

    @staticmethod
    def return_(value, line: int):
        raise _Jump("return", line, value)

    @staticmethod
    def _iterate(body, env: Env) -> bool:
        """One iteration of a loop run as Python: False once it breaks (a ``return`` goes on out)."""
        try:
            body(env)
        except _Jump as jump:
            if jump.word == "return":
                raise
            return jump.word == "continue"
        return True

    def while_(self, test, body, env: Env, line: int) -> None:
        """``while`` on a static condition, run as Python."""
        for _ in builtins.range(WHILE_ITERATIONS_LIMIT):
            go = test()
            if traced(go):
                raise UnsupportedConstruct(
                    f"rule 'construct': the 'while' condition at line {line} is a run-time value: ascjax records a "
                    "loop with a trip count it knows; write 'for i in pl.range(n)' with the count"
                )
            if not go or not self._iterate(body, env):
                return
        raise UnsupportedConstruct(
            f"rule 'construct': the 'while' loop at line {line} ran {WHILE_ITERATIONS_LIMIT} iterations without "
            "ending: its condition never turns false"
        )

    # -- sections ----------------------------------------------------------------------
    def with_(self, ctx, body, env: Env, line: int) -> None:
        if not isinstance(ctx, Section):
            raise UnsupportedConstruct(
                f"rule 'construct': 'with {ctx!r}' (line {line}) is not a section: write 'with pl.section_cube():' "
                "or 'with pl.section_vector():'"
            )
        k = current()
        # the names, and the trace's settings (auto_mutex, ...), as the section sees them where it is written: it
        # may run later, after the kernel's body has returned
        snapshot, settings = Env(env), contextvars.copy_context()

        pool = self.struct_pool

        def run():  # a return inside the section ends the core's program
            token = _struct.SECTION_POOL.set(None if pool is None else [pool, pool + _struct.SECTION_STRUCT_SLOTS])
            try:
                body(Env(snapshot))
            except _Jump as jump:
                if jump.word != "return":
                    raise _traced_jump(jump, "outside any loop") from None
            finally:
                _struct.SECTION_POOL.reset(token)

        if ctx.core == "cube":
            k.section_cube(lambda: settings.copy().run(run))
        else:
            # an AIV-only kernel's block is one vector core: AIV0 runs the section (PyPTO-Pro's get_subblock_num 1)
            subblocks = (0,) if AIV_ONLY.get() else (0, 1)
            k.section_vector(lambda sub: settings.copy().run(run), subblocks=subblocks)

    # -- loops -------------------------------------------------------------------------
    def _carry(self, env: Env, slots: tuple, exclude: set, line: int) -> list:
        """The slots of the names a block rebinds that exist before it, each with its kind; a name holding no
        scalar (a tile, a tuple) is refused naming it."""
        out = []
        for name, slot in slots:
            if name in exclude or name not in env:
                continue
            value = env[name]
            kind = _SlotOf.of(value) if isinstance(value, TileSlot) else carried.kind_of(value)
            if kind is None:
                raise UnsupportedConstruct(
                    f"rule 'carried value': {name!r} is rebound inside the loop or branch at line {line} and holds "
                    f"{type(value).__name__} {value!s}: only scalars (ints, floats, bools) and tile-group slots are "
                    "carried from one iteration or arm to the code after it; index a tile group or tuple by a carried int"
                )
            out.append((name, slot, kind))
        return out

    @staticmethod
    def _store(k, env: Env, slots: list, line: int) -> None:
        for name, slot, kind in slots:
            value = env[name]
            if isinstance(kind, _SlotOf):
                kind.store(k, slot, name, value, line)
                continue
            if carried.kind_of(value) is None:
                raise UnsupportedConstruct(
                    f"rule 'carried value': {name!r} (line {line}) became {type(value).__name__} {value!s}; it was "
                    f"a {kind.value} before the block: a carried name keeps a scalar type"
                )
            carried.store(k, slot, kind, value)

    @staticmethod
    def _load(k, env: Env, slots: list) -> None:
        for name, slot, kind in slots:
            env[name] = kind.load(k, slot) if isinstance(kind, _SlotOf) else carried.load(k, slot, kind)

    @staticmethod
    def _bind(env: Env, target, value) -> None:
        if isinstance(target, str):
            env[target] = value
            return
        values = tuple(value)
        if len(values) != len(target):
            raise ValueError(f"cannot unpack {len(values)} values into {len(target)} loop targets")
        for t, v in zip(target, values):
            Runtime._bind(env, t, v)

    @staticmethod
    def _names(target) -> set:
        return {target} if isinstance(target, str) else set().union(*map(Runtime._names, target))

    def _unrolled(self, iterable, body, env: Env, target) -> None:
        """A loop over a Python iterable, unrolled as it is read (a ``break`` ends it)."""
        for value in iterable:
            self._bind(env, target, value)
            if not self._iterate(body, env):
                return

    def for_(self, iterable, body, env: Env, target, slots: tuple, line: int, jumps: bool = False) -> None:
        if isinstance(iterable, RangeSpec) and jumps:  # a recorded loop cannot stop early: unrolled, if it can be
            if any(traced(v) or not isinstance(v, int) for v in (iterable.start, iterable.stop, iterable.step)):
                raise UnsupportedConstruct(
                    f"rule 'construct': the pl.range loop at line {line} breaks or continues and its bounds are "
                    "run-time values: ascjax unrolls such a loop, which needs static bounds"
                )
            iterable = builtins.range(iterable.start, iterable.stop, iterable.step)
        if not isinstance(iterable, RangeSpec):
            self._unrolled(iterable, body, env, target)
            return
        k = current()
        start, stop, step = iterable.start, iterable.stop, iterable.step
        if traced(step) or not isinstance(step, int) or step <= 0:
            raise UnsupportedConstruct(
                f"rule 'pl.range': the step at line {line} must be a static int > 0, got {step!r}"
            )
        count = None
        if traced(start) or traced(stop):  # at most as many trips as the bounds allow, the run-time count of them
            n = _bounds.trips(start, stop, step)
            if n is None:
                raise UnsupportedConstruct(
                    f"rule 'pl.range': the {'stop' if traced(stop) else 'start'} at line {line} is a run-time value "
                    "with no bound ascjax can tell (a loop-carried value or a tile's contents): ascjax records a loop "
                    "up to a static trip count, so compute the bounds from kernel inputs, block and loop indices, "
                    "pl.min / pl.max of them, or static shapes"
                )
            count = jnp.maximum(0, _ceil_div(stop - start, step)).astype(jnp.int32)
        else:
            n = max(0, _ceil_div(int(stop) - int(start), step))
        first, last = _bounds.of(start), _bounds.of(stop)
        index_bounds = None if first is None else (first[0], first[1] + builtins.max(n - 1, 0) * step)
        if index_bounds is not None and last is not None:  # an index stays below its stop
            index_bounds = (index_bounds[0], builtins.max(index_bounds[0], builtins.min(index_bounds[1], last[1] - 1)))
        carry = self._carry(env, slots, self._names(target), line)
        self._store(k, env, carry, line)
        made: dict = {}  # names the body first assigns a static value (tiles, tuples of them): the same every trip

        def iteration(i):
            inner = Env(env)
            self._load(k, inner, carry)
            self._bind(inner, target, _bounds.note(start + i * step, index_bounds))
            try:
                body(inner)
            except _Jump as jump:
                raise _traced_jump(jump, f"in the pl.range loop at line {line}, recorded once for every trip") from None
            self._store(k, inner, carry, line)
            made.update((name, v) for name, v in inner.items() if name not in env and _static(v))

        k.range(n, iteration, count=count)
        self._load(k, env, carry)
        for name in set(made) - set(self._names(target)):  # as after Python's loop (the last trip's, all alike)
            env[name] = made[name]

    # -- branches ----------------------------------------------------------------------
    @staticmethod
    def _static_branch(test, then, orelse, env: Env, line: int) -> bool:
        """Run the arm a static ``test`` takes, as Python (True); for a traced one check it is a scalar (False)."""
        if not traced(test):
            if bool(test):
                then(env)
            elif orelse is not None:
                orelse(env)
            return True
        if jnp.ndim(test) != 0:
            raise TypeError(
                f"rule 'if': the condition at line {line} is an array of shape {jnp.shape(test)}, not a scalar"
            )
        return False

    def if_(self, test, then, orelse, env: Env, slots: tuple, line: int) -> None:
        if self._static_branch(test, then, orelse, env, line):
            return
        k = current()
        carry = self._carry(env, slots, set(), line)
        self._store(k, env, carry, line)

        def arm(block):
            def run():
                inner = Env(env)
                self._load(k, inner, carry)
                if block is not None:
                    try:
                        block(inner)
                    except _Jump as jump:
                        raise _traced_jump(jump, f"under the if on a run-time value at line {line}") from None
                self._store(k, inner, carry, line)

            return run

        k.cond(test, arm(then), arm(orelse))
        self._load(k, env, carry)

    # -- expressions -------------------------------------------------------------------
    @staticmethod
    def ifexp(test, then, orelse):
        if not traced(test):
            return then() if test else orelse()
        arms = (then(), orelse())
        return _bounds.hull(jnp.where(test, *arms), arms)

    @staticmethod
    def _logic(thunks, short: bool, combine):
        """``and`` (``short`` False) / ``or`` (True): Python's short circuit on static values, ``combine`` on traced."""
        value = thunks[0]()
        for thunk in thunks[1:]:
            if traced(value):
                value = combine(value, thunk())
            elif bool(value) is short:
                return value
            else:
                value = thunk()
        return value

    def and_(self, *thunks):
        return self._logic(thunks, False, jnp.logical_and)

    def or_(self, *thunks):
        return self._logic(thunks, True, jnp.logical_or)

    @staticmethod
    def not_(value):
        return jnp.logical_not(value) if traced(value) else not value

    @staticmethod
    def contains(container, item):
        """``item in container``: for a traced ``item``, whether it equals one of the items or lies on the range."""
        if isinstance(container, RangeSpec):
            start, stop, step = container.start, container.stop, container.step
            if not any(traced(v) for v in (item, start, stop, step)):
                return item in builtins.range(start, stop, step)
            if not traced(step) and step == 0:
                raise ValueError("rule 'pl.range': step is 0")
            inside = jnp.where(step > 0, (start <= item) & (item < stop), (stop < item) & (item <= start))
            return inside & ((item - start) % step == 0)
        if not traced(item):
            return item in container
        items = list(container)
        if not all(carried.kind_of(v) is not None for v in items):
            raise UnsupportedConstruct(
                f"rule 'traced index': a run-time value is looked up ('in') among {len(items)} items that are not "
                "all scalars: ascjax compares a run-time value with scalars"
            )
        return functools.reduce(jnp.logical_or, (item == v for v in items), jnp.bool_(False))

    @staticmethod
    def _fold(python, combine, args, kwargs):
        """Builtin ``min`` / ``max``, or ``combine`` folded over traced scalars."""
        values = args[0] if len(args) == 1 else args
        if kwargs or not any(traced(v) for v in values):
            return python(*args, **kwargs)
        return _bounds.fold(functools.reduce(combine, values), values, python)

    def min_(self, *args, **kwargs):
        return self._fold(min, jnp.minimum, args, kwargs)

    def max_(self, *args, **kwargs):
        return self._fold(max, jnp.maximum, args, kwargs)

    @staticmethod
    def index(value, key):
        """``value[key]``; a Python tuple or list of scalars indexed by a traced int selects among them."""
        if traced(key) and isinstance(value, (tuple, list)):
            if all(carried.kind_of(v) is not None for v in value):
                return _bounds.hull(jnp.asarray(value)[key], value)
            if value and all(isinstance(v, Tile) for v in value):
                return choose(value, key, f"a {type(value).__name__} of {len(value)} tiles")
            raise UnsupportedConstruct(
                f"rule 'traced index': a {type(value).__name__} of {len(value)} "
                f"{type(value[0]).__name__ if value else 'item'}s is indexed by a run-time value: ascjax selects "
                "scalars or tiles by a run-time index (tiles: pl.make_tile tiles, or pl.make_tile_group(...)[i])"
            )
        return value[key]

    @staticmethod
    def binop(name: str, left, right):
        """``left op right`` for the operator ``operator.<name>`` (``_source.BOUNDED_OPS``, or its in-place form for
        ``x op= y``), keeping its interval."""
        return _bounds.binop(getattr(operator, name), left, right, getattr(operator, name.removeprefix("i")))

    @staticmethod
    def named(name: str, make):
        token = TILE_NAME.set(name)
        try:
            return make()
        finally:
            TILE_NAME.reset(token)

    def call(self, fn, *args, **kwargs):
        """A helper of the kernel's, rewritten too (its loops, branches and carried names as the kernel's)."""
        translated = self.translation.functions.get(getattr(fn, "__code__", None))
        if translated is None:
            return fn(*args, **kwargs)
        bound = translated.params.bind(*args, **kwargs)
        bound.apply_defaults()
        env = Env({**self.constants, **_free_values(fn), **bound.arguments})
        return self._returned(translated.code, env)
