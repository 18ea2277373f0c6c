"""``launch``: run a kernel on ``block_dim`` AI Core blocks (SPMD) and merge what they wrote to GM.

The kernel is traced and compiled once for every block, and each block reads its index with
``pl.get_block_idx()`` / ``k.block_idx`` (traced, so every block has the same record template and its own
operands). Each block runs on the two planes (``ascjax.runner._planes``): the control plane checks its
synchronisation, the data plane computes its GM. The blocks run one after another (a ``lax.scan``), so a
block's branches (a ``cond``, the section scheduler's choice of segment) stay branches; with
``block_parallel=True`` they are one ``jax.vmap``, which runs every branch of every block and
selects (worth it only for straight-line kernels on a wide device). Every block
starts from the same GM and sees only its own writes (inter-block sync is not modelled).
Each block's GM outputs are folded into the merge as it finishes (inside the same jit), so the
launch holds one copy of GM plus the blocks' write marks, not ``block_dim`` copies:

- an element one block wrote takes that block's value;
- an element several blocks wrote only by atomic adds takes the initial value plus every
  block's contribution (``pl.store(..., atomic=pl.AtomicType.AtomicAdd)``);
- an element several blocks stored plainly with the same bits takes that value;
- a GM granule (``Options.gm_granule_bytes``) that two blocks write, one of them with a
  plain store, is a RACE (the result depends on which write lands last), unless every writer
  stored the same elements of it, plainly, with the same bits.

The blocks share the chip's GM bandwidth: where at their own rates they ask for more than it has, their
control planes run again with their GM transfers priced at the share they get (``_bandwidth``).

The launch's verdict is that of the first block that failed (lowest index; its most severe finding), else the
merge's.
"""

from __future__ import annotations

import dataclasses
import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..core import EXCEPTIONS, Verdict, array_module, exact_jit, per_scenario
from ..core import _dtypes as dtypes
from ..core._chip import Chip, get_chip
from ..core._numerics import compiled_on_its_own
from ..core._options import Options
from ..engine import (
    GM_SPACE_PREFIX,
    ControlOptions,
    ControlResult,
    Costs,
    PrivateLoops,
    Record,
    default_costs,
    run_control,
    sync_latency,
)
from ..engine import _dataplane as dataplane
from ..engine._state import GM_ATOMIC, GM_PLAIN
from ..front._program import NeedsData
from ..front._tracing import gm_inputs, initial_gm, output_spec, record_kernel, record_on_host, record_traced
from ..report._report import Report
from ..report._run_warnings import run_warnings
from ._bandwidth import gm_contention, slow_gm
from ._check import CheckResult, verdict_codes
from ._planes import (
    BATCHED_CONTROL_COMPILE_S,
    CONTROL_CACHE,
    data_after_control,
    execute_data,
    resolve_control,
    scenario_key,
)
from ._run import raise_if_failed


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


def _granule_elements(tensor, granule_bytes: int) -> int:
    """Elements of ``tensor``'s dtype per GM granule."""
    return _per_granule(dtypes.bits(jnp.dtype(tensor.dtype).name), granule_bytes)


#: a bit of the merge's per-element kinds beside the write marks' GM_PLAIN / GM_ATOMIC: a later writer's bits differ
DIFFERS = 4


def _start(init):
    """The merge of one output before any block, per element: (first writer's value, sum of deltas, writers capped
    at 2, the OR of the writers' marks and ``DIFFERS``)."""
    return init, jnp.zeros_like(init), jnp.zeros(init.shape, jnp.uint8), jnp.zeros(init.shape, jnp.uint8)


def _same_bits(a, b):
    """Element-wise: do ``a`` and ``b`` hold the same bits (NaN equals NaN, -0.0 differs from 0.0)?"""
    bits = dtypes.bits(jnp.dtype(a.dtype).name)
    if jnp.issubdtype(a.dtype, jnp.floating) and bits in (8, 16, 32, 64):
        unsigned = jnp.dtype(f"uint{bits}")
        return jax.lax.bitcast_convert_type(a, unsigned) == jax.lax.bitcast_convert_type(b, unsigned)
    return a == b


def _add(acc, init, value, marks):
    """Fold one block's copy of an output (and its write marks) into the merge: one pass, element-wise."""
    single, delta, count, kinds = acc
    wrote = marks != 0
    single = jnp.where(wrote & (count == 0), value, single)
    differs = wrote & ~_same_bits(value, single)  # the first writer's value is its own
    kinds = kinds | marks | jnp.where(differs, jnp.uint8(DIFFERS), jnp.uint8(0))
    delta = delta + jnp.where(wrote, value - init, jnp.zeros_like(value))
    count = jnp.minimum(count + wrote.astype(jnp.uint8), jnp.uint8(2))
    return single, delta, count, kinds


