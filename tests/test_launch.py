"""Multi-block launch: the block index picks each block's rows, the GM merge (plain stores, atomic adds,
races between blocks), the first failing block's verdict, per-scenario verdicts under vmap, waves of
blocks in the timing, and a plain ``run`` left as it was. Every kernel here compiles once."""

import calibration
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from matmul import matmul_case

import ascjax as aj
from ascjax import pl
from ascjax.runner._launch import launch_cycles, merge_gm

V = aj.Verdict
R, C = 16, 32  # one AIV's stripe of rows
MTE2, MTE3 = pl.PipeType.MTE2, pl.PipeType.MTE3
# AIV v (= block * 2 + sub) reads rows [v * R, (v + 1) * R), all equal to v + 1
X = np.repeat(np.arange(1, 5, dtype=np.float32), R)[:, None] * np.ones((1, C), np.float32)


def copy_kernel(k, spread, hang):
    """Each AIV copies its stripe of ``x`` to ``out`` at stripe ``block * 2 * spread + sub`` (spread 0: the
    blocks collide, the AIVs of one block do not) and adds it twice into rows ``sub * R`` of ``acc`` (every
    block: the same rows). Block ``hang`` waits for flag MTE2->MTE3 event 1, which nothing sets."""
    t = pl.alloc("Vec", (R, C), "float32", name="t")

    @pl.section_vector
    def _(sub):
        pl.load(t, "x", (pl.get_block_idx() * R, 0))
        pl.system.sync_src(set_pipe=MTE2, wait_pipe=MTE3, event_id=0)
        pl.system.sync_dst(set_pipe=MTE2, wait_pipe=MTE3, event_id=jnp.where(k.block_idx == hang, 1, 0))
        pl.store("out", t, ((k.block_idx * 2 * spread + sub) * R, 0))
        pl.store("acc", t, (sub * R, 0), atomic=pl.AtomicType.AtomicAdd)
        pl.store("acc", t, (sub * R, 0), atomic=True)


OUTS = {"out": ((4 * R, C), "float32"), "acc": ((2 * R, C), "float32")}
SCENARIOS = {"spread": jnp.array([1, 0, 1], jnp.int32), "hang": jnp.array([-1, -1, 1], jnp.int32)}
OK, RACE, HANG = 0, 1, 2  # scenario index


@pytest.fixture(scope="module")
def scenarios():
    """Two blocks, vmapped over three scenarios (each scenario's control planes on the host, the data planes one
    batched compile): apart, colliding, block 1 deadlocked."""
    return jax.vmap(lambda p: aj.launch(copy_kernel, {"x": X}, OUTS, block_dim=2, params=p))(SCENARIOS)


def test_verdicts_are_per_scenario(scenarios):
    assert np.asarray(scenarios.verdict).tolist() == [V.OK, V.RACE, V.DEADLOCK]
    assert np.asarray(scenarios.block).tolist() == [-1, -1, 1]  # the block a verdict comes from (-1: merge)
    assert not scenarios.ok


def test_block_index_picks_rows_and_outputs_merge(scenarios):
    rep = scenarios.report(index=OK)
    assert rep.verdict is V.OK and "2 blocks" in rep.message, rep.message
    np.testing.assert_array_equal(np.asarray(scenarios.outputs["out"][OK]), X)  # four AIVs, four stripes


def test_atomic_adds_of_all_blocks_sum(scenarios):
    acc = np.asarray(scenarios.outputs["acc"][OK])
    # rows of sub 0: blocks 0 and 1 add stripes 1 and 3, twice each; sub 1: stripes 2 and 4
    np.testing.assert_array_equal(acc[:R], 2 * (1 + 3))
    np.testing.assert_array_equal(acc[R:], 2 * (2 + 4))
    np.testing.assert_array_equal(np.asarray(scenarios.outputs["acc"][RACE]), acc)  # atomics never race


def test_a_deadlocked_block_writes_nothing_after_its_stuck_wait(scenarios):
    """Block 1's stores wait behind a flag nothing sets: its stripes of ``out`` and its atomic adds never reach
    GM, in the vmapped launch (its data planes traced, each store selected) and in a concrete one alike."""
    want_out = X.copy()
    want_out[2 * R :] = 0  # block 1's two stripes
    want_acc = np.concatenate([np.full((R, C), 2 * 1), np.full((R, C), 2 * 2)]).astype(np.float32)  # block 0's adds
    concrete = aj.launch(copy_kernel, {"x": X}, OUTS, block_dim=2, params={"spread": 1, "hang": 1})
    assert int(concrete.verdict) == V.DEADLOCK
    for outputs in (jax.tree.map(lambda v: v[HANG], scenarios.outputs), concrete.outputs):
        np.testing.assert_array_equal(np.asarray(outputs["out"]), want_out)
        np.testing.assert_array_equal(np.asarray(outputs["acc"]), want_acc)


