"""A run whose parameters an eager ``vmap`` traces: each scenario's control plane runs as a concrete run's, one by one
(``core.per_scenario``), and finds what the batched program finds."""

import jax
import jax.numpy as jnp
import numpy as np
import phases

import ascjax as aj
from ascjax.core import _per_scenario as per
from ascjax.runner import _planes

PARTIAL, FINAL = int(aj.AccPhase.Partial), int(aj.AccPhase.Final)


# --- core.per_scenario -------------------------------------------------------------------------------------------


def _counted(compile_s: float, key="test"):
    calls = []

    def traced(x, y):
        return {"sum": x + y, "max": jnp.max(x)}

    def on_host(x, y):
        calls.append(np.asarray(x).copy())
        return {"sum": np.asarray(x + y), "max": np.max(x)}

    return per.per_scenario(traced, on_host, key, compile_s), calls


def _expected(xs, y):
    return {"sum": np.asarray(xs + y), "max": np.max(np.asarray(xs), axis=1)}


def _same(got, want):
    assert jax.tree.structure(got) == jax.tree.structure(want)
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        np.testing.assert_array_equal(np.asarray(g), w)


def test_an_eager_vmap_runs_each_distinct_scenario_once_on_the_host():
    per.forget_batches()
    fun, calls = _counted(compile_s=60.0)
    xs = jnp.array([[1, 2], [3, 4], [1, 2]], jnp.int32)  # the third scenario repeats the first
    y = jnp.int32(10)
    _same(jax.vmap(fun, (0, None))(xs, y), _expected(xs, y))
    assert [c.tolist() for c in calls] == [[1, 2], [3, 4]]
    _same(jax.vmap(fun, (0, None))(xs, y), _expected(xs, y))  # the same batch again: kept, none rerun
    assert len(calls) == 2
    _same(jax.vmap(fun, (0, None))(xs, y + 1), _expected(xs, y + 1))  # another unbatched argument: run again
    assert len(calls) == 4
    empty = jnp.zeros((0, 2), jnp.int32)
    _same(jax.vmap(fun, (0, None))(empty, y), _expected(empty, y))  # no scenario: nothing to stack
    assert len(calls) == 4


def test_scenarios_that_would_cost_more_than_a_compile_run_batched():
    per.forget_batches()
    fun, calls = _counted(compile_s=0.0)  # any host time outweighs the compile
    xs = jnp.arange(8, dtype=jnp.int32).reshape(4, 2)
    _same(jax.vmap(fun, (0, None))(xs, jnp.int32(3)), _expected(xs, 3))
    assert len(calls) == 1  # the first on the host; the three left in one batched program


def test_inside_a_jit_or_a_nested_vmap_the_function_is_traced():
    per.forget_batches()
    fun, calls = _counted(compile_s=60.0, key=None)
    xs = jnp.arange(6, dtype=jnp.int32).reshape(3, 2)
    _same(jax.jit(jax.vmap(fun, (0, None)))(xs, jnp.int32(1)), _expected(xs, 1))
    assert calls == []
    ys = jnp.array([5, 7], jnp.int32)
    got = jax.vmap(jax.vmap(fun, (0, None)), (None, 0))(xs, ys)  # the inner rule sees the outer vmap's tracers
    want = {"sum": np.stack([np.asarray(xs + y) for y in ys]), "max": np.stack([np.max(np.asarray(xs), 1)] * 2)}
    _same(got, want)
    assert calls == []


# --- a run in an eager vmap ----------------------------------------------------------------------------------------


def _kloop(first, last):
    case = phases.kloop_recipe()
    params = dict(case.params, first=first, last=last)
    return aj.run(case.kernel, case.inputs, case.outputs, params=params)


def _count_control_runs(monkeypatch) -> list:
    """Per control-plane run a runner starts, whether its record was concrete (a scenario's own, run on its own)."""
    concrete = []
    run_control = _planes.run_control

    def counting(record, *args, **kwargs):
        concrete.append(not any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(record.operands)))
        return run_control(record, *args, **kwargs)

    monkeypatch.setattr(_planes, "run_control", counting)
    return concrete


