"""Dynamic verdicts: every bad program beside its good twin, under jit and vmap."""

import functools
import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ascjax as aj
from ascjax import UnitFlagMode
from ascjax.core import Finding
from ascjax.front._sites import short_path

UPDATE = UnitFlagMode.ENABLE_UPDATE


def verdict_of(kernel, inputs=None, outputs=None, **kw):
    return aj.run(kernel, inputs or {}, outputs or {}, **kw)


def line(fn, text):
    """``path:N`` as findings name it: the line of ``fn`` holding ``text``."""
    src, first = inspect.getsourcelines(fn)
    return f"{short_path(__file__)}:{first + next(i for i, s in enumerate(src) if text in s)}"


def entry(message, site):
    """The line of a deadlock's words about the instruction at ``site``."""
    return next(s for s in message.splitlines() if f"{site} (" in s)


def kinds(result, index=None):
    return [f.kind for f in result.findings(index)]


BLOCKING = aj.control_options(aj.get_chip("a2"), wait_blocks_issue=True)


# --- intra-core flags -----------------------------------------------------------------
def test_notify_then_wait_is_ok_and_wait_alone_deadlocks():
    def good(k):
        k.sync_notify("MTE2", "MTE1", 3)
        k.sync_wait("MTE2", "MTE1", 3)

    def bad(k):
        k.sync_wait("MTE2", "MTE1", 3)

    assert verdict_of(good).ok
    result = verdict_of(bad)
    rep, (dead,) = result.report(), result.findings()
    assert rep.verdict is aj.Verdict.DEADLOCK and dead.kind is Finding.DEADLOCK
    assert dead.site.startswith("sync_wait at") and dead.site.endswith(f"{line(bad, 'sync_wait')} (AIC.MTE1)")
    assert rep.location.endswith(line(bad, "sync_wait"))
    assert "waits for flag MTE2 -> MTE1 event 3 on AIC, which no set delivers" in rep.message


def test_wait_queued_before_its_notify_is_ok_but_not_on_the_issuer():
    """Decoupled issue (semantics §8): a wait on FIX queued before M's notify is fine; on S it stalls the issuer."""

    def early(k):
        k.sync_wait("M", "FIX", 0)
        k.sync_notify("M", "FIX", 0)

    def on_s(k):
        k.sync_wait("MTE2", "S", 0)
        k.sync_notify("MTE2", "S", 0)

    assert verdict_of(early).ok
    rep = verdict_of(on_s).report()
    assert rep.verdict is aj.Verdict.DEADLOCK and rep.location.endswith(line(on_s, "sync_wait"))
    assert f"sync_wait at {line(on_s, 'sync_wait')} (AIC.S) waits for flag MTE2 -> S event 0" in rep.message
    assert f"sync_notify at {line(on_s, 'sync_notify')} (AIC.MTE2)" in rep.message  # never issued
    # the chip model's "issue blocks on every wait": the FIX wait holds the issue of M's notify
    rep = verdict_of(early, control=BLOCKING).report()
    assert rep.verdict is aj.Verdict.DEADLOCK
    assert "(AIC.FIX) waits for flag M -> FIX event 0" in entry(rep.message, line(early, "sync_wait"))
    assert "(AIC.M)" in entry(rep.message, line(early, "sync_notify"))


def test_blocking_wait_deadlock_names_the_later_set():
    def early(k):
        k.sync_wait("M", "FIX", 0)
        k.sync_notify("M", "FIX", 0)

    rep = verdict_of(early, control=BLOCKING).report()
    wait = entry(rep.message, line(early, "sync_wait"))
    assert f"sync_notify at {line(early, 'sync_notify')}" in wait and "no set delivers" not in wait


def test_set_twice_is_a_sync_error_and_unconsumed_set_is_leftover():
    def twice(k):
        k.sync_notify("MTE1", "M", 1)  # first
        k.sync_notify("MTE1", "M", 1)  # second
        k.sync_wait("MTE1", "M", 1)

    def leftover(k):
        k.sync_notify("MTE1", "M", 1)

    result = verdict_of(twice)
    (lost,) = result.findings()
    assert result.report().verdict is aj.Verdict.SYNC_ERROR and lost.kind is Finding.DOUBLE_SET
    assert f"{line(twice, '# second')} (" in lost.site and f"{line(twice, '# first')} (" in lost.other
    assert "sets flag MTE1 -> M event 1 on AIC while it is still set" in lost.message
    assert "one signal is lost" in lost.message
    result = verdict_of(leftover)
    (left,) = result.findings()
    assert result.report().verdict is aj.Verdict.LEFTOVER and left.kind is Finding.LEFTOVER
    assert "flag MTE1 -> M event 1 on AIC is still set when the kernel ends" in left.message
    assert f"set by sync_notify at {line(leftover, 'sync_notify')} (AIC.MTE1)" in left.message