def test_two_blocks_storing_one_region_race(scenarios):
    rep = scenarios.report(index=RACE)
    assert rep.verdict is V.RACE
    text = rep.message
    store = f"copy_ub2gm at tests/test_launch.py:{copy_kernel.__code__.co_firstlineno + 11}"  # pl.store("out", ...)
    for part in ("blocks 0 and 1", "`out`", "granule 0", "element (0, 0)", "plain store", "pl.get_block_idx()",
                 "atomic=pl.AtomicType.AtomicAdd", f"block 0: {store}; block 1: {store}."):  # fmt: skip
        assert part in text, text
    with pytest.raises(aj.RaceError, match="scenario 1: RACE between blocks 0 and 1"):
        scenarios.check()


def test_a_deadlocked_block_gives_the_launch_its_verdict(scenarios):
    rep = scenarios.report(index=HANG)
    assert rep.verdict is V.DEADLOCK
    assert rep.message.startswith("block 1: DEADLOCK"), rep.message
    for sub in (0, 1):
        assert f"(AIV{sub}.MTE3) waits for flag MTE2 -> MTE3 event 1 on AIV{sub}, which no set delivers" in rep.message
    assert scenarios.report(block=0, index=HANG).verdict is V.OK  # block 0 alone is fine
    with pytest.raises(ValueError, match="pass index="):
        scenarios.report()
    with pytest.raises(ValueError, match=r"outside the launch's blocks \[0, 2\)"):
        scenarios.report(block=2, index=HANG)


def test_block_cycles_and_launch_cycles(scenarios):
    per = np.asarray(scenarios.block_cycles[OK])
    assert per.shape == (2,) and per[0] == per[1] > 0
    assert float(scenarios.cycles[OK]) == per[0]  # 2 blocks on 24 AI Cores: one wave


# --- a tiny AIV0-only kernel: jit vs eager, block_num, the plain run ------------------------
def tiny_kernel(k):
    """Block b copies stripe b of ``x`` to stripe ``block_num - 1 - b`` of ``out`` and adds it twice to ``acc``."""
    t = pl.alloc("Vec", (R, C), "float32", name="t")
    with k.vector(0):
        pl.load(t, "x", (k.block_idx * R, 0))
        pl.system.sync_src(set_pipe=MTE2, wait_pipe=MTE3, event_id=0)
        pl.system.sync_dst(set_pipe=MTE2, wait_pipe=MTE3, event_id=0)
        pl.store("out", t, ((pl.get_block_num() - 1 - k.block_idx) * R, 0))
        pl.store("acc", t, atomic=pl.AtomicType.AtomicAdd)
        pl.store("acc", t, atomic=pl.AtomicType.AtomicAdd)


def test_a_concrete_launch_records_and_checks_its_blocks_once_and_agrees_with_the_one_program_launch(scenarios):
    """With concrete parameters the blocks are recorded on the host at once, each control plane runs as ``run``'s
    does (cached), and one program computes the data: the verdict, the block, the outputs and the cycles are the
    traced launch's; a launch on other data runs no control plane, and inside a ``jit`` over the data it is the same."""
    from ascjax.runner._planes import CONTROL_CACHE

    for index in (OK, RACE, HANG):
        params = {name: int(values[index]) for name, values in SCENARIOS.items()}
        got = aj.launch(copy_kernel, {"x": X}, OUTS, block_dim=2, params=params)
        assert int(got.verdict) == int(scenarios.verdict[index]) and int(got.block) == int(scenarios.block[index])
        np.testing.assert_array_equal(np.asarray(got.block_cycles), np.asarray(scenarios.block_cycles[index]))
        for name in OUTS:
            np.testing.assert_array_equal(np.asarray(got.outputs[name]), np.asarray(scenarios.outputs[name][index]))
    params = {name: int(values[OK]) for name, values in SCENARIOS.items()}
    misses = CONTROL_CACHE.misses
    again = aj.launch(copy_kernel, {"x": 2 * X}, OUTS, block_dim=2, params=params)
    assert CONTROL_CACHE.misses == misses
    np.testing.assert_array_equal(np.asarray(again.outputs["out"]), 2 * X)

    def launched(x):  # traced anew at each call (a new jit)
        return jax.jit(lambda x: aj.launch(copy_kernel, {"x": x}, OUTS, block_dim=2, params=params).outputs)(x)

    launched(X)  # the record of the inputs' shapes: its control planes run once
    misses = CONTROL_CACHE.misses
    jitted = launched(2 * X)
    assert CONTROL_CACHE.misses == misses
    for name in OUTS:
        np.testing.assert_array_equal(np.asarray(jitted[name]), np.asarray(again.outputs[name]))


