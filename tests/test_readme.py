"""The README's kernel example runs as printed when pasted into a file, and prints the report it shows."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def _blocks(section: str) -> tuple[str, str]:
    """The first Python block of ``section`` and the plain block after it."""
    text = README.read_text().split(f"## {section}", 1)[1]
    code = text.split("```python\n", 1)[1].split("```", 1)[0]
    shown = text.split("```python\n", 1)[1].split("```", 1)[1].split("```\n", 1)[1].split("```", 1)[0]
    return code, shown


def test_the_ascend_c_example_runs_as_pasted_and_prints_its_report(tmp_path):
    code, shown = _blocks("A kernel, Ascend C style")
    (tmp_path / "example.py").write_text(code)
    run = subprocess.run([sys.executable, "example.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == shown.strip()
    assert re.search(r"fixpipe at example\.py:\d+ \(AIC\.FIX\) waits for unit flag = 1", run.stdout)
