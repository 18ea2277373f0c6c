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

#: Where XLA on a GPU is not bit-exact (measured on an H200; CI runs on a CPU). These tests are expected to fail there
#: (strict: one that passes on a GPU fails the run, so the marks stay true).
ON_GPU = jax.default_backend() == "gpu"
GPU_DIV_SQRT = pytest.mark.xfail(
    ON_GPU, strict=True, reason="XLA on a GPU divides float32 with div.full.f32 and takes square roots approximately "
    "(up to 2 ulp, not correctly rounded; openxla/xla#37181)",
)  # fmt: skip
GPU_MATMUL_ORDER = pytest.mark.xfail(
    ON_GPU, strict=True, reason="on a GPU a batched product and the same products one by one run different cuBLAS "
    "algorithms, which sum float32 partial products in different orders",
)  # fmt: skip


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


def primitive_counts(eqns, counts=None) -> dict:
    """How many equations of each primitive ``eqns`` hold, those of the jaxprs they call included."""
    counts = {} if counts is None else counts
    for eqn in eqns:
        counts[eqn.primitive.name] = counts.get(eqn.primitive.name, 0) + 1
        for param in eqn.params.values():
            for sub in param if isinstance(param, (list, tuple)) else [param]:
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    primitive_counts(inner.eqns, counts)
    return counts