def test_an_eager_vmap_of_a_run_finds_what_each_scenario_finds_alone(monkeypatch):
    """Three scenarios, two distinct (one deadlocks: Partial on the last K step): each distinct one's control plane
    runs once, as a concrete record's, and the verdicts, findings, timelines, reports and outputs are those of the
    scenario run alone."""
    per.forget_batches()
    concrete = _count_control_runs(monkeypatch)
    firsts = jnp.array([PARTIAL, PARTIAL, PARTIAL], jnp.int32)
    lasts = jnp.array([FINAL, PARTIAL, FINAL], jnp.int32)
    swept = jax.vmap(_kloop)(firsts, lasts)
    assert concrete == [True, True]
    assert [aj.Verdict(int(v)) for v in swept.verdict] == [aj.Verdict.OK, aj.Verdict.DEADLOCK, aj.Verdict.OK]
    for i in range(3):
        alone = _kloop(int(firsts[i]), int(lasts[i]))
        assert int(swept.verdict[i]) == int(alone.verdict)
        for field in ("findings", "n_findings", "start", "end", "source", "racy", "ran"):
            np.testing.assert_array_equal(getattr(swept.control, field)[i], getattr(alone.control, field), field)
        for name in alone.outputs:
            np.testing.assert_array_equal(swept.outputs[name][i], alone.outputs[name])
        assert str(swept.report(i)) == str(alone.report())
        assert swept.timeline(i).summary() == alone.timeline().summary()


def test_an_eager_vmap_past_the_host_budget_runs_the_rest_batched_and_finds_the_same(monkeypatch):
    per.forget_batches()
    concrete = _count_control_runs(monkeypatch)
    monkeypatch.setattr(_planes, "BATCHED_CONTROL_COMPILE_S", 0.0)  # any host time outweighs the compile
    firsts = jnp.array([PARTIAL, FINAL, PARTIAL], jnp.int32)
    lasts = jnp.array([FINAL, FINAL, PARTIAL], jnp.int32)
    batched = jax.vmap(_kloop)(firsts, lasts)
    assert concrete == [True]  # the first on the host, the two left batched
    per.forget_batches()
    monkeypatch.setattr(_planes, "BATCHED_CONTROL_COMPILE_S", 60.0)
    hosted = jax.vmap(_kloop)(firsts, lasts)
    assert concrete[1:] == [True] * 3
    np.testing.assert_array_equal(batched.verdict, hosted.verdict)
    assert len(set(np.asarray(hosted.verdict).tolist())) > 1  # the scenarios differ
    for a, b in zip(jax.tree.leaves(batched.control), jax.tree.leaves(hosted.control)):
        np.testing.assert_array_equal(a, b)


def test_poison_races_under_an_eager_vmap_poisons_what_each_scenario_poisons_alone():
    """Seed 000's store without a phase races the last mmad (its reads poisoned); with STPhase.Final it is clean."""
    case = phases.seed000_error2()

    def go(store):
        return aj.run(case.kernel, case.inputs, case.outputs, params=dict(case.params, store=store), poison_races=True)

    stores = jnp.array([0, int(aj.STPhase.Final)], jnp.int32)
    swept = jax.vmap(go)(stores)
    assert [aj.Verdict(int(v)) for v in swept.verdict] == [aj.Verdict.RACE, aj.Verdict.OK]
    for i, poisoned in enumerate((True, False)):
        alone = np.asarray(go(int(stores[i])).outputs["out"])
        assert np.isnan(alone).any() == poisoned
        np.testing.assert_array_equal(np.asarray(swept.outputs["out"][i]), alone)


def test_scenarios_run_on_the_host_or_by_the_size_class_program_stack_alike(monkeypatch):
    """The host evaluates a scenario on its own tables, the size class's program on the class's: ``run_control`` cuts
    a concrete result's sync hardware back to the record's own tables, so both stack to the traced run's shapes and
    agree."""
    from ascjax.engine import _control

    firsts = jnp.array([PARTIAL, FINAL], jnp.int32)
    lasts = jnp.array([FINAL, PARTIAL], jnp.int32)
    runs = {}
    for where, compile_s in (("host", 1e9), ("compiled", 0.0)):
        per.forget_batches()
        _control._run_shared.reset()
        monkeypatch.setattr(_control._run_shared, "compile_s", compile_s)
        runs[where] = jax.vmap(_kloop)(firsts, lasts).control
    assert _control._run_shared.compiled_programs() >= 1  # the second pass ran the class's program
    for a, b in zip(jax.tree.leaves(runs["host"]), jax.tree.leaves(runs["compiled"]), strict=True):
        assert a.shape == b.shape
        np.testing.assert_array_equal(a, b)
