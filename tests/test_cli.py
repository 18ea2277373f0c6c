"""The command line: list cases, run one, JSON output, exit codes."""

import json
import pathlib
import subprocess
import sys

import pytest
from conftest import KERNELS, ROOT

from ascjax.tools import cli
from ascjax.tools.cli import main


def test_list(capsys):
    assert main(["list", str(KERNELS / "unit_flag.py")]) == 0
    out = capsys.readouterr().out
    assert "unit_flag.py::seed000_error1" in out and "unit_flag.py::kloop_f16" in out


def test_the_installed_ascjax_command_runs_the_command_line():
    """``pip install`` puts an ``ascjax`` command beside the interpreter: its entry is the one ``python -m ascjax``
    runs, and it lists a kernel's cases and exits 2 on a mistake."""
    from importlib.metadata import entry_points

    (entry,) = entry_points(group="console_scripts", name="ascjax")
    assert entry.load() is cli.console
    command = pathlib.Path(sys.executable).with_name("ascjax")
    done = subprocess.run([str(command), "list", str(KERNELS / "unit_flag.py")], capture_output=True, text=True)
    assert done.returncode == 0 and "unit_flag.py::seed000_error1" in done.stdout, done.stderr
    wrong = subprocess.run([str(command), "list", str(KERNELS / "no_such_file.py")], capture_output=True, text=True)
    assert wrong.returncode == 2 and wrong.stderr.startswith("error: cannot list:"), wrong.stderr


def test_list_refuses_a_file_that_is_not_python(tmp_path, capsys):
    for name, data in (("notes.txt", b"hello\n"), ("junk.py", bytes(range(128, 256)))):
        (tmp_path / name).write_bytes(data)
        assert main(["list", str(tmp_path / name)]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and err.startswith("error: cannot list:"), err
    assert main(["list", str(tmp_path / "notes.txt")]) == 2
    assert "is not a Python file" in capsys.readouterr().err


def test_golden_into_a_path_it_cannot_write_is_one_line(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["golden", f"{KERNELS / 'mmad_int8.py'}::seed004_int8", "--out", str(blocker / "sub")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: cannot golden:"), err


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
    err = capsys.readouterr().err
    assert "defines no case 'no_such_case'; it has: kloop_f16" in err  # nothing close, nowhere else
    assert main(["run", f"{KERNELS / 'unit_flag.py'}::seed000_eror1"]) == 2  # a typo: the close name
    assert "defines no case 'seed000_eror1' (did you mean 'seed000_error1'?)" in capsys.readouterr().err
    assert main(["run", f"{KERNELS / 'unit_flag.py'}::seed000_error2"]) == 2  # another seed file's case
    want = f"(a case of that name is in {KERNELS / 'phases.py'}: {KERNELS / 'phases.py'}::seed000_error2)"
    assert want in capsys.readouterr().err
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
    assert out["verdict"] == "race" and out["op"] == "store" and out["expected"] == "race"  # the kernel's spelling
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


def test_check_json_trace_and_timeline_of_a_deadlock_show_the_stuck_pipe(tmp_path, capsys):
    out_json, out_png = tmp_path / "t.json", tmp_path / "t.png"
    target = f"{KERNELS / 'vec_cube.py'}::vec_cube_one_aiv_sets"
    assert main(["check", target, "--json", "--trace", str(out_json), "--timeline", str(out_png)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["verdict"] == out["expected"] == "deadlock" and out["findings"][0]["kind"] == "deadlock"
    assert out["cycles"] == 830 and any("AIC.MTE1: wait_cross_core at" in s for s in out["stuck"])
    marks = [e for e in json.loads(out_json.read_text())["traceEvents"] if e["name"].startswith("stuck: ")]
    assert {(e["pid"], e["tid"]) for e in marks} >= {(0, 3)}  # AIC.MTE1
    assert out_png.read_bytes()[:4] == b"\x89PNG"
    assert main(["check", target]) == 0
    assert "stuck    AIC.MTE1: wait_cross_core at" in capsys.readouterr().out


class _Terminal:
    """A stderr that says it is a terminal and keeps what is written."""

    def __init__(self, tty=True):
        self.tty, self.text = tty, []

    def isatty(self):
        return self.tty

    def write(self, s):
        self.text.append(s)

    def flush(self):
        pass


def test_a_long_compile_is_announced_once_to_a_person_and_a_short_one_not_at_all():
    import time

    from ascjax.tools.cli import compile_notice

    slow, quick, piped = _Terminal(), _Terminal(), _Terminal(tty=False)
    with compile_notice(slow, after_s=0.05):
        time.sleep(0.3)
    with compile_notice(quick, after_s=0.5):
        pass
    with compile_notice(piped, after_s=0.01):
        time.sleep(0.1)
    assert "".join(slow.text) == "compiling the kernel (cached for next time)...\n"
    assert quick.text == [] and piped.text == []


def test_importing_ascjax_quiets_xla_slow_compile_banners_unless_the_user_chose_a_level():
    code = "import os, ascjax; print(os.environ['TF_CPP_MIN_LOG_LEVEL'])"
    env = {k: v for k, v in __import__("os").environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, check=True)
    assert out.stdout.strip() == "3"
    env["TF_CPP_MIN_LOG_LEVEL"] = "1"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, check=True)
    assert out.stdout.strip() == "1"


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["run", "k.py::c", "--chip", "a9"], "python -m ascjax run: argument --chip: invalid choice: 'a9'"),
        (["golden", "k.py::c"], "python -m ascjax golden: the following arguments are required: --out"),
        (["frobnicate"], "python -m ascjax: argument command: invalid choice: 'frobnicate'"),
        (["sweep", "k.py::c", "--chunk", "x"], "python -m ascjax sweep: argument --chunk: invalid int value: 'x'"),
    ],
)
def test_a_usage_mistake_is_one_line_on_stderr_and_exit_status_2(argv, words, capsys):
    with pytest.raises(SystemExit) as stop:
        main(argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"error: {words}") and "--help)" in err, err