def _granules(marks, per: int):
    """One block's write marks as granule rows (granules, per): padded, flat."""
    flat = marks.reshape(-1)
    return jnp.pad(flat, (0, (-flat.shape[0]) % per)).reshape(-1, per)


def _tally(per: int):
    """The smallest unsigned dtype that counts a granule's ``per`` elements."""
    return jnp.uint8 if per <= np.iinfo(np.uint8).max else jnp.uint16


def _granule_summary(marks, per: int):
    """Per GM granule: did one block write it at all, with a plain store, and how many of its elements?"""
    rows = _granules(marks, per)
    wrote = rows != 0
    return jnp.any(wrote, axis=1), jnp.any((rows & GM_PLAIN) != 0, axis=1), jnp.sum(wrote, axis=1, dtype=_tally(per))


def _merge_one(init, acc, any_w, any_p, n_w, marks, per: int):
    """Finish one output's merge: (merged tensor, race?, granule, element, block a, block b, plain a, plain b, overlap).

    ``any_w`` / ``any_p`` / ``n_w`` (blocks, granules) summarise the stacked ``marks``; those are read only
    for the two blocks of the first racy granule. Blocks that all store the same elements of a granule with the
    same bits, plainly, agree: the granule ends the same whichever lands last, so that is no race. (The same
    elements: each writer wrote as many of the granule's elements as all of them together.)
    """
    single, delta, count, kinds = acc
    added = (init + delta).astype(init.dtype)
    merged = jnp.where(count == 0, init, jnp.where((count >= 2) & ((kinds & GM_ATOMIC) != 0), added, single))
    n_blocks = any_w.shape[0]
    writers = jnp.sum(any_w, axis=0)
    union = jnp.sum(_granules(count, per) != 0, axis=1, dtype=_tally(per))
    same_elements = jnp.all(~any_w | (n_w == union[None, :]), axis=0)
    clean = ~jnp.any((_granules(kinds, per) & (GM_ATOMIC | DIFFERS)) != 0, axis=1)
    racy = (writers >= 2) & jnp.any(any_p, axis=0) & ~(same_elements & clean)
    g = jnp.argmax(racy)
    blocks = jnp.arange(n_blocks)
    a = jnp.argmax(any_p[:, g])  # the lowest block that stores plainly
    b = jnp.argmax(any_w[:, g] & (blocks != a))  # the lowest other writer
    lo, hi = jnp.minimum(a, b), jnp.maximum(a, b)
    wrote_lo, wrote_hi = (_granules(marks[i], per)[g] != 0 for i in (lo, hi))
    both = wrote_lo & wrote_hi
    overlap = jnp.any(both)
    element = g * per + jnp.where(overlap, jnp.argmax(both), jnp.argmax(wrote_lo))
    return merged, jnp.any(racy), (g, element, lo, hi, any_p[lo, g], any_p[hi, g], overlap)


def _merge_record(names: tuple, initial: dict, accs: dict, summaries: dict, marks: dict, granule_bytes: int):
    """The merged outputs and the merge's finding; a race names the first tensor in ``names`` order that has one."""
    merged = {}
    found = jnp.asarray(False)
    record = [jnp.zeros((), jnp.int32)] * 8  # tensor, granule, element, block a, block b, plain a, plain b, overlap
    for i, name in enumerate(names):
        per = _granule_elements(initial[name], granule_bytes)
        merged[name], racy, where = _merge_one(initial[name], accs[name], *summaries[name], marks[name], per)
        take = racy & ~found
        record = [jnp.where(take, jnp.asarray(new, jnp.int32), old) for new, old in zip((i, *where), record)]
        found = found | racy
    code = jnp.where(found, int(Verdict.RACE), int(Verdict.OK)).astype(jnp.int32)
    tensor, granule, element, block_a, block_b, plain_a, plain_b, overlap = record
    return merged, GmMerge(code, tensor, granule, element, block_a, block_b, plain_a, plain_b, overlap)


def _summaries(names: tuple, initial: dict, marks: dict, granule_bytes: int) -> dict:
    """``_granule_summary`` of every output of one block."""
    return {name: _granule_summary(marks[name], _granule_elements(initial[name], granule_bytes)) for name in names}


