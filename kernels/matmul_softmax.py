"""Seed 002's ``matmul_softmax`` in the tile language: the cube computes S = A @ B, ``move``s it to the
two AIVs' UB with ``DualModeSplitM`` and sets event 0 on FIX; each AIV waits on V, runs a row
softmax on its half of the rows and stores it.

Broken twins: the cube never sets the event (the AIVs wait forever: deadlock), and the AIVs
never wait (they read UB while the move may still be writing it: race).
"""

import numpy as np

import ascjax as aj
from ascjax import pl

M, K, N = 64, 64, 64


def matmul_softmax_kernel(k: aj.Program, variant: str = "ok"):
    a_mat = pl.alloc("Mat", (M, K), "float16", name="a_mat")
    b_mat = pl.alloc("Mat", (K, N), "float16", name="b_mat")
    left = pl.alloc("Left", (M, K), "float16", name="left")
    right = pl.alloc("Right", (K, N), "float16", name="right")
    acc = pl.alloc("Acc", (M, N), "float32", name="acc")
    s = pl.alloc("Vec", (M // 2, N), "float32", name="s")  # each AIV holds half of the rows
    row = pl.alloc("Vec", (M // 2, 1), "float32", name="row")

    @pl.section_cube
    def _():
        pl.load(a_mat, "a")
        pl.load(b_mat, "b")
        pl.system.sync_src(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.MTE1, event_id=0)
        pl.system.sync_dst(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.MTE1, event_id=0)
        pl.move(left, a_mat)
        pl.move(right, b_mat)
        pl.system.sync_src(set_pipe=pl.PipeType.MTE1, wait_pipe=pl.PipeType.M, event_id=0)
        pl.system.sync_dst(set_pipe=pl.PipeType.MTE1, wait_pipe=pl.PipeType.M, event_id=0)
        k.set_mmad_direction("n")  # the move converts Nz -> ND: it reads along N
        pl.matmul(acc, left, right, phase=pl.AccPhase.Final)
        pl.move(s, acc, acc_to_vec_mode=pl.AccToVecMode.DualModeSplitM, phase=pl.STPhase.Final)
        if variant != "no_set":
            pl.system.set_cross_core(pipe=pl.PipeType.FIX, event_id=0)

    @pl.section_vector
    def _(sub):
        if variant != "no_wait":
            pl.system.wait_cross_core(pipe=pl.PipeType.V, event_id=0)
        pl.maximum(row, s, dim=0)
        pl.expand_sub(s, s, row)
        pl.exp(s, s)
        pl.sum(row, s)
        pl.expand_div(s, s, row)
        pl.system.sync_src(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=0)
        pl.system.sync_dst(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=0)
        pl.store("out", s, (sub * (M // 2), 0))


def reference(x):
    s = x["a"].astype(np.float64) @ x["b"].astype(np.float64)
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return {"out": e / e.sum(axis=1, keepdims=True)}


def _case(variant="ok", expect=aj.Verdict.OK, chip="950", seed=0) -> aj.Case:
    rng = np.random.default_rng(seed)
    return aj.Case(
        kernel=matmul_softmax_kernel,
        inputs={"a": rng.uniform(-1, 1, (M, K)).astype(np.float16), "b": rng.uniform(-1, 1, (K, N)).astype(np.float16)},
        outputs={"out": ((M, N), "float32")},
        params={"variant": variant},
        reference=reference if expect is aj.Verdict.OK else None,
        atol=1e-5,
        expect=expect,
        chip=chip,
    )


@aj.case
def matmul_softmax(seed=0):
    """Cube matmul -> move (DualModeSplitM) -> set FIX 0; each AIV waits V 0 and runs a row softmax -> ok."""
    return _case(seed=seed)


@aj.case
def matmul_softmax_no_set():
    """The cube never sets event 0: both AIVs wait forever -> deadlock."""
    return _case("no_set", aj.Verdict.DEADLOCK)


@aj.case
def matmul_softmax_no_wait():
    """The AIVs do not wait for the cube's event: they read UB the move writes -> race."""
    return _case("no_wait", aj.Verdict.RACE)
