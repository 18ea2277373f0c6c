"""The two published Atlas A2 measurements the timing model is calibrated on, as kernels (docs/timing.md).

1. One AIC, C = A x B, half in, 64 x 64 x 64 base blocks (the Matmul API's "Norm" template): per K step
   MTE2 loads an 8 KB block of A and of B into L1, MTE1 moves them to L0A / L0B, the cube runs one
   64 x 64 x 64 mmad; L1 and L0A / L0B are double-buffered. Published per K step: aic_mac_time 125
   cycles per mmad, MTE2 514, MTE1 143.
2. One AIV, z = x + y, half, 4096-element (8 KB) copies, single-buffered: per tile MTE2 reads x and y,
   V adds, MTE3 writes z. Published per tile: MTE2 700 cycles (2 x 350), MTE3 295, V 86.

The published kernels ran 2,097,152 K steps and 16,384 tiles; these run a few of the same steps, and
the figures compared are per step in the steady state.
"""

import numpy as np
from matmul import matmul_pingpong_kernel

import ascjax as aj

#: The Norm template's base block (M, K, N) of calibration kernel 1, and the AIV copy of kernel 2.
BLOCK = 64
TILE_ROWS, TILE_COLS = 32, 128  # 4096 half elements: one 8 KB copy

#: The published figures, in cycles at 1.85 GHz (per mmad / K step, per tile).
PUBLISHED_MMAD_CYCLES = 125  # aic_mac_time 141,699 us / 2,097,152 mmads
PUBLISHED_AIC_MTE2_CYCLES = 514  # 582,516 us / 2,097,152 K steps of 2 x 8 KB
PUBLISHED_AIC_MTE1_CYCLES = 143  # 162,104 us / 2,097,152 K steps of 8 KB L0A + 8 KB L0B
PUBLISHED_AIV_MTE2_CYCLES = 700  # 6,209 us / 16,384 tiles of 2 x 8 KB (23.4 B/cycle)
PUBLISHED_AIV_MTE3_CYCLES = 295  # 2,613 us / 16,384 tiles of 8 KB (27.8 B/cycle)
PUBLISHED_AIV_V_CYCLES = 86  # 761.65 us / 16,384 Adds of 4096 half


def aic_matmul_case(k_steps: int = 8) -> aj.Case:
    """Calibration kernel 1: one 64 x 64 output block over ``k_steps`` K steps (an even count: ping-pong)."""
    rng = np.random.default_rng(0)
    m = n = BLOCK
    kk = BLOCK * k_steps
    return aj.Case(
        kernel=matmul_pingpong_kernel,
        inputs={
            "a": rng.uniform(-1, 1, (m, kk)).astype(np.float16),
            "b": rng.uniform(-1, 1, (kk, n)).astype(np.float16),
        },
        outputs={"c": ((m, n), "float32")},
        params={"M": m, "K": kk, "N": n, "TM": BLOCK, "TK": BLOCK, "TN": BLOCK},
        reference=lambda x: {"c": x["a"].astype(np.float64) @ x["b"].astype(np.float64)},
        atol=1e-3,
        chip="a2",
    )


def aiv_add_kernel(k: aj.Program, tiles: int = 8):
    """Calibration kernel 2: ``tiles`` tiles of z = x + y on AIV0, single-buffered, as the Ascend C example's
    queues order them (CopyIn x and y; Compute; CopyOut z)."""
    with k.vector(0):
        x = k.alloc("UB", (TILE_ROWS, TILE_COLS), "float16", name="x")
        y = k.alloc("UB", (TILE_ROWS, TILE_COLS), "float16", name="y")
        z = k.alloc("UB", (TILE_ROWS, TILE_COLS), "float16", name="z")
        k.sync_notify("V", "MTE2", 0)  # x and y start free
        k.sync_notify("MTE3", "V", 0)  # z starts free

        def tile(i):
            k.sync_wait("V", "MTE2", 0)
            k.copy_gm2ub(x, "x", row=i * TILE_ROWS)
            k.copy_gm2ub(y, "y", row=i * TILE_ROWS)
            k.sync_notify("MTE2", "V", 0)
            k.sync_wait("MTE2", "V", 0)
            k.sync_wait("MTE3", "V", 0)
            k.add(z, x, y)
            k.sync_notify("V", "MTE2", 0)
            k.sync_notify("V", "MTE3", 0)
            k.sync_wait("V", "MTE3", 0)
            k.copy_ub2gm("z", z, row=i * TILE_ROWS)
            k.sync_notify("MTE3", "V", 0)

        k.range(tiles, tile)
        k.sync_wait("V", "MTE2", 0)
        k.sync_wait("MTE3", "V", 0)


