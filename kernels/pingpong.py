"""A ping-pong (depth 2) cube -> vector producer/consumer with a pre-posted initial RELEASE (seed 002).

The cube produces tile ``t`` (``x_t @ w``) into slot ``t % 2`` of a UB TileGroup (``move``,
DualModeSplitM) and sets READY (events 0 / 1 by slot); each AIV waits for READY, scales its
rows, stores them and sets RELEASE (events 2 / 3 by slot) after that last read. The AIVs
pre-post one RELEASE per slot before the loop and the cube waits for the final RELEASEs
after it, so a slot used n times sees n + 1 RELEASE sets and n + 1 RELEASE waits, and every
trip count works: 0, 1, even and odd. The trip count ``n`` may be traced (up to ``N_MAX``), so
one compiled kernel sweeps them under ``vmap``.

Two forms with the same verdicts: ``pingpong_kernel`` interleaves the cores by hand (issue
order), ``pingpong_sections_kernel`` runs a cube section and a vector section concurrently.
Broken twin: the cube forgets the final RELEASE waits (leftover signals).
"""

import jax.numpy as jnp
import numpy as np

import ascjax as aj
from ascjax import pl

ROWS, D, N_MAX = 16, 32, 5
READY, RELEASE = (0, 1), (2, 3)
PIPE = pl.PipeType


def _tiles():
    return dict(
        x_mat=pl.alloc("Mat", (ROWS, D), "float16", name="x_mat"),
        w_mat=pl.alloc("Mat", (D, D), "float16", name="w_mat"),
        left=pl.alloc("Left", (ROWS, D), "float16", name="left"),
        right=pl.alloc("Right", (D, D), "float16", name="right"),
        acc=pl.alloc("Acc", (ROWS, D), "float32", name="acc"),
        slots=pl.make_tile_group("Vec", (ROWS // 2, D), "float32", depth=2, name="slots"),
    )


def _sync(src, dst, event_id=0):
    pl.system.sync_src(set_pipe=src, wait_pipe=dst, event_id=event_id)
    pl.system.sync_dst(set_pipe=src, wait_pipe=dst, event_id=event_id)


def _cube_prologue(k, t):
    pl.load(t["w_mat"], "w")
    _sync(PIPE.MTE2, PIPE.MTE1)
    pl.move(t["right"], t["w_mat"])
    k.set_mmad_direction("n")


def _vector_prologue():
    for slot in (0, 1):  # pre-post: both slots start free
        pl.system.set_cross_core(pipe=PIPE.MTE3, event_id=RELEASE[slot])


def _produce(t, i):
    slot = i % 2
    pl.load(t["x_mat"], "x", (i * ROWS, 0))
    _sync(PIPE.MTE2, PIPE.MTE1)
    pl.move(t["left"], t["x_mat"])
    _sync(PIPE.MTE1, PIPE.MTE2, 1)  # x_mat read: reload allowed
    _sync(PIPE.MTE1, PIPE.M)
    pl.matmul(t["acc"], t["left"], t["right"], phase=pl.AccPhase.Final)
    _sync(PIPE.M, PIPE.MTE1)  # left read: reload allowed
    pl.system.wait_cross_core(pipe=PIPE.FIX, event_id=RELEASE[0] + slot)
    pl.move(t["slots"][slot], t["acc"], acc_to_vec_mode=pl.AccToVecMode.DualModeSplitM, phase=pl.STPhase.Final)
    pl.system.set_cross_core(pipe=PIPE.FIX, event_id=READY[0] + slot)


def _consume(t, sub, i):
    slot = i % 2
    tile = t["slots"][slot]
    pl.system.wait_cross_core(pipe=PIPE.V, event_id=READY[0] + slot)
    pl.mul(tile, tile, 2.0)
    _sync(PIPE.V, PIPE.MTE3)
    pl.store("out", tile, (i * ROWS + sub * (ROWS // 2), 0))
    pl.system.set_cross_core(pipe=PIPE.MTE3, event_id=RELEASE[0] + slot)  # after the slot's last read
    _sync(PIPE.MTE3, PIPE.V)


def _cube_epilogue(variant):
    if variant != "no_final_release":
        for slot in (0, 1):  # n + 1 RELEASE waits per slot: the last confirms the last read
            pl.system.wait_cross_core(pipe=PIPE.FIX, event_id=RELEASE[slot])


def pingpong_kernel(k: aj.Program, n=N_MAX, variant: str = "ok", n_max: int = N_MAX):
    """Hand-interleaved: each loop step produces tile t on the cube, then both AIVs consume it."""
    t = _tiles()
    pl.section_cube(lambda: _cube_prologue(k, t))
    pl.section_vector(lambda sub: _vector_prologue())

    @pl.range(n_max, count=n)
    def _(i):
        pl.section_cube(lambda: _produce(t, i))
        pl.section_vector(lambda sub: _consume(t, sub, i))

    pl.section_cube(lambda: _cube_epilogue(variant))


def pingpong_sections_kernel(k: aj.Program, n=N_MAX, variant: str = "ok", n_max: int = N_MAX):
    """A cube section and a vector section, each with its own loop of ``n`` (traced) tiles, run concurrently."""
    t = _tiles()

    @pl.section_cube
    def _():
        _cube_prologue(k, t)
        pl.range(n_max, count=n)(lambda i: _produce(t, i))
        _cube_epilogue(variant)

    @pl.section_vector
    def _(sub):
        _vector_prologue()
        pl.range(n_max, count=n)(lambda i: _consume(t, sub, i))


def reference(x, n):
    out = np.zeros((N_MAX * ROWS, D))
    out[: n * ROWS] = 2.0 * (x["x"][: n * ROWS].astype(np.float64) @ x["w"].astype(np.float64))
    return {"out": out}


def inputs(seed=4, n_max=N_MAX):
    rng = np.random.default_rng(seed)
    return {
        "x": rng.uniform(-1, 1, (n_max * ROWS, D)).astype(np.float16),
        "w": rng.uniform(-1, 1, (D, D)).astype(np.float16),
    }


def _case(n, variant="ok", expect=aj.Verdict.OK, kernel=pingpong_kernel) -> aj.Case:
    return aj.Case(
        kernel=kernel,
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


@aj.case
def pingpong_sections_odd():
    """The ping-pong as two concurrent sections, 5 tiles -> ok."""
    return _case(5, kernel=pingpong_sections_kernel)


@aj.case
def pingpong_sections_zero():
    """Two sections, zero tiles -> ok."""
    return _case(0, kernel=pingpong_sections_kernel)


@aj.case
def pingpong_sections_no_final_release():
    """Two sections, no final RELEASE waits -> leftover."""
    return _case(5, "no_final_release", aj.Verdict.LEFTOVER, kernel=pingpong_sections_kernel)
