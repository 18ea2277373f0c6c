"""Timing helpers shared by the benchmarks: compile once, then the best of several runs."""

import time

import jax


def best_seconds(fn, *args, repeats=5):
    """(compile + first run seconds, best steady-state seconds) of ``fn(*args)``."""
    start = time.perf_counter()
    jax.block_until_ready(fn(*args))
    first = time.perf_counter() - start
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        best = min(best, time.perf_counter() - start)
    return first, best


def machine() -> str:
    import os
    import platform

    dev = jax.devices()[0]
    return f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, jax {jax.__version__} on {dev.platform} ({dev.device_kind})"
