"""An Engram-style double-buffered cube -> vector pipeline (seed 002, Huawei's engram_forward).

Per head ``h`` the cube computes ``X @ W_h`` and stores it into GM workspace slot ``h % 2``, then
sets K_READY (events 0 / 1 by slot). Each AIV waits for K_READY, loads its half of the rows,
applies ReLU and scale, stores them to the output, and sends an ACK (events 2 / 3 by slot)
once it has read the slot. Before overwriting a slot the cube waits for its ACK from both
AIVs (INTRA_BLOCK) - except for its first two heads, whose slots nobody has read yet (the
cold start). After the loop the cube drains the last ACKs.

Two forms with the same verdicts: ``engram_kernel`` interleaves the cores by hand in one loop
(issue order), ``engram_sections_kernel`` is a cube section and a vector section, each with its
own loop, run concurrently. Broken twins: no cold-start skip (deadlock), no ACK wait before
reusing a slot (race), the final ACKs never drained (leftover).
"""

import numpy as np

import ascjax as aj
from ascjax import pl

ROWS, D, HEADS = 32, 32, 4
K_READY, ACK = (0, 1), (2, 3)
PIPE = pl.PipeType


def _sync(src, dst, event_id=0):
    pl.system.sync_src(set_pipe=src, wait_pipe=dst, event_id=event_id)
    pl.system.sync_dst(set_pipe=src, wait_pipe=dst, event_id=event_id)


def _tiles():
    return dict(
        x_mat=pl.alloc("Mat", (ROWS, D), "float16", name="x_mat"),
        w_mat=pl.alloc("Mat", (D, D), "float16", name="w_mat"),
        left=pl.alloc("Left", (ROWS, D), "float16", name="left"),
        right=pl.alloc("Right", (D, D), "float16", name="right"),
        acc=pl.alloc("Acc", (ROWS, D), "float32", name="acc"),
        part=pl.alloc("Vec", (ROWS // 2, D), "float32", name="part"),
    )


def _cube_prologue(k, t):
    pl.load(t["x_mat"], "x")
    _sync(PIPE.MTE2, PIPE.MTE1)
    pl.move(t["left"], t["x_mat"])
    k.set_mmad_direction("n")
    pl.system.sync_src(set_pipe=PIPE.MTE1, wait_pipe=PIPE.MTE2, event_id=1)  # w_mat is free
    pl.system.sync_src(set_pipe=PIPE.M, wait_pipe=PIPE.MTE1, event_id=1)  # right is free


def _cube_head(t, h, variant):
    slot = h % 2
    pl.system.sync_dst(set_pipe=PIPE.MTE1, wait_pipe=PIPE.MTE2, event_id=1)
    pl.load(t["w_mat"], "w", (h * D, 0))
    _sync(PIPE.MTE2, PIPE.MTE1)
    pl.system.sync_dst(set_pipe=PIPE.M, wait_pipe=PIPE.MTE1, event_id=1)
    pl.move(t["right"], t["w_mat"])
    pl.system.sync_src(set_pipe=PIPE.MTE1, wait_pipe=PIPE.MTE2, event_id=1)
    _sync(PIPE.MTE1, PIPE.M)
    pl.matmul(t["acc"], t["left"], t["right"], phase=pl.AccPhase.Final)
    pl.system.sync_src(set_pipe=PIPE.M, wait_pipe=PIPE.MTE1, event_id=1)
    if variant != "no_ack_wait":  # cold start: slots 0 and 1 start free
        cold_start = True if variant == "no_cold_start" else h >= 2
        pl.system.wait_cross_core(pipe=PIPE.FIX, event_id=ACK[0] + slot, when=cold_start)
    pl.store("ws", t["acc"], (slot * ROWS, 0), phase=pl.STPhase.Final)
    pl.system.set_cross_core(pipe=PIPE.FIX, event_id=K_READY[0] + slot)


def _cube_epilogue(heads, variant):
    pl.system.sync_dst(set_pipe=PIPE.MTE1, wait_pipe=PIPE.MTE2, event_id=1)
    pl.system.sync_dst(set_pipe=PIPE.M, wait_pipe=PIPE.MTE1, event_id=1)
    if variant != "no_drain":
        for h in range(max(heads - 2, 0), heads):  # the ACKs of the last two heads
            pl.system.wait_cross_core(pipe=PIPE.FIX, event_id=ACK[h % 2])


def _vector_head(t, sub, h):
    slot = h % 2
    part = t["part"]
    pl.system.wait_cross_core(pipe=PIPE.MTE2, event_id=K_READY[0] + slot)
    pl.load(part, "ws", (slot * ROWS + sub * (ROWS // 2), 0))
    _sync(PIPE.MTE2, PIPE.V)
    pl.relu(part, part)
    pl.mul(part, part, 0.5)
    pl.system.set_cross_core(pipe=PIPE.V, event_id=ACK[0] + slot)  # the slot is read
    _sync(PIPE.V, PIPE.MTE3)
    pl.store("out", part, (h * ROWS + sub * (ROWS // 2), 0))
    _sync(PIPE.MTE3, PIPE.MTE2)


def engram_kernel(k: aj.Program, heads: int = HEADS, variant: str = "ok"):
    """Hand-interleaved: each loop step runs the cube's head, then both AIVs' (issue order)."""
    t = _tiles()
    with k.cube():
        _cube_prologue(k, t)

    @pl.range(heads)
    def _(h):
        with k.cube():
            _cube_head(t, h, variant)
        for sub in (0, 1):
            with k.vector(sub):
                _vector_head(t, sub, h)

    with k.cube():
        _cube_epilogue(heads, variant)


def engram_sections_kernel(k: aj.Program, heads: int = HEADS, variant: str = "ok"):
    """Two programs, each with its own loop, run concurrently (the vector one is written first on purpose)."""
    t = _tiles()

    @pl.section_vector
    def _(sub):
        pl.range(heads)(lambda h: _vector_head(t, sub, h))

    @pl.section_cube
    def _():
        _cube_prologue(k, t)
        pl.range(heads)(lambda h: _cube_head(t, h, variant))
        _cube_epilogue(heads, variant)


def reference(x, heads=HEADS):
    xs = x["x"].astype(np.float64)
    outs = [np.maximum(xs @ x["w"][h * D : (h + 1) * D].astype(np.float64), 0) * 0.5 for h in range(heads)]
    return {"out": np.concatenate(outs)}


def _case(variant="ok", expect=aj.Verdict.OK, heads=HEADS, kernel=engram_kernel) -> aj.Case:
    rng = np.random.default_rng(3)
    return aj.Case(
        kernel=kernel,
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


@aj.case
def engram_sections():
    """The same pipeline as a cube section and a vector section running concurrently -> ok."""
    return _case(kernel=engram_sections_kernel)


@aj.case
def engram_sections_no_cold_start():
    """Two sections, no cold-start skip: the cube waits for an ACK no AIV can send yet -> deadlock."""
    return _case("no_cold_start", aj.Verdict.DEADLOCK, kernel=engram_sections_kernel)


@aj.case
def engram_sections_no_ack_wait():
    """Two sections, the cube reuses a slot without its ACK -> race."""
    return _case("no_ack_wait", aj.Verdict.RACE, kernel=engram_sections_kernel)


@aj.case
def engram_sections_no_drain():
    """Two sections, the last ACKs never drained -> leftover."""
    return _case("no_drain", aj.Verdict.LEFTOVER, kernel=engram_sections_kernel)
