"""PyPTO-Pro constructs beyond tiles and sync: tiling keys, structs and scalar GM access, tensors of any rank, ZN
Mat tiles (transposed loads) and the jumps of Python control flow.

Each kernel is written as a PyPTO-Pro user writes it and checked against NumPy or hand-computed values; each
refusal names its rule.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import ascjax as aj
import ascjax.pypto_pro.language as pl
from ascjax.core.formats import hifloat8
from ascjax.front.pypto import UnsupportedConstruct
from ascjax.pypto_pro.parser_errors import ParserSyntaxError
from ascjax.pypto_pro.runtime.tilingkey import TilingKeyError, TilingKeyField

RNG = np.random.default_rng(11)
ROWS, COLS = 16, 64
UB_A, UB_B, UB_C = 0x0000, 0x4000, 0x8000


def _vec(rows=ROWS, cols=COLS, dtype=pl.DT_FP32):
    return pl.TileType(shape=[rows, cols], dtype=dtype, target_memory=pl.MemorySpace.Vec)


def _sync(set_pipe, wait_pipe, event_id):
    pl.system.sync_src(set_pipe=set_pipe, wait_pipe=wait_pipe, event_id=event_id)
    pl.system.sync_dst(set_pipe=set_pipe, wait_pipe=wait_pipe, event_id=event_id)


# -- tiling keys ------------------------------------------------------------------------
class OpKey:
    Op = TilingKeyField(bits=2, values=[0, 1, 2])
    Twice = TilingKeyField(bits=1, values=[0, 1])

    @classmethod
    def is_valid(cls, key):
        return not (key[0] == 2 and key[1] == 1)


@pl.jit(auto_mutex=False, tiling_key=OpKey)
def keyed(x: pl.Tensor[[ROWS, COLS], pl.DT_FP32], y: pl.Tensor[[ROWS, COLS], pl.DT_FP32],
          z: pl.Tensor[[ROWS, COLS], pl.DT_FP32]):  # fmt: skip
    a = pl.make_tile(_vec(), addr=UB_A)
    b = pl.make_tile(_vec(), addr=UB_B)
    c = pl.make_tile(_vec(), addr=UB_C)
    with pl.section_vector():
        pl.load(a, x, [0, 0])
        pl.load(b, y, [0, 0])
        _sync(pl.PipeType.MTE2, pl.PipeType.V, 0)
        if Op == 0:  # noqa: F821 - a field of the tiling key
            pl.add(c, a, b)
        elif Op == 1:  # noqa: F821
            pl.sub(c, a, b)
        else:
            pl.mul(c, a, b)
        if Twice == 1:  # noqa: F821
            pl.add(c, c, c)
        _sync(pl.PipeType.V, pl.PipeType.MTE3, 0)
        pl.store(z, c, [0, 0])


@pytest.mark.parametrize(
    ("key", "expect"),
    [({"Op": 0, "Twice": 0}, np.add), ({"Op": 1, "Twice": 1}, lambda a, b: 2 * (a - b)), ({"Op": 2, "Twice": 0}, np.multiply)],
)  # fmt: skip
def test_a_tiling_key_picks_the_kernel_s_arms_at_launch(key, expect):
    x, y = (RNG.standard_normal((ROWS, COLS)).astype(np.float32) for _ in range(2))
    z = np.zeros_like(x)
    result = keyed[None, 1, key](x, y, z)
    assert result.ok, result.report()
    np.testing.assert_allclose(z, expect(x, y), rtol=1e-6)


def test_a_tiling_key_is_checked_at_launch_and_at_declaration():
    args = [np.zeros((ROWS, COLS), np.float32)] * 3
    with pytest.raises(TilingKeyError, match="launch it as keyed"):
        keyed(*args)
    with pytest.raises(TilingKeyError, match=r"OpKey.Op = 3 is not one of its values \[0, 1, 2\]"):
        keyed[None, 1, {"Op": 3, "Twice": 0}](*args)
    with pytest.raises(TilingKeyError, match="is_valid refuses"):
        keyed[None, 1, {"Op": 2, "Twice": 1}](*args)
    with pytest.raises(TilingKeyError, match=r"the key names \['Op'\]"):
        keyed[None, 1, {"Op": 0}](*args)

    class TooMany:
        F = TilingKeyField(bits=1, values=[0, 1, 2])

    with pytest.raises(ValueError, match="has 3 values, more than its 1 bits hold"):
        pl.jit(tiling_key=TooMany)(lambda: None)

    class TooWide:
        A = TilingKeyField(bits=40, values=[0])
        B = TilingKeyField(bits=30, values=[0])

    with pytest.raises(ValueError, match="take 70 bits; a tiling key has 64"):
        pl.jit(tiling_key=TooWide)(lambda: None)


# -- structs and scalar GM access ---------------------------------------------------------
@pl.jit(auto_mutex=False)
def running(out: pl.Tensor[[6], pl.DT_INT32], table: pl.Tensor[[2, 3], pl.DT_INT32]):
    acc = pl.struct("Acc", total=0, best=-100, hist=[0, 0, 0])
    ring = pl.struct_array(3, "Slot", v=0)
    with pl.section_vector():
        for i in pl.range(0, 6):
            acc.total = acc.total + i
            acc.best = pl.max(acc.best, i * i - 10)
            acc.hist[i % 3] = acc.hist[i % 3] + 1
            ring[i % 3].v = ring[i % 3].v + i
        local = pl.struct("Local", k=table[1, 2])  # made in the section; an input element read by the scalar unit
        out[0] = acc.total
        out[1] = acc.best
        pl.setval(out, 2, acc.hist[0] * 100 + acc.hist[1] * 10 + acc.hist[2])
        out[3] = ring[0].v * 100 + ring[1].v * 10 + ring[2].v
        out[4] = local.k
        out[5] = pl.min(acc.total, 7)


def test_struct_fields_ride_loops_and_the_scalar_unit_writes_them_to_gm():
    out = np.zeros(6, np.int32)
    table = np.arange(6, dtype=np.int32).reshape(2, 3)
    result = running(out, table)
    assert result.ok, result.report()
    # total 0+..+5; best max(i*i-10); hist i%3 counts 2,2,2; ring sums 0+3, 1+4, 2+5; table[1, 2]; min(15, 7)
    np.testing.assert_array_equal(out, [15, 15, 222, 3 * 100 + 5 * 10 + 7, 5, 7])


@pl.jit(auto_mutex=False)
def reads_its_output(out: pl.Tensor[[4], pl.DT_INT32]):
    with pl.section_vector():
        out[0] = 1
        out[1] = out[0]


def test_a_scalar_read_of_a_tensor_the_kernel_writes_is_refused():
    with pytest.raises(UnsupportedConstruct, match="rule 'scalar read'"):
        reads_its_output(np.zeros(4, np.int32))


# -- tensors of any rank --------------------------------------------------------------------
B, H, S, D = 2, 3, 16, 64


@pl.jit(auto_mutex=False)
def scale_heads(q: pl.Tensor[[B, H, S, D], pl.DT_FP32], o: pl.Tensor[[B, H, S, D], pl.DT_FP32],
                row: pl.Tensor[[D], pl.DT_FP32]):  # fmt: skip
    t = pl.make_tile(_vec(S, D), addr=UB_A)
    r = pl.make_tile(_vec(1, D), addr=UB_B)
    with pl.section_vector():
        pl.load(r, row, [0])
        for b in pl.range(B):
            for h in pl.range(H):
                pl.load_tile(t, q, [b, h, 0, 0])
                _sync(pl.PipeType.MTE2, pl.PipeType.V, 0)
                pl.expand_mul(t, t, r, dim=1)
                _sync(pl.PipeType.V, pl.PipeType.MTE3, 0)
                pl.store(o, t, [b, h, 0, 0])
                _sync(pl.PipeType.MTE3, pl.PipeType.MTE2, 0)


def test_a_four_d_tensor_is_read_and_written_window_by_window():
    q = RNG.standard_normal((B, H, S, D)).astype(np.float32)
    row = RNG.standard_normal(D).astype(np.float32)
    o = np.zeros_like(q)
    result = scale_heads(q, o, row)
    assert result.ok, result.report()
    np.testing.assert_allclose(o, q * row, rtol=1e-6)


@pl.jit(auto_mutex=False)
def past_the_dimension(q: pl.Tensor[[B, H, S, D], pl.DT_FP32]):
    t = pl.make_tile(_vec(S, D), addr=UB_A)
    with pl.section_vector():
        pl.load(t, q, [0, 0, 8, 0])


def test_a_window_that_runs_past_its_dimension_is_refused():
    with pytest.raises(ValueError, match="rule 'bounds'.*runs past dimension 2"):
        past_the_dimension(np.zeros((B, H, S, D), np.float32))


# -- windows whose rows run along another dimension (order) ------------------------------------
@pl.jit(auto_mutex=False)
def scale_heads_bsnd(q: pl.Tensor[[B, S, H, D], pl.DT_FP32], o: pl.Tensor[[B, S, H, D], pl.DT_FP32],
                     row: pl.Tensor[[D], pl.DT_FP32]):  # fmt: skip
    t = pl.make_tile(_vec(S, D), addr=UB_A)
    r = pl.make_tile(_vec(1, D), addr=UB_B)
    with pl.section_vector():
        pl.load(r, row, [0])
        for b in pl.range(B):
            for h in pl.range(H):
                pl.load_tile(t, q, [b, 0, h, 0], order=[1, 3])  # one head's S rows, H * D elements apart
                _sync(pl.PipeType.MTE2, pl.PipeType.V, 0)
                pl.expand_mul(t, t, r, dim=1)
                _sync(pl.PipeType.V, pl.PipeType.MTE3, 0)
                pl.store(o, t, [b, 0, h, 0], order=[1, 3])
                _sync(pl.PipeType.MTE3, pl.PipeType.MTE2, 0)


def test_a_window_whose_rows_run_along_another_dimension_reads_and_writes_one_head():
    q = RNG.standard_normal((B, S, H, D)).astype(np.float32)
    row = RNG.standard_normal(D).astype(np.float32)
    o = np.zeros_like(q)
    result = scale_heads_bsnd(q, o, row)
    assert result.ok, result.report()
    np.testing.assert_allclose(o, q * row, rtol=1e-6)  # every head of every batch, in place


HD = 32  # a head's dimension in the cube's BSND kernel (a multiple of the fractal's 16)


@pl.jit(auto_mutex=False)
def scores_bsnd(q: pl.Tensor[[B, S, H, HD], pl.DT_FP16], k: pl.Tensor[[B, S, H, HD], pl.DT_FP16],
                out: pl.Tensor[[B, H, S, S], pl.DT_FP32]):  # fmt: skip
    q_mat = pl.make_tile(pl.TileType(shape=[S, HD], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Mat), addr=0)
    k_mat = pl.make_tile(pl.TileType(shape=[HD, S], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Mat,
                                     layout=pl.ZN), addr=0x4000)  # fmt: skip
    left = pl.make_tile(pl.TileType(shape=[S, HD], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Left), addr=0)
    right = pl.make_tile(pl.TileType(shape=[HD, S], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Right,
                                     layout=pl.ZN), addr=0)  # fmt: skip
    acc = pl.make_tile(pl.TileType(shape=[S, S], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Acc), addr=0)
    with pl.section_cube():
        for b in pl.range(B):
            for h in pl.range(H):
                pl.load(q_mat, q, [b, 0, h, 0], order=[1, 3])
                pl.load(k_mat, k, [b, 0, h, 0], order=[3, 1])  # k's head transposed into the ZN tile
                _sync(pl.PipeType.MTE2, pl.PipeType.MTE1, 0)
                pl.move(left, q_mat)
                pl.move(right, k_mat)
                _sync(pl.PipeType.MTE1, pl.PipeType.M, 0)
                pl.matmul(acc, left, right)
                _sync(pl.PipeType.M, pl.PipeType.FIX, 0)
                pl.store(out, acc, [b, h, 0, 0])
                _sync(pl.PipeType.FIX, pl.PipeType.MTE2, 0)


def test_a_head_transposed_into_a_zn_tile_gives_the_scores_of_q_and_k():
    q = RNG.standard_normal((B, S, H, HD)).astype(np.float16)
    k = RNG.standard_normal((B, S, H, HD)).astype(np.float16)
    out = np.zeros((B, H, S, S), np.float32)
    result = scores_bsnd(q, k, out)
    assert result.ok, result.report()
    expect = np.einsum("bshd,bthd->bhst", q.astype(np.float32), k.astype(np.float32))
    np.testing.assert_allclose(out, expect, rtol=2e-3, atol=2e-3)


@pl.jit(auto_mutex=False)
def two_row_dimensions(q: pl.Tensor[[B, S, H, D], pl.DT_FP32]):
    t = pl.make_tile(_vec(S, D), addr=UB_A)
    with pl.section_vector():
        pl.load(t, q, [0, 0, 0, 0], order=[1, 3])
        pl.load(t, q, [0, 0, 0, 0])


@pl.jit(auto_mutex=False)
def columns_off_the_last_dimension(q: pl.Tensor[[B, S, H, D], pl.DT_FP32]):
    t = pl.make_tile(_vec(S, H), addr=UB_A)
    with pl.section_vector():
        pl.load(t, q, [0, 0, 0, 0], order=[1, 2])


def test_windows_of_one_tensor_along_two_row_dimensions_or_columns_off_its_last_are_refused():
    line = two_row_dimensions.__wrapped__.__code__.co_firstlineno
    q = np.zeros((B, S, H, D), np.float32)
    with pytest.raises(
        UnsupportedConstruct, match=rf"rule 'order'.*dimension 2 .*:{line + 5}\).*dimension 1 .*:{line + 4}"
    ):
        two_row_dimensions(q)
    with pytest.raises(UnsupportedConstruct, match=r"rule 'order'.*columns along dimension 2.*last dimension \(3\)"):
        columns_off_the_last_dimension(q)


# -- ZN Mat tiles -----------------------------------------------------------------------------
M, K, N = 32, 48, 16


def _matmul_bt(a, b_t, out, scale=None):
    """out = a @ b_t.T (scaled by the fixpipe when ``scale`` is given), on the cube: a helper the section calls."""
    a_mat = pl.make_tile(pl.TileType(shape=[M, K], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Mat,
                                     layout=pl.NZ), addr=0x0)  # fmt: skip
    b_mat = pl.make_tile(pl.TileType(shape=[K, N], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Mat,
                                     layout=pl.ZN), addr=0x8000)  # fmt: skip
    a_left = pl.make_tile(pl.TileType(shape=[M, K], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Left), addr=0)
    b_right = pl.make_tile(pl.TileType(shape=[K, N], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Right,
                                       layout=pl.ZN), addr=0)  # fmt: skip
    c = pl.make_tile(pl.TileType(shape=[M, N], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Acc), addr=0)
    pl.load(a_mat, a, [0, 0])
    pl.load(b_mat, b_t, [0, 0], order=[1, 0])  # the transpose of b_t lands in the ZN tile
    _sync(pl.PipeType.MTE2, pl.PipeType.MTE1, 0)
    pl.move(a_left, a_mat)
    pl.move(b_right, b_mat)
    _sync(pl.PipeType.MTE1, pl.PipeType.M, 0)
    pl.matmul(c, a_left, b_right)
    _sync(pl.PipeType.M, pl.PipeType.FIX, 0)
    pl.store(out, c, [0, 0], scale=scale)


@pl.jit(auto_mutex=False)
def matmul_bt(a: pl.Tensor[[M, K], pl.DT_FP16], b_t: pl.Tensor[[N, K], pl.DT_FP16],
              out: pl.Tensor[[M, N], pl.DT_FP32]):  # fmt: skip
    with pl.section_cube():
        _matmul_bt(a, b_t, out)


def test_a_transposed_load_into_a_zn_mat_tile_feeds_the_matmul_its_transpose():
    a = RNG.standard_normal((M, K)).astype(np.float16)
    b_t = RNG.standard_normal((N, K)).astype(np.float16)
    out = np.zeros((M, N), np.float32)
    result = matmul_bt(a, b_t, out)
    assert result.ok, result.report()
    np.testing.assert_allclose(out, a.astype(np.float32) @ b_t.astype(np.float32).T, rtol=2e-3, atol=2e-3)


@pl.jit(auto_mutex=False)
def zn_without_order(b_t: pl.Tensor[[N, K], pl.DT_FP16]):
    with pl.section_cube():
        b_mat = pl.make_tile(pl.TileType(shape=[K, N], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Mat,
                                         layout=pl.ZN), addr=0x0)  # fmt: skip
        pl.load(b_mat, b_t, [0, 0])


def test_a_zn_mat_tile_loaded_without_the_transposed_order_is_refused():
    with pytest.raises(UnsupportedConstruct, match=r"rule 'order'.*give order=\[1, 0\]"):
        zn_without_order(np.zeros((N, K), np.float16))


# -- loops whose bounds are run-time values ---------------------------------------------------------
WORK_ROWS = 12
#: per block (a vector-only kernel runs one AIV a block): the rows [start, stop) it scales; block 3's range is
#: empty, and row 4 and rows 8.. are no one's
WORK = np.array([[0, 3], [3, 4], [5, 8], [8, 8]], np.int32)


def _scale_row(x, out, tile, row):
    pl.load(tile, x, [row, 0])
    _sync(pl.PipeType.MTE2, pl.PipeType.V, 0)
    pl.mul(tile, tile, 2.0)
    _sync(pl.PipeType.V, pl.PipeType.MTE3, 0)
    pl.store(out, tile, [row, 0])
    _sync(pl.PipeType.MTE3, pl.PipeType.MTE2, 0)


@pl.jit(auto_mutex=False)
def scale_work_ranges(x: pl.Tensor[[WORK_ROWS, COLS], pl.DT_FP32], work: pl.Tensor[[4, 2], pl.DT_INT32],
                      out: pl.Tensor[[WORK_ROWS, COLS], pl.DT_FP32]):  # fmt: skip
    t = pl.make_tile(_vec(1, COLS), addr=UB_A)
    with pl.section_vector():
        core = pl.get_block_idx()
        for row in pl.range(work[core, 0], work[core, 1]):  # bounds read from GM: within the contents' [0, 8]
            _scale_row(x, out, t, row)


def test_a_loop_between_bounds_read_from_an_input_runs_each_core_s_range():
    x = RNG.standard_normal((WORK_ROWS, COLS)).astype(np.float32)
    out = np.zeros_like(x)
    with warnings.catch_warnings():  # a tensor the kernel reads by scalar reads alone is used, not misspelt
        warnings.simplefilter("error", aj.UnusedInputWarning)
        result = scale_work_ranges[None, len(WORK)](x, WORK, out)
    assert result.ok, result.report()
    mine = np.zeros(WORK_ROWS, bool)
    for start, stop in WORK:
        mine[start:stop] = True
    np.testing.assert_array_equal(out[mine], 2 * x[mine])
    np.testing.assert_array_equal(out[~mine], 0)


@pl.jit(auto_mutex=False)
def scale_in_chunks(x: pl.Tensor[[WORK_ROWS, COLS], pl.DT_FP32], out: pl.Tensor[[WORK_ROWS, COLS], pl.DT_FP32]):
    t = pl.make_tile(_vec(1, COLS), addr=UB_A)
    with pl.section_vector():
        if pl.get_subblock_idx() == 0:
            for chunk in pl.range(0, 3):
                rows = pl.min(4, 10 - chunk * 4)  # 4, 4, then a tail of 2: at most 4
                for r in pl.range(0, rows):
                    _scale_row(x, out, t, chunk * 4 + r)


def test_a_tail_loop_bounded_by_pl_min_runs_the_tail_s_rows():
    x = RNG.standard_normal((WORK_ROWS, COLS)).astype(np.float32)
    out = np.zeros_like(x)
    result = scale_in_chunks(x, out)
    assert result.ok, result.report()
    np.testing.assert_array_equal(out[:10], 2 * x[:10])
    np.testing.assert_array_equal(out[10:], 0)


@pl.jit(auto_mutex=False)
def carried_stop(x: pl.Tensor[[WORK_ROWS, COLS], pl.DT_FP32], out: pl.Tensor[[WORK_ROWS, COLS], pl.DT_FP32]):
    t = pl.make_tile(_vec(1, COLS), addr=UB_A)
    with pl.section_vector():
        limit = 1
        for _chunk in pl.range(0, 3):
            limit = limit + 1  # carried from trip to trip: no bound the front end can tell
            for r in pl.range(0, limit):
                _scale_row(x, out, t, r)


def test_a_loop_whose_stop_has_no_bound_is_refused_naming_its_line():
    line = carried_stop.__wrapped__.__code__.co_firstlineno + 7
    with pytest.raises(UnsupportedConstruct, match=rf"rule 'pl.range': the stop at line {line} .*no bound"):
        carried_stop(np.zeros((WORK_ROWS, COLS), np.float32), np.zeros((WORK_ROWS, COLS), np.float32))


# -- a tile-group slot carried through a loop ---------------------------------------------------------------
@pl.jit(auto_mutex=True)
def last_slot_after_the_loop(x: pl.Tensor[[3, ROWS], pl.DT_FP32], out: pl.Tensor[[1, ROWS], pl.DT_FP32],
                             other_group: int = 0):  # fmt: skip
    row = pl.TileType(shape=[1, ROWS], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec)
    rows = pl.make_tile_group(type=row, addrs=0x0, mutex_ids=[0, 1])
    spare = pl.make_tile_group(type=row, addrs=0x1000, mutex_ids=[2, 3])
    with pl.section_vector():
        t = rows.next()
        for i in pl.range(3):
            t = spare.next() if other_group else rows.next()  # a slot of the same group: its index is carried
            pl.load(t, x, [i, 0])
        pl.mul(t, t, 2.0)  # the slot the last trip loaded
        pl.store(out, t, [0, 0])


def test_a_tile_group_slot_rebound_in_a_loop_is_the_last_trip_s_after_it():
    x = RNG.standard_normal((3, ROWS)).astype(np.float32)
    out = np.zeros((1, ROWS), np.float32)
    result = last_slot_after_the_loop(x, out)
    assert result.ok, result.report()
    np.testing.assert_allclose(out[0], 2.0 * x[2], rtol=1e-6)
    with pytest.raises(UnsupportedConstruct, match=r"rule 'carried value': 't' .*one tile group"):
        last_slot_after_the_loop(x, out, 1)


# -- branches holding waits, in line in nested loops of a section -------------------------------------------
@pl.jit(auto_mutex=False)
def nested_flat(out: pl.Tensor[[2, COLS], pl.DT_FP32]):
    with pl.section_cube():
        for _t in pl.range(2):
            for _q in pl.range(2):
                for _j in pl.range(2):
                    pl.system.set_cross_core(pipe=pl.PipeType.FIX, event_id=0)
                    pl.system.wait_cross_core(pipe=pl.PipeType.FIX, event_id=1)
    with pl.section_vector():
        row = pl.make_tile(_vec(1, COLS), addr=UB_A)
        for t in pl.range(2):
            for _q in pl.range(2):
                for _j in pl.range(2):
                    if t >= 0:  # a run-time test: a branch holding a wait, in line in both loops
                        pl.system.wait_cross_core(pipe=pl.PipeType.V, event_id=0)
                        pl.system.set_cross_core(pipe=pl.PipeType.V, event_id=1)
        pl.expands(row, 1.0)
        _sync(pl.PipeType.V, pl.PipeType.MTE3, 0)
        pl.store(out, row, [pl.get_subblock_idx(), 0])


def test_a_branch_holding_a_wait_in_nested_loops_of_a_section_keeps_its_place_in_every_segment():
    out = np.zeros((2, COLS), np.float32)
    result = nested_flat(out)  # each segment's trace skips the iterations before it, and their branches with them
    assert result.ok, result.report()
    np.testing.assert_array_equal(out, 1.0)


# -- jumps --------------------------------------------------------------------------------------
def _first_over(limit):
    for i in pl.range(0, 10):
        if i * i > limit:
            return i
    return -1


@pl.jit(auto_mutex=False)
def jumps(out: pl.Tensor[[4], pl.DT_INT32]):
    with pl.section_vector():
        n: pl.DT_INT32 = 0
        while n < 5:
            n = n + 1
        total = 0
        for i in pl.range(0, 8):  # static bounds: unrolled, as it breaks
            if i == 6:
                break
            if i % 2 == 1:
                continue
            total = total + i
        out[0] = n
        out[1] = total
        out[2] = _first_over(20)
        out[3] = _first_over(200)


def test_static_while_break_continue_and_early_return_run_as_python():
    out = np.zeros(4, np.int32)
    result = jumps(out)
    assert result.ok, result.report()
    np.testing.assert_array_equal(out, [5, 0 + 2 + 4, 5, -1])


@pl.jit(auto_mutex=False)
def traced_break(out: pl.Tensor[[4], pl.DT_INT32]):
    with pl.section_vector():
        for i in pl.range(pl.get_block_idx(), 4):  # a run-time start: recorded as a loop
            if i == 2:
                break
            out[i] = i


def test_a_jump_a_run_time_value_decides_is_refused_naming_the_loop():
    with pytest.raises(UnsupportedConstruct, match="breaks or continues and its bounds are run-time values"):
        traced_break[None, 2](np.zeros(4, np.int32))


# -- valid shapes (tails) -------------------------------------------------------------------------
TOTAL_ROWS, TAIL_COLS = 40, 48  # 40 rows in 16-row tiles: a tail of 8; 48 of the tile's 64 columns


@pl.jit(auto_mutex=False)
def row_sums(x: pl.Tensor[[TOTAL_ROWS, TAIL_COLS], pl.DT_FP32], y: pl.Tensor[[TOTAL_ROWS, TAIL_COLS], pl.DT_FP32],
             s: pl.Tensor[[TOTAL_ROWS, 1], pl.DT_FP32]):  # fmt: skip
    t = pl.make_tile(pl.TileType(shape=[ROWS, COLS], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec,
                                 valid_shape=[-1, -1]), addr=UB_A)  # fmt: skip
    r = pl.make_tile(pl.TileType(shape=[ROWS, 1], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec, layout=pl.DN,
                                 valid_shape=[-1, -1]), addr=UB_B)  # fmt: skip
    with pl.section_vector():
        for row in pl.range(0, TOTAL_ROWS, ROWS):
            valid_rows = pl.min(ROWS, TOTAL_ROWS - row)
            pl.set_validshape(t, [valid_rows, TAIL_COLS])
            pl.set_validshape(r, [valid_rows, 1])
            pl.load(t, x, [row, 0])
            _sync(pl.PipeType.MTE2, pl.PipeType.V, 0)
            pl.exp(t, t)
            pl.sum(r, t, t, dim=0)
            _sync(pl.PipeType.V, pl.PipeType.MTE3, 0)
            pl.store(y, t, [row, 0])
            pl.store(s, r, [row, 0])
            _sync(pl.PipeType.MTE3, pl.PipeType.MTE2, 0)


def test_a_tail_tile_loads_computes_and_stores_its_valid_region_only():
    x = RNG.standard_normal((TOTAL_ROWS, TAIL_COLS)).astype(np.float32)
    y = np.zeros_like(x)
    s = np.zeros((TOTAL_ROWS, 1), np.float32)
    result = row_sums(x, y, s)
    assert result.ok, result.report()
    np.testing.assert_allclose(y, np.exp(x), rtol=1e-6)
    np.testing.assert_allclose(s, np.exp(x).sum(axis=1, keepdims=True), rtol=1e-5)


@pl.jit(auto_mutex=False)
def too_valid(x: pl.Tensor[[ROWS, COLS], pl.DT_FP32]):
    t = pl.make_tile(pl.TileType(shape=[ROWS, COLS], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec,
                                 valid_shape=[ROWS, COLS + 1]), addr=UB_A)  # fmt: skip
    with pl.section_vector():
        pl.load(t, x, [0, 0])


TAIL_ROWS = 10  # of a 16-row tile


@pl.jit(auto_mutex=False)
def undeclared_valid(x: pl.Tensor[[TAIL_ROWS, COLS], pl.DT_FP32], y: pl.Tensor[[TAIL_ROWS, COLS], pl.DT_FP32]):
    group = pl.make_tile_group(type=_vec(), addrs=[UB_A, UB_A + ROWS * COLS * 4])  # declared without a valid_shape
    with pl.section_vector():
        t = group.next()
        pl.set_validshape(t, [TAIL_ROWS, COLS])  # as PyPTO-Pro allows: the jit learns it and records again
        pl.load(t, x, [0, 0])
        _sync(pl.PipeType.MTE2, pl.PipeType.V, 0)
        pl.exp(t, t)
        _sync(pl.PipeType.V, pl.PipeType.MTE3, 0)
        pl.store(y, t, [0, 0])


def test_a_valid_shape_outside_its_tile_is_refused():
    with pytest.raises(ValueError, match=r"rule 'valid shape': valid_shape \[16, 65\] is outside \[16, 64\]"):
        too_valid(np.zeros((ROWS, COLS), np.float32))


def test_a_valid_shape_set_on_a_tile_declared_without_one_covers_its_tail():
    x = RNG.standard_normal((TAIL_ROWS, COLS)).astype(np.float32)
    y = np.zeros_like(x)
    result = undeclared_valid(x, y)  # 10 rows of 16: the whole tile would run past both tensors
    assert result.ok, result.report()
    np.testing.assert_allclose(y, np.exp(x), rtol=1e-6)


@pl.jit(auto_mutex=False)
def tail_past_the_tile(x: pl.Tensor[[TOTAL_ROWS, TAIL_COLS], pl.DT_FP32]):
    t = pl.make_tile(pl.TileType(shape=[ROWS, COLS], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec,
                                 valid_shape=[-1, -1]), addr=UB_A)  # fmt: skip
    with pl.section_vector():
        for row in pl.range(0, 2 * ROWS, ROWS):
            pl.set_validshape(t, [ROWS + row // ROWS, TAIL_COLS])  # 17 rows of a 16-row tile on the second trip
            pl.load(t, x, [row, 0])


def test_a_run_time_valid_shape_past_its_tile_is_a_bounds_finding():
    result = tail_past_the_tile(np.zeros((TOTAL_ROWS, TAIL_COLS), np.float32))
    assert not result.ok
    assert "BOUNDS" in str(result.report()) and "loop iteration (1)" in str(result.report())


# -- outputs passed holding data ----------------------------------------------------------------
@pl.jit(auto_mutex=False)
def top_half(x: pl.Tensor[[ROWS, COLS], pl.DT_FP32], out: pl.Tensor[[2 * ROWS, COLS], pl.DT_FP32]):
    t = pl.make_tile(_vec(), addr=UB_A)
    with pl.section_vector():
        pl.load(t, x, [0, 0])
        _sync(pl.PipeType.MTE2, pl.PipeType.MTE3, 0)
        pl.store(out, t, [0, 0])


def test_an_output_passed_holding_data_keeps_what_the_kernel_does_not_store():
    x = RNG.standard_normal((ROWS, COLS)).astype(np.float32)
    out = np.full((2 * ROWS, COLS), 7.0, np.float32)
    result = top_half(x, out)
    assert result.ok, result.report()
    np.testing.assert_array_equal(out[:ROWS], x)
    np.testing.assert_array_equal(out[ROWS:], 7.0)  # as the device leaves the buffer it was given


# -- tails on the cube ---------------------------------------------------------------------------
TAIL_M, TILE_M, TAIL_K, TAIL_N = 40, 32, 32, 32  # 40 rows in 32-row tiles: a tail of 8


def _tailed(shape, dtype, space):
    return pl.TileType(shape=shape, dtype=dtype, target_memory=space, valid_shape=[-1, -1])


@pl.jit(auto_mutex=False)
def matmul_tail(a: pl.Tensor[[TAIL_M, TAIL_K], pl.DT_FP16], b: pl.Tensor[[TAIL_K, TAIL_N], pl.DT_FP16],
                out: pl.Tensor[[TAIL_M, TAIL_N], pl.DT_FP32]):  # fmt: skip
    with pl.section_cube():
        a_mat = pl.make_tile(_tailed([TILE_M, TAIL_K], pl.DT_FP16, pl.MemorySpace.Mat), addr=0x0)
        b_mat = pl.make_tile(pl.TileType(shape=[TAIL_K, TAIL_N], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Mat),
                             addr=0x8000)  # fmt: skip
        a_left = pl.make_tile(_tailed([TILE_M, TAIL_K], pl.DT_FP16, pl.MemorySpace.Left), addr=0)
        b_right = pl.make_tile(pl.TileType(shape=[TAIL_K, TAIL_N], dtype=pl.DT_FP16,
                                           target_memory=pl.MemorySpace.Right), addr=0)  # fmt: skip
        c = pl.make_tile(_tailed([TILE_M, TAIL_N], pl.DT_FP32, pl.MemorySpace.Acc), addr=0)
        pl.load(b_mat, b, [0, 0])
        _sync(pl.PipeType.MTE2, pl.PipeType.MTE1, 1)
        pl.move(b_right, b_mat)
        for row in pl.range(0, TAIL_M, TILE_M):
            rows = pl.min(TILE_M, TAIL_M - row)
            pl.set_validshape(a_mat, [rows, TAIL_K])
            pl.set_validshape(a_left, [rows, TAIL_K])
            pl.set_validshape(c, [rows, TAIL_N])
            pl.load(a_mat, a, [row, 0])
            _sync(pl.PipeType.MTE2, pl.PipeType.MTE1, 0)
            pl.move(a_left, a_mat)
            _sync(pl.PipeType.MTE1, pl.PipeType.M, 0)
            pl.matmul(c, a_left, b_right)
            _sync(pl.PipeType.M, pl.PipeType.FIX, 0)
            pl.store(out, c, [row, 0])
            _sync(pl.PipeType.FIX, pl.PipeType.M, 0)
            _sync(pl.PipeType.M, pl.PipeType.MTE1, 0)
            _sync(pl.PipeType.MTE1, pl.PipeType.MTE2, 0)


def test_a_matmul_tail_loads_multiplies_and_stores_its_valid_rows():
    a = RNG.standard_normal((TAIL_M, TAIL_K)).astype(np.float16)
    b = RNG.standard_normal((TAIL_K, TAIL_N)).astype(np.float16)
    out = np.zeros((TAIL_M, TAIL_N), np.float32)
    result = matmul_tail(a, b, out)
    assert result.ok, result.report()
    np.testing.assert_allclose(out, a.astype(np.float32) @ b.astype(np.float32), rtol=2e-3, atol=2e-3)


# -- two tiles on one address ----------------------------------------------------------------------
@pl.jit(auto_mutex=False)
def sums_as_a_row(x: pl.Tensor[[ROWS, COLS], pl.DT_FP32], out: pl.Tensor[[1, ROWS], pl.DT_FP32]):
    t = pl.make_tile(_vec(), addr=UB_A)
    column = pl.make_tile(_vec(ROWS, 1), addr=UB_B)
    row = pl.make_tile(_vec(1, ROWS), addr=UB_B)  # the same bytes as `column`: a view of its elements
    with pl.section_vector():
        pl.load(t, x, [0, 0])
        _sync(pl.PipeType.MTE2, pl.PipeType.V, 0)
        pl.sum(column, t, t, dim=0)
        _sync(pl.PipeType.V, pl.PipeType.MTE3, 0)
        pl.store(out, row, [0, 0])


@pl.jit(auto_mutex=False)
def sums_as_a_row_unsynced(x: pl.Tensor[[ROWS, COLS], pl.DT_FP32], out: pl.Tensor[[1, ROWS], pl.DT_FP32]):
    t = pl.make_tile(_vec(), addr=UB_A)
    column = pl.make_tile(_vec(ROWS, 1), addr=UB_B)
    row = pl.make_tile(_vec(1, ROWS), addr=UB_B)
    with pl.section_vector():
        pl.load(t, x, [0, 0])
        _sync(pl.PipeType.MTE2, pl.PipeType.V, 0)
        pl.sum(column, t, t, dim=0)
        pl.store(out, row, [0, 0])  # reads the view's bytes while V may still write them


def test_a_tile_at_another_tile_s_bytes_views_its_elements_and_races_with_it():
    x = RNG.standard_normal((ROWS, COLS)).astype(np.float32)
    out = np.zeros((1, ROWS), np.float32)
    result = sums_as_a_row(x, out)
    assert result.ok, result.report()
    np.testing.assert_allclose(out[0], x.sum(axis=1), rtol=1e-5, atol=1e-5)
    bad = sums_as_a_row_unsynced(x, np.zeros((1, ROWS), np.float32))
    text = str(bad.report())
    assert "RACE (RAW)" in text and "pl.sum" in text and "pl.store" in text  # the store reads what V may still write


@pl.jit(auto_mutex=False)
def half_overlap(x: pl.Tensor[[ROWS, COLS], pl.DT_FP32]):
    pl.make_tile(_vec(ROWS, 1), addr=UB_B)
    pl.make_tile(_vec(1, 2 * ROWS), addr=UB_B)  # more bytes than the live tile: no view


def test_a_tile_overlapping_part_of_another_is_refused():
    with pytest.raises(ValueError, match="rule 'no overlap'"):
        half_overlap(np.zeros((ROWS, COLS), np.float32))


# -- a move out of Acc that quantises -------------------------------------------------------------------
SCALE = 0.25


@pl.jit(auto_mutex=False)
def quantised_move(a: pl.Tensor[[M, K], pl.DT_FP16], b_t: pl.Tensor[[N, K], pl.DT_FP16],
                   out: pl.Tensor[[M, N], pl.DT_INT8], direct: pl.Tensor[[M, N], pl.DT_INT8]):  # fmt: skip
    half = pl.make_tile(pl.TileType(shape=[M // 2, N], dtype=pl.DT_INT8, target_memory=pl.MemorySpace.Vec), addr=0)
    with pl.section_cube():
        _matmul_bt(a, b_t, direct, SCALE)  # the store's quantisation: the move's twin
        acc = pl.make_tile(pl.TileType(shape=[M, N], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Acc), addr=0)
        pl.move(half, acc, acc_to_vec_mode=pl.AccToVecMode.DualModeSplitM, scale=SCALE)  # each AIV its int8 half
        pl.system.set_cross_core(pipe=pl.PipeType.FIX, event_id=0)
    with pl.section_vector():
        pl.system.wait_cross_core(pipe=pl.PipeType.MTE3, event_id=0)
        pl.store(out, half, [pl.get_subblock_idx() * (M // 2), 0])


def test_a_move_out_of_acc_with_a_scale_quantises_as_the_store_does():
    a = RNG.standard_normal((M, K)).astype(np.float16)
    b_t = RNG.standard_normal((N, K)).astype(np.float16)
    out, direct = np.zeros((M, N), np.int8), np.zeros((M, N), np.int8)
    result = quantised_move(a, b_t, out, direct)
    assert result.ok, result.report()
    np.testing.assert_array_equal(out, direct)  # the same fixpipe conversion, into UB or GM
    exact = np.clip(a.astype(np.float64) @ b_t.astype(np.float64).T * SCALE, -128, 127)
    assert np.abs(out - exact).max() <= 0.5 + 1e-3 and np.abs(out).max() > 1  # rounded, not truncated nor zero


# -- a per-tensor scale as its float32 bits -----------------------------------------------------------
@pl.jit(auto_mutex=False)
def quantised(a: pl.Tensor[[M, K], pl.DT_FP16], b_t: pl.Tensor[[N, K], pl.DT_FP16],
              out: pl.Tensor[[M, N], pl.DT_INT8], scale: pl.DT_INT32):  # fmt: skip
    with pl.section_cube():
        _matmul_bt(a, b_t, out, scale)


def test_an_integer_per_tensor_scale_is_the_float32_bits_the_register_holds():
    a = RNG.integers(-3, 4, (M, K)).astype(np.float16)
    b_t = RNG.integers(-3, 4, (N, K)).astype(np.float16)
    bits = int(np.array(0.125, np.float32).view(np.uint32))
    out = np.zeros((M, N), np.int8)
    result = quantised(a, b_t, out, bits)
    assert result.ok, result.report()
    expect = a.astype(np.float32) @ b_t.astype(np.float32).T * 0.125
    np.testing.assert_array_equal(out, np.clip(np.round(expect), -128, 127).astype(np.int8))
    assert np.any(out != 0)


# -- tiles a section declares, and a tuple of tiles indexed by a run-time value ----------------------------------
def _ping_pong_pair():
    """Declared in a helper the section calls, as PyPTO-Pro kernels keep their tile set-up apart."""
    return (pl.make_tile(_vec(), addr=UB_A), pl.make_tile(_vec(), addr=UB_B))


@pl.jit(auto_mutex=False)
def pair_by_index(x: pl.Tensor[[4 * ROWS, COLS], pl.DT_FP32], out: pl.Tensor[[4 * ROWS, COLS], pl.DT_FP32],
                  shift: pl.DT_INT32 = 0):  # fmt: skip
    with pl.section_vector():
        pair = _ping_pong_pair()
        for i in pl.range(4):
            buf = pair[i % 2 + shift]  # a run-time index into a Python tuple of tiles
            pl.load(buf, x, [i * ROWS, 0])
            _sync(pl.PipeType.MTE2, pl.PipeType.V, 0)
            pl.add(buf, buf, pl.const(i, pl.DT_FP32))
            _sync(pl.PipeType.V, pl.PipeType.MTE3, 0)
            pl.store(out, buf, [i * ROWS, 0])
            _sync(pl.PipeType.MTE3, pl.PipeType.MTE2, 0)


def test_a_tuple_of_tiles_made_in_a_section_is_indexed_by_a_run_time_value():
    x = RNG.standard_normal((4 * ROWS, COLS)).astype(np.float32)
    out = np.zeros_like(x)
    result = pair_by_index(x, out)
    assert result.ok, result.report()
    np.testing.assert_allclose(out, x + np.repeat(np.arange(4), ROWS)[:, None], rtol=1e-6)
    # the bad twin: index 2 of a pair is no tile: a BOUNDS finding at the load, nothing read or written elsewhere
    out = np.zeros_like(x)
    bad = pair_by_index(x, out, 1)
    assert not bad.ok and "BOUNDS" in str(bad.report())


@pl.jit(auto_mutex=False)
def tuple_made_in_loop(x: pl.Tensor[[ROWS, COLS], pl.DT_FP32], out: pl.Tensor[[ROWS, COLS], pl.DT_FP32]):
    a = pl.make_tile(_vec(), addr=UB_A)
    with pl.section_vector():
        pl.load(a, x, [0, 0])
        _sync(pl.PipeType.MTE2, pl.PipeType.V, 0)
        for _ in pl.range(3):
            tiles = pl.make_tuple(acc=a, rows=ROWS)  # the same every trip: it outlives the loop, as in Python
            pl.add(tiles.acc, tiles.acc, 1.0)
        _sync(pl.PipeType.V, pl.PipeType.MTE3, 0)
        pl.store(out, tiles.acc, [0, 0])


def test_a_tuple_of_tiles_first_made_in_a_loop_is_read_after_it():
    x = RNG.standard_normal((ROWS, COLS)).astype(np.float32)
    out = np.zeros_like(x)
    assert tuple_made_in_loop(x, out).ok
    np.testing.assert_allclose(out, x + 3.0, rtol=1e-6)


# -- fillpad ----------------------------------------------------------------------------------------------------
@pl.jit(auto_mutex=False)
def padded(x: pl.Tensor[[8, 8], pl.DT_FP32], z: pl.Tensor[[8, 16], pl.DT_FP32], expand=False, pad=pl.TilePad.min):
    src = pl.make_tile(
        pl.TileType(shape=[8, 8], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec, valid_shape=[-1, -1]), addr=0
    )
    dst = pl.make_tile(
        pl.TileType(shape=[8, 16] if expand else [8, 8], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec, pad=pad),
        addr=0x400,
    )
    with pl.section_vector():
        pl.load(src, x, [0, 0])
        _sync(pl.PipeType.MTE2, pl.PipeType.V, 0)
        pl.set_validshape(src, [5, 7])
        pl.fillpad(dst, src, mode=pl.FillPadMode.EXPAND if expand else pl.FillPadMode.NORMAL)
        _sync(pl.PipeType.V, pl.PipeType.MTE3, 0)
        pl.store(z, dst, [0, 0])


@pytest.mark.parametrize(("expand", "pad", "fill"), [(False, pl.TilePad.min, -np.inf), (True, pl.TilePad.zero, 0.0)])
def test_fillpad_keeps_the_valid_region_and_writes_the_declared_pad(expand, pad, fill):
    x = RNG.standard_normal((8, 8)).astype(np.float32)
    z = np.full((8, 16), 7.0, np.float32)
    assert padded(x, z, expand, pad).ok
    want = np.full((8, 16 if expand else 8), fill, np.float32)
    want[:5, :7] = x[:5, :7]
    np.testing.assert_array_equal(z[:, : want.shape[1]], want)


def test_fillpad_into_a_tile_without_a_pad_is_refused():
    with pytest.raises(ValueError, match="rule 'fillpad'.*declared without a pad"):
        padded(np.zeros((8, 8), np.float32), np.zeros((8, 16), np.float32), False, pl.TilePad.null)


# -- two tile groups at one address ------------------------------------------------------------------------------
@pl.jit(auto_mutex=False)
def group_views(x: pl.Tensor[[2, ROWS], pl.DT_FP32], out: pl.Tensor[[2, ROWS], pl.DT_FP32]):
    col = pl.TileType(shape=[ROWS, 1], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec, layout=pl.DN)
    row = pl.TileType(shape=[1, ROWS], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec)
    cols = pl.make_tile_group(type=col, addrs=[0x0, 0x200])
    rows = pl.make_tile_group(type=row, addrs=[0x0, 0x200])  # the same bytes, slot by slot: a view of `cols`
    with pl.section_vector():
        for i in pl.range(2):
            pl.load(rows[i], x, [i, 0])
            _sync(pl.PipeType.MTE2, pl.PipeType.V, 0)
            pl.mul(cols[i], cols[i], 2.0)  # the column view of the row just loaded
            _sync(pl.PipeType.V, pl.PipeType.MTE3, 0)
            pl.store(out, rows[i], [i, 0])
            _sync(pl.PipeType.MTE3, pl.PipeType.MTE2, 0)


def test_a_tile_group_at_another_groups_bytes_views_its_slots():
    x = RNG.standard_normal((2, ROWS)).astype(np.float32)
    out = np.zeros_like(x)
    result = group_views(x, out)
    assert result.ok, result.report()
    np.testing.assert_allclose(out, 2.0 * x, rtol=1e-6)


SLOT_BYTES = 512  # a [1, ROWS] fp32 row (64 B) takes one granule


@pl.jit(auto_mutex=False)
def spaced_group(x: pl.Tensor[[2, ROWS], pl.DT_FP32], out: pl.Tensor[[2, ROWS], pl.DT_FP32]):
    row = pl.TileType(shape=[1, ROWS], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec)
    rows = pl.make_tile_group(type=row, addrs=[0x0, 2 * SLOT_BYTES])  # slots a granule further apart than needed
    with pl.section_vector():
        for i in pl.range(2):
            pl.load(rows[i], x, [i, 0])
            _sync(pl.PipeType.MTE2, pl.PipeType.V, 0)
            pl.mul(rows[i], rows[i], 3.0)
            _sync(pl.PipeType.V, pl.PipeType.MTE3, 0)
            pl.store(out, rows[i], [i, 0])
            _sync(pl.PipeType.MTE3, pl.PipeType.MTE2, 0)


@pl.jit(auto_mutex=False)
def uneven_group(x: pl.Tensor[[2, ROWS], pl.DT_FP32]):
    row = pl.TileType(shape=[1, ROWS], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec)
    pl.make_tile_group(type=row, addrs=[0x0, SLOT_BYTES, 3 * SLOT_BYTES])


@pl.jit(auto_mutex=False)
def overlapping_group(x: pl.Tensor[[2, ROWS], pl.DT_FP32]):
    pl.make_tile_group(type=_vec(), addrs=[0x0, 7 * SLOT_BYTES])  # 4 KiB slots 3.5 KiB apart


def test_a_tile_group_s_slots_may_lie_a_fixed_stride_apart():
    x = RNG.standard_normal((2, ROWS)).astype(np.float32)
    out = np.zeros_like(x)
    result = spaced_group(x, out)
    assert result.ok, result.report()
    np.testing.assert_allclose(out, 3.0 * x, rtol=1e-6)
    with pytest.raises(UnsupportedConstruct, match=r"rule 'tile group addresses'.*not evenly spaced"):
        uneven_group(x)
    with pytest.raises(
        ValueError, match=r"rule 'tile group addresses': slots 3584 B apart do not hold .*4096 B.* at least 4096 B"
    ):
        overlapping_group(x)


@pl.jit(auto_mutex=False)
def tail_in_section(x: pl.Tensor[[ROWS, COLS], pl.DT_FP32], out: pl.Tensor[[ROWS, COLS], pl.DT_FP32]):
    with pl.section_vector():  # a valid-shape tile declared where the section uses it (its slots: reserved ones)
        t = pl.make_tile(pl.TileType(shape=[ROWS, COLS], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec,
                                          valid_shape=[-1, -1]), addr=UB_A)  # fmt: skip
        pl.set_validshape(t, [5, 24])
        pl.load(t, x, [0, 0])
        _sync(pl.PipeType.MTE2, pl.PipeType.V, 0)
        pl.add(t, t, 1.0)
        _sync(pl.PipeType.V, pl.PipeType.MTE3, 0)
        pl.store(out, t, [0, 0])


def test_a_valid_shape_tile_declared_in_a_section_covers_its_tail():
    x = RNG.standard_normal((ROWS, COLS)).astype(np.float32)
    out = np.zeros_like(x)
    assert tail_in_section(x, out).ok
    want = np.zeros_like(x)
    want[:5, :24] = x[:5, :24] + 1.0
    np.testing.assert_allclose(out, want, rtol=1e-6)


@pl.jit(auto_mutex=False)
def tuple_after_section_loop(x: pl.Tensor[[2 * ROWS, COLS], pl.DT_FP32], out: pl.Tensor[[2 * ROWS, COLS], pl.DT_FP32]):
    with pl.section_cube():
        pl.system.set_cross_core(pipe=pl.PipeType.FIX, event_id=0)
    with pl.section_vector():
        a = pl.make_tile(_vec(ROWS // 2), addr=UB_A)
        sub = pl.get_subblock_idx()
        for _ in pl.range(1):
            tiles = pl.make_tuple(acc=a)  # read after the loop, in the section's next region (a segment of its own)
            pl.load(tiles.acc, x, [sub * (ROWS // 2), 0])
        pl.system.wait_cross_core(pipe=pl.PipeType.MTE3, event_id=0)
        _sync(pl.PipeType.MTE2, pl.PipeType.MTE3, 0)
        pl.store(out, tiles.acc, [sub * (ROWS // 2), 0])


def test_a_tuple_made_in_a_sections_loop_is_read_in_the_segment_after_it():
    x = RNG.standard_normal((2 * ROWS, COLS)).astype(np.float32)
    out = np.zeros_like(x)
    assert tuple_after_section_loop(x, out).ok
    np.testing.assert_array_equal(out[:ROWS], x[:ROWS])


# -- membership, the bias row, store order ------------------------------------------------------
@pl.jit(auto_mutex=False)
def membership(out: pl.Tensor[[4, 8], pl.DT_INT32]):
    with pl.section_vector():
        for i in pl.range(0, 8):
            out[0, i] = 1 if i in (1, 4) else 0
            out[1, i] = 1 if i in pl.range(2, 8, 3) else 0
            out[2, i] = 1 if i in pl.range(6, 0, -2) else 0
            if i not in (0, 7):
                out[3, i] = 1
            else:
                out[3, i] = 0


def test_in_compares_a_run_time_index_with_each_item_or_the_range_it_names():
    out = np.full((4, 8), -1, np.int32)
    result = membership(out)
    assert result.ok, result.report()
    expect = np.zeros((4, 8), np.int32)
    expect[0, [1, 4]] = 1
    expect[1, list(range(2, 8, 3))] = 1
    expect[2, list(range(6, 0, -2))] = 1
    expect[3, 1:7] = 1
    np.testing.assert_array_equal(out, expect)


BIAS_N = 32


def _current(shape, dtype, memory, addr, mutex_id):
    group = pl.make_tile_group(type=pl.TileType(shape=shape, dtype=dtype, target_memory=memory), addrs=addr,
                               mutex_ids=[mutex_id])  # fmt: skip
    return group.current()


@pl.jit(auto_mutex=True)
def matmul_bias_row(a: pl.Tensor[[16, 32], pl.DT_FP16], b: pl.Tensor[[32, BIAS_N], pl.DT_FP16],
                    bias: pl.Tensor[[1, BIAS_N], pl.DT_FP16], c: pl.Tensor[[16, BIAS_N], pl.DT_FP32]):  # fmt: skip
    with pl.section_cube():
        a_mat = _current([16, 32], pl.DT_FP16, pl.MemorySpace.Mat, 0x0, 0)
        b_mat = _current([32, BIAS_N], pl.DT_FP16, pl.MemorySpace.Mat, 0x2000, 1)
        bias_mat = _current([1, BIAS_N], pl.DT_FP16, pl.MemorySpace.Mat, 0x4000, 2)  # a row: default NZ is ND
        left = _current([16, 32], pl.DT_FP16, pl.MemorySpace.Left, 0x0, 3)
        right = _current([32, BIAS_N], pl.DT_FP16, pl.MemorySpace.Right, 0x0, 4)
        bias_bt = _current([1, BIAS_N], pl.DT_FP32, pl.MemorySpace.Bias, 0x0, 5)
        acc = _current([16, BIAS_N], pl.DT_FP32, pl.MemorySpace.Acc, 0x0, 6)
        pl.load(a_mat, a, [0, 0])
        pl.load(b_mat, b, [0, 0])
        pl.load(bias_mat, bias, [0, 0])
        pl.move(left, a_mat)
        pl.move(right, b_mat)
        pl.move(bias_bt, bias_mat)
        pl.matmul(acc, left, right, bias_bt)
        pl.store(c, acc, [0, 0])


def test_a_one_row_mat_tile_of_the_default_layout_feeds_the_bias_table():
    a, b = (RNG.standard_normal(s).astype(np.float16) for s in ((16, 32), (32, BIAS_N)))
    bias = RNG.standard_normal((1, BIAS_N)).astype(np.float16)
    out = np.zeros((16, BIAS_N), np.float32)
    result = matmul_bias_row(a, b, bias, out)
    assert result.ok, result.report()
    expect = a.astype(np.float32) @ b.astype(np.float32) + bias.astype(np.float32)
    np.testing.assert_allclose(out, expect, rtol=2e-3, atol=2e-3)


@pl.jit(auto_mutex=False)
def store_descending(out: pl.Tensor[[16, 16], pl.DT_FP32]):
    with pl.section_cube():
        acc = pl.make_tile(pl.TileType(shape=[16, 16], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Acc), addr=0)
        pl.store(out, acc, [0, 0], order=[1, 0])


def test_a_store_in_descending_order_is_a_parse_error_naming_the_rule_and_line():
    line = store_descending.__wrapped__.__code__.co_firstlineno + 4
    with pytest.raises(
        ParserSyntaxError, match=rf"rule 'order'.*ascending.*order=\[1, 0\].*test_pypto_constructs.py:{line}"
    ):
        store_descending(np.zeros((16, 16), np.float32))
    assert issubclass(ParserSyntaxError, ValueError) and issubclass(ParserSyntaxError, TypeError)


HF8_T = 32


@pl.jit(auto_mutex=True)
def matmul_to_hf8(a: pl.Tensor[[HF8_T, HF8_T], pl.DT_FP32], b: pl.Tensor[[HF8_T, HF8_T], pl.DT_FP32],
                  out: pl.Tensor[[HF8_T, HF8_T], pl.DT_HF8]):  # fmt: skip
    with pl.section_cube():
        a_mat = _current([HF8_T, HF8_T], pl.DT_FP32, pl.MemorySpace.Mat, 0x0, 0)
        b_mat = _current([HF8_T, HF8_T], pl.DT_FP32, pl.MemorySpace.Mat, 0x8000, 1)
        left = _current([HF8_T, HF8_T], pl.DT_FP32, pl.MemorySpace.Left, 0x0, 2)
        right = _current([HF8_T, HF8_T], pl.DT_FP32, pl.MemorySpace.Right, 0x0, 3)
        acc = _current([HF8_T, HF8_T], pl.DT_FP32, pl.MemorySpace.Acc, 0x0, 4)
        pl.load(a_mat, a, [0, 0])
        pl.load(b_mat, b, [0, 0])
        pl.move(left, a_mat)
        pl.move(right, b_mat)
        pl.matmul(acc, left, right)
        pl.store(out, acc, [0, 0], scale=1.0)


def test_a_store_into_a_dt_hf8_tensor_writes_hifloat8_codes_of_the_product():
    """GM holds HiFloat8 as uint8 codes: the declared pl.DT_HF8, not the array's uint8, picks the fixpipe's mode."""
    a, b = (RNG.standard_normal((HF8_T, HF8_T)).astype(np.float32) for _ in range(2))
    out = np.zeros((HF8_T, HF8_T), np.uint8)
    result = matmul_to_hf8(a, b, out)
    assert result.ok, result.report()
    expect = np.asarray(hifloat8.encode(a.astype(np.float64) @ b.astype(np.float64)))  # ties may round apart
    assert np.mean(out == expect) >= 0.98
    np.testing.assert_allclose(np.asarray(hifloat8.decode(out)), a @ b, rtol=0.13, atol=2e-3)


@pl.jit(auto_mutex=False)
def eight_deep(out: pl.Tensor[[1, 256], pl.DT_INT32]):
    with pl.section_vector():
        for a in pl.range(0, 2):
            for b in pl.range(0, 2):
                for c in pl.range(0, 2):
                    for d in pl.range(0, 2):
                        for e in pl.range(0, 2):
                            for f in pl.range(0, 2):
                                for g in pl.range(0, 2):
                                    for h in pl.range(0, 2):
                                        index = ((((((a * 2 + b) * 2 + c) * 2 + d) * 2 + e) * 2 + f) * 2 + g) * 2 + h
                                        out[0, index] = a + b + c + d + e + f + g + h


def test_loops_nest_eight_deep():
    out = np.zeros((1, 256), np.int32)
    result = eight_deep(out)
    assert result.ok, result.report()
    np.testing.assert_array_equal(out[0], [bin(i).count("1") for i in range(256)])


@pl.jit(auto_mutex=False)
def nine_deep(out: pl.Tensor[[1, 8], pl.DT_INT32]):
    with pl.section_vector():
        for a in pl.range(0, 2):
            for b in pl.range(0, 2):
                for c in pl.range(0, 2):
                    for d in pl.range(0, 2):
                        for e in pl.range(0, 2):
                            for f in pl.range(0, 2):
                                for g in pl.range(0, 2):
                                    for h in pl.range(0, 2):
                                        for i in pl.range(0, 2):
                                            out[0, 0] = a + b + c + d + e + f + g + h + i


def test_a_ninth_nested_loop_is_refused_naming_the_rule_and_line():
    line = nine_deep.__wrapped__.__code__.co_firstlineno + 12  # the ninth loop's body, where it is recorded
    with pytest.raises(NotImplementedError, match=rf"rule 'loop depth'.*loop 9.*test_pypto_constructs.py:{line}"):
        nine_deep(np.zeros((1, 8), np.int32))


# -- a run-time tail split between the AIVs --------------------------------------------------------
DUAL_M, DUAL_K, DUAL_N = 32, 16, 32


def _tile(shape, dtype, memory, addr, valid=None):
    return pl.make_tile(pl.TileType(shape=shape, dtype=dtype, target_memory=memory, valid_shape=valid), addr=addr)


def _tail_tiles():
    """A's and B's Mat, Left and Right tiles, the product's Acc tile and a Vec tile of half its rows (both with a
    run-time valid shape)."""
    return (
        _tile([DUAL_M, DUAL_K], pl.DT_FP16, pl.MemorySpace.Mat, 0x0),
        _tile([DUAL_K, DUAL_N], pl.DT_FP16, pl.MemorySpace.Mat, 0x4000),
        _tile([DUAL_M, DUAL_K], pl.DT_FP16, pl.MemorySpace.Left, 0x0),
        _tile([DUAL_K, DUAL_N], pl.DT_FP16, pl.MemorySpace.Right, 0x0),
        _tile([DUAL_M, DUAL_N], pl.DT_FP32, pl.MemorySpace.Acc, 0x0, [-1, -1]),
        _tile([DUAL_M // 2, DUAL_N], pl.DT_FP32, pl.MemorySpace.Vec, 0x0, [-1, -1]),
    )


def _operands_into_l0(a, b, a_mat, b_mat, left, right):
    """GM ``a`` and ``b`` through L1 into L0A / L0B, each hand-off flagged (a helper the cube section calls)."""
    pl.load(a_mat, a, [0, 0])
    pl.load(b_mat, b, [0, 0])
    _sync(pl.PipeType.MTE2, pl.PipeType.MTE1, 0)
    pl.move(left, a_mat)
    pl.move(right, b_mat)
    _sync(pl.PipeType.MTE1, pl.PipeType.M, 0)


def _dual_split_m(overlap: int):
    """The cube moves a run-time ``sizes[0, 0]``-row tail of its product to both AIVs (DualModeSplitM); AIV0 stores
    its ceil(m / 2) rows at row 0, AIV1 its floor(m / 2) at row ceil(m / 2) - ``overlap``."""

    @pl.jit(auto_mutex=False)
    def dual_tail(a: pl.Tensor[[DUAL_M, DUAL_K], pl.DT_FP16], b: pl.Tensor[[DUAL_K, DUAL_N], pl.DT_FP16],
                  sizes: pl.Tensor[[1, 8], pl.DT_INT32], out: pl.Tensor[[DUAL_M, DUAL_N], pl.DT_FP32]):  # fmt: skip
        a_mat, b_mat, left, right, acc, vec = _tail_tiles()
        m = sizes[0, 0]
        top = (m + 1) // 2
        with pl.section_cube():
            _operands_into_l0(a, b, a_mat, b_mat, left, right)
            pl.set_validshape(acc, [m, DUAL_N])
            pl.matmul(acc, left, right)
            pl.move(vec, acc, acc_to_vec_mode=pl.AccToVecMode.DualModeSplitM)
            pl.system.set_cross_core(pipe=pl.PipeType.FIX, event_id=0)
        with pl.section_vector():
            pl.system.wait_cross_core(pipe=pl.PipeType.MTE3, event_id=0)
            if pl.get_subblock_idx() == 0:
                pl.set_validshape(vec, [top, DUAL_N])
                pl.store(out, vec, [0, 0])
            else:
                pl.set_validshape(vec, [m - top, DUAL_N])
                pl.store(out, vec, [top - overlap, 0])

    return dual_tail


DUAL_TAIL, DUAL_TAIL_OVERLAPPING = _dual_split_m(0), _dual_split_m(1)


@pytest.mark.parametrize("m", [17, 32, 3])
def test_a_run_time_tail_splits_between_the_aivs_and_their_adjacent_stores_do_not_race(m):
    a, b = (
        RNG.standard_normal((DUAL_M, DUAL_K)).astype(np.float16),
        RNG.standard_normal((DUAL_K, DUAL_N)).astype(np.float16),
    )
    sizes = np.zeros((1, 8), np.int32)
    sizes[0, 0] = m
    out = np.full((DUAL_M, DUAL_N), -1.0, np.float32)
    result = DUAL_TAIL(a, b, sizes, out)
    assert result.ok, result.report()
    expect = np.full((DUAL_M, DUAL_N), -1.0, np.float32)
    expect[:m] = (a.astype(np.float32) @ b.astype(np.float32))[:m]
    np.testing.assert_allclose(out, expect, rtol=1e-3, atol=1e-3)


def test_two_aivs_storing_overlapping_run_time_tails_race():
    sizes = np.zeros((1, 8), np.int32)
    sizes[0, 0] = 17
    a, b = np.ones((DUAL_M, DUAL_K), np.float16), np.ones((DUAL_K, DUAL_N), np.float16)
    result = DUAL_TAIL_OVERLAPPING(a, b, sizes, np.zeros((DUAL_M, DUAL_N), np.float32))
    assert result.report().verdict is aj.Verdict.RACE
    assert "GM:out" in result.report().message


@pl.jit(auto_mutex=False)
def single_tail(a: pl.Tensor[[DUAL_M, DUAL_K], pl.DT_FP16], b: pl.Tensor[[DUAL_K, DUAL_N], pl.DT_FP16],
                sizes: pl.Tensor[[1, 8], pl.DT_INT32], out: pl.Tensor[[DUAL_M, DUAL_N], pl.DT_FP32]):  # fmt: skip
    """A run-time tail (``sizes[0, 0]`` rows, made a run-time value by a one-trip pl.range) of a 32-row product
    moved whole to AIV0's 16-row tile: it fits while the tail does."""
    a_mat, b_mat, left, right, acc, vec = _tail_tiles()
    with pl.section_cube():
        _operands_into_l0(a, b, a_mat, b_mat, left, right)
        for i in pl.range(0, 1):
            pl.set_validshape(acc, [sizes[0, 0] + i, DUAL_N])
            pl.matmul(acc, left, right)
            pl.move(vec, acc, acc_to_vec_mode=pl.AccToVecMode.SingleModeVec0)
            pl.system.set_cross_core(pipe=pl.PipeType.FIX, event_id=0, sync_mode=pl.SyncMode.UNICAST_BLOCK, peer=0)
    with pl.section_vector():
        if pl.get_subblock_idx() == 0:
            for i in pl.range(0, 1):
                pl.system.wait_cross_core(pipe=pl.PipeType.MTE3, event_id=0, sync_mode=pl.SyncMode.UNICAST_BLOCK)
                pl.set_validshape(vec, [pl.min(sizes[0, 0] + i, DUAL_M // 2), DUAL_N])
                pl.store(out, vec, [0, 0])


@pytest.mark.parametrize(("m", "verdict"), [(16, "OK"), (20, "BOUNDS")])
def test_a_run_time_tail_moved_whole_to_one_aiv_is_a_bounds_finding_only_where_it_overflows_the_tile(m, verdict):
    a, b = (
        RNG.standard_normal((DUAL_M, DUAL_K)).astype(np.float16),
        RNG.standard_normal((DUAL_K, DUAL_N)).astype(np.float16),
    )
    sizes = np.zeros((1, 8), np.int32)
    sizes[0, 0] = m
    out = np.zeros((DUAL_M, DUAL_N), np.float32)
    result = single_tail(a, b, sizes, out)
    if verdict == "OK":
        assert result.ok, result.report()
        np.testing.assert_allclose(out[:m], (a.astype(np.float32) @ b.astype(np.float32))[:m], rtol=1e-3, atol=1e-3)
    else:  # the move moves nothing, so the store then reads what no write reached
        assert (
            "BOUNDS: pl.move" in result.report().message
            and "valid rows = 20 is outside [0, 16]" in result.report().message
        )


# -- an insert at a run-time column --------------------------------------------------------------------------
HALF = 16


def _insert_halves(shift: int):
    """Each AIV loads its half of ``x``'s columns and inserts it into one Nz Mat tile at column ``HALF * sub +
    shift`` (a run-time column); the cube multiplies that tile by the identity, so ``out`` shows what landed."""

    @pl.jit(auto_mutex=False)
    def insert_halves(x: pl.Tensor[[HALF, 2 * HALF], pl.DT_FP16], eye: pl.Tensor[[2 * HALF, 2 * HALF], pl.DT_FP16],
                      out: pl.Tensor[[HALF, 2 * HALF], pl.DT_FP32]):  # fmt: skip
        part = _tile([HALF, HALF], pl.DT_FP16, pl.MemorySpace.Vec, 0x0)
        a_mat = _tile([HALF, 2 * HALF], pl.DT_FP16, pl.MemorySpace.Mat, 0x0)
        b_mat = _tile([2 * HALF, 2 * HALF], pl.DT_FP16, pl.MemorySpace.Mat, 0x4000)
        left = _tile([HALF, 2 * HALF], pl.DT_FP16, pl.MemorySpace.Left, 0x0)
        right = _tile([2 * HALF, 2 * HALF], pl.DT_FP16, pl.MemorySpace.Right, 0x0)
        acc = _tile([HALF, 2 * HALF], pl.DT_FP32, pl.MemorySpace.Acc, 0x0)
        with pl.section_vector():
            col = HALF * pl.get_subblock_idx()
            pl.load(part, x, [0, col])
            _sync(pl.PipeType.MTE2, pl.PipeType.MTE3, 0)
            for i in pl.range(0, 1):  # i makes the column a run-time value, as a loop's index does
                pl.insert(a_mat, part, [0, col + shift + i])
            pl.system.set_cross_core(pipe=pl.PipeType.MTE3, event_id=1)
        with pl.section_cube():
            pl.load(b_mat, eye, [0, 0])
            pl.system.wait_cross_core(pipe=pl.PipeType.MTE1, event_id=1)
            _sync(pl.PipeType.MTE2, pl.PipeType.MTE1, 0)
            pl.move(left, a_mat)
            pl.move(right, b_mat)
            _sync(pl.PipeType.MTE1, pl.PipeType.M, 0)
            pl.matmul(acc, left, right)
            pl.store(out, acc, [0, 0])

    return insert_halves


def test_two_aivs_inserting_their_halves_at_run_time_columns_land_side_by_side_without_a_race():
    x = RNG.standard_normal((HALF, 2 * HALF)).astype(np.float16)
    out = np.zeros((HALF, 2 * HALF), np.float32)
    result = _insert_halves(0)(x, np.eye(2 * HALF, dtype=np.float16), out)
    assert result.ok, result.report()
    np.testing.assert_array_equal(out, x.astype(np.float32))


def test_an_insert_at_a_run_time_column_off_the_fractal_grid_is_a_bounds_finding():
    out = np.zeros((HALF, 2 * HALF), np.float32)
    result = _insert_halves(1)(np.ones((HALF, 2 * HALF), np.float16), np.eye(2 * HALF, dtype=np.float16), out)
    assert "BOUNDS: pl.insert" in result.report().message, result.report()
    assert "column offset = 1" in result.report().message, result.report()
