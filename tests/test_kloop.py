"""Seed 001's K-loop: all 27 phase choices in one vmap, jit vs eager, and gradients."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from unit_flag import KLOOP_STEPS, kloop_case, kloop_kernel

import ascjax as aj

MODES = (0, 2, 3)  # DISABLE, ENABLE_KEEP, ENABLE_UPDATE


def expected_verdict(first: int, middle: int, last: int, store: int = 3) -> aj.Verdict:
    """Independent model of seed 001's table under semantics §8: the M and FIX pipes are two in-order queues issued
    decoupled, one unit flag for the whole tile. An mmad with a mode waits for the flag at 0 and UPDATE sets it; the
    fixpipe with a mode waits for 1 and UPDATE clears it, which can release an mmad waiting behind the flag.

    The kernel has no M -> FIX software sync: only the unit flag orders the fixpipe and the mmads. The fixpipe is
    ordered after the mmads up to the UPDATE whose flag it took, and the mmads from the first one that took the
    flag it cleared are ordered after it; an mmad in between races with it.
    """
    modes = [first if i == 0 else last if i == KLOOP_STEPS - 1 else middle for i in range(KLOOP_STEPS)]
    flag, setter, pos, fix_done = 0, None, 0, False  # setter: who wrote the flag last ("fix" or an mmad index)
    before_fix, after_fix = -1, KLOOP_STEPS  # mmads up to before_fix precede the fixpipe; from after_fix follow it
    while True:
        if pos < KLOOP_STEPS and (modes[pos] == 0 or flag == 0):  # the M queue's head runs
            if modes[pos] and setter == "fix" and after_fix == KLOOP_STEPS:
                after_fix = pos  # it waited for the 0 the fixpipe wrote
            if modes[pos] == 3:
                flag, setter = 1, pos
            pos += 1
        elif not fix_done and (store == 0 or flag == 1):  # the FIX queue's fixpipe runs
            if store:
                before_fix = setter  # it took the flag this mmad's UPDATE set
            if store == 3:
                flag, setter = 0, "fix"
            fix_done = True
        else:
            break
    if pos < KLOOP_STEPS or not fix_done:
        return aj.Verdict.DEADLOCK
    if any(before_fix < i < after_fix for i in range(KLOOP_STEPS)):
        return aj.Verdict.RACE  # an mmad neither before nor after the fixpipe's read of L0C
    return aj.Verdict.LEFTOVER if flag else aj.Verdict.OK


@pytest.mark.slow  # a vmap sweep; test_phase_table sweeps every phase combination in the default run
def test_all_phase_choices_in_one_vmap():
    """The 27 (first, middle, last) choices with the recipe's store UPDATE, and with KEEP / DISABLE stores."""
    case = kloop_case("float16")
    combos = np.array(list(itertools.product(MODES, repeat=4)), np.int32)

    def verdict(first, middle, last, store):
        params = dict(case.params, first=first, middle=middle, last=last, store=store)
        return aj.run(case.kernel, case.inputs, case.outputs, params=params).verdict

    got = [aj.Verdict(int(v)) for v in jax.vmap(verdict)(*combos.T)]
    want = [expected_verdict(*c) for c in combos]
    assert got == want
    recipe = [g for g, c in zip(got, combos) if c[3] == 3]
    # ok: (KEEP|DISABLE, KEEP|DISABLE, UPDATE), and (UPDATE, KEEP, DISABLE|KEEP): the fixpipe takes the first
    # mmad's flag and its clear releases the rest, ordered after it (§8: a later fixpipe releases an mmad's wait);
    # (UPDATE, DISABLE, DISABLE) keeps the flag protocol but the DISABLE mmads ignore the flag, so the fixpipe reads
    # their results unordered: a race
    assert len(recipe) == 27 and recipe.count(aj.Verdict.OK) == 6
    assert got[list(map(tuple, combos)).index((3, 0, 0, 3))] is aj.Verdict.RACE
    # the spread of outcomes is what makes this test meaningful
    assert {aj.Verdict.OK, aj.Verdict.DEADLOCK, aj.Verdict.LEFTOVER, aj.Verdict.RACE} <= set(want)


@pytest.mark.slow  # vmapped reports are also checked in test_cross_core and test_tile_group
def test_vmapped_report_explains_one_scenario():
    case = kloop_case("float16")
    # the recipe, and a first UPDATE with a KEEP store: the fixpipe keeps the flag at 1, so the 2nd mmad hangs
    firsts, stores = jnp.array([2, 3], jnp.int32), jnp.array([3, 2], jnp.int32)

    def go(first, store):
        return aj.run(case.kernel, case.inputs, case.outputs, params=dict(case.params, first=first, store=store))

    result = jax.vmap(go)(firsts, stores)
    assert [int(v) for v in result.verdict] == [aj.Verdict.OK, aj.Verdict.DEADLOCK]
    rep = result.report(1)
    assert rep.op == "mmad" and "loop iteration (1)" in rep.message
    assert result.report(0).verdict is aj.Verdict.OK


def test_kloop_bf16_and_f16_match_numpy():
    for dtype in ("float16", "bfloat16"):
        case = kloop_case(dtype)
        result = aj.run(case.kernel, case.inputs, case.outputs, params=case.params)
        want = case.reference(case.inputs)["c"]
        np.testing.assert_allclose(np.asarray(result.outputs["c"]), want, atol=1e-3, rtol=1e-5)


def test_gradient_through_the_kloop_matches_jnp_dot():
    case = kloop_case("float16")
    a = jnp.asarray(case.inputs["a"], jnp.float32)
    b = jnp.asarray(case.inputs["b"], jnp.float32)
    weight = jnp.asarray(np.random.default_rng(0).normal(size=(128, 128)), jnp.float32)

    def emulated(a, b):
        inputs = {"a": a.astype(jnp.float16), "b": b.astype(jnp.float16)}
        out = aj.run(kloop_kernel, inputs, case.outputs, params=case.params).outputs["c"]
        return jnp.sum(out * weight)

    def reference(a, b):
        return jnp.sum(
            jnp.dot(a.astype(jnp.float16).astype(jnp.float32), b.astype(jnp.float16).astype(jnp.float32)) * weight
        )

    ga, gb = jax.grad(emulated, argnums=(0, 1))(a, b)
    ra, rb = jax.grad(reference, argnums=(0, 1))(a, b)
    # the f16 casts round the cotangents on the way back, as the forward rounds the inputs
    np.testing.assert_allclose(np.asarray(ga), np.asarray(ra), rtol=2e-3, atol=2e-2)
    np.testing.assert_allclose(np.asarray(gb), np.asarray(rb), rtol=2e-3, atol=2e-2)
    assert float(jnp.max(jnp.abs(ga))) > 1.0  # a gradient that is not trivially zero
