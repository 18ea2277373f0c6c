"""``launch``: run a kernel on ``block_dim`` AI Core blocks (SPMD) and merge what they wrote to GM.

The kernel is traced and compiled once for every block, and each block reads its index with
``pl.get_block_idx()`` / ``k.block_idx``. The blocks run one after another (``lax.map``), so a
block's branches (a ``cond``, the section scheduler's choice of segment) stay branches; with
``block_parallel=True`` they are one ``jax.vmap``, which runs every branch of every block and
selects (worth it only for straight-line kernels on a wide device). Every block
starts from the same GM and sees only its own writes (inter-block sync is not modelled).
After the blocks, their GM outputs are merged inside the same jit:

- an element one block wrote takes that block's value;
- an element several blocks wrote only by atomic adds takes the initial value plus every
  block's contribution (``pl.store(..., atomic=pl.AtomicType.AtomicAdd)``);
- a GM granule (``Options.gm_granule_bytes``) that two blocks write, one of them with a
  plain store, is a RACE: the result depends on which write lands last.

The launch's verdict is that of the first block that failed (lowest index), else the merge's.
"""

from __future__ import annotations

import dataclasses
import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from . import dtypes
from .chip import Chip, get_chip
from .options import Options
from .report import Report, report
from .results import EXCEPTIONS, Verdict
from .run import execute_block, initial_gm, output_spec, raise_if_failed
from .state import GM_PLAIN, State
from .timing import Costs, default_costs
from .trace import summary


class GmMerge(eqx.Module):
    """The merge's finding: code 0 (none) or RACE, on output ``tensor`` (index into the outputs), ``granule``.

    ``block_a`` < ``block_b`` both write the granule (``plain_a`` / ``plain_b``: with a plain store,
    else only with atomic adds); ``element`` is a flat element both write (``overlap``), else one of ``block_a``'s.
    """

    code: jax.Array
    tensor: jax.Array
    granule: jax.Array
    element: jax.Array
    block_a: jax.Array
    block_b: jax.Array
    plain_a: jax.Array
    plain_b: jax.Array
    overlap: jax.Array


