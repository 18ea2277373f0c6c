"""A jaxpr evaluated on the host in NumPy: a small traced computation with no XLA compile.

A kernel's recording is thousands of tiny integer and float32 operations on a few hundred
values (each instruction's sizes, offsets, enables and cycles). Compiled by XLA it costs up to
seconds per kernel (a flash-attention recording: 8 s), for microseconds of arithmetic; op by op in
``jax.numpy`` it costs a dispatch per operation. Traced once to a jaxpr and evaluated here, equation
by equation in NumPy, it costs milliseconds.

NumPy computes what XLA computes on the operations listed in ``_NUMPY`` for the dtypes in
``_EXACT_DTYPES``: integer arithmetic wraps alike, each IEEE float32 and float64 operation rounds alike
(XLA's CPU backend runs without fast-math), and the casts agree where the values fit the target. Any
other equation, or one whose operands leave that ground (an integer divided by zero, a float cast to
an integer it does not fit), runs through JAX itself, eagerly. What remains are XLA's rewrites of float
chains, which it may or may not make from one program to the next: a product fused into the sum it
feeds (one rounding where NumPy rounds twice), a division by a broadcast value taken as a product by its
reciprocal (a unit in the last place off). NumPy's results are the correctly rounded ones; every kernel in ``kernels/`` records bit for
bit alike on both paths (``tests/test_host_eval.py``).
"""

from __future__ import annotations

import functools
import math

import jax
import numpy as np
from jax import lax
from jax.extend import core as jcore

#: dtypes whose arithmetic NumPy and XLA:CPU compute bit for bit alike (bfloat16, float16 and the float8
#: formats round through float32 differently in places: they take JAX's path).
_EXACT_DTYPES = frozenset(
    np.dtype(t) for t in (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
                          np.uint64, np.float32, np.float64)
)  # fmt: skip


class _NotExact(Exception):
    """This equation's NumPy result could differ from XLA's: evaluate it with JAX."""


def _int_div(x, y):
    if np.issubdtype(x.dtype, np.floating):
        return np.true_divide(x, y)
    if np.any(y == 0):
        raise _NotExact
    q = np.floor_divide(x, y)
    return q + ((np.remainder(x, y) != 0) & ((x < 0) != (y < 0)))  # C division truncates toward zero


def _rem(x, y):
    if not np.issubdtype(x.dtype, np.floating) and np.any(y == 0):
        raise _NotExact
    return np.fmod(x, y)  # the sign of the dividend, as C and XLA


def _convert(x, *, new_dtype, **_):
    new = np.dtype(new_dtype)
    if np.issubdtype(x.dtype, np.floating) and np.issubdtype(new, np.integer):
        info = np.iinfo(new)
        if not np.all(np.isfinite(x) & (x > info.min - 1) & (x < info.max + 1)):
            raise _NotExact  # XLA saturates or maps NaN; NumPy's cast is undefined there
    return x.astype(new)


#: Elements up to which a broadcast is written out (a copy is cheaper than NumPy's strided view of a small array).
SMALL_BROADCAST_ELEMENTS = 4096


def _broadcast_in_dim(x, *, shape, broadcast_dimensions, **_):
    if x.shape == tuple(shape):
        return x
    kept = [1] * len(shape)
    for src, dst in enumerate(broadcast_dimensions):
        kept[dst] = x.shape[src]
    if math.prod(shape) <= SMALL_BROADCAST_ELEMENTS:
        out = np.empty(shape, x.dtype)
        out[...] = x.reshape(kept)
        return out
    return np.broadcast_to(x.reshape(kept), shape)


def _reshape(x, *, new_sizes, dimensions=None, **_):
    if dimensions is not None:
        x = np.transpose(x, dimensions)
    return x.reshape(new_sizes)


def _iota(*, dtype, shape, dimension, **_):
    line = np.arange(shape[dimension], dtype=dtype).reshape([-1 if d == dimension else 1 for d in range(len(shape))])
    return np.broadcast_to(line, shape)


def _slice(x, *, start_indices, limit_indices, strides=None, **_):
    strides = strides or (1,) * x.ndim
    return x[tuple(slice(a, b, s) for a, b, s in zip(start_indices, limit_indices, strides))]