def _launched(params):
    return aj.launch(copy_kernel, {"x": X}, OUTS, block_dim=2, params=params)


def _scenario(result, s: int):
    return jax.tree.map(lambda x: x[s], result)


def _assert_same_launch(got, want):
    """Two launches (or a scenario of a vmapped one and a launch) with the same verdict, block, outputs and times."""
    assert int(got.verdict) == int(want.verdict) and int(got.block) == int(want.block)
    np.testing.assert_array_equal(np.asarray(got.block_cycles), np.asarray(want.block_cycles))
    np.testing.assert_array_equal(np.asarray(got.controls.n_findings), np.asarray(want.controls.n_findings))
    np.testing.assert_array_equal(
        np.asarray(got.records.operands["cycles"]), np.asarray(want.records.operands["cycles"])
    )
    for name in OUTS:
        np.testing.assert_array_equal(np.asarray(got.outputs[name]), np.asarray(want.outputs[name]))


def test_an_eager_vmap_runs_each_scenarios_control_planes_as_a_concrete_launch(monkeypatch):
    """Under a ``vmap`` alone the parameters are concrete: each distinct scenario's blocks are recorded and their
    control planes run on the host as a concrete launch runs them, and only the data planes and the merge compile
    batched (the launch is never traced whole). Each scenario is the launch of its parameters."""
    import ascjax.runner._launch as launch_module

    def traced_whole(*args, **kwargs):
        raise AssertionError("an eager vmap of a launch traced it whole")

    on_host = []
    real = launch_module._controls_on_host
    monkeypatch.setattr(launch_module, "_launch_jit", traced_whole)
    monkeypatch.setattr(launch_module, "_controls_on_host", lambda *a: on_host.append(1) or real(*a))
    params = {"spread": jnp.array([0, 1, 0], jnp.int32), "hang": jnp.array([1, -1, 1], jnp.int32)}
    swept = jax.vmap(_launched)(params)
    assert len(on_host) == 2  # scenarios 0 and 2 are one scenario
    monkeypatch.undo()
    for s in range(3):
        alone = _launched({name: int(values[s]) for name, values in params.items()})
        _assert_same_launch(_scenario(swept, s), alone)
    assert [aj.Verdict(int(v)) for v in swept.verdict] == [V.DEADLOCK, V.OK, V.DEADLOCK]


def test_a_launch_traced_whole_gives_each_scenario_what_the_eager_vmap_gives(scenarios):
    """Inside a ``jit`` the launch is one program, every block's recording and control plane traced (``_launch``);
    it agrees with the eager ``vmap`` (the fixture) on every scenario, the deadlocked block's GM included."""
    whole = jax.jit(jax.vmap(_launched))(SCENARIOS)
    for s in (OK, RACE, HANG):
        _assert_same_launch(_scenario(whole, s), _scenario(scenarios, s))


TINY_OUTS = {"out": ((2 * R, C), "float32"), "acc": ((R, C), "float32")}
FAST = aj.Options(sanitize=False)  # the eager run dispatches every op: keep them few


@pytest.mark.slow  # jit and eager agreement of the planes: tests/test_data_order.py (run) in the default suite
def test_jit_eager_and_parallel_launch_agree():
    """Blocks one after another (jit and eager) and as one vmap (block_parallel) give the same run."""
    results = [aj.launch(tiny_kernel, {"x": X}, TINY_OUTS, block_dim=2, options=FAST, jit=jit) for jit in (True, False)]
    results.append(aj.launch(tiny_kernel, {"x": X}, TINY_OUTS, block_dim=2, options=FAST, block_parallel=True))
    for r in results:
        assert r.ok, r.report().message
        np.testing.assert_array_equal(np.asarray(r.outputs["out"]), np.concatenate([X[R : 2 * R], X[:R]]))
        np.testing.assert_array_equal(np.asarray(r.outputs["acc"]), 2 * (1 + 2))
    jitted, eager, parallel = results
    np.testing.assert_array_equal(np.asarray(jitted.block_cycles), np.asarray(eager.block_cycles))
    np.testing.assert_array_equal(np.asarray(jitted.block_cycles), np.asarray(parallel.block_cycles))


