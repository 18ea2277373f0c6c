"""A tiled K-loop matmul (C = A x B, f16 -> f32) the way a device kernel is written.

Output tiles (rows, then columns) and K steps are ``k.range`` loops (nested ``lax.scan``s), single-buffered
L1/L0 with the reverse events primed before the loops, and the unit flag between the last
mmad of a tile (UPDATE) and its fixpipe (UPDATE). Launched on several blocks, each block takes
a contiguous share of the output tiles (block b: tiles [b * share, (b + 1) * share)), as a
multi-core matmul splits its output over the AI Cores.
"""

import jax.numpy as jnp
import numpy as np

import ascjax as aj
from ascjax import UnitFlagMode


def matmul_kernel(k: aj.Program, M=256, K=256, N=256, TM=128, TK=128, TN=128, dtype="float16"):
    a_l1 = k.alloc("L1", (TM, TK), dtype, name="a_l1")
    b_l1 = k.alloc("L1", (TK, TN), dtype, name="b_l1")
    al = k.alloc("L0A", (TM, TK), dtype, name="al")
    br = k.alloc("L0B", (TK, TN), dtype, name="br")
    ac = k.alloc("L0C", (TM, TN), "float32", name="ac")
    k_steps, n_tiles = K // TK, N // TN
    share = _tiles_per_block(k, (M // TM) * n_tiles)
    k.set_mmad_direction("n")
    k.sync_notify("MTE1", "MTE2", 0)  # L1 starts free
    k.sync_notify("M", "MTE1", 0)  # L0A / L0B start free

    def output_tile(mi, ni):
        def k_step(kk):
            k.sync_wait("MTE1", "MTE2", 0)
            k.copy_gm2l1_nd2nz(a_l1, "a", row=mi * TM, col=kk * TK)
            k.copy_gm2l1_nd2nz(b_l1, "b", row=kk * TK, col=ni * TN)
            k.sync_notify("MTE2", "MTE1", 0)
            k.sync_wait("MTE2", "MTE1", 0)
            k.sync_wait("M", "MTE1", 0)
            k.copy_l12l0a(al, a_l1)
            k.copy_l12l0b(br, b_l1, transpose=True)
            k.sync_notify("MTE1", "MTE2", 0)
            k.sync_notify("MTE1", "M", 0)
            k.sync_wait("MTE1", "M", 0)
            mode = jnp.where(kk == k_steps - 1, UnitFlagMode.ENABLE_UPDATE, UnitFlagMode.ENABLE_KEEP)
            k.mmad(ac, al, br, TM, TK, TN, unit_flag_mode=mode, c_matrix_init_val=(kk == 0))
            k.sync_notify("M", "MTE1", 0)

        k.range(k_steps, k_step)
        k.fixpipe("c", ac, dst_row=mi * TM, dst_col=ni * TN, unit_flag_mode=UnitFlagMode.ENABLE_UPDATE)

    if share % n_tiles == 0:  # whole rows of output tiles: a loop over rows of a loop over columns
        first_row = k.block_idx * (share // n_tiles)
        k.range(share // n_tiles, lambda r: k.range(n_tiles, lambda ni: output_tile(first_row + r, ni)))
    else:
        k.range(share, lambda j: output_tile((k.block_idx * share + j) // n_tiles, (k.block_idx * share + j) % n_tiles))
    k.sync_wait("MTE1", "MTE2", 0)
    k.sync_wait("M", "MTE1", 0)


def _tiles_per_block(k: aj.Program, tiles: int) -> int:
    """Output tiles each block computes (every block the same share)."""
    if tiles % k.block_num:
        raise ValueError(f"{tiles} output tiles do not split evenly over block_dim {k.block_num}: pick a divisor")
    return tiles // k.block_num


def matmul_pingpong_kernel(k: aj.Program, M=256, K=256, N=256, TM=128, TK=128, TN=128, dtype="float16"):
    """The same matmul with double-buffered L1 and L0A/L0B: slot s of each uses event id s.

    The K loop runs two K steps per iteration (ping, then pong), so MTE2 loads step k + 1
    while MTE1 and the cube work on step k.
    """
    a_l1 = [k.alloc("L1", (TM, TK), dtype, name=f"a_l1_{s}") for s in (0, 1)]
    b_l1 = [k.alloc("L1", (TK, TN), dtype, name=f"b_l1_{s}") for s in (0, 1)]
    al = [k.alloc("L0A", (TM, TK), dtype, name=f"al_{s}") for s in (0, 1)]
    br = [k.alloc("L0B", (TK, TN), dtype, name=f"br_{s}") for s in (0, 1)]
    ac = k.alloc("L0C", (TM, TN), "float32", name="ac")
    k_steps, n_tiles = K // TK, N // TN
    assert k_steps % 2 == 0, "the ping-pong K loop takes K steps in pairs"
    k.set_mmad_direction("n")
    for s in (0, 1):
        k.sync_notify("MTE1", "MTE2", s)
        k.sync_notify("M", "MTE1", s)

    def output_tile(mi, ni):
        def k_pair(j):
            for s in (0, 1):
                kk = 2 * j + s
                k.sync_wait("MTE1", "MTE2", s)
                k.copy_gm2l1_nd2nz(a_l1[s], "a", row=mi * TM, col=kk * TK)
                k.copy_gm2l1_nd2nz(b_l1[s], "b", row=kk * TK, col=ni * TN)
                k.sync_notify("MTE2", "MTE1", s)
                k.sync_wait("MTE2", "MTE1", s)
                k.sync_wait("M", "MTE1", s)
                k.copy_l12l0a(al[s], a_l1[s])
                k.copy_l12l0b(br[s], b_l1[s], transpose=True)
                k.sync_notify("MTE1", "MTE2", s)
                k.sync_notify("MTE1", "M", s)
                k.sync_wait("MTE1", "M", s)
                mode = jnp.where(kk == k_steps - 1, UnitFlagMode.ENABLE_UPDATE, UnitFlagMode.ENABLE_KEEP)
                k.mmad(ac, al[s], br[s], TM, TK, TN, unit_flag_mode=mode, c_matrix_init_val=(kk == 0))
                k.sync_notify("M", "MTE1", s)

        k.range(k_steps // 2, k_pair)
        k.fixpipe("c", ac, dst_row=mi * TM, dst_col=ni * TN, unit_flag_mode=UnitFlagMode.ENABLE_UPDATE)

    k.range(M // TM, lambda mi: k.range(n_tiles, lambda ni: output_tile(mi, ni)))
    for s in (0, 1):
        k.sync_wait("MTE1", "MTE2", s)
        k.sync_wait("M", "MTE1", s)


def matmul_case(M=256, K=256, N=256, dtype=np.float16, seed=0, kernel=matmul_kernel) -> aj.Case:
    rng = np.random.default_rng(seed)
    return aj.Case(
        kernel=kernel,
        inputs={"a": rng.uniform(-1, 1, (M, K)).astype(dtype), "b": rng.uniform(-1, 1, (K, N)).astype(dtype)},
        outputs={"c": ((M, N), "float32")},
        params={"M": M, "K": K, "N": N},
        reference=lambda x: {"c": x["a"].astype(np.float64) @ x["b"].astype(np.float64)},
        atol=1e-3,
    )


@aj.case
def matmul_256():
    """Tiled K-loop matmul 256 x 256 x 256 f16, tiles 128, unit flag between mmad and fixpipe -> ok."""
    return matmul_case()


@aj.case
def matmul_256_pingpong():
    """The same matmul with ping-pong (double-buffered) L1 and L0A/L0B -> ok, and faster."""
    return matmul_case(kernel=matmul_pingpong_kernel)
