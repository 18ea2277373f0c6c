import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
KERNELS = ROOT / "kernels"
sys.path.insert(0, str(KERNELS))  # kernel files import as plain modules in tests

import jax  # noqa: E402
import pytest  # noqa: E402

import ascjax  # noqa: E402

ascjax.enable_compile_cache()  # the demo and every xdist worker share compiled kernels


@pytest.fixture(autouse=True, scope="module")
def _fresh_jit_caches():
    """Drop compiled kernels between test files: hundreds of cached executables exhaust a small machine."""
    yield
    jax.clear_caches()
