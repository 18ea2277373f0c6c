"""The K-loop matmul (1024^3 f16, tiles 128) in ascjax against jnp.dot and Pallas, in one process.

python benchmarks/bench_matmul.py [--size 1024] [--json]

Rows: ``jnp.dot`` (f32 accumulation); the same 128-tiling as two nested ``lax.scan``s of
``jnp.dot`` (the floor for anything that runs the K-loop tile by tile); the same tiling with the data plane's
relayouts, its output tiles as a ``vmap`` over row tiles of a ``vmap`` over column tiles (each K step's products
then one wide product: what a data plane running independent iterations as one factored ``vmap`` would compile, its
bits checked against the same relayouts tile by tile); ascjax ``kernels/matmul.py`` run on the two
planes (the control plane over the record, with every check and the timing, then the data plane, whose output-tile
loops run as one factored ``vmap``: ``Options.parallel_loops``), with the race and uninitialised-read checks off
(their cost), with ``Options(parallel_loops=False)`` (the output tiles one after another; its bits checked against the
default's), with ``Options(lower_loops=True)`` (the K chain's products as one batched matmul too), ``ascjax.run``
called again on the same record (the control plane's
findings reused: it depends on the record's operands, not on the data), and the data plane alone; the same kernel
launched on one block per output tile (what a launch and its GM merge cost), with its blocks' control planes run on
the host while it is traced (the default) and in the program (``launch(jit=False)``); the same tiling as a Pallas
kernel (grid M/128 x N/128 x K/128, the output block resident across K) run with
``interpret=True``, and in Pallas' TPU interpret mode with and without ``detect_races=True``
(the closest peer: it too checks a kernel's synchronisation on a CPU).
"""

import functools
import pathlib
import sys

import jax
import jax.numpy as jnp
import numpy as np
from _timing import claim, interleaved_seconds, main
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import ascjax as aj
from ascjax.core import Format, layout
from ascjax.engine import _dataplane as dataplane
from ascjax.engine import private_loops, run_control
from ascjax.front._tracing import output_spec, record_kernel
from ascjax.runner._planes import execute_data, faults_free

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "kernels"))
from matmul import matmul_case  # noqa: E402

TILE = 128


