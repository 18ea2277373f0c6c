"""Memory of the data plane's state, per chip, against the block's physical buffer bytes.

python benchmarks/bench_memory.py [--json]

A kernel that fills every on-chip buffer of the block (L1, L0A, L0B, L0C, BiasTable, the MX
scale buffers where the chip has them, and each AIV's UB) with tiles. For each chip it reports
the bytes of every array in the final ``State``, split into buffer data and the rest (the config
registers and TileGroup cursors). No GM tensors, so the figures are the block's own. (The control
plane's machine state per scenario: ``bench_control_plane.py``.)
"""

import collections

import jax
from _timing import claim, main

import ascjax as aj
from ascjax.core import Buffer

COLS = 256  # tile width in elements; rows fill the buffer


def fill_kernel(k: aj.Program, chip_name: str):
    chip = aj.get_chip(chip_name)
    for buffer, size in chip.buffer_bytes.items():
        dtype, itemsize = ("float32", 4) if buffer in (Buffer.L0C, Buffer.BT) else ("float16", 2)
        if buffer in (Buffer.SCALE_LEFT, Buffer.SCALE_RIGHT):
            continue  # MX scales are placed with their L0A / L0B data
        shape = (1, size // itemsize) if buffer is Buffer.BT else (size // (COLS * itemsize), COLS)
        k.alloc(buffer.value, shape, dtype, name=f"fill_{buffer.name}")  # a UB tile exists on both AIVs


def _group(path) -> str:
    key = jax.tree_util.keystr(path)
    if key.startswith((".aic.l1", ".aic.l0a", ".aic.l0b", ".aic.l0c", ".aic.bt", ".ub")):
        return "buffer data"
    return "registers, cursors"


def state_bytes(chip_name: str) -> dict:
    state = jax.eval_shape(lambda: aj.run(lambda k: fill_kernel(k, chip_name), {}, {}, chip=chip_name, jit=False).state)
    groups = collections.Counter()
    for path, leaf in jax.tree_util.tree_leaves_with_path(state):
        groups[_group(path)] += leaf.size * leaf.dtype.itemsize
    return dict(groups)


def measure() -> dict:
    chips = {}
    claims = []
    for name in sorted(aj.CHIPS):
        chip = aj.get_chip(name)
        physical = sum(chip.buffer_bytes.values()) + chip.buffer_bytes[Buffer.UB]  # two AIVs, a UB each
        parts = state_bytes(name)
        chips[name] = {"physical_bytes": physical, "state_bytes": sum(parts.values()), "state_bytes_by_part": parts}
        claims.append(claim(f"memory {name}: state / physical buffer bytes", sum(parts.values()) / physical))
    return {
        "benchmark": "state memory per chip (one block, every buffer full)",
        "chips": chips,
        "timings": {},
        "claims": claims,
    }


if __name__ == "__main__":
    raise SystemExit(main(__doc__, measure))
