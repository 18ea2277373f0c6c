"""Dynamic verdicts: every bad program beside its good twin, under jit and vmap."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ascjax as aj
from ascjax import UnitFlagMode

UPDATE = UnitFlagMode.ENABLE_UPDATE


def verdict_of(kernel, inputs=None, outputs=None, **kw):
    return aj.run(kernel, inputs or {}, outputs or {}, **kw)


# --- intra-core flags -----------------------------------------------------------------
def test_notify_then_wait_is_ok_and_wait_alone_deadlocks():
    def good(k):
        k.sync_notify("MTE2", "MTE1", 3)
        k.sync_wait("MTE2", "MTE1", 3)

    def bad(k):
        k.sync_wait("MTE2", "MTE1", 3)

    assert verdict_of(good).ok
    rep = verdict_of(bad).report()
    assert rep.verdict is aj.Verdict.DEADLOCK and rep.op == "sync_wait"
    assert "AIC.MTE1 is stuck" in rep.message and "flag MTE2->MTE1 event 3" in rep.message
    assert "no sync_notify(MTE2, MTE1, 3) ran before it" in rep.message


def test_wait_before_its_notify_hints_at_the_later_producer():
    def bad(k):
        k.sync_wait("M", "FIX", 0)
        k.sync_notify("M", "FIX", 0)

    rep = verdict_of(bad).report()
    assert rep.verdict is aj.Verdict.DEADLOCK
    assert "sync_notify at" in rep.message and "issued later, would release this wait" in rep.message


def test_set_twice_is_a_sync_error_and_unconsumed_set_is_leftover():
    def twice(k):
        k.sync_notify("MTE1", "M", 1)
        k.sync_notify("MTE1", "M", 1)
        k.sync_wait("MTE1", "M", 1)

    def leftover(k):
        k.sync_notify("MTE1", "M", 1)

    rep = verdict_of(twice).report()
    assert rep.verdict is aj.Verdict.SYNC_ERROR and "set while it is still 1" in rep.message
    rep = verdict_of(leftover).report()
    assert (
        rep.verdict is aj.Verdict.LEFTOVER and "flag MTE1->M event 1" in rep.message and "never waited" in rep.message
    )


def test_traced_event_ids_under_vmap():
    def kernel(k, ev):
        k.sync_notify("MTE2", "MTE1", ev)
        k.sync_wait("MTE2", "MTE1", ev)

    ids = jnp.array([0, 7, 8, -1], jnp.int32)
    result = jax.vmap(lambda ev: verdict_of(kernel, params={"ev": ev}))(ids)
    assert [aj.Verdict(int(v)) for v in result.verdict] == [
        aj.Verdict.OK,
        aj.Verdict.OK,
        aj.Verdict.SYNC_ERROR,
        aj.Verdict.SYNC_ERROR,
    ]
    assert "event_id 8 is outside [0, 8) on chip a2" in result.report(2).message
    wide = aj.get_chip("a2").replace(intra_event_ids=16)
    assert verdict_of(kernel, params={"ev": jnp.int32(8)}, chip=wide).ok


def test_static_sync_misuse_raises_at_trace_time():
    with pytest.raises(ValueError, match=r"event id range.*event_id 8 is outside \[0, 8\) on chip a2"):
        verdict_of(lambda k: k.sync_notify("MTE2", "MTE1", 8))
    with pytest.raises(ValueError, match=r"flag pipes.*V -> M.*not a legal pair"):
        verdict_of(lambda k: k.sync_notify("V", "M", 0))
    with pytest.raises(ValueError, match="not PIPE_S"):
        verdict_of(lambda k: k.sync_pipe("S"))
    with pytest.raises(ValueError, match="unknown pipe"):
        verdict_of(lambda k: k.sync_pipe("MTE9"))


def test_pipe_all_barrier_behind_a_blocked_pipe_blocks_everything():
    def kernel(k):
        k.sync_wait("MTE2", "MTE1", 0)  # never notified
        k.sync_pipe("ALL")
        k.sync_notify("M", "FIX", 0)  # never issued: the scalar unit is stuck at the barrier
        k.sync_wait("M", "FIX", 0)

    rep = verdict_of(kernel).report()
    assert rep.verdict is aj.Verdict.DEADLOCK and rep.op == "sync_wait"
    assert "AIC.S is stuck at sync_pipe" in rep.message and "waits for pipe AIC.MTE1" in rep.message
    assert "AIC.FIX" not in rep.message  # later ops were never issued, so FIX never waited


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


def _cube_run(**params):
    return aj.run(_cube, INPUTS, OUTPUTS, params=params)


def test_traced_sizes_and_offsets_out_of_range_are_bounds_not_clamped():
    def go(m, row, store_row):
        r = _cube_run(m=m, row=row, store_row=store_row)
        return r.verdict, r.outputs["c"]

    ms = jnp.array([32, 33, 32, 32, 16], jnp.int32)
    rows = jnp.array([32, 0, 33, 0, 0], jnp.int32)
    store_rows = jnp.array([8, 0, 0, 9, 0], jnp.int32)
    verdicts, outs = jax.vmap(go)(ms, rows, store_rows)
    assert [aj.Verdict(int(v)) for v in verdicts] == [
        aj.Verdict.OK,
        aj.Verdict.BOUNDS,
        aj.Verdict.BOUNDS,
        aj.Verdict.BOUNDS,
        aj.Verdict.UNINITIALIZED,
    ]
    ref = A[32:64].astype(np.float64) @ B.astype(np.float64)
    np.testing.assert_allclose(np.asarray(outs[0])[8:40], ref, atol=1e-3)
    assert np.all(np.asarray(outs[0])[:8] == 0)
    assert np.all(np.asarray(outs[3]) == 0)  # the out-of-range store wrote nothing at all
    # traced m = 16 computes 16 rows, but the fixpipe drains all 32: half of what it reads was never written
    np.testing.assert_allclose(np.asarray(outs[4])[:16], A[:16].astype(np.float64) @ B.astype(np.float64), atol=1e-3)
    result = jax.vmap(lambda m: _cube_run(m=m))(jnp.array([33], jnp.int32))
    assert "m = 33 is outside [0, 32]" in result.report(0).message
    rep = _cube_run(row=jnp.int32(33)).report()
    assert "row offset = 33 is outside [0, 32]" in rep.message and rep.op == "copy_gm2l1_nd2nz"


def test_unit_flag_left_set_is_leftover():
    rep = _cube_run(mode=UPDATE, drain=False).report()
    assert rep.verdict is aj.Verdict.LEFTOVER and "still hold 1" in rep.message and "mmad at" in rep.message
    assert _cube_run(mode=UPDATE, fix_mode=UPDATE).ok


def test_direction_warning():
    assert not _cube_run(mode=UPDATE, fix_mode=UPDATE).report().warnings
    rep = _cube_run(mode=UPDATE, fix_mode=UPDATE, direction="m").report()
    assert rep.verdict is aj.Verdict.OK and "set_mmad_direction('n')" in rep.warnings[0]


def test_gemv_layout_traced_m():
    """m == 1 with a fractal A is a LAYOUT verdict when m is traced (a ValueError when static)."""
    rep = _cube_run(m=jnp.int32(1)).report()
    assert rep.verdict is aj.Verdict.LAYOUT and "GEMV" in rep.message
    with pytest.raises(ValueError, match="GEMV layout"):
        _cube_run(m=1)


def test_first_error_sticks():
    def kernel(k, ev):
        k.sync_notify("MTE2", "MTE1", ev)  # out of range: first error
        k.sync_notify("MTE1", "M", 0)
        k.sync_notify("MTE1", "M", 0)  # set twice: second error, not reported

    rep = verdict_of(kernel, params={"ev": jnp.int32(9)}).report()
    assert rep.verdict is aj.Verdict.SYNC_ERROR and "event_id 9" in rep.message


def test_throw_inside_jit_raises():
    def bad(k):
        k.sync_wait("MTE2", "MTE1", 0)

    @jax.jit
    def go(x):
        return aj.run(bad, {"x": x}, {}, throw=True).verdict

    with pytest.raises(Exception, match="no op sets"):
        jax.block_until_ready(go(jnp.zeros(3)))
