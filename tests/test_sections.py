"""Concurrent sections: cube and vector programs with their own loops, scheduled as on the device."""

import jax
import jax.numpy as jnp
import numpy as np
import pingpong
import pytest

import ascjax as aj
from ascjax import pl
from ascjax.report._event_table import event_rows

OUT = {"out": ((pingpong.N_MAX * pingpong.ROWS, pingpong.D), "float32")}


def _run(n, kernel=pingpong.pingpong_sections_kernel, **kwargs):
    return aj.run(kernel, pingpong.inputs(), OUT, chip="950", params={"n": n}, **kwargs)


@pytest.mark.slow  # a vmap sweep, about 45 s cold; the sections are covered by the tests below
def test_trip_counts_zero_one_even_odd_in_one_vmap():
    """One compiled two-section kernel: 0, 1, even and odd trip counts all ok, outputs and n + 1 counts right."""
    counts = jnp.array([0, 1, 4, 5], jnp.int32)
    result = jax.vmap(_run)(counts)
    assert np.all(np.asarray(result.verdict) == aj.Verdict.OK)
    x = pingpong.inputs()
    for i, n in enumerate(np.asarray(counts)):
        np.testing.assert_allclose(
            np.asarray(result.outputs["out"][i]), pingpong.reference(x, int(n))["out"], atol=1e-4
        )
        checked = result.checked(i)
        rows = event_rows(checked.record, checked.result)  # {(event id, core): sets, waits, ...}
        for slot, used in enumerate([(int(n) + 1) // 2, int(n) // 2]):
            assert rows[(pingpong.RELEASE[slot], 1)]["sets"] == used + 1  # AIV0: pre-posted + one per use
            assert rows[(pingpong.RELEASE[slot], 0)]["waits"] == used + 1  # AIC: one per use + the final wait


@pytest.mark.slow  # about 30 s cold: two section orders of the ping-pong kernel
def test_section_order_does_not_change_verdict_outputs_or_cycles_and_timing_follows_events():
    def reordered(k, n):
        """The same kernel with the vector section written first."""
        pending = []
        real = k.section_cube, k.section_vector
        k.section_cube = lambda body: pending.append(("c", body)) or body
        k.section_vector = lambda body: pending.append(("v", body)) or body
        try:
            pingpong.pingpong_sections_kernel(k, n)
        finally:
            k.section_cube, k.section_vector = real
        for kind, body in sorted(pending, key=lambda p: p[0] != "v"):
            (k.section_vector if kind == "v" else k.section_cube)(body)

    first = _run(jnp.int32(5), sanitize=False)
    second = _run(jnp.int32(5), reordered, sanitize=False)
    assert first.ok and second.ok
    np.testing.assert_array_equal(np.asarray(first.outputs["out"]), np.asarray(second.outputs["out"]))
    assert first.report().cycles == second.report().cycles

    # the timing follows the interleaving: a core blocked on a cross-core wait resumes at the set's time
    # plus the event latency (the AIVs' first vector op waits for the cube's first READY)
    spans = first.timeline().spans
    first_set = min(s.end_cycle for s in spans if s.op == "set_cross_core" and s.core == 0)
    first_mul = min(s.start_cycle for s in spans if s.op == "mul" and s.core == 1)
    assert first_mul >= first_set + float(first.costs.cross_core_latency_cycles)


@pytest.mark.slow  # test_flash_attention's gradient test runs through two concurrent sections in CI
def test_gradient_through_a_two_section_kernel():
    """d sum(out) / dx for out = 2 * x @ w (the cube produces, the AIVs scale and store)."""
    x = pingpong.inputs()

    def loss(xs):
        r = aj.run(pingpong.pingpong_sections_kernel, {"x": xs, "w": x["w"]}, OUT, chip="950",
                   params={"n": jnp.int32(pingpong.N_MAX)}, sanitize=False)  # fmt: skip
        return jnp.sum(r.outputs["out"])

    g = jax.grad(loss)(jnp.asarray(x["x"], jnp.float32).astype(jnp.float16))
    want = 2.0 * np.broadcast_to(x["w"].astype(np.float64).sum(axis=1), x["x"].shape)
    np.testing.assert_allclose(np.asarray(g, np.float64), want, rtol=2e-2, atol=2e-2)


def _tiny(k, variant):
    ub = k.alloc("UB", (8, 16), "float32", name="ub")

    @k.section_cube
    def _():
        k.wait_cross_core("FIX", 0, when=jnp.bool_(True))

    @k.section_vector
    def _(sub):
        if variant == "alloc":
            k.alloc("UB", (8, 16), "float32", name="late")
        k.fill(ub, 1.0)
        k.set_cross_core("V", 0)


def test_section_rules_are_trace_time_errors_next_to_the_good_twin():
    assert aj.run(_tiny, {}, {}, chip="950", params={"variant": "ok"}, jit=False).ok
    with pytest.raises(ValueError, match="allocate its tiles .* before the sections"):
        aj.run(_tiny, {}, {}, chip="950", params={"variant": "alloc"}, jit=False)


def _nested(k, n=pingpong.N_MAX, n_max=pingpong.N_MAX):
    """The ping-pong kernel with each section's loop split in two nested loops (cross-core waits in the inner)."""
    t = pingpong._tiles()
    half = n_max // 2 + 1

    @pl.section_cube
    def _():
        pingpong._cube_prologue(k, t)
        pl.range(2)(
            lambda o: pl.range(half, count=jnp.clip(n - o * half, 0, half))(
                lambda i: pingpong._produce(t, o * half + i)
            )
        )
        pingpong._cube_epilogue("ok")

    @pl.section_vector
    def _(sub):
        pingpong._vector_prologue()
        pl.range(2)(
            lambda o: pl.range(half, count=jnp.clip(n - o * half, 0, half))(
                lambda i: pingpong._consume(t, sub, o * half + i)
            )
        )


def _guarded(k, n=pingpong.N_MAX, n_max=pingpong.N_MAX):
    """The ping-pong kernel with every loop step under ``k.cond(i < n)`` (cross-core waits in the branch)."""
    t = pingpong._tiles()

    @pl.section_cube
    def _():
        pingpong._cube_prologue(k, t)
        pl.range(n_max)(lambda i: k.cond(i < n, lambda: pingpong._produce(t, i)))
        pingpong._cube_epilogue("ok")

    @pl.section_vector
    def _(sub):
        pingpong._vector_prologue()
        pl.range(n_max)(lambda i: k.cond(i < n, lambda: pingpong._consume(t, sub, i)))


@pytest.mark.parametrize("kernel", [_nested, _guarded])
def test_cross_core_waits_in_inner_loops_and_branches_order_the_data_as_the_flat_kernel(kernel):
    """A section's inner loop or traced branch holding cross-core waits runs in line (unrolled, under its
    predicate), so the data plane hands tiles across cores in the schedule's order: the same outputs, verdict
    and cycles as the one-loop kernel, for a trip count that leaves iterations off."""
    x = pingpong.inputs()
    for n in (3, 5):
        flat = _run(n, sanitize=False)
        result = aj.run(kernel, x, OUT, chip="950", params={"n": n}, sanitize=False)
        assert result.ok, result.report()
        np.testing.assert_allclose(np.asarray(result.outputs["out"]), pingpong.reference(x, n)["out"], atol=1e-4)
        assert result.report().cycles == flat.report().cycles


def test_traced_event_ids_sweep_in_sections():
    """A traced event id in both sections: ids in range are ok, 16 is a sync_error, per scenario."""

    def kernel(k, ev):
        ub = k.alloc("UB", (8, 16), "float32", name="ub")

        @k.section_vector
        def _(sub):
            k.wait_cross_core("V", ev)
            k.fill(ub, 1.0)

        @k.section_cube
        def _():
            pl.system.set_cross_core(pipe=pl.PipeType.FIX, event_id=ev)

    verdicts = jax.vmap(lambda ev: aj.run(kernel, {}, {}, chip="950", params={"ev": ev}).verdict)(
        jnp.array([0, 15, 16], jnp.int32)
    )
    assert [aj.Verdict(int(v)) for v in verdicts] == [aj.Verdict.OK, aj.Verdict.OK, aj.Verdict.SYNC_ERROR]


def _skipped_branch(k, x_sign):
    """A branch whose ops are off in the segment after a cross-core wait, before a GM store in the same region."""
    a = k.alloc("UB", (8, 16), "float32", name="a")
    b = k.alloc("UB", (8, 16), "float32", name="b")

    @k.section_cube
    def _():
        k.set_cross_core("FIX", 0)

    @k.section_vector
    def _(sub):
        k.fill(a, 2.0)
        k.sync_notify("V", "MTE3", 0)
        k.cond(x_sign < 0, lambda: [k.fill(b, 1.0) for _ in range(3)])
        k.wait_cross_core("V", 0)
        k.sync_wait("V", "MTE3", 0)
        k.copy_ub2gm("out", a, row=8 * sub)


def test_a_branch_the_segment_skips_keeps_the_tags_of_the_issues_after_it():
    """Every trace of a section numbers its issues alike: a branch outside the traced segment still takes its
    issues' tags, so the launch's store after the wait finds its own instance (it ran) and writes GM."""
    out = {"out": ((16, 16), "float32")}
    result = aj.launch(_skipped_branch, {}, out, block_dim=1, params={"x_sign": jnp.int32(1)}, chip="950")
    assert result.ok, result.report()
    np.testing.assert_array_equal(np.asarray(result.outputs["out"]), np.full((16, 16), 2.0, np.float32))
