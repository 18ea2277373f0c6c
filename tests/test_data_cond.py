"""What the data plane computes where control is decided while it runs: a branch on a traced predicate (``k.cond``:
both branches and a select where they write a few tiles, a ``lax.cond`` where they write more than
``SELECT_MAX_BYTES``, the same bits either way; a concrete predicate's branch not taken still traced, so later
issues keep their instances)."""

from __future__ import annotations

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import KERNELS

import ascjax as aj
import ascjax.front._program as program
from ascjax.engine import _dataplane as dataplane
from ascjax.front._tracing import gm_inputs, output_spec
from ascjax.runner._planes import execute_data

ROWS = 8
BIG_ROWS = 8192  # an output of 8192 x 16 f32: 512 KiB of GM written in the branch


def _doubling(k, store_in_branch: bool):
    """UB := x, doubled in every pass of a two-pass loop but the first (a traced predicate); stored to GM."""
    with k.vector(0):
        t = k.alloc("UB", (ROWS, 16), "float32")
        k.copy_gm2ub(t, "x")
        k.sync_notify("MTE2", "V", 0)
        k.sync_wait("MTE2", "V", 0)

        k.range(3, lambda i: k.cond(i > 0, lambda: k.mul(t, t, 2.0)))

        k.sync_notify("V", "MTE3", 0)
        k.sync_wait("V", "MTE3", 0)
        if store_in_branch:
            k.cond(jnp.asarray(True), lambda: None)  # a concrete predicate: no conditional
            k.range(2, lambda i: k.cond(i == 1, lambda: k.copy_ub2gm("out", t)))
        else:
            k.copy_ub2gm("out", t)


X = np.arange(ROWS * 16, dtype=np.float32).reshape(ROWS, 16)


def _conds(store_in_branch: bool) -> int:
    """``cond`` equations in the data plane's program (inside its loops too)."""
    spec = output_spec({"out": ((BIG_ROWS, 16), "float32")})
    order = dataplane.Schedule((jnp.zeros(0), jnp.zeros(0), jnp.zeros(0)))
    jaxpr = jax.make_jaxpr(
        lambda: execute_data(
            _doubling,
            aj.get_chip("950"),
            aj.Options(),
            gm_inputs({"x": X}),
            spec,
            {"store_in_branch": store_in_branch},
            order,
        )  # fmt: skip
    )()

    def count(j) -> int:
        here = sum(e.primitive.name == "cond" for e in j.eqns)
        return here + sum(count(sub) for sub in jax.extend.core.subjaxprs(j))

    return count(jaxpr.jaxpr)


def test_a_branch_writing_a_tile_is_a_select_and_one_writing_a_large_gm_a_cond():
    assert _conds(store_in_branch=False) == 0
    assert _conds(store_in_branch=True) == 1


@pytest.mark.parametrize("store_in_branch", [False, True])
def test_the_branch_computes_what_numpy_computes(store_in_branch):
    r = aj.run(_doubling, {"x": X}, {"out": ((BIG_ROWS, 16), "float32")}, chip="950",
               params={"store_in_branch": store_in_branch})  # fmt: skip
    assert aj.Verdict(int(r.verdict)) is aj.Verdict.OK, str(r.report())
    np.testing.assert_array_equal(np.asarray(r.outputs["out"])[:ROWS], X * 4)


@pytest.mark.slow  # the kernels above check both forms against NumPy in the default run
def test_select_and_cond_compute_the_same_bits(monkeypatch):
    """Flash attention's pipeline stages (``k.cond`` on the loop index) both ways."""
    case = aj.build_case(str(KERNELS / "flash_attention.py"), "f16_s187_d64")
    outs = []
    for limit in (program.SELECT_MAX_BYTES, 0):
        aj.clear_caches()
        monkeypatch.setattr(program, "SELECT_MAX_BYTES", limit)
        r = aj.run(case.kernel, case.inputs, case.outputs, chip=case.chip, params=case.params)
        assert aj.Verdict(int(r.verdict)) is aj.Verdict.OK
        outs.append(np.asarray(r.outputs["out"]))
    np.testing.assert_array_equal(outs[0], outs[1])


def _racy_after_a_branch(k, flag: bool):
    """A branch not taken (a concrete ``flag``), then a V op reading a tile MTE2 loads with no flag between: RAW."""
    with k.vector(0):
        t, u = k.alloc("UB", (ROWS, 16), "float32"), k.alloc("UB", (ROWS, 16), "float32")
        k.copy_gm2ub(u, "x")
        k.sync_notify("MTE2", "V", 0)
        k.sync_wait("MTE2", "V", 0)
        k.cond(flag, lambda: k.mul(u, u, 2.0))
        k.copy_gm2ub(t, "x")
        k.mul(u, t, 3.0)  # races with the load of t
        k.sync_notify("V", "MTE3", 0)
        k.sync_wait("V", "MTE3", 0)
        k.copy_ub2gm("out", u)


def test_a_branch_not_taken_keeps_the_later_issues_instances():
    """The data plane traces the branch not taken too (its issues have instances in the record, so what follows
    finds its own): ``poison_races`` poisons the racy mul, not the branch's."""
    r = aj.run(_racy_after_a_branch, {"x": X}, {"out": ((ROWS, 16), "float32")}, chip="950", poison_races=True,
               params={"flag": False})  # fmt: skip
    assert aj.Verdict(int(r.verdict)) is aj.Verdict.RACE
    assert np.all(np.isnan(np.asarray(r.outputs["out"])))