@functools.partial(jax.jit, static_argnames=("names", "granule_bytes"))  # one compiled step, even in an eager launch
def merge_gm(names: tuple, initial: dict, values: dict, marks: dict, granule_bytes: int) -> tuple[dict, GmMerge]:
    """Merge the blocks' GM outputs ``names`` (``values`` and write ``marks`` have a leading block axis).

    The blocks are folded in one at a time (a ``lax.scan``), so the merge reads each block's
    copy once, element-wise. A race names the first tensor in ``names`` order that has one
    (``GmMerge.tensor`` indexes ``names``).
    """

    def fold(accs, block):
        value, mark = block
        return {name: _add(accs[name], initial[name], value[name], mark[name]) for name in names}, None

    start = {name: _start(initial[name]) for name in names}
    accs, _ = jax.lax.scan(fold, start, ({n: values[n] for n in names}, {n: marks[n] for n in names}))
    summaries = jax.vmap(lambda m: _summaries(names, initial, m, granule_bytes))(marks)
    return _merge_record(names, initial, accs, summaries, marks, granule_bytes)


def block_cycles(end):
    """Cycles of each block on its own from its control plane's ``end`` (instances on the last axis)."""
    xp = array_module(end)
    return xp.maximum(xp.max(xp.asarray(end), axis=-1), 0)