def _clamped_starts(x_shape, sizes, starts):
    return [min(max(int(s), 0), n - k) for s, n, k in zip(starts, x_shape, sizes)]


def _dynamic_slice(x, *starts, slice_sizes, **_):
    at = _clamped_starts(x.shape, slice_sizes, starts)
    return x[tuple(slice(a, a + k) for a, k in zip(at, slice_sizes))]


def _dynamic_update_slice(x, update, *starts, **_):
    at = _clamped_starts(x.shape, update.shape, starts)
    out = np.array(x)
    out[tuple(slice(a, a + k) for a, k in zip(at, update.shape))] = update
    return out


def _select_n(which, *cases):
    if len(cases) == 1:
        return cases[0]
    return np.where(which, cases[1], cases[0]) if len(cases) == 2 else np.choose(which, cases)


def _sign(x):
    return np.where(x == 0, x, np.sign(x)) if np.issubdtype(x.dtype, np.floating) else np.sign(x)  # keeps -0.0


def _reduction(fn, exact_floats: bool):
    def reduce(x, *, axes, **_):
        if not exact_floats and np.issubdtype(x.dtype, np.floating):
            raise _NotExact  # XLA's summation order is its own
        return fn(x, axis=tuple(axes)).astype(x.dtype)

    return reduce


def _arg_reduction(fn):
    def reduce(x, *, axes, index_dtype, **_):
        if np.issubdtype(x.dtype, np.floating) and np.any(np.isnan(x)):
            raise _NotExact
        return fn(x, axis=axes[0]).astype(index_dtype)

    return reduce


def _cumulative(fn):
    def scan(x, *, axis, reverse, **_):
        if np.issubdtype(x.dtype, np.floating):
            raise _NotExact
        if reverse:
            return np.flip(fn(np.flip(x, axis), axis=axis, dtype=x.dtype), axis)
        return fn(x, axis=axis, dtype=x.dtype)

    return scan


def _fill_value(dtype, fill_value):
    if fill_value is not None:
        return fill_value
    if np.issubdtype(dtype, np.inexact):
        return np.nan
    if dtype == np.bool_:
        return True
    return np.iinfo(dtype).min if np.issubdtype(dtype, np.signedinteger) else np.iinfo(dtype).max


def _index_grid(operand_ndim: int, indices, start_map, batch_operand_dims, batch_index_dims):
    """Per start (the batch positions of ``indices``, flattened): its index into each operand dimension, from the
    index vector (``start_map``) and, for batching dimensions, the position itself."""
    batch_shape = indices.shape[:-1]
    starts = np.zeros((int(np.prod(batch_shape, dtype=np.int64)), operand_ndim), np.int64)
    starts[:, list(start_map)] = indices.reshape(-1, indices.shape[-1])
    position = np.indices(batch_shape).reshape(len(batch_shape), -1) if batch_shape else np.zeros((0, 1), np.int64)
    for od, idim in zip(batch_operand_dims, batch_index_dims):
        starts[:, od] = position[idim]
    return starts


def _takes_rows(operand, indices, dn, slice_sizes) -> bool:
    """Whether a gather is ``operand[indices[..., 0]]``: whole rows of the leading axis, one per index, in order."""
    n_batch = indices.ndim - 1
    return (
        operand.ndim >= 1 and indices.shape[-1:] == (1,) and tuple(dn.start_index_map) == (0,)
        and tuple(dn.collapsed_slice_dims) == (0,) and not dn.operand_batching_dims
        and tuple(slice_sizes) == (1, *operand.shape[1:])
        and tuple(dn.offset_dims) == tuple(range(n_batch, n_batch + operand.ndim - 1))
    )  # fmt: skip


