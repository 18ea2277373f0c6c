"""Running a ``@pl.vector_function`` body on JAX: its registers, masks and scalars as values, its tiles as byte memory.

The body is read from its source by ``_source.Translation`` (as a kernel is) and run by ``VfRuntime``, which keeps
the written form's meaning on JAX directly (no ``Program`` is recorded: on the device the whole VF is one
instruction of pipe V):

- ``for i in pl.range(...)`` is one ``lax.fori_loop`` (a ``while_loop`` when a bound is traced); its carry is every
  name the body rebinds that exists before the loop, every name it first binds (so a register set in the last
  iteration is visible after the loop; it is 0 if the loop runs no iteration), and the machine state (tile memory,
  pointers, special registers). A name holding a static value (a Python number, a tile pointer at a static
  offset) stays static while the body leaves it as it was, and joins the carry once it does not. The body is
  traced with ``jax.make_jaxpr`` and the loop runs that trace, so a nested loop is not traced again for every
  level. A loop that ``break``s or ``continue``s is unrolled, which needs static bounds.
- ``if`` on a traced scalar is a ``lax.cond`` over the same carry; a name one arm binds and the other does not is
  0 after the branch when the other arm runs. Static conditions, ``while`` and plain ``for`` loops run as Python.
- Helpers the body calls (plain functions, nested vector functions) run inline.
- ``vf`` is the ``Vf`` namespace in every function the body runs, imported or not (PyPTO-Pro reserves the name).
- A name keeps its kind and dtype through a loop or branch; one that changes is refused naming it.

``vf_accesses`` runs a body abstractly (``jax.eval_shape``) and lists the tile parameters it loads from and stores
to; ``run_vf`` runs it and returns the new contents of the tiles it stored to. Tile memory semantics (a tile's
bytes as stored, bounds, ``post_update``) are ``vf``'s: a static out-of-range access is refused, a traced one reads
zeros and drops its stores. Each tile is its own memory: two distinct tiles over the same UB bytes, one of them
stored to, are refused.
"""

from __future__ import annotations

import builtins
import inspect
import weakref

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.core import jaxpr_as_fun

from ...core._memory import Tile
from ._runtime import Env, RangeSpec, Runtime, _Jump, _traced_jump, traced
from ._source import Translation, UnsupportedConstruct, _free_values
from .vf import _MACHINE, UNBOUND, DestinationRead, TileRef, Vf, VfMachine


class VfEnv(Env):
    """A VF body's local names. Assigning an op that reads its destination (``DestinationRead``) resolves it with the
    name's previous value."""

    def __setitem__(self, name, value):
        if isinstance(value, DestinationRead):
            value = value.resolve(dict.get(self, name, UNBOUND), name)
        dict.__setitem__(self, name, value)


def _unwrap(fn):
    """The plain function behind a decorated vector function (``functools.wraps`` / ``.fn``)."""
    seen = set()
    while not inspect.isfunction(fn) and id(fn) not in seen:
        seen.add(id(fn))
        inner = getattr(fn, "__wrapped__", None) or getattr(fn, "fn", None)
        if inner is None:
            break
        fn = inner
    if not inspect.isfunction(fn):
        raise TypeError(f"a vector function is a Python function, got {fn!r}")
    return fn


_TRANSLATIONS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


#: the name a VF body reads the ``Vf`` namespace by: reserved inside ``@pl.vector_function``, no import needed
VF_NAME = "vf"


def _translation(fn) -> Translation:
    """``fn``'s body read from its source (once per function); ``vf`` is a name of every function it translates."""
    found = _TRANSLATIONS.get(fn)
    if found is None:
        found = _TRANSLATIONS[fn] = Translation(fn, constants=(VF_NAME,))
    return found


def _arraylike(x) -> bool:
    return isinstance(x, (bool, int, float, np.number, np.bool_, np.ndarray, jax.Array))


def _arrayish(value) -> bool:
    """Whether every leaf of ``value`` is a number or an array (it can ride in a loop's carry)."""
    return all(_arraylike(leaf) for leaf in jax.tree_util.tree_leaves(value))


def _static(value) -> bool:
    """Whether ``value`` holds no JAX array (a Python number, an enum, a tile pointer at a static offset...)."""
    return not any(isinstance(leaf, jax.Array) for leaf in jax.tree_util.tree_leaves(value))


