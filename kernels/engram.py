"""An Engram-style double-buffered cube -> vector pipeline (seed 002, Huawei's engram_forward).

Per head ``h`` the cube computes ``X @ W_h`` and stores it into GM workspace slot ``h % 2``, then
sets K_READY (events 0 / 1 by slot). Each AIV waits for K_READY, loads its half of the rows,
applies ReLU and scale, stores them to the output, and sends an ACK (events 2 / 3 by slot)
once it has read the slot. Before overwriting a slot the cube waits for its ACK from both
AIVs (INTRA_BLOCK) - except for its first two heads, whose slots nobody has read yet (the
cold start). After the loop the cube drains the last ACKs.

Written hand-interleaved in one loop (cube step, then both AIV steps), in issue order.
Broken twins: no cold-start skip (deadlock), no ACK wait before reusing a slot (race), the
final ACKs never drained (leftover).
"""

import numpy as np

import ascjax as aj
from ascjax import pl

ROWS, D, HEADS = 32, 32, 4
K_READY, ACK = (0, 1), (2, 3)


def engram_kernel(k: aj.Program, heads: int = HEADS, variant: str = "ok"):
    x_mat = pl.alloc("Mat", (ROWS, D), "float16", name="x_mat")
    w_mat = pl.alloc("Mat", (D, D), "float16", name="w_mat")
    left = pl.alloc("Left", (ROWS, D), "float16", name="left")
    right = pl.alloc("Right", (D, D), "float16", name="right")
    acc = pl.alloc("Acc", (ROWS, D), "float32", name="acc")
    part = pl.alloc("Vec", (ROWS // 2, D), "float32", name="part")

    @pl.section_cube
    def _():
        pl.load(x_mat, "x")
        pl.system.sync_src(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.MTE1, event_id=0)
        pl.system.sync_dst(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.MTE1, event_id=0)
        pl.move(left, x_mat)
        k.set_mmad_direction("n")
        pl.system.sync_src(set_pipe=pl.PipeType.MTE1, wait_pipe=pl.PipeType.MTE2, event_id=1)  # w_mat is free
        pl.system.sync_src(set_pipe=pl.PipeType.M, wait_pipe=pl.PipeType.MTE1, event_id=1)  # right is free

    def wait_ack(slot):
        pl.system.wait_cross_core(pipe=pl.PipeType.FIX, event_id=ACK[0] + slot)

    @pl.range(heads)
    def _(h):
        slot = h % 2
        with k.cube():
            pl.system.sync_dst(set_pipe=pl.PipeType.MTE1, wait_pipe=pl.PipeType.MTE2, event_id=1)
            pl.load(w_mat, "w", (h * D, 0))
            pl.system.sync_src(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.MTE1, event_id=0)
            pl.system.sync_dst(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.MTE1, event_id=0)
            pl.system.sync_dst(set_pipe=pl.PipeType.M, wait_pipe=pl.PipeType.MTE1, event_id=1)
            pl.move(right, w_mat)
            pl.system.sync_src(set_pipe=pl.PipeType.MTE1, wait_pipe=pl.PipeType.MTE2, event_id=1)
            pl.system.sync_src(set_pipe=pl.PipeType.MTE1, wait_pipe=pl.PipeType.M, event_id=0)
            pl.system.sync_dst(set_pipe=pl.PipeType.MTE1, wait_pipe=pl.PipeType.M, event_id=0)
            pl.matmul(acc, left, right, phase=pl.AccPhase.Final)
            pl.system.sync_src(set_pipe=pl.PipeType.M, wait_pipe=pl.PipeType.MTE1, event_id=1)
            if variant == "no_cold_start":
                wait_ack(slot)
            elif variant != "no_ack_wait":
                k.cond(h >= 2, lambda: wait_ack(slot))  # cold start: slots 0 and 1 start free
            pl.store("ws", acc, (slot * ROWS, 0), phase=pl.STPhase.Final)
            pl.system.set_cross_core(pipe=pl.PipeType.FIX, event_id=K_READY[0] + slot)

        for sub in (0, 1):
            with k.vector(sub):
                pl.system.wait_cross_core(pipe=pl.PipeType.MTE2, event_id=K_READY[0] + slot)
                pl.load(part, "ws", (slot * ROWS + sub * (ROWS // 2), 0))
                pl.system.sync_src(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=0)
                pl.system.sync_dst(set_pipe=pl.PipeType.MTE2, wait_pipe=pl.PipeType.V, event_id=0)
                pl.relu(part, part)
                pl.mul(part, part, 0.5)
                pl.system.set_cross_core(pipe=pl.PipeType.V, event_id=ACK[0] + slot)  # the slot is read
                pl.system.sync_src(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=0)
                pl.system.sync_dst(set_pipe=pl.PipeType.V, wait_pipe=pl.PipeType.MTE3, event_id=0)
                pl.store("out", part, (h * ROWS + sub * (ROWS // 2), 0))
                pl.system.sync_src(set_pipe=pl.PipeType.MTE3, wait_pipe=pl.PipeType.MTE2, event_id=0)
                pl.system.sync_dst(set_pipe=pl.PipeType.MTE3, wait_pipe=pl.PipeType.MTE2, event_id=0)

    @pl.section_cube
    def _():
        pl.system.sync_dst(set_pipe=pl.PipeType.MTE1, wait_pipe=pl.PipeType.MTE2, event_id=1)
        pl.system.sync_dst(set_pipe=pl.PipeType.M, wait_pipe=pl.PipeType.MTE1, event_id=1)
        if variant != "no_drain":
            for h in range(max(heads - 2, 0), heads):  # the ACKs of the last two heads
                wait_ack(h % 2)


def reference(x, heads=HEADS):
    xs = x["x"].astype(np.float64)
    outs = [np.maximum(xs @ x["w"][h * D : (h + 1) * D].astype(np.float64), 0) * 0.5 for h in range(heads)]
    return {"out": np.concatenate(outs)}


def _case(variant="ok", expect=aj.Verdict.OK, heads=HEADS) -> aj.Case:
    rng = np.random.default_rng(3)
    return aj.Case(
        kernel=engram_kernel,
        inputs={
            "x": rng.uniform(-1, 1, (ROWS, D)).astype(np.float16),
            "w": rng.uniform(-1, 1, (heads * D, D)).astype(np.float16),
        },
        outputs={"ws": ((2 * ROWS, D), "float32"), "out": ((heads * ROWS, D), "float32")},
        params={"heads": heads, "variant": variant},
        reference=(lambda x: {"out": reference(x, heads)["out"]}) if expect is aj.Verdict.OK else None,
        atol=1e-4,
        expect=expect,
        chip="950",
    )


@aj.case
def engram():
    """READY (0, 1) / ACK (2, 3) double buffering with the cube's cold-start skip and a final drain -> ok."""
    return _case()


@aj.case
def engram_no_cold_start():
    """The cube waits for an ACK on its first head, which nobody has sent -> deadlock."""
    return _case("no_cold_start", aj.Verdict.DEADLOCK)


@aj.case
def engram_no_ack_wait():
    """The cube overwrites a workspace slot without waiting for its ACK -> race with the AIVs' loads."""
    return _case("no_ack_wait", aj.Verdict.RACE)


@aj.case
def engram_no_drain():
    """The cube never waits for the last two heads' ACKs -> leftover signals."""
    return _case("no_drain", aj.Verdict.LEFTOVER)