def _gather(operand, indices, *, dimension_numbers, slice_sizes, mode, fill_value=None, **_):
    """XLA's gather (``lax.gather``): a window of ``slice_sizes`` at each start index, clamped into the operand
    (or, in fill mode, the fill value where a window leaves it)."""
    dn = dimension_numbers
    batch_shape = indices.shape[:-1]
    if _takes_rows(operand, indices, dn, slice_sizes):  # x[i]: whole rows at the indices
        rows = indices[..., 0]
        values = operand[np.minimum(np.maximum(rows, 0), operand.shape[0] - 1)]
        if mode == lax.GatherScatterMode.FILL_OR_DROP:
            outside = ((rows < 0) | (rows >= operand.shape[0])).reshape(rows.shape + (1,) * (operand.ndim - 1))
            values = np.where(outside, _fill_value(operand.dtype, fill_value), values)
        return values
    starts = _index_grid(operand.ndim, indices, dn.start_index_map, dn.operand_batching_dims,
                         dn.start_indices_batching_dims)  # fmt: skip
    upper = np.asarray(operand.shape, np.int64) - np.asarray(slice_sizes, np.int64)
    outside = np.any((starts < 0) | (starts > upper), axis=1)
    starts = np.minimum(np.maximum(starts, 0), upper)
    grid = np.meshgrid(*[np.arange(k) for k in slice_sizes], indexing="ij")
    window = tuple(starts[:, d].reshape((-1,) + (1,) * operand.ndim) + grid[d][None] for d in range(operand.ndim))
    values = operand[window]
    if mode == lax.GatherScatterMode.FILL_OR_DROP:
        values = np.where(outside.reshape((-1,) + (1,) * operand.ndim), _fill_value(operand.dtype, fill_value), values)
    dropped = set(dn.collapsed_slice_dims) | set(dn.operand_batching_dims)
    kept = tuple(k for d, k in enumerate(slice_sizes) if d not in dropped)
    values = values.reshape(batch_shape + kept)
    first_window = len(batch_shape)
    return np.moveaxis(values, list(range(first_window, first_window + len(kept))), list(dn.offset_dims))


def _scatter(combine):
    """XLA's scatter (``lax.scatter``, ``scatter_add`` / ``min`` / ``max``): each update window written into the
    operand at its start index, combined by ``combine`` (None: replaced), in order; a window that leaves the operand
    is dropped (clamped in clip mode)."""

    def scatter(operand, indices, updates, *, dimension_numbers, mode, **_):
        if combine is np.add and np.issubdtype(operand.dtype, np.floating):
            raise _NotExact  # a float sum's rounding depends on the order of equal indices
        dn = dimension_numbers
        starts = _index_grid(operand.ndim, indices, dn.scatter_dims_to_operand_dims, dn.operand_batching_dims,
                             dn.scatter_indices_batching_dims)  # fmt: skip
        window_dims = [d for d in range(operand.ndim) if d not in dn.inserted_window_dims + dn.operand_batching_dims]
        scatter_dims = [d for d in range(updates.ndim) if d not in dn.update_window_dims]
        ups = np.transpose(updates, scatter_dims + list(dn.update_window_dims))
        window_shape = ups.shape[len(scatter_dims) :]
        sizes = np.ones(operand.ndim, np.int64)
        sizes[window_dims] = window_shape
        upper = np.asarray(operand.shape, np.int64) - sizes
        if mode == lax.GatherScatterMode.CLIP:
            starts, keep = np.clip(starts, 0, upper), np.ones(starts.shape[0], bool)
        else:
            keep = np.all((starts >= 0) & (starts <= upper), axis=1)
        ups = ups.reshape((starts.shape[0],) + window_shape)[keep]
        starts = starts[keep]
        grid = np.meshgrid(*[np.arange(k) for k in window_shape], indexing="ij")
        offsets = [np.zeros(window_shape, np.int64)] * operand.ndim
        for j, d in enumerate(window_dims):
            offsets[d] = grid[j]
        at = tuple(
            starts[:, d].reshape((-1,) + (1,) * len(window_shape)) + offsets[d][None] for d in range(operand.ndim)
        )
        out = np.array(operand)
        if combine is None:
            flat = np.ravel_multi_index(tuple(np.broadcast_to(i, ups.shape).reshape(-1) for i in at), operand.shape)
            if np.unique(flat).size != flat.size:
                raise _NotExact  # two updates of one element: which stays is XLA's to say
            out[at] = ups
        else:
            combine.at(out, at, ups)
        return out

    return scatter


def _clamp(lo, x, hi):
    return np.minimum(np.maximum(x, lo), hi)