def _event_id_kernel(k, ev):
    k.sync_notify("MTE2", "MTE1", ev)
    k.sync_wait("MTE2", "MTE1", ev)


@functools.cache
def _event_ids():
    ids = jnp.array([0, 7, 8, -1], jnp.int32)
    return jax.vmap(lambda ev: verdict_of(_event_id_kernel, params={"ev": ev}))(ids)


def test_traced_event_ids_under_vmap():
    result = _event_ids()
    assert [aj.Verdict(int(v)) for v in result.verdict] == [
        aj.Verdict.OK,
        aj.Verdict.OK,
        aj.Verdict.SYNC_ERROR,
        aj.Verdict.SYNC_ERROR,
    ]
    for i, ev in ((2, 8), (3, -1)):
        notify, wait = result.findings(i)  # both name the id, in program order
        assert notify.kind is wait.kind is Finding.SYNC_ERROR
        assert notify.site.startswith("sync_notify at") and wait.site.startswith("sync_wait at")
        assert f"event_id {ev} is outside [0, 8) on chip a2" in notify.message
    wide = aj.get_chip("a2").replace(intra_event_ids=16)
    assert verdict_of(_event_id_kernel, params={"ev": jnp.int32(8)}, chip=wide).ok


def test_vmapped_result_reports_each_scenario():
    rep = _event_ids().report(2)
    assert rep.verdict is aj.Verdict.SYNC_ERROR and "event_id 8" in rep.message


def test_traced_event_id_words_name_the_range():
    assert "event_id 8 is outside [0, 8) on chip a2" in _event_ids().findings(2)[0].message


def test_static_sync_misuse_raises_at_trace_time():
    with pytest.raises(ValueError, match=r"event id range.*event_id 8 is outside \[0, 8\) on chip a2"):
        verdict_of(lambda k: k.sync_notify("MTE2", "MTE1", 8))
    with pytest.raises(ValueError, match=r"flag pipes.*V -> M.*not a legal pair"):
        verdict_of(lambda k: k.sync_notify("V", "M", 0))
    with pytest.raises(ValueError, match="not PIPE_S"):
        verdict_of(lambda k: k.sync_pipe("S"))
    with pytest.raises(ValueError, match="unknown pipe"):
        verdict_of(lambda k: k.sync_pipe("MTE9"))


def _behind_the_barrier(k):
    k.sync_wait("MTE2", "MTE1", 0)  # never notified
    k.sync_pipe("ALL")
    k.sync_notify("M", "FIX", 0)  # never issued: the scalar unit is stuck at the barrier
    k.sync_wait("M", "FIX", 0)


def test_pipe_all_barrier_behind_a_blocked_pipe_blocks_everything():
    result = verdict_of(_behind_the_barrier)
    rep, (dead,) = result.report(), result.findings()
    assert rep.verdict is aj.Verdict.DEADLOCK and dead.kind is Finding.DEADLOCK
    barrier = line(_behind_the_barrier, "sync_pipe")
    assert dead.site.startswith("sync_pipe at") and dead.site.endswith(f"{barrier} (AIC.S)")
    assert "(PIPE_ALL) waits for the core's earlier instructions" in entry(rep.message, barrier)
    blocked = entry(rep.message, line(_behind_the_barrier, "# never notified"))
    assert "(AIC.MTE1) waits for flag MTE2 -> MTE1 event 0 on AIC, which no set delivers" in blocked


def test_pipe_all_deadlock_names_the_barrier_that_holds_later_ops():
    rep = verdict_of(_behind_the_barrier).report()
    barrier = line(_behind_the_barrier, "sync_pipe")
    for held in ("sync_notify", 'sync_wait("M"'):
        assert f"sync_pipe at {barrier}" in entry(rep.message, line(_behind_the_barrier, held))
    assert rep.message.count("which no set delivers") == 1  # the MTE1 wait's flag only


