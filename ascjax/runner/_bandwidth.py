"""The chip's GM bandwidth, shared by the cores of a launch.

Each block's control plane prices a GM copy at its own pipe's rate (one core's MTE2 reads 32 B/cycle
on A2). The cores of a launch share the chip's HBM (``Costs.gm_bytes_per_cycle``, about 811 B/cycle
on A2): 48 AIVs streaming at once get about 17 B/cycle each, not 32. ``gm_contention`` measures, on a
run of the blocks at their own rates, how many times the chip's bandwidth they asked for while the
launch moved GM bytes: its GM bytes over the window from the first GM request's start to the last
one leaving its pipe (blocks placed in their waves), at the bandwidth. Where that is over 1, the
launch runs its control planes again with every GM transfer that many times longer (``slow_gm``;
the flight, the GM latency, stays). It is one correction, not a fixed point, and it spreads the
contention evenly over the window: a burst inside a window that is quiet elsewhere is priced at the
window's average. L2 is not modelled: a re-read costs what a first read does.
"""

from __future__ import annotations

import numpy as np

from ..core import array_module

BIG = np.iinfo(np.int32).max


def block_offsets(block_cycles, ai_cores: int):
    """The cycle each block starts at in a launch: block b runs on AI Core b % ai_cores after that core's earlier
    blocks (``block_cycles``: the blocks on the last axis)."""
    xp = array_module(block_cycles)
    cycles = xp.asarray(block_cycles)
    n = cycles.shape[-1]
    cores = min(n, ai_cores)
    waves = -(-n // cores)
    grid = xp.pad(cycles, [(0, 0)] * (cycles.ndim - 1) + [(0, waves * cores - n)])
    grid = grid.reshape(*cycles.shape[:-1], waves, cores)
    before = xp.cumsum(grid, axis=-2) - grid  # the core's blocks of earlier waves
    return before.reshape(*cycles.shape[:-1], waves * cores)[..., :n]


def gm_window(starts, leaves, gm_bytes, block_cycles, ai_cores: int):
    """(GM bytes the launch's requests moved, cycles from the first one's start to the last one leaving its pipe).

    ``starts``, ``leaves``, ``gm_bytes``: per block and instance (blocks on the second-last axis; a start of -1: it
    never ran); ``block_cycles``: per block, to place the blocks in their waves."""
    xp = array_module(starts, leaves, gm_bytes, block_cycles)
    starts, leaves, gm_bytes = xp.asarray(starts), xp.asarray(leaves), xp.asarray(gm_bytes)
    offsets = block_offsets(block_cycles, ai_cores)[..., None]
    on = (starts >= 0) & (gm_bytes > 0)
    first = xp.min(xp.where(on, starts + offsets, BIG), axis=(-2, -1))
    last = xp.max(xp.where(on, leaves + offsets, 0), axis=(-2, -1))
    moved = xp.sum(xp.where(on, gm_bytes, 0).astype(np.float32), axis=(-2, -1))
    return moved, xp.maximum(last - first, 1).astype(np.float32)


def gm_contention(starts, leaves, gm_bytes, block_cycles, ai_cores: int, gm_bytes_per_cycle):
    """How many times the chip's GM bandwidth a launch asked for while it moved GM bytes (at least 1)."""
    moved, window = gm_window(starts, leaves, gm_bytes, block_cycles, ai_cores)
    xp = array_module(moved, window, gm_bytes_per_cycle)
    return xp.maximum(moved / (window * xp.asarray(gm_bytes_per_cycle, np.float32)), np.float32(1.0))


def slow_gm(operands: dict, factor) -> dict:
    """Record operands with every GM request's transfer (its cycles less its flight) ``factor`` times longer, in
    whole cycles (``factor`` broadcasts over the leading axes)."""
    xp = array_module(operands["cycles"], operands["flight_cycles"], operands["gm_bytes"], factor)
    cycles, flight, gm_bytes = (xp.asarray(operands[k]) for k in ("cycles", "flight_cycles", "gm_bytes"))
    factor = xp.reshape(xp.asarray(factor, np.float32), np.shape(factor) + (1,) * (cycles.ndim - np.ndim(factor)))
    slowed = xp.ceil((cycles - flight).astype(np.float32) * factor).astype(np.int32)
    return {**operands, "cycles": xp.where(gm_bytes > 0, flight + slowed, cycles)}
