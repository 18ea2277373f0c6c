"""The buffer-id mutex (950 ``Mutex::Lock/Unlock``, PyPTO-Pro ``mutex_lock`` / ``mutex_unlock``) and the locks
PyPTO-Pro's ``auto_mutex`` inserts around tile-group accesses.

A mutex hands a buffer from pipe to pipe in the order the scalar unit issues the lock groups: each group on an id
starts once the group before it has unlocked. Every good program is paired with its twin without the locks (a
race) or with a lock never unlocked (a deadlock that names both groups).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pypto_tile_group_add as groups
import pytest

import ascjax as aj
import ascjax.pypto_pro.language as pl
from ascjax import Verdict

X = np.arange(32 * 64, dtype=np.float32).reshape(32, 64) / 64


def _staged(k, n=4, locks=True, unlock_mte2=True):
    """Each AIV: n times GM -> UB (MTE2), doubled in place (V), UB -> GM (MTE3), every access in a lock group on
    mutex 5; ``unlock_mte2`` False leaves the MTE2 group locked."""
    t = k.alloc("UB", (16, 64), "float32", name="t")

    @k.section_vector
    def _(sub):
        stages = (
            ("MTE2", lambda: k.copy_gm2ub(t, "x", row=sub * 16)),
            ("V", lambda: k.add(t, t, t)),
            ("MTE3", lambda: k.copy_ub2gm("y", t, row=sub * 16)),
        )

        def body(i):
            for pipe, access in stages:
                if locks:
                    k.mutex_lock(pipe, 5)
                access()
                if locks and (unlock_mte2 or pipe != "MTE2"):
                    k.mutex_unlock(pipe, 5)

        k.range(4, body, count=n)


def _run(**params):
    return aj.run(_staged, {"x": X}, {"y": ((32, 64), "float32")}, chip="950", params=params)


def test_lock_groups_hand_a_buffer_from_pipe_to_pipe_in_issue_order():
    result = _run()
    assert result.ok, result.report()
    np.testing.assert_array_equal(np.asarray(result.outputs["y"]), 2 * X)


def test_without_the_locks_the_pipes_race():
    result = _run(locks=False)
    assert int(result.verdict) == Verdict.RACE
    assert "RACE (RAW) on UB@AIV0" in str(result.report())


def test_a_lock_never_unlocked_deadlocks_the_next_group_and_names_both():
    result = _run(n=1, unlock_mte2=False)
    assert int(result.verdict) == Verdict.DEADLOCK
    text = str(result.report())
    assert "mutex_lock at tests/test_mutex.py:" in text
    assert "waits for mutex 5 of AIV0: the lock group before it, mutex_lock at tests/test_mutex.py:" in text
    assert "(AIV0.MTE2) in loop iteration (0), is never unlocked" in text


def test_verdicts_under_vmap_follow_the_trip_count():
    x = jnp.arange(5, dtype=jnp.int32)
    locked = jax.vmap(lambda n: _run(n=n).verdict)(x)
    unlocked = jax.vmap(lambda n: _run(n=n, locks=False).verdict)(x)
    np.testing.assert_array_equal(np.asarray(locked), [Verdict.OK] * 5)
    np.testing.assert_array_equal(np.asarray(unlocked), [Verdict.OK] + [Verdict.RACE] * 4)  # nothing runs at n = 0


@pytest.mark.parametrize(
    ("pipe", "mutex_id", "rule"),
    [("M", 0, "rule 'mutex pipe'"), ("MTE2", 32, r"rule 'mutex id': mutex_id 32 is outside \[0, 32\)")],
)
def test_a_lock_on_a_pipe_the_core_lacks_or_an_id_out_of_range_is_refused(pipe, mutex_id, rule):
    def kernel(k):
        @k.section_vector
        def _(sub):
            k.mutex_lock(pipe, mutex_id)

    with pytest.raises(ValueError, match=rule):
        aj.run(kernel, {}, {}, chip="950")


# -- auto_mutex ---------------------------------------------------------------------------
RNG = np.random.default_rng(5)
A = RNG.random((groups.ROWS, groups.COLS)).astype(np.float16)
B = RNG.random((groups.ROWS, groups.COLS)).astype(np.float16)


def test_auto_mutex_gives_the_verdict_outputs_and_cycles_of_the_same_locks_by_hand():
    auto, by_hand = np.zeros_like(A), np.zeros_like(A)
    auto_result = groups.add_groups(A, B, auto)
    hand_result = groups.add_groups_by_hand(A, B, by_hand)
    assert int(auto_result.verdict) == int(hand_result.verdict) == Verdict.OK
    np.testing.assert_array_equal(auto, A + B)
    np.testing.assert_array_equal(auto, by_hand)
    assert float(auto_result.cycles) == float(hand_result.cycles)


def test_the_kernel_without_its_locks_races():
    result = groups.add_groups_by_hand(A, B, np.zeros_like(A), locks=False)
    assert int(result.verdict) == Verdict.RACE


def test_auto_mutex_on_a_launch():
    z = np.zeros_like(A)
    result = groups.add_groups[None, 2](A, B, z)
    assert result.ok, result.report()
    np.testing.assert_array_equal(z, A + B)


def test_the_inserted_locks_are_named_as_such_at_the_line_of_the_access():
    result = groups.add_groups(A, B, np.zeros_like(A))
    sites = {site for _, site, *_ in result.record.template.entries}
    line = next(i for i, text in enumerate(open(groups.__file__), 1) if "pl.load_tile(tile_a, x, [i, j])" in text)
    assert f"mutex_lock of tile group `a_db`, inserted by auto_mutex at kernels/pypto_tile_group_add.py:{line}" in sites
    assert (
        f"mutex_unlock of tile group `a_db`, inserted by auto_mutex at kernels/pypto_tile_group_add.py:{line}" in sites
    )


@pl.jit(auto_mutex=True)
def _held_by_hand(x: pl.Tensor[[16, 64], pl.DT_FP16], z: pl.Tensor[[16, 64], pl.DT_FP16]):
    tile_type = pl.TileType(shape=[16, 64], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Vec)
    group = pl.make_tile_group(type=tile_type, addrs=0x0, mutex_ids=[7, 8])
    with pl.section_vector():
        tile = group.next()
        pl.system.mutex_lock(pipe=pl.PipeType.MTE2, mutex_id=7)  # locked by hand, never unlocked
        pl.load(tile, x, [0, 0])
        pl.add(tile, tile, tile)
        pl.store(z, tile, [pl.get_subblock_idx() * 0, 0])


def test_a_deadlock_on_an_inserted_lock_names_it_and_the_group_it_waits_for():
    result = _held_by_hand(np.ones((16, 64), np.float16), np.zeros((16, 64), np.float16))
    assert int(result.verdict) == Verdict.DEADLOCK
    text = str(result.report())
    assert "mutex_lock of tile group `group`, inserted by auto_mutex at tests/test_mutex.py:" in text
    assert "waits for mutex 7 of AIV0: the lock group before it, pl.system.mutex_lock at tests/test_mutex.py:" in text
    assert "is never unlocked" in text


@pl.jit(auto_mutex=True)
def _second_id_held(x: pl.Tensor[[16, 64], pl.DT_FP16], z: pl.Tensor[[16, 64], pl.DT_FP16], ids: int = 0):
    tile_type = pl.TileType(shape=[16, 64], dtype=pl.DT_FP16, target_memory=pl.MemorySpace.Vec)
    ids_of = ([[7, 9], [8, 10]], [[7], [8]])  # two ids a slot, or its twin with one
    group = pl.make_tile_group(type=tile_type, addrs=0x0, mutex_ids=ids_of[ids])
    with pl.section_vector():
        tile = group.next()
        pl.system.mutex_lock(pipe=pl.PipeType.MTE2, mutex_id=9)  # locked by hand, never unlocked
        pl.load(tile, x, [0, 0])
        pl.add(tile, tile, tile)
        pl.store(z, tile, [0, 0])


def test_a_slot_with_a_list_of_mutex_ids_locks_each_of_them():
    x, z = np.ones((16, 64), np.float16), np.zeros((16, 64), np.float16)
    held = _second_id_held(x, z, 0)  # slot 0 locks 7 then 9: the load waits on 9 forever
    assert int(held.verdict) == Verdict.DEADLOCK
    assert "waits for mutex 9 of AIV0" in str(held.report())
    single = _second_id_held(x, z.copy(), 1)
    assert int(single.verdict) != Verdict.DEADLOCK, single.report()
