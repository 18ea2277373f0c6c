"""The recording evaluated on the host: ``core.eval_jaxpr`` computes what XLA computes, and a kernel recorded on the
host (``record_on_host``, what ``run`` and ``check`` do) is the record the compiled recording gives, bit for bit."""

import dataclasses
import pathlib

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import GPU_DIV_SQRT

import ascjax as aj
from ascjax.core import _host_eval as host
from ascjax.core import eval_jaxpr, needed_inputs
from ascjax.core._chip import get_chip
from ascjax.engine import default_costs, sync_latency
from ascjax.front._tracing import gm_inputs, output_spec, record_kernel, record_on_host

KERNELS = pathlib.Path(__file__).resolve().parent.parent / "kernels"


def _same(got, want):
    """Equal dtype, shape and bits (NaN included)."""
    want = np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    assert got.tobytes() == want.tobytes(), (got, want)


def _check(fn, *args):
    """``fn``'s jaxpr evaluated on the host equals ``jax.jit(fn)`` on every output."""
    closed = jax.make_jaxpr(fn)(*args)
    got = eval_jaxpr(closed, *jax.tree.leaves(args))
    want = jax.tree.leaves(jax.jit(fn)(*args))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        _same(g, w)


INTS = jnp.asarray([-7, -3, -1, 0, 1, 2, 5, 9], jnp.int32)
FLOATS = jnp.asarray([-2.5, -0.0, 0.0, 0.1, 1.5, 3.75, 1e30, -7.25], jnp.float32)


