"""The two planes (``ascjax.planes``, what ``ascjax.run`` and each block of ``ascjax.launch`` run): the data plane
computes the kernels' references, in the order the control plane ran the sections, on a state of data alone (no
sync, sanitizer or timing state); gradients flow."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import KERNELS, REFUSED_WHILE_TRACING
from matmul import matmul_case

import ascjax as aj
from ascjax.engine import _dataplane as dataplane
from ascjax.engine import default_costs
from ascjax.front._tracing import gm_inputs, output_spec, record_on_host
from ascjax.runner._planes import CONTROL_CACHE, data_after_control, execute_data, resolve_control

#: cases whose outputs the default suite compares with a one-block launch's; every OK case of kernels/ under -m slow
QUICK = {("matmul.py", "matmul_256")}  # the twin test below runs vec_cube's sections against NumPy


def _verdict(result) -> aj.Verdict:
    return aj.Verdict(int(result.verdict))


def _one_block_launch(case):
    """``case`` as a launch of one block (its GM merge of one block keeps every output as the block wrote it)."""
    return aj.launch(case.kernel, case.inputs, case.outputs, block_dim=1, chip=case.chip, params=case.params)


def _ok_cases():
    for path in sorted(KERNELS.glob("*.py")):
        for name in aj.load_cases(str(path)):
            if (path.name, name) in REFUSED_WHILE_TRACING:
                continue
            if aj.build_case(str(path), name).expect is aj.Verdict.OK:
                marks = [] if (path.name, name) in QUICK else [pytest.mark.slow]
                yield pytest.param(path.name, name, marks=marks, id=f"{path.stem}-{name}")


@pytest.fixture
def _drop_compiled():
    """Each corpus case compiles a run's and a launch's programs: drop them after it, or a worker runs out of
    memory."""
    yield
    jax.clear_caches()


@pytest.mark.usefixtures("_drop_compiled")
@pytest.mark.parametrize(("file", "name"), list(_ok_cases()))
def test_run_and_a_one_block_launch_compute_the_reference_bit_for_bit_alike(file, name):
    case = aj.build_case(str(KERNELS / file), name)
    planes = aj.run(case.kernel, case.inputs, case.outputs, chip=case.chip, params=case.params)
    assert _verdict(planes) is aj.Verdict.OK, str(planes.report())
    launched = _one_block_launch(case)
    for out in case.outputs:
        np.testing.assert_array_equal(np.asarray(planes.outputs[out]), np.asarray(launched.outputs[out]), err_msg=out)
    if case.reference is not None:
        for out, want in case.reference(case.inputs).items():
            np.testing.assert_allclose(np.asarray(planes.outputs[out], np.float64), want, atol=case.atol, rtol=0)


def test_a_deadlocked_wait_stops_its_section_and_the_good_twin_runs_on():
    """Only AIV0 sets the event the cube waits for (INTRA_BLOCK needs both): the cube's segment after the wait
    never runs, so the output stays as it was; with both AIVs setting it, the output is the reference."""
    bad = aj.build_case(str(KERNELS / "vec_cube.py"), "vec_cube_one_aiv_sets")
    stuck = aj.run(bad.kernel, bad.inputs, bad.outputs, chip=bad.chip, params=bad.params)
    assert _verdict(stuck) is aj.Verdict.DEADLOCK
    assert not np.any(np.asarray(stuck.outputs["out"]))
    good = aj.build_case(str(KERNELS / "vec_cube.py"), "vec_cube_abs_sqrt_matmul")
    ran = aj.run(good.kernel, good.inputs, good.outputs, chip=good.chip, params=good.params)
    assert _verdict(ran) is good.expect is aj.Verdict.OK, str(ran.report())
    want = good.reference(good.inputs)["out"]
    np.testing.assert_allclose(np.asarray(ran.outputs["out"], np.float64), want, atol=good.atol, rtol=0)


def test_the_data_plane_carries_only_data():
    """The state holds GM, the tiles, the config registers, the cursors and the kernel's carried scalars (none here):
    no sync, sanitizer or timing state, so its bytes are the buffers' (a fixed, small overhead for the registers)."""
    case = matmul_case(128, 128, 128)
    spec = output_spec(case.outputs)
    inputs = gm_inputs(case.inputs)
    order = dataplane.Schedule((jnp.zeros(0), jnp.zeros(0), jnp.zeros(0)))
    state = jax.eval_shape(lambda: execute_data(case.kernel, aj.get_chip("a2"), aj.Options(), inputs, spec,
                                                case.params, order))  # fmt: skip
    fields = {f.name for f in dataclasses.fields(state) if not f.metadata.get("static")}
    assert fields == {"gm", "gm_written", "aic", "ub", "cursors", "scalars"}
    assert {f.name for f in dataclasses.fields(state.aic)} == {"l1", "l0a", "l0b", "l0c", "bt", "mmad_direction",
                                                               "saturation"}  # fmt: skip
    data = sum(x.size * x.dtype.itemsize for x in jax.tree.leaves((state.gm, state.aic.l1, state.aic.l0a,
                                                                   state.aic.l0b, state.aic.l0c, state.ub)))  # fmt: skip
    total = sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(state))
    assert total - data <= 16  # the mmad direction and saturation registers


