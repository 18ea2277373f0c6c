"""The command line: list cases, run one, JSON output, exit codes."""

import json
import subprocess
import sys

from conftest import KERNELS, ROOT

from ascjax.cli import main


def test_list(capsys):
    assert main(["list", str(KERNELS / "unit_flag.py")]) == 0
    out = capsys.readouterr().out
    assert "unit_flag.py::seed000_error1" in out and "unit_flag.py::kloop_f16" in out


def test_run_json_deadlock(capsys):
    assert main(["run", f"{KERNELS / 'unit_flag.py'}::seed000_error1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["verdict"] == "deadlock" and out["op"] == "fixpipe"
    assert out["location"].endswith(".py:" + out["location"].rsplit(":", 1)[1]) and "unit_flag.py" in out["location"]
    assert out["max_abs_err"] is None and "Final closing" in out["message"]


def test_run_json_ok_with_reference_on_another_chip(capsys):
    assert main(["run", f"{KERNELS / 'mmad_int8.py'}::seed004_int8", "--chip", "a3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["verdict"] == "ok" and out["location"] is None and out["max_abs_err"] == 0.0 and out["chip"] == "a3"


def test_text_output_and_errors(capsys):
    assert main(["run", f"{KERNELS / 'unit_flag.py'}::size_mismatch"]) == 0
    assert "DEADLOCK" in capsys.readouterr().out
    assert main(["run", f"{KERNELS / 'unit_flag.py'}::no_such_case"]) == 2
    assert "defines no case 'no_such_case'" in capsys.readouterr().err
    assert main(["run", "missing.py::x"]) == 2
    assert main(["run", "no_separator"]) == 2


def test_module_entry_point():
    proc = subprocess.run(
        [sys.executable, "-m", "ascjax", "list", str(KERNELS / "mmad_int8.py")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    assert "seed004_int8" in proc.stdout


def test_seed000_error2_is_a_race_and_poison_shows_it(capsys):
    assert main(["run", f"{KERNELS / 'phases.py'}::seed000_error2", "--json", "--poison-races"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["verdict"] == "race" and out["op"] == "fixpipe" and out["expected"] == "race"
    assert out["nan_elements"] == 64 * 64 and "RAW" in out["message"]
    assert main(["run", f"{KERNELS / 'phases.py'}::seed000_error2", "--json", "--no-sanitize"]) == 0
    assert json.loads(capsys.readouterr().out)["verdict"] == "leftover"  # the flag protocol alone


def test_trace_timeline_and_cycles(tmp_path, capsys):
    out_json, out_png = tmp_path / "t.json", tmp_path / "t.png"
    target = f"{KERNELS / 'unit_flag.py'}::measurement_with_unit_flag"
    assert main(["run", target, "--trace", str(out_json), "--timeline", str(out_png), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["cycles"] > 4156 and out["bound"] in ("cube", "sync", "MTE2", "FIX")
    assert json.loads(out_json.read_text())["traceEvents"]
    assert out_png.read_bytes()[:4] == b"\x89PNG"
