"""Flash attention forward, as a cube section and a vector section that run concurrently.

The structure of PyPTO-Pro's ``test_fa_bnsd_dn.py`` (and seed 000's flash-attention section),
for one block of ``2 * HALF_Q`` queries:

- **Cube.** ``QK(t)``: ``Sᵀ = K_t · Qᵀ`` (keys x queries), K-split over the head dim with
  ``AccPhase.Partial`` ... ``Final``, then ``move`` L0C -> UB with ``DualModeSplitN`` and
  ``STPhase.Final``: each AIV receives all keys of *its* half of the queries. Set QK_READY on
  FIX. ``PV(t)``: wait P_READY on MTE1, ``O_t = P_t · V_t`` (P from L1, which holds Pᵀ), ``move``
  to UB with ``DualModeSplitM`` (each AIV gets the rows of its queries), set PV_READY on FIX.
- **Vector** (both AIVs). ``P(t)``: wait QK_READY on V; the online softmax on the ``Sᵀ`` tile
  with column statistics (running max ``m``, sum ``l``, rescale ``alpha = exp(m_old - m)``),
  ``cast`` P to the input dtype, ``insert`` it into L1 at column ``HALF_Q * sub``, set P_READY on
  MTE3. ``GU(t)``: wait PV_READY on V, ``O = O * alpha + O_t``. At the end ``O / l``, cast, store.
- **Software pipeline.** Each section runs one ``pl.range(n_tiles + 1)``: the cube does
  ``QK(j)`` then ``PV(j - 1)``, the vector ``P(j)`` then ``GU(j - 1)``; the first and last
  iterations skip their out-of-range stage (``k.cond`` and ``wait_cross_core(when=...)``). So
  the cube's next ``QK`` overlaps the vector's softmax, and every stage is traced once: compile
  time does not grow with sequence length.
- **Ping-pong.** Scores (UB), P (L1), O_t (UB) and alpha live in depth-2 TileGroups, slot
  ``t % 2``, with a 2-deep FIFO of cross-core ids per handshake: QK_READY 0/1, P_READY 2/3,
  PV_READY 4/5. Each READY is also a RELEASE: P_READY(t) says the AIVs are done with scores
  slot ``t % 2`` (the cube's ``QK(t + 2)`` rewrites it only after waiting for P_READY(t));
  PV_READY(t) says the cube has read P slot ``t % 2``, which ``P(t + 2)`` rewrites.
- **Sequence tails.** Key lengths that are not a multiple of the KV tile are padded; the padded
  keys get a ``-inf`` additive mask (GM ``kv_mask``, one value per key) before the softmax.
- **Blocks.** Under ``ascjax.launch`` block ``b`` takes query tile ``b % q_tiles`` of head
  ``b // q_tiles``.

Broken twins (``variant``, a traced code, so all four run as one compiled ``vmap``): the cube
skips its P_READY wait, the RELEASE of P (race on L1), the cube never sets QK_READY
(deadlock), and after the first tile the AIVs read scores slot ``(t - 1) % 2`` for event
``t % 2`` (race on UB).
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

import ascjax as aj
from ascjax import pl

PIPE = pl.PipeType
QK_READY, P_READY, PV_READY = 0, 2, 4  # 2-deep id FIFOs: base + slot
OK, NO_RELEASE_WAIT, NO_READY_SET, SLOT_MISMATCH = range(4)
TILE_D = 32  # K-split of QK over the head dim: Partial ... Final
VARIANTS = ("ok", "no_release_wait", "no_ready_set", "slot_mismatch")  # codes 0..3; traced codes vmap


def _sync(src, dst, event_id=0):
    pl.system.sync_src(set_pipe=src, wait_pipe=dst, event_id=event_id)
    pl.system.sync_dst(set_pipe=src, wait_pipe=dst, event_id=event_id)


def _tiles(dtype, half_q, tile_kv, head_dim):
    q_rows, splits = 2 * half_q, head_dim // TILE_D
    return dict(
        q_mat=pl.alloc("Mat", (q_rows, head_dim), dtype, name="q_mat"),
        k_mat=pl.alloc("Mat", (tile_kv, head_dim), dtype, name="k_mat"),
        v_mat=pl.alloc("Mat", (tile_kv, head_dim), dtype, name="v_mat"),
        p_t=pl.make_tile_group("Mat", (tile_kv, q_rows), dtype, depth=2, name="p_t"),
        k_left=[pl.alloc("Left", (tile_kv, TILE_D), dtype, name=f"k_left{i}") for i in range(splits)],
        q_right=[pl.alloc("Right", (TILE_D, q_rows), dtype, name=f"q_right{i}") for i in range(splits)],
        p_left=pl.alloc("Left", (q_rows, tile_kv), dtype, name="p_left"),
        v_right=pl.alloc("Right", (tile_kv, head_dim), dtype, name="v_right"),
        s_acc=pl.alloc("Acc", (tile_kv, q_rows), "float32", name="s_acc"),
        o_acc=pl.alloc("Acc", (q_rows, head_dim), "float32", name="o_acc"),
        # UB of each AIV: its half of the queries
        s=pl.make_tile_group("Vec", (tile_kv, half_q), "float32", depth=2, name="s"),
        o_t=pl.make_tile_group("Vec", (half_q, head_dim), "float32", depth=2, name="o_t"),
        alpha=pl.make_tile_group("Vec", (1, half_q), "float32", depth=2, name="alpha"),
        work=pl.alloc("Vec", (tile_kv, half_q), "float32", name="work"),
        p16=pl.alloc("Vec", (tile_kv, half_q), dtype, name="p16"),
        mask=pl.alloc("Vec", (tile_kv, 1), "float32", name="mask"),
        m=pl.alloc("Vec", (1, half_q), "float32", name="m"),
        m_new=pl.alloc("Vec", (1, half_q), "float32", name="m_new"),
        l=pl.alloc("Vec", (1, half_q), "float32", name="l"),
        stat=pl.alloc("Vec", (1, half_q), "float32", name="stat"),
        column=pl.alloc("Vec", (half_q, 1), "float32", name="column"),
        o=pl.alloc("Vec", (half_q, head_dim), "float32", name="o"),
        out16=pl.alloc("Vec", (half_q, head_dim), dtype, name="out16"),
    )


# -- cube ------------------------------------------------------------------------------
def _cube_prologue(k, t, q_row):
    pl.load(t["q_mat"], "q", (q_row, 0))
    _sync(PIPE.MTE2, PIPE.MTE1)
    for i, right in enumerate(t["q_right"]):  # Qᵀ stays in L0B for the whole loop
        pl.move(right, t["q_mat"], (0, i * TILE_D), transpose=True)
    k.set_mmad_direction("n")  # the moves to UB convert Nz -> ND: they read along N


def _qk(t, kv_row, j, variant):
    """Sᵀ_j = K_j · Qᵀ into scores slot j % 2 of both AIVs."""
    slot = j % 2
    pl.load(t["k_mat"], "k", (kv_row + j * t["k_mat"].rows, 0))
    _sync(PIPE.MTE2, PIPE.MTE1)
    for i, left in enumerate(t["k_left"]):
        pl.move(left, t["k_mat"], (0, i * TILE_D))
    _sync(PIPE.MTE1, PIPE.MTE2, 1)  # k_mat read: the next load may overwrite it
    _sync(PIPE.MTE1, PIPE.M)
    last = len(t["k_left"]) - 1
    acc = t["s_acc"]
    small = (acc.rows // 16) * (acc.cols // 16) < 10
    for i, (left, right) in enumerate(zip(t["k_left"], t["q_right"])):
        phase = pl.AccPhase.Final if i == last else pl.AccPhase.Partial
        if i == 0:
            pl.matmul(t["s_acc"], left, right, phase=phase)
        else:
            if small:  # the cube may overlap accumulating mmads on fewer than 10 fractals
                pl.system.bar_m()
            pl.matmul_acc(t["s_acc"], t["s_acc"], left, right, phase=phase)
    _sync(PIPE.M, PIPE.MTE1)  # k_left read: the next moves may overwrite it
    pl.move(t["s"][slot], t["s_acc"], acc_to_vec_mode=pl.AccToVecMode.DualModeSplitN, phase=pl.STPhase.Final)
    pl.system.set_cross_core(pipe=PIPE.FIX, event_id=QK_READY + slot, when=variant != NO_READY_SET)


def _pv(k, t, kv_row, j, variant, when):
    """O_j = P_j · V_j into O_t slot j % 2 of both AIVs (rows split by query)."""
    slot = j % 2
    k.cond(when, lambda: pl.load(t["v_mat"], "v", (kv_row + j * t["v_mat"].rows, 0)))  # ahead of the wait
    release = when & (variant != NO_RELEASE_WAIT)
    pl.system.wait_cross_core(pipe=PIPE.MTE1, event_id=P_READY + slot, when=release)

    def body():
        _sync(PIPE.MTE2, PIPE.MTE1)
        pl.move(t["p_left"], t["p_t"][slot], transpose=True)  # L1 holds Pᵀ
        pl.move(t["v_right"], t["v_mat"])
        _sync(PIPE.MTE1, PIPE.MTE2, 1)  # v_mat read
        _sync(PIPE.MTE1, PIPE.M)
        pl.matmul(t["o_acc"], t["p_left"], t["v_right"], phase=pl.AccPhase.Final)
        _sync(PIPE.M, PIPE.MTE1)
        pl.move(t["o_t"][slot], t["o_acc"], acc_to_vec_mode=pl.AccToVecMode.DualModeSplitM, phase=pl.STPhase.Final)
        pl.system.set_cross_core(pipe=PIPE.FIX, event_id=PV_READY + slot)

    k.cond(when, body)


# -- vector ----------------------------------------------------------------------------
def _vector_prologue(t):
    pl.fill(t["m"], -np.inf)
    pl.fill(t["l"], 0.0)
    pl.fill(t["o"], 0.0)


def _softmax(k, t, sub, kv_row, j, scale, variant, when):
    """P(j): the online-softmax step on this AIV's columns of Sᵀ_j, P inserted into L1."""
    slot = j % 2
    read = jnp.where((variant == SLOT_MISMATCH) & (j >= 1), (j - 1) % 2, slot)  # the twin's stale index

    def load_mask():  # needs no event: it goes ahead of the wait
        _sync(PIPE.V, PIPE.MTE2)  # the mask tile was read by the previous tile's V ops
        pl.load(t["mask"], "kv_mask", (j * t["mask"].rows, 0))  # one mask for every head
        _sync(PIPE.MTE2, PIPE.V)

    k.cond(when, load_mask)
    pl.system.wait_cross_core(pipe=PIPE.V, event_id=QK_READY + slot, when=when)

    def body():
        s, work, stat = t["s"][read], t["work"], t["stat"]
        pl.mul(work, s, scale)
        pl.expand_add(work, work, t["mask"], dim=0)  # -inf on padded keys
        pl.maximum(stat, work, dim=1)
        pl.maximum(t["m_new"], t["m"], stat)
        pl.sub(stat, t["m"], t["m_new"])
        pl.exp(t["alpha"][slot], stat)  # alpha = exp(m_old - m_new)
        pl.move(t["m"], t["m_new"])
        pl.expand_sub(work, work, t["m"], dim=1)
        pl.exp(work, work)
        pl.sum(stat, work, dim=1)
        pl.mul(t["l"], t["l"], t["alpha"][slot])
        pl.add(t["l"], t["l"], stat)
        _sync(PIPE.MTE3, PIPE.V)  # p16 was read by the previous insert
        pl.cast(t["p16"], work, mode=pl.RoundMode.CAST_RINT)
        _sync(PIPE.V, PIPE.MTE3)
        pl.insert(t["p_t"][slot], t["p16"], (0, sub * t["p16"].cols))
        pl.system.set_cross_core(pipe=PIPE.MTE3, event_id=P_READY + slot)

    k.cond(when, body)


