"""Loop lowering on the data plane: what a loop's iterations compute independently, as one batched op.

A kernel's ``k.range`` is a ``lax.scan`` on the data plane, one iteration after another. Most of an
iteration does not depend on the one before: the K steps of a matmul load their tiles from GM and
multiply them; only the accumulation into L0C is carried. ``scan_lowered`` traces the loop body
once, splits it by data dependence (JAX's partial evaluation, with the state the body changes as
the unknown input) and runs

- the part that depends only on the loop index and on state the loop never changes as one
  ``vmap`` over every iteration (a K chain of mmads becomes one batched ``dot_general``);
- the carried rest (the accumulation, a GM store into a tensor the loop keeps writing) as a
  ``lax.scan`` over the first part's results.

Every value is computed by the same operations on the same operands as the plain scan, so the
buffers are the same bits where each operation has the same bits batched as alone: the data plane's
products (``core.same_bits_dot_general``) and sums (``core.fold_sum``) do. ``Options(lower_loops=False)``
runs the plain scan, and a test compares the two on the kernels. A body whose batched part would hold
more than ``MAX_BATCHED_BYTES`` of results, or that carries everything, runs as the plain scan.

A loop whose iterations use some state privately (``private``: the on-chip buffers of a loop
``ascjax.engine.private_loops`` finds so) is split with that state known too: every iteration starts
from the state as the loop found it, the whole body but what it does to the rest (GM) is one ``vmap``,
and the private state after the loop is the last iteration's. So independent output tiles run as one
batched computation whose products fold into wide ones (``core.same_bits_dot_general``).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend import core as jex_core
from jax.extend import linear_util as lu
from jax.interpreters import partial_eval as pe

#: Results of the batched part beyond this many bytes run as the plain scan instead (memory, not speed).
MAX_BATCHED_BYTES = 256 * 2**20

#: Longest carried part traced in line (unrolled) rather than as a loop: a few GM stores cost less than a loop's steps.
MAX_UNROLLED_STEPS = 8

#: Primitives whose presence makes batching worth its compile: the batched part must hold real work.
_WORK = frozenset({"dot_general", "conv_general_dilated"})


def scan_lowered(step, state, n: int, lower: bool = True, private=None):
    """``lax.scan(step, state, arange(n))[0]`` (``step(state, i) -> state``), with the iterations' independent part
    batched where that is exact and worth it (see the module); ``lower=False``: the scan. ``private``: called once
    the body is traced, per leaf of ``state`` whether the iterations use it privately (None: none does); then all
    the body but what it does to the other leaves it writes runs batched."""
    iterations = jnp.arange(n, dtype=jnp.int32)
    if not (lower or private is not None) or n < 2:
        return jax.lax.scan(lambda s, i: (step(s, i), None), state, iterations)[0]
    leaves, tree = jax.tree.flatten(state)
    index = jnp.zeros((), jnp.int32)
    closed, out_shape = jax.make_jaxpr(lambda ls, i: step(jax.tree.unflatten(tree, ls), i), return_shape=True)(
        leaves, index
    )
    out_tree = jax.tree.structure(out_shape)

    def plain(leaves):  # the scan carries the leaves the body writes; it reads the others as they are
        changed = [out is not var for out, var in zip(closed.jaxpr.outvars, closed.jaxpr.invars)]

        def body(written, i):
            it = iter(written)
            ls = [next(it) if ch else x for x, ch in zip(leaves, changed)]
            outs = jex_core.jaxpr_as_fun(closed)(*ls, i)
            return [x for x, ch in zip(outs, changed) if ch], None

        final = iter(jax.lax.scan(body, [x for x, ch in zip(leaves, changed) if ch], iterations)[0])
        return [next(final) if ch else x for x, ch in zip(leaves, changed)]

    mask = None if private is None else private()
    split = None if mask is None else _split(closed, len(leaves), n, mask)
    if split is None and lower:
        split = _split(closed, len(leaves), n)
    out = plain(leaves) if split is None else _run_split(split, leaves, n)
    return jax.tree.unflatten(out_tree, out)


def _split(closed, n_leaves: int, n: int, private=None):
    """The body's known (batchable) and unknown (carried) parts, or None where batching does not pay (or a leaf
    ``private`` marks comes out carried). With ``private``, the body is split at its top level (``_top_level``)
    where that keeps the private leaves known, else by JAX's partial evaluation, which also splits the scans
    inside it."""
    jaxpr = closed.jaxpr
    invars, outvars = jaxpr.invars, jaxpr.outvars
    changed = [outvars[k] is not invars[k] for k in range(n_leaves)]  # leaves the body writes
    if not any(changed):
        return None
    carried = [ch and not (private and private[k]) for k, ch in enumerate(changed)]
    unknowns = carried + [False]  # the loop index is known
    # a private leaf must come out known: at the top level it may not (an inner loop that writes GM as well), and
    # then JAX's partial evaluation, which splits that loop too, is tried
    for split in ([_top_level] if private is not None else []) + [_partial_eval]:
        parts = split(closed, unknowns)
        if parts is not None and not any(parts[2][k] for k in range(n_leaves) if changed[k] and not carried[k]):
            break
    else:
        return None
    known, unknown, out_unknowns, res_avals = parts
    if not _has_work(known.jaxpr):
        return None
    batched = [a for a, unk, ch in zip(closed.out_avals, out_unknowns, changed) if ch and not unk] + list(res_avals)
    if n * sum(math.prod(a.shape) * np.dtype(a.dtype).itemsize for a in batched) > MAX_BATCHED_BYTES:
        return None
    return known, unknown, out_unknowns, changed, carried


def _partial_eval(closed, unknowns: list):
    """``closed`` split by JAX's partial evaluation, as ``_top_level`` splits it (known: known outputs, then
    residuals; unknown: residuals, then unknown inputs), sub-jaxprs included; None where it cannot split it (the
    plain scan is exact). Built on the public ``trace_to_jaxpr_nounits``, which partial-evaluates a function by
    known and unknown inputs."""
    in_avals = closed.in_avals
    split = {}

    def known_part(*known_values):
        values = iter(known_values)
        pvals = [
            pe.PartialVal.unknown(a) if u else pe.PartialVal.known(next(values)) for a, u in zip(in_avals, unknowns)
        ]
        debug = jex_core.DebugInfo("loop body", "ascjax.engine._lowering", None, None)
        fun = lu.wrap_init(jex_core.jaxpr_as_fun(closed), debug_info=debug)
        unknown, out_pvals, residuals = pe.trace_to_jaxpr_nounits(fun, pvals, instantiate=False)
        split.update(unknown=unknown, out_unknowns=[not p.is_known() for p in out_pvals])
        return [p.get_known() for p in out_pvals if p.is_known()] + list(residuals)

    known_avals = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a, u in zip(in_avals, unknowns) if not u]
    try:
        known = jax.make_jaxpr(known_part)(*known_avals)
    except Exception:  # noqa: BLE001 - a primitive partial evaluation cannot split
        return None
    jaxpr = split["unknown"]
    residual_vars = list(jaxpr.constvars)  # the residuals become the unknown part's leading inputs
    unknown = jex_core.ClosedJaxpr(jaxpr.replace(constvars=[], invars=residual_vars + list(jaxpr.invars)), [])
    return known, unknown, split["out_unknowns"], [v.aval for v in residual_vars]


def _top_level(closed, unknowns: list):
    """``closed`` split as ``_partial_eval`` splits it (known: known outputs, then residuals; unknown:
    residuals, then unknown inputs), but only at its top level: an equation is unknown where an input is, and
    every equation keeps its sub-jaxprs as they are. JAX's partial evaluation would also move the loop-invariant
    values of every scan inside out of it (a broadcast zero becomes an array the loop carries), which XLA then
    cannot fuse as a constant."""
    jaxpr = closed.jaxpr
    unknown_vars = {v for v, unk in zip(jaxpr.invars, unknowns) if unk}
    is_unknown = lambda v: isinstance(v, jex_core.Var) and v in unknown_vars  # noqa: E731
    known_eqns, unknown_eqns = [], []
    for eqn in jaxpr.eqns:
        if any(is_unknown(v) for v in eqn.invars):
            unknown_eqns.append(eqn)
            unknown_vars.update(eqn.outvars)
        else:
            known_eqns.append(eqn)
    out_unknowns = [is_unknown(v) for v in jaxpr.outvars]
    defined = set(jaxpr.constvars)  # known values the unknown part reads: residuals (constants it reads itself)
    residuals = []
    for v in [v for eqn in unknown_eqns for v in eqn.invars]:
        if isinstance(v, jex_core.Var) and not is_unknown(v) and v not in defined:
            defined.add(v)
            residuals.append(v)
    known_out = [v for v, u in zip(jaxpr.outvars, out_unknowns) if not u]
    known_in = [v for v, u in zip(jaxpr.invars, unknowns) if not u]
    unknown_in = [v for v, u in zip(jaxpr.invars, unknowns) if u]
    unknown_out = [v for v, u in zip(jaxpr.outvars, out_unknowns) if u]

    def closed_part(invars, outvars, eqns):
        part = jaxpr.replace(invars=invars, outvars=outvars, eqns=eqns)
        return jex_core.ClosedJaxpr(part, closed.consts)

    known = closed_part(known_in, known_out + residuals, known_eqns)
    unknown = closed_part(residuals + unknown_in, unknown_out, unknown_eqns)
    return known, unknown, out_unknowns, [v.aval for v in residuals]


def _has_work(jaxpr) -> bool:
    for eqn in jaxpr.eqns:
        if eqn.primitive.name in _WORK:
            return True
        if any(_has_work(sub) for sub in _subs(eqn)):
            return True
    return False


def _subs(eqn):
    for v in eqn.params.values():
        for x in v if isinstance(v, (tuple, list)) else (v,):
            if isinstance(x, jex_core.ClosedJaxpr):
                yield x.jaxpr
            elif isinstance(x, jex_core.Jaxpr):
                yield x


def _run_split(split, leaves, n: int):
    """The known part vmapped over every iteration, then the unknown part scanned over its results."""
    known, unknown, out_unknowns, changed, carried = split
    n_leaves = len(leaves)
    known_in = [x for x, c in zip(leaves, carried) if not c]  # state each iteration finds as the loop found it
    unknown_in = [k for k in range(n_leaves) if carried[k]]
    n_known_out = sum(1 for u in out_unknowns if not u)
    out_slot = {}  # output k -> where its value comes from: ("known", j) or ("unknown", j)
    j_known = j_unknown = 0
    for k, unk in enumerate(out_unknowns):
        out_slot[k] = ("unknown", j_unknown) if unk else ("known", j_known)
        j_unknown, j_known = j_unknown + unk, j_known + (not unk)
    # the known outputs of written leaves, batched (an unwritten leaf's would be a broadcast copy of it)
    kept = [j for k, (where, j) in out_slot.items() if where == "known" and changed[k]]

    def known_iteration(i):
        outs = jex_core.jaxpr_as_fun(known)(*known_in, i)
        return [outs[j] for j in kept], outs[n_known_out:]

    batched, residuals = jax.vmap(known_iteration)(jnp.arange(n, dtype=jnp.int32))
    known_outs = dict(zip(kept, batched))
    known_carried = [out_slot[k][1] for k in unknown_in if out_slot[k][0] == "known"]

    def carried_step(carry, xs):
        known_i, res_i = xs
        known_i = dict(zip(known_carried, known_i))
        outs = jex_core.jaxpr_as_fun(unknown)(*res_i, *(carry[k] for k in unknown_in))
        new = dict(carry)
        for k in unknown_in:
            where, j = out_slot[k]
            new[k] = outs[j] if where == "unknown" else known_i[j]  # a leaf the next iteration reads as written
        return new, None

    init = {k: leaves[k] for k in unknown_in}
    if any(out_unknowns[k] for k in unknown_in):
        xs = ([known_outs[j] for j in known_carried], list(residuals))
        final, _ = jax.lax.scan(carried_step, init, xs, unroll=n <= MAX_UNROLLED_STEPS)
    else:  # nothing is carried: every written leaf is the last iteration's
        final = {k: known_outs[out_slot[k][1]][-1] for k in unknown_in}
    for k in range(n_leaves):  # a private leaf: the last iteration's
        if changed[k] and not carried[k]:
            final[k] = known_outs[out_slot[k][1]][-1]
    return [final[k] if changed[k] else leaves[k] for k in range(n_leaves)]
