"""A PyPTO-Pro test file in the upstream style (torch references on the NPU), run unchanged by
``python -m ascjax pypto-test examples/pypto/test_add_upstream_style.py``.

``test_add_rows`` passes; ``test_add_rows_without_the_store_flag`` computes the right numbers in the emulator's
order, and fails all the same: its kernel has a race, which the run reports.
"""

import os

import pypto
import pypto_pro.language as pl
import pytest
import torch

ROWS, COLS, TILE_ROWS = 64, 128, 32


@pl.jit(auto_mutex=False)
def add_rows(
    x: pl.Tensor[[pl.DYNAMIC, COLS], pl.DT_FP16],
    y: pl.Tensor[[pl.DYNAMIC, COLS], pl.DT_FP16],
    z: pl.Tensor[[pl.DYNAMIC, COLS], pl.DT_FP16],
    store_sync=True,
):
    tile_type = pl.TileType(shape=[TILE_ROWS, COLS], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Vec)
    with pl.section_vector():
        a = pl.make_tile(tile_type, addr=0x0000)
        b = pl.make_tile(tile_type, addr=0x2000)
        c = pl.make_tile(tile_type, addr=0x4000)
        row = 0
        for i in pl.range(x.shape[0] // TILE_ROWS):
            if i > 0:
                pl.system.sync_dst(set_pipe=pl.PipeType.MTE3, wait_pipe=pl.PipeType.MTE2, event_id=0)
            pl.load(a, x, [row, 0])
            pl.load(b, y, [row, 0])
            pl.system.sync_src(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=0)
            pl.system.sync_dst(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=0)
            pl.add(c, a, b)
            if store_sync:
                pl.system.sync_src(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=0)
                pl.system.sync_dst(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=0)
            pl.store(z, c, [row, 0])
            if i < x.shape[0] // TILE_ROWS - 1:
                pl.system.sync_src(set_pipe=pl.PipeType.MTE3, wait_pipe=pl.PipeType.MTE2, event_id=0)
            row = row + TILE_ROWS


def _inputs():
    device = f"npu:{int(os.environ.get('TILE_FWK_DEVICE_ID', 0))}"
    torch.npu.set_device(device)
    torch.manual_seed(0)
    x = torch.rand([ROWS, COLS], device=device, dtype=torch.float16)
    y = torch.rand([ROWS, COLS], device=device, dtype=torch.float16)
    z = torch.empty([ROWS, COLS], device=device, dtype=torch.float16)
    return x, y, z


@pytest.mark.soc("950")
@pypto.options(pass_options={"enable_slice": False})
def test_add_rows():
    x, y, z = _inputs()
    add_rows(x, y, z)
    torch.npu.synchronize()
    torch.testing.assert_close(z.cpu(), x.cpu() + y.cpu())


@pytest.mark.soc("950")
def test_add_rows_without_the_store_flag():
    x, y, z = _inputs()
    add_rows(x, y, z, store_sync=False)
    torch.npu.synchronize()
    torch.testing.assert_close(z.cpu(), x.cpu() + y.cpu())