def _update(k, t, j, when):
    """GU(j): O = O * alpha_j + O_j on this AIV's rows."""
    slot = j % 2
    pl.system.wait_cross_core(pipe=PIPE.V, event_id=PV_READY + slot, when=when)

    def body():
        pl.move(t["column"], t["alpha"][slot])  # [1, q] row -> [q, 1] column (DN view)
        pl.expand_mul(t["o"], t["o"], t["column"], dim=0)
        pl.add(t["o"], t["o"], t["o_t"][slot])

    k.cond(when, body)


def _vector_epilogue(t, sub, q_row):
    pl.move(t["column"], t["l"])
    pl.expand_div(t["o"], t["o"], t["column"], dim=0)
    pl.cast(t["out16"], t["o"], mode=pl.RoundMode.CAST_RINT)
    _sync(PIPE.V, PIPE.MTE3)
    pl.store("out", t["out16"], (q_row + sub * t["out16"].rows, 0))


def flash_attention_kernel(
    k: aj.Program,
    *,
    n_tiles: int,
    q_tiles: int = 1,
    half_q: int = 32,
    tile_kv: int = 64,
    head_dim: int = 64,
    dtype: str = "float16",
    variant=OK,
):
    """One block: ``2 * half_q`` queries against ``n_tiles`` KV tiles of ``tile_kv`` keys.

    Launched on several blocks, block ``b`` takes query tile ``b % q_tiles`` of head
    ``b // q_tiles``: Q and the output hold ``q_tiles * 2 * half_q`` rows per head, K and V
    ``n_tiles * tile_kv``.
    """
    if isinstance(variant, str):
        if variant not in VARIANTS:
            raise ValueError(f"flash attention variant {variant!r}: expected one of {VARIANTS}")
        variant = VARIANTS.index(variant)
    if head_dim % TILE_D:
        raise ValueError(f"head_dim {head_dim} must be a multiple of the K-split {TILE_D}")
    t = _tiles(dtype, half_q, tile_kv, head_dim)
    scale = 1.0 / math.sqrt(head_dim)
    head, q_tile = k.block_idx // q_tiles, k.block_idx % q_tiles
    q_row = (head * q_tiles + q_tile) * 2 * half_q
    kv_row = head * n_tiles * tile_kv

    @pl.section_cube
    def _():
        _cube_prologue(k, t, q_row)

        @pl.range(n_tiles + 1)  # software pipeline: QK(j) with PV(j - 1)
        def _(j):
            k.cond(j < n_tiles, lambda: _qk(t, kv_row, j, variant))
            _pv(k, t, kv_row, j - 1, variant, j >= 1)

    @pl.section_vector
    def _(sub):
        _vector_prologue(t)

        @pl.range(n_tiles + 1)  # P(j) with GU(j - 1)
        def _(j):
            _softmax(k, t, sub, kv_row, j, scale, variant, j < n_tiles)
            _update(k, t, j - 1, j >= 1)

        _vector_epilogue(t, sub, q_row)


