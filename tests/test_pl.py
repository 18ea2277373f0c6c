"""The ``ascjax.pl`` tile language: a cube -> vector softmax written only with ``pl`` calls, ``pl.range`` loops,
trace-time misuse, and ``pl`` outside a kernel."""

import inspect

import jax
import numpy as np
import pingpong
import pytest

import ascjax as aj
from ascjax import pl
from ascjax.front import record_kernel

M = K = N = 32
H = M // 2  # rows per AIV
V = aj.Verdict


def softmax_kernel(k):
    a_mat = pl.alloc("Mat", (M, K), "float16", name="a_mat")
    b_mat = pl.alloc("Mat", (K, N), "float16", name="b_mat")
    left = pl.alloc("Left", (M, K), "float16", name="left")
    right = pl.alloc("Right", (K, N), "float16", name="right")
    acc = pl.alloc("Acc", (M, N), "float32", name="acc")
    s = pl.alloc("Vec", (H, N), "float32", name="s")
    tmp = pl.alloc("Vec", (H, N), "float32", name="tmp")
    mx = pl.alloc("Vec", (H, 1), "float32", name="mx")
    total = pl.alloc("Vec", (H, 1), "float32", name="total")
    assert [t.buffer for t in (a_mat, left, right, acc, s)] == [aj.Buffer.L1, aj.Buffer.L0A, aj.Buffer.L0B,
                                                                   aj.Buffer.L0C, aj.Buffer.UB]  # fmt: skip

    @pl.section_cube
    def _():
        pl.load(a_mat, "a")
        pl.load(b_mat, "b")
        pl.system.sync_src(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.MTE1, event_id=0)
        pl.system.sync_dst(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.MTE1, event_id=0)
        pl.move(left, a_mat)
        pl.move(right, b_mat)
        pl.system.sync_src(set_pipe=pl.PipeType.MTE1, wait_pipe=pl.PipeType.M, event_id=0)
        pl.system.sync_dst(set_pipe=pl.PipeType.MTE1, wait_pipe=pl.PipeType.M, event_id=0)
        pl.matmul(acc, left, right, phase=pl.AccPhase.Final)
        pl.move(s, acc, acc_to_vec_mode=pl.AccToVecMode.DualModeSplitM, phase=pl.STPhase.Final)
        pl.system.set_cross_core(pipe=pl.PipeType.FIX, event_id=0)

    @pl.section_vector
    def _(sub):
        assert pl.get_subblock_idx() == sub
        pl.system.wait_cross_core(pipe=pl.PipeType.V, event_id=0)
        pl.maximum(mx, s, tmp, dim=0)
        pl.expand_sub(s, s, mx)
        pl.exp(s, s)
        pl.sum(total, s, tmp)
        pl.expand_div(s, s, total)
        pl.system.sync_src(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=0)
        pl.system.sync_dst(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=0)
        pl.store("out", s, (sub * H, 0))


@pytest.mark.slow  # about 25 s cold; the matmul-softmax seed kernels run in the default suite
def test_softmax_of_a_matmul_in_pl_matches_numpy():
    rng = np.random.default_rng(0)
    a = rng.uniform(-2, 2, (M, K)).astype(np.float16)
    b = rng.uniform(-2, 2, (K, N)).astype(np.float16)
    r = aj.run(softmax_kernel, {"a": a, "b": b}, {"out": ((M, N), "float32")}, chip="950")
    rep = r.report()
    assert rep.verdict is V.OK, rep.message
    s = a.astype(np.float64) @ b.astype(np.float64)
    e = np.exp(s - s.max(axis=1, keepdims=True))
    want = e / e.sum(axis=1, keepdims=True)
    got = np.asarray(r.outputs["out"])
    np.testing.assert_allclose(got, want, atol=1e-3, rtol=1e-3)
    assert np.abs(got - want).max() < 1e-5  # much better than the tolerance: f32 accumulation
    table = rep.events
    assert "0      -      AIC   1     0      FIX" in table and "AIV1  0     1      -          V" in table


# --- column statistics (the DN form flash attention uses) -------------------------------------
def _column_softmax_kernel(k):
    x = pl.alloc("Vec", (16, 8), "float32", name="x")
    stat = pl.alloc("Vec", (1, 8), "float32", name="stat")
    column = pl.alloc("Vec", (8, 1), "float32", name="column")
    with k.vector(0):
        pl.load(x, "x")
        pl.system.sync_src(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=0)
        pl.system.sync_dst(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=0)
        pl.maximum(stat, x, dim=1)  # per column
        pl.expand_sub(x, x, stat, dim=1)  # down each column
        pl.exp(x, x)
        pl.sum(stat, x, dim=1)
        pl.expand_div(x, x, stat, dim=1)
        pl.move(column, stat)  # [1, 8] row -> [8, 1] column, same bytes
        pl.system.sync_src(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=0)
        pl.system.sync_dst(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=0)
        pl.store("p", x, (0, 0))
        pl.store("sums", column, (0, 0))


