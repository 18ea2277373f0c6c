"""The data plane's emit order (``engine.emit_order``) against the definition over every pair of accesses.

``emit_order`` compares a pass's accesses among themselves for the edges and searches the race check's windows for
a pair of two passes that ran against program order, so its work grows with the accesses. The definition lists
every pair of one core at once (``pair_definitions``). Random loops whose sync partly runs later instructions
first, and partly is missing, give both: edges within an iteration and pairs across iterations.
"""

from __future__ import annotations

import numpy as np
import pytest
from pair_definitions import emit_order_by_every_pair
from test_race_windows import _random_record

from ascjax.core import AIC
from ascjax.engine import ControlOptions, RecordBuilder, _order, emit_order, run_control


def _both(record, options: ControlOptions):
    result = run_control(record, options)
    reordered = tuple(int(x) for x in np.asarray(result.reordered))
    return emit_order(record, result), emit_order_by_every_pair(record, result), reordered


@pytest.mark.parametrize(("trip", "seeds"), [(3, 60), (16, 10)])
def test_the_emit_order_is_the_one_every_pair_gives(trip, seeds):
    """Random loops on a cube and a vector core, with instructions of no cycles and accesses that choose their bytes
    or happen in every other iteration, the cores' waits in the device's model and in issue order: the same ranks,
    edges and unfixable pair. Among them are loops with edges, with a pair across iterations, and with neither."""
    seen = {"edges": 0, "across": 0, "in order": 0}
    for seed in range(seeds):
        record = _random_record(seed, trip, variety=True)
        for options in (ControlOptions(), ControlOptions(wait_blocks_issue=True)):
            got, want, reordered = _both(record, options)
            assert got == want, (seed, options)
            if got is None:
                seen["in order"] += 1
                continue
            seen["edges"] += bool(got.edges)
            seen["across"] += got.unfixable not in (None, reordered)  # else no pair across passes ran reordered
    assert all(seen.values()), seen


def _unit_flag_loop(trip: int):
    """Semantics §8's unit-flag vector in a loop, with flags: mmad; mmad; fixpipe; fixpipe on one L0C tile, the second
    mmad held until the first fixpipe ran, and the next iteration's first mmad until the second fixpipe ran."""
    b = RecordBuilder()
    l0c, gm = b.space("L0C:c", 4096), b.space("GM:out", 8192)
    with b.on(AIC):
        b.set_flag("FIX", "M", 1)  # L0C starts free
    with b.loop(trip), b.on(AIC):
        b.wait_flag("FIX", "M", 1)
        b.instruction("mmad", "M", writes=[(l0c, (0, 4096))], cycles=10)
        b.set_flag("M", "FIX", 0)
        b.wait_flag("FIX", "M", 0)
        b.instruction("mmad", "M", writes=[(l0c, (0, 4096))], cycles=10)
        b.wait_flag("M", "FIX", 0)
        b.instruction("fixpipe", "FIX", reads=[(l0c, (0, 4096))], writes=[(gm, (0, 4096))], cycles=10)
        b.set_flag("FIX", "M", 0)
        b.instruction("fixpipe", "FIX", reads=[(l0c, (0, 4096))], writes=[(gm, (4096, 8192))], cycles=10)
        b.set_flag("FIX", "M", 1)
    with b.on(AIC):
        b.wait_flag("FIX", "M", 1)
    return b.build()


def test_a_long_reordering_loop_is_ordered_as_a_short_one():
    """Every iteration of the unit-flag loop reorders, and every iteration's mmads overlap every other's fixpipes: at
    4,096 iterations the definition would list about 67 million pairs. The search gives the short loop's order (the
    definition's, at 8 iterations): the first fixpipe before the second mmad, and nothing it cannot follow."""
    orders = []
    for trip in (8, 4096):
        record = _unit_flag_loop(trip)
        result = run_control(record, ControlOptions())
        assert np.asarray(result.reordered)[0] >= 0
        orders.append(emit_order(record, result))
        if trip == 8:
            assert orders[0] == emit_order_by_every_pair(record, result)
    short, long = orders
    assert long.rank == short.rank and long.unfixable is short.unfixable is None
    assert [(a, b) for a, b, _, _ in long.edges] == [(a, b) for a, b, _, _ in short.edges] != []


def _held_write(peek_cycles: int):
    """A write before a loop waits for a flag the loop's first iteration sets; the iteration first writes and reads
    the same bytes on the cube's M pipe (``stage``, then ``peek``, ``peek_cycles`` long), then on MTE1."""
    b = RecordBuilder()
    l1 = b.space("L1:buf", 1024)
    with b.on(AIC):
        b.wait_flag("MTE1", "MTE2", 0)  # set by the loop's first iteration, later in program order
        b.instruction("held", "MTE2", writes=[(l1, (0, 256))], cycles=5)
    with b.loop(2) as i, b.on(AIC):
        b.instruction("stage", "M", writes=[(l1, (0, 256))], cycles=1)
        b.instruction("peek", "M", reads=[(l1, (0, 256))], cycles=peek_cycles)
        b.instruction("fill", "MTE1", writes=[(l1, (0, 256))], cycles=3)
        b.instruction("drain", "MTE1", reads=[(l1, (0, 256))], cycles=4)
        b.set_flag("MTE1", "MTE2", 0, enable=i == 0)
    record = b.build()
    t = record.template
    named = lambda name: int(np.flatnonzero(np.asarray([t.entries[e][0] == name for e in t.entry]))[0])  # noqa: E731
    return record, named("held"), named("peek")


@pytest.mark.parametrize("walk", [1, _order.WALK_ACCESSES])
def test_a_write_held_for_a_later_loop_pairs_with_the_first_read_that_ran_before_it(walk, monkeypatch):
    """Every access of the loop's first iteration ran before the held write, later in program order: pairs of two
    passes no order of windows can follow. The one named is the first read in the pairs' order (reads come before
    writes), here ``peek``, which ends the very cycle the write starts: a pair ending as the other starts ran in
    order. Walked one access at a time, the search finds ``stage``, a write, first, and goes on to ``peek``."""
    monkeypatch.setattr(_order, "WALK_ACCESSES", walk)
    record, held, peek = _held_write(1)
    result = run_control(record, ControlOptions())
    cycles = int(np.asarray(result.start)[held] - np.asarray(result.start)[peek])
    record, held, peek = _held_write(cycles)
    result = run_control(record, ControlOptions())
    assert np.asarray(result.leave)[peek] == np.asarray(result.start)[held]
    got, want, _ = _both(record, ControlOptions())
    assert got == want and got.unfixable == (peek, held)