def _read_before_write_kernel(k):
    """Block b reads stripe b of ``out``, which nothing wrote."""
    t = pl.alloc("Vec", (R, C), "float32", name="t")
    with k.vector(0):
        pl.load(t, "out", (k.block_idx * R, 0))


def test_blocks_keep_no_gm_copy_and_their_reports_place_their_own_gm_bytes():
    """The merge consumes each block's GM copy (a launch would hold ``block_dim`` copies of GM otherwise): the
    result keeps each block's record and control-plane result; a block's report names its own GM bytes."""
    r = aj.launch(_read_before_write_kernel, {"x": X}, TINY_OUTS, block_dim=2)
    gm_like = [x for x in jax.tree.leaves(r) if hasattr(x, "dtype") and np.issubdtype(x.dtype, np.floating)]
    assert not any(x.size > 2 * R * C for x in gm_like if x.ndim > 1)  # the merged outputs, no block's GM copy
    assert [name for name, _ in r.output_spec] == ["out", "acc"]
    rep = r.report()
    assert rep.verdict is V.UNINITIALIZED and rep.message.startswith("block 0: UNINITIALIZED"), rep.message
    stripe_bytes = R * C * 4
    assert "UNINITIALIZED read of GM:out bytes [0, " in rep.message, rep.message
    assert f"UNINITIALIZED read of GM:out bytes [{stripe_bytes}, " in r.report(block=1).message  # its own stripe


def test_plain_run_is_block_0_of_1_and_keeps_no_write_marks():
    r = aj.run(tiny_kernel, {"x": X}, TINY_OUTS, options=FAST)
    assert r.ok, r.report().message
    np.testing.assert_array_equal(np.asarray(r.outputs["out"][:R]), X[:R])
    np.testing.assert_array_equal(np.asarray(r.outputs["out"][R:]), 0)
    np.testing.assert_array_equal(np.asarray(r.outputs["acc"]), 2 * X[:R])  # atomic adds within one block
    assert r.state.gm_written == {}


# --- cube blocks: the fixpipe's plain and atomic stores, waves over the AI Cores -------------
M, K, N = 16, 32, 16


def cube_kernel(k):
    """Block b multiplies rows [b * M, (b + 1) * M) of ``a`` by ``b``: stores them there and adds them into ``sum``."""
    a_mat = pl.alloc("Mat", (M, K), "float16", name="a_mat")
    b_mat = pl.alloc("Mat", (K, N), "float16", name="b_mat")
    left = pl.alloc("Left", (M, K), "float16", name="left")
    right = pl.alloc("Right", (K, N), "float16", name="right")
    acc = pl.alloc("Acc", (M, N), "float32", name="acc")
    pl.load(a_mat, "a", (pl.get_block_idx() * M, 0))
    pl.load(b_mat, "b")
    pl.system.sync_src(set_pipe=MTE2, wait_pipe=pl.PipeType.MTE1, event_id=0)
    pl.system.sync_dst(set_pipe=MTE2, wait_pipe=pl.PipeType.MTE1, event_id=0)
    pl.move(left, a_mat)
    pl.move(right, b_mat)
    pl.system.sync_src(set_pipe=pl.PipeType.MTE1, wait_pipe=pl.PipeType.M, event_id=0)
    pl.system.sync_dst(set_pipe=pl.PipeType.MTE1, wait_pipe=pl.PipeType.M, event_id=0)
    pl.matmul(acc, left, right)
    pl.store("rows", acc, (pl.get_block_idx() * M, 0))
    pl.store("sum", acc, atomic=pl.AtomicType.AtomicAdd)