# -- host side -------------------------------------------------------------------------
def padded(n: int, tile: int) -> int:
    return -(-n // tile) * tile


def inputs(seq_q, seq_kv, head_dim, dtype="float16", *, heads=1, half_q=32, tile_kv=64, seed=0):
    """Random Q, K, V for ``heads`` heads, each padded to whole tiles and stacked along rows, and
    the key mask (0 on valid keys, -inf on padding)."""
    rng = np.random.default_rng(seed)
    np_dtype = aj.core.to_numpy_dtype(dtype)
    sq, skv = padded(seq_q, 2 * half_q), padded(seq_kv, tile_kv)
    q = np.zeros((heads, sq, head_dim), np.float32)
    kk = np.zeros((heads, skv, head_dim), np.float32)
    v = np.zeros((heads, skv, head_dim), np.float32)
    q[:, :seq_q] = rng.standard_normal((heads, seq_q, head_dim))
    kk[:, :seq_kv] = rng.standard_normal((heads, seq_kv, head_dim))
    v[:, :seq_kv] = rng.standard_normal((heads, seq_kv, head_dim))
    mask = np.where(np.arange(skv) < seq_kv, 0.0, -np.inf).astype(np.float32)[:, None]
    flat = lambda a: a.reshape(-1, head_dim).astype(np_dtype)  # noqa: E731
    return {"q": flat(q), "k": flat(kk), "v": flat(v), "kv_mask": mask}


def reference(x, seq_kv, heads=1):
    """float64 softmax(Q Kᵀ / sqrt(d)) V per head over the valid keys (padded query rows too)."""
    d = x["q"].shape[1]
    q, kk, v = (np.asarray(x[n]).astype(np.float64).reshape(heads, -1, d) for n in ("q", "k", "v"))
    s = q @ kk[:, :seq_kv].transpose(0, 2, 1) / math.sqrt(d)
    p = np.exp(s - s.max(axis=2, keepdims=True))
    return {"out": ((p / p.sum(axis=2, keepdims=True)) @ v[:, :seq_kv]).reshape(-1, d)}


def params(seq_q, seq_kv, head_dim, dtype="float16", *, half_q=32, tile_kv=64, variant=OK):
    """Kernel parameters for these lengths."""
    return dict(
        n_tiles=padded(seq_kv, tile_kv) // tile_kv,
        q_tiles=padded(seq_q, 2 * half_q) // (2 * half_q),
        half_q=half_q,
        tile_kv=tile_kv,
        head_dim=head_dim,
        dtype=dtype,
        variant=variant,
    )


#: Documented tolerances against the float64 reference (output rounded to the input dtype).
ATOL = {"float16": 2e-3, "bfloat16": 2e-2}


def _case(seq_q, seq_kv, head_dim, dtype, *, variant="ok", expect=aj.Verdict.OK, seed=0, **tiles) -> aj.Case:
    x = inputs(seq_q, seq_kv, head_dim, dtype, seed=seed, **tiles)
    return aj.Case(
        kernel=flash_attention_kernel,
        inputs=x,
        outputs={"out": (x["q"].shape, dtype)},
        params=params(seq_q, seq_kv, head_dim, dtype, variant=variant, **tiles),
        reference=(lambda x: reference(x, seq_kv)) if expect is aj.Verdict.OK else None,
        atol=ATOL[dtype],
        expect=expect,
        chip="950",
    )


@aj.case
def f16_s187_d64(seed=0):
    """f16, 64 queries x 187 keys (3 KV tiles, the last padded), head dim 64 -> ok."""
    return _case(64, 187, 64, "float16", seed=seed)


@aj.case
def bf16_s256_d128(seed=0):
    """bf16, 64 queries x 256 keys (4 whole KV tiles), head dim 128 -> ok."""
    return _case(64, 256, 128, "bfloat16", seed=seed)


@aj.case
def no_release_wait(seed=0):
    """The cube reads P from L1 without waiting for the AIVs' P_READY -> race."""
    return _case(64, 187, 64, "float16", variant="no_release_wait", expect=aj.Verdict.RACE, seed=seed)


@aj.case
def no_ready_set(seed=0):
    """The cube never sets QK_READY: both AIVs wait forever -> deadlock."""
    return _case(64, 187, 64, "float16", variant="no_ready_set", expect=aj.Verdict.DEADLOCK, seed=seed)


@aj.case
def slot_mismatch(seed=0):
    """The AIVs read scores slot (t - 1) % 2 for event t % 2 after the first tile -> race."""
    return _case(64, 187, 64, "float16", variant="slot_mismatch", expect=aj.Verdict.RACE, seed=seed)
