"""Two chained matmuls across the cores, written for ``pypto_pro.language``: out = (a @ b + x) @ c.

The vector cores add ``x`` to their halves of ``a @ b``, re-lay the sum out as Nz in UB (``pl.move`` ND -> NZ) and
insert it into L1 (MTE3), where the cube takes it as the left operand of the second matmul.
"""

import ascjax.pypto_pro.language as pl

N = 64
HALF = N // 2
TILE_BYTES = N * N * 4


@pl.jit(auto_mutex=False)
def matmul_chain(
    a: pl.Tensor[[N, N], pl.DT_FP32],
    b: pl.Tensor[[N, N], pl.DT_FP32],
    c: pl.Tensor[[N, N], pl.DT_FP32],
    x: pl.Tensor[[N, N], pl.DT_FP32],
    out: pl.Tensor[[N, N], pl.DT_FP32],
):
    half_type = pl.TileType(shape=[HALF, N], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec)
    mm_res = pl.make_tile(half_type, addr=0x0000)
    mat_type = pl.TileType(shape=[N, N], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Mat, layout=pl.NZ)
    sum_mat = pl.make_tile(mat_type, addr=0x10000)

    with pl.section_cube():
        a_mat = pl.make_tile(mat_type, addr=0x0000)
        b_mat = pl.make_tile(mat_type, addr=0x4000)
        c_mat = pl.make_tile(mat_type, addr=0x8000)
        left_type = pl.TileType(shape=[N, N], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Left, layout=pl.NZ)
        right_type = pl.TileType(shape=[N, N], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Right, layout=pl.ZN)
        acc_type = pl.TileType(shape=[N, N], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Acc, layout=pl.NZ)
        left = pl.make_tile(left_type, addr=0x0000)
        right = pl.make_tile(right_type, addr=0x0000)
        acc = pl.make_tile(acc_type, addr=0x0000)
        acc2 = pl.make_tile(acc_type, addr=0x4000)

        pl.load(a_mat, a, [0, 0])
        pl.load(b_mat, b, [0, 0])
        pl.load(c_mat, c, [0, 0])
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

        pl.system.sync_src(set_pipe=pl.PipeType.M, wait_pipe=pl.PipeType.MTE1, event_id=1)
        pl.system.sync_dst(set_pipe=pl.PipeType.M, wait_pipe=pl.PipeType.MTE1, event_id=1)
        pl.move(right, c_mat)
        pl.system.wait_cross_core(pipe=pl.PipeType.MTE1, event_id=1)
        pl.move(left, sum_mat)
        pl.system.sync_src(set_pipe=pl.PipeType.MTE1, wait_pipe=pl.PipeType.M, event_id=0)
        pl.system.sync_dst(set_pipe=pl.PipeType.MTE1, wait_pipe=pl.PipeType.M, event_id=0)
        pl.matmul(acc2, left, right)
        pl.system.sync_src(set_pipe=pl.PipeType.M, wait_pipe=pl.PipeType.FIX, event_id=0)
        pl.system.sync_dst(set_pipe=pl.PipeType.M, wait_pipe=pl.PipeType.FIX, event_id=0)
        pl.store(out, acc2, [0, 0])

    with pl.section_vector():
        off = pl.get_subblock_idx() * HALF
        x_tile = pl.make_tile(half_type, addr=0x2000)
        nz_type = pl.TileType(shape=[HALF, N], dtype=pl.DT_FP32, target_memory=pl.MemorySpace.Vec, layout=pl.NZ)
        sum_nz = pl.make_tile(nz_type, addr=0x4000)
        pl.load(x_tile, x, [off, 0])
        pl.system.sync_src(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=0)
        pl.system.sync_dst(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=0)
        pl.system.wait_cross_core(pipe=pl.PipeType.V, event_id=0)
        pl.add(mm_res, mm_res, x_tile)
        pl.move(sum_nz, mm_res)  # ND -> NZ in UB
        pl.system.sync_src(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=0)
        pl.system.sync_dst(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=0)
        pl.insert(sum_mat, sum_nz, [off, 0])  # NZ -> NZ into L1
        pl.system.set_cross_core(pipe=pl.PipeType.MTE3, event_id=1)
