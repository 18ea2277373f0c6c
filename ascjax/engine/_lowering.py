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

try:  # JAX's partial evaluation (what ``jax.linearize`` and the scan's own partial-eval rule use)
    from jax._src.interpreters.partial_eval import partial_eval_jaxpr_nounits
except ImportError:  # pragma: no cover - a JAX without it runs every loop as the plain scan
    partial_eval_jaxpr_nounits = None

#: Results of the batched part beyond this many bytes run as the plain scan instead (memory, not speed).
MAX_BATCHED_BYTES = 256 * 2**20

#: Primitives whose presence makes batching worth its compile: the batched part must hold real work.
_WORK = frozenset({"dot_general", "conv_general_dilated"})


def scan_lowered(step, state, n: int, lower: bool = True, private=None):
    """``lax.scan(step, state, arange(n))[0]`` (``step(state, i) -> state``), with the iterations' independent part
    batched where that is exact and worth it (see the module); ``lower=False``: the scan. ``private``: called once
    the body is traced, per leaf of ``state`` whether the iterations use it privately (None: no leaf), so that
    every leaf but the rest may be batched."""
    iterations = jnp.arange(n, dtype=jnp.int32)
    if not (lower or private is not None) or n < 2:
        return jax.lax.scan(lambda s, i: (step(s, i), None), state, iterations)[0]
    leaves, tree = jax.tree.flatten(state)
    index = jnp.zeros((), jnp.int32)
    closed, out_shape = jax.make_jaxpr(lambda ls, i: step(jax.tree.unflatten(tree, ls), i), return_shape=True)(
        leaves, index
    )
    out_tree = jax.tree.structure(out_shape)

    def plain(leaves):
        def body(ls, i):
            return jex_core.jaxpr_as_fun(closed)(*ls, i), None

        return jax.lax.scan(body, list(leaves), iterations)[0]

    mask = None if private is None else private()
    split = None if mask is None else _split(closed, len(leaves), n, mask)
    if split is None and lower:
        split = _split(closed, len(leaves), n)
    out = plain(leaves) if split is None else _run_split(split, leaves, n)
    return jax.tree.unflatten(out_tree, out)


def _split(closed, n_leaves: int, n: int, private=None):
    """The body's known (batchable) and unknown (carried) parts, or None where batching does not pay (or a leaf
    ``private`` marks comes out carried)."""
    if partial_eval_jaxpr_nounits is None:
        return None
    jaxpr = closed.jaxpr
    invars, outvars = jaxpr.invars, jaxpr.outvars
    changed = [outvars[k] is not invars[k] for k in range(n_leaves)]  # leaves the body writes
    if not any(changed):
        return None
    carried = [ch and not (private and private[k]) for k, ch in enumerate(changed)]
    try:
        known, unknown, out_unknowns, res_avals = partial_eval_jaxpr_nounits(
            closed,
            carried + [False],
            instantiate=False,  # the loop index is known
        )
    except Exception:  # noqa: BLE001 - a primitive partial evaluation cannot split: the plain scan is exact
        return None
    if any(out_unknowns[k] for k in range(n_leaves) if changed[k] and not carried[k]):
        return None  # a private leaf depends on carried state: its iterations are not apart after all
    if not _has_work(known.jaxpr):
        return None
    batched = [a for a, unk, ch in zip(closed.out_avals, out_unknowns, changed) if ch and not unk] + list(res_avals)
    if n * sum(math.prod(a.shape) * np.dtype(a.dtype).itemsize for a in batched) > MAX_BATCHED_BYTES:
        return None
    return known, unknown, out_unknowns, changed, carried


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

    def known_iteration(i):
        return jex_core.jaxpr_as_fun(known)(*known_in, i)

    batched = jax.vmap(known_iteration)(jnp.arange(n, dtype=jnp.int32))
    known_outs, residuals = batched[:n_known_out], batched[n_known_out:]
    out_slot = {}  # output k -> where its value comes from: ("known", j) or ("unknown", j)
    j_known = j_unknown = 0
    for k, unk in enumerate(out_unknowns):
        out_slot[k] = ("unknown", j_unknown) if unk else ("known", j_known)
        j_unknown, j_known = j_unknown + unk, j_known + (not unk)

    def carried_step(carry, xs):
        known_i, res_i = xs
        outs = jex_core.jaxpr_as_fun(unknown)(*res_i, *(carry[k] for k in unknown_in))
        new = dict(carry)
        for k in unknown_in:
            where, j = out_slot[k]
            new[k] = outs[j] if where == "unknown" else known_i[j]  # a leaf the next iteration reads as written
        return new, None

    init = {k: leaves[k] for k in unknown_in}
    if any(out_unknowns[k] for k in unknown_in):
        final, _ = jax.lax.scan(carried_step, init, (list(known_outs), list(residuals)), unroll=n <= 8)
    else:  # nothing is carried: every written leaf is the last iteration's
        final = {k: known_outs[out_slot[k][1]][-1] for k in unknown_in}
    for k in range(n_leaves):  # a private leaf: the last iteration's
        if changed[k] and not carried[k]:
            final[k] = known_outs[out_slot[k][1]][-1]
    return [final[k] if changed[k] else leaves[k] for k in range(n_leaves)]