@pytest.mark.slow  # by default the atomic adds and the waves are checked on the vector blocks above
def test_cube_blocks_store_and_add_and_run_in_waves():
    rng = np.random.default_rng(0)
    a = rng.integers(-2, 3, (3 * M, K)).astype(np.float16)
    b = rng.integers(-2, 3, (K, N)).astype(np.float16)
    chip = aj.get_chip("a2").replace(ai_cores=2)  # 3 blocks on 2 AI Cores: core 0 runs blocks 0 and 2
    outs = {"rows": ((3 * M, N), "float32"), "sum": ((M, N), "float32")}
    r = aj.launch(cube_kernel, {"a": a, "b": b}, outs, block_dim=3, chip=chip)
    rep = r.report()
    assert rep.verdict is V.OK, rep.message
    full = a.astype(np.float32) @ b.astype(np.float32)  # small integers: exact
    np.testing.assert_array_equal(np.asarray(r.outputs["rows"]), full)
    np.testing.assert_array_equal(np.asarray(r.outputs["sum"]), full.reshape(3, M, N).sum(axis=0))
    per = np.asarray(r.block_cycles)
    assert per.shape == (3,) and len(set(per.tolist())) == 1
    assert float(r.cycles) == 2 * per[0] == rep.cycles
    assert rep.timing["waves"] == 2 and rep.timing["block_cycles"] == per.tolist()


def test_a_matmul_split_over_blocks_matches_numpy_and_runs_in_a_quarter_of_the_cycles():
    """kernels/matmul.py on 4 blocks (one 128 x 128 output tile each) against NumPy and a single-block run."""
    case = matmul_case()  # 256^3, tiles 128: 4 output tiles
    four = aj.launch(case.kernel, case.inputs, case.outputs, block_dim=4, params=case.params).check()
    one = aj.run(case.kernel, case.inputs, case.outputs, params=case.params).check()
    want = case.reference(case.inputs)["c"]
    np.testing.assert_allclose(np.asarray(four.outputs["c"]), want, atol=1e-3)
    np.testing.assert_array_equal(np.asarray(four.outputs["c"]), np.asarray(one.outputs["c"]))
    per = np.asarray(four.block_cycles)
    assert len(set(per.tolist())) == 1 and float(four.cycles) == per[0]  # 4 blocks, one wave
    # each block does a quarter of the K loops, and pays its own first load's and last store's latency
    assert 3.0 < one.report().cycles / float(four.cycles) <= 4.0
    with pytest.raises(ValueError, match="4 output tiles do not split evenly over block_dim 3"):
        aj.launch(case.kernel, case.inputs, case.outputs, block_dim=3, params=case.params)


# --- the merge and the waves as functions ----------------------------------------------------
def _merge(init, writes, granule_bytes=32):
    """``writes``: per block, a list of (row, col slice, value, atomic) it stores into a (2, 16) float32 tensor."""
    n = len(writes)
    values = np.repeat(init[None], n, axis=0)
    marks = np.zeros((n, *init.shape), np.uint8)
    for b, block in enumerate(writes):
        for row, cols, value, atomic in block:
            values[b, row, cols] = values[b, row, cols] + value if atomic else value
            marks[b, row, cols] |= 2 if atomic else 1
    merged, rec = merge_gm(("t",), {"t": jnp.asarray(init)}, {"t": jnp.asarray(values)}, {"t": jnp.asarray(marks)},
                           granule_bytes)  # fmt: skip
    return np.asarray(merged["t"]), jax.device_get(rec)


def test_merge_takes_each_blocks_elements_and_sums_atomic_adds():
    init = np.ones((2, 16), np.float32)
    merged, rec = _merge(init, [[(0, slice(0, 8), 5.0, False), (1, slice(None), 2.0, True)],
                                [(0, slice(8, 16), 7.0, False), (1, slice(None), 3.0, True)]])  # fmt: skip
    assert int(rec.code) == V.OK
    np.testing.assert_array_equal(merged[0], [5.0] * 8 + [7.0] * 8)
    np.testing.assert_array_equal(merged[1], 1.0 + 2.0 + 3.0)


def test_merge_compares_granules_and_atomic_with_plain():
    init = np.zeros((2, 16), np.float32)
    halves = [[(0, slice(0, 4), 1.0, False)], [(0, slice(4, 8), 2.0, False)]]  # one 32 B granule, other elements
    _, rec = _merge(init, halves)
    assert int(rec.code) == V.RACE and int(rec.granule) == 0 and not bool(rec.overlap)
    assert (int(rec.block_a), int(rec.block_b), int(rec.element)) == (0, 1, 0)
    _, rec = _merge(init, halves, granule_bytes=16)  # 16 B granules: apart
    assert int(rec.code) == V.OK
    _, rec = _merge(init, [[(1, slice(None), 1.0, True)], [], [(1, slice(3, 4), 2.0, False)]])
    assert int(rec.code) == V.RACE and int(rec.granule) == 2  # row 1 starts at granule 2
    assert (int(rec.block_a), int(rec.block_b), bool(rec.plain_a), bool(rec.plain_b)) == (0, 2, False, True)
    assert bool(rec.overlap) and int(rec.element) == 16 + 3


