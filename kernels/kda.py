"""A KDA ``chunk_h``-style chunk loop with four cross-core channels, one event id each (seed 002).

Per chunk the cube computes ``k_c @ Wk`` and ``v_c @ Wv`` into GM workspaces and signals them
on events 0 and 1 (cube -> vector); each AIV waits for both, loads its rows, computes
``h = relu(k) * v``, acknowledges the workspaces on event 3 (vector -> cube: they may be
overwritten) and hands ``h`` back through a third workspace on event 2 (vector -> cube);
the cube waits for event 2, reloads ``h`` and computes ``h @ Wo`` into the output. The cube
waits for the acknowledgement before it overwrites the workspaces (not on chunk 0) and drains
the last one after the loop.

Two forms with the same verdicts: ``kda_kernel`` interleaves the cores by hand (issue order),
``kda_sections_kernel`` runs a cube section and a vector section concurrently.
Broken twin: channel 1 reuses event 0, so the cube sets it a second time while the first
signal is still unconsumed (the seed's rule "an event_id must not serve two channels").
"""

import numpy as np

import ascjax as aj
from ascjax import pl

ROWS, D, CHUNKS = 16, 32, 3
K_READY, V_READY, H_READY, WS_FREE = 0, 1, 2, 3
PIPE = pl.PipeType