# --- a small cube program with traced parameters ----------------------------------------
def _cube(k, m=32, kk=32, n=32, row=0, store_row=0, mode=0, fix_mode=0, drain=True, direction="n"):
    a_l1 = k.alloc("L1", (32, 32), "float16", name="a_l1")
    b_l1 = k.alloc("L1", (32, 32), "float16", name="b_l1")
    al = k.alloc("L0A", (32, 32), "float16", name="al")
    br = k.alloc("L0B", (32, 32), "float16", name="br")
    ac = k.alloc("L0C", (32, 32), "float32", name="ac")
    k.set_mmad_direction(direction)
    k.copy_gm2l1_nd2nz(a_l1, "a", row=row)
    k.copy_gm2l1_nd2nz(b_l1, "b")
    k.sync_notify("MTE2", "MTE1", 0)
    k.sync_wait("MTE2", "MTE1", 0)
    k.copy_l12l0a(al, a_l1)
    k.copy_l12l0b(br, b_l1, transpose=True)
    k.sync_notify("MTE1", "M", 0)
    k.sync_wait("MTE1", "M", 0)
    k.mmad(ac, al, br, m, kk, n, unit_flag_mode=mode, c_matrix_init_val=True)
    if drain and not fix_mode:  # no unit flag: software sync orders the fixpipe
        k.sync_notify("M", "FIX", 0)
        k.sync_wait("M", "FIX", 0)
    if drain:
        k.fixpipe("c", ac, dst_row=store_row, unit_flag_mode=fix_mode)


A = np.random.default_rng(0).uniform(-1, 1, (64, 32)).astype(np.float16)
B = np.random.default_rng(1).uniform(-1, 1, (32, 32)).astype(np.float16)
INPUTS = {"a": A, "b": B}
OUTPUTS = {"c": ((40, 32), "float32")}
MMAD, FIXPIPE, LOAD_A = line(_cube, "k.mmad("), line(_cube, "k.fixpipe("), line(_cube, '"a", row=row')


def _cube_run(**params):
    return aj.run(_cube, INPUTS, OUTPUTS, params=params)


def test_traced_sizes_and_offsets_out_of_range_are_bounds_not_clamped():
    """An operand past its limit is a BOUNDS finding and its op does nothing: what reads the bytes it would have
    written reads uninitialised ones, which ranks above it."""

    def go(m, row, store_row):
        r = _cube_run(m=m, row=row, store_row=store_row)
        return r, r.outputs["c"]

    ms = jnp.array([32, 33, 32, 32, 16], jnp.int32)
    rows = jnp.array([32, 0, 33, 0, 0], jnp.int32)
    store_rows = jnp.array([8, 0, 0, 9, 0], jnp.int32)
    result, outs = jax.vmap(go)(ms, rows, store_rows)
    U, BD = Finding.UNINITIALIZED, Finding.BOUNDS
    assert [kinds(result, i) for i in range(4)] == [[], [U, BD], [U, BD], [BD]]
    assert [aj.Verdict(int(v)) for v in result.verdict[:4]] == [
        aj.Verdict.OK,
        aj.Verdict.UNINITIALIZED,
        aj.Verdict.UNINITIALIZED,
        aj.Verdict.BOUNDS,
    ]
    uninit, bounds = result.findings(1)  # m = 33: the mmad wrote nothing the fixpipe drains
    assert f"{MMAD} (AIC.M)" in bounds.site and "m = 33 is outside [0, 32]" in bounds.message
    assert f"{FIXPIPE} (AIC.FIX)" in uninit.site and "read of L0C bytes [0, 4096)" in uninit.message
    uninit, bounds = result.findings(2)  # row 33: the load of A wrote nothing the L1 -> L0A copy reads
    assert f"{LOAD_A} (AIC.MTE2)" in bounds.site and "row offset = 33 is outside [0, 32]" in bounds.message
    assert uninit.site.startswith("copy_l12l0a at") and "read of L1 bytes [0, 2048)" in uninit.message
    (bounds,) = result.findings(3)
    assert f"{FIXPIPE} (AIC.FIX)" in bounds.site and "row offset = 9 is outside [0, 8]" in bounds.message
    ref = A[32:64].astype(np.float64) @ B.astype(np.float64)
    np.testing.assert_allclose(np.asarray(outs[0])[8:40], ref, atol=1e-3)
    assert np.all(np.asarray(outs[0])[:8] == 0)
    assert np.all(np.asarray(outs[3]) == 0)  # the out-of-range store wrote nothing at all
    # traced m = 16 computes 16 rows (the fixpipe drains all 32: test_mmad_of_fewer_rows_...)
    np.testing.assert_allclose(np.asarray(outs[4])[:16], A[:16].astype(np.float64) @ B.astype(np.float64), atol=1e-3)


def test_mmad_of_fewer_rows_leaves_the_rest_of_l0c_uninitialised():
    result = _cube_run(m=jnp.int32(16))
    (uninit,) = result.findings()
    assert uninit.kind is Finding.UNINITIALIZED and f"{FIXPIPE} (AIC.FIX)" in uninit.site
    assert "read of L0C bytes [1024, 2048)" in uninit.message
    assert _cube_run(m=jnp.int32(32)).ok


