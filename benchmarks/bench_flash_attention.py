"""Flash attention (seq 2048, head dim 128, f16) in ascjax against reference attention and Pallas.

python benchmarks/bench_flash_attention.py [--seq 2048] [--head-dim 128] [--cores N] [--json]

Rows, in one process, each compiled once and then timed at steady state:
- reference attention in ``jnp`` (``softmax(Q Kᵀ / sqrt(d)) V`` in f32 from f16 inputs);
- the same tiling as nested ``lax.scan``s of ``jnp`` ops (the floor of a tile-by-tile emulator), with one QK product
  per tile, and with the kernel's own K-split of it (``flash_attention.TILE_D``: four products of K = 32 summed in
  f32, as its ``AccPhase`` chain accumulates them in L0C), the floor of an emulator that keeps the kernel's bits;
- the same arithmetic with its KV loop distributed (every tile's products batched, the softmax and the rescaling
  alone as scans): the floor of a data plane that split the loop into its recurrences and batched the rest;
- a Pallas flash attention of the same tiling (a program per 64-query tile, an online-softmax
  loop over 64-key tiles) with ``interpret=True``;
- JAX's own Pallas flash attention (``jax.experimental.pallas.ops.gpu.attention.mha``) at block
  128 with ``interpret=True``;
- ascjax ``kernels/flash_attention.py`` launched on ``seq / 64`` blocks (cube and both vector
  cores per block, cross-core events, the timing model), with the race and uninitialised-read
  checks off and on.

``--cores N`` pins the process to its first N cores before JAX starts its threads (0: every core). The reference's
products are wide enough for XLA to spread over every core; a tile-by-tile emulator's are not, so the ratios on one
core say how much of the gap is that parallelism.
"""

import functools
import math
import os
import pathlib
import sys

import jax
import jax.numpy as jnp
import numpy as np
from _timing import claim, interleaved_seconds, main
from jax.experimental import pallas as pl
from jax.experimental.pallas.ops.gpu import attention as pallas_attention

import ascjax as aj

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "kernels"))
import flash_attention as fa  # noqa: E402

Q_TILE, KV_TILE = 64, 64


def reference_attention(q, k, v):
    s = jnp.dot(q, k.T, preferred_element_type=jnp.float32) / math.sqrt(q.shape[1])
    p = jax.nn.softmax(s, axis=-1)
    return jnp.dot(p, v.astype(jnp.float32)).astype(q.dtype)