def test_integer_division_and_remainder_truncate_toward_zero_as_xla_does():
    _check(lambda x, y: (x // 3, x % 3, jax.lax.div(x, jnp.int32(-3)), jax.lax.rem(x, jnp.int32(-3))), INTS, INTS)
    # x / 0: XLA's answer, through JAX (two operands: XLA folds x / x to 1, even where x is 0)
    zeros_between = jnp.asarray([0, -2, 0, 0, 3, 0, -5, 0], jnp.int32)
    _check(lambda x, y: (jax.lax.div(x, y), jax.lax.rem(x, y)), INTS, zeros_between)


@GPU_DIV_SQRT
def test_float32_arithmetic_casts_and_rounding_match_bit_for_bit():
    # each operation rounded once; XLA rewrites some chains (a product fused into the sum it feeds, a division by a
    # broadcast value taken as a product by its reciprocal), so these are kept apart (every kernel records alike)
    seven = jnp.full(8, 7.0, jnp.float32)
    f = lambda x, d: (x * 1.1, x + 3.0, x / d, jnp.ceil(x / (d - 4)), jnp.floor(x), jnp.sign(x), jnp.sqrt(jnp.abs(x)),
                   jnp.maximum(x, 0.5), jnp.clip(x, -1.0, 2.0), x.astype(jnp.int32), x.astype(jnp.bfloat16))  # fmt: skip
    _check(f, FLOATS, seven)
    _check(lambda x, d: (x.astype(jnp.float32) / d, (x * 1000003).astype(jnp.float32), x.astype(bool)), INTS, seven)


def test_shapes_indexing_and_reductions_match():
    m = jnp.arange(24, dtype=jnp.int32).reshape(4, 6) - 7

    def f(m, i):
        return (
            m.T, m.reshape(3, 8)[1:, ::2], jnp.concatenate([m, m], 1), jnp.stack([m, m]), m[::-1],
            m[jnp.asarray([3, 0, 2])], m[:, jnp.asarray([5, 1])], m[i], jnp.take(m, jnp.asarray([1, 9, -1]), mode="fill", fill_value=-5),
            jax.lax.dynamic_slice(m, (i, 2), (2, 3)), jax.lax.dynamic_update_slice(m, m[:1, :2], (i, 5)),
            m.sum(0), m.max(1), m.min(), jnp.argmax(m, 1), jnp.argmin(m, 0), jnp.cumsum(m, 1), jnp.any(m > 3, 0),
            jnp.where(m > 0, m, -m), jnp.broadcast_to(m[:, :1], (4, 6)), jnp.arange(5) * i,
            # whole rows at a batch of indices (clamped, or filled where they leave the rows); a broadcast past the
            # size the evaluator writes out
            m[jnp.asarray([[-9, 7], [i, 1]])], jnp.take(m, jnp.asarray([[1, 9], [-2, i]]), axis=0, mode="fill", fill_value=-5),
            jnp.broadcast_to(i, (70, 70)), jnp.broadcast_to(m[:1] * i, (8, 6)),
        )  # fmt: skip

    _check(f, m, jnp.int32(2))
    _check(f, m, jnp.int32(9))  # out-of-range starts clamp alike


def test_batched_gathers_and_scatters_match():
    m = jnp.arange(24, dtype=jnp.int32).reshape(4, 6) - 7
    at = jnp.asarray([[5, 0], [1, 1], [9, 2], [-1, 3]], jnp.int32)

    def f(m, at, i):
        rows = jnp.asarray([0, 2, 2, 9, 1], jnp.int32)
        return (
            jnp.take_along_axis(m, jnp.clip(at, 0, 5), axis=1), m.at[rows].min(-100, mode="drop"),
            m.reshape(-1).at[jnp.asarray([3, 7, 30])].set(jnp.asarray([1, 2, 3], jnp.int32), mode="drop"),
            m.reshape(-1).at[jnp.asarray([3, 3, 5])].add(5), m.at[:, i].max(4), m.at[i].set(0),
            jax.vmap(lambda row, j: row[j])(m, at[:, 1]),
        )  # fmt: skip

    _check(f, m, at, jnp.int32(2))


def test_a_custom_vmap_function_runs_its_own_jaxpr_on_the_host():
    """The control plane's skip of finished steps (``engine._machine._all_done``) is a ``custom_vmap``: the host
    evaluates its body in NumPy, as it does a ``jit``'s, instead of handing it to JAX."""

    @jax.custom_batching.custom_vmap
    def doubled(x):
        return 2 * x

    doubled.def_vmap(lambda axis_size, in_batched, x: (2 * x, in_batched[0]))
    closed = jax.make_jaxpr(lambda x: doubled(x) + 1)(np.int32(3))
    (call,) = [e for e in closed.jaxpr.eqns if e.primitive.name == "custom_vmap_call"]
    assert host._classify(call, (True,))[0] == "call"
    assert eval_jaxpr(closed, np.int32(3)) == [7]


def test_loops_and_branches_match_and_an_unread_carry_is_not_computed():
    def f(x, n):
        total, ys = jax.lax.scan(lambda c, i: (c + i * x, c * 2), jnp.int32(0), jnp.arange(5, dtype=jnp.int32))
        back, _ = jax.lax.scan(lambda c, i: (c - i, None), jnp.int32(100), jnp.arange(4, dtype=jnp.int32), reverse=True)
        count = jax.lax.while_loop(lambda c: c < n, lambda c: c + 3, jnp.int32(0))
        picked = jax.lax.switch(jnp.clip(n, 0, 2), [lambda: x, lambda: x * 10, lambda: -x])
        return total, ys, back, count, picked

    _check(f, jnp.int32(3), jnp.int32(10))

    def dead_carry(x):
        (_, data), ys = jax.lax.scan(lambda c, i: ((c[0] + 1, c[1] * 1.5), c[0]), (jnp.int32(0), x), None, length=4)
        return ys  # the float carry reaches no output

    closed = jax.make_jaxpr(dead_carry)(jnp.ones(3, jnp.bfloat16))
    scan = next(e for e in closed.jaxpr.eqns if e.primitive.name == "scan")
    # only the stack is needed after the scan: the body computes it and the int carry it reads, not the data
    assert host._scan_live(scan.params, (False, False, True)) == (True, False, True)
    _same(eval_jaxpr(closed, np.ones(3, jnp.bfloat16))[0], dead_carry(jnp.ones(3, jnp.bfloat16)))
    assert needed_inputs(closed) == [False]


def _compiled_record(case, chip, costs):
    @eqx.filter_jit
    def record(inputs, params, costs):
        return record_kernel(case.kernel, inputs, case.outputs, chip=chip, params=params, costs=costs), sync_latency(
            costs
        )

    return record(gm_inputs(case.inputs), case.params or {}, costs)


def _records_agree(path: str, name: str):
    case = aj.build_case(str(KERNELS / path), name)
    chip = get_chip(case.chip)
    costs = default_costs(chip)
    spec = output_spec(case.outputs)
    got, got_latency = record_on_host(case.kernel, chip, costs, gm_inputs(case.inputs), spec, case.params or {})
    want, want_latency = _compiled_record(case, chip, costs)
    assert got.template.n_instances == want.template.n_instances
    assert sorted(got.operands) == sorted(want.operands)
    for key in want.operands:
        _same(np.asarray(got.operands[key]), want.operands[key])
    for g, w in zip(jax.tree.leaves(got_latency), jax.tree.leaves(want_latency)):
        _same(np.asarray(g), w)


@pytest.mark.parametrize(
    "path, name",
    [("phases.py", "kloop_recipe"), ("pingpong.py", "pingpong_sections_odd"), ("unit_flag.py", "size_mismatch_reset"),
     ("zero_trip.py", "buggy_three_tiles"), ("vec_cube.py", "vec_cube_no_wait")],
)  # fmt: skip
def test_a_kernel_recorded_on_the_host_is_the_compiled_recording_bit_for_bit(path, name):
    _records_agree(path, name)


@pytest.mark.parametrize(
    "path, name",
    [("pingpong.py", "pingpong_sections_odd"), ("zero_trip.py", "buggy_three_tiles"), ("flash_attention.py", "f16_s187_d64")],
)  # fmt: skip
def test_a_loop_recorded_as_one_batched_program_is_the_compiled_recording_bit_for_bit(path, name, monkeypatch):
    """A long scan whose iterations share no needed value is evaluated on the host as one ``vmap`` of its body
    (``BATCHED_SCAN_LENGTH``); here every scan is, and the record is the compiled one still."""
    from ascjax.front import _tracing

    batched, scan_batched = [], host._scan_batched
    monkeypatch.setattr(host, "BATCHED_SCAN_LENGTH", 1)
    monkeypatch.setattr(host, "_scan_batched", lambda *a: batched.append(a[-1]) or scan_batched(*a))
    _tracing.forget_recordings()
    _records_agree(path, name)
    assert batched  # the kernel's loops took the batched path


def _every_case():
    for path in sorted(KERNELS.glob("*.py")):
        for name in aj.load_cases(str(path)):
            yield path.name, name


@pytest.mark.slow
@pytest.mark.parametrize("path, name", list(_every_case()))
def test_every_kernel_case_records_alike_on_the_host_and_compiled(path, name):
    try:
        _records_agree(path, name)
    except ValueError as exc:  # a case refused while traced refuses alike on both paths
        with pytest.raises(ValueError, match=str(exc).splitlines()[0][:40].replace("(", r"\(").replace(")", r"\)")):
            case = aj.build_case(str(KERNELS / path), name)
            _compiled_record(case, get_chip(case.chip), default_costs(get_chip(case.chip)))


def test_a_run_again_on_other_data_reuses_the_record():
    """The record depends on the arrays the recording reads (parameters, costs), not on the data."""
    case = aj.build_case(str(KERNELS / "phases.py"), "kloop_recipe")
    chip = get_chip(case.chip)
    costs, spec = default_costs(chip), output_spec(case.outputs)
    inputs = gm_inputs(case.inputs)
    first, _ = record_on_host(case.kernel, chip, costs, inputs, spec, case.params)
    other = {k: -v for k, v in inputs.items()}
    assert record_on_host(case.kernel, chip, costs, other, spec, case.params)[0] is first
    slower = eqx.tree_at(lambda c: c.mmad_head_cycles, costs, costs.mmad_head_cycles + 7)
    again, _ = record_on_host(case.kernel, chip, slower, inputs, spec, case.params)
    assert again is not first and not np.array_equal(again.operands["cycles"], first.operands["cycles"])


def _recorded(path: str, name: str):
    """A kernel case's chip, record and sync latency, recorded on the host (as ``run`` records it)."""
    case = aj.build_case(str(KERNELS / path), name)
    chip = get_chip(case.chip)
    record, latency = record_on_host(case.kernel, chip, default_costs(chip), gm_inputs(case.inputs),
                                     output_spec(case.outputs), case.params or {})  # fmt: skip
    return chip, record, latency


@pytest.mark.parametrize(
    "path, name",
    [("unit_flag.py", "seed000_error3"), ("matmul_softmax.py", "matmul_softmax_no_wait"), ("phases.py", "seed000_error2"),
     ("vec_cube.py", "vec_cube_one_aiv_sets")],
)  # fmt: skip
def test_the_control_plane_on_the_host_finds_what_the_compiled_one_finds(path, name, monkeypatch):
    """A size class's control plane runs on the host (the record's own, specialised) until its compile pays; either
    way the findings, the timeline and the machine's counters are the same."""
    from ascjax.core import HostFirst
    from ascjax.engine import _control, run_control
    from ascjax.runner._check import control_options

    chip, record, latency = _recorded(path, name)
    options = control_options(chip)
    assert _control.static(record.template, options).shared  # a size class's record
    results = []
    for compile_s in (float("inf"), 0.0):  # always on the host, always compiled
        monkeypatch.setattr(_control, "_run_shared", HostFirst(_control._run_shared.compiled, compile_s))
        results.append(run_control(record, options, latency))
        assert _control._run_shared.compiled_programs() == (compile_s == 0.0)
    host, compiled = results
    for field in ("findings", "n_findings", "dropped", "start", "end", "leave", "source", "racy", "reordered",
                  "deadlocked", "events"):  # fmt: skip
        _same(np.asarray(getattr(host, field)), getattr(compiled, field))
    for field in ("pos", "free_t", "count", "flag", "uf"):  # the counters the reports read, over the real resources
        got, want = np.asarray(getattr(host.machine, field)), np.asarray(getattr(compiled.machine, field))
        _same(got, want[tuple(slice(0, n) for n in got.shape)])


def _host_and_compiled(monkeypatch, kept, record, options, latency):
    """``record``'s control plane on the host (specialised to it) and compiled (``kept``'s size-class program), the
    same findings and timeline either way."""
    from ascjax.core import HostFirst
    from ascjax.engine import _control, run_control

    runs = []
    for compile_s in (float("inf"), 0.0):  # on the host, compiled
        monkeypatch.setattr(_control, "_run_shared", HostFirst(kept, compile_s))
        runs.append(run_control(record, options, latency))
    for field in ("findings", "n_findings", "dropped", "start", "end", "racy", "deadlocked"):
        _same(np.asarray(getattr(runs[0], field)), getattr(runs[1], field))
    return runs[1]


def test_a_size_class_program_switches_the_sanitizer_as_the_host_specialises_it(monkeypatch):
    """A size class's compiled control plane takes the sanitizer as a traced switch: runs with it and without share
    one program, and each finds what the host's program, specialised to the option, finds (off: no race)."""
    from ascjax.core import Finding, KeptPrograms
    from ascjax.engine import _control
    from ascjax.runner._check import control_options

    chip, record, latency = _recorded("phases.py", "seed000_error2")  # a race
    kept = KeptPrograms(_control._run, _control.QUICK_COMPILE)
    found = {
        s: _host_and_compiled(
            monkeypatch, kept, record, dataclasses.replace(control_options(chip), sanitize=s), latency
        )
        for s in (True, False)
    }
    assert len(kept) == 1  # one program for both
    kinds = {s: set(np.asarray(r.findings)[: int(r.n_findings), 0].tolist()) for s, r in found.items()}
    assert int(Finding.RACE) in kinds[True] and int(Finding.RACE) not in kinds[False]
    assert not np.any(np.asarray(found[False].racy)) and np.any(np.asarray(found[True].racy))


def test_a_size_class_program_takes_the_cross_core_fences_from_the_tables(monkeypatch):
    """Whether a cross-core wait blocks its core (A2, A3) or not (950) is in the tables alone
    (``ControlOptions.for_program``): both models run one compiled program, each as the host specialises it."""
    from ascjax.core import KeptPrograms
    from ascjax.engine import _control
    from ascjax.runner._check import control_options

    chip, record, latency = _recorded("matmul_softmax.py", "matmul_softmax")
    kept = KeptPrograms(_control._run, _control.QUICK_COMPILE)
    models = [dataclasses.replace(control_options(chip), cross_wait_blocks_core=b) for b in (True, False)]
    for options in models:
        _host_and_compiled(monkeypatch, kept, record, options, latency)
    assert len(kept) == 1  # one program for both models
    fences = [_control.static(record.template, options).fence for options in models]
    assert not np.array_equal(*fences)  # the program gets the two models' fences as data


def test_host_first_compiles_once_the_host_has_cost_what_a_compile_costs():
    import time

    from ascjax.core import HostFirst

    calls = []

    def on_host():
        time.sleep(0.05)
        calls.append("host")
        return "host"

    first = HostFirst(lambda x: calls.append("compiled") or "compiled", compile_s=0.12)
    x = np.zeros(3, np.int32)
    got = [first((x,), on_host, host_s=0.04) for _ in range(4)]
    assert got == ["host", "host", "compiled", "compiled"]  # 0.05 + 0.05 spent, the next would pass 0.12
    assert first((np.zeros(4, np.int32),), on_host, host_s=0.2) == "compiled"  # one run would cost more than a compile
    assert first((np.zeros(5, np.int32),), on_host, host_s=0.01) == "host"  # another program: its own budget
    assert first.compiled_programs() == 2


def test_kept_programs_survive_jax_clear_caches_and_compute_what_jit_computes():
    """A size class's control plane is held outside JAX's caches: after ``jax.clear_caches()`` (a process bounding
    its memory) the next call traces nothing again; its own ``clear`` (``ascjax.clear_caches``) drops it."""
    from ascjax.core import KeptPrograms

    traces = []

    class Out(eqx.Module):
        total: jax.Array
        label: str = eqx.field(static=True)

    def fun(x, scale: int):
        traces.append(scale)
        return Out(total=jnp.cumsum(x) * scale, label=f"x{scale}")

    kept = KeptPrograms(fun, {"xla_backend_optimization_level": 0})
    x = np.arange(5, dtype=np.int32)
    first = kept(x, 3)
    jax.clear_caches()
    again = kept(jnp.asarray(x), 3)  # a device array of the same shape: the same program
    assert traces == [3] and len(kept) == 1
    want = eqx.filter_jit(fun)(x, 3)
    for got in (first, again):
        assert got.label == want.label == "x3"
        _same(np.asarray(got.total), want.total)
    kept(x, 4)  # another static value: another program
    assert traces == [3, 3, 4] and len(kept) == 2
    kept.clear()
    kept(x, 3)
    assert traces[-1] == 3 and len(kept) == 1


def test_a_kept_program_started_in_a_thread_is_compiled_there_and_called_here():
    """``KeptPrograms.start`` traces, lowers and compiles in a thread of its own (XLA compiles without Python's lock,
    so the caller compiles another program meanwhile) and returns the outputs' shapes once lowered; the call then runs
    that program. A program that fails to trace raises in the caller, and is not kept."""
    import threading

    from ascjax.core import KeptPrograms

    traced_in = []

    def fun(x, scale: int):
        traced_in.append(threading.get_ident())
        if scale < 0:
            raise ValueError("a negative scale")
        return {"total": jnp.cumsum(x) * scale, "twice": jnp.concatenate([x, x])}

    kept = KeptPrograms(fun, {"xla_backend_optimization_level": 0})
    x = np.arange(5, dtype=np.int32)
    shapes = kept.start(jax.ShapeDtypeStruct(x.shape, x.dtype), 3)
    assert shapes["total"].shape == (5,) and shapes["twice"].shape == (10,) and shapes["twice"].dtype == np.int32
    assert traced_in != [] and traced_in[0] != threading.get_ident()  # traced in the other thread
    got = kept(x, 3)
    assert len(traced_in) == 1 and len(kept) == 1  # the started program, not traced again
    _same(np.asarray(got["total"]), (np.cumsum(x) * 3).astype(np.int32))
    _same(np.asarray(got["twice"]), np.concatenate([x, x]))
    with pytest.raises(ValueError, match="negative scale"):
        kept.start(x, -1)
    assert len(kept) == 1
