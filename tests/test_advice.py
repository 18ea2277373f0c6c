"""What-if advice: each line the control plane run again with one change (``runner._advice``)."""

import json

import numpy as np
from conftest import KERNELS

import ascjax as aj
from ascjax.report import summary_text
from ascjax.runner._advice import MIN_SAVING
from ascjax.tools.cli import main

COSTS = aj.default_costs(aj.get_chip("a2"))
LATENCY, FLAG = int(COSTS.gm_read_latency_cycles), int(COSTS.flag_latency_cycles)


def _copies(k, n):
    """AIV0: ``n`` 8 KB GM -> UB copies, then one flag MTE2 -> V: the run is the bytes, one GM latency, one flag."""
    with k.vector(0):
        tiles = [k.alloc("UB", (32, 128), "float16", name=f"t{i}") for i in range(n)]
        for i, t in enumerate(tiles):
            k.copy_gm2ub(t, "x", row=32 * i)
        k.sync_notify("MTE2", "V", 0)
        k.sync_wait("MTE2", "V", 0)


def _check(n=4):
    return aj.check(_copies, {"x": np.zeros((32 * n, 128), np.float16)}, {}, params={"n": n})


def _saved(lines, start):
    line = next(a for a in lines if a.startswith(start))
    return int(line.split("~")[1].split(" ")[0].replace(",", ""))


def test_each_what_if_is_the_run_again_with_the_change():
    found = _check()
    lines = found.advice()
    total = found.timeline().cycles
    assert total == 4 * 256 + LATENCY + 1 + FLAG + 1  # the bytes, one latency, the set, the flag, the wait
    assert _saved(lines, "hiding AIV0.MTE2's GM latency") == LATENCY
    assert _saved(lines, "without the intra-core flag hand-offs") == FLAG
    assert _saved(lines, "AIV0.MTE2 (the busiest pipe) at twice its rate") == 2 * 256  # half of its 4 x 256
    assert lines[0].startswith("GM traffic: 32,768 bytes")
    saved = [_saved(lines, a[:20]) for a in lines[1:]]
    assert saved == sorted(saved, reverse=True) and min(saved) >= MIN_SAVING * total


def test_no_advice_for_a_change_that_saves_nothing_or_a_deadlock():
    lines = _check().advice()
    assert not any("unit-flag" in a or "cross-core" in a for a in lines)  # the kernel has no such hand-off
    stuck = aj.check(**_case("unit_flag.py", "seed000_error1"))
    assert stuck.advice() == () or all(a.startswith("GM traffic") for a in stuck.advice())


def _case(file, name):
    from ascjax.tools._case import build_case

    c = build_case(str(KERNELS / file), name)
    return dict(kernel=c.kernel, inputs=c.inputs, outputs=c.outputs, params=c.params, chip=c.chip)


def test_the_summary_and_the_trace_carry_the_advice():
    found = _check()
    timeline = found.timeline(advice=True)
    assert timeline.summary()["advice"] == list(found.advice())
    assert found.timeline().summary()["advice"] == []  # computed only when asked for
    trace = timeline.to_perfetto()
    instant = next(e for e in trace["traceEvents"] if e.get("name") == "advice")
    assert instant["ph"] == "i" and list(instant["args"].values()) == list(found.advice())
    assert trace["otherData"]["advice"] == list(found.advice())
    assert "  advice   hiding AIV0.MTE2's GM latency" in summary_text(timeline.summary())


def test_a_run_gives_the_advice_its_check_does():
    x = {"x": np.zeros((128, 128), np.float16)}
    assert aj.run(_copies, x, {}, params={"n": 4}).advice() == _check().advice()


def test_the_command_line_prints_advice_when_asked(capsys):
    target = f"{KERNELS / 'calibration.py'}::calibration_aiv_add"
    assert main(["check", target, "--advice"]) == 0
    out = capsys.readouterr().out
    assert "  advice   GM traffic:" in out and "  advice   hiding AIV0.MTE2's GM latency" in out
    assert main(["run", target, "--json", "--advice"]) == 0
    advice = json.loads(capsys.readouterr().out)["advice"]
    assert any(a.startswith("hiding AIV0.MTE2's GM latency") for a in advice)
    assert main(["check", target]) == 0 and "advice" not in capsys.readouterr().out
