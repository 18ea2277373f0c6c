"""The PyPTO-Pro front end: kernels written for ``pypto_pro.language`` run as written (``ascjax.pypto_pro``).

Each kernel is checked against NumPy, against its bad twin, and against the same kernel written with
``ascjax.pl`` (the same bits and verdict); constructs the front end does not run are refused naming the line.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pypto_matmul_add as matmul_add
import pypto_matmul_chain as matmul_chain
import pypto_vector_add as vector_add
import pytest

import ascjax as aj
import ascjax.pypto_pro.language as pl
from ascjax import Verdict
from ascjax.front.pypto import UnsupportedConstruct

RNG = np.random.default_rng(7)
X = RNG.standard_normal((vector_add.ROWS, vector_add.COLS)).astype(np.float32)
Y = RNG.standard_normal((vector_add.ROWS, vector_add.COLS)).astype(np.float32)


def _line_of(module, text: str, after: str) -> int:
    """The first line of ``module``'s source after the line holding ``after`` that contains ``text`` (the kernel line
    a report must name)."""
    lines = open(module.__file__).read().splitlines()
    start = next(i for i, line in enumerate(lines) if after in line)
    return next(i for i, line in enumerate(lines, 1) if i > start and text in line)


def test_a_vector_loop_with_a_carried_row_and_a_traced_if_adds():
    z = np.zeros_like(X)
    result = vector_add.add_rows(X, Y, z)
    assert result.ok, result.report()
    np.testing.assert_array_equal(z, X + Y)  # written back into the array passed, as the device writes it


def test_its_twin_without_the_store_flag_races_at_the_store():
    z = np.zeros_like(X)
    result = vector_add.add_rows(X, Y, z, store_sync=False)
    assert int(result.verdict) == Verdict.RACE
    text = str(result.report())
    store_line = _line_of(vector_add, "pl.store(z, c, [row, 0])", "def add_rows")
    assert f"pl.store at kernels/pypto_vector_add.py:{store_line}" in text


def test_the_same_kernel_in_ascjax_pl_gives_the_same_bits_verdict_and_cycles():
    rows, cols, step = vector_add.ROWS, vector_add.COLS, vector_add.TILE_ROWS
    trips = rows // step

    def kernel(k):
        a = aj.pl.alloc("Vec", (step, cols), "float32", addr=0x0000)
        b = aj.pl.alloc("Vec", (step, cols), "float32", addr=0x4000)
        c = aj.pl.alloc("Vec", (step, cols), "float32", addr=0x8000)

        def aiv(sub):  # an AIV-only kernel: AIV0 is the block's one vector core
            @aj.pl.range(trips)
            def _(i):
                row = i * step
                k.cond(i > 0, lambda: aj.pl.system.sync_dst(set_pipe="MTE3", wait_pipe="MTE2", event_id=0))
                aj.pl.load(a, "x", (row, 0))
                aj.pl.load(b, "y", (row, 0))
                aj.pl.system.sync_src(set_pipe="MTE2", wait_pipe="V", event_id=0)
                aj.pl.system.sync_dst(set_pipe="MTE2", wait_pipe="V", event_id=0)
                aj.pl.add(c, a, b)
                aj.pl.system.sync_src(set_pipe="V", wait_pipe="MTE3", event_id=0)
                aj.pl.system.sync_dst(set_pipe="V", wait_pipe="MTE3", event_id=0)
                aj.pl.store("z", c, (row, 0))
                k.cond(i < trips - 1, lambda: aj.pl.system.sync_src(set_pipe="MTE3", wait_pipe="MTE2", event_id=0))

        k.section_vector(aiv, subblocks=(0,))

    by_hand = aj.run(kernel, {"x": X, "y": Y}, {"z": ((rows, cols), "float32")}, chip="950")
    z = np.zeros_like(X)
    as_written = vector_add.add_rows(X, Y, z)
    np.testing.assert_array_equal(z, np.asarray(by_hand.outputs["z"]))
    assert int(as_written.verdict) == int(by_hand.verdict) == Verdict.OK
    assert float(as_written.cycles) == float(by_hand.cycles)


def test_cube_and_vector_sections_hand_a_matmul_to_both_aivs():
    rng = np.random.default_rng(1)
    a, b, x = (rng.standard_normal((matmul_add.N, matmul_add.N)).astype(np.float32) for _ in range(3))
    out = np.zeros_like(a)
    result = matmul_add.matmul_add(a, b, x, out)
    assert result.ok, result.report()
    np.testing.assert_allclose(out, a @ b + x, rtol=1e-5, atol=1e-4)


#: Ascend C instructions a PyPTO-Pro kernel's calls lower to: its reports name the calls instead
LOWERED_NAMES = ("copy_ub2gm", "copy_gm2ub", "move_to_vec", "copy_l12l0a", "mmad", "sync_notify", "sync_wait",
                 "set_flag", "wait_flag", "fixpipe")  # fmt: skip


def _words(report) -> set:
    return set(str(report).replace("(", " ").replace(")", " ").replace(",", " ").split())


def test_a_pypto_report_speaks_pypto_pro_within_a_core():
    result = vector_add.add_rows(X, Y, np.zeros_like(X), store_sync=False)
    text = str(result.report())
    assert "pl.store at kernels/pypto_vector_add.py:" in text and "pl.add at kernels/pypto_vector_add.py:" in text
    assert (
        "Fix: pl.system.sync_src(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=id) after the pl.add "
        "and pl.system.sync_dst(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=id) before the pl.store"
    ) in text
    assert not _words(text) & set(LOWERED_NAMES)


def test_a_pypto_report_speaks_pypto_pro_across_cores():
    rng = np.random.default_rng(2)
    a, b, x = (rng.standard_normal((matmul_add.N, matmul_add.N)).astype(np.float32) for _ in range(3))
    result = matmul_add.matmul_add(a, b, x, np.zeros_like(a), wait_matmul=False)
    assert int(result.verdict) == Verdict.RACE
    text = str(result.report())
    assert (
        "Fix: pl.system.set_cross_core(pipe=pl.PipeType.FIX, event_id=id) on AIC after the pl.move and "
        "pl.system.wait_cross_core(pipe=pl.PipeType.V, event_id=id) on AIV0 before the pl.add"
    ) in text
    assert "set by pl.system.set_cross_core at kernels/pypto_matmul_add.py:" in text
    assert not _words(text) & set(LOWERED_NAMES)


def test_a_sum_relaid_out_as_nz_in_ub_feeds_the_next_matmul_through_l1():
    rng = np.random.default_rng(3)
    a, b, c, x = (rng.standard_normal((matmul_chain.N, matmul_chain.N)).astype(np.float32) for _ in range(4))
    out = np.zeros_like(a)
    result = matmul_chain.matmul_chain(a, b, c, x, out)
    assert result.ok, result.report()
    np.testing.assert_allclose(out, (a @ b + x) @ c, rtol=1e-4, atol=1e-3)


@pl.jit(auto_mutex=False)
def _round_trip(x: pl.Tensor[[20, 24], pl.DT_FP16], out: pl.Tensor[[20, 24], pl.DT_FP16], compute_on_nz=False):
    """x through a Vec tile in NZ (padded to whole 16 x 16 fractals) and back to ND."""
    nd_type = pl.TileType(shape=[20, 24], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Vec)
    nz_type = pl.TileType(shape=[20, 24], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Vec, layout=pl.NZ)
    with pl.section_vector():
        nd = pl.make_tile(nd_type, addr=0x0)
        nz = pl.make_tile(nz_type, addr=0x1000)
        back = pl.make_tile(nd_type, addr=0x2000)
        pl.load(nd, x, [0, 0])
        pl.system.sync_src(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=0)
        pl.system.sync_dst(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=0)
        pl.move(nz, nd)
        if compute_on_nz:
            pl.add(nz, nz, nz)
        pl.move(back, nz)
        pl.system.sync_src(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=0)
        pl.system.sync_dst(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=0)
        if pl.get_subblock_idx() == 0:
            pl.store(out, back, [0, 0])


def test_a_vec_tile_relaid_out_as_nz_and_back_keeps_every_element():
    x = RNG.standard_normal((20, 24)).astype(np.float16)
    out = np.zeros_like(x)
    result = _round_trip(x, out)
    assert result.ok, result.report()
    np.testing.assert_array_equal(out, x)


def test_vector_compute_on_an_nz_vec_tile_is_refused_naming_the_layout():
    with pytest.raises(ValueError, match=r"rule 'UB layout': vector compute reads and writes ND tiles, and out "):
        _round_trip(np.zeros((20, 24), np.float16), np.zeros((20, 24), np.float16), compute_on_nz=True)


def test_a_launch_splits_tiles_by_a_traced_loop_start():
    z = np.zeros_like(X)
    result = vector_add.add_blocks[None, 2](X, Y, z)
    assert result.ok, result.report()
    np.testing.assert_array_equal(z, X + Y)


@pl.jit(auto_mutex=False)
def _toggle(x: pl.Tensor[[16, 64], pl.DT_FP32], out: pl.Tensor[[16, 64], pl.DT_FP32]):
    """A carried ping-pong index picks a tile-group slot; a carried float scales; a ternary on a traced value."""
    tile_type = pl.TileType(shape=[16, 64], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec)
    group = pl.make_tile_group(type=tile_type, addrs=0x0, depth=2)
    acc = pl.make_tile(tile_type, addr=0x2000)
    with pl.section_vector():
        slot = 0
        scale = 1.0
        pl.fill(acc, 0.0)
        for i in pl.range(4):
            pl.system.sync_src(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE2, event_id=0)
            pl.system.sync_dst(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE2, event_id=0)
            pl.load(group[slot], x, [0, 0])
            pl.system.sync_src(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=0)
            pl.system.sync_dst(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=0)
            pl.mul(group[slot], group[slot], scale)
            pl.add(acc, acc, group[slot])
            slot = 1 - slot
            scale = scale * 2.0 if i < 2 else scale
        pl.system.sync_src(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=0)
        pl.system.sync_dst(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=0)
        if pl.get_subblock_idx() == 0:
            pl.store(out, acc, [0, 0])


def test_carried_ints_and_floats_ride_the_loop_and_a_ternary_selects():
    x = RNG.standard_normal((16, 64)).astype(np.float32)
    out = np.zeros_like(x)
    result = _toggle(x, out)
    assert result.ok, result.report()
    np.testing.assert_allclose(out, x * (1 + 2 + 4 + 4), rtol=1e-6)  # scales 1, 2, 4, then held at 4


@pl.jit(auto_mutex=False)
def _with_while(x: pl.Tensor[[16, 64], pl.DT_FP32]):
    with pl.section_vector():
        for i in pl.range(4):
            n = 0
            while n < i:  # i is a run-time value
                n = n + 1


@pl.jit(auto_mutex=False)
def _with_simt(x: pl.Tensor[[16, 64], pl.DT_FP32]):
    with pl.section_vector():
        pl.simt_launch(x)


@pl.jit(auto_mutex=False)
def _mutex_mode(x: pl.Tensor[[16, 64], pl.DT_FP32]):
    with pl.section_vector():
        pl.system.mutex_lock(pipe=pl.PipeType.MTE2, mutex_id=0, mode=1)


@pytest.mark.parametrize(
    ("kernel", "words"),
    [
        (_with_while, ["the 'while' condition at line", "is a run-time value", "test_pypto_frontend.py:"]),
        (_with_simt, ["pl.simt_launch is not supported"]),
        (_mutex_mode, ["rule 'mutex'", "mutex_lock(mode=1) is not modelled"]),
    ],
)
def test_what_the_front_end_does_not_run_is_refused_by_name(kernel, words):
    with pytest.raises(UnsupportedConstruct) as info:
        kernel(np.zeros((16, 64), np.float32))
    for word in words:
        assert word in str(info.value)


def test_a_tensor_of_the_wrong_shape_is_refused_naming_its_declaration():
    with pytest.raises(TypeError, match=r"x is declared pl.Tensor\[\[16, 64\], pl.DT_FP32\] but got a \[8, 64\]"):
        _with_while(np.zeros((8, 64), np.float32))


def test_the_command_line_runs_a_file_with_pypto_pro_mapped(tmp_path):
    source = (
        open(vector_add.__file__)
        .read()
        .replace("import ascjax.pypto_pro.language as pl", "import pypto_pro.language as pl")
    )
    path = tmp_path / "unchanged.py"
    path.write_text(source)
    run = lambda *args: subprocess.run([sys.executable, "-m", "ascjax", *args], capture_output=True, text=True)  # noqa: E731
    ok = run("pypto", f"{path}::add_rows")
    assert ok.returncode == 0, ok.stderr
    assert "outputs z" in ok.stdout and "OK (chip 950)" in ok.stdout
    bad = run("pypto", f"{path}::missing")
    assert bad.returncode == 2
    assert bad.stderr.count("\n") == 1 and "its kernels: add_blocks, add_rows" in bad.stderr


def _write_subblocks(out):
    """Each vector core writes its block index and how many sub-blocks it counts into its row."""
    row_type = pl.TileType(shape=[1, 16], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec, compact=1)
    with pl.section_vector():
        row = pl.make_tile(row_type, addr=0x0)
        pl.fill(row, pl.get_subblock_num() * 10.0 + pl.get_block_idx())
        pl.system.sync_src(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=0)
        pl.system.sync_dst(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=0)
        pl.store(out, row, [pl.get_subblock_idx(), 0])


@pl.jit(auto_mutex=False)
def _aiv_only(out: pl.Tensor[[2, 16], pl.DT_FP32]):
    """No cube section: PyPTO-Pro launches the kernel AIV-only, one vector core a block."""
    _write_subblocks(out)


@pl.jit(auto_mutex=False)
def _mix(out: pl.Tensor[[2, 16], pl.DT_FP32]):
    """A cube section too: a mix kernel, both AIVs of the block run the vector section."""
    with pl.section_cube():
        pl.system.bar_all()
    _write_subblocks(out)


def test_an_aiv_only_kernels_block_is_one_vector_core_and_a_mix_kernels_two():
    aiv_only, mix = np.zeros((2, 16), np.float32), np.zeros((2, 16), np.float32)
    assert _aiv_only(aiv_only).ok and _mix(mix).ok
    np.testing.assert_array_equal(aiv_only, [[10.0] * 16, [0.0] * 16])  # one sub-block, block 0, AIV0 alone
    np.testing.assert_array_equal(mix, [[20.0] * 16, [21.0] * 16])  # two sub-blocks, block * 2 + sub
    assert pl.ReluPreMode.NormalRelu and not pl.ReluPreMode.NoRelu