def _ufunc(fn):
    """An element-wise primitive; one that asks for another result type or accuracy is JAX's."""

    def apply(*xs, out_dtype=None, accuracy=None, **_):
        if out_dtype is not None or accuracy is not None:
            raise _NotExact
        return fn(*xs)

    return apply


#: The element-wise primitives NumPy computes as XLA does, by name (see ``_ufunc``).
_ELEMENTWISE = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": _int_div, "rem": _rem,
    "max": np.maximum, "min": np.minimum, "neg": np.negative, "sign": _sign, "abs": np.abs,
    "floor": np.floor, "ceil": np.ceil, "sqrt": np.sqrt, "is_finite": np.isfinite,
    "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor, "not": np.invert,
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
    "ge": np.greater_equal, "select_n": _select_n, "clamp": _clamp,
}  # fmt: skip
_NUMPY = {
    **{name: _ufunc(fn) for name, fn in _ELEMENTWISE.items()},
    "convert_element_type": _convert, "broadcast_in_dim": _broadcast_in_dim, "reshape": _reshape,
    "squeeze": lambda x, *, dimensions, **_: np.squeeze(x, dimensions),
    "transpose": lambda x, *, permutation, **_: np.transpose(x, permutation),
    "rev": lambda x, *, dimensions, **_: np.flip(x, dimensions),
    "concatenate": lambda *xs, dimension, **_: np.concatenate(xs, axis=dimension),
    "stack": lambda *xs, axis, **_: np.stack(xs, axis=axis),
    "iota": _iota, "slice": _slice, "dynamic_slice": _dynamic_slice, "dynamic_update_slice": _dynamic_update_slice,
    "gather": _gather, "scatter": _scatter(None), "scatter-add": _scatter(np.add), "scatter_add": _scatter(np.add),
    "scatter-min": _scatter(np.minimum), "scatter_min": _scatter(np.minimum), "scatter-max": _scatter(np.maximum),
    "scatter_max": _scatter(np.maximum), "reduce_sum": _reduction(np.sum, False), "reduce_max": _reduction(np.max, True),
    "reduce_min": _reduction(np.min, True), "reduce_and": _reduction(np.all, True),
    "reduce_or": _reduction(np.any, True), "argmax": _arg_reduction(np.argmax), "argmin": _arg_reduction(np.argmin),
    "cumsum": _cumulative(np.cumsum), "cummax": _cumulative(lambda x, axis, dtype: np.maximum.accumulate(x, axis)),
    "cummin": _cumulative(lambda x, axis, dtype: np.minimum.accumulate(x, axis)),
    "copy": lambda x, **_: x, "copy_p": lambda x, **_: x,
}  # fmt: skip

#: Primitives that call a jaxpr of theirs on their operands (the parameter that holds it).
_CALLS = {"jit": "jaxpr", "pjit": "jaxpr", "closed_call": "call_jaxpr", "core_call": "call_jaxpr",
          "remat": "jaxpr", "checkpoint": "jaxpr", "custom_jvp_call": "call_jaxpr", "custom_vjp_call": "call_jaxpr",
          "custom_vmap_call": "call"}  # fmt: skip


def eval_jaxpr(closed, *args) -> list:
    """The outputs of ``closed`` (a ``ClosedJaxpr``) on ``args`` (NumPy arrays or scalars), as NumPy arrays."""
    jaxpr = closed.jaxpr
    args = [np.asarray(a, dtype=v.aval.dtype) for v, a in zip(jaxpr.invars, args)]
    consts = [np.asarray(c) for c in closed.consts]
    with np.errstate(all="ignore"):  # integer wrap-around and the casts' edge cases are XLA's semantics, not errors
        return _program(jaxpr, (True,) * len(jaxpr.outvars)).run(consts, args)


def needed_inputs(closed) -> list[bool]:
    """Per input of ``closed``, whether any of its outputs depends on it (an unread input can take any value)."""
    program = _program(closed.jaxpr, (True,) * len(closed.jaxpr.outvars))
    return [v in program.reads for v in closed.jaxpr.invars]


