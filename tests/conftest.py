import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
KERNELS = ROOT / "kernels"
sys.path.insert(0, str(KERNELS))  # kernel files import as plain modules in tests

import jax  # noqa: E402
import pytest  # noqa: E402

import ascjax  # noqa: E402

#: kernels/ cases refused while they are traced (the refusal is the case's verdict: a data function's check)
REFUSED_WHILE_TRACING = {
    ("seed_rules.py", name)
    for name in (
        "mmad_c_misaligned", "l0c_256k_on_a2", "mmad_hifloat8_on_a2", "mmad_gemv_fractal_a", "mmad_on_aiv",
        "xc_inter_block", "xc_event_id_16",
    )
}  # fmt: skip

ascjax.enable_compile_cache()  # the demo and every xdist worker share compiled kernels


#: A worker holding more than this drops its compiled programs after a test file (hundreds of cached executables
#: exhaust a small machine); below it, the programs files share (the control plane of a size class, the recording of
#: a kernel) stay compiled instead of being traced and loaded again in every file.
CACHE_RSS_LIMIT_BYTES = 2 * 2**30


def _rss_bytes() -> int:
    """This process's resident memory (Linux); where it cannot be read, as if over the limit."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return CACHE_RSS_LIMIT_BYTES + 1


@pytest.fixture(autouse=True, scope="module")
def _bounded_jit_caches():
    yield
    if _rss_bytes() > CACHE_RSS_LIMIT_BYTES:
        jax.clear_caches()