def _per_granule(bits: int, granule_bytes: int) -> int:
    """Elements per GM granule (at least one: an element wider than a granule is its own)."""
    return max(1, granule_bytes * 8 // bits)


def _merge_one(init, values, marks, granule_bytes: int):
    """Merge one output: (merged tensor, race?, granule, element, block a, block b, plain a, plain b, overlap)."""
    n_blocks = values.shape[0]
    wrote = marks != 0
    count = jnp.sum(wrote, axis=0)
    first = jnp.argmax(wrote, axis=0)
    single = jnp.take_along_axis(values, first[None], axis=0)[0]
    deltas = jnp.sum(jnp.where(wrote, values - init[None], jnp.zeros_like(values)), axis=0)
    added = (init + deltas).astype(init.dtype)
    merged = jnp.where(count == 0, init, jnp.where(count == 1, single, added))

    per = _per_granule(dtypes.bits(jnp.dtype(init.dtype).name), granule_bytes)
    flat_w = wrote.reshape(n_blocks, -1)
    flat_p = ((marks & GM_PLAIN) != 0).reshape(n_blocks, -1)
    pad = (-flat_w.shape[1]) % per
    gw = jnp.pad(flat_w, ((0, 0), (0, pad))).reshape(n_blocks, -1, per)
    gp = jnp.pad(flat_p, ((0, 0), (0, pad))).reshape(n_blocks, -1, per)
    any_w, any_p = jnp.any(gw, axis=2), jnp.any(gp, axis=2)  # (blocks, granules)
    racy = (jnp.sum(any_w, axis=0) >= 2) & jnp.any(any_p, axis=0)
    g = jnp.argmax(racy)
    blocks = jnp.arange(n_blocks)
    a = jnp.argmax(any_p[:, g])  # the lowest block that stores plainly
    b = jnp.argmax(any_w[:, g] & (blocks != a))  # the lowest other writer
    lo, hi = jnp.minimum(a, b), jnp.maximum(a, b)
    both = gw[lo, g] & gw[hi, g]
    overlap = jnp.any(both)
    element = g * per + jnp.where(overlap, jnp.argmax(both), jnp.argmax(gw[lo, g]))
    return merged, jnp.any(racy), (g, element, lo, hi, any_p[lo, g], any_p[hi, g], overlap)


@functools.partial(jax.jit, static_argnames=("names", "granule_bytes"))  # one compiled step, even in an eager launch
def merge_gm(names: tuple, initial: dict, values: dict, marks: dict, granule_bytes: int) -> tuple[dict, GmMerge]:
    """Merge the blocks' GM outputs ``names`` (``values`` and write ``marks`` have a leading block axis).

    A race names the first tensor in ``names`` order that has one (``GmMerge.tensor`` indexes ``names``).
    """
    merged = {}
    found = jnp.asarray(False)
    record = [jnp.zeros((), jnp.int32)] * 8  # tensor, granule, element, block a, block b, plain a, plain b, overlap
    for i, name in enumerate(names):
        merged[name], racy, where = _merge_one(initial[name], values[name], marks[name], granule_bytes)
        take = racy & ~found
        record = [jnp.where(take, jnp.asarray(new, jnp.int32), old) for new, old in zip((i, *where), record)]
        found = found | racy
    code = jnp.where(found, int(Verdict.RACE), int(Verdict.OK)).astype(jnp.int32)
    tensor, granule, element, block_a, block_b, plain_a, plain_b, overlap = record
    return merged, GmMerge(code, tensor, granule, element, block_a, block_b, plain_a, plain_b, overlap)


def launch_cycles(block_cycles, ai_cores: int):
    """Cycles of a launch: block b runs on AI Core b % ai_cores, a core's blocks back to back (waves).

    ``block_cycles`` has the blocks on its last axis; the result is the busiest core's total.
    """
    cycles = jnp.asarray(block_cycles)
    n = cycles.shape[-1]
    cores = min(n, ai_cores)
    waves = -(-n // cores)
    cycles = jnp.pad(cycles, [(0, 0)] * (cycles.ndim - 1) + [(0, waves * cores - n)])
    return jnp.max(jnp.sum(cycles.reshape(*cycles.shape[:-1], waves, cores), axis=-2), axis=-1)


class LaunchResult(eqx.Module):
    """Merged outputs, the blocks' final states (leading block axis) and the launch's verdict.

    ``block`` is the block the verdict comes from (-1: the merge, or OK). Under ``jax.vmap`` every
    field gains a leading scenario axis (``states`` then has (scenario, block)).
    """

    outputs: dict[str, jax.Array]
    states: State
    merge: GmMerge
    verdict: jax.Array
    block: jax.Array

    @property
    def ok(self) -> bool:
        return bool(np.all(np.asarray(self.verdict) == Verdict.OK))

    @property
    def block_dim(self) -> int:
        return int(self.states.error.code.shape[-1])

    @property
    def block_cycles(self) -> jax.Array:
        """Cycles of each block on its own (its last pipe to finish)."""
        return jnp.max(self.states.time.pipe_t, axis=-1)

    @property
    def cycles(self) -> jax.Array:
        """Cycles of the launch: blocks beyond ``chip.ai_cores`` run in waves (see ``launch_cycles``)."""
        return launch_cycles(self.block_cycles, self.states.chip.ai_cores)

    def report(self, block: int | None = None, index: int | None = None) -> Report:
        """Explain the launch, or one ``block`` of it (``index``: one scenario of a vmapped batch)."""
        states, merge = jax.device_get((self.states, self.merge))
        if index is not None:
            states, merge = jax.tree_util.tree_map(lambda x: x[index], (states, merge))
        if np.ndim(merge.code) != 0:
            raise ValueError("this launch holds a batch of scenarios: pass index= to pick one")
        n = int(states.error.code.shape[0])
        if block is not None:
            if not 0 <= block < n:
                raise ValueError(f"block {block} is outside the launch's blocks [0, {n})")
            return _block_report(states, block)
        bad = np.flatnonzero(np.asarray(states.error.code) != Verdict.OK)
        if bad.size:
            return _block_report(states, int(bad[0]))
        timing = _launch_timing(states)
        warnings = _warnings(states)
        chip = states.chip.name
        if int(merge.code) == Verdict.OK:
            return Report(Verdict.OK, f"OK (chip {chip}, {n} blocks)", None, None, warnings, chip, timing)
        return Report(Verdict.RACE, _merge_race(states, merge), None, None, warnings, chip, timing)

    def check(self) -> LaunchResult:
        """Raise the typed error (``RaceError``, ``DeadlockError``...) if the verdict is not OK."""
        codes = np.atleast_1d(np.asarray(self.verdict))
        bad = np.flatnonzero(codes != Verdict.OK)
        if bad.size:
            index = int(bad[0]) if np.ndim(self.verdict) else None
            rep = self.report(index=index)
            prefix = f"scenario {index}: " if index is not None else ""
            raise EXCEPTIONS[rep.verdict](prefix + str(rep), rep)
        return self


def _block(states: State, b: int) -> State:
    return jax.tree_util.tree_map(lambda x: x[b], states)


def _block_report(states: State, b: int) -> Report:
    rep = report(_block(states, b))
    return dataclasses.replace(rep, message=f"block {b}: {rep.message}")


def _warnings(states: State) -> list[str]:
    """Every block's warnings, each once, naming the blocks that raised it."""
    seen: dict[str, list[int]] = {}
    for b in range(int(states.error.code.shape[0])):
        if np.any(np.asarray(states.warn_op[b]) >= 0):
            for text in report(_block(states, b)).warnings:
                seen.setdefault(text, []).append(b)
    return [f"block{'s' if len(bs) > 1 else ''} {', '.join(map(str, bs))}: {text}" for text, bs in seen.items()]


def _launch_timing(states: State) -> dict:
    """The slowest block's summary, with the launch's cycles (waves over ``chip.ai_cores``) and per-block cycles."""
    per_block = np.max(np.asarray(states.time.pipe_t), axis=-1)
    n, cores = per_block.shape[0], states.chip.ai_cores
    total = float(launch_cycles(per_block, cores))
    slowest = int(np.argmax(per_block))
    info = summary(states, slowest)
    used = min(n, cores)
    ideal = float(np.sum(np.asarray(states.time.cube_ideal)))
    info.update(
        cycles=total,
        microseconds=total / states.chip.clock_mhz,
        cube_peak_fraction=ideal / (total * used) if total > 0 else 0.0,
        block_cycles=per_block.tolist(),
        slowest_block=slowest,
        ai_cores=cores,
        waves=-(-n // used),
    )
    return info


def _merge_race(states: State, merge: GmMerge) -> str:
    name = states.gm_outputs[int(merge.tensor)]
    data = states.gm[name]
    shape, size = tuple(data.shape[1:]), int(np.prod(data.shape[1:]))
    granule_bytes = states.options.gm_granule_bytes
    bits = dtypes.bits(data.dtype)
    per = _per_granule(bits, granule_bytes)
    g, a, b = int(merge.granule), int(merge.block_a), int(merge.block_b)

    def at(e: int) -> str:
        return str(tuple(int(i) for i in np.unravel_index(e, shape)))

    first, last = g * per, min((g + 1) * per, size) - 1
    start, end = first * bits // 8, (last + 1) * bits // 8
    how = {True: "a plain store", False: "atomic adds"}
    lines = [
        f"RACE between blocks {a} and {b} on GM tensor `{name}` granule {g} (bytes [{start}, {end}), elements "
        f"{at(first)}..{at(last)}): block {a} writes it with {how[bool(merge.plain_a)]}, block {b} with "
        f"{how[bool(merge.plain_b)]}.",
    ]
    if bool(merge.overlap):
        lines.append(f"  Both write element {at(int(merge.element))}.")
    else:
        lines.append(
            f"  They write different elements of it (block {a} element {at(int(merge.element))}), but a GM write "
            f"moves whole {granule_bytes}-byte granules, so the one that lands last overwrites the other's."
        )
    lines.append(
        "  Blocks run at the same time on different AI Cores and nothing orders their GM writes: the result "
        "depends on which lands last."
    )
    lines.append(
        "  Fix: give each block its own region (offsets from pl.get_block_idx() / k.block_idx, e.g. row = "
        "block_idx * rows), or, when the blocks' results are meant to be summed, store from every block with "
        "pl.store(..., atomic=pl.AtomicType.AtomicAdd)."
    )
    return "\n".join(lines)


def _launch(
    kernel,
    chip: Chip,
    options: Options,
    costs,
    inputs: dict,
    outputs: tuple,
    params: dict,
    block_dim: int,
    block_parallel: bool = False,
):
    def one_block(b):
        return execute_block(kernel, chip, options, costs, inputs, outputs, params, block=(b, block_dim))

    blocks = jnp.arange(block_dim, dtype=jnp.int32)
    states = jax.vmap(one_block)(blocks) if block_parallel else jax.lax.map(one_block, blocks)
    names = tuple(name for name, _ in outputs)
    values = {name: states.gm[name] for name in names}
    merged, merge = merge_gm(names, initial_gm({}, outputs), values, states.gm_written, options.gm_granule_bytes)
    codes = states.error.code
    failed = codes != Verdict.OK
    first = jnp.argmax(failed)
    verdict = jnp.where(jnp.any(failed), codes[first], merge.code)
    block = jnp.where(jnp.any(failed), first, -1).astype(jnp.int32)
    return LaunchResult(
        outputs={name: merged[name] for name in names}, states=states, merge=merge, verdict=verdict, block=block
    )


_launch_jit = eqx.filter_jit(_launch)


def launch(
    kernel,
    inputs: dict,
    outputs: dict,
    *,
    block_dim: int,
    chip: str | Chip = "a2",
    params: dict | None = None,
    options: Options | None = None,
    costs: Costs | None = None,
    jit: bool = True,
    throw: bool = False,
    block_parallel: bool = False,
) -> LaunchResult:
    """Run ``kernel(k, **params)`` on ``block_dim`` AI Core blocks of ``chip`` (``kernel[None, block_dim](...)``).

    Arguments as for ``ascjax.run``; the kernel reads its block with ``pl.get_block_idx()``
    / ``k.block_idx`` and ``block_dim`` with ``pl.get_block_num()`` / ``k.block_num``. Returns a
    ``LaunchResult`` with the merged ``outputs``, per-block ``states``, ``verdict``,
    ``cycles`` and ``report()``. ``block_parallel``: run the blocks as one ``vmap`` instead of
    one after another (see the module docstring). See docs/multi-block.md.
    """
    if not isinstance(block_dim, (int, np.integer)) or isinstance(block_dim, bool) or block_dim < 1:
        raise ValueError(f"block_dim is the number of blocks to launch, a static int >= 1, got {block_dim!r}")
    chip = get_chip(chip)
    options = options or Options()
    costs = default_costs(chip) if costs is None else costs
    inputs = {name: jnp.asarray(x) for name, x in inputs.items()}
    spec = output_spec(outputs)
    run = _launch_jit if jit else _launch
    result = run(kernel, chip, options, costs, inputs, spec, dict(params or {}), int(block_dim), bool(block_parallel))
    return raise_if_failed(result, result.verdict) if throw else result