def _unchanged(before, after) -> bool:
    """Whether a static value came out of a block as it went in."""
    if before is after:
        return True
    lb, tb = jax.tree_util.tree_flatten(before)
    la, ta = jax.tree_util.tree_flatten(after)
    if tb != ta:
        return False
    for x, y in zip(lb, la):
        if x is y:
            continue
        if isinstance(x, jax.Array) or isinstance(y, jax.Array) or type(x) is not type(y):
            return False
        try:
            if not bool(x == y):
                return False
        except (TypeError, ValueError):
            return False
    return True


def _carry_value(name: str, value, line: int):
    """``value`` as a pytree of strongly typed JAX arrays; a value that is not one is refused naming it."""

    def leaf(x):
        if _arraylike(x):
            x = jnp.asarray(x)
            return x.astype(x.dtype)  # strongly typed, so a loop's input and output carries agree
        raise UnsupportedConstruct(
            f"rule 'carried value': {name!r} is rebound inside the loop or branch at line {line} and holds "
            f"{type(x).__name__} {x!r}: a vector function carries registers, masks, scalars and tile pointers"
        )

    return jax.tree_util.tree_map(leaf, value)


def _same_kind(name: str, before, after, line: int):
    """``after`` (a block's output for ``name``) in ``before``'s exact types; a change of kind or dtype is refused."""
    tb, ta = jax.tree_util.tree_structure(before), jax.tree_util.tree_structure(after)
    if tb != ta:
        raise UnsupportedConstruct(
            f"rule 'carried value': {name!r} changes kind in the loop or branch at line {line} ({tb} -> {ta}): a name "
            "keeps one kind (register, mask, scalar, tile pointer) across iterations and arms"
        )
    fixed = []
    for b, a in zip(jax.tree_util.tree_leaves(before), jax.tree_util.tree_leaves(after)):
        if tuple(jnp.shape(b)) != tuple(jnp.shape(a)) or jnp.result_type(b) != jnp.result_type(a):
            raise UnsupportedConstruct(
                f"rule 'carried value': {name!r} changes from {_aval(b)} to {_aval(a)} in the loop or branch at line "
                f"{line}: a name keeps its data type (convert into a new name with vf.astype / vf.bit_cast)"
            )
        fixed.append(jnp.asarray(a).astype(jnp.result_type(b)))
    return jax.tree_util.tree_unflatten(tb, fixed)


def _aval(x) -> str:
    return f"{jnp.result_type(x)}{list(jnp.shape(x))}"


def _zeros_like(shapes):
    return jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)


def _typed_like(values, shapes):
    return jax.tree_util.tree_map(lambda v, s: jnp.asarray(v).astype(s.dtype), values, shapes)


class _Region:
    """A loop body or an if arm traced once: ``run(carry, state, *extra) -> (carry, fresh, state)``."""

    def __init__(self, run, fresh_shapes: dict, fresh_static: dict):
        self.run, self.fresh_shapes, self.fresh_static = run, fresh_shapes, fresh_static


