"""Double-buffered vector add with tile groups, written for ``pypto_pro.language``: the sync is ``auto_mutex``'s.

``add_groups`` leaves the hand-offs between MTE2, V and MTE3 to the locks auto_mutex inserts around every access
of a tile-group slot; ``add_groups_by_hand`` writes the same locks itself (``auto_mutex=False``), and its twin
without them, ``locks=False``, races.
"""

import ascjax.pypto_pro.language as pl

ROWS, COLS = 64, 128
TILE_ROWS, TILE_COLS = 16, 64
A_IDS, B_IDS, C_IDS = (0, 1), (2, 3), (30, 31)


@pl.jit(auto_mutex=True)
def add_groups(
    x: pl.Tensor[[ROWS, COLS], pl.DT_FP16],
    y: pl.Tensor[[ROWS, COLS], pl.DT_FP16],
    z: pl.Tensor[[ROWS, COLS], pl.DT_FP16],
):
    """z = x + y; the blocks of the launch (AIV-only: one vector core each) take rows of tiles in turn, each tile
    through the next slot."""
    tile_type = pl.TileType(shape=[TILE_ROWS, TILE_COLS], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Vec)
    a_db = pl.make_tile_group(type=tile_type, addrs=0x0000, mutex_ids=list(A_IDS))
    b_db = pl.make_tile_group(type=tile_type, addrs=0x10000, mutex_ids=list(B_IDS))
    c_db = pl.make_tile_group(type=tile_type, addrs=0x20000, mutex_ids=list(C_IDS))
    with pl.section_vector():
        for i in pl.range(pl.get_block_idx(), x.shape[0] // TILE_ROWS, pl.get_block_num()):
            for j in pl.range(x.shape[1] // TILE_COLS):
                tile_a = a_db.next()
                tile_b = b_db.next()
                tile_c = c_db.next()
                pl.load_tile(tile_a, x, [i, j])
                pl.load_tile(tile_b, y, [i, j])
                pl.add(tile_c, tile_a, tile_b)
                pl.store_tile(z, tile_c, [i, j])


@pl.jit(auto_mutex=False)
def add_groups_by_hand(
    x: pl.Tensor[[ROWS, COLS], pl.DT_FP16],
    y: pl.Tensor[[ROWS, COLS], pl.DT_FP16],
    z: pl.Tensor[[ROWS, COLS], pl.DT_FP16],
    locks=True,
):
    """add_groups with its locks written out: each access of slot s locks the slot's id on the access's pipe."""
    tile_type = pl.TileType(shape=[TILE_ROWS, TILE_COLS], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Vec)
    a_db = pl.make_tile_group(type=tile_type, addrs=0x0000, depth=2)
    b_db = pl.make_tile_group(type=tile_type, addrs=0x10000, depth=2)
    c_db = pl.make_tile_group(type=tile_type, addrs=0x20000, depth=2)
    with pl.section_vector():
        s = 0
        for i in pl.range(pl.get_block_idx(), x.shape[0] // TILE_ROWS, pl.get_block_num()):
            for j in pl.range(x.shape[1] // TILE_COLS):
                if locks:
                    pl.system.mutex_lock(pipe=pl.PipeType.MTE2, mutex_id=A_IDS[s])
                pl.load_tile(a_db[s], x, [i, j])
                if locks:
                    pl.system.mutex_unlock(pipe=pl.PipeType.MTE2, mutex_id=A_IDS[s])
                    pl.system.mutex_lock(pipe=pl.PipeType.MTE2, mutex_id=B_IDS[s])
                pl.load_tile(b_db[s], y, [i, j])
                if locks:
                    pl.system.mutex_unlock(pipe=pl.PipeType.MTE2, mutex_id=B_IDS[s])
                    pl.system.mutex_lock(pipe=pl.PipeType.V, mutex_id=C_IDS[s])
                    pl.system.mutex_lock(pipe=pl.PipeType.V, mutex_id=A_IDS[s])
                    pl.system.mutex_lock(pipe=pl.PipeType.V, mutex_id=B_IDS[s])
                pl.add(c_db[s], a_db[s], b_db[s])
                if locks:
                    pl.system.mutex_unlock(pipe=pl.PipeType.V, mutex_id=C_IDS[s])
                    pl.system.mutex_unlock(pipe=pl.PipeType.V, mutex_id=A_IDS[s])
                    pl.system.mutex_unlock(pipe=pl.PipeType.V, mutex_id=B_IDS[s])
                    pl.system.mutex_lock(pipe=pl.PipeType.MTE3, mutex_id=C_IDS[s])
                pl.store_tile(z, c_db[s], [i, j])
                if locks:
                    pl.system.mutex_unlock(pipe=pl.PipeType.MTE3, mutex_id=C_IDS[s])
                s = 1 - s
