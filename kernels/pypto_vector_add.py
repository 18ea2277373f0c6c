"""Vector kernels written for ``pypto_pro.language``, run as written (``python -m ascjax pypto FILE``).

They have no cube section, so PyPTO-Pro launches them AIV-only: each block is one vector core.
"""

import ascjax.pypto_pro.language as pl

ROWS, COLS = 64, 128
TILE_ROWS = 32


@pl.jit(auto_mutex=False)
def add_rows(
    x: pl.Tensor[[ROWS, COLS], pl.DT_FP32],
    y: pl.Tensor[[ROWS, COLS], pl.DT_FP32],
    z: pl.Tensor[[ROWS, COLS], pl.DT_FP32],
    store_sync=True,
):
    """z = x + y on one block, one TILE_ROWS x COLS tile per step. Its bad twin,
    ``store_sync=False``, drops the V -> MTE3 flag: the store may read c before the add has written it (a race)."""
    tile_type = pl.TileType(shape=[TILE_ROWS, COLS], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec)
    with pl.section_vector():
        a = pl.make_tile(tile_type, addr=0x0000)
        b = pl.make_tile(tile_type, addr=0x4000)
        c = pl.make_tile(tile_type, addr=0x8000)
        row = 0
        for i in pl.range(ROWS // TILE_ROWS):
            if i > 0:  # the previous tile's store has read c and a, b
                pl.system.sync_dst(set_pipe=pl.PipeType.MTE3, wait_pipe=pl.PipeType.MTE2, event_id=0)
            pl.load(a, x, [row, 0])
            pl.load(b, y, [row, 0])
            pl.system.sync_src(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=0)
            pl.system.sync_dst(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=0)
            pl.add(c, a, b)
            if store_sync:  # a static parameter: Python's if, as PyPTO-Pro evaluates it
                pl.system.sync_src(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=0)
                pl.system.sync_dst(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=0)
            pl.store(z, c, [row, 0])
            if i < ROWS // TILE_ROWS - 1:
                pl.system.sync_src(set_pipe=pl.PipeType.MTE3, wait_pipe=pl.PipeType.MTE2, event_id=0)
            row = row + TILE_ROWS


@pl.jit(auto_mutex=False)
def add_blocks(
    x: pl.Tensor[[ROWS, COLS], pl.DT_FP32],
    y: pl.Tensor[[ROWS, COLS], pl.DT_FP32],
    z: pl.Tensor[[ROWS, COLS], pl.DT_FP32],
):
    """z = x + y on several blocks: block b takes tiles b, b + block_num, ..."""
    tile_type = pl.TileType(shape=[TILE_ROWS, COLS], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec)
    n_tiles = ROWS // TILE_ROWS
    with pl.section_vector():
        a = pl.make_tile(tile_type, addr=0x0000)
        b = pl.make_tile(tile_type, addr=0x4000)
        for t in pl.range(pl.get_block_idx(), n_tiles, pl.get_block_num()):
            pl.load(a, x, [t * TILE_ROWS, 0])
            pl.load(b, y, [t * TILE_ROWS, 0])
            pl.system.sync_src(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=0)
            pl.system.sync_dst(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=0)
            pl.add(a, a, b)
            pl.system.sync_src(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=0)
            pl.system.sync_dst(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=0)
            pl.store(z, a, [t * TILE_ROWS, 0])
            pl.system.sync_src(set_pipe=pl.PipeType.MTE3, wait_pipe=pl.PipeType.MTE2, event_id=0)
            pl.system.sync_dst(set_pipe=pl.PipeType.MTE3, wait_pipe=pl.PipeType.MTE2, event_id=0)
