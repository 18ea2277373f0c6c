"""Seed 002's ``vec_cube_abs_sqrt_matmul``: the vector cores compute sqrt(|x|), ``insert`` it into L1 (ND -> Nz)
and set event 2 on MTE3; the cube waits on MTE1 (INTRA_BLOCK: for both AIVs), moves L1 -> L0A and
multiplies. 64 x 64 float32; the seed's device run reached a max diff of 3.815e-06 against 1e-3.

The two sections run concurrently. Broken twins: the cube does not wait (it runs ahead and reads
L1 before the inserts wrote it: uninitialized), and only AIV0 sets the event (an INTRA_BLOCK
cube wait needs both AIVs: deadlock).
"""

import numpy as np

import ascjax as aj
from ascjax import pl

M = K = N = 64


def vec_cube_kernel(k: aj.Program, variant: str = "ok"):
    x_vec = pl.alloc("Vec", (M // 2, K), "float32", name="x_vec")  # each AIV takes half of the rows
    a_mat = pl.alloc("Mat", (M, K), "float32", name="a_mat")
    b_mat = pl.alloc("Mat", (K, N), "float32", name="b_mat")
    left = pl.alloc("Left", (M, K), "float32", name="left")
    right = pl.alloc("Right", (K, N), "float32", name="right")
    acc = pl.alloc("Acc", (M, N), "float32", name="acc")

    @pl.section_vector
    def _(sub):
        pl.load(x_vec, "x", (sub * (M // 2), 0))
        pl.system.sync_src(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=0)
        pl.system.sync_dst(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=0)
        pl.abs(x_vec, x_vec)
        pl.sqrt(x_vec, x_vec)
        pl.system.sync_src(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=0)
        pl.system.sync_dst(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=0)
        pl.insert(a_mat, x_vec, (sub * (M // 2), 0))
        if variant != "one_aiv_sets" or sub == 0:
            pl.system.set_cross_core(pipe=pl.PipeType.MTE3, event_id=2)

    @pl.section_cube
    def _():
        pl.load(b_mat, "w")
        pl.system.sync_src(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.MTE1, event_id=0)
        pl.system.sync_dst(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.MTE1, event_id=0)
        if variant != "no_wait":
            pl.system.wait_cross_core(pipe=pl.PipeType.MTE1, event_id=2)
        pl.move(left, a_mat)
        pl.move(right, b_mat)
        pl.system.sync_src(set_pipe=pl.PipeType.MTE1, wait_pipe=pl.PipeType.M, event_id=0)
        pl.system.sync_dst(set_pipe=pl.PipeType.MTE1, wait_pipe=pl.PipeType.M, event_id=0)
        k.set_mmad_direction("n")
        pl.matmul(acc, left, right, phase=pl.AccPhase.Final)
        pl.store("out", acc, phase=pl.STPhase.Final)


def reference(x):
    return {"out": np.sqrt(np.abs(x["x"].astype(np.float64))) @ x["w"].astype(np.float64)}


def _case(variant="ok", expect=aj.Verdict.OK) -> aj.Case:
    rng = np.random.default_rng(2)
    return aj.Case(
        kernel=vec_cube_kernel,
        inputs={"x": rng.uniform(-1, 1, (M, K)).astype(np.float32), "w": rng.uniform(-1, 1, (K, N)).astype(np.float32)},
        outputs={"out": ((M, N), "float32")},
        params={"variant": variant},
        reference=reference if expect is aj.Verdict.OK else None,
        atol=1e-3,
        expect=expect,
        chip="950",
    )


@aj.case
def vec_cube_abs_sqrt_matmul():
    """AIVs: sqrt(|x|) -> insert into L1 -> set MTE3 2; cube: wait MTE1 2 -> L1 -> L0A -> matmul -> ok (64 x 64 f32)."""
    return _case()


@aj.case
def vec_cube_no_wait():
    """The cube does not wait for the AIVs' event: its L1 read is unordered with the inserts -> race (the seed's
    uninitialized read is this race's symptom when the read runs first)."""
    return _case("no_wait", aj.Verdict.RACE)


@aj.case
def vec_cube_one_aiv_sets():
    """Only AIV0 sets event 2; an INTRA_BLOCK cube wait needs both AIVs -> deadlock."""
    return _case("one_aiv_sets", aj.Verdict.DEADLOCK)
