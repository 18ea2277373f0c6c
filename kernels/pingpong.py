"""A ping-pong (depth 2) cube -> vector producer/consumer with a pre-posted initial RELEASE (seed 002).

The cube produces tile ``t`` (``x_t @ w``) into slot ``t % 2`` of a UB TileGroup (``move``,
DualModeSplitM) and sets READY (events 0 / 1 by slot); each AIV waits for READY, scales its
rows, stores them and sets RELEASE (events 2 / 3 by slot) after that last read. The AIVs
pre-post one RELEASE per slot before the loop and the cube waits for the final RELEASEs
after it, so a slot used n times sees n + 1 RELEASE sets and n + 1 RELEASE waits, and every
trip count works: 0, 1, even and odd. The trip count ``n`` may be traced (up to ``N_MAX``), so
one compiled kernel sweeps them under ``vmap``.

Broken twin: the cube forgets the final RELEASE waits (leftover signals).
"""

import jax.numpy as jnp
import numpy as np

import ascjax as aj
from ascjax import pl

ROWS, D, N_MAX = 16, 32, 5
READY, RELEASE = (0, 1), (2, 3)
PIPE = pl.PipeType


def pingpong_kernel(k: aj.Program, n=N_MAX, variant: str = "ok"):
    x_mat = pl.alloc("Mat", (ROWS, D), "float16", name="x_mat")
    w_mat = pl.alloc("Mat", (D, D), "float16", name="w_mat")
    left = pl.alloc("Left", (ROWS, D), "float16", name="left")
    right = pl.alloc("Right", (D, D), "float16", name="right")
    acc = pl.alloc("Acc", (ROWS, D), "float32", name="acc")
    slots = pl.make_tile_group("Vec", (ROWS // 2, D), "float32", depth=2, name="slots")

    @pl.section_cube
    def _():
        pl.load(w_mat, "w")
        pl.system.sync_src(set_pipe=PIPE.MTE2, wait_pipe=PIPE.MTE1, event_id=0)
        pl.system.sync_dst(set_pipe=PIPE.MTE2, wait_pipe=PIPE.MTE1, event_id=0)
        pl.move(right, w_mat)
        k.set_mmad_direction("n")

    @pl.section_vector
    def _(sub):
        for slot in (0, 1):  # pre-post: both slots start free
            pl.system.set_cross_core(pipe=PIPE.MTE3, event_id=RELEASE[slot])

    @pl.range(N_MAX)
    def _(t):
        slot = t % 2

        def produce():
            pl.load(x_mat, "x", (t * ROWS, 0))
            pl.system.sync_src(set_pipe=PIPE.MTE2, wait_pipe=PIPE.MTE1, event_id=0)
            pl.system.sync_dst(set_pipe=PIPE.MTE2, wait_pipe=PIPE.MTE1, event_id=0)
            pl.move(left, x_mat)
            pl.system.sync_src(set_pipe=PIPE.MTE1, wait_pipe=PIPE.MTE2, event_id=1)  # x_mat read: reload allowed
            pl.system.sync_dst(set_pipe=PIPE.MTE1, wait_pipe=PIPE.MTE2, event_id=1)
            pl.system.sync_src(set_pipe=PIPE.MTE1, wait_pipe=PIPE.M, event_id=0)
            pl.system.sync_dst(set_pipe=PIPE.MTE1, wait_pipe=PIPE.M, event_id=0)
            pl.matmul(acc, left, right, phase=pl.AccPhase.Final)
            pl.system.sync_src(set_pipe=PIPE.M, wait_pipe=PIPE.MTE1, event_id=0)  # left read: reload allowed
            pl.system.sync_dst(set_pipe=PIPE.M, wait_pipe=PIPE.MTE1, event_id=0)
            pl.system.wait_cross_core(pipe=PIPE.FIX, event_id=RELEASE[0] + slot)
            pl.move(slots[slot], acc, acc_to_vec_mode=pl.AccToVecMode.DualModeSplitM, phase=pl.STPhase.Final)
            pl.system.set_cross_core(pipe=PIPE.FIX, event_id=READY[0] + slot)

        def consume(sub):
            pl.system.wait_cross_core(pipe=PIPE.V, event_id=READY[0] + slot)
            pl.mul(slots[slot], slots[slot], 2.0)
            pl.system.sync_src(set_pipe=PIPE.V, wait_pipe=PIPE.MTE3, event_id=0)
            pl.system.sync_dst(set_pipe=PIPE.V, wait_pipe=PIPE.MTE3, event_id=0)
            pl.store("out", slots[slot], (t * ROWS + sub * (ROWS // 2), 0))
            pl.system.set_cross_core(pipe=PIPE.MTE3, event_id=RELEASE[0] + slot)  # after the slot's last read
            pl.system.sync_src(set_pipe=PIPE.MTE3, wait_pipe=PIPE.V, event_id=0)
            pl.system.sync_dst(set_pipe=PIPE.MTE3, wait_pipe=PIPE.V, event_id=0)

        k.cond(t < n, lambda: pl.section_cube(produce))
        k.cond(t < n, lambda: pl.section_vector(consume))

    @pl.section_cube
    def _():
        if variant != "no_final_release":
            for slot in (0, 1):  # n + 1 RELEASE waits per slot: the last confirms the last read
                pl.system.wait_cross_core(pipe=PIPE.FIX, event_id=RELEASE[slot])


def reference(x, n):
    out = np.zeros((N_MAX * ROWS, D))
    out[: n * ROWS] = 2.0 * (x["x"][: n * ROWS].astype(np.float64) @ x["w"].astype(np.float64))
    return {"out": out}


def inputs(seed=4):
    rng = np.random.default_rng(seed)
    return {
        "x": rng.uniform(-1, 1, (N_MAX * ROWS, D)).astype(np.float16),
        "w": rng.uniform(-1, 1, (D, D)).astype(np.float16),
    }


def _case(n, variant="ok", expect=aj.Verdict.OK) -> aj.Case:
    return aj.Case(
        kernel=pingpong_kernel,
        inputs=inputs(),
        outputs={"out": ((N_MAX * ROWS, D), "float32")},
        params={"n": jnp.int32(n), "variant": variant},
        reference=(lambda x: reference(x, n)) if expect is aj.Verdict.OK else None,
        atol=1e-4,
        expect=expect,
        chip="950",
    )


@aj.case
def pingpong_odd():
    """Depth-2 ping-pong, pre-posted RELEASE, 5 tiles (odd) -> ok."""
    return _case(5)


@aj.case
def pingpong_even():
    """The same kernel for 4 tiles (even) -> ok."""
    return _case(4)


@aj.case
def pingpong_one():
    """One tile: slot 1 is never used, its pre-posted RELEASE is consumed by the final wait -> ok."""
    return _case(1)


@aj.case
def pingpong_zero():
    """Zero tiles: only the pre-posted RELEASEs and the final waits run -> ok."""
    return _case(0)


@aj.case
def pingpong_no_final_release():
    """The cube skips the final RELEASE waits: the last sets are never consumed -> leftover."""
    return _case(5, "no_final_release", aj.Verdict.LEFTOVER)
