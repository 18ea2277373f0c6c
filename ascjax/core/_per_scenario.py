"""A function whose ``vmap`` runs each scenario on the host, one by one, while that costs less than a batched compile.

Under a ``vmap`` alone JAX evaluates eagerly: a batched call of a jitted function compiles the batched
program for that one call. For a function that is cheap per scenario on the host, or served by a program
the process already holds, that compile costs more than the work: the control plane of a traced run takes
3-5 s to compile batched on a 2-core x86 VM, and milliseconds to a second per scenario on the host.
``per_scenario`` is the function as ``traced`` computes it, with ``jax.custom_batching.custom_vmap``'s rule
calling ``on_host`` once per distinct scenario where the batched arguments are concrete (an eager ``vmap``),
until the scenarios left would cost more than compiling them batched (ski rental, as ``HostFirst``); inside a
bigger program (a ``jit`` around the ``vmap``) it batches ``traced``.
"""

from __future__ import annotations

import collections
import hashlib
import time

import jax
import numpy as np
from jax.custom_batching import custom_vmap

from ._numerics import exact_jit

#: The stacked results of the batches last run, by the caller's key and the arguments' bytes: an eager ``vmap`` run
#: again on the same scenarios (a notebook cell, a test's second call) reruns none of them.
_BATCHES: collections.OrderedDict = collections.OrderedDict()
BATCHES_KEPT = 16


def per_scenario(traced, on_host, key, compile_s: float, run_batched=None):
    """``traced(*args)``; under an eager ``vmap``, ``on_host(*scenario_args)`` per distinct scenario, stacked.

    ``on_host`` takes concrete arrays and returns what ``traced`` does, as host arrays of the same shapes and dtypes.
    ``key``: hashable, names what ``traced`` and ``on_host`` compute beyond their arguments (``_BATCHES``; None: no
    batch is kept).
    ``compile_s``: what compiling ``traced`` batched costs; once the scenarios left would cost more on the host (at
    the last one's pace), they run as one batched program.
    ``run_batched(in_axes, *args)``: ``traced`` of every scenario at once (default: ``jax.vmap`` of it, compiled with
    ``EXACT_COMPILE``), for a caller that compiles its parts apart.
    """
    fun = custom_vmap(traced)
    if run_batched is None:
        run_batched = lambda in_axes, *args: exact_jit(jax.vmap(traced, in_axes=in_axes))(*args)  # noqa: E731

    @fun.def_vmap
    def rule(axis_size: int, in_batched, *args):
        batched = tuple(jax.tree.leaves(in_batched))
        in_axes = jax.tree.map(lambda b: 0 if b else None, tuple(in_batched))
        traced_whole = any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(args))  # inside a bigger program
        if traced_whole or axis_size == 0:
            out = run_batched(in_axes, *args)
            return out, jax.tree.map(lambda _: True, out)
        leaves = [np.asarray(x) for x in jax.tree.leaves(args)]
        whole = None if key is None else (key, batched, _digest(leaves))
        out = None if whole is None else _BATCHES.get(whole)
        if out is None:
            out = _run(axis_size, args, leaves, batched, in_axes)
            if whole is not None:
                _BATCHES[whole] = out
            while len(_BATCHES) > BATCHES_KEPT:
                _BATCHES.popitem(last=False)
        else:
            _BATCHES.move_to_end(whole)
        return out, jax.tree.map(lambda _: True, out)

    def _run(axis_size, args, leaves, batched, in_axes):
        structure = jax.tree.structure(args)
        done: dict = {}
        outs = []
        for b in range(axis_size):
            scenario = [x[b] if on else x for x, on in zip(leaves, batched)]
            digest = _digest(scenario)
            pays = False
            if digest not in done:  # a scenario equal to an earlier one reuses its result
                start = time.perf_counter()
                done[digest] = on_host(*jax.tree.unflatten(structure, scenario))
                pays = (time.perf_counter() - start) * (axis_size - b - 1) > compile_s
            outs.append(done[digest])
            if pays:  # the scenarios left run batched
                rest = [x[b + 1 :] if on else x for x, on in zip(leaves, batched)]
                tail = run_batched(in_axes, *jax.tree.unflatten(structure, rest))
                return jax.tree.map(lambda h, t: np.concatenate([h, np.asarray(t)]), _stack(outs), tail)
        return _stack(outs)

    return fun


def forget_batches() -> None:
    """Forget the kept batches' results."""
    _BATCHES.clear()


def _stack(outs: list):
    return jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *outs)


def _digest(arrays) -> str:
    digest = hashlib.blake2b(digest_size=16)
    for x in arrays:
        digest.update(f"{x.dtype}{x.shape};".encode())
        digest.update(np.ascontiguousarray(x).tobytes())
    return digest.hexdigest()
