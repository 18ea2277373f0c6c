"""Flash attention: accuracy against a float64 reference, gradients, the broken twins, overlap, multi-block.

``fast`` compiles the good kernel once on the two planes, with ``value_and_grad`` (outputs, gradients,
findings and timeline in one program). The variant (good kernel or twin) is a traced code, so
``checked`` (slow) runs all four with the race checks as one compiled ``vmap``.
"""

import functools
import math

import flash_attention as fa
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import KERNELS

import ascjax as aj
from ascjax.core import AIC
from ascjax.front._tracing import record_kernel

SEQ_Q, SEQ_KV, D, HEADS = 64, 150, 64, 2  # 150 keys: three KV tiles of 64, the last with 42 padded keys


def _launch(x, variant, heads):
    return aj.launch(
        fa.flash_attention_kernel,
        x,
        {"out": (x["q"].shape, "float16")},
        block_dim=heads,
        chip="950",
        params={**fa.params(SEQ_Q, SEQ_KV, D), "variant": variant},
        jit=False,
    )


@pytest.fixture(scope="module")
def fast():
    """One compile on the two planes: outputs and gradients from the data plane, findings and timeline from the
    control plane (``value_and_grad`` with the outputs and the control result as aux)."""
    x = fa.inputs(SEQ_Q, SEQ_KV, D)
    weights = jnp.asarray(np.random.default_rng(1).standard_normal(x["q"].shape), jnp.float32)
    outputs, params = {"out": (x["q"].shape, "float16")}, fa.params(SEQ_Q, SEQ_KV, D)

    def forward(q, k, v):
        r = aj.run(fa.flash_attention_kernel, {**x, "q": q, "k": k, "v": v}, outputs, chip="950", params=params)
        out = r.outputs["out"]
        return jnp.sum(out.astype(jnp.float32) * weights), (out, r.control)

    run = jax.value_and_grad(forward, argnums=(0, 1, 2), has_aux=True)
    (_, (out, control)), grads = jax.jit(run)(*(jnp.asarray(x[n]) for n in ("q", "k", "v")))
    record = jax.eval_shape(lambda: record_kernel(fa.flash_attention_kernel, x, outputs, chip="950", params=params))
    return x, weights, np.asarray(out, np.float64), control, record.template, grads


def test_ok_matches_reference(fast):
    x, _, out, control, _, _ = fast
    assert int(control.n_findings) == 0, np.asarray(control.findings)
    err = np.abs(out - fa.reference(x, SEQ_KV)["out"])
    assert 0 < err.max() <= fa.ATOL["float16"], err.max()  # f16 output: the rounding is visible


def test_padded_keys_are_masked(fast):
    """Attending to the zero padding too would move the output by far more than the tolerance."""
    x, _, out, _, _, _ = fast
    unmasked = fa.reference(x, fa.padded(SEQ_KV, 64))["out"]
    assert np.abs(out - unmasked).max() > 10 * fa.ATOL["float16"]


def test_cube_and_vector_overlap(fast):
    """Vector ops run while the cube is busy: the software pipeline overlaps QK(t + 1) with P(t)."""
    _, _, _, control, template, _ = fast
    start, end = np.asarray(control.start), np.asarray(control.end)
    ran = end > start
    cube = list(zip(start[ran & (template.core == AIC)], end[ran & (template.core == AIC)]))
    vector = list(zip(start[ran & (template.core != AIC)], end[ran & (template.core != AIC)]))
    assert cube and vector
    overlap = sum(max(0, min(e1, e2) - max(s1, s2)) for s1, e1 in cube for s2, e2 in vector)
    assert overlap > 0.1 * sum(e - s for s, e in vector)


def test_gradients_match_reference_attention(fast):
    """d(sum(out * w)) / dQ, dK, dV through the emulated kernel vs the float32 reference attention."""
    x, weights, _, _, _, grads = fast

    def reference(q, k, v):
        q, k, v = (a.astype(jnp.float32) for a in (q, k, v))
        s = q @ k[:SEQ_KV].T / math.sqrt(D)
        return jnp.sum(jax.nn.softmax(s, axis=1) @ v[:SEQ_KV] * weights)

    want = jax.grad(reference, argnums=(0, 1, 2))(*(jnp.asarray(x[n]) for n in ("q", "k", "v")))
    for g, w, name in zip(grads, want, "qkv"):
        g, w = np.asarray(g, np.float64), np.asarray(w, np.float64)
        assert np.abs(w).max() > 0.1, name  # a gradient that is not trivially zero
        assert np.abs(g - w).max() <= 0.03 * np.abs(w).max(), (name, np.abs(g - w).max(), np.abs(w).max())


