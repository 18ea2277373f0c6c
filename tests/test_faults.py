"""Traced operands that break their instruction's rule are control-plane findings (``engine.Fault``): a size
past its tiles, an offset past its tensor or off its fractal grid, the GEMV layout, a trip count past its loop's
maximum. Each names the operand, its value and its limit at the user's line; the faulting issue accesses
nothing; its in-range twin is clean; ``run`` gives ``check``'s verdict; under ``vmap`` each scenario gets its own."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ascjax as aj
from ascjax.core import Finding
from ascjax.engine import verdict

X = np.arange(16 * 16, dtype=np.float32).reshape(16, 16)
IO = ({"x": X}, {"y": ((16, 16), "float32")})


def _round_trip(k, row=0, col=0, trips=1):
    """AIV0 loads an 8 x 16 window of x at (row, col) and stores it at the same place of y, ``trips`` times."""
    ub = k.alloc("UB", (8, 16), "float32")
    with k.vector(0):

        def body(i):
            k.copy_gm2ub(ub, "x", row=row, col=col)
            k.sync_notify("MTE2", "MTE3", 0)
            k.sync_wait("MTE2", "MTE3", 0)
            k.copy_ub2gm("y", ub, row=row, col=col)
            k.sync_notify("MTE3", "MTE2", 0)
            k.sync_wait("MTE3", "MTE2", 0)

        k.range(2, body, count=trips)


def _mmad(k, m=16, k_size=32, a_fmt="Zz"):
    a = k.alloc("L0A", (16, 32), "float16", fmt=a_fmt, name="a")
    b = k.alloc("L0B", (32, 16), "float16", name="b")
    c = k.alloc("L0C", (16, 16), "float32", name="c")
    k.mmad(c, a, b, m, k_size, 16, c_matrix_init_val=True)


#: every parameter of each kernel, traced: one compile per kernel serves every scenario below
DEFAULTS = {"_round_trip": {"row": 0, "col": 0, "trips": 1}, "_mmad": {"m": 16, "k_size": 32}}


def _traced(kernel, params):
    return {k: jnp.int32(v) for k, v in {**DEFAULTS.get(kernel.__name__, {}), **params}.items()}


def _check(kernel, io=IO, **params):
    return aj.check(kernel, *io, params=_traced(kernel, params))


@pytest.mark.parametrize(
    ("params", "words"),
    [
        (
            {"row": 9},
            "copy_gm2ub at tests/test_faults.py:27 (AIV0.MTE2) in loop iteration (0): row offset = 9 is outside [0, 8]",
        ),
        ({"row": -1}, "row offset = -1 is outside [0, 8]"),
        ({"col": 1}, "column offset = 1 is outside [0, 0]"),
        ({"trips": 3}, "range at tests/test_faults.py:34 (AIV0.S): trip count = 3 is outside [0, 2]"),
    ],
    ids=["row-past", "row-negative", "col-past", "trips-past"],
)
def test_a_traced_offset_or_trip_count_past_its_limit_is_a_bounds_finding_and_its_twin_is_clean(params, words):
    found = _check(_round_trip, **params)
    assert found.verdict is aj.Verdict.BOUNDS, str(found)
    assert words in found.findings[0].message, found.findings[0].message
    assert _check(_round_trip, row=8).verdict is aj.Verdict.OK


def test_both_copies_are_found_in_one_run_and_neither_accesses_anything():
    """The load and the store both fault: two findings, no uninitialised read of the UB the load left unwritten,
    and the data plane leaves y as it was."""
    found = _check(_round_trip, row=9)
    assert [(f.kind, f.site.split(" at ")[0]) for f in found.findings] == [
        (Finding.BOUNDS, "copy_gm2ub"),
        (Finding.BOUNDS, "copy_ub2gm"),
    ]
    ran = aj.run(_round_trip, *IO, params=_traced(_round_trip, {"row": 9}))
    assert not np.any(np.asarray(ran.outputs["y"]))
    good = aj.run(_round_trip, *IO, params=_traced(_round_trip, {"row": 8}))
    np.testing.assert_array_equal(np.asarray(good.outputs["y"])[8:], X[8:])


def test_mmad_sizes_past_their_tiles_are_bounds_and_m_1_on_a_fractal_a_is_layout():
    over = _check(_mmad, io=({}, {}), m=17)
    assert over.verdict is aj.Verdict.BOUNDS and "m = 17 is outside [0, 16]" in str(over), str(over)
    assert "k = 33 is outside [0, 32]" in str(_check(_mmad, io=({}, {}), k_size=33))
    gemv = _check(_mmad, io=({}, {}), m=1)
    assert gemv.verdict is aj.Verdict.LAYOUT and "m = 1 runs GEMV, which reads A as ND" in str(gemv), str(gemv)
    assert Finding.UNINITIALIZED not in {f.kind for f in gemv.findings}  # the faulting mmad read nothing
    twin = _check(_mmad, io=({}, {}), m=16)
    assert {f.kind for f in twin.findings} == {Finding.UNINITIALIZED}  # L0A was never loaded: that is all


def test_a_fixpipe_past_its_gm_output_is_bounds():
    def kernel(k, row=0):
        c = k.alloc("L0C", (16, 16), "float32", name="c")
        k.fixpipe("y", c, dst_row=row)

    inputs, outputs = {}, {"y": ((24, 16), "float32")}
    assert "row offset = 9 is outside [0, 8]" in str(_check(kernel, io=(inputs, outputs), row=9))
    assert Finding.BOUNDS not in {f.kind for f in _check(kernel, io=(inputs, outputs), row=8).findings}


def test_run_gives_checks_verdict():
    for params in ({"row": 9}, {"col": 1}, {"trips": 3}, {"row": 8}):
        ran = aj.run(_round_trip, *IO, params=_traced(_round_trip, params))
        assert aj.Verdict(int(ran.verdict)) is _check(_round_trip, **params).verdict, params


def test_each_scenario_of_a_vmap_gets_its_own_verdict():
    def one(row):
        return verdict(aj.run(_round_trip, *IO, params={**_traced(_round_trip, {}), "row": row}, jit=False).control)

    codes = jax.jit(jax.vmap(one))(jnp.asarray([0, 9, 8, -3], jnp.int32))
    assert [int(c) for c in codes] == [-1, Finding.BOUNDS, -1, Finding.BOUNDS]


def test_a_store_past_its_gm_output_is_bounds():
    def kernel(k, col=0):
        c = k.alloc("L0C", (16, 16), "float32", name="c")
        k.store("y", c, (0, col))

    io = ({}, {"y": ((16, 32), "float32")})
    assert "column offset = 17 is outside [0, 16]" in str(_check(kernel, io=io, col=17))
    assert Finding.BOUNDS not in {f.kind for f in _check(kernel, io=io, col=16).findings}


def test_an_mx_scale_window_past_its_l1_tile_or_off_its_grid_is_bounds():
    def kernel(k, row=0):
        sa1 = k.alloc("L1", (64, 2), "float8_e8m0fnu", fmt="Zz")
        sa0 = k.alloc("ScaleLeft", (32, 2), "float8_e8m0fnu")
        k.copy_l12scale(sa0, sa1, row=row)

    def found(row):
        return aj.check(kernel, {}, {}, chip="950", params={"row": jnp.int32(row)})

    assert "row offset = 48 is outside [0, 32]" in str(found(48))
    assert "row offset = 8 is not a multiple of its tile's fractal" in str(found(8))
    assert Finding.BOUNDS not in {f.kind for f in found(16).findings}