def pallas_matmul(a, b, *, interpret):
    """C = A B in f32 with 128 x 128 x 128 blocks: the same tiling as the ascjax kernel."""
    m, k = a.shape
    n = b.shape[1]

    def kernel(a_ref, b_ref, c_ref):
        @pl.when(pl.program_id(2) == 0)
        def _():
            c_ref[...] = jnp.zeros_like(c_ref)

        c_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)

    return pl.pallas_call(
        kernel,
        grid=(m // TILE, n // TILE, k // TILE),
        in_specs=[
            pl.BlockSpec((TILE, TILE), lambda i, j, kk: (i, kk)),
            pl.BlockSpec((TILE, TILE), lambda i, j, kk: (kk, j)),
        ],
        out_specs=pl.BlockSpec((TILE, TILE), lambda i, j, kk: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
        interpret=interpret,
    )(a, b)


def tiled_scan_matmul(a, b):
    """The same 128-tiling as nested ``lax.scan``s of ``jnp.dot`` with nothing else: the floor of
    any emulator that runs a K-loop tile by tile."""
    m, k = a.shape
    n = b.shape[1]
    n_tiles, k_steps = n // TILE, k // TILE

    def output_tile(c, t):
        mi, ni = t // n_tiles, t % n_tiles

        def k_step(acc, kk):
            at = jax.lax.dynamic_slice(a, (mi * TILE, kk * TILE), (TILE, TILE))
            bt = jax.lax.dynamic_slice(b, (kk * TILE, ni * TILE), (TILE, TILE))
            return acc + jnp.dot(at, bt, preferred_element_type=jnp.float32), None

        acc, _ = jax.lax.scan(k_step, jnp.zeros((TILE, TILE), jnp.float32), jnp.arange(k_steps))
        return jax.lax.dynamic_update_slice(c, acc, (mi * TILE, ni * TILE)), None

    return jax.lax.scan(output_tile, jnp.zeros((m, n), jnp.float32), jnp.arange((m // TILE) * n_tiles))[0]


def _k_step_as_ascjax(acc, a, b, mi, ni, kk):
    """One K step of one output tile with the data plane's relayouts: GM -> L1 (Nz), L1 -> L0A (Zz) / L0B (Zn), the
    product of the ND operands on its own (as ``mmad``), accumulated in L0C's Nz layout (``c_matrix_init_val`` on the
    first step)."""
    at = jax.lax.dynamic_slice(a, (mi * TILE, kk * TILE), (TILE, TILE))
    bt = jax.lax.dynamic_slice(b, (kk * TILE, ni * TILE), (TILE, TILE))
    left = layout.to_fractal(layout.from_fractal(layout.to_fractal(at, Format.NZ, 16), Format.NZ), Format.ZZ, 16)
    right = layout.to_fractal(layout.from_fractal(layout.to_fractal(bt, Format.NZ, 16), Format.NZ), Format.ZN, 16)
    a_nd = layout.from_fractal(left, Format.ZZ).astype(jnp.float32)
    b_nd = layout.from_fractal(right, Format.ZN).astype(jnp.float32)
    a_nd, b_nd = jax.lax.optimization_barrier((a_nd, b_nd))
    prod = jax.lax.dot(a_nd, b_nd, precision=jax.lax.Precision.HIGHEST, preferred_element_type=jnp.float32)
    prod = layout.to_fractal(jax.lax.optimization_barrier(prod), Format.NZ, 16)
    return jnp.where(kk == 0, 0.0, acc) + prod


def factored_vmap_matmul(a, b):
    """The same tiling with the data plane's relayouts, its output tiles as a ``vmap`` over row tiles of a ``vmap``
    over column tiles (the K loop a scan inside): JAX batches A by row tile and B by column tile only, so each K step's
    products come out as one wide product. What a data plane that ran a loop's independent iterations as one
    factored ``vmap`` would compile; the benchmark checks its bits against the tiled scan of the same relayouts."""
    m, k = a.shape
    n = b.shape[1]
    zero = jnp.zeros((TILE // 16, TILE // 16, 16, 16), jnp.float32)

    def tile(mi, ni):
        def k_step(acc, kk):
            return _k_step_as_ascjax(acc, a, b, mi, ni, kk), None

        return layout.from_fractal(jax.lax.scan(k_step, zero, jnp.arange(k // TILE))[0], Format.NZ)

    rows = jax.vmap(lambda mi: jax.vmap(lambda ni: tile(mi, ni))(jnp.arange(n // TILE)))(jnp.arange(m // TILE))
    return rows.transpose(0, 2, 1, 3).reshape(m, n)


def tiled_relayout_matmul(a, b):
    """``factored_vmap_matmul``'s tiles one after another (two nested scans): its bits' reference."""
    m, k = a.shape
    n = b.shape[1]
    n_tiles = n // TILE
    zero = jnp.zeros((TILE // 16, TILE // 16, 16, 16), jnp.float32)

    def output_tile(c, t):
        mi, ni = t // n_tiles, t % n_tiles
        acc = jax.lax.scan(lambda acc, kk: (_k_step_as_ascjax(acc, a, b, mi, ni, kk), None), zero,
                           jnp.arange(k // TILE))[0]  # fmt: skip
        return jax.lax.dynamic_update_slice(c, layout.from_fractal(acc, Format.NZ), (mi * TILE, ni * TILE)), None

    return jax.lax.scan(output_tile, jnp.zeros((m, n), jnp.float32), jnp.arange((m // TILE) * n_tiles))[0]


def ascjax_matmul(case, sanitize, lower_loops=False, parallel_loops=True):
    options = aj.Options(sanitize=sanitize, lower_loops=lower_loops, parallel_loops=parallel_loops)

    @jax.jit
    def go(a, b):
        r = aj.run(case.kernel, {"a": a, "b": b}, case.outputs, params=case.params, options=options)
        return r.outputs["c"], r.verdict, jnp.max(r.control.end)

    return go


def ascjax_run_reused(case):
    """``ascjax.run`` as a user calls it (not inside a ``jit``): the control plane's findings are reused for a
    record with the operands of an earlier run (``ascjax.runner._planes.CONTROL_CACHE``), so a call costs the recording's
    operands, one hash and the data plane."""

    def go(a, b):
        r = aj.run(case.kernel, {"a": a, "b": b}, case.outputs, params=case.params)
        return r.outputs["c"], r.verdict, jnp.max(r.control.end)

    return go


def ascjax_data_plane(case):
    """The data plane alone, in the order one control-plane run gave (what a lowered run builds on)."""
    inputs = {"a": jnp.asarray(case.inputs["a"]), "b": jnp.asarray(case.inputs["b"])}
    record = record_kernel(case.kernel, inputs, case.outputs, params=case.params)
    order, private = dataplane.schedule(record, run_control(record)), private_loops(record)
    no_faults = faults_free(record)
    chip, spec = aj.get_chip("a2"), output_spec(case.outputs)

    @jax.jit
    def data(a, b):
        inputs = {"a": a, "b": b}
        return execute_data(case.kernel, chip, aj.Options(), inputs, spec, case.params, order, no_faults=no_faults,
                            private=private).gm["c"]  # fmt: skip

    return data


def ascjax_launch(case, block_dim, whole=False):
    """The kernel launched on ``block_dim`` blocks inside a ``jit``: by default the blocks' control planes run on the
    host while it is traced and the program holds their data planes and the GM merge; ``whole``
    (``launch(jit=False)``): the program holds the control planes too, as it does where parameters are traced."""

    @jax.jit
    def go(a, b):
        r = aj.launch(
            case.kernel, {"a": a, "b": b}, case.outputs, block_dim=block_dim, params=case.params, jit=not whole
        )
        return r.outputs["c"], r.verdict, r.cycles

    return go


def measure(size=1024, repeats=5, tpu_repeats=1) -> dict:
    case = matmul_case(size, size, size)
    a, b = (jnp.asarray(case.inputs[n]) for n in ("a", "b"))
    blocks = (size // TILE) ** 2  # one output tile per block
    want = case.reference(case.inputs)["c"]
    rows = {
        "jnp.dot": (jax.jit(lambda a, b: jnp.dot(a, b, preferred_element_type=jnp.float32)), repeats),
        "tiled lax.scan of jnp.dot": (jax.jit(tiled_scan_matmul), repeats),
        "the tiling with its relayouts, tiles as a factored vmap": (jax.jit(factored_vmap_matmul), repeats),
        "ascjax, checks + timing": (ascjax_matmul(case, True), repeats),
        "ascjax, timing only": (ascjax_matmul(case, False), repeats),
        "ascjax, checks + timing, output tiles one by one": (ascjax_matmul(case, True, parallel_loops=False), repeats),
        "ascjax, checks + timing, loops lowered": (ascjax_matmul(case, True, lower_loops=True), repeats),
        "ascjax run, control plane reused": (ascjax_run_reused(case), repeats),
        "ascjax data plane alone": (ascjax_data_plane(case), repeats),
        f"ascjax launch, {blocks} blocks, checks + timing": (ascjax_launch(case, blocks), repeats),
        f"ascjax launch traced whole, {blocks} blocks": (ascjax_launch(case, blocks, whole=True), repeats),
        "Pallas interpret=True": (jax.jit(functools.partial(pallas_matmul, interpret=True)), repeats),
        "Pallas TPU interpret": (
            jax.jit(functools.partial(pallas_matmul, interpret=pltpu.InterpretParams())),
            tpu_repeats,
        ),
        "Pallas TPU interpret, detect_races": (
            jax.jit(functools.partial(pallas_matmul, interpret=pltpu.InterpretParams(detect_races=True))),
            tpu_repeats,
        ),
    }
    timings = interleaved_seconds({name: (fn, (a, b), reps) for name, (fn, reps) in rows.items()}, repeats)
    errors = {}
    for name, (fn, _) in rows.items():
        out = fn(a, b)
        c = out[0] if isinstance(out, tuple) else out
        errors[name] = timings[name]["max_abs_err"] = float(np.max(np.abs(np.asarray(c, np.float64) - want)))
    c, verdict, cycles = ascjax_matmul(case, True)(a, b)
    one_by_one = ascjax_matmul(case, True, parallel_loops=False)(a, b)[0]
    parallel_bits = np.array_equal(np.asarray(c), np.asarray(one_by_one))
    factored_bits = np.array_equal(np.asarray(jax.jit(factored_vmap_matmul)(a, b)),
                                   np.asarray(jax.jit(tiled_relayout_matmul)(a, b)))  # fmt: skip
    run = {name: t["run_s"] for name, t in timings.items()}
    return {
        "benchmark": f"K-loop matmul {size}^3 f16, tiles {TILE}",
        "verdict": aj.Verdict(int(verdict)).label,
        "cycles": int(cycles),
        "timings": timings,
        "claims": [
            claim("matmul: ascjax (checks + timing) / jnp.dot", run["ascjax, checks + timing"] / run["jnp.dot"], 1.5),
            claim(
                "matmul: Pallas TPU interpret + races / ascjax",
                run["Pallas TPU interpret, detect_races"] / run["ascjax, checks + timing"],
                500,
                ">=",
            ),
            claim("matmul: tiled lax.scan of jnp.dot / jnp.dot", run["tiled lax.scan of jnp.dot"] / run["jnp.dot"]),
            claim(
                "matmul: the tiling with its relayouts as a factored vmap / jnp.dot",
                run["the tiling with its relayouts, tiles as a factored vmap"] / run["jnp.dot"],
            ),
            claim(
                "matmul: the factored vmap has the tiled relayouts' bits (1 yes, 0 no)", float(factored_bits), unit=""
            ),
            claim(
                "matmul: output tiles one by one / as one vmap (checks + timing)",
                run["ascjax, checks + timing, output tiles one by one"] / run["ascjax, checks + timing"],
            ),
            claim(
                "matmul: the output tiles as one vmap have the bits of one by one (1 yes, 0 no)",
                float(parallel_bits),
                unit="",
            ),
            claim(
                "matmul: ascjax (checks + timing) / tiled lax.scan",
                run["ascjax, checks + timing"] / run["tiled lax.scan of jnp.dot"],
            ),
            claim(
                "matmul: ascjax / Pallas interpret=True",
                run["ascjax, checks + timing"] / run["Pallas interpret=True"],
                1.0,
            ),
            claim(
                "matmul: ascjax run, control plane reused (checks + timing) / jnp.dot",
                run["ascjax run, control plane reused"] / run["jnp.dot"],
                1.5,
            ),
            claim("matmul: ascjax data plane alone / jnp.dot", run["ascjax data plane alone"] / run["jnp.dot"]),
            claim(
                "matmul: loops lowered too / the default (checks + timing)",
                run["ascjax, checks + timing, loops lowered"] / run["ascjax, checks + timing"],
            ),
            claim(
                "matmul: checks + timing / timing only (sanitizer cost)",
                run["ascjax, checks + timing"] / run["ascjax, timing only"],
                1.25,
            ),
            claim(
                f"matmul: ascjax launch on {blocks} blocks / jnp.dot",
                run[f"ascjax launch, {blocks} blocks, checks + timing"] / run["jnp.dot"],
            ),
            claim(
                f"matmul: ascjax launch traced whole on {blocks} blocks / jnp.dot",
                run[f"ascjax launch traced whole, {blocks} blocks"] / run["jnp.dot"],
            ),
            claim("matmul: max |error| vs float64", max(errors.values()), 1e-3, unit=""),
        ],
    }


if __name__ == "__main__":
    raise SystemExit(main(__doc__, measure, size=1024))