@pytest.fixture(scope="module")
def checked():
    """The kernel and its three twins with the race checks: one compiled vmap over the variant code."""
    x = fa.inputs(SEQ_Q, SEQ_KV, D)
    return x, jax.jit(jax.vmap(lambda code: _launch(x, code, 1)))(jnp.arange(len(fa.VARIANTS), dtype=jnp.int32))


@pytest.mark.slow
def test_twins_are_reported_and_the_good_kernel_is_clean(checked):
    x, result = checked
    rep = result.report(index=fa.OK)
    assert rep.verdict is aj.Verdict.OK, str(rep)
    err = np.abs(np.asarray(result.outputs["out"][fa.OK], np.float64) - fa.reference(x, SEQ_KV)["out"])
    assert err.max() <= fa.ATOL["float16"]
    race = result.report(index=fa.NO_RELEASE_WAIT)
    assert race.verdict is aj.Verdict.RACE and "p_t" in str(race) and "copy_l12l0a" in str(race), str(race)
    dead = result.report(index=fa.NO_READY_SET)
    assert dead.verdict is aj.Verdict.DEADLOCK and "cross-core event 0" in str(dead), str(dead)
    stale = result.report(index=fa.SLOT_MISMATCH)
    assert stale.verdict is aj.Verdict.RACE and "`s[0]`" in str(stale) and "slot mismatch" in str(stale), str(stale)


@pytest.mark.slow
def test_two_heads_on_two_blocks():
    """Batch x heads as a launch: block b computes head b; the merged output matches per head."""
    x = fa.inputs(SEQ_Q, SEQ_KV, D, heads=HEADS, seed=5)
    result = jax.jit(lambda x: _launch(x, fa.OK, HEADS))(x)
    assert result.report().verdict is aj.Verdict.OK, str(result.report())
    want = fa.reference(x, SEQ_KV, heads=HEADS)["out"].reshape(HEADS, -1, D)
    err = np.abs(np.asarray(result.outputs["out"], np.float64).reshape(HEADS, -1, D) - want).max(axis=(1, 2))
    assert np.all(err <= fa.ATOL["float16"]) and np.all(err > 0), err
    per_block = np.asarray(result.block_cycles)
    assert per_block.shape == (HEADS,) and float(result.cycles) == pytest.approx(per_block.max())  # 2 blocks, 28 cores


def test_bad_variant_name_is_refused():
    with pytest.raises(ValueError, match="no_such_bug"):
        aj.run_case(
            aj.Case(
                kernel=fa.flash_attention_kernel,
                inputs={},
                outputs={},
                params={"n_tiles": 1, "variant": "no_such_bug"},
                chip="950",
            )
        )


@pytest.mark.slow
def test_bf16_head_dim_128_whole_tiles():
    case = aj.build_case(str(KERNELS / "flash_attention.py"), "bf16_s256_d128")
    _, rep, err = aj.run_case(case)
    assert rep.verdict is aj.Verdict.OK and err <= case.atol, (str(rep), err)


@pytest.mark.slow
def test_kv_loop_is_a_scan():
    """The program does not grow with the number of KV tiles: 4 and 64 tiles lower to the same size."""
    sizes = []
    for n_tiles in (4, 64):
        x = fa.inputs(64, 64 * n_tiles, 64)
        params = fa.params(64, 64 * n_tiles, 64)
        out = {"out": (x["q"].shape, "float16")}
        run = functools.partial(aj.run, fa.flash_attention_kernel, outputs=out, chip="950", params=params, jit=False)
        sizes.append(jax.jit(lambda x, run=run: run(x).outputs).lower(x).as_text().count("\n"))
    assert abs(sizes[0] - sizes[1]) <= 0.01 * sizes[0], sizes
