"""A cube matmul feeding both vector cores, written for ``pypto_pro.language``: out = a @ b + x."""

import ascjax.pypto_pro.language as pl

N = 64
HALF = N // 2
TILE_BYTES = N * N * 4


@pl.jit()
def matmul_add(
    a: pl.Tensor[[N, N], pl.DT_FP32],
    b: pl.Tensor[[N, N], pl.DT_FP32],
    x: pl.Tensor[[N, N], pl.DT_FP32],
    out: pl.Tensor[[N, N], pl.DT_FP32],
    wait_matmul=True,
):
    """Its bad twin, ``wait_matmul=False``, adds before the cube's result is in UB (a race across cores)."""
    vec_type = pl.TileType(shape=[HALF, N], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec)
    mm_res = pl.make_tile(vec_type, addr=0x0000, size=TILE_BYTES // 2)

    with pl.section_cube():
        mat_type = pl.TileType(shape=[N, N], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Mat, layout=pl.NZ)
        a_mat = pl.make_tile(mat_type, addr=0x0000, size=TILE_BYTES)
        b_mat = pl.make_tile(mat_type, addr=0x4000, size=TILE_BYTES)
        left = pl.make_tile(
            pl.TileType(shape=[N, N], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Left, layout=pl.NZ),
            addr=0x0000,
            size=TILE_BYTES,
        )
        right = pl.make_tile(
            pl.TileType(shape=[N, N], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Right, layout=pl.ZN),
            addr=0x0000,
            size=TILE_BYTES,
        )
        acc_type = pl.TileType(shape=[N, N], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Acc, layout=pl.NZ)
        acc = pl.make_tile(acc_type, addr=0x0000, size=TILE_BYTES)

        pl.load(a_mat, a, [0, 0])
        pl.load(b_mat, b, [0, 0])
        pl.system.sync_src(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.MTE1, event_id=0)
        pl.system.sync_dst(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.MTE1, event_id=0)
        pl.move(left, a_mat)
        pl.move(right, b_mat)
        pl.system.sync_src(set_pipe=pl.PipeType.MTE1, wait_pipe=pl.PipeType.M, event_id=0)
        pl.system.sync_dst(set_pipe=pl.PipeType.MTE1, wait_pipe=pl.PipeType.M, event_id=0)
        pl.matmul(acc, left, right)
        pl.system.sync_src(set_pipe=pl.PipeType.M, wait_pipe=pl.PipeType.FIX, event_id=0)
        pl.system.sync_dst(set_pipe=pl.PipeType.M, wait_pipe=pl.PipeType.FIX, event_id=0)
        pl.move(mm_res, acc, acc_to_vec_mode=pl.AccToVecMode.DualModeSplitM)
        pl.system.set_cross_core(pipe=pl.PipeType.FIX, event_id=0)

    with pl.section_vector():
        sub = pl.get_subblock_idx()
        x_type = pl.TileType(shape=[HALF, N], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec)
        x_tile = pl.make_tile(x_type, addr=0x2000, size=TILE_BYTES // 2)
        off = sub * HALF
        pl.load(x_tile, x, [off, 0])
        pl.system.sync_src(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=1)
        pl.system.sync_dst(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=1)
        if wait_matmul:
            pl.system.wait_cross_core(pipe=pl.PipeType.V, event_id=0)
        pl.add(mm_res, mm_res, x_tile)
        pl.system.sync_src(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=2)
        pl.system.sync_dst(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=2)
        pl.store(out, mm_res, [off, 0])
