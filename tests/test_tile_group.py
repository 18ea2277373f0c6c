"""TileGroups (``make_tile_group``): slot placement, the per-core cursor (``next``/``current``/``previous``),
``group[i]`` bounds (traced: BOUNDS verdict, static: IndexError), ping-pong in a loop, and slot-precise races."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ascjax as aj
from ascjax import AccPhase, AccToVecMode, STPhase

F32 = "float32"
V = aj.Verdict


def trace(kernel, chip="a2", outputs=None, **params):
    """Trace ``kernel`` (trace-time checks run, nothing compiles or executes)."""
    return jax.eval_shape(lambda: aj.run(kernel, {}, outputs or {}, chip=chip, params=params))


# --- placement ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "buffer, shape, dtype, depth, stride",
    [
        ("UB", (4, 24), F32, 3, 512),  # 384 B -> one 512 B granule per slot
        ("UB", (8, 40), F32, 2, 1536),  # 1280 B -> three granules
        ("L1", (16, 16), "float16", 4, 512),  # one Nz fractal
        ("L0C", (16, 16), F32, 2, 1024),  # L0C aligns to 1024 B
    ],
)
def test_slots_are_disjoint_aligned_and_followed_by_the_next_tile(buffer, shape, dtype, depth, stride):
    seen = {}

    def kernel(k):
        k.alloc(buffer, shape, dtype, name="before")
        seen["g"] = k.tile_group(buffer, shape, dtype, depth, name="g")
        seen["after"] = k.alloc(buffer, shape, dtype, name="after")

    trace(kernel)
    g, after = seen["g"], seen["after"]
    base = g.group.tile
    chip = aj.get_chip("a2")
    assert len(g) == g.depth == depth
    assert g.group.stride_bytes == stride
    assert stride % chip.align_bytes[aj.Buffer.parse(buffer)] == 0 and stride % 512 == 0
    assert base.addr % chip.align_bytes[aj.Buffer.parse(buffer)] == 0 and base.addr >= base.nbytes  # after `before`
    slots = [(base.addr + i * stride, base.addr + i * stride + base.nbytes) for i in range(depth)]
    for (_, hi), (lo2, _) in zip(slots, slots[1:]):
        assert hi <= lo2  # no overlap
    assert after.addr >= slots[-1][0] + stride  # the next allocation starts past the whole group
    s = g.group.slot(depth - 1)
    assert int(s.slot) == depth - 1 and bool(s.ok) and s.stride_bytes == stride and s.base == base


def test_group_capacity_and_depth_rules():
    def kernel(k, depth):
        k.tile_group("UB", (64, 64), F32, depth, name="big")  # 16 KiB a slot; a2 UB has 192 KiB

    trace(kernel, depth=12)  # exactly full: fine
    with pytest.raises(ValueError, match=r"rule 'UB capacity': a depth-13 TileGroup of `big`.*has 196608 B"):
        trace(kernel, depth=13)
    trace(kernel, "950", depth=16)  # 950 UB has 256 KiB
    with pytest.raises(ValueError, match=r"rule 'UB capacity'"):
        trace(kernel, "950", depth=17)
    with pytest.raises(ValueError, match="TileGroup depth must be a positive int"):
        trace(kernel, depth=0)


def test_group_bytes_are_reserved_against_overlap():
    def kernel(k, addr):
        k.tile_group("UB", (8, 16), F32, 2, addr=0, name="g")  # bytes [0, 1024)
        k.alloc("UB", (8, 16), F32, addr=addr, name="t")

    trace(kernel, addr=1024)
    with pytest.raises(ValueError, match=r"rule 'no overlap'.*`t`.*g\[0:2\]"):
        trace(kernel, addr=512)  # inside slot 1


# --- the cursor -------------------------------------------------------------------------------
def test_cursor_next_current_previous_per_core():
    seen = []

    def kernel(k):
        g = k.tile_group("UB", (4, 16), F32, 3, name="g")

        def note(what, slot):
            seen.append((what, int(slot.slot)))

        with k.vector(0):
            note("current before next", g.current())
            note("first next", g.next())
            note("current", g.current())
            note("[2] does not move the cursor", g[2])
            note("current after [2]", g.current())
            note("second next", g.next())
            note("previous", g.previous())
            note("third next", g.next())
            note("fourth next wraps", g.next())
            note("previous of 0", g.previous())
        with k.vector(1):
            note("AIV1 first next", g.next())  # its own cursor
        with k.cube():
            note("AIC current", g.current())

    aj.run(kernel, {}, {}, jit=False, sanitize=False)
    assert seen == 2 * [
        ("current before next", 0),
        ("first next", 0),
        ("current", 0),
        ("[2] does not move the cursor", 2),
        ("current after [2]", 0),
        ("second next", 1),
        ("previous", 0),
        ("third next", 2),
        ("fourth next wraps", 0),
        ("previous of 0", 2),
        ("AIV1 first next", 0),
        ("AIC current", 0),
    ]  # the kernel is traced once per plane (the record, the data): each trace walks the cursors alike


ROWS = 4
ITERS = 4


def _ping_pong(k, release):
    """AIV0: each iteration i takes ``g.next()`` (slot i % 2), loads rows [4i, 4i+4) of x, computes 2x + i, stores.

    ``release`` (traced) guards the MTE3 -> MTE2 RELEASE flags that stop iteration i+2's load from overwriting
    the slot iteration i is still storing.
    """
    g = k.tile_group("UB", (ROWS, 16), F32, 2, name="g")
    with k.vector(0):
        for ev in (0, 1):  # pre-post one RELEASE per slot
            k.cond(release, lambda ev=ev: k.sync_notify("MTE3", "MTE2", ev))

        def body(i):
            slot = g.next()
            ev = i % 2
            k.cond(release, lambda: k.sync_wait("MTE3", "MTE2", ev))
            k.copy_gm2ub(slot, "x", row=i * ROWS)
            k.sync_notify("MTE2", "V", 0)
            k.sync_wait("MTE2", "V", 0)
            k.mul(slot, slot, 2.0)
            k.add(slot, slot, i.astype(jnp.float32))
            k.sync_notify("V", "MTE3", 0)
            k.sync_wait("V", "MTE3", 0)
            k.copy_ub2gm("out", slot, row=i * ROWS)
            k.cond(release, lambda: k.sync_notify("MTE3", "MTE2", ev))

        k.range(ITERS, body)
        for ev in (0, 1):  # drain
            k.cond(release, lambda ev=ev: k.sync_wait("MTE3", "MTE2", ev))
        k.copy_ub2gm("slots", g[0], row=0)  # what each slot holds at the end
        k.copy_ub2gm("slots", g[1], row=ROWS)


def test_ping_pong_loop_uses_slot_i_mod_2():
    x = np.random.default_rng(0).standard_normal((ITERS * ROWS, 16)).astype(np.float32)
    io = ({"x": x}, {"out": ((ITERS * ROWS, 16), F32), "slots": ((2 * ROWS, 16), F32)})
    runs = {flag: aj.run(_ping_pong, *io, params={"release": jnp.bool_(flag)}) for flag in (True, False)}
    good = runs[True]
    assert good.report().verdict is V.OK, good.report().message
    want = 2 * x + np.repeat(np.arange(ITERS, dtype=np.float32), ROWS)[:, None]
    np.testing.assert_array_equal(np.asarray(good.outputs["out"]), want)
    # slot 0 last held iteration 2, slot 1 iteration 3: the cursor alternated 0, 1, 0, 1
    np.testing.assert_array_equal(np.asarray(good.outputs["slots"]), want[2 * ROWS :])
    bad = runs[False].report()  # no RELEASE: iteration 2's load overwrites slot 0 while iteration 0 may still store it
    assert bad.verdict is V.RACE
    assert (
        bad.op == "copy_gm2ub" and "copy_gm2ub at" in bad.message and "(AIV0.MTE2) in loop iteration (2)" in bad.message
    )
    assert "RACE (WAW) on UB@AIV0 bytes [0, 256)" in bad.message  # slot 0, reloaded at i = 2
    assert "RACE (WAR) on UB@AIV0 bytes [0, 256)" in bad.message and "(AIV0.MTE3) in loop iteration (0)" in bad.message


# --- group[i] bounds ---------------------------------------------------------------------------
def _indexed(k, i):
    g = k.tile_group("UB", (4, 16), F32, 2, name="g")
    with k.vector(0):
        k.fill(g[0], 1.0)
        k.fill(g[1], 2.0)
        k.fill(g[i], 7.0)  # traced i
        k.sync_notify("V", "MTE3", 0)
        k.sync_wait("V", "MTE3", 0)
        k.copy_ub2gm("s0", g[0])
        k.copy_ub2gm("s1", g[1])


def test_traced_index_out_of_range_is_bounds_and_writes_nothing():
    idx = jnp.array([0, 1, 2, -1], jnp.int32)
    outs = {"s0": ((4, 16), F32), "s1": ((4, 16), F32)}
    result = jax.vmap(lambda i: aj.run(_indexed, {}, outs, params={"i": i}, sanitize=False))(idx)
    assert [V(int(v)) for v in result.verdict] == [V.OK, V.OK, V.BOUNDS, V.BOUNDS]
    s0 = np.asarray(result.outputs["s0"])[:, 0, 0]
    s1 = np.asarray(result.outputs["s1"])[:, 0, 0]
    assert s0.tolist() == [7.0, 1.0, 1.0, 1.0]  # index 2 is clipped to 1 and -1 to 0 for shape only: no write
    assert s1.tolist() == [2.0, 7.0, 2.0, 2.0]
    rep = result.report(2)
    assert rep.op == "fill" and "(AIV0.V) picks a slot outside TileGroup `g` (depth 2: `g[0]` .. `g[1]`)" in rep.message
    assert "a traced index is never taken modulo the depth (write `g[i % 2]`)" in rep.message


def test_static_index_out_of_range_raises():
    outs = {"s0": ((4, 16), F32), "s1": ((4, 16), F32)}
    trace(_indexed, outputs=outs, i=1)
    for bad in (2, -1):
        with pytest.raises(
            IndexError, match=rf"rule 'TileGroup index': slot {bad} of TileGroup `g` is outside \[0, 2\)"
        ):
            trace(_indexed, outputs=outs, i=bad)


# --- races are per slot ----------------------------------------------------------------------------
def _staged_operands(k):
    """16 x 16 f16 A and B from GM through L1 into L0A / L0B (on the cube), ordered by flags."""
    a1 = k.alloc("L1", (16, 16), "float16", name="a1")
    b1 = k.alloc("L1", (16, 16), "float16", name="b1")
    a0 = k.alloc("L0A", (16, 16), "float16", name="a0")
    b0 = k.alloc("L0B", (16, 16), "float16", name="b0")
    with k.cube():
        k.copy_gm2l1_nd2nz(a1, "a")
        k.copy_gm2l1_nd2nz(b1, "b")
        k.sync_notify("MTE2", "MTE1", 0)
        k.sync_wait("MTE2", "MTE1", 0)
        k.copy_l12l0a(a0, a1)
        k.copy_l12l0b(b0, b1, transpose=True)
        k.sync_notify("MTE1", "M", 0)
        k.sync_wait("MTE1", "M", 0)
    return a0, b0


def _ab(seed):
    rng = np.random.default_rng(seed)
    return {"a": rng.uniform(-1, 1, (16, 16)).astype(np.float16), "b": rng.uniform(-1, 1, (16, 16)).astype(np.float16)}


def _move_into_slot(k, w):
    """AIV0 fills slot 0 and hands the group to the cube; the cube moves C into slot ``w`` (traced) while AIV0
    reads slot 0 with no READY event."""
    g = k.tile_group("UB", (16, 16), F32, 2, name="g")
    tmp = k.alloc("UB", (16, 16), F32, name="tmp")
    a0, b0 = _staged_operands(k)
    c = k.alloc("L0C", (16, 16), F32, name="c")

    @k.section_vector
    def _(sub):
        k.fill(g[0], 1.0)
        k.set_cross_core("V", 1)  # RELEASE: the cube may write the group

    with k.cube():
        k.set_mmad_direction("n")
        k.matmul(c, a0, b0, phase=AccPhase.Final)
        k.wait_cross_core("FIX", 1)
        k.move_to_vec(g[w], c, acc_to_vec_mode=AccToVecMode.SingleModeVec0, phase=STPhase.Final)
    with k.vector(0):
        k.abs(tmp, g[0])  # no wait for a READY event


@pytest.fixture(scope="module")
def slot_runs():
    ab = _ab(1)
    return {w: aj.run(_move_into_slot, ab, {}, params={"w": jnp.int32(w)}) for w in (0, 1)}  # one compilation


def test_writing_the_slot_being_read_is_a_race(slot_runs):
    same = slot_runs[0].report()
    assert same.verdict is V.RACE
    assert same.op == "move_to_vec"  # it writes the slot the abs, unordered with it, reads
    assert "RACE (WAR) on UB@AIV0 bytes [0, 1024)" in same.message  # slot 0: the whole 16 x 16 f32 tile
    assert "abs at" in same.message and "(AIV0.V)" in same.message and "(AIC.FIX)" in same.message


def test_writing_another_slot_is_not_a_race(slot_runs):
    other = slot_runs[1].report()
    assert other.verdict is V.OK, other.message  # slot 1 written, slot 0 read: disjoint granules


# --- unit flags of an L0C TileGroup slot --------------------------------------------------------
def _l0c_slots(k, w, r):
    """mmad (UPDATE) into L0C slot ``w``, fixpipe (UPDATE) out of slot ``r``: both traced."""
    g = k.tile_group("L0C", (16, 16), F32, 2, name="acc")
    a0, b0 = _staged_operands(k)
    k.set_mmad_direction("n")
    k.mmad(g[w], a0, b0, 16, 16, 16, unit_flag_mode=AccPhase.Final, c_matrix_init_val=True)
    k.fixpipe("c", g[r], unit_flag_mode=STPhase.Final)


def test_unit_flags_hand_each_l0c_slot_over_and_order_it():
    """The slot's unit flags order the fixpipe after the mmad in either slot (no race, sanitizer on);
    reading the slot nobody wrote waits forever."""
    ab = _ab(2)
    want = ab["a"].astype(np.float64) @ ab["b"].astype(np.float64)
    runs = jax.vmap(
        lambda w, r: aj.run(_l0c_slots, ab, {"c": ((16, 16), F32)}, chip="a2", params={"w": w, "r": r}, jit=False)
    )
    got = jax.jit(runs)(jnp.array([0, 1, 0], jnp.int32), jnp.array([0, 1, 1], jnp.int32))
    assert [V(int(v)) for v in got.verdict] == [V.OK, V.OK, V.DEADLOCK]
    for i in (0, 1):
        np.testing.assert_allclose(np.asarray(got.outputs["c"][i]), want, atol=1e-3)
