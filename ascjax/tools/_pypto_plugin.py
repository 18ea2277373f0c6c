"""The pytest plugin behind ``python -m ascjax pypto-test``: an upstream-style PyPTO-Pro test file run unchanged.

While the session runs, ``pypto_pro`` and ``pypto`` resolve to ascjax (``_pypto_file.pypto_pro_mapped``) and
``torch.npu`` to the CPU (``_torch_npu.npu_on_cpu``). Every kernel a test calls is emulated; its verdict is
printed with the test's result, and a kernel with a sync finding fails the test with its report, even when the
numbers happen to match the test's reference.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

from ..pypto_pro._jit import RUNS
from ._pypto_file import pypto_pro_mapped
from ._torch_npu import npu_on_cpu

_SESSION = contextlib.ExitStack()
#: per test run: (test id, [(kernel, verdict word, cycles), ...])
_VERDICTS: list = []


def pytest_configure(config):
    config.addinivalue_line("markers", "soc(name): the Ascend SoC the test targets (ascjax emulates the 950)")
    _SESSION.enter_context(pypto_pro_mapped())
    _SESSION.enter_context(npu_on_cpu())


def pytest_unconfigure(config):
    _SESSION.close()


def _verdict_word(result) -> str:
    return str(result.report()).split(":", 1)[0].split(" (", 1)[0].strip()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    runs: list = []
    token = RUNS.set(runs)
    try:
        outcome = yield
    finally:
        RUNS.reset(token)
        rows = [(name, _verdict_word(r), int(np.max(np.asarray(r.cycles)))) for name, r in runs]
        _VERDICTS.append((item.nodeid, rows))
        item.add_report_section("call", "ascjax", "\n".join(str(r.report()) for _, r in runs))
    bad = [(name, r) for name, r in runs if not r.ok]
    if bad:
        name, result = bad[0]
        pytest.fail(f"ascjax: kernel {name} has a sync finding\n{result.report()}", pytrace=False)
    return outcome


def pytest_terminal_summary(terminalreporter):
    terminalreporter.section("ascjax verdicts")
    for nodeid, rows in _VERDICTS:
        kernels = "; ".join(f"{name}: {word}, {cycles:,} cycles" for name, word, cycles in rows) or "no kernel ran"
        terminalreporter.write_line(f"{nodeid}: {kernels}")
