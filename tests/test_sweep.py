"""Sweeps: one compiled vmap over scenarios (parameters and costs), chunks, tables, CLI, devices."""

import csv
import json
import os
import subprocess
import sys

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import phases
import pytest
import zero_trip as zt
from conftest import KERNELS, ROOT, primitive_counts

import ascjax as aj
from ascjax.tools.cli import main, parse_grid

FILE = str(KERNELS / "zero_trip.py")


def _reference(x, row):
    return zt.reference(x, int(row["n"]))


@pytest.fixture(scope="module")
def table():
    """n in {0, 1, 3} x MTE2 bandwidth in {32, 64} B/cycle: 6 scenarios in two chunks of 4 (the last padded)."""
    case = aj.build_case(FILE, "buggy_three_tiles")
    grid = parse_grid(["n=0,1,3", "costs.mte2_bytes_per_cycle=32,64"])
    return aj.sweep(case, grid, chunk_size=4, reference=_reference, progress=False)


def test_zero_trip_bug_is_found(table):
    assert table.columns == ["n", "costs.mte2_bytes_per_cycle", "verdict", "op", "location", "cycles", "max_err"]
    assert [(r["n"], r["verdict"]) for r in table.rows] == [
        (0, "deadlock"), (0, "deadlock"), (1, "ok"), (1, "ok"), (3, "ok"), (3, "ok"),
    ]  # fmt: skip
    dead = table.rows[0]
    assert dead["op"] == "sync_wait" and dead["location"].startswith("kernels/zero_trip.py:")
    assert all(r["max_err"] == 0.0 for r in table.rows if r["verdict"] == "ok")
    assert table.counts() == {"ok": 4, "deadlock": 2}


def test_costs_and_trip_counts_move_the_cycles(table):
    cycles = {(r["n"], r["costs.mte2_bytes_per_cycle"]): r["cycles"] for r in table.rows}
    assert cycles[(3, 32)] > cycles[(1, 32)] > 0  # more tiles, more time
    assert cycles[(3, 64)] < cycles[(3, 32)]  # a faster MTE2, less time


def test_one_row_equals_a_single_run(table):
    case = aj.build_case(FILE, "buggy_three_tiles")
    costs = aj.default_costs(aj.get_chip(case.chip))
    costs = eqx.tree_at(lambda c: c.mte2_bytes_per_cycle, costs, jnp.float32(64))
    r = aj.run(case.kernel, case.inputs, case.outputs, chip=case.chip, params=case.params, costs=costs)
    row = next(r for r in table.rows if r["n"] == 3 and r["costs.mte2_bytes_per_cycle"] == 64)
    assert row["cycles"] == r.report().cycles > 0