def test_column_reductions_and_row_broadcast_match_numpy():
    x = np.random.default_rng(3).normal(size=(16, 8)).astype(np.float32)
    r = aj.run(_column_softmax_kernel, {"x": x}, {"p": ((16, 8), "float32"), "sums": ((8, 1), "float32")}, chip="950")
    assert r.report().verdict is V.OK, str(r.report())
    e = np.exp(x - x.max(axis=0, keepdims=True))
    np.testing.assert_allclose(np.asarray(r.outputs["p"]), e / e.sum(axis=0, keepdims=True), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(r.outputs["sums"])[:, 0], e.sum(axis=0), rtol=1e-5)


# --- pl.range ---------------------------------------------------------------------------------
def _range_kernel(k):
    row = pl.alloc("Vec", (1, 16), "float32", name="row")

    def copy_rows(loop, out):
        """Each iteration i: load row i of x, 2 * row + i, store it as row i of ``out``."""

        @loop
        def _(i):
            pl.system.sync_dst(set_pipe=pl.PipeType.MTE3, wait_pipe=pl.PipeType.MTE2, event_id=1)
            pl.load(row, "x", (i, 0))
            pl.system.sync_src(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=0)
            pl.system.sync_dst(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=0)
            pl.mul(row, row, 2.0)
            pl.add(row, row, i * 1.0)
            pl.system.sync_src(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=0)
            pl.system.sync_dst(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=0)
            pl.store(out, row, (i, 0))
            pl.system.sync_src(set_pipe=pl.PipeType.MTE3, wait_pipe=pl.PipeType.MTE2, event_id=1)

    with k.vector(0):
        # one RELEASE pre-posted before the loops and drained after them: a drain and the next loop's pre-post
        # would be unordered (MTE2 waits, MTE3 sets), and the set could find the flag still set
        pl.system.sync_src(set_pipe=pl.PipeType.MTE3, wait_pipe=pl.PipeType.MTE2, event_id=1)
        copy_rows(pl.range(5), "all")  # 0, 1, 2, 3, 4
        copy_rows(pl.range(1, 8, 3), "strided")  # 1, 4, 7
        copy_rows(pl.range(6, 6), "none")  # no iteration
        pl.system.sync_dst(set_pipe=pl.PipeType.MTE3, wait_pipe=pl.PipeType.MTE2, event_id=1)  # drain


def test_pl_range_loops():
    x = np.random.default_rng(1).standard_normal((8, 16)).astype(np.float32)
    outs = {name: ((8, 16), "float32") for name in ("all", "strided", "none")}
    r = aj.run(_range_kernel, {"x": x}, outs)
    assert r.report().verdict is V.OK, r.report().message

    def expect(rows):
        want = np.zeros((8, 16), np.float32)
        for i in rows:
            want[i] = 2 * x[i] + i
        return want

    np.testing.assert_array_equal(np.asarray(r.outputs["all"]), expect(range(5)))
    np.testing.assert_array_equal(np.asarray(r.outputs["strided"]), expect([1, 4, 7]))
    np.testing.assert_array_equal(np.asarray(r.outputs["none"]), 0)


@pytest.mark.parametrize(
    "args, pattern",
    [
        ((0, 4, 0), "step must be positive"),
        ((2.5,), "static ints"),
        ((), "1 to 3 static ints"),
        ((1, 2, 3, 4), "1 to 3"),
    ],
)
def test_pl_range_rejects_bad_arguments(args, pattern):
    with pytest.raises(ValueError, match=pattern):
        pl.range(*args)
    pl.range(0, 4, 1)  # the good twin builds a decorator


# --- misuse at trace time --------------------------------------------------------------------
def _misuse(k, variant):
    vec = pl.alloc("Vec", (16, 16), "float32", name="vec")
    col = pl.alloc("Vec", (16, 1), "float32", name="col")
    acc = pl.alloc("Acc", (16, 16), "float32", name="acc")
    left = pl.alloc("Left", (16, 16), "float16", name="left")
    with k.vector(0):
        pl.fill(vec, 1.0)
        if variant == "ok":
            pl.maximum(col, vec, vec, dim=0)
            pl.minimum(vec, vec, 3.0)
            pl.store("out", vec, (0, 0))
        elif variant == "load_l0a":
            pl.load(left, "x")
        elif variant == "store_phase":
            pl.store("out", vec, (0, 0), phase=pl.STPhase.Final)
        elif variant == "max_dim":
            pl.maximum(col, vec, vec, dim=2)
        elif variant == "sum_dim":
            pl.sum(col, vec, vec, dim=1)  # dim=1 reduces columns into [1, 16], not [16, 1]
    if variant == "move_path":
        with k.cube():
            pl.move(left, acc)