class _Program:
    """A jaxpr as the evaluator runs it, for one set of needed outputs: made once, so that running it is a list of
    calls on slots. What no needed output depends on is left out; what depends only on constants is computed now.

    ``reads``: the jaxpr's variables some needed output depends on (its inputs among them)."""

    def __init__(self, jaxpr, live_out: tuple):
        self.jaxpr = jaxpr
        needed = {v for v, keep in zip(jaxpr.outvars, live_out) if keep and not isinstance(v, jcore.Literal)}
        kept = []
        for eqn in reversed(jaxpr.eqns):  # liveness, back to front
            live = tuple(not isinstance(v, jcore.DropVar) and v in needed for v in eqn.outvars)
            if not any(live) and not eqn.effects:
                continue  # nothing needs what it computes
            kind, sub, needs = _classify(eqn, live)
            kept.append((eqn, live, kind, sub))
            needed.update(needs)
        self.reads = needed
        slot: dict = {}
        self.template: list = []

        def place(v):  # a variable's slot; a literal gets one holding its value
            if isinstance(v, jcore.Literal):
                self.template.append(np.asarray(v.val, dtype=v.aval.dtype))
                return len(self.template) - 1
            if v not in slot:
                slot[v] = len(self.template)
                self.template.append(None)
            return slot[v]

        self.const_slots = [place(v) for v in jaxpr.constvars]
        self.arg_slots = [place(v) for v in jaxpr.invars]
        known = set()  # slots whose value is fixed now: literals and what is computed from them alone
        self.steps = []
        for eqn, live, kind, sub in reversed(kept):
            ins = [place(v) for v in eqn.invars]
            outs = [None if isinstance(v, jcore.DropVar) else place(v) for v in eqn.outvars]
            call = _caller(eqn, live, kind, sub)
            literal = [isinstance(v, jcore.Literal) for v in eqn.invars]
            if kind in ("numpy", "jax") and not eqn.effects and all(lit or i in known for lit, i in zip(literal, ins)):
                for o, x in zip(outs, call([self.template[i] for i in ins])):  # folded: computed once, here
                    if o is not None:
                        self.template[o] = x
                        known.add(o)
                continue
            single = outs[0] if len(outs) == 1 else None  # the common case: one result, stored without a loop
            self.steps.append((call, ins, single, None if single is not None else outs))
        self.out_slots = [place(v) if keep else None for v, keep in zip(jaxpr.outvars, live_out)]

    def run(self, consts: list, args: list) -> list:
        env = list(self.template)
        for i, x in zip(self.const_slots, consts):
            env[i] = x
        for i, x in zip(self.arg_slots, args):
            env[i] = x
        for call, ins, single, outs in self.steps:
            results = call([env[i] for i in ins])
            if single is not None:
                env[single] = results[0]
                continue
            for o, x in zip(outs or (), results):
                if o is not None:
                    env[o] = x
        return [None if i is None else env[i] for i in self.out_slots]


#: Per (jaxpr, which outputs are needed): its program. A jaxpr is kept with its program, so its id stays its own.
_PROGRAMS: dict = {}
PROGRAMS_KEPT = 4096


def _program(jaxpr, live_out: tuple) -> _Program:
    key = (id(jaxpr), live_out)
    hit = _PROGRAMS.get(key)
    if hit is not None and hit.jaxpr is jaxpr:
        return hit
    if len(_PROGRAMS) >= PROGRAMS_KEPT:
        _PROGRAMS.clear()
    with np.errstate(all="ignore"):  # folding constants computes
        program = _PROGRAMS[key] = _Program(jaxpr, live_out)
    return program


def _closed(j) -> tuple:
    """A sub-jaxpr parameter as (jaxpr, consts)."""
    return (j.jaxpr, [np.asarray(c) for c in j.consts]) if isinstance(j, jcore.ClosedJaxpr) else (j, [])


def _needed_operands(operands, body, live: tuple) -> list:
    """The operands of a call of ``body`` that its outputs ``live`` read."""
    reads = _program(body, live).reads
    return [x for x, v in zip(operands, body.invars) if v in reads and not isinstance(x, jcore.Literal)]