def launch_cycles(block_cycles, ai_cores: int):
    """Cycles of a launch: block b runs on AI Core b % ai_cores, a core's blocks back to back (waves).

    ``block_cycles`` has the blocks on its last axis; the result is the busiest core's total.
    """
    xp = array_module(block_cycles)
    cycles = xp.asarray(block_cycles)
    n = cycles.shape[-1]
    cores = min(n, ai_cores)
    waves = -(-n // cores)
    cycles = xp.pad(cycles, [(0, 0)] * (cycles.ndim - 1) + [(0, waves * cores - n)])
    return xp.max(xp.sum(cycles.reshape(*cycles.shape[:-1], waves, cores), axis=-2), axis=-1)


class LaunchResult(eqx.Module):
    """Merged outputs, each block's record and control-plane result (leading block axis), the merge and the verdict.

    ``block`` is the block the verdict comes from (-1: the merge, or OK). Under ``jax.vmap`` every
    field gains a leading scenario axis (the blocks' then have (scenario, block)). The blocks' GM
    copies are not kept: the merge consumed them (keeping them would cost ``block_dim`` times GM).
    """

    outputs: dict[str, jax.Array]
    records: Record  # the template (one for every block) and each block's operands
    controls: ControlResult
    merge: GmMerge
    verdict: jax.Array
    block: jax.Array
    costs: Costs
    # how many times the chip's GM bandwidth the blocks asked for at their own rates (1: within it); over 1, their
    # GM transfers were priced that many times longer (``_bandwidth``)
    gm_contention: jax.Array
    chip: Chip = eqx.field(static=True)
    output_spec: tuple = eqx.field(static=True, default=())  # ``(name, (shape, dtype))`` per GM output
    granule_bytes: int = eqx.field(static=True, default=32)

    @property
    def ok(self) -> bool:
        return bool(np.all(np.asarray(self.verdict) == Verdict.OK))

    @property
    def device_outputs(self) -> bool:
        """Whether the outputs are the device's in every block (see ``ascjax.Result.device_outputs``)."""
        return bool(np.all(np.asarray(self.controls.reordered) < 0))

    @property
    def block_dim(self) -> int:
        return int(np.shape(self.controls.n_findings)[-1])

    @property
    def block_cycles(self) -> jax.Array:
        """Cycles of each block on its own (when its last instruction completed)."""
        return block_cycles(self.controls.end)

    @property
    def gm_bytes(self) -> jax.Array:
        """Bytes the launch's GM requests moved (every block's copies to and from GM that ran)."""
        xp = array_module(self.records.operands["gm_bytes"], self.controls.start)
        gm_bytes = xp.asarray(self.records.operands["gm_bytes"])[..., : self.controls.start.shape[-1]]
        return xp.sum(xp.where(xp.asarray(self.controls.start) >= 0, gm_bytes, 0), axis=(-2, -1))

    @property
    def cycles(self) -> jax.Array:
        """Cycles of the launch: blocks beyond ``chip.ai_cores`` run in waves (see ``launch_cycles``)."""
        return launch_cycles(self.block_cycles, self.chip.ai_cores)

    def checked(self, block: int, index: int | None = None) -> CheckResult:
        """What the control plane found in ``block`` (``index``: one scenario of a vmapped batch)."""
        n = self.block_dim
        if not 0 <= block < n:
            raise ValueError(f"block {block} is outside the launch's blocks [0, {n})")
        batched = np.ndim(self.controls.n_findings) > 1
        if batched and index is None:
            raise ValueError("this launch holds a batch of scenarios: pass index= to pick one")
        at = (index, block) if batched else (block,)
        pick = lambda x: np.asarray(x)[at]  # noqa: E731  (every leaf has the block axis, after the scenario one)
        record = Record(self.records.template, jax.tree_util.tree_map(pick, self.records.operands))
        return CheckResult.of(record, jax.tree_util.tree_map(pick, self.controls), self.chip, self.costs)

    def report(self, block: int | None = None, index: int | None = None) -> Report:
        """Explain the launch, or one ``block`` of it (``index``: one scenario of a vmapped batch)."""
        codes = np.asarray(self.verdict if index is None else np.asarray(self.verdict)[index])
        if np.ndim(codes) != 0:
            raise ValueError("this launch holds a batch of scenarios: pass index= to pick one")
        if block is not None:
            return _block_report(self.checked(block, index), block)
        per_block = np.asarray(verdict_codes(self.controls))
        per_block = per_block if index is None else per_block[index]
        bad = np.flatnonzero(per_block != Verdict.OK)
        if bad.size:
            return _block_report(self.checked(int(bad[0]), index), int(bad[0]))
        blocks = [self.checked(b, index) for b in range(self.block_dim)]
        gm = [float(_one(x, index)) for x in (self.gm_bytes, self.gm_contention, self.costs.gm_bytes_per_cycle)]
        timing = _launch_timing(blocks, self.chip, *gm)
        warnings = _warnings(blocks)
        merge = jax.tree_util.tree_map(lambda x: np.asarray(x) if index is None else np.asarray(x)[index], self.merge)
        chip, n = self.chip.name, self.block_dim
        if int(merge.code) == Verdict.OK:
            return Report(Verdict.OK, f"OK (chip {chip}, {n} blocks)", None, None, warnings, chip, timing)
        message = _merge_race(merge, self.output_spec, self.granule_bytes, blocks)
        return Report(Verdict.RACE, message, None, None, warnings, chip, timing)

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


def _block_report(found: CheckResult, b: int) -> Report:
    rep = found.report()
    return dataclasses.replace(rep, message=f"block {b}: {rep.message}")


def _warnings(blocks: list) -> list[str]:
    """Every block's warnings, each once, naming the blocks that raised it."""
    seen: dict[str, list[int]] = {}
    for b, found in enumerate(blocks):
        for text in run_warnings(found.record, found.result):
            seen.setdefault(text, []).append(b)
    return [f"block{'s' if len(bs) > 1 else ''} {', '.join(map(str, bs))}: {text}" for text, bs in seen.items()]


def _one(x, index: int | None):
    """One scenario's value of ``x`` (``index``: of a vmapped batch; a value without a batch axis is everyone's)."""
    x = np.asarray(x)
    return x[index] if index is not None and x.ndim > 0 else x


def _launch_timing(blocks: list, chip: Chip, gm_bytes: float, gm_contention: float, gm_bytes_per_cycle: float) -> dict:
    """The slowest block's summary, with the launch's cycles (waves over ``chip.ai_cores``), per-block cycles, and
    its GM traffic: bytes, the share of the chip's bandwidth they used, the contention they were priced at."""
    runs = [found.timeline() for found in blocks]
    per_block = np.asarray([run.cycles for run in runs], np.int64)
    n, cores = len(runs), chip.ai_cores
    total = int(launch_cycles(per_block, cores))
    slowest = int(np.argmax(per_block))
    info = runs[slowest].summary()
    used = min(n, cores)
    work = sum(run.cube_work_cycles for run in runs)
    info.update(
        cycles=total,
        gm_bytes=int(gm_bytes),
        gm_bandwidth_fraction=gm_bytes / (total * gm_bytes_per_cycle) if total > 0 else 0.0,
        gm_contention=gm_contention,
        microseconds=total / chip.clock_mhz,
        cube_peak_fraction=work / (total * used) if total > 0 else 0.0,
        block_cycles=per_block.tolist(),
        slowest_block=slowest,
        ai_cores=cores,
        waves=-(-n // used),
    )
    return info


def _writer(found: CheckResult, name: str, lo: int, hi: int) -> str:
    """The kernel line of the first instruction of a block that ran and may write bytes [lo, hi) of GM ``name``."""
    t = found.record.template
    space = next((i for i, sp in enumerate(t.spaces) if sp.name == GM_SPACE_PREFIX + name), None)
    start = np.asarray(found.result.start)
    for inst in np.argsort(np.where(start >= 0, start, np.iinfo(np.int32).max), kind="stable"):
        if start[inst] < 0:
            break
        for slot in np.flatnonzero(t.write_valid[inst]):
            first, end = (int(x) for x in t.write_foot[inst, slot])
            atoms = range(first, end)
            if any(t.atom_space[a] == space and t.atom_bytes[a, 0] < hi and lo < t.atom_bytes[a, 1] for a in atoms):
                return t.entries[int(t.entry[inst])][1]
    return "an instruction of the block"


def _merge_race(merge: GmMerge, outputs: tuple, granule_bytes: int, blocks: list) -> str:
    name, (shape, dtype) = outputs[int(merge.tensor)]
    size = int(np.prod(shape))
    bits = dtypes.bits(dtype)
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
        f"  block {a}: {_writer(blocks[a], name, start, end)}; block {b}: {_writer(blocks[b], name, start, end)}.",
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


def _fold_blocks(names: tuple, initial: dict, granule_bytes: int, run_block, xs):
    """Run each block (``run_block(x) -> (what to keep of it, its data-plane state)``, ``xs`` with a leading block
    axis) one after another and fold its GM into the merge as it finishes: no block keeps a copy of GM. Returns the
    merged outputs, the merge's finding and what was kept of every block."""

    def step(accs, x):
        kept, state = run_block(x)
        accs = {n: _add(accs[n], initial[n], state.gm[n], state.gm_written[n]) for n in names}
        return accs, (kept, state.gm_written, _summaries(names, initial, state.gm_written, granule_bytes))

    start = {name: _start(initial[name]) for name in names}
    accs, (kept, marks, summaries) = jax.lax.scan(step, start, xs)
    merged, merge = _merge_record(names, initial, accs, summaries, marks, granule_bytes)
    return merged, merge, kept


def _launch_verdict(codes, merge: GmMerge):
    """The launch's verdict (the first failed block's, else the merge's) and the block it comes from (-1: none)."""
    codes = jnp.asarray(codes)
    failed = codes != Verdict.OK
    verdict = jnp.where(jnp.any(failed), codes[jnp.argmax(failed)], merge.code)
    return verdict, jnp.where(jnp.any(failed), jnp.argmax(failed), -1).astype(jnp.int32)


def _launch(kernel, chip: Chip, options: Options, control, costs, inputs: dict, outputs: tuple, params: dict,
            block_dim: int, block_parallel: bool = False):  # fmt: skip
    """Every block on both planes, records and control planes included, as one program (parameters or costs
    traced): the blocks' records, their control planes (``_control_passes``, the GM bandwidth shared), then their
    data planes in the order the first pass ran them, folded into the merge."""
    blocks = jnp.arange(block_dim, dtype=jnp.int32)
    batch = (lambda f, xs: jax.vmap(f)(xs)) if block_parallel else jax.lax.map

    def block(b):
        return {"block_idx": b, "block_num": block_dim}

    def record_block(b):
        return record_kernel(kernel, inputs, dict(outputs), chip=chip, params=params, costs=costs, block=block(b))

    records = batch(record_block, blocks)
    first, operands, controls, factor = _control_passes(records, control, costs, chip, batch)
    return _launch_after_control(kernel, chip, options, costs, inputs, outputs, params, block_dim, block_parallel,
                                 records, first, Record(records.template, operands), controls, factor)  # fmt: skip


def _launch_after_control(kernel, chip: Chip, options: Options, costs, inputs: dict, outputs: tuple, params: dict,
                          block_dim: int, block_parallel: bool, records: Record, first, priced: Record, controls,
                          factor):  # fmt: skip
    """A launch from its blocks' control planes (traced: each block's segments chosen as it runs): every block's
    data plane in the order ``first`` (the first pass) ran it, folded into the merge, and the launch's result, its
    ``priced`` records and ``controls`` those of the last pass (``_control_passes``)."""
    names = tuple(name for name, _ in outputs)
    initial = initial_gm({n: x for n, x in inputs.items() if n in names}, outputs)
    granule_bytes = options.gm_granule_bytes

    def data_block(x):
        b, ops, found = x
        record = Record(records.template, ops)
        block = {"block_idx": b, "block_num": block_dim}
        return data_after_control(kernel, chip, options, inputs, outputs, params, record, found, block)[0]

    xs = (jnp.arange(block_dim, dtype=jnp.int32), records.operands, first)
    if block_parallel:
        full = jax.vmap(data_block)(xs)
        merged, merge = merge_gm(names, initial, {n: full.gm[n] for n in names}, full.gm_written, granule_bytes)
    else:
        merged, merge, _ = _fold_blocks(names, initial, granule_bytes, lambda x: (None, data_block(x)), xs)
    verdict, failed = _launch_verdict(verdict_codes(first), merge)
    return LaunchResult(
        outputs={name: merged[name] for name in names}, records=priced, controls=controls, merge=merge,
        verdict=verdict, block=failed, costs=costs, gm_contention=factor, chip=chip, output_spec=outputs,
        granule_bytes=granule_bytes,
    )  # fmt: skip


@exact_jit
def _launch_after_control_jit(kernel, chip: Chip, options: Options, costs, inputs: dict, outputs: tuple,
                              params: dict, block_dim: int, records: Record, first, priced: Record, controls,
                              factor):  # fmt: skip
    return _launch_after_control(kernel, chip, options, costs, inputs, outputs, params, block_dim, False, records,
                                 first, priced, controls, factor)  # fmt: skip


def _control_passes(records: Record, control: ControlOptions, costs: Costs, chip: Chip, batch):
    """The blocks' control planes (``batch(f, xs)``: ``jax.lax.map`` or a ``jax.vmap`` over the blocks) at their own GM rates
    and, where they asked for more of the chip's GM bandwidth than it has, once more at the share they get (as
    ``_share_gm``). The passes are one ``while_loop`` whose body is the control plane, so a traced launch compiles
    it once. Returns the first pass's results, the last pass's operands and results, and the contention factor."""
    latency = sync_latency(costs)
    operands = records.operands

    def run(cycles):
        ops = {**operands, "cycles": cycles}
        return batch(lambda o: run_control(Record(records.template, o), control, latency), ops)

    shapes = jax.eval_shape(run, operands["cycles"])
    one = jnp.ones((), jnp.float32)
    if shapes.start.shape[-1] == 0:  # no timeline kept: no start to measure from
        found = run(operands["cycles"])
        return found, operands, found, one

    def contention(found):
        return gm_contention(found.start, found.leave, operands["gm_bytes"], block_cycles(found.end), chip.ai_cores,
                             costs.gm_bytes_per_cycle)  # fmt: skip

    def slowed(factor):
        return slow_gm(operands, factor)["cycles"]

    def again(carry):  # pass 0, then pass 1 where pass 0 asked for more than the chip's bandwidth
        n_pass, factor, _, _ = carry
        return (n_pass == 0) | ((n_pass == 1) & (factor > 1))

    def one_pass(carry):
        n_pass, factor, first, _ = carry
        found = run(jnp.where(n_pass == 0, operands["cycles"], slowed(factor)))
        pick = lambda a, b: jnp.where(n_pass == 0, a, b)  # noqa: E731
        return n_pass + 1, pick(contention(found), factor), jax.tree.map(pick, found, first), found

    empty = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)
    n_pass, factor, first, last = jax.lax.while_loop(again, one_pass, (jnp.int32(0), one, empty, empty))
    cycles = jnp.where(n_pass > 1, slowed(factor), operands["cycles"])
    return first, {**operands, "cycles": cycles}, last, factor


def _launch_data(kernel, chip: Chip, options: Options, inputs: dict, outputs: tuple, params: dict, block_dim: int,
                 orders, racy, index, no_faults: bool, codes, ran, private=None):  # fmt: skip
    """Every block's data plane in the order its control plane ran (``orders``, ``racy``: per block, None with
    ``poison_races`` off), folded into the merge; the launch's verdict from the blocks' ``codes`` and the merge.
    ``ran``: per block, the instances its control plane started (None: all, in every block). ``index`` finds an
    issue's instance in both. ``private``: the loops private in every block (``PrivateLoops.common``)."""
    names = tuple(name for name, _ in outputs)
    initial = initial_gm({n: x for n, x in inputs.items() if n in names}, outputs)

    def run_block(x):
        b, order, racy_b, ran_b = x
        poison = None if racy is None else dataplane.Poison(index, racy_b)
        held = None if ran is None else dataplane.Ran(index, ran=ran_b)
        block = {"block_idx": b, "block_num": block_dim}
        return None, execute_data(
            kernel,
            chip,
            options,
            inputs,
            outputs,
            params,
            order,
            poison,
            block,
            no_faults=no_faults,
            ran=held,
            private=private,
        )

    blocks = jnp.arange(block_dim, dtype=jnp.int32)
    xs = (blocks, orders, blocks if racy is None else racy, blocks if ran is None else ran)
    merged, merge, _ = _fold_blocks(names, initial, options.gm_granule_bytes, run_block, xs)
    return {name: merged[name] for name in names}, merge, *_launch_verdict(codes, merge)


_launch_data_jit = exact_jit(_launch_data)


def _launch_cached(kernel, chip: Chip, options: Options, control: ControlOptions, costs: Costs, inputs: dict,
                   outputs: tuple, params: dict, block_dim: int):  # fmt: skip
    """A launch whose parameters and costs are concrete: the blocks' records made at once on the host, each block's
    control plane run (or reused) as ``run`` runs one (``ControlCache``), and one program for the blocks' data
    planes; under a transformation of the inputs alone, that program is part of the caller's. A kernel that reads
    GM contents while it is recorded, with its inputs traced, is launched as one program (``_launch``)."""
    traced = any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(inputs))
    shapes = {name: np.zeros(x.shape, x.dtype) for name, x in inputs.items()} if traced else inputs
    records, runs = _controls_on_host(kernel, chip, control, costs, shapes, outputs, params, block_dim, traced)
    controls = jax.tree.map(_stack, *[run[0] for run in runs])
    schedules = [run[1] for run in runs]
    if len({order.ranks for order in schedules}) > 1:  # each block's segments chosen as it runs
        schedules = [dataclasses.replace(order, ranks=None) for order in schedules]
    orders = jax.tree.map(_stack, *schedules)
    racy = controls.racy if options.poison_races else None
    ran = None if np.all(controls.ran) else controls.ran  # a deadlocked block: GM as it left it
    data = _launch_data if traced else _launch_data_jit
    codes = np.asarray(verdict_codes(controls))
    merged, merge, verdict, block = data(
        kernel,
        chip,
        options.for_data_plane(),
        inputs,
        outputs,
        params,
        block_dim,
        orders,
        racy,
        runs[0][2],
        all(run[4] for run in runs),
        codes,
        ran,
        PrivateLoops.common([run[5] for run in runs]),
    )
    return LaunchResult(
        outputs=merged, records=records, controls=controls, merge=merge, verdict=verdict, block=block, costs=costs,
        gm_contention=np.ones((), np.float32), chip=chip, output_spec=outputs, granule_bytes=options.gm_granule_bytes,
    )  # fmt: skip