class VfRuntime(Runtime):
    """One run of a vector function rewritten by ``_source.Translation``, on JAX values and a ``VfMachine``."""

    def __init__(self, translation: Translation, machine: VfMachine):
        super().__init__(translation, {VF_NAME: Vf})
        self.machine = machine

    def run(self, arguments: dict):
        kernel = self.translation.kernel
        env = VfEnv({**self.constants, **_free_values(kernel.function), **arguments})
        return self._returned(kernel.code, env)

    def with_(self, ctx, body, env, line: int) -> None:
        raise UnsupportedConstruct(
            f"rule 'construct': 'with' (line {line}) inside a vector function: a VF is one instruction of pipe V, it "
            "has no sections"
        )

    def call(self, fn, *args, **kwargs):
        """A helper (a plain function or a nested vector function) run inline, its names in a ``VfEnv``."""
        translated = self.translation.functions.get(getattr(fn, "__code__", None))
        if translated is None:
            inner = _nested(fn)
            if inner is None:
                return fn(*args, **kwargs)
            return VfRuntime(_translation(inner), self.machine).call(inner, *args, **kwargs)
        bound = translated.params.bind(*args, **kwargs)
        bound.apply_defaults()
        env = VfEnv({**self.constants, **_free_values(translated.function), **bound.arguments})
        return self._returned(translated.code, env)

    # -- traced regions --------------------------------------------------------------------------------------------
    def _regions(self, env: VfEnv, slots: tuple, exclude: set, runs: list, extra: tuple, line: int):
        """Trace each of ``runs`` (``run(inner_env, *extra)``) once over the names ``slots`` lists. A name that holds a
        static value (a Python number, a pointer at a static offset) stays static while every region leaves it as it
        was; otherwise it rides in the carry. Returns the carried names, their values, the state and the regions."""
        names = [name for name, _ in slots if name not in exclude]
        before = [name for name in names if name in env]
        fresh = [name for name in names if name not in env]
        static = [name for name in before if _static(env[name])]
        state_in = {k: _carry_value(k, v, line) for k, v in self.machine.state.items()}
        while True:
            carried = [name for name in before if name not in static]
            carry_in = [_carry_value(name, env[name], line) for name in carried]
            regions, changed = [], set()
            for run in runs:
                record: dict = {}
                block = self._block(env, carried, fresh, static, run, record, line)
                closed, shapes = jax.make_jaxpr(block, return_shape=True)(carry_in, state_in, *extra)
                changed |= {name for name in static if not _unchanged(env[name], record["static"][name])}
                regions.append((closed, shapes, record["fresh"]))
            if not changed:
                break
            static = [name for name in static if name not in changed]
        out = []
        for closed, shapes, fresh_static in regions:
            for name, b, a in zip(carried, carry_in, shapes[0]):
                _same_kind(name, b, _zeros_like(a), line)
            out.append(_Region(_evaluator(closed, shapes), shapes[1], fresh_static))
        return carried, carry_in, state_in, out

    def _block(self, env: VfEnv, carried: list, fresh: list, static: list, run, record: dict, line: int):
        m = self.machine

        def block(carry, state, *extra):
            inner = VfEnv(env)
            for name, value in zip(carried, carry):
                dict.__setitem__(inner, name, value)
            saved = m.state
            m.state = dict(state)
            try:
                run(inner, *extra)
                out_state = {k: m.state[k] for k in state}
            finally:
                m.state = saved
            record["static"] = {name: dict.get(inner, name) for name in static}
            traced_fresh, static_fresh = {}, {}
            for name in fresh:
                if name in inner:
                    value = inner[name]
                    if _arrayish(value):
                        traced_fresh[name] = _carry_value(name, value, line)
                    else:
                        static_fresh[name] = value
            record["fresh"] = static_fresh
            return [inner[name] for name in carried], traced_fresh, out_state

        return block

    def _run_once(self, body, env, line: int, where: str) -> None:
        try:
            body(env)
        except _Jump as jump:
            raise _traced_jump(jump, f"{where} at line {line}") from None

    def _store(self, env: VfEnv, carried: list, values: list, fresh: dict, state: dict) -> None:
        for name, value in (*zip(carried, values), *fresh.items()):
            dict.__setitem__(env, name, value)
        self.machine.state = dict(state)

    # -- loops -----------------------------------------------------------------------------------------------------
    def for_(self, iterable, body, env, target, slots: tuple, line: int, jumps: bool = False) -> None:
        if not isinstance(iterable, RangeSpec):  # Python iteration, unrolled as it is read
            self._unrolled(iterable, body, env, target)
            return
        start, stop, step = iterable.start, iterable.stop, iterable.step
        if traced(step) or not isinstance(step, (int, np.integer)) or step <= 0:
            raise UnsupportedConstruct(
                f"rule 'pl.range': the step at line {line} must be a static int > 0, got {step!r}"
            )
        step = int(step)
        static = not traced(start) and not traced(stop)
        if jumps:
            if not static:
                raise UnsupportedConstruct(
                    f"rule 'construct': the pl.range loop at line {line} breaks or continues and its bounds are "
                    "run-time values: ascjax unrolls such a loop, which needs static bounds"
                )
            return self.for_(builtins.range(int(start), int(stop), step), body, env, target, slots, line)
        if static:
            trips = max(0, -(-(int(stop) - int(start)) // step))
            if trips == 0:
                return
            if trips == 1:
                self._bind(env, target, int(start))
                self._run_once(body, env, line, "in the pl.range loop")
                return
        else:
            trips = jnp.maximum(0, -(-(jnp.asarray(stop) - jnp.asarray(start)) // step)).astype(jnp.int32)

        def iteration(inner, k):
            self._bind(inner, target, start + k * step)
            self._run_once(body, inner, line, "in the pl.range loop, traced once for every trip")

        carried, carry_in, state_in, (region,) = self._regions(
            env, slots, self._names(target), [iteration], (jnp.int32(0),), line
        )

        def trip(k, carry):
            values, _, state = carry
            out, fresh, out_state = region.run(values, state, jnp.asarray(k, jnp.int32))
            out = [_same_kind(name, b, a, line) for name, b, a in zip(carried, values, out)]
            return out, _typed_like(fresh, region.fresh_shapes), _typed_like(out_state, state)

        init = (carry_in, _zeros_like(region.fresh_shapes), state_in)
        values, fresh, state = jax.lax.fori_loop(0, trips, trip, init)
        self._store(env, carried, values, {**region.fresh_static, **fresh}, state)

    # -- branches --------------------------------------------------------------------------------------------------
    def if_(self, test, then, orelse, env, slots: tuple, line: int) -> None:
        if self._static_branch(test, then, orelse, env, line):
            return

        def arm(block):
            def run(inner):
                if block is not None:
                    self._run_once(block, inner, line, "under the if on a run-time value")

            return run

        carried, carry_in, state_in, regions = self._regions(env, slots, set(), [arm(then), arm(orelse)], (), line)
        first, second = regions
        shapes = {**second.fresh_shapes, **first.fresh_shapes}
        for name in set(first.fresh_shapes) & set(second.fresh_shapes):
            _same_kind(name, _zeros_like(first.fresh_shapes[name]), _zeros_like(second.fresh_shapes[name]), line)
        statics = {
            name: value
            for name, value in first.fresh_static.items()
            if name in second.fresh_static and _unchanged(value, second.fresh_static[name])
        }

        def branch(region: _Region):
            def run(operands):
                values, state = operands
                out, fresh, out_state = region.run(values, state)
                out = [_same_kind(name, b, a, line) for name, b, a in zip(carried, values, out)]
                complete = {name: fresh[name] if name in fresh else _zeros_like(shapes[name]) for name in shapes}
                return out, _typed_like(complete, shapes), _typed_like(out_state, state)

            return run

        pred = jnp.asarray(test).astype(jnp.bool_)
        values, fresh, state = jax.lax.cond(pred, branch(first), branch(second), (carry_in, state_in))
        self._store(env, carried, values, {**statics, **fresh}, state)


def _evaluator(closed, shapes):
    """A function of a region's arguments evaluating its traced jaxpr (no re-trace)."""
    flat_fn = jaxpr_as_fun(closed)
    out_tree = jax.tree_util.tree_structure(shapes)

    def run(*args):
        return jax.tree_util.tree_unflatten(out_tree, flat_fn(*jax.tree_util.tree_leaves(args)))

    return run


def _nested(fn):
    """The plain function of a decorated vector function called inside another (None: not one)."""
    if inspect.isfunction(fn) or not callable(fn):
        return None
    try:
        inner = _unwrap(fn)
    except TypeError:
        return None
    return inner if inner is not fn else None


def in_vector_function() -> bool:
    """Whether a vector function is being run (a nested VF call then runs inline)."""
    return _MACHINE.get() is not None


def call_inline(fn, args: tuple, kwargs: dict):
    """Run vector function ``fn`` inside the one being run (its tiles, pointers and special registers)."""
    m = _MACHINE.get()
    if m is None:
        raise RuntimeError("call_inline runs a vector function inside another one")
    inner = _unwrap(fn)
    return VfRuntime(_translation(inner), m).call(inner, *args, **kwargs)


# -- entry points --------------------------------------------------------------------------------------------------
def _arguments(fn, args: tuple, kwargs: dict) -> inspect.BoundArguments:
    bound = inspect.signature(fn).bind(*args, **kwargs)
    bound.apply_defaults()
    return bound


def _is_tile(value) -> bool:
    return isinstance(value, Tile)


def _execute(fn, args: tuple, kwargs: dict, tiles: dict) -> VfMachine:
    """Run ``fn``'s body with ``tiles`` (Tile -> contents) as its memory; the machine after the run."""
    fn = _unwrap(fn)
    bound = _arguments(fn, args, kwargs)
    m = VfMachine(tiles)
    token = _MACHINE.set(m)
    try:
        arguments = {}
        for name, value in bound.arguments.items():
            if _is_tile(value):
                m.key(value, "vector_function")
                value = TileRef(value, 0)  # each parameter its own pointer (post_update moves that one)
            arguments[name] = value
        VfRuntime(_translation(fn), m).run(arguments)
    finally:
        _MACHINE.reset(token)
    _check_aliasing(m)
    return m


def _static_range(m: VfMachine, key: str) -> tuple | None:
    """A tile's (buffer, first byte, end byte) when its address is static (not a slot picked at run time)."""
    tile = m.tiles[key]
    if getattr(tile, "slot", None) is not None:
        return None
    return tile.buffer, tile.addr, tile.addr + m.state[key].shape[0]


def _check_aliasing(m: VfMachine) -> None:
    """Refuse two distinct tiles over the same UB bytes where the VF stores through one and reaches the other: each
    tile is its own memory here, so the store would not be seen through the other name."""
    touched = {**m.reads, **m.writes}
    for wkey, written in m.writes.items():
        for key, other in touched.items():
            a, b = _static_range(m, wkey), _static_range(m, key)
            if key == wkey or a is None or b is None or a[0] != b[0] or a[2] <= b[1] or b[2] <= a[1]:
                continue
            raise UnsupportedConstruct(
                f"rule 'construct': the vector function stores to {written} and reaches {other}, which overlaps it in "
                "UB: distinct tiles over the same bytes inside one VF are not modelled; pass one tile"
            )


def _tile_arguments(fn, args: tuple, kwargs: dict) -> dict:
    """Each Tile argument -> the names of the parameters bound to it (in order)."""
    names: dict = {}
    for name, value in _arguments(_unwrap(fn), args, kwargs).arguments.items():
        if _is_tile(value):
            names.setdefault(value, []).append(name)
    return names


def vf_accesses(fn, args: tuple, kwargs: dict) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The parameter names of fn bound to UB tiles that the body loads from (reads) and stores to (writes), found by
    running it abstractly (jax.eval_shape)."""
    params = _tile_arguments(fn, args, kwargs)
    leaves, treedef = jax.tree_util.tree_flatten((args, kwargs), is_leaf=_is_tile)
    dynamic = [i for i, x in enumerate(leaves) if isinstance(x, (jax.Array, np.ndarray, np.number))]
    found: dict = {}

    def abstract(dynamic_values, contents):
        values = list(leaves)
        for i, v in zip(dynamic, dynamic_values):
            values[i] = v
        call_args, call_kwargs = jax.tree_util.tree_unflatten(treedef, values)
        m = _execute(fn, call_args, call_kwargs, dict(zip(params, contents)))
        found["reads"], found["writes"] = list(m.reads.values()), list(m.writes.values())

    structs = [jax.ShapeDtypeStruct((t.rows, t.cols), t.np_dtype) for t in params]
    jax.eval_shape(abstract, [leaves[i] for i in dynamic], structs)

    def names(tiles) -> tuple[str, ...]:  # in parameter order
        order = _arguments(_unwrap(fn), args, kwargs).arguments.items()
        return tuple(name for name, value in order if _is_tile(value) and value in tiles)

    return names(found["reads"]), names(found["writes"])


def run_vf(fn, args: tuple, kwargs: dict, tiles: dict) -> dict:
    """Run the VF body. args/kwargs are the call's arguments (ascjax Tile objects for tiles plus scalars, possibly
    traced jnp scalars). tiles maps each Tile object passed to its current contents (a 2-D jnp array of shape
    (tile.rows, tile.cols), dtype tile.np_dtype). Returns {Tile: new contents} for every tile stored to.

    A tile's contents may also be its physical array (``tile.physical_shape``); the new contents come back in the
    shape given. Either way the VF addresses the bytes as the tile's format stores them (an Nz tile's fractals)."""
    missing = [t for t in _tile_arguments(fn, args, kwargs) if t not in tiles]
    if missing:
        raise ValueError(f"run_vf: no contents given for {', '.join(map(str, missing))}")
    m = _execute(fn, args, kwargs, tiles)
    return {tile: m.contents(key) for key, tile in m.writes.items()}