def _classify(eqn, live: tuple):
    """How an equation runs (``numpy``, ``jax``, ``call``, ``scan``, ``while``, ``cond``), what it holds for that
    (a sub-jaxpr, a scan's needed outputs) and the operands it reads."""
    name = eqn.primitive.name
    operands = [v for v in eqn.invars if not isinstance(v, jcore.Literal)]
    if name in _CALLS and eqn.params.get(_CALLS[name]) is not None:
        sub = _closed(eqn.params[_CALLS[name]])
        return "call", sub, _needed_operands(eqn.invars, sub[0], live)
    if name == "scan":
        wanted = _scan_live(eqn.params, live)
        return "scan", wanted, _needed_operands(eqn.invars, _closed(eqn.params["jaxpr"])[0], wanted)
    if name in ("while", "cond"):
        return name, None, operands
    exact = all(np.dtype(v.aval.dtype) in _EXACT_DTYPES for v in (*eqn.outvars, *eqn.invars))
    return ("numpy" if exact and name in _NUMPY else "jax"), None, operands


def _caller(eqn, live: tuple, kind: str, sub):
    """The equation as one call: operand values in, result values out (a list; None for a result not needed)."""
    params, prim = eqn.params, eqn.primitive

    def by_jax(args):  # JAX's own evaluation, eagerly
        out = prim.bind(*args, **params)
        return [np.asarray(x) for x in (out if prim.multiple_results else [out])]

    if kind == "numpy":
        plain = prim.name in _ELEMENTWISE and all(v is None for v in params.values())  # no out_dtype, no accuracy
        fn = _ELEMENTWISE[prim.name] if plain else functools.partial(_NUMPY[prim.name], **params)
        shapes = [tuple(v.aval.shape) for v in eqn.outvars]
        dtypes = [np.dtype(v.aval.dtype) for v in eqn.outvars]
        if not prim.multiple_results:
            (shape,), (dtype,) = shapes, dtypes

            def by_numpy(args):
                try:
                    out = np.asarray(fn(*args))
                except (_NotExact, ValueError, TypeError, IndexError):  # not NumPy's to answer
                    return by_jax(args)
                if out.shape != shape:
                    return by_jax(args)
                return (out,) if out.dtype == dtype else (out.astype(dtype),)

            return by_numpy

        def by_numpy_many(args):
            try:
                outs = [np.asarray(x) for x in fn(*args)]
            except (_NotExact, ValueError, TypeError, IndexError):
                return by_jax(args)
            if any(x.shape != shape for x, shape in zip(outs, shapes)):
                return by_jax(args)
            return [x if x.dtype == d else x.astype(d) for x, d in zip(outs, dtypes)]

        return by_numpy_many
    if kind == "call":
        program, consts = _program(sub[0], live), sub[1]
        return lambda args: program.run(consts, args)
    if kind == "scan":
        return functools.partial(_scan, wanted=sub, **params)
    if kind == "while":
        return functools.partial(_while, **params)
    if kind == "cond":
        branches = [(_program(b.jaxpr, (True,) * len(b.jaxpr.outvars)), _closed(b)[1]) for b in params["branches"]]

        def branch(args):
            program, consts = branches[int(np.clip(int(args[0]), 0, len(branches) - 1))]
            return program.run(consts, args[1:])

        return branch
    return by_jax


def _scan_live(params: dict, live: tuple) -> tuple:
    """Which of a scan's carries and stacked outputs its body must compute: those needed after the scan, and the
    carries those need in a later iteration (a fixed point). A carry no needed value depends on (a kernel's data,
    while it is recorded) is left uncomputed."""
    body = _closed(params["jaxpr"])[0]
    n_consts, n_carry = _scan_counts(params)
    carry = list(live[:n_carry])
    while True:
        wanted = tuple(carry) + tuple(live[n_carry:])
        reads = _program(body, wanted).reads
        more = [c or (v in reads) for c, v in zip(carry, body.invars[n_consts : n_consts + n_carry])]
        if more == carry:
            return wanted
        carry = more


def _scan_counts(params: dict) -> tuple:
    """A scan's (constant, carry) operand counts: JAX before 0.11 names them, later versions group the operands as a
    flat tree of (constants, carries, scanned)."""
    if "ft_in" in params:
        consts, carry, _ = params["ft_in"].unpack()
        return len(consts), len(carry)
    return params["num_consts"], params["num_carry"]