def _controls_on_host(kernel, chip: Chip, control: ControlOptions, costs: Costs, inputs: dict, outputs: tuple,
                      params: dict, block_dim: int, shapes_only: bool):  # fmt: skip
    """The blocks' records, made at once on the host, and each block's ``CONTROL_CACHE`` entry: its control plane run
    (or reused) as ``run`` runs one."""
    with jax.core.eval_context():  # on the host's values, whatever trace encloses the call
        records, latency = record_on_host(kernel, chip, costs, inputs, outputs, params, shapes_only, block_dim)
        runs = [  # the blocks share one template: a program of its own is worth optimising for several
            CONTROL_CACHE.get(
                Record(records.template, {k: v[b] for k, v in records.operands.items()}), control, latency,
                quick=block_dim == 1, again=False,
            )
            for b in range(block_dim)
        ]  # fmt: skip
    return records, runs


def _stack(*xs):
    """The blocks' arrays of one field, stacked on the host (each block's control plane ran concretely, its sync
    hardware in its record's own sizes)."""
    return np.stack([np.asarray(x) for x in xs])


def _share_gm(result: LaunchResult, control: ControlOptions, quick: bool) -> LaunchResult:
    """A launch's result whose control planes ran on the host (``_launch_cached``), with its blocks' control planes
    run again at the GM bandwidth the launch shares, where at their own rates they asked for more than the chip has
    (``_bandwidth.gm_contention``). Each block runs as ``run_control`` ran it (``quick`` as there), so the rerun
    reuses its compiled program. A launch traced whole shares the bandwidth inside (``_control_passes``)."""
    records, controls, factor = _rerun_contended(result.records, result.controls, result.costs, result.chip, control,
                                                 quick)  # fmt: skip
    return eqx.tree_at(lambda r: (r.records, r.controls, r.gm_contention), result, (records, controls, factor))


