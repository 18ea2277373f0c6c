"""A PyPTO-Pro kernel file run unchanged: ``pypto_pro`` mapped to ascjax's front end while the file is imported.

``load_kernels`` imports the file with ``import pypto_pro.language as pl`` resolving to
``ascjax.pypto_pro.language`` and returns its ``@pl.jit`` kernels; ``run_kernel`` runs one on inputs drawn
from its ``pl.Tensor[...]`` annotations (a tensor the kernel stores to starts at zero).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys

import numpy as np

from .. import pypto_pro
from ..core import _dtypes as dtypes
from ..front.pypto._types import DYNAMIC, dtype_name

#: the module names a PyPTO-Pro file imports, and ascjax's modules that stand for them
ALIASES = {
    "pypto_pro": pypto_pro,
    "pypto_pro.language": pypto_pro.language,
    "pypto_pro.runtime": pypto_pro.runtime,
    "pypto_pro.runtime.tilingkey": pypto_pro.runtime.tilingkey,
    "pypto": pypto_pro.framework,
    **dict.fromkeys(  # a test file imports the parser's errors by their module
        (
            "pypto_pro.language.parser",
            "pypto_pro.language.parser.diagnostics",
            "pypto_pro.language.parser.diagnostics._exceptions",
        ),
        pypto_pro.parser_errors,
    ),  # fmt: skip
}


@contextlib.contextmanager
def pypto_pro_mapped():
    """``import pypto_pro`` (``pypto_pro.language``, ``pypto``) resolve to ascjax's front end inside the block."""
    saved = {name: sys.modules.get(name) for name in ALIASES}
    sys.modules.update(ALIASES)
    try:
        yield
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


def load_kernels(path: str) -> dict:
    """The ``@pl.jit`` kernels a PyPTO-Pro file defines, by name (imported with ``pypto_pro`` mapped)."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no such file: {path}")
    name = "_ascjax_pypto_" + os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    with pypto_pro_mapped():
        try:
            spec.loader.exec_module(module)
        except ModuleNotFoundError as exc:
            raise ImportError(
                f"{path} imports {exc.name!r}, which ascjax does not map: a kernel file runs with pypto_pro alone"
            ) from None
    return {n: v for n, v in vars(module).items() if isinstance(v, pypto_pro.JitKernel)}


def pick_kernel(path: str, name: str | None):
    """The kernel ``name`` of ``path`` (its only kernel when None); a KeyError names the kernels there."""
    kernels = load_kernels(path)
    if name is None and len(kernels) == 1:
        return next(iter(kernels.values()))
    if name not in kernels:
        have = ", ".join(sorted(kernels)) or "none"
        raise KeyError(f"{path} has no @pl.jit kernel {name!r} (its kernels: {have}); name one as FILE::KERNEL")
    return kernels[name]


def random_arguments(kernel, seed: int = 0) -> dict:
    """Arrays for the kernel's ``pl.Tensor`` parameters: standard normal floats, small integers, seeded."""
    rng = np.random.default_rng(seed)
    arrays = {}
    for name, spec in kernel.tensor_specs.items():
        if DYNAMIC in spec.shape:
            raise ValueError(
                f"rule 'tensor shape': {name} is {spec}: a pl.DYNAMIC dimension needs the caller's tensor; call the "
                "kernel from Python (or its test) with arrays"
            )
        dtype = dtypes.to_numpy_dtype(dtype_name(spec.dtype))
        if np.issubdtype(dtype, np.integer):
            arrays[name] = rng.integers(-8, 8, spec.shape).astype(dtype)
        else:
            arrays[name] = rng.standard_normal(spec.shape).astype(dtype)
    return arrays