@pytest.mark.slow  # one kernel compiled and run op by op: the jit / op-by-op agreement of the data functions
def test_jit_and_op_by_op_agree():
    case = matmul_case(128, 128, 128)
    jitted = aj.run(case.kernel, case.inputs, case.outputs, params=case.params)
    eager = aj.run(case.kernel, case.inputs, case.outputs, params=case.params, jit=False)
    np.testing.assert_array_equal(np.asarray(jitted.outputs["c"]), np.asarray(eager.outputs["c"]))
    assert _verdict(jitted) is _verdict(eager) is aj.Verdict.OK


def test_gradients_flow_through_the_data_plane():
    """d sum(A B) / dA = 1 B^T and / dB = A^T 1, against NumPy (flash attention's gradients through the two planes:
    tests/test_flash_attention.py)."""
    case = matmul_case(128, 128, 128, dtype=np.float32)
    a, b = (jnp.asarray(case.inputs[n]) for n in ("a", "b"))
    params = {**case.params, "dtype": "float32"}

    def loss(a, b):
        return jnp.sum(aj.run(case.kernel, {"a": a, "b": b}, case.outputs, params=params).outputs["c"])

    da, db = jax.grad(loss, argnums=(0, 1))(a, b)
    ones = np.ones((128, 128))
    np.testing.assert_allclose(np.asarray(da), ones @ np.asarray(b, np.float64).T, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(np.asarray(db), np.asarray(a, np.float64).T @ ones, rtol=1e-5, atol=1e-4)


@pytest.mark.slow  # by default test_phase_table and test_control_plane vmap phase scenarios, test_mmad a run
def test_scenarios_vmap_through_both_planes():
    """Three phase scenarios of seed 000's K loop in one ``vmap``: each gives the verdict and the outputs that
    its own run gives (the recipe; a store without phase, a race; Partial then Final only, a deadlock)."""
    from phases import phase_case

    P, F, NONE = int(aj.AccPhase.Partial), int(aj.AccPhase.Final), 0
    scenarios = {"first": [P, P, P], "middle": [P, P, F], "last": [F, F, F], "store": [F, NONE, F]}
    case = phase_case(P, P, F, F)

    def one(first, middle, last, store):
        params = {"first": first, "middle": middle, "last": last, "store": store}
        r = aj.run(case.kernel, case.inputs, case.outputs, params=params, jit=False)
        return r.outputs["out"], r.verdict

    outs, codes = jax.jit(jax.vmap(one))(*(jnp.asarray(scenarios[k], jnp.int32) for k in scenarios))
    words = [aj.Verdict(int(c)) for c in np.asarray(codes)]
    assert words == [aj.Verdict.OK, aj.Verdict.RACE, aj.Verdict.DEADLOCK]
    for i in range(3):
        alone = aj.run(
            case.kernel, case.inputs, case.outputs, params={k: jnp.int32(v[i]) for k, v in scenarios.items()}
        )  # traced: one compile
        assert _verdict(alone) is words[i]
        np.testing.assert_array_equal(np.asarray(outs[i]), np.asarray(alone.outputs["out"]))


def _handoff_kernel(k):
    """AIV0 stores x into GM ``ws``; AIV1, busy with a long load first, then reads ``ws`` back with nothing ordering
    it after AIV0's store (a race: it reads after the store landed, RAW) and stores what it read to ``out``."""
    x0, big, got = (
        k.alloc("UB", (32, 32), "float32"),
        k.alloc("UB", (128, 128), "float32"),
        k.alloc("UB", (32, 32), "float32"),
    )
    with k.vector(0):
        k.copy_gm2ub(x0, "x")
        k.sync_notify("MTE2", "MTE3", 0)
        k.sync_wait("MTE2", "MTE3", 0)
        k.copy_ub2gm("ws", x0)
    with k.vector(1):
        k.copy_gm2ub(big, "big")
        k.copy_gm2ub(got, "ws")
        k.sync_notify("MTE2", "MTE3", 0)
        k.sync_wait("MTE2", "MTE3", 0)
        k.copy_ub2gm("out", got)


def test_poison_races_puts_nan_into_the_reads_the_control_plane_flags():
    """The control plane flags AIV1's read of ``ws`` (RAW); with ``poison_races`` the data plane writes NaN where
    that read lands, so ``out`` is all NaN and ``ws`` (AIV0's, not racy) keeps x; a one-block launch computes the
    same."""
    x = np.arange(32 * 32, dtype=np.float32).reshape(32, 32)
    inputs = {"x": x, "big": np.zeros((128, 128), np.float32)}
    outputs = {"ws": ((32, 32), "float32"), "out": ((32, 32), "float32")}
    poisoned = aj.run(_handoff_kernel, inputs, outputs, poison_races=True)
    assert _verdict(poisoned) is aj.Verdict.RACE
    assert "RACE (RAW) on GM:ws" in str(poisoned.report())
    assert np.all(np.isnan(np.asarray(poisoned.outputs["out"])))
    np.testing.assert_array_equal(np.asarray(poisoned.outputs["ws"]), x)
    launched = aj.launch(_handoff_kernel, inputs, outputs, block_dim=1, options=aj.Options(poison_races=True))
    for name in outputs:
        np.testing.assert_array_equal(np.asarray(poisoned.outputs[name]), np.asarray(launched.outputs[name]))
    plain = aj.run(_handoff_kernel, inputs, outputs)  # without poison_races the read sees what landed first
    np.testing.assert_array_equal(np.asarray(plain.outputs["out"]), x)


@pytest.mark.parametrize(
    ("file", "name"),
    [
        ("pingpong.py", "pingpong_sections_odd"),
        pytest.param("flash_attention.py", "slot_mismatch", marks=pytest.mark.slow),
    ],
)
def test_every_issue_of_the_data_plane_finds_its_record_entry(file, name, monkeypatch):
    """A section is traced once per segment, and a trace skips the loops it does not run: each issue still finds
    its own entry of the record, with one loop index per loop the entry sits in."""
    case = aj.build_case(str(KERNELS / file), name)
    looked = []
    original = dataplane.Poison.racy_read

    def racy_read(self, tag, loop_index):
        looked.append((tag, self.index.entry_of.get(tag), len(loop_index), self))
        return original(self, tag, loop_index)

    monkeypatch.setattr(dataplane.Poison, "racy_read", racy_read)
    chip, options = aj.get_chip(case.chip), aj.Options(poison_races=True)
    x, spec = {n: np.asarray(v) for n, v in case.inputs.items()}, output_spec(case.outputs)
    record, latency = record_on_host(case.kernel, chip, default_costs(chip), x, spec, case.params)
    result = CONTROL_CACHE.get(record, resolve_control(chip, options, None), latency)[0]
    jax.make_jaxpr(  # the data plane as a run traces it (a trace: no compiled program of another test is reused)
        lambda: data_after_control(case.kernel, chip, options, gm_inputs(x), spec, case.params, record, result)[0]
    )()
    assert looked
    for tag, entry, depth, poison in looked:
        assert entry is not None, tag
        assert poison.index.instances[entry].ndim == depth, (tag, entry)


def test_a_run_on_other_inputs_reuses_the_control_plane_and_other_operands_do_not():
    """The control plane depends on the record's operands only: a second run of the same kernel on other data
    computes the new outputs with the cached findings; other phases are another record's operands."""
    case = aj.build_case(str(KERNELS / "phases.py"), "kloop_recipe")
    CONTROL_CACHE.clear()  # other tests of this worker may have run these records
    first = aj.run(case.kernel, case.inputs, case.outputs, chip=case.chip, params=case.params)
    misses = CONTROL_CACHE.misses
    other = {name: np.asarray(x)[::-1].copy() for name, x in case.inputs.items()}
    again = aj.run(case.kernel, other, case.outputs, chip=case.chip, params=case.params)
    assert CONTROL_CACHE.misses == misses
    assert again.report().verdict is first.report().verdict is case.expect
    for out, want in case.reference(other).items():
        np.testing.assert_allclose(np.asarray(again.outputs[out], np.float64), want, atol=case.atol, rtol=0)
    changed = {**case.params, "store": 0}  # seed 000 error 2: a race
    found = aj.run(case.kernel, case.inputs, case.outputs, chip=case.chip, params=changed)
    assert CONTROL_CACHE.misses == misses + 1
    assert found.report().verdict is not first.report().verdict


def test_a_record_the_recording_reused_is_found_without_hashing_its_operands_and_a_writable_one_is_not(monkeypatch):
    """``ControlCache.get``: the host's recording hands back the same read-only record for the same arguments, so
    the cache finds it by identity; a record with writable operands (which could have changed in place) is hashed
    every time, and a changed operand is another entry. A launch's block records, made for one call, are not kept
    by identity: however many blocks, the run's record is still found so."""
    from ascjax.runner._planes import ControlCache

    case = aj.build_case(str(KERNELS / "phases.py"), "kloop_recipe")
    chip = aj.get_chip(case.chip)
    control = resolve_control(chip, aj.Options(), None)
    x, spec = {n: np.asarray(v) for n, v in case.inputs.items()}, output_spec(case.outputs)
    record, latency = record_on_host(case.kernel, chip, default_costs(chip), x, spec, case.params)
    cache, hashed = ControlCache(), []
    real = cache._get
    monkeypatch.setattr(cache, "_get", lambda *args: hashed.append(1) or real(*args))
    first = cache.get(record, control, latency)
    assert cache.get(record, control, latency) is first and len(hashed) == 1 and cache.misses == 1
    writable = type(record)(record.template, {k: np.array(v) for k, v in record.operands.items()})
    assert cache.get(writable, control, latency)[0] is first[0]  # equal operands: the same entry, hashed
    writable.operands["cycles"][...] += 1  # a change in place is seen
    assert cache.get(writable, control, latency)[0] is not first[0]
    assert len(hashed) == 3 and cache.misses == 2
    for _ in range(2 * cache.same_size):  # a launch's blocks: records of one call, found by their operands
        cache.get(type(record)(record.template, dict(record.operands)), control, latency, again=False)
    assert len(hashed) == 3 + 2 * cache.same_size
    assert cache.get(record, control, latency) is first and len(hashed) == 3 + 2 * cache.same_size  # not pushed out


def test_a_gm_input_the_kernel_never_writes_comes_back_as_the_callers_array_not_a_copy():
    """The compiled data plane returns no GM tensor that is still its input (a program returning an argument copies
    it): ``run`` puts the caller's array back, so ``state.gm`` holds it as it is, beside the written outputs, the same
    as the traced run's state."""
    case = matmul_case(128, 128, 128)
    a, b = (jnp.asarray(case.inputs[name]) for name in ("a", "b"))
    r = aj.run(case.kernel, {"a": a, "b": b}, case.outputs, params=case.params)
    assert r.state.gm["a"] is a and r.state.gm["b"] is b
    assert sorted(r.state.gm) == ["a", "b", "c"]
    traced = jax.jit(lambda a, b: aj.run(case.kernel, {"a": a, "b": b}, case.outputs, params=case.params).state)(a, b)
    for name in ("a", "b", "c"):
        np.testing.assert_array_equal(np.asarray(r.state.gm[name]), np.asarray(traced.gm[name]))
    np.testing.assert_allclose(np.asarray(r.outputs["c"], np.float64), case.reference(case.inputs)["c"], atol=case.atol)


def test_the_default_cost_table_is_made_once_per_chip_and_cannot_be_changed_in_place():
    """Every run without ``costs`` shares its chip's table: a change in place would reach every later run, so the
    arrays are read-only, and ``Costs.replace`` makes a changed copy."""
    chip = aj.get_chip("a2")
    table = default_costs(chip)
    assert default_costs(aj.get_chip("a2")) is table and default_costs(aj.get_chip("950")) is not table
    with pytest.raises(ValueError, match="read-only"):
        table.mmad_head_cycles[...] = 0
    assert float(table.replace(mmad_head_cycles=1.0).mmad_head_cycles) == 1.0 != float(table.mmad_head_cycles)


def test_runs_that_differ_only_in_the_sanitizer_share_one_compiled_data_plane(monkeypatch):
    """``Options.sanitize`` is the control plane's alone: switching it off traces no second data plane, and the
    outputs are the same bits; ``poison_races``, which the data plane reads, does trace one."""
    from ascjax.runner import _planes

    traced = []
    execute = _planes.execute_data
    monkeypatch.setattr(_planes, "execute_data", lambda *a, **kw: traced.append(a[2]) or execute(*a, **kw))
    case = matmul_case(128, 256, 128)  # shapes no other test of this file runs: its first trace here
    run = lambda **options: aj.run(case.kernel, case.inputs, case.outputs, params=case.params,  # noqa: E731
                                   options=aj.Options(**options))  # fmt: skip
    checked, unchecked = run(), run(sanitize=False)
    assert traced == [aj.Options()]
    np.testing.assert_array_equal(np.asarray(checked.outputs["c"]), np.asarray(unchecked.outputs["c"]))
    run(poison_races=True)
    assert traced == [aj.Options(), aj.Options(poison_races=True)]


def test_a_transformation_of_the_data_alone_reuses_the_control_plane():
    """Under ``jit`` / ``vmap`` / ``grad`` of the inputs only, the record comes from the inputs' shapes and the
    control plane runs once, concretely: a second jitted call on other data runs no control plane, the outputs are
    the eager run's bit for bit, and the verdict is a host value."""
    case = aj.build_case(str(KERNELS / "phases.py"), "kloop_recipe")
    names = sorted(case.inputs)

    def outputs(*xs):
        r = aj.run(case.kernel, dict(zip(names, xs)), case.outputs, chip=case.chip, params=case.params)
        assert not any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(r.control))  # it ran on the host
        return r.outputs

    xs = [jnp.asarray(case.inputs[n]) for n in names]
    eager = outputs(*xs)
    misses = CONTROL_CACHE.misses
    jitted = jax.jit(outputs)(*xs)
    again = jax.jit(outputs)(*(x[::-1] for x in xs))
    batched = jax.vmap(outputs)(*(jnp.stack([x, x[::-1]]) for x in xs))
    assert CONTROL_CACHE.misses <= misses + 1  # the shapes' record once, then reused
    for out, want in case.reference({n: np.asarray(x)[::-1] for n, x in zip(names, xs)}).items():
        np.testing.assert_allclose(np.asarray(again[out], np.float64), want, atol=case.atol, rtol=0)
        np.testing.assert_array_equal(np.asarray(batched[out][1]), np.asarray(again[out]))
        np.testing.assert_array_equal(np.asarray(jitted[out]), np.asarray(eager[out]))