def _rerun_contended(records: Record, controls: ControlResult, costs: Costs, chip: Chip, control: ControlOptions,
                     quick: bool):  # fmt: skip
    """``_share_gm`` of concrete blocks: their records (GM transfers priced at the share), control-plane results
    and the contention factor."""
    one = np.ones((), np.float32)
    if controls.start.shape[-1] == 0:  # no timeline kept: no start to measure from
        return records, controls, one
    factor = gm_contention(controls.start, controls.leave, records.operands["gm_bytes"], block_cycles(controls.end),
                           chip.ai_cores, costs.gm_bytes_per_cycle)  # fmt: skip
    factor = np.asarray(factor, np.float32)
    if float(factor) <= 1:
        return records, controls, factor
    operands = slow_gm(records.operands, factor)
    latency = sync_latency(costs)
    n_blocks = int(np.shape(controls.n_findings)[-1])
    with jax.core.eval_context():
        runs = [
            run_control(Record(records.template, {k: v[b] for k, v in operands.items()}), control, latency, quick=quick)
            for b in range(n_blocks)
        ]
    return Record(records.template, operands), jax.tree.map(_stack, *runs), factor


_launch_jit = exact_jit(_launch)


def _launch_per_scenario(kernel, chip: Chip, options: Options, control: ControlOptions, costs: Costs, inputs: dict,
                         outputs: tuple, params: dict, block_dim: int):  # fmt: skip
    """``_launch_jit`` for a launch whose parameters or costs a ``vmap`` alone traces (as ``run``'s
    ``planes_per_scenario``): each distinct scenario's blocks recorded on the host and their control planes run as a
    concrete launch runs them (``_controls_on_host``, ``_rerun_contended``), one by one (``core.per_scenario``); the
    blocks' data planes and the merge compiled batched, each block's segments chosen as it runs. Traced whole, the
    launch's batched program held every block's recording and control plane (12-15 s of compiles in the test suite
    on a 2-core x86 VM). A kernel that reads GM contents while it is recorded is traced whole."""
    shapes = {name: np.zeros(x.shape, x.dtype) for name, x in inputs.items()}
    dynamic, static = eqx.partition((costs, params), eqx.is_array)
    templates = []  # the records' template, one for every scenario (the recording's trace is shared)

    def traced(dynamic):  # a scenario's records and control planes, traced: their shapes, and a batched program's
        costs, params = eqx.combine(dynamic, static)
        records, _ = record_traced(kernel, chip, costs, shapes, outputs, params, shapes_only=True, block_dim=block_dim)
        templates.append(records.template)
        first, priced, last, factor = _control_passes(records, control, costs, chip, jax.lax.map)
        return records.operands, first, priced["cycles"], last, factor

    def on_host(dynamic):  # the rerun at the shared bandwidth changes the records' cycles alone
        costs, params = eqx.combine(dynamic, static)
        records, runs = _controls_on_host(kernel, chip, control, costs, shapes, outputs, params, block_dim, True)
        first = jax.tree.map(_stack, *[run[0] for run in runs])
        priced, last, factor = _rerun_contended(records, first, costs, chip, control, quick=block_dim == 1)
        return records.operands, first, priced.operands["cycles"], last, factor

    key = scenario_key(("launch", kernel, chip, outputs, control, block_dim), static, shapes)
    try:
        operands, first, cycles, last, factor = per_scenario(traced, on_host, key, BATCHED_CONTROL_COMPILE_S)(dynamic)
    except NeedsData:
        return _launch_jit(kernel, chip, options, control, costs, inputs, outputs, params, block_dim, False)
    records, priced = Record(templates[0], operands), Record(templates[0], {**operands, "cycles": cycles})
    return _launch_after_control_jit(kernel, chip, options, costs, inputs, outputs, params, block_dim, records, first,
                                     priced, last, factor)  # fmt: skip


