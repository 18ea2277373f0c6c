"""A path-dependent sync bug: correct for every trip count but zero.

An AIV streams ``n`` tiles GM -> UB -> (x 2) -> GM. The V -> MTE3 handshake is done per tile;
the MTE3 -> V direction (the UB tile may be overwritten once the store has read it) is the
classic "wait at the top of the next iteration" pattern: iteration ``i > 0`` waits for the
previous iteration's set, and a final wait after the loop drains the last one.

With ``n == 0`` the loop sets nothing, and the drain after it waits forever: a deadlock that
no test with a non-empty input finds. ``n`` is traced, so one compiled kernel sweeps it
(``python examples/sweep_loop_count.py``). The fix (``variant="fixed"``) pre-posts one set
before the loop and waits at the top of every iteration, so sets and waits pair up for
every ``n``.
"""

import jax.numpy as jnp
import numpy as np

import ascjax as aj
from ascjax import pl

ROWS, COLS, N_MAX = 8, 32, 4
PIPE = pl.PipeType


def zero_trip_kernel(k: aj.Program, n=N_MAX, variant: str = "buggy"):
    x = pl.alloc("Vec", (ROWS, COLS), "float32", name="x")

    def sync(src, dst):
        pl.system.sync_src(set_pipe=src, wait_pipe=dst, event_id=0)
        pl.system.sync_dst(set_pipe=src, wait_pipe=dst, event_id=0)

    with k.vector(0):
        if variant == "fixed":
            pl.system.sync_src(set_pipe=PIPE.MTE3, wait_pipe=PIPE.MTE2, event_id=1)  # the tile starts free

        @pl.range(N_MAX, count=n)
        def _(i):
            if variant == "fixed":
                pl.system.sync_dst(set_pipe=PIPE.MTE3, wait_pipe=PIPE.MTE2, event_id=1)
            else:  # wait for the previous store, except on the first tile
                k.cond(i > 0, lambda: pl.system.sync_dst(set_pipe=PIPE.MTE3, wait_pipe=PIPE.MTE2, event_id=1))
            pl.load(x, "x", (i * ROWS, 0))
            sync(PIPE.MTE2, PIPE.V)
            pl.mul(x, x, 2.0)
            sync(PIPE.V, PIPE.MTE3)
            pl.store("out", x, (i * ROWS, 0))
            pl.system.sync_src(set_pipe=PIPE.MTE3, wait_pipe=PIPE.MTE2, event_id=1)

        pl.system.sync_dst(set_pipe=PIPE.MTE3, wait_pipe=PIPE.MTE2, event_id=1)  # drain the last set


def inputs(seed=0):
    return {"x": np.random.default_rng(seed).uniform(-1, 1, (N_MAX * ROWS, COLS)).astype(np.float32)}


def reference(x, n):
    out = np.zeros((N_MAX * ROWS, COLS))
    out[: n * ROWS] = 2.0 * x["x"][: n * ROWS]
    return {"out": out}


def _case(n, variant, expect, seed=0):
    return aj.Case(
        kernel=zero_trip_kernel,
        inputs=inputs(seed),
        outputs={"out": ((N_MAX * ROWS, COLS), "float32")},
        params={"n": jnp.int32(n), "variant": variant},
        reference=(lambda x: reference(x, n)) if expect is aj.Verdict.OK else None,
        expect=expect,
        chip="950",
    )


@aj.case
def buggy_three_tiles(seed=0):
    """Three tiles: every wait has its set -> ok."""
    return _case(3, "buggy", aj.Verdict.OK, seed)


@aj.case
def buggy_zero_tiles(seed=0):
    """Zero tiles: the drain after the loop waits for a set that never came -> deadlock."""
    return _case(0, "buggy", aj.Verdict.DEADLOCK, seed)


@aj.case
def fixed_zero_tiles(seed=0):
    """The fix (pre-posted set, a wait on every tile) with zero tiles -> ok."""
    return _case(0, "fixed", aj.Verdict.OK, seed)