#: From this many iterations, a scan none of whose needed outputs depends on a carry (a loop's recorded operands, one
#: set per iteration) is evaluated as one batched program, its body under ``jax.vmap``: tracing that costs about what
#: a hundred iterations cost one by one (a flash-attention loop body of 300 operations: 0.05-0.15 s, and 1-1.5 ms an
#: iteration), and the batched program costs about one iteration's.
BATCHED_SCAN_LENGTH = 128


def _scan(args, *, wanted: tuple, jaxpr, length, reverse, **params):
    body, body_consts = _closed(jaxpr)
    num_consts, num_carry = _scan_counts(params)
    if length >= BATCHED_SCAN_LENGTH and not any(wanted[:num_carry]):
        return _scan_batched(args, body, body_consts, num_consts, num_carry, wanted, length)
    program = _program(body, wanted)
    consts, carry, xs = args[:num_consts], args[num_consts : num_consts + num_carry], args[num_consts + num_carry :]
    ys = []
    for i in reversed(range(length)) if reverse else range(length):
        out = program.run(body_consts, [*consts, *carry, *(None if x is None else x[i] for x in xs)])
        carry, y = out[:num_carry], out[num_carry:]
        ys.append(y)
    if reverse:
        ys.reverse()
    y_avals = [v.aval for v in body.outvars[num_carry:]]
    stacked = [
        None if not keep else (np.stack([y[j] for y in ys]) if ys else np.zeros((0, *a.shape), a.dtype))
        for j, (a, keep) in enumerate(zip(y_avals, wanted[num_carry:]))
    ]
    return [*carry, *stacked]


#: Per scan body, needed outputs and length: its batched jaxpr (``_scan_batched``), with the body it was made from.
_BATCHED: dict = {}


def _scan_batched(args, body, body_consts, num_consts: int, num_carry: int, wanted: tuple, length: int) -> list:
    """A scan whose iterations share no needed value, evaluated at once: its needed stacked outputs from the body
    ``vmap``ped over the scanned operands (an iteration's outputs depend on its own operands alone, so the order of
    the iterations is no matter). Operands no needed output reads come in as None: zeros stand in for them."""
    kept = [j for j in range(num_carry, len(body.outvars)) if wanted[j]]
    n_fixed = num_consts + num_carry  # constants and carries: the same for every iteration
    key = (id(body), wanted, length)
    hit = _BATCHED.get(key)
    if hit is None or hit[0] is not body:

        def iteration(fixed, scanned):
            out = jax.core.eval_jaxpr(body, body_consts, *fixed, *scanned)
            return [out[j] for j in kept]

        avals = [v.aval for v in body.invars]
        fixed = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in avals[:n_fixed]]
        scanned = [jax.ShapeDtypeStruct((length, *a.shape), a.dtype) for a in avals[n_fixed:]]
        if len(_BATCHED) >= PROGRAMS_KEPT:
            _BATCHED.clear()
        hit = _BATCHED[key] = (body, jax.make_jaxpr(jax.vmap(iteration, in_axes=(None, 0)))(fixed, scanned))
    stand_in = lambda v, x, lead=(): np.zeros((*lead, *v.aval.shape), v.aval.dtype) if x is None else x
    operands = [stand_in(v, x) for v, x in zip(body.invars[:n_fixed], args[:n_fixed])]
    operands += [stand_in(v, x, (length,)) for v, x in zip(body.invars[n_fixed:], args[n_fixed:])]
    ys = iter(eval_jaxpr(hit[1], *operands))
    return [None] * num_carry + [next(ys) if wanted[j] else None for j in range(num_carry, len(body.outvars))]


def _while(args, *, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts, **_):
    cond = _program(cond_jaxpr.jaxpr, (True,))
    body = _program(body_jaxpr.jaxpr, (True,) * len(body_jaxpr.jaxpr.outvars))
    cond_consts, body_consts = _closed(cond_jaxpr)[1], _closed(body_jaxpr)[1]
    c_args, b_args = args[:cond_nconsts], args[cond_nconsts : cond_nconsts + body_nconsts]
    carry = args[cond_nconsts + body_nconsts :]
    while bool(cond.run(cond_consts, [*c_args, *carry])[0]):
        carry = body.run(body_consts, [*b_args, *carry])
    return carry