def test_blocks_storing_the_same_bits_to_the_same_elements_agree_and_any_difference_races():
    init = np.zeros((2, 16), np.float32)
    same = [(0, slice(None), 3.0, False)]
    merged, rec = _merge(init, [same, [], same, same])  # three blocks store the same row: it ends the same
    assert int(rec.code) == V.OK
    np.testing.assert_array_equal(merged, [[3.0] * 16, [0.0] * 16])
    merged, rec = _merge(init, [[(0, slice(None), np.nan, False)]] * 2)  # NaN holds the same bits as NaN
    assert int(rec.code) == V.OK and np.isnan(merged[0]).all()
    races = {  # what makes the same region a race: (block a, block b, granule)
        "a value differs": ([same, [(0, slice(None), 3.0, False), (0, slice(9, 10), 4.0, False)]], 1),
        "-0.0 is not 0.0": ([[(0, slice(None), 0.0, False)], [(0, slice(None), -0.0, False)]], 0),
        "fewer elements of a granule": ([same, [(0, slice(0, 4), 3.0, False)]], 0),
        "an atomic add": ([same, [(0, slice(None), 3.0, True)]], 0),
    }
    for why, (writes, granule) in races.items():
        _, rec = _merge(init, writes)
        assert int(rec.code) == V.RACE and int(rec.granule) == granule, why
        assert (int(rec.block_a), int(rec.block_b)) == (0, 1), why


def test_launch_cycles_run_blocks_in_waves():
    assert float(launch_cycles(np.array([10.0, 20.0, 30.0]), 2)) == 40.0  # core 0: blocks 0 and 2
    assert float(launch_cycles(np.array([10.0, 20.0, 30.0]), 24)) == 30.0
    np.testing.assert_array_equal(launch_cycles(np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]), 1), [6.0, 15.0])
    assert (aj.get_chip("a2").ai_cores, aj.get_chip("a3").ai_cores, aj.get_chip("950").ai_cores) == (24, 24, 28)


# --- trace-time rules ------------------------------------------------------------------------
def _inter_block_kernel(k):
    with k.vector(0):
        pl.system.set_cross_core(pipe=MTE3, event_id=0, sync_mode=pl.SyncMode.INTER_BLOCK)


def test_inter_block_events_and_bad_block_dims_are_refused():
    with pytest.raises(ValueError, match="rule 'INTER_BLOCK'"):
        aj.launch(_inter_block_kernel, {}, {"out": ((R, C), "float32")}, block_dim=2)
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match="block_dim is the number of blocks"):
            aj.launch(tiny_kernel, {"x": X}, TINY_OUTS, block_dim=bad)


class _HostThenCompiled:
    """A size class's control plane on the host for the first ``host`` calls, compiled after (``core.HostFirst``
    switches where a process's host runs have cost a compile: in the middle of a launch too)."""

    def __init__(self, shared, host: int):
        self.shared, self.host, self.calls = shared, host, 0

    def __call__(self, args, on_host, host_s):
        self.calls += 1
        return on_host() if self.calls <= self.host else self.shared.compiled(*args)

    def reset(self):
        self.shared.reset()


def test_blocks_whose_control_planes_ran_on_the_host_and_compiled_launch_alike(monkeypatch):
    """The host evaluates a block on its own tables, the size class's program on the class's; the launch finds the
    same either way."""
    import ascjax.engine._control as control
    from ascjax.runner._planes import CONTROL_CACHE

    case = calibration.aiv_small_copies_case(2)  # each block copies its own rows

    def launch(host: int):
        CONTROL_CACHE.clear()  # the blocks' control planes run again
        monkeypatch.setattr(control, "_run_shared", _HostThenCompiled(shared, host))
        return aj.launch(case.kernel, case.inputs, case.outputs, block_dim=2, params=case.params, chip="a2")

    shared = control._run_shared
    compiled, mixed = launch(host=0), launch(host=1)
    assert control._run_shared.calls == 2
    assert aj.Verdict(int(mixed.verdict)) is aj.Verdict.OK and int(mixed.cycles) == int(compiled.cycles)
    for name in case.outputs:
        np.testing.assert_array_equal(np.asarray(mixed.outputs[name]), np.asarray(compiled.outputs[name]))
    assert str(mixed.report(block=1)) == str(compiled.report(block=1))
