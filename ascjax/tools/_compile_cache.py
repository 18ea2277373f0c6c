"""A persistent XLA compilation cache for kernels.

Emulated kernels are compile-bound: a kernel of a hundred ops takes tens of seconds to compile
and milliseconds to run. With the cache on, the second process that runs the same kernel
(same ops, shapes, options and chip) loads the executable from disk instead. The CLI, the
examples and the test suite turn it on; a library user calls ``enable_compile_cache``.
"""

from __future__ import annotations

import os

import jax

#: Where the cache lives unless ``ASCJAX_CACHE_DIR`` or an argument says otherwise.
DEFAULT_DIR = os.path.join(os.path.expanduser("~"), ".cache", "ascjax", "xla")
#: Compiles faster than this are not written: reading an entry back costs 10-150 ms, and a kernel's data plane
#: compiles in 0.2-1 s on a laptop CPU (JAX's own default, 1 s, would recompile most of them in every process).
MIN_COMPILE_SECONDS = 0.25


def enable_compile_cache(path: str | None = None, *, min_compile_seconds: float = MIN_COMPILE_SECONDS) -> str | None:
    """Cache compiled kernels in ``path`` (default ``$ASCJAX_CACHE_DIR`` or ``~/.cache/ascjax/xla``).

    Only compilations slower than ``min_compile_seconds`` are written. ``ASCJAX_CACHE_DIR=off``
    turns the cache off. Returns the directory in use, or None when off.
    """
    path = path or os.environ.get("ASCJAX_CACHE_DIR") or DEFAULT_DIR
    if path.lower() in ("off", "0", "none"):
        return None
    os.makedirs(path, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", min_compile_seconds)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return path