def _tiles():
    return dict(
        a_mat=pl.alloc("Mat", (ROWS, D), "float16", name="a_mat"),
        w_mat=pl.alloc("Mat", (D, D), "float16", name="w_mat"),
        left=pl.alloc("Left", (ROWS, D), "float16", name="left"),
        right=pl.alloc("Right", (D, D), "float16", name="right"),
        acc=pl.alloc("Acc", (ROWS, D), "float32", name="acc"),
        kv=pl.alloc("Vec", (ROWS // 2, D), "float32", name="kv"),
        vv=pl.alloc("Vec", (ROWS // 2, D), "float32", name="vv"),
        hv=pl.alloc("Vec", (ROWS // 2, D), "float16", name="hv"),
    )


def _sync(src, dst, event_id=0):
    pl.system.sync_src(set_pipe=src, wait_pipe=dst, event_id=event_id)
    pl.system.sync_dst(set_pipe=src, wait_pipe=dst, event_id=event_id)


def _cube_matmul(t, a_gm, a_row, w_row, out_gm, out_row, before_store=None):
    """out[out_row:+ROWS] = a[a_row:+ROWS] @ w[w_row:+D], each step ordered after the one before."""
    pl.load(t["a_mat"], a_gm, (a_row, 0))
    pl.load(t["w_mat"], "w", (w_row, 0))
    _sync(PIPE.MTE2, PIPE.MTE1)
    pl.move(t["left"], t["a_mat"])
    pl.move(t["right"], t["w_mat"])
    _sync(PIPE.MTE1, PIPE.MTE2)  # L1 read: the next load may overwrite it
    _sync(PIPE.MTE1, PIPE.M)
    pl.matmul(t["acc"], t["left"], t["right"], phase=pl.AccPhase.Final)
    _sync(PIPE.M, PIPE.MTE1)  # L0A/L0B read: the next move may overwrite them
    if before_store is not None:
        before_store()
    pl.store(out_gm, t["acc"], (out_row, 0), phase=pl.STPhase.Final)


def _cube_chunk(t, c, variant):
    v_ready = K_READY if variant == "shared_id" else V_READY
    ws_free = lambda: pl.system.wait_cross_core(pipe=PIPE.FIX, event_id=WS_FREE, when=c > 0)  # noqa: E731
    _cube_matmul(t, "k", c * ROWS, 0, "ws_k", 0, before_store=ws_free)
    pl.system.set_cross_core(pipe=PIPE.FIX, event_id=K_READY)
    _cube_matmul(t, "v", c * ROWS, D, "ws_v", 0)
    pl.system.set_cross_core(pipe=PIPE.FIX, event_id=v_ready)
    pl.system.wait_cross_core(pipe=PIPE.MTE2, event_id=H_READY)
    _cube_matmul(t, "ws_h", 0, 2 * D, "out", c * ROWS)


def _vector_chunk(t, sub, variant):
    v_ready = K_READY if variant == "shared_id" else V_READY
    half = sub * (ROWS // 2)
    kv, vv, hv = t["kv"], t["vv"], t["hv"]
    pl.system.wait_cross_core(pipe=PIPE.MTE2, event_id=K_READY)
    pl.load(kv, "ws_k", (half, 0))
    pl.system.wait_cross_core(pipe=PIPE.MTE2, event_id=v_ready)
    pl.load(vv, "ws_v", (half, 0))
    pl.system.set_cross_core(pipe=PIPE.MTE2, event_id=WS_FREE)  # after the last read of ws_k / ws_v
    _sync(PIPE.MTE2, PIPE.V)
    pl.relu(kv, kv)
    pl.mul(kv, kv, vv)
    pl.cast(hv, kv)
    _sync(PIPE.V, PIPE.MTE3)
    pl.store("ws_h", hv, (half, 0))
    pl.system.set_cross_core(pipe=PIPE.MTE3, event_id=H_READY)
    _sync(PIPE.MTE3, PIPE.MTE2)  # hv stored and kv/vv free before the next chunk's loads


def _cube_epilogue(chunks):
    if chunks:
        pl.system.wait_cross_core(pipe=PIPE.FIX, event_id=WS_FREE)


def kda_kernel(k: aj.Program, chunks: int = CHUNKS, variant: str = "ok"):
    """Hand-interleaved: per chunk the cube's K and V matmuls, both AIVs, then the cube's output matmul."""
    t = _tiles()
    with k.cube():
        k.set_mmad_direction("n")

    @pl.range(chunks)
    def _(c):
        v_ready = K_READY if variant == "shared_id" else V_READY
        with k.cube():
            ws_free = lambda: pl.system.wait_cross_core(pipe=PIPE.FIX, event_id=WS_FREE, when=c > 0)  # noqa: E731
            _cube_matmul(t, "k", c * ROWS, 0, "ws_k", 0, before_store=ws_free)
            pl.system.set_cross_core(pipe=PIPE.FIX, event_id=K_READY)
            _cube_matmul(t, "v", c * ROWS, D, "ws_v", 0)
            pl.system.set_cross_core(pipe=PIPE.FIX, event_id=v_ready)
        pl.section_vector(lambda sub: _vector_chunk(t, sub, variant))
        with k.cube():
            pl.system.wait_cross_core(pipe=PIPE.MTE2, event_id=H_READY)
            _cube_matmul(t, "ws_h", 0, 2 * D, "out", c * ROWS)

    with k.cube():
        _cube_epilogue(chunks)


def kda_sections_kernel(k: aj.Program, chunks: int = CHUNKS, variant: str = "ok"):
    """A cube section and a vector section, each looping over the chunks, run concurrently."""
    t = _tiles()

    @pl.section_cube
    def _():
        k.set_mmad_direction("n")
        pl.range(chunks)(lambda c: _cube_chunk(t, c, variant))
        _cube_epilogue(chunks)

    @pl.section_vector
    def _(sub):
        pl.range(chunks)(lambda c: _vector_chunk(t, sub, variant))


def reference(x, chunks=CHUNKS):
    w = x["w"].astype(np.float64)
    outs = []
    for c in range(chunks):
        kc = x["k"][c * ROWS : (c + 1) * ROWS].astype(np.float64) @ w[:D]
        vc = x["v"][c * ROWS : (c + 1) * ROWS].astype(np.float64) @ w[D : 2 * D]
        h = (np.maximum(kc.astype(np.float32), 0) * vc.astype(np.float32)).astype(np.float16)
        outs.append(h.astype(np.float64) @ w[2 * D :])
    return {"out": np.concatenate(outs)}


def _case(variant="ok", expect=aj.Verdict.OK, kernel=kda_kernel) -> aj.Case:
    rng = np.random.default_rng(5)
    return aj.Case(
        kernel=kernel,
        inputs={
            "k": rng.uniform(-1, 1, (CHUNKS * ROWS, D)).astype(np.float16),
            "v": rng.uniform(-1, 1, (CHUNKS * ROWS, D)).astype(np.float16),
            "w": rng.uniform(-0.5, 0.5, (3 * D, D)).astype(np.float16),
        },
        outputs={
            "ws_k": ((ROWS, D), "float32"),
            "ws_v": ((ROWS, D), "float32"),
            "ws_h": ((ROWS, D), "float16"),
            "out": ((CHUNKS * ROWS, D), "float32"),
        },
        params={"variant": variant},
        reference=reference if expect is aj.Verdict.OK else None,
        atol=2e-3,
        expect=expect,
        chip="950",
    )


@aj.case
def kda_chunk_h():
    """Four channels on four event ids (K ready, V ready, h ready, workspaces free) in one chunk loop -> ok."""
    return _case()


@aj.case
def kda_shared_id():
    """Channel 1 reuses event 0: the cube sets it again before the AIVs consumed it -> sync_error."""
    return _case("shared_id", aj.Verdict.SYNC_ERROR)


@aj.case
def kda_sections():
    """The chunk loop as a cube section and a vector section running concurrently -> ok."""
    return _case(kernel=kda_sections_kernel)


@aj.case
def kda_sections_shared_id():
    """Two sections, channel 1 reuses event 0 -> sync_error."""
    return _case("shared_id", aj.Verdict.SYNC_ERROR, kernel=kda_sections_kernel)
