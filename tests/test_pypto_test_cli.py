"""``python -m ascjax pypto-test FILE``: an upstream-style PyPTO-Pro test file (torch references on the NPU) run
unchanged, each kernel's verdict printed with the test's result; a sync finding fails its test.

torch is an optional extra: where it is installed the file runs; where it is not, the command says what to install.
"""

from __future__ import annotations

import importlib.util
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "pypto" / "test_add_upstream_style.py"
HAS_TORCH = importlib.util.find_spec("torch") is not None


def _pypto_test(*args):
    return subprocess.run(
        [sys.executable, "-m", "ascjax", "pypto-test", *args], capture_output=True, text=True, cwd=ROOT
    )


@pytest.mark.skipif(not HAS_TORCH, reason="torch is the optional extra ascjax[torch]")
def test_a_test_file_runs_unchanged_and_a_race_fails_its_test_though_the_numbers_match():
    run = _pypto_test(str(EXAMPLE))
    assert run.returncode == 1, run.stdout + run.stderr
    out = run.stdout
    assert "test_add_upstream_style.py::test_add_rows: add_rows: OK" in out
    assert "test_add_upstream_style.py::test_add_rows_without_the_store_flag: add_rows: RACE" in out
    assert "ascjax: kernel add_rows has a sync finding" in out
    assert "1 failed, 1 passed" in out.splitlines()[-1]


@pytest.mark.skipif(not HAS_TORCH, reason="torch is the optional extra ascjax[torch]")
def test_npu_tensors_are_the_cpus_inside_the_mapping_and_torch_is_restored_after():
    import torch

    from ascjax.tools._torch_npu import npu_on_cpu

    with npu_on_cpu():
        x = torch.empty([2, 3], device="npu:0", dtype=torch.float16)
        assert x.device.type == "cpu" and torch.equal(x, torch.zeros([2, 3], dtype=torch.float16))
        assert torch.ones(2).to("npu:1").device.type == "cpu" and "Ascend950" in torch.npu.get_device_name()
    assert not hasattr(torch.Tensor, "npu") or torch.Tensor.npu is not None
    with pytest.raises(RuntimeError):
        torch.zeros(2, device="npu:0")  # outside the mapping, torch knows no NPU here


@pytest.mark.skipif(HAS_TORCH, reason="checks the message where torch is missing")
def test_without_torch_the_command_says_what_to_install():
    run = _pypto_test(str(EXAMPLE))
    assert run.returncode == 2
    assert (
        run.stderr.strip()
        == "error: cannot pypto-test: ImportError: pypto-test needs torch: pip install 'ascjax[torch]'"
    )
