"""The instruction record: a loop recorded as a ``lax.scan`` that also computes data gives the record an
array loop gives, and the control plane reads both alike."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ascjax.core import AIV0, Finding
from ascjax.engine import UF_KEEP, UF_UPDATE, RecordBuilder, UnitFlagRole, run_control, verdict

TILE = 64 * 64 * 4
BLOCKS = [(0, TILE // 512)]


def _spaces(b):
    gm = b.space("GM:a", 8 * 8192, initialised=True)
    return gm, b.space("L1:a", 8192), b.space("L0C:c", TILE), b.space("GM:c", TILE)


def _body(b, spaces, i, trip, mode_last):
    gm, l1, l0c, out = spaces
    windows = [(k * 8192, (k + 1) * 8192) for k in range(8)]
    b.wait_flag("M", "MTE2", 0)
    b.instruction("copy_gm2l1", "MTE2", reads=[(gm, windows, i)], writes=[(l1, (0, 8192))], cycles=90)
    b.set_flag("MTE2", "M", 0)
    b.wait_flag("MTE2", "M", 0)
    mode = jnp.where(i == trip - 1, mode_last, UF_KEEP)
    b.instruction(
        "mmad", "M", reads=[(l1, (0, 8192)), (l0c, [(0, TILE)], 0, i > 0)], writes=[(l0c, (0, TILE))],
        uf_role=UnitFlagRole.WRITER, uf_mode=mode, uf_blocks=BLOCKS, accumulate=i > 0, cycles=64,
    )  # fmt: skip
    b.set_flag("M", "FIX", 1, enable=False)  # a disabled pair: not in the program
    b.wait_flag("M", "FIX", 1, enable=False)
    b.barrier("M")
    b.set_flag("M", "MTE2", 0)  # RELEASE of L1 back to MTE2


def _tail(b, spaces):
    _, _, l0c, out = spaces
    b.instruction(
        "fixpipe", "FIX", reads=[(l0c, (0, TILE))], writes=[(out, (0, TILE))],
        uf_role=UnitFlagRole.READER, uf_mode=UF_UPDATE, uf_blocks=BLOCKS, cycles=80,
    )  # fmt: skip


def by_loop(trip, mode_last=UF_UPDATE):
    b = RecordBuilder()
    spaces = _spaces(b)
    b.set_flag("M", "MTE2", 0)
    with b.loop(8, trip) as i:
        _body(b, spaces, i, trip, mode_last)
    b.wait_flag("M", "MTE2", 0)
    _tail(b, spaces)
    return b.build()


def by_scan(trip, mode_last=UF_UPDATE):
    b = RecordBuilder()
    spaces = _spaces(b)
    b.set_flag("M", "MTE2", 0)

    def body(total, i):
        _body(b, spaces, i, trip, mode_last)
        return total + i

    total = b.scan(body, jnp.asarray(0, jnp.int32), 8, trip)
    b.wait_flag("M", "MTE2", 0)
    _tail(b, spaces)
    return b.build(), total


@pytest.mark.parametrize("trip", [1, 5, 8])
def test_a_scan_loop_records_what_an_array_loop_records(trip):
    ref = by_loop(jnp.asarray(trip))
    rec, total = by_scan(jnp.asarray(trip))
    for field in ("entry", "iteration", "core", "queue", "pidx", "sync", "qlist", "read_foot", "read_traced"):
        np.testing.assert_array_equal(getattr(rec.template, field), getattr(ref.template, field), err_msg=field)
    assert rec.template.entries == ref.template.entries and rec.template.flag_bits == ref.template.flag_bits
    assert sorted(rec.operands) == sorted(ref.operands)
    for name, value in ref.operands.items():
        np.testing.assert_array_equal(np.asarray(rec.operands[name]), np.asarray(value), err_msg=name)
    assert int(total) == sum(range(trip))  # the disabled iterations leave the carry alone
    assert int(verdict(run_control(rec))) == int(verdict(run_control(ref))) == -1


def test_a_scan_loop_under_jit_and_vmap_gives_each_scenario_its_verdict():
    def verdict_of(trip, mode_last):
        rec, total = by_scan(trip, mode_last)
        return verdict(run_control(rec)), total

    trips, modes = jnp.asarray([8, 3, 8]), jnp.asarray([UF_UPDATE, UF_UPDATE, UF_KEEP])
    got, totals = jax.jit(jax.vmap(verdict_of))(trips, modes)
    assert [int(v) for v in got] == [-1, -1, int(Finding.DEADLOCK)]  # the last keeps the flag: fixpipe waits
    assert [int(t) for t in totals] == [28, 3, 28]


def test_scans_nest_and_their_operands_stack_in_loop_order():
    b = RecordBuilder()
    ub = b.space("UB0", 4096, initialised=True)

    def inner(c, j):
        b.instruction("vadd", "V", reads=[(ub, (0, 256))], cycles=c + j)
        return c

    def outer(c, i):
        b.scan(inner, 10 * i, 3)
        return c

    with b.on(AIV0):
        b.scan(outer, 0, 2)
    rec = b.build()
    assert rec.template.iteration[:, :2].tolist() == [[i, j] for i in range(2) for j in range(3)]
    assert np.asarray(rec.operands["cycles"]).tolist() == [0, 1, 2, 10, 11, 12]


def test_array_loops_and_scans_do_not_mix():
    b = RecordBuilder()
    with pytest.raises(ValueError, match="cannot be recorded inside a scan body"):
        b.scan(lambda c, i: b.loop(2).__enter__(), 0, 2)
    b = RecordBuilder()
    with b.loop(2), pytest.raises(ValueError, match="scan cannot be recorded inside an array loop"):
        b.scan(lambda c, i: c, 0, 2)
