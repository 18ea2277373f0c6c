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


@pytest.fixture(autouse=True, scope="module")
def _fresh_jit_caches():
    """Drop compiled kernels between test files: hundreds of cached executables exhaust a small machine."""
    yield
    jax.clear_caches()