def test_table_saves_csv_and_json(table, tmp_path):
    table.to_csv(tmp_path / "t.csv")
    with open(tmp_path / "t.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 6 and rows[0]["verdict"] == "deadlock" and rows[2]["max_err"] == "0.0"
    assert json.loads(table.to_json(tmp_path / "t.json")) == json.loads((tmp_path / "t.json").read_text())
    assert "6 scenarios: 4 ok, 2 deadlock" in table.summary()


def test_bad_scenarios_are_refused():
    case = aj.build_case(FILE, "buggy_three_tiles")
    with pytest.raises(ValueError, match="one length"):
        aj.sweep(case, {"n": np.arange(3), "costs.mte2_bytes_per_cycle": np.ones(2)})
    with pytest.raises(ValueError, match="Costs has no field 'warp_speed'"):
        aj.sweep(case, {"costs.warp_speed": np.ones(2)})
    with pytest.raises(ValueError, match="scalars"):
        aj.sweep(case, {"n": 3})
    with pytest.raises(ValueError, match="NAME=V1,V2"):
        parse_grid(["n"])
    with pytest.raises(ValueError, match=r"sweep columns \['n'\] are empty: give each at least one value"):
        aj.sweep(case, {"n": np.arange(0)})
    with pytest.raises(ValueError, match="'bogus' is not a parameter of kernel 'zero_trip_kernel' .*n, variant"):
        aj.sweep(case, {"bogus": np.arange(2)})
    with pytest.raises(ValueError, match="chunk_size .* at least 1, got 0"):
        aj.sweep(case, {"n": np.arange(2)}, chunk_size=0)


def test_cli_sweep_mistakes_are_one_line_and_exit_2(capsys):
    target = f"{FILE}::buggy_three_tiles"
    for argv in (["--grid", "bogus=1,2"], ["--grid", "n=1", "--chunk", "0"], ["--grid", "n=1,,2"], ["--grid", "n="]):
        assert main(["sweep", target, *argv]) == 2, argv
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and err.startswith("error: cannot sweep:"), err


def test_cli_sweep_writes_csv(tmp_path, capsys):
    out = tmp_path / "n.csv"
    assert main(["sweep", f"{FILE}::fixed_zero_tiles", "--grid", "n=0,2", "--csv", str(out)]) == 0
    text = capsys.readouterr().out
    assert "2 scenarios: 2 ok" in text and out.exists()
    assert main(["sweep", f"{FILE}::fixed_zero_tiles"]) == 2  # no --grid


SHARDED = """
import jax, numpy as np, ascjax as aj, sys
sys.path.insert(0, {kernels!r})
import zero_trip as zt
assert jax.device_count() == 4, jax.devices()
case = aj.build_case({file!r}, "buggy_three_tiles")
t = aj.sweep(case, {{"n": np.arange(5, dtype=np.int32)}}, chunk_size=4, progress=False)
print(t.to_json())
"""


@pytest.mark.slow  # a fresh process with four host devices
def test_sweep_shards_over_host_devices():
    """Four CPU devices: each chunk is split over them; the table equals the one-device table."""
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4", JAX_PLATFORMS="cpu")
    script = SHARDED.format(kernels=str(KERNELS), file=FILE)
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads(done.stdout[done.stdout.index("[") :])
    assert [r["verdict"] for r in rows] == ["deadlock", "ok", "ok", "ok", "ok"]
    assert [r["n"] for r in rows] == [0, 1, 2, 3, 4]
    assert rows[1]["cycles"] < rows[4]["cycles"]


def _counted(k, trips=2, phase=aj.AccPhase.Final):
    """A loop of ``trips`` (at most 4) flag round trips MTE2 -> MTE1 -> MTE2; ``phase`` only names an enum column."""

    def step(i):
        k.sync_notify("MTE2", "MTE1", 0)
        k.sync_wait("MTE2", "MTE1", 0)
        k.sync_notify("MTE1", "MTE2", 0)  # the way back: MTE2 sets again only once MTE1 took the signal
        k.sync_wait("MTE1", "MTE2", 0)

    k.range(4, step, count=trips)


def test_a_static_count_of_every_iteration_is_the_plain_loop():
    """``count=n`` runs every iteration: no per-iteration test in the data plane, the record of no count."""
    x = zt.inputs()["x"]
    outputs = {"out": (x.shape, "float32")}

    def run(n):
        return aj.run(zt.zero_trip_kernel, {"x": x}, outputs, params={"n": n, "variant": "fixed"})

    counted, plain = (
        primitive_counts(jax.make_jaxpr(lambda n=n: run(n).outputs)().jaxpr.eqns) for n in (zt.N_MAX, None)
    )
    assert counted == plain
    a, b = run(zt.N_MAX), run(None)
    assert all(np.array_equal(a.record.operands[n], b.record.operands[n]) for n in b.record.operands)
    np.testing.assert_array_equal(a.outputs["out"], b.outputs["out"])


def test_seed_kloop_trip_counts_sweep_with_its_phases():
    """Seed 000's K loop, recipe phases: the last block's Final sets the flag the store waits for, so one K step
    (Partial only) hangs, and so does a count past the 8 tiles (its last iteration is a middle one)."""
    case = phases.kloop_recipe()
    table = aj.sweep(case, {"steps": np.array([0, 1, 2, 8, 9], np.int32)}, progress=False)
    assert [r["verdict"] for r in table.rows] == ["deadlock", "deadlock", "ok", "ok", "deadlock"]
    whole = aj.run(case.kernel, case.inputs, case.outputs, params=case.params)
    assert table.rows[2]["cycles"] < table.rows[3]["cycles"] == int(jnp.max(whole.control.end))


def test_trip_counts_past_the_maximum_are_findings_phases_print_by_name_and_cycles_are_integers(tmp_path):
    scenarios = {"trips": np.array([0, 4, 99, -1], np.int32), "phase": np.array([0, 2, 3, 3], np.int32)}
    table = aj.sweep(_counted, scenarios, inputs={}, outputs={})
    assert [r["verdict"] for r in table.rows] == ["ok", "ok", "bounds", "bounds"]  # never clamped to 4
    assert [line.split()[1] for line in table.format().splitlines()[1:]] == ["none", "Partial", "Final", "Final"]
    assert [r["phase"] for r in table.rows] == [0, 2, 3, 3]  # the rows keep the values a --grid takes
    assert all(type(r["cycles"]) is int for r in table.rows) and table.rows[1]["cycles"] > 0
    table.to_csv(tmp_path / "t.csv")
    assert all(row["cycles"].isdigit() for row in csv.DictReader(open(tmp_path / "t.csv")))
    assert all(type(r["cycles"]) is int for r in json.loads(table.to_json()))
    rep = aj.run(_counted, {}, {}, params={"trips": jnp.asarray(99)}).report()
    assert "trip count = 99 is outside [0, 4], the loop's static maximum; it ran 4 iterations" in rep.message
    with pytest.raises(ValueError, match=r"rule 'trip count': count = 99 is outside \[0, 4\]"):
        aj.run(_counted, {}, {}, params={"trips": 99})  # a static count is refused at trace time


def test_an_ok_row_whose_store_ran_before_matmuls_it_follows_is_marked_reordered():
    """First matmul Final (the others Partial), store Final: the store reads after the first K step (a partial sum)
    with every access ordered, so the verdict is ok, and the row's ``reordered`` names the pair; the seed's recipe
    (Partial ... Final) has none."""
    case = phases.phase_case(phases.AccPhase.Final, phases.AccPhase.Partial, phases.AccPhase.Partial,
                             phases.STPhase.Final)  # fmt: skip
    final, partial = int(phases.AccPhase.Final), int(phases.AccPhase.Partial)
    table = aj.sweep(case, {"first": np.array([partial, final], np.int32), "last": np.array([final, partial], np.int32)},
                     progress=False)  # fmt: skip
    recipe, early = table.rows
    assert recipe["first"] == partial and recipe["verdict"] == "ok" and recipe["reordered"] is None
    assert early["verdict"] == "ok" and early["reordered"] == "store (phases.py:60) before matmul_acc (phases.py:53)"
    assert "reordered" in table.columns and "(1 ok with an instruction run before an earlier one" in table.summary()