def _trace(variant):
    spec = {"out": ((16, 16), "float32")}
    return jax.eval_shape(
        lambda: aj.run(_misuse, {"x": np.zeros((16, 16), np.float16)}, spec, params={"variant": variant})
    )


@pytest.mark.parametrize(
    "variant, pattern",
    [
        ("load_l0a", r"pl.load writes Mat \(L1\) or Vec \(UB\) tiles"),
        ("store_phase", r"phase, scale, relu and quant_mode apply to a store out of L0C \(the fixpipe\), not from UB"),
        ("max_dim", r"pl reductions take dim=0 \(along rows, to \[rows, 1\]\) or dim=1 .*got dim=2"),
        ("sum_dim", r"rule 'column reduction': col_sum of .* gives a \[1, 16\] tile, got `col`"),
        (
            "move_path",
            r"pl.move has no path Acc \(L0C\) -> Left \(L0A\): from Acc \(L0C\) it moves to Vec \(UB\); into "
            r"Left \(L0A\) from Mat \(L1\)",
        ),
    ],
)
def test_pl_misuse_raises_at_trace_time(variant, pattern):
    _trace("ok")  # the good twin traces
    with pytest.raises(ValueError, match=pattern):
        _trace(variant)


# --- outside a kernel ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "call",
    [
        lambda: pl.alloc("Vec", (8, 16), "float32"),
        lambda: pl.load(None, "x"),
        lambda: pl.exp(None, None),
        lambda: pl.system.set_cross_core(pipe=pl.PipeType.FIX, event_id=0),
        lambda: pl.system.sync_src(set_pipe="MTE2", wait_pipe="MTE1", event_id=0),
        lambda: pl.range(3)(lambda i: None),
        lambda: pl.section_vector(lambda sub: None),
        lambda: pl.get_subblock_idx(),
    ],
    ids=["alloc", "load", "exp", "set_cross_core", "sync_src", "range", "section_vector", "get_subblock_idx"],
)
def test_pl_outside_a_kernel_raises(call):
    with pytest.raises(RuntimeError, match="no kernel is being traced: call ascjax.pl functions inside a kernel"):
        call()


def test_pl_after_a_failed_kernel_still_raises():
    def broken(k):
        pl.alloc("Vec", (8, 16), "float32", name="v")
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        jax.eval_shape(lambda: aj.run(broken, {}, {}))
    with pytest.raises(RuntimeError, match="no kernel is being traced"):  # the kernel's Program is gone
        pl.alloc("Vec", (8, 16), "float32")
    # inside a kernel the same call works (good twin)
    jax.eval_shape(lambda: aj.run(lambda k: pl.alloc("Vec", (8, 16), "float32", name="v"), {}, {}))


def _helpers_kernel(k):
    """Two flag pairs through a helper of another file (``kernels/pingpong.py``'s ``_sync``) and one wait written
    here."""
    with k.vector(0):
        pingpong._sync(pl.PipeType.MTE2, pl.PipeType.V)  # call A
        pingpong._sync(pl.PipeType.V, pl.PipeType.MTE3)  # call B
        pl.system.sync_dst(set_pipe=pl.PipeType.MTE3, wait_pipe=pl.PipeType.MTE2, event_id=1)  # direct


def test_an_op_in_a_helper_is_named_at_the_helpers_line_and_the_call():
    """Every call of a ``_sync`` helper would otherwise name the same line: the call's line tells them apart. An op
    written in the kernel itself is named at its own line alone."""
    sites = {entry[1] for entry in record_kernel(_helpers_kernel, {}, {}).template.entries}
    src, first = inspect.getsourcelines(_helpers_kernel)
    here = {tag: f"tests/test_pl.py:{first + i}" for i, s in enumerate(src) for tag in ("A", "B", "direct") if f"# {tag}" in s
            or f"# call {tag}" in s}  # fmt: skip
    helper, helper_first = inspect.getsourcelines(pingpong._sync)
    notify = f"kernels/pingpong.py:{helper_first + next(i for i, s in enumerate(helper) if 'sync_src' in s)}"
    for call in ("A", "B"):
        assert f"sync_notify at {notify} via {here[call]}" in sites, sites
    assert f"sync_wait at {here['direct']}" in sites, sites