def launch(
    kernel,
    inputs: dict,
    outputs: dict,
    *,
    block_dim: int,
    chip: str | Chip = "a2",
    params: dict | None = None,
    options: Options | None = None,
    control: ControlOptions | None = None,
    costs: Costs | None = None,
    jit: bool = True,
    throw: bool = False,
    block_parallel: bool = False,
) -> LaunchResult:
    """Run ``kernel(k, **params)`` on ``block_dim`` AI Core blocks of ``chip`` (``kernel[None, block_dim](...)``).

    Arguments as for ``ascjax.run``; the kernel reads its block with ``pl.get_block_idx()``
    / ``k.block_idx`` and ``block_dim`` with ``pl.get_block_num()`` / ``k.block_num``. Returns a
    ``LaunchResult`` with the merged ``outputs``, per-block ``records`` and ``controls``, ``verdict``,
    ``cycles`` and ``report()``. ``block_parallel``: run the blocks as one ``vmap`` instead of
    one after another (see the module docstring). See docs/multi-block.md.
    """
    if not isinstance(block_dim, (int, np.integer)) or isinstance(block_dim, bool) or block_dim < 1:
        raise ValueError(f"block_dim is the number of blocks to launch, a static int >= 1, got {block_dim!r}")
    chip = get_chip(chip)
    options = options or Options()
    control = resolve_control(chip, options, control)
    costs = default_costs(chip) if costs is None else costs
    inputs = gm_inputs(inputs)
    spec = output_spec(outputs)
    args = (kernel, chip, options, control, costs, inputs, spec, dict(params or {}), int(block_dim))
    concrete = not any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves((params, costs)))
    result = None
    if concrete and jit and not block_parallel:
        try:
            result = _share_gm(_launch_cached(*args), control, quick=block_dim == 1)
        except NeedsData:  # it reads GM contents while recorded, and they are traced
            result = None
    elif jit and not block_parallel and compiled_on_its_own():  # an eager vmap of the parameters or costs
        result = _launch_per_scenario(*args)
    if result is None:
        result = (_launch_jit if jit else _launch)(*args, bool(block_parallel))
    return raise_if_failed(result, result.verdict) if throw else result