def aiv_add_case(tiles: int = 8) -> aj.Case:
    rng = np.random.default_rng(0)
    shape = (tiles * TILE_ROWS, TILE_COLS)
    x, y = (rng.uniform(-1, 1, shape).astype(np.float16) for _ in range(2))
    return aj.Case(
        kernel=aiv_add_kernel,
        inputs={"x": x, "y": y},
        outputs={"z": (shape, "float16")},
        params={"tiles": tiles},
        reference=lambda g: {"z": (g["x"] + g["y"]).astype(np.float16)},
        chip="a2",
    )


#: A published measurement the model is checked against, not fitted to: 48 AIVs of an Atlas A2 read a 301.99 MB
#: half tensor GM -> UB in 128-byte copies, MTE2 548 us: about 21 cycles per copy per core.
PUBLISHED_SMALL_COPY_CYCLES = 21
SMALL_COPY_ELEMENTS = 64  # 128 bytes of half
SMALL_COPY_BLOCKS = 24  # the A2's AI Cores: 48 AIVs


def aiv_small_copies_kernel(k: aj.Program, copies: int = 8):
    """Both AIVs of the block stream ``copies`` 128-byte GM -> UB copies each (rows of their own), each into its own
    UB tile, then hand them to V."""
    for v in (0, 1):
        with k.vector(v):
            tiles = [k.alloc("UB", (1, SMALL_COPY_ELEMENTS), "float16", name=f"v{v}t{i}") for i in range(copies)]
            first = (k.block_idx * 2 + v) * copies
            for i, t in enumerate(tiles):
                k.copy_gm2ub(t, "x", row=first + i)
            k.sync_notify("MTE2", "V", 0)
            k.sync_wait("MTE2", "V", 0)


def aiv_small_copies_case(copies: int = 8) -> aj.Case:
    return aj.Case(
        kernel=aiv_small_copies_kernel,
        inputs={"x": np.zeros((SMALL_COPY_BLOCKS * 2 * copies, SMALL_COPY_ELEMENTS), np.float16)},
        outputs={},
        params={"copies": copies},
        chip="a2",
    )


def small_copies_cycles_per_copy(copies: int) -> float:
    """Cycles per copy per AIV of the launch of ``aiv_small_copies_kernel`` on every AIV of the A2 in the steady
    state: a launch of ``2 * copies`` copies per AIV less one of ``copies``, over ``copies``."""

    def cycles(n):
        c = aiv_small_copies_case(n)
        run = aj.launch(c.kernel, c.inputs, c.outputs, block_dim=SMALL_COPY_BLOCKS, params=c.params, chip=c.chip)
        return int(run.cycles)

    return (cycles(2 * copies) - cycles(copies)) / copies


@aj.case
def calibration_aic_matmul():
    """Calibration kernel 1 (one AIC, 64^3 base blocks, ping-pong L1 / L0) -> ok; docs/timing.md's accuracy table."""
    return aic_matmul_case()


@aj.case
def calibration_aiv_add():
    """Calibration kernel 2 (one AIV, z = x + y, 8 KB single-buffered copies) -> ok; docs/timing.md's table."""
    return aiv_add_case()


#: What each published figure counts: the instructions of the pipe the profiler's time is of.
AIC_FIGURES = {"mmad": ("mmad",), "MTE2": ("copy_gm2l1_nd2nz",), "MTE1": ("copy_l12l0a", "copy_l12l0b")}
AIV_FIGURES = {"MTE2": ("copy_gm2ub",), "MTE3": ("copy_ub2gm",), "V": ("add",)}


def _busy_cycles(spans) -> int:
    """Cycles during which at least one of ``spans`` runs or is in flight (overlaps count once)."""
    total, covered = 0, 0
    for s in sorted(spans, key=lambda s: s.start_cycle):
        total += max(s.end_cycle - max(s.start_cycle, covered), 0)
        covered = max(covered, s.end_cycle)
    return total


def steady_cycles_per_step(make_case, steps: int, figures: dict) -> dict:
    """Per figure (a name -> the instructions it counts), busy cycles per step in the steady state: those of a
    run of ``2 * steps`` steps less those of ``steps`` steps, over ``steps`` (the first step's latencies and the
    last one's drain cancel)."""

    def busy(n):
        c = make_case(n)
        spans = aj.check(c.kernel, c.inputs, c.outputs, params=c.params, chip=c.chip).timeline().spans
        return {name: _busy_cycles([s for s in spans if s.op in ops]) for name, ops in figures.items()}

    short, long = busy(steps), busy(2 * steps)
    return {name: (long[name] - short[name]) / steps for name in figures}
