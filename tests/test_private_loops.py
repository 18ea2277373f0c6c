"""Loops whose iterations use the on-chip buffers privately run as one ``vmap`` on the data plane
(``Options.parallel_loops``): which loops are private, and the same bits as iteration by iteration.

The kernel is a 2 x 2 grid of 128 x 128 output tiles (a loop over rows of a loop over columns, one K step each).
Its variants are the good twin and the kernels a wrong analysis would compute wrongly:

- an A tile loaded once per row (the column loop reads what an earlier iteration loaded);
- L0C accumulating across tiles;
- every tile stored to one GM window (the last store wins);
- atomic adds to one window (their order rounds);
- a deadlock after the first tile (GM keeps what the device wrote before it stopped);
- an L0C tile computed by the first iteration alone and stored after the loop (the buffers after the loop are
  not the last iteration's).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from matmul import matmul_case, matmul_pingpong_kernel

import ascjax as aj
from ascjax.core import _numerics
from ascjax.engine import _lowering, private_loops
from ascjax.front._tracing import record_kernel

T = 128
ROWS = COLS = 2
RNG = np.random.default_rng(3)
INPUTS = {
    "a": RNG.uniform(-1, 1, (ROWS * T, T)).astype(np.float16),
    "b": RNG.uniform(-1, 1, (T, COLS * T)).astype(np.float16),
}
OUTPUTS = {"c": ((ROWS * T, COLS * T), "float32")}
#: The record's loop ids: the row loop is traced first.
ROW_LOOP, COLUMN_LOOP = 0, 1


def tiles_kernel(k: aj.Program, variant: str = "ok"):
    a_l1 = k.alloc("L1", (T, T), "float16", name="a_l1")
    b_l1 = k.alloc("L1", (T, T), "float16", name="b_l1")
    al = k.alloc("L0A", (T, T), "float16", name="al")
    br = k.alloc("L0B", (T, T), "float16", name="br")
    ac = k.alloc("L0C", (T, T), "float32", name="ac")
    k.set_mmad_direction("n")
    k.sync_notify("MTE1", "MTE2", 0)
    k.sync_notify("M", "MTE1", 0)
    k.sync_notify("FIX", "M", 0)

    def tile(mi, ni):
        k.sync_wait("MTE1", "MTE2", 0)

        def load_a():
            k.copy_gm2l1_nd2nz(a_l1, "a", row=mi * T, col=0)

        if variant == "a_once":  # one A tile per row: the column loop reuses it
            k.cond(ni == 0, load_a)
        else:
            load_a()
        k.copy_gm2l1_nd2nz(b_l1, "b", row=0, col=ni * T)
        k.sync_notify("MTE2", "MTE1", 0)
        k.sync_wait("MTE2", "MTE1", 0)
        k.sync_wait("M", "MTE1", 0)
        k.copy_l12l0a(al, a_l1)
        k.copy_l12l0b(br, b_l1, transpose=True)
        k.sync_notify("MTE1", "MTE2", 0)
        k.sync_notify("MTE1", "M", 0)
        k.sync_wait("MTE1", "M", 0)
        k.sync_wait("FIX", "M", 0)
        init = (mi + ni == 0) if variant == "carry" else True  # carry: L0C sums every tile so far
        if variant == "tail":  # the first tile alone, stored after the loop
            k.cond(mi + ni == 0, lambda: k.mmad(ac, al, br, T, T, T, c_matrix_init_val=True))
        else:
            k.mmad(ac, al, br, T, T, T, c_matrix_init_val=init)
        k.sync_notify("M", "MTE1", 0)
        k.sync_notify("M", "FIX", 0)
        if variant == "stuck":  # the second tile waits for an event nobody sets
            k.cond(mi * COLS + ni == 1, lambda: k.sync_wait("M", "FIX", 1))
        k.sync_wait("M", "FIX", 0)
        one_window = variant in ("one_window", "atomic")
        if variant != "tail":
            k.fixpipe("c", ac, dst_row=0 if one_window else mi * T, dst_col=0 if one_window else ni * T,
                      atomic=variant == "atomic")  # fmt: skip
        k.sync_notify("FIX", "M", 0)

    rows = ROWS // k.block_num  # launched, block b takes rows [b * rows, (b + 1) * rows)
    k.range(rows, lambda r: k.range(COLS, lambda ni: tile(k.block_idx * rows + r, ni)))
    if variant == "tail":
        k.fixpipe("c", ac, dst_row=0, dst_col=0)
    k.sync_wait("MTE1", "MTE2", 0)
    k.sync_wait("M", "MTE1", 0)
    k.sync_wait("FIX", "M", 0)


def _run(variant, parallel=True, inputs=INPUTS):
    return aj.run(tiles_kernel, inputs, OUTPUTS, params={"variant": variant},
                  options=aj.Options(parallel_loops=parallel))  # fmt: skip


def _reference(variant):
    a, b = (INPUTS[n].astype(np.float64) for n in ("a", "b"))
    tiles = {
        (mi, ni): a[mi * T : (mi + 1) * T] @ b[:, ni * T : (ni + 1) * T] for mi in range(ROWS) for ni in range(COLS)
    }
    c = np.zeros((ROWS * T, COLS * T))
    if variant == "carry":
        total = np.zeros((T, T))
        for (mi, ni), tile in tiles.items():
            total = total + tile
            c[mi * T : (mi + 1) * T, ni * T : (ni + 1) * T] = total
    elif variant == "one_window":
        c[:T, :T] = tiles[(ROWS - 1, COLS - 1)]
    elif variant == "atomic":
        c[:T, :T] = sum(tiles.values())
    elif variant in ("stuck", "tail"):
        c[:T, :T] = tiles[(0, 0)]
    else:
        return a @ b
    return c


@pytest.mark.parametrize(
    "variant, private",
    [
        ("ok", {ROW_LOOP, COLUMN_LOOP}),
        ("a_once", {ROW_LOOP}),  # each row loads its A tile itself; a column reads what the first column loaded
        ("carry", set()),
        ("one_window", {ROW_LOOP, COLUMN_LOOP}),  # GM takes no part: its stores are applied in order
        ("atomic", {ROW_LOOP, COLUMN_LOOP}),
        ("stuck", {ROW_LOOP, COLUMN_LOOP}),
        ("tail", set()),  # the first iteration writes L0C, the last does not
    ],
)
def test_the_record_finds_the_loops_whose_iterations_use_the_buffers_privately(variant, private):
    record = record_kernel(tiles_kernel, INPUTS, OUTPUTS, params={"variant": variant})
    assert set(private_loops(record).ids) == private


def test_a_traced_record_decides_nothing():
    record = record_kernel(tiles_kernel, INPUTS, OUTPUTS, params={"variant": "ok"})
    seen = []
    jax.jit(lambda ops: seen.append(private_loops(type(record)(record.template, ops))))(record.operands)
    assert seen == [None]


@pytest.fixture
def splits(monkeypatch):
    """How many loops ran as a ``vmap`` while the test traced."""
    count = []
    real = _lowering._run_split
    monkeypatch.setattr(_lowering, "_run_split", lambda *args: count.append(1) or real(*args))
    return count


@pytest.mark.parametrize("variant", ["ok", "a_once", "carry", "one_window", "atomic", "stuck", "tail"])
def test_parallel_loops_compute_the_bits_of_iteration_by_iteration(variant, splits):
    sequential = _run(variant, parallel=False)
    assert not splits
    parallel = _run(variant)
    assert bool(splits) == (variant not in ("carry", "tail"))  # the comparison tests the vmap where a loop is private
    assert parallel.verdict == sequential.verdict
    assert parallel.verdict == (aj.Verdict.DEADLOCK if variant == "stuck" else aj.Verdict.OK)
    got, want = np.asarray(parallel.outputs["c"]), np.asarray(sequential.outputs["c"])
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got, _reference(variant), atol=1e-3)


def test_a_private_loop_s_products_fold_into_one_wide_product_where_the_probe_keeps_their_bits(monkeypatch):
    folded = []
    real = _numerics._folded
    monkeypatch.setattr(_numerics, "_folded", lambda side, *args: folded.append(side) or real(side, *args))
    aj.clear_caches()  # the data plane traced again
    jax.block_until_ready(_run("ok").outputs["c"])
    f32 = np.dtype(np.float32)
    columns = _numerics.folds_alike(1, COLS, T, T, T, f32, f32, f32)  # the column loop batches B
    rows = columns and _numerics.folds_alike(0, ROWS, T, T, COLS * T, f32, f32, f32)  # then the row loop A
    assert folded == [1] * columns + [0] * rows


def test_a_product_whose_wide_form_would_change_its_bits_stays_batched(monkeypatch):
    monkeypatch.setattr(_numerics, "folds_alike", lambda *args: False)
    monkeypatch.setattr(_numerics, "_folded", lambda *args: pytest.fail("folded a product the probe refused"))
    a = jnp.asarray(RNG.uniform(-1, 1, (3, 16, 8)).astype(np.float32))
    b = jnp.asarray(RNG.uniform(-1, 1, (8, 16)).astype(np.float32))
    product = jax.vmap(lambda x: _numerics.same_bits_dot_general(x, b, _numerics.MATRIX_PRODUCT, jnp.float32))
    alone = [jnp.dot(a[i], b, precision="highest", preferred_element_type=jnp.float32) for i in range(3)]
    np.testing.assert_array_equal(np.asarray(product(a)), np.stack([np.asarray(x) for x in alone]))


@pytest.mark.parametrize("side", [0, 1])
@pytest.mark.parametrize("batch, m, k, n", [(6, 32, 32, 32), (2, 128, 128, 128), (16, 16, 16, 16)])
def test_the_fold_probe_says_whether_the_wide_product_has_each_product_s_bits(side, batch, m, k, n):
    f32 = np.dtype(np.float32)
    rng = np.random.default_rng(11)
    shapes = [(m, k), (k, n)]
    shapes[side] = (batch, *shapes[side])
    a, b = (rng.uniform(-1, 1, s).astype(np.float32) for s in shapes)
    product = lambda x, y: jnp.dot(x, y, precision="highest", preferred_element_type=jnp.float32)  # noqa: E731
    wide = jax.jit(lambda x, y: _numerics._folded(side, product, x, y))(a, b)
    each = np.stack(
        [np.asarray(jax.jit(product)(a[i], b) if side == 0 else jax.jit(product)(a, b[i])) for i in range(batch)]
    )
    assert _numerics.folds_alike(side, batch, m, k, n, f32, f32, f32) == np.array_equal(np.asarray(wide), each)


def test_a_jit_a_vmap_and_a_gradient_of_a_run_with_private_loops():
    want = np.asarray(_run("ok").outputs["c"])

    def c_of(a, parallel=True):
        return _run("ok", parallel, inputs={**INPUTS, "a": a}).outputs["c"]

    np.testing.assert_array_equal(np.asarray(jax.jit(c_of)(jnp.asarray(INPUTS["a"]))), want)
    scaled = jnp.stack([jnp.asarray(INPUTS["a"]), jnp.asarray(INPUTS["a"]) * 0.5])
    batched = np.asarray(jax.vmap(c_of)(scaled))
    np.testing.assert_array_equal(batched[0], want)
    np.testing.assert_array_equal(batched[1], np.asarray(c_of(scaled[1], parallel=False)))
    weights = jnp.asarray(RNG.uniform(-1, 1, (ROWS * T, COLS * T)).astype(np.float32))
    grads = [jax.grad(lambda a, p=p: jnp.sum(c_of(a, p) * weights))(jnp.asarray(INPUTS["a"])) for p in (True, False)]
    expected = np.asarray(weights) @ INPUTS["b"].astype(np.float32).T  # d sum(W * (A B)) / dA = W B^T
    for g in grads:
        np.testing.assert_allclose(np.asarray(g, np.float32), expected, rtol=2e-2, atol=2e-2)


def test_a_launch_s_blocks_run_their_private_loops_as_one_vmap_with_the_same_bits(splits):
    def launched(parallel):
        return aj.launch(tiles_kernel, INPUTS, OUTPUTS, block_dim=ROWS, params={"variant": "ok"},
                         options=aj.Options(parallel_loops=parallel))  # fmt: skip

    sequential = launched(False)
    assert not splits
    parallel = launched(True)
    assert splits  # each block's column loop
    assert parallel.verdict == sequential.verdict == aj.Verdict.OK
    got = np.asarray(parallel.outputs["c"])
    np.testing.assert_array_equal(got, np.asarray(sequential.outputs["c"]))
    np.testing.assert_array_equal(got, np.asarray(_run("ok").outputs["c"]))


@pytest.mark.parametrize("kernel", ["single", "pingpong"])
def test_the_matmul_kernels_output_tiles_run_as_one_vmap_with_the_bits_of_one_by_one(kernel, splits):
    case = (
        matmul_case(256, 512, 384, kernel=matmul_pingpong_kernel)
        if kernel == "pingpong"
        else matmul_case(256, 512, 384)
    )

    def outputs(parallel):
        result = aj.run(case.kernel, case.inputs, case.outputs, params=case.params,
                        options=aj.Options(parallel_loops=parallel))  # fmt: skip
        assert result.verdict == aj.Verdict.OK
        return np.asarray(result.outputs["c"])

    sequential = outputs(False)
    assert not splits
    parallel = outputs(True)
    assert len(splits) >= 2  # the row loop and the column loop
    np.testing.assert_array_equal(parallel, sequential)
    np.testing.assert_allclose(parallel, case.reference(case.inputs)["c"], atol=case.atol)