def _scaled_by_its_first_element(k, s=1.0):
    """``out = x * x[0, 0] * s``: a kernel that reads a value of GM while it is traced (``k.gm``)."""
    scale = k.gm("x")[0, 0] * s
    with k.vector(0):
        t = k.alloc("UB", (16, 16), "float32")
        k.copy_gm2ub(t, "x")
        k.sync_notify("MTE2", "V", 0)
        k.sync_wait("MTE2", "V", 0)
        k.mul(t, t, scale)
        k.sync_notify("V", "MTE3", 0)
        k.sync_wait("V", "MTE3", 0)
        k.copy_ub2gm("out", t)


def _run_scaled(x, **params):
    return aj.run(_scaled_by_its_first_element, {"x": x}, {"out": ((16, 16), "float32")}, chip="950", params=params)


def test_a_kernel_that_reads_gm_contents_is_traced_whole_under_a_transformation():
    """A record made from the inputs' shapes cannot see data: a kernel reading GM (``k.gm``) runs as one program."""
    x = jnp.arange(256, dtype=jnp.float32).reshape(16, 16) + 2
    out = jax.jit(lambda x: _run_scaled(x).outputs["out"])(x)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(x * x[0, 0]))


def test_a_kernel_that_reads_gm_contents_is_traced_whole_under_an_eager_vmap_of_its_parameters():
    """Each scenario recorded on the host from the inputs' shapes could not see the data either (``per_scenario``)."""
    x = jnp.arange(256, dtype=jnp.float32).reshape(16, 16) + 2
    ss = jnp.array([1.0, 3.0], jnp.float32)
    swept = jax.vmap(lambda s: _run_scaled(x, s=s))(ss)
    _assert_scaled(swept, x, ss)


def _launch_scaled(x, s):
    return aj.launch(_scaled_by_its_first_element, {"x": x}, {"out": ((16, 16), "float32")}, block_dim=1, chip="950",
                     params={"s": s})  # fmt: skip


@pytest.mark.slow  # the fallback compiles the launch whole (5 s); its run twin above is in the default suite
def test_a_kernel_that_reads_gm_contents_is_launched_whole_under_an_eager_vmap_of_its_parameters():
    x = jnp.arange(256, dtype=jnp.float32).reshape(16, 16) + 2
    ss = jnp.array([1.0, 3.0], jnp.float32)
    _assert_scaled(jax.vmap(lambda s: _launch_scaled(x, s))(ss), x, ss)


def _assert_scaled(result, x, ss):
    assert [aj.Verdict(int(v)) for v in result.verdict] == [aj.Verdict.OK] * len(ss)
    for i in range(len(ss)):
        np.testing.assert_array_equal(np.asarray(result.outputs["out"][i]), np.asarray(x * (x[0, 0] * ss[i])))