def pallas_flash_attention(q, k, v, *, interpret=True):
    seq, d = q.shape
    n_kv = k.shape[0] // KV_TILE
    scale = 1.0 / math.sqrt(d)

    def kernel(q_ref, k_ref, v_ref, o_ref):
        q_t = q_ref[...]

        def body(j, carry):
            m, row_sum, acc = carry
            k_t = k_ref[pl.ds(j * KV_TILE, KV_TILE), :]
            v_t = v_ref[pl.ds(j * KV_TILE, KV_TILE), :]
            s = jnp.dot(q_t, k_t.T, preferred_element_type=jnp.float32) * scale
            m_new = jnp.maximum(m, s.max(axis=1, keepdims=True))
            alpha = jnp.exp(m - m_new)
            p = jnp.exp(s - m_new)
            l_new = alpha * row_sum + p.sum(axis=1, keepdims=True)
            acc = alpha * acc + jnp.dot(p.astype(v_t.dtype), v_t, preferred_element_type=jnp.float32)
            return m_new, l_new, acc

        init = (
            jnp.full((Q_TILE, 1), -jnp.inf, jnp.float32),
            jnp.zeros((Q_TILE, 1), jnp.float32),
            jnp.zeros((Q_TILE, d), jnp.float32),
        )
        _, row_sum, acc = jax.lax.fori_loop(0, n_kv, body, init)
        o_ref[...] = (acc / row_sum).astype(o_ref.dtype)

    return pl.pallas_call(
        kernel,
        grid=(seq // Q_TILE,),
        in_specs=[
            pl.BlockSpec((Q_TILE, d), lambda i: (i, 0)),
            pl.BlockSpec(k.shape, lambda i: (0, 0)),
            pl.BlockSpec(v.shape, lambda i: (0, 0)),
        ],
        out_specs=pl.BlockSpec((Q_TILE, d), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
        interpret=interpret,
    )(q, k, v)


MHA_BLOCK = 128


def jax_mha(q, k, v):
    """JAX's own Pallas flash attention, ``mha``, at block 128 (queries and keys), ``interpret=True``: one head of
    ``[seq, d]`` as its ``[batch, seq, heads, d]``."""
    blocks = pallas_attention.BlockSizes(
        block_q=MHA_BLOCK, block_k=MHA_BLOCK, block_q_dkv=MHA_BLOCK, block_kv_dkv=MHA_BLOCK, block_q_dq=MHA_BLOCK,
        block_kv_dq=MHA_BLOCK,
    )  # fmt: skip
    one_head = lambda x: x[None, :, None]  # noqa: E731
    out = pallas_attention.mha(
        one_head(q), one_head(k), one_head(v), None, sm_scale=1.0 / math.sqrt(q.shape[1]), block_sizes=blocks,
        interpret=True,
    )  # fmt: skip
    return out[0, :, 0]


def tiled_scan_attention(q, k, v, k_split=None):
    """The same tiling as nested ``lax.scan``s of ``jnp`` ops with nothing else: per 64-query tile, the online softmax
    over 64-key tiles (the Pallas kernel's arithmetic). The floor of any emulator that runs flash attention tile by
    tile. ``k_split``: each QK product as products of head-dim slices this wide, summed in order in f32 (the
    kernel's K-split; another order of the sums gives other bits)."""
    seq, d = q.shape
    width = k_split or d
    scale = 1.0 / math.sqrt(d)

    def q_tile(_, i):
        q_t = jax.lax.dynamic_slice_in_dim(q, i * Q_TILE, Q_TILE)

        def kv_step(carry, j):
            m, row_sum, acc = carry
            k_t = jax.lax.dynamic_slice_in_dim(k, j * KV_TILE, KV_TILE)
            v_t = jax.lax.dynamic_slice_in_dim(v, j * KV_TILE, KV_TILE)
            products = [jnp.dot(q_t[:, c : c + width], k_t[:, c : c + width].T, preferred_element_type=jnp.float32)
                        for c in range(0, d, width)]  # fmt: skip
            s = functools.reduce(jnp.add, products) * scale
            m_new = jnp.maximum(m, s.max(axis=1, keepdims=True))
            alpha, p = jnp.exp(m - m_new), jnp.exp(s - m_new)
            acc = alpha * acc + jnp.dot(p.astype(v_t.dtype), v_t, preferred_element_type=jnp.float32)
            return (m_new, alpha * row_sum + p.sum(axis=1, keepdims=True), acc), None

        init = (jnp.full((Q_TILE, 1), -jnp.inf, jnp.float32), jnp.zeros((Q_TILE, 1), jnp.float32),
                jnp.zeros((Q_TILE, d), jnp.float32))  # fmt: skip
        (_, row_sum, acc), _ = jax.lax.scan(kv_step, init, jnp.arange(k.shape[0] // KV_TILE))
        return None, (acc / row_sum).astype(q.dtype)

    return jax.lax.scan(q_tile, None, jnp.arange(seq // Q_TILE))[1].reshape(seq, d)


def distributed_attention(q, k, v, k_split=None):
    """``tiled_scan_attention``'s arithmetic with its KV loop distributed: per 64-query tile, every KV tile's QK
    products as one batched product, the online softmax alone as a ``lax.scan``, every PV product as one batched
    product, then the rescaling sum as a ``lax.scan``. What a data plane that split a loop into its recurrences and
    batched the rest could reach (the products keep their bits; XLA may fuse the softmax's ``exp`` and row sums
    otherwise, so a few outputs differ in the last bit)."""
    seq, d = q.shape
    width = k_split or d
    scale = 1.0 / math.sqrt(d)
    k_tiles, v_tiles = (x.reshape(x.shape[0] // KV_TILE, KV_TILE, d) for x in (k, v))

    def q_tile(_, i):
        q_t = jax.lax.dynamic_slice_in_dim(q, i * Q_TILE, Q_TILE)
        products = [jnp.einsum("qc,tkc->tqk", q_t[:, c : c + width], k_tiles[:, :, c : c + width],
                               preferred_element_type=jnp.float32) for c in range(0, d, width)]  # fmt: skip
        scores = functools.reduce(jnp.add, products) * scale

        def softmax_step(carry, s):
            m, row_sum = carry
            m_new = jnp.maximum(m, s.max(axis=1, keepdims=True))
            alpha, p = jnp.exp(m - m_new), jnp.exp(s - m_new)
            return (m_new, alpha * row_sum + p.sum(axis=1, keepdims=True)), (alpha, p.astype(v.dtype))

        init = (jnp.full((Q_TILE, 1), -jnp.inf, jnp.float32), jnp.zeros((Q_TILE, 1), jnp.float32))
        (_, row_sum), (alphas, ps) = jax.lax.scan(softmax_step, init, scores)
        pv = jnp.einsum("tqk,tkd->tqd", ps, v_tiles, preferred_element_type=jnp.float32)
        rescale = lambda acc, x: (x[0] * acc + x[1], None)  # noqa: E731
        acc = jax.lax.scan(rescale, jnp.zeros((Q_TILE, d), jnp.float32), (alphas, pv))[0]
        return None, (acc / row_sum).astype(q.dtype)

    return jax.lax.scan(q_tile, None, jnp.arange(seq // Q_TILE))[1].reshape(seq, d)


def ascjax_flash_attention(seq, d, sanitize):
    p = fa.params(seq, seq, d, "float16", half_q=Q_TILE // 2, tile_kv=KV_TILE)
    outputs = {"out": ((seq, d), "float16")}

    @jax.jit
    def go(q, k, v, kv_mask):
        x = {"q": q, "k": k, "v": v, "kv_mask": kv_mask}
        r = aj.launch(
            fa.flash_attention_kernel,
            x,
            outputs,
            block_dim=p["q_tiles"],
            chip="950",
            params=p,
            options=aj.Options(sanitize=sanitize),
        )
        return r.outputs["out"], r.verdict, r.cycles

    return go


def measure(seq=2048, head_dim=128, cores=0, repeats=3) -> dict:
    if cores:  # before the first computation: XLA's threads inherit the affinity
        os.sched_setaffinity(0, range(cores))
    d = head_dim
    x = fa.inputs(seq, seq, d, "float16", half_q=Q_TILE // 2, tile_kv=KV_TILE)
    args = [jnp.asarray(x[n]) for n in ("q", "k", "v")]
    want = fa.reference(x, seq)["out"]
    rows = {
        "reference attention (jnp)": jax.jit(reference_attention),
        "tiled lax.scan of jnp ops": jax.jit(tiled_scan_attention),
        "tiled lax.scan, the kernel's K-split": jax.jit(functools.partial(tiled_scan_attention, k_split=fa.TILE_D)),
        "KV loop distributed, the kernel's K-split": jax.jit(
            functools.partial(distributed_attention, k_split=fa.TILE_D)
        ),
        "Pallas flash attention, interpret=True": jax.jit(functools.partial(pallas_flash_attention, interpret=True)),
        "JAX's Pallas mha, block 128, interpret=True": jax.jit(jax_mha),
        "ascjax, timing only": ascjax_flash_attention(seq, d, False),
        "ascjax, checks + timing": ascjax_flash_attention(seq, d, True),
    }
    calls = {
        name: ((lambda *a, fn=fn: fn(*a, jnp.asarray(x["kv_mask"]))) if name.startswith("ascjax") else fn, args)
        for name, fn in rows.items()
    }
    timings, extra, outs = interleaved_seconds(calls, repeats), {}, {}
    for name, (call, _) in calls.items():
        out = outs[name] = call(*args)
        if isinstance(out, tuple):
            out, verdict, cycles = out
            extra[name] = {"verdict": aj.Verdict(int(verdict)).label, "cycles": int(cycles)}
        timings[name]["max_abs_err"] = float(np.max(np.abs(np.asarray(out, np.float64) - want)))
    run = {name: t["run_s"] for name, t in timings.items()}
    ref = run["reference attention (jnp)"]
    return {
        "benchmark": f"flash attention seq {seq}, head dim {d}, f16, tiles {Q_TILE} x {KV_TILE}"
        + (f", on {cores} of the machine's cores" if cores else ""),
        "ascjax": extra,
        "timings": timings,
        "claims": [
            claim("flash attention: ascjax (checks + timing) / reference", run["ascjax, checks + timing"] / ref, 3),
            claim("flash attention: ascjax (timing only) / reference", run["ascjax, timing only"] / ref, 3),
            claim("flash attention: tiled lax.scan of jnp ops / reference", run["tiled lax.scan of jnp ops"] / ref),
            claim(
                "flash attention: tiled lax.scan with the kernel's K-split / reference",
                run["tiled lax.scan, the kernel's K-split"] / ref,
            ),
            claim(
                "flash attention: KV loop distributed with the kernel's K-split / reference",
                run["KV loop distributed, the kernel's K-split"] / ref,
            ),
            claim(
                "flash attention: ascjax (checks + timing) / tiled lax.scan",
                run["ascjax, checks + timing"] / run["tiled lax.scan of jnp ops"],
            ),
            claim(
                "flash attention: ascjax (checks + timing) / tiled lax.scan with the kernel's K-split",
                run["ascjax, checks + timing"] / run["tiled lax.scan, the kernel's K-split"],
            ),
            claim(
                "flash attention: ascjax (checks + timing) / Pallas interpret",
                run["ascjax, checks + timing"] / run["Pallas flash attention, interpret=True"],
                1.0,
            ),
            claim(
                "flash attention: ascjax (checks + timing) / JAX's Pallas mha (block 128, interpret=True)",
                run["ascjax, checks + timing"] / run["JAX's Pallas mha, block 128, interpret=True"],
            ),
            claim(
                "flash attention: outputs where the distributed loop's bits differ from the tiled K-split's",
                float(
                    np.sum(
                        np.asarray(outs["KV loop distributed, the kernel's K-split"])
                        != np.asarray(outs["tiled lax.scan, the kernel's K-split"])
                    )
                ),  # fmt: skip
                unit="",
            ),
            claim(
                "flash attention: max |error| vs float64",
                max(t["max_abs_err"] for t in timings.values()),
                fa.ATOL["float16"],
                unit="",
            ),
        ],
    }


if __name__ == "__main__":
    raise SystemExit(main(__doc__, measure, seq=2048, head_dim=128, cores=0))