def test_unit_flag_left_set_is_leftover():
    result = _cube_run(mode=UPDATE, drain=False)
    (left,) = result.findings()
    assert result.report().verdict is aj.Verdict.LEFTOVER and left.kind is Finding.LEFTOVER
    assert "unit flag of L0C blocks 0..7 is still set when the kernel ends" in left.message
    assert f"set by mmad at {MMAD} (AIC.M)" in left.message
    assert _cube_run(mode=UPDATE, fix_mode=UPDATE).ok


def test_direction_warning():
    assert not _cube_run(mode=UPDATE, fix_mode=UPDATE).report().warnings
    rep = _cube_run(mode=UPDATE, fix_mode=UPDATE, direction="m").report()
    assert rep.verdict is aj.Verdict.OK and "set_mmad_direction('n')" in rep.warnings[0]


def test_gemv_layout_traced_m():
    """m == 1 with a fractal A is a LAYOUT finding when m is traced (a ValueError when static); the mmad does
    nothing, so the fixpipe's read of L0C is uninitialised, and that ranks first."""
    result = _cube_run(m=jnp.int32(1))
    uninit, layout = result.findings()
    assert result.report().verdict is aj.Verdict.UNINITIALIZED and uninit.kind is Finding.UNINITIALIZED
    assert f"{FIXPIPE} (AIC.FIX)" in uninit.site
    assert layout.kind is Finding.LAYOUT and f"{MMAD} (AIC.M)" in layout.site
    assert "m = 1 runs GEMV" in layout.message and "disable_gemv=True" in layout.message
    with pytest.raises(ValueError, match="GEMV layout"):
        _cube_run(m=1)


def test_every_finding_is_reported_most_severe_first():
    """Version 1 kept the first error; now each is reported, ranked, and the verdict is the most severe one's."""

    def kernel(k, ev):
        k.sync_notify("MTE2", "MTE1", ev)  # out of range: a sync error
        k.sync_notify("MTE1", "M", 0)  # never waited: leftover
        k.sync_notify("MTE1", "M", 0)  # set while still set: a lost signal

    def good(k, ev):
        k.sync_notify("MTE2", "MTE1", ev)
        k.sync_wait("MTE2", "MTE1", ev)
        k.sync_notify("MTE1", "M", 0)
        k.sync_wait("MTE1", "M", 0)

    result = verdict_of(kernel, params={"ev": jnp.int32(9)})
    left, lost, bad_id = result.findings()
    assert [left.kind, lost.kind, bad_id.kind] == [Finding.LEFTOVER, Finding.DOUBLE_SET, Finding.SYNC_ERROR]
    assert result.report().verdict is aj.Verdict.LEFTOVER
    assert f"{line(kernel, '# never waited')} (" in left.site and "flag MTE1 -> M event 0 on AIC" in left.message
    assert f"{line(kernel, '# set while')} (" in lost.site and f"{line(kernel, '# never waited')} (" in lost.other
    assert f"{line(kernel, '# out of range')} (" in bad_id.site and "event_id 9" in bad_id.message
    assert verdict_of(good, params={"ev": jnp.int32(7)}).ok


def test_a_kernel_that_issues_nothing_reports_ok_in_zero_cycles():
    """A record with no instance: the report has no access to name and still renders (seed rule l0c_256k_on_950)."""

    def nothing(k):
        k.alloc("L0C", (16, 16), "float32", name="c")

    rep = aj.run(nothing, {}, {}, chip="950").report()
    assert rep.verdict is aj.Verdict.OK and "cycles: 0 " in str(rep)


def test_throw_inside_jit_raises():
    """Only the data is traced: the control plane ran on the host, so the full report is raised while tracing."""

    def bad(k):
        k.sync_wait("MTE2", "MTE1", 0)

    @jax.jit
    def go(x):
        return aj.run(bad, {"x": x}, {}, throw=True).verdict

    with pytest.raises(aj.DeadlockError, match="sync_wait at .*test_verdicts.py.* which no set delivers"):
        jax.block_until_ready(go(jnp.zeros(3)))


def test_throw_inside_jit_with_a_traced_event_id_raises_when_it_runs():
    """A traced parameter: the verdict is traced too, and the error is raised when the program runs."""

    def bad(k, event_id):
        k.sync_wait("MTE2", "MTE1", event_id)

    @jax.jit
    def go(x, event_id):
        return aj.run(bad, {"x": x}, {}, params={"event_id": event_id}, throw=True).verdict

    with pytest.raises(Exception, match="no op sets"):
        jax.block_until_ready(go(jnp.zeros(3), jnp.int32(0)))
