"""Write the seed-document pages of the docs from ascjax's actual output.

ascjax's behaviour comes from four source documents (the *seeds*). For each of them this
script runs every case that reproduces one of the document's examples or failure cases and
writes a Markdown page with, per example: what the seed says should happen, the kernel code
that reproduces it (extracted from its source file, with its line numbers), and the report
the case prints - the same text as ``python -m ascjax run FILE::CASE``, produced by running
that command's own code - followed by its verdict, cycles and error against the reference.

    python docs/seeds/generate.py                 # every seed (several minutes)
    python docs/seeds/generate.py --only 000,002  # some seeds; the index is rewritten from the pages

It writes ``docs/seeds/000-accphase-stphase.md``, ``001-unit-flag.md``, ``002-cross-core.md``,
``004-asc-mmad.md`` and ``index.md``. The pages hold no timings, dates or absolute paths, so
running it again gives the same files. It exits with status 1 when a case's verdict differs
from the one the seed documents (the pages then say so).

The few seed rules no other kernel shows (an mmad parameter rule that fails at trace time, a
warning, a traced TileGroup index) are the small cases of ``kernels/seed_rules.py``.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import gc
import inspect
import io
import os
import pathlib
import re
import sys
import textwrap
import time
from collections.abc import Callable
from unittest import mock

import jax
import numpy as np

import ascjax as aj
from ascjax import UnitFlagMode, pl
from ascjax.tools import cli

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGES = pathlib.Path("docs/seeds")  # relative to ROOT, where the script runs
K_SR = "kernels/seed_rules.py"  # the seed rules no other kernel file shows
PIPE = pl.PipeType
DISABLE, KEEP, UPDATE = UnitFlagMode.DISABLE, UnitFlagMode.ENABLE_KEEP, UnitFlagMode.ENABLE_UPDATE


# =========================================================================================
# What each page shows
# =========================================================================================
@dataclasses.dataclass
class Code:
    """Lines of a function of a kernel file (or of this file): all of it, or from the first line
    containing ``start`` to the first line from there on containing ``stop``."""

    path: str
    name: str
    start: str | None = None
    stop: str | None = None


@dataclasses.dataclass
class Run:
    """One case, run through ``python -m ascjax run`` (``FILE::CASE``)."""

    target: str
    code: tuple[Code, ...] = ()
    note: str = ""  # Markdown after the output
    raises: str | None = None  # the case is refused while tracing with this exception, not run
    show: Callable | None = None  # (case, result) -> extra lines of output to show


@dataclasses.dataclass
class Example:
    anchor: str
    title: str
    seed: str  # what the seed says should happen (Markdown)
    runs: tuple[Run, ...]
    code: tuple[Code, ...] = ()  # shown once, before the runs
    after: str = ""  # Markdown after the runs


@dataclasses.dataclass
class Seed:
    number: str
    slug: str
    title: str
    covers: str  # one line for the index
    summary: str  # Markdown
    examples: tuple[Example, ...]


def _md(text: str) -> str:
    return textwrap.dedent(text).strip()


K_UF, K_PH, K_MM = "kernels/unit_flag.py", "kernels/phases.py", "kernels/mmad_int8.py"
K_FA, K_MS, K_VC = "kernels/flash_attention.py", "kernels/matmul_softmax.py", "kernels/vec_cube.py"
K_PP, K_EN, K_KDA, K_ZT = "kernels/pingpong.py", "kernels/engram.py", "kernels/kda.py", "kernels/zero_trip.py"

KLOOP_PHASES = Code(K_PH, "kloop_kernel", "k.cond(", "k.store(")


def _int8_rows(case, result):
    got = np.asarray(result.outputs["output"])
    want = case.reference(case.inputs)["output"]
    row = lambda label, v: f"{label}: " + " ".join(str(int(x)) for x in v[0, :8]) + " ..."  # noqa: E731
    passed = "[Success] asc_mmad passed." if np.array_equal(got, want) else "[Failed] asc_mmad failed."
    return [row("Input A row 0", case.inputs["a"]), row("Input B row 0", case.inputs["b"]),
            row("Output row 0", got), row("Golden row 0", want), passed]  # fmt: skip


def _special_rows(case, result):
    c = np.asarray(result.outputs["c"])
    return [f"c[{r}, 0:4] = {np.array2string(c[r, :4], precision=8)}" for r in range(4)]


def _measurement_rows(case, result):
    """Where the published figures (counted from the first mmad) lie in this run's per-pipe summary."""
    pipes = result.report().timing["pipes"]
    m, fix = pipes["AIC.M"], pipes["AIC.FIX"]
    first = m["end_cycle"] - m["busy_cycles"]  # the eight mmads run back to back once A and B are loaded
    fix_start = fix["end_cycle"] - fix["busy_cycles"]
    rows = [
        f"the 8 mmads run from cycle {first:,.0f} to {m['end_cycle']:,.0f}: {m['busy_cycles']:,.0f} cycles "
        "(published, theoretical: 4156)"
    ]
    if case.params["unit_flag"]:
        rows.append(
            f"the fixpipe starts draining at cycle {fix_start:,.0f}, before the last mmad ends, "
            f"and finishes at {fix['end_cycle']:,.0f}"
        )
    else:
        rows.append(
            f"the fixpipe starts at cycle {fix_start:,.0f}, when the M -> FIX flag lets it: "
            f"{fix_start - first:,.0f} cycles after the first mmad (published, without the unit flag: 4225)"
        )
    return rows


SEED_000 = Seed(
    number="000",
    slug="000-accphase-stphase",
    title="Seed 000: AccPhase and STPhase",
    covers="how `AccPhase` (matmul) and `STPhase` (store/move) drive the L0C unit flag; "
    "three failure cases, three correct patterns",
    summary=_md(
        """
        A PyPTO-Pro usage note, not an API page: it explains how the `phase` argument of the
        matmul family (`matmul`, `matmul_acc`, `matmul_mx`, `matmul_mx_acc`; enum `AccPhase`) pairs
        with the `phase` argument of `store`, `store_tile` and `move` (enum `STPhase`) to drive the
        hardware unit-flag handshake between the cube (pipe M) and the fixpipe (pipe FIX, L0C -> GM
        or L0C -> UB). It lists Ascend 950PR/950DT as supported and Atlas A2/A3 as not supported for
        these arguments; the unit flag underneath exists on A2/A3 as well ([seed 001](001-unit-flag.md)),
        and the cases below run on the chip each one names.

        Either phase turns the unit flag on for that instruction:

        | instruction | phase | waits until | afterwards |
        |---|---|---|---|
        | matmul family (writes L0C) | `AccPhase.Partial` | flag == 0 | flag unchanged |
        | matmul family | `AccPhase.Final` | flag == 0 | flag := 1 |
        | `store` / `store_tile` / `move` (read L0C) | `STPhase.Partial` | flag == 1 | flag unchanged |
        | `store` / `store_tile` / `move` | `STPhase.Final` | flag == 1 | flag := 0 |

        With a phase, the framework inserts no software sync between M and FIX for that L0C tile:
        the flag is the only ordering (automatic sync of L1, L0A, L0B tiles is unaffected). Without a
        phase, it inserts the M -> FIX sync itself. Two rules follow: **pairing** (if any matmul on an
        L0C tile has a phase, the store or move reading it needs one too) and **Final closing** (the
        last write and the last read of an L0C tile use `Final`). Misuse gives wrong results or a
        hang. The document shows three failure cases and three correct patterns, all reproduced below.

        In ascjax the phases are `unit_flag_mode` values: `Partial` = `ENABLE_KEEP` (2), `Final` =
        `ENABLE_UPDATE` (3), and either spelling is accepted wherever a mode goes (see
        [the unit flag](../unit-flag.md)). `matmul`, `matmul_acc` and `store` without a phase model the
        framework's M -> FIX sync.
        """
    ),
    examples=(
        Example(
            "error-1",
            "Failure case 1: a matmul with no Final hangs the store",
            _md(
                """
                `matmul(ac, al, br, phase=Partial)` then `store(out, ac, [0, 0], phase=Final)`:
                **hang**. `Partial` checks the flag but never sets it, so it stays 0; the `Final`
                store waits for 1 forever.
                """
            ),
            (Run(f"{K_UF}::seed000_error1", (Code(K_UF, "seed000_error1_kernel"),)),),
            after=_md(
                """
                The fixpipe is stuck on the 128 blocks of the 128 x 128 float32 tile (64 KB / 512 B),
                and the report names the mmad that last touched them and its mode.
                """
            ),
        ),
        Example(
            "error-2",
            "Failure case 2: a store with no phase reads unfinished data",
            _md(
                """
                A K loop of `matmul(Partial)` then `matmul_acc(Final)`, then `store(out, ac, [0, 0])`
                with no phase: **precision problem**. The matmuls have phases, so the framework
                inserts no M -> FIX sync; the store has none, so it does not wait for the flag. Either
                way the fixpipe is not held until the matmul is done and reads unfinished data.
                """
            ),
            (Run(f"{K_PH}::seed000_error2", (Code(K_PH, "seed000_error2"),)),),
            code=(KLOOP_PHASES,),
            after=_md(
                """
                ascjax reports this as a `race`: a read-after-write on L0C that nothing orders.
                `python -m ascjax run kernels/phases.py::seed000_error2 --poison-races` makes the racy
                read produce NaN, so the damage shows in the output. The [sanitizer page](../sanitizer.md)
                has all 81 phase choices of this K loop.
                """
            ),
        ),
        Example(
            "error-3",
            "Failure case 3: store(Partial) in a loop hangs the next matmul",
            _md(
                """
                A loop of `matmul(ac, al, br, phase=Final)` and `store(out, ac, [0, 0], phase=Partial)`
                on the same L0C: **hang**. The first matmul sets the flag to 1; the `Partial` store reads
                but leaves it at 1; the second iteration's matmul waits for 0 forever. (The seed writes
                `AccPhase.Partial` on the store; both `Partial` spellings are the same mode, `ENABLE_KEEP`.)
                """
            ),
            (Run(f"{K_UF}::seed000_error3", (Code(K_UF, "seed000_error3_kernel"),)),),
            after="The report gives the loop iteration of the stuck mmad: the second one, `(1)` counted from 0.",
        ),
        Example(
            "single-matmul",
            "Correct pattern: a single matmul with no phase",
            _md(
                """
                `matmul(ac, al, br)` then `store(out, ac, [0, 0])`, no phase on either: **correct**. The
                framework inserts the M -> FIX sync itself.
                """
            ),
            (
                Run(
                    f"{K_UF}::single_matmul_sync",
                    (Code(K_UF, "single_matmul_sync_kernel"),),
                    note="The unit flag off on both sides and the M -> FIX sync that the framework inserts, written out.",
                ),
                Run(
                    f"{K_PH}::kloop_no_phase",
                    (Code(K_PH, "kloop_no_phase"), KLOOP_PHASES),
                    note="The PyPTO-Pro spelling (`matmul`, `matmul_acc`, `store` with no phase) over a K loop: "
                    "ascjax models the sync the framework inserts.",
                ),
            ),
        ),
        Example(
            "k-split",
            "Correct pattern: K-split accumulation over several blocks",
            _md(
                """
                `Partial` for the first block, `Partial` for the middle ones, `Final` for the last, and
                `store(..., phase=STPhase.Final)` to close: **correct**. Every matmul finds the flag at 0;
                only the last sets it to 1; the store waits for that and hands the tile back with 0.
                """
            ),
            (Run(f"{K_PH}::kloop_recipe", (Code(K_PH, "kloop_recipe"),)),),
            code=(KLOOP_PHASES, Code(K_PH, "_pick")),
        ),
        Example(
            "flash-attention",
            "Correct pattern: flash attention (matmul, then move to UB)",
            _md(
                """
                When the vector cores must compute on the matmul result (a softmax), it goes L0C -> UB
                through `move` (`store` can only write GM): the cube computes QK over the K tiles with
                `Partial` for `k == 0` and `Final` otherwise, then
                `move(qk_vec, ac, acc_to_vec_mode=DualModeSplitN, phase=STPhase.Final)`; the vector side
                runs the softmax (row max, subtract, exp, sum, scale) and stores P.
                """
            ),
            (
                Run(
                    f"{K_FA}::f16_s187_d64",
                    (
                        Code(K_FA, "_qk", "last = len(", "set_cross_core"),
                        Code(K_FA, "_softmax", "pl.mul(work, s, scale)", "pl.sum(stat, work"),
                    ),
                    note="Head dim 64 in K tiles of 32: exactly two tiles, `Partial` then `Final`, as in the "
                    "seed. The whole kernel (ping-pong slots, online softmax, the second matmul) is described "
                    "in [flash attention](../flash-attention.md).",
                ),
                Run(
                    f"{K_PH}::two_tile_pattern_with_eight_tiles",
                    (Code(K_PH, "two_tile_pattern_with_eight_tiles"),),
                    note=_md(
                        """
                        The seed's loop (`Partial` if `k == 0`, else `Final`) is right only for exactly two
                        K tiles. With more, the second tile's `Final` sets the flag and the third tile's
                        matmul waits for the store to clear it, which comes only after the loop: a hang.
                        The general recipe is the [K-split pattern](#k-split) above (`Final` on the last
                        tile only), which `f16_s187_d64` follows.
                        """
                    ),
                ),
            ),
        ),
    ),
)

SEED_001 = Seed(
    number="001",
    slug="001-unit-flag",
    title="Seed 001: the unit flag",
    covers="one flag per 512 B of L0C, modes 2/3, K-loop and split-N recipes, "
    "direction rule, size mismatch and reset, a performance measurement",
    summary=_md(
        """
        The Ascend C feature page for **UnitFlag**. `Mmad` and `Fixpipe` take a `unitFlag` parameter;
        with 2 or 3 the hardware keeps one flag per 512 B block of L0C saying whether the block may be
        written (0) or read (1):

        | instruction | waits until | `unitFlag = 2` (0b10) after | `unitFlag = 3` (0b11) after |
        |---|---|---|---|
        | `Mmad` (writes L0C) | flag == 0 | stays 0 | flag := 1 |
        | `Fixpipe` (reads L0C) | flag == 1 | stays 1 | flag := 0 |

        Two recipes follow: a K loop (A 128 x 1024, B 1024 x 128 in K tiles of 128: 8 `Mmad`s, the first
        7 with 2 and the last with 3, one `Fixpipe` with 3) and a split along N (one `Mmad` of
        128 x 256 with 3, read out by two `Fixpipe`s of 128 x 128, each with 3). With the unit flag on,
        the cube's compute order should match the fixpipe's read order: N first (`SetMMRowMajor`) when
        the fixpipe converts NZ -> ND or merges channels, M first (`SetMMColumnMajor`) otherwise. The
        constraints: `Mmad` and `Fixpipe` must both enable it; of several instructions that keep a
        block busy, all but the last use 2 and the last 3; `Mmad` and `Fixpipe` should cover the same
        data (an `Mmad` of 128 x 128 read by a `Fixpipe` of 64 x 64 may execute abnormally), and
        `SetFixPipeConfig()` resets the flags. The K-loop code puts `PipeBarrier<PIPE_M>` between
        `Mmad`s when `(m / 16) * (n / 16)` is below a limit (see [seed 004](004-asc-mmad.md#small-tile)).
        The page ends with a performance table for half inputs whose figures this copy omits; ascjax's
        timing model is fitted to the published measurement (see [timing](../timing.md)).

        In ascjax, `unit_flag_mode` is `DISABLE` (0), `ENABLE_KEEP` (2) or `ENABLE_UPDATE` (3) on
        `mmad`, `fixpipe` and `copy_l0c2ub`; `set_l0c_copy_config(is_clean_unit_flag=True)` is the
        reset (see [the unit flag](../unit-flag.md)).
        """
    ),
    examples=(
        Example(
            "k-loop",
            "Recipe: a K loop of 8 Mmads and one Fixpipe",
            _md(
                """
                A [128, 1024] x B [1024, 128] in 8 K steps of 128: the first 7 `Mmad`s use 2 (the flag
                stays 0, so the next `Mmad` may write), the last uses 3 (flag := 1, the `Fixpipe` may
                read), the `Fixpipe` uses 3 (flag := 0, later `Mmad`s may write). **Correct result.**
                """
            ),
            (Run(f"{K_UF}::kloop_f16"), Run(f"{K_UF}::kloop_bf16")),
            code=(Code(K_UF, "kloop_kernel", "mode = jnp.where", "k.fixpipe("),),
            after="The mode is a traced value chosen by the loop index, so the 8 steps are one `lax.scan`.",
        ),
        Example(
            "split-n",
            "Recipe: one Mmad read out by two Fixpipes along N",
            _md(
                """
                An L0C result of M 128 x N 256 moved out in two halves along N: the `Mmad` uses 3, and
                **each** `Fixpipe` uses 3. **Correct.**
                """
            ),
            (Run(f"{K_UF}::split_n", (Code(K_UF, "split_n_kernel"),)),),
            after=_md(
                """
                Each fixpipe waits only for the blocks of the region it reads and clears only those:
                the two halves are disjoint sets of 512 B blocks.
                """
            ),
        ),
        Example(
            "direction",
            "Rule: the mmad direction follows the fixpipe's read order",
            _md(
                """
                With the unit flag on, call `SetMMRowMajor()` (N first) when the `Fixpipe` converts
                NZ -> ND or does channel merge, `SetMMColumnMajor()` (M first) otherwise; a matching
                order gives better performance.
                """
            ),
            (Run(f"{K_SR}::uf_direction_m", (Code(K_SR, "direction_kernel"),)),),
            after=_md(
                """
                The result is right either way, so the verdict stays `ok`; ascjax names the fixpipe in a
                warning. Every kernel on this page that converts NZ -> ND calls `set_mmad_direction("n")`.
                """
            ),
        ),
        Example(
            "both-sides",
            "Rule: Mmad and Fixpipe must both enable the unit flag",
            _md(
                """
                The unit flag works only when both `Mmad` and `Fixpipe` enable it. Once it is on, no other
                sync is inserted between them.
                """
            ),
            (Run(f"{K_SR}::uf_one_side", (Code(K_SR, "one_side_kernel"),)),),
            after=_md(
                """
                The fixpipe neither waits for the flag nor for an M -> FIX flag, so it reads L0C while the
                mmad may still write it. [Seed 000's failure case 2](000-accphase-stphase.md#error-2) is
                the same mistake in PyPTO-Pro spelling.
                """
            ),
        ),
        Example(
            "size-mismatch",
            "Constraint: the Fixpipe must drain what the Mmad wrote (and the reset)",
            _md(
                """
                An `Mmad` that computes 128 x 128 but a `Fixpipe` that moves out only 64 x 64 of it may
                **execute abnormally**: the blocks never read stay at 1. `SetFixPipeConfig()` resets the
                L0C state (every flag to 0).
                """
            ),
            (Run(f"{K_UF}::size_mismatch"), Run(f"{K_UF}::size_mismatch_reset")),
            code=(Code(K_UF, "size_mismatch_kernel"),),
            after=_md(
                """
                128 x 128 float32 is 128 blocks of 512 B; the 64 x 64 fixpipe drains 32 of them, and the
                second mmad waits on the other 96. With the reset in between (`reset=True`,
                `asc_set_l0c_copy_config(..., is_clean_unit_flag=True)` in the C-API) the same program
                runs to the end.
                """
            ),
        ),
        Example(
            "measurement",
            "Performance: with and without the unit flag",
            _md(
                """
                The page's performance table compares the K loop with and without the unit flag for half
                inputs (single-instruction cost, bandwidth and latency included). The published
                measurement, half 128 x 256 x 512 in 8 K loops, is 4156 cycles in theory, **4209** with
                the unit flag and **4225** without it.
                """
            ),
            (
                Run(f"{K_UF}::measurement_with_unit_flag", show=_measurement_rows),
                Run(f"{K_UF}::measurement_with_software_sync", show=_measurement_rows),
            ),
            code=(Code(K_UF, "measurement_kernel", "def step", "k.fixpipe("),),
            after=_md(
                """
                The totals include loading A and B (MTE2) and the drain; the published figures count from
                the first mmad, and the second block under each output reads them off the per-pipe lines.
                With the unit flag the fixpipe drains each block as soon as the last mmad has written it,
                so the kernel ends earlier. The model's two hand-off latencies (flag and unit flag) are
                fitted to the published 4225 and 4209; see [timing](../timing.md) for the model and its
                accuracy.
                """
            ),
        ),
    ),
)

SEED_002 = Seed(
    number="002",
    slug="002-cross-core",
    title="Seed 002: cross-core synchronisation",
    covers="cube-vector sync with `set_cross_core` / `wait_cross_core`: pipes, "
    "event ids, `sync_mode`, READY/RELEASE, ping-pong slots, six checks, real kernels",
    summary=_md(
        """
        A PyPTO-Pro design guide for synchronisation across cores: between the cube (AIC) and the two
        vector cores (AIV) of one block, and across blocks or sub-blocks. `pl.system.set_cross_core` and
        `pl.system.wait_cross_core` only pass a "you may proceed" signal; data still moves by `load`,
        `store`, `move` and `insert`, and the events order those moves (happens-before). The guide
        covers the manual pipeline, in four steps: decide whether a cross-core sync is needed at all
        (intra-core order is `mutex_ids`/`auto_mutex`, `sync_src`/`sync_dst`, `mem_bar` and the unit
        flag, none of which orders cube against vector), choose where the shared data lives (GM
        workspace, L1, UB), place set and wait and plan the event ids, and record and check the design.

        Its rules:

        - **Placement.** The producer sets after its last write, the consumer waits before its first
          read. A wait may run before its set (it blocks), but every set must be consumed on every path.
        - **Pipe.** `pipe` is the hardware pipe that executes the set or wait, chosen by the data
          operation next to it, not by the section: the cube sets on FIX after a store or move out of
          L0C, the vector waits on MTE2 before a GM load or on V before computing on UB that a `move`
          filled, the vector sets on MTE3 after a store or an `insert`, the cube waits on MTE1 before
          moving L1 -> L0 or on MTE2 before a GM load.
        - **`sync_mode`.** The same on both sides: `INTRA_BLOCK` (a cube wait needs both AIVs, a cube
          set reaches both), `UNICAST_BLOCK` (one AIV), `INTER_SUBBLOCK` (between the two AIVs),
          `INTER_BLOCK` (across blocks; restricted).
        - **`event_id`** in [0, 16), the same for a set and its wait; not reused for another channel
          while its signal is unconsumed; a separate resource from `mutex_ids`.
        - **Reused buffers** need READY (producer -> consumer) and RELEASE (consumer -> producer). With
          a pre-posted RELEASE, a slot used n times sees n + 1 RELEASE sets and n + 1 waits (the last
          at the producer's end, confirming the last read); without it, n and n; READY is n and n. The
          same scheme in init, body and tail.
        - **TileGroup slots.** `group[i]` does not move the cursor and is not taken modulo the depth:
          `i` must lie in [0, depth). Ping-pong: `slot = task_idx % depth`, READY/RELEASE ids per slot.
        - **Six checks** for every design: slot mapping, event positions, pairing without a wait cycle,
          execution counts per slot, boundary paths (zero, one, exact, tail), participants.

        It then walks through four real kernels: `matmul_softmax`, `vec_cube_abs_sqrt_matmul`, Engram
        forward and KDA `chunk_h`. ascjax's model of all this is on
        [vector cores and cross-core events](../cross-core.md) and [concurrent sections](../sections.md);
        every report of a kernel with cross-core events ends with the event table that the guide asks
        designers to fill in.
        """
    ),
    examples=(
        Example(
            "one-way",
            "Cube -> vector, one way: matmul_softmax",
            _md(
                """
                One-way dependency (READY only): the cube writes, then sets; the vector waits, then reads.
                The seed's reference implementation is `matmul_softmax`: the cube does the matmul,
                `move(mm1_res, tile_c1, acc_to_vec_mode=DualModeSplitM)`, then
                `set_cross_core(pipe=FIX, event_id=0)`; each AIV does `wait_cross_core(pipe=V,
                event_id=0)` before `row_max` / `exp` / `row_sum` on its half. The cube's own steps are
                ordered by intra-core `sync_src` / `sync_dst` (MTE2 -> MTE1, MTE1 -> M, M -> FIX), which do
                not order the vector side.
                """
            ),
            (
                Run(f"{K_MS}::matmul_softmax"),
                Run(f"{K_MS}::matmul_softmax_no_set", note="No set: both AIVs wait forever (a deadlock)."),
                Run(
                    f"{K_MS}::matmul_softmax_no_wait",
                    note="No wait: the AIVs compute on UB while the move may still write it (a race).",
                ),
            ),
            code=(Code(K_MS, "matmul_softmax_kernel", "pl.matmul(acc", "pl.expand_div"),),
        ),
        Example(
            "vector-to-cube",
            "Vector -> cube: vec_cube_abs_sqrt_matmul",
            _md(
                """
                The reverse direction: each AIV computes `sqrt(|x|)` in UB, converts it to NZ and
                `insert`s it into L1, then `set_cross_core(pipe=MTE3, event_id=2)`; the cube does
                `wait_cross_core(pipe=MTE1, event_id=2, sync_mode=INTRA_BLOCK)` before moving L1 -> L0A
                for the matmul. On the device the 64 x 64 float32 case passes with a maximum difference of
                3.815e-06 against a tolerance of 1e-3. Under `INTRA_BLOCK` the cube's wait needs **both**
                AIVs to have set (check 6, participants).
                """
            ),
            (
                Run(f"{K_VC}::vec_cube_abs_sqrt_matmul"),
                Run(
                    f"{K_VC}::vec_cube_no_wait",
                    note="No wait: the cube runs ahead and reads L1 before the inserts wrote it.",
                ),
                Run(
                    f"{K_VC}::vec_cube_one_aiv_sets",
                    note="Only AIV0 sets: the `INTRA_BLOCK` wait also needs AIV1 (check 6, participants).",
                ),
            ),
            code=(Code(K_VC, "vec_cube_kernel", "pl.abs(x_vec", "pl.matmul(acc"),),
        ),
        Example(
            "pipes",
            "Rule: the pipe of a set or wait is the one of the data operation next to it",
            _md(
                """
                `pipe` must agree with the data operation adjacent to the sync point: e.g. a vector set
                after a store to GM runs on MTE3. A set on another pipe does not wait for that operation,
                so the signal can go out before the data.
                """
            ),
            (
                Run(f"{K_SR}::xc_set_on_mte3"),
                Run(f"{K_SR}::xc_set_on_v", note="The same kernel with `set_pipe=PIPE.V`."),
            ),
            code=(Code(K_SR, "set_pipe_kernel"),),
            after=_md(
                """
                ascjax warns about a set or wait on another pipe than the data op next to it whatever the
                verdict; here the misplaced set also leaves the store and the load unordered, which the
                sanitizer reports as a race.
                """
            ),
        ),
        Example(
            "sync-mode",
            "Rule: set and wait use the same sync_mode; INTER_BLOCK is restricted",
            _md(
                """
                The two sides of an event must use the same `sync_mode`. `INTER_BLOCK` and
                `UNICAST_BLOCK` are restricted modes: use them only where the product supports them and
                the algorithm needs them.
                """
            ),
            (
                Run(f"{K_SR}::xc_mode_mismatch", (Code(K_SR, "mode_mismatch_kernel"),)),
                Run(
                    f"{K_SR}::xc_inter_block",
                    (Code(K_SR, "inter_block_kernel"),),
                    raises="ValueError",
                    note="ascjax runs one block per `run` and no inter-block events between the blocks of "
                    "`ascjax.launch` (see [multi-block launch](../multi-block.md)).",
                ),
            ),
        ),
        Example(
            "event-ids",
            "Rule: event ids lie between 0 and 15",
            _md(
                """
                `event_id` lies in [0, 16), and every runtime value of a dynamic id expression must too.
                A set and its wait use the same id.
                """
            ),
            (Run(f"{K_SR}::xc_event_id_16", (Code(K_SR, "event_16_kernel"),), raises="ValueError"),),
            after=_md(
                """
                A static id is checked while tracing; a traced one out of range is a `sync_error` verdict
                for that scenario. Reusing an id for a second channel while its signal is unconsumed is
                shown by [KDA's broken twin](#kda_shared_id).
                """
            ),
        ),
        Example(
            "tile-group-index",
            "Rule: a TileGroup index is not taken modulo the depth",
            _md(
                """
                `group[i]` selects a slot without reading or advancing the cursor; `i` may be a runtime
                expression, but the framework does not take it modulo the depth: every runtime value must
                lie in [0, depth).
                """
            ),
            (Run(f"{K_SR}::tile_group_index_2", (Code(K_SR, "group_index_kernel"),)),),
        ),
        Example(
            "ping-pong",
            "READY + RELEASE with a pre-posted RELEASE: ping-pong slots",
            _md(
                """
                Reusing buffers needs READY ("this round's data is written") and RELEASE ("the last round
                is read, the slot may be written again"). Before the loop the vector side posts an initial
                RELEASE per slot; each use is: the cube writes and sets READY, the vector waits for READY,
                reads and sets RELEASE, and the cube waits for RELEASE before the next write to the slot,
                or before its end after the slot's last use. Slot 1 does the same with other ids. Counts
                for a slot used n times: READY n sets and n waits; RELEASE n + 1 and n + 1. Every trip
                count must pair up: zero, one, even, odd.
                """
            ),
            (
                Run(f"{K_PP}::pingpong_odd"),
                Run(f"{K_PP}::pingpong_even"),
                Run(f"{K_PP}::pingpong_one"),
                Run(f"{K_PP}::pingpong_zero"),
                Run(
                    f"{K_PP}::pingpong_no_final_release",
                    note="Without the final RELEASE waits the last signals are never consumed.",
                ),
                Run(
                    f"{K_PP}::pingpong_sections_odd",
                    (Code(K_PP, "pingpong_sections_kernel", "@pl.section_cube"),),
                    note="The same protocol as a cube program and a vector program running concurrently, "
                    "each with its own loop ([concurrent sections](../sections.md)).",
                ),
                Run(f"{K_PP}::pingpong_sections_zero"),
                Run(f"{K_PP}::pingpong_sections_no_final_release"),
            ),
            code=(
                Code(K_PP, "_vector_prologue"),
                Code(K_PP, "_produce", "pl.system.wait_cross_core", "set_cross_core"),
                Code(K_PP, "_consume"),
                Code(K_PP, "_cube_epilogue"),
            ),
            after=_md(
                """
                In the five-tile event table, slot 0 (used 3 times) shows READY (event 0) set and waited
                3 times and RELEASE (event 2) 4 times: the seed's n + 1 rule. The trip count is traced, so
                one compiled kernel serves all of them.
                """
            ),
        ),
        Example(
            "engram",
            "Engram forward: READY / ACK ids alternating by head, and the cold start",
            _md(
                """
                `engram_forward_impl.py`: READY ids `(0, 1)` and ACK ids `(2, 3)`, chosen by `h % 2`. The
                cube stores head `h` to GM, then `set_cross_core(pipe=FIX, event_id=K_READY_IDS[h % 2])`;
                before overwriting that slot it waits `ACK_IDS[h % 2]` on FIX. The vector waits READY on
                MTE2, consumes, and sets ACK on MTE3. The cube skips the ACK wait for its first two heads;
                otherwise it waits for an ACK that never comes: a **deadlock**.
                """
            ),
            (
                Run(f"{K_EN}::engram"),
                Run(
                    f"{K_EN}::engram_no_cold_start",
                    note="The report ends with the wait-for chain: the cube waits for an ACK, the AIVs for a READY "
                    "the cube sends only after it, a cycle (check 3).",
                ),
                Run(f"{K_EN}::engram_no_ack_wait"),
                Run(f"{K_EN}::engram_no_drain"),
                Run(
                    f"{K_EN}::engram_sections",
                    note="The remaining four run the same pipeline as two concurrent sections.",
                ),
                Run(f"{K_EN}::engram_sections_no_cold_start"),
                Run(f"{K_EN}::engram_sections_no_ack_wait"),
                Run(f"{K_EN}::engram_sections_no_drain"),
            ),
            code=(
                Code(K_EN, "_cube_head", "if variant", "set_cross_core"),
                Code(K_EN, "_cube_epilogue", "if variant"),
                Code(K_EN, "_vector_head", "pl.system.wait_cross_core", "set_cross_core(pipe=PIPE.V"),
            ),
            after=_md(
                """
                ascjax's kernel sends the ACK on V, after the vector ops that follow the slot's load (the
                MTE2 -> V flag orders them after it), rather than on MTE3 after the store to the output as
                in the seed: either way the ACK comes after the last read of the slot. The cold-start skip
                is the seed's scheme without a pre-posted RELEASE: slot 0 serves heads 0 and 2, and its ACK
                (event 2) is set twice and waited twice (before the reuse, and in the drain after the
                loop), n and n; READY is n and n too.
                """
            ),
        ),
        Example(
            "kda",
            "KDA chunk_h: four channels on four event ids",
            _md(
                """
                `chunk_h_kda_impl.py`: in one chunk loop, four events, one per data channel: event 3
                (vector stores the w/s workspace on MTE3, the cube waits on MTE2 and loads it for
                `WS = W @ S`), event 0 (the cube moves WS to UB and sets on FIX, the vector waits on V for
                `ws = kv - ws`), event 1 (the vector's `v_corr`, MTE3 -> MTE2) and event 2 (the cube's KV
                moved to UB, FIX -> V, for `S = exp(g_total) * S + KV`). Each is set after its channel's
                last write and waited before its first read, and no id is reused: an `event_id` must not
                serve another channel while its signal is unconsumed.
                """
            ),
            (
                Run(f"{K_KDA}::kda_chunk_h"),
                Run(
                    f"{K_KDA}::kda_shared_id",
                    note="Channel 1 reuses event 0: the cube sets it a second time before the AIVs consumed "
                    "the first signal.",
                ),
                Run(f"{K_KDA}::kda_sections"),
                Run(f"{K_KDA}::kda_sections_shared_id"),
            ),
            code=(Code(K_KDA, "_cube_chunk"), Code(K_KDA, "_vector_chunk")),
            after=_md(
                """
                ascjax's kernel keeps the seed's shape (four channels on ids 0 to 3 in one chunk loop, each
                set after its last write and waited before its first read) with its own data flow: two
                cube -> vector results (K and V ready), a vector -> cube result (h ready) and a RELEASE of
                the workspaces, rather than the seed's w/s, WS, `v_corr` and KV.
                """
            ),
        ),
        Example(
            "checks",
            "The six checks",
            _md(
                """
                1. **Slot mapping**: producer, consumer and READY/RELEASE ids select the same slot.
                2. **Event positions**: READY set after the last write and waited before the first read;
                   RELEASE set after the last read and waited before the next overwrite and before the
                   producer ends.
                3. **Pairing**: every wait has its set on every path, and no wait cycle.
                4. **Execution counts** per slot (n + 1 RELEASE with a pre-post, n and n without).
                5. **Boundary paths**: zero, one, exact and tail trip counts all pair up.
                6. **Participants**: under `INTRA_BLOCK` both AIVs set and wait.
                """
            ),
            (
                Run(
                    f"{K_FA}::slot_mismatch",
                    (Code(K_FA, "_softmax", "slot = j % 2", "read = jnp.where"),),
                    note="Check 1: from the second tile on, the AIVs read scores slot `(j - 1) % 2` after "
                    "waiting for the event of slot `j % 2`.",
                ),
                Run(
                    f"{K_FA}::no_release_wait",
                    (Code(K_FA, "_pv", "release =", "wait_cross_core"),),
                    note="Check 2: the cube reads P from L1 without waiting for the AIVs' P_READY, which is "
                    "also the RELEASE of their scores slot.",
                ),
                Run(
                    f"{K_ZT}::buggy_three_tiles",
                    (Code(K_ZT, "zero_trip_kernel", "with k.vector(0)", "drain the last set"),),
                ),
                Run(
                    f"{K_ZT}::buggy_zero_tiles",
                    note="Check 5: the same program with zero tiles. The drain after the loop waits for a set "
                    "only the loop makes.",
                ),
                Run(
                    f"{K_ZT}::fixed_zero_tiles",
                    note="The fix: pre-post the set before the loop and wait at the top of every iteration, "
                    "so sets and waits pair up for every trip count.",
                ),
            ),
            after=_md(
                """
                The other checks are shown above: positions by
                [`engram_no_ack_wait`](#engram_no_ack_wait) (a RELEASE wait missing before an overwrite)
                and [`pingpong_no_final_release`](#pingpong_no_final_release) (missing at the producer's
                end); pairing and wait cycles by [`engram_no_cold_start`](#engram_no_cold_start) and
                [`matmul_softmax_no_set`](#matmul_softmax_no_set); counts by the event table of
                [`pingpong_odd`](#pingpong_odd); boundary paths by [`pingpong_zero`](#pingpong_zero) and
                [`pingpong_one`](#pingpong_one); participants by
                [`vec_cube_one_aiv_sets`](#vec_cube_one_aiv_sets).
                The zero-trip kernel uses intra-core flags on one AIV: the boundary-path check applies to
                any wait that pairs with a set made in a loop.
                """
            ),
        ),
    ),
)

SEED_004 = Seed(
    number="004",
    slug="004-asc-mmad",
    title="Seed 004: asc_mmad",
    covers="formula, operand buffers and formats, dtypes per architecture, "
    "parameters, constraints, a complete int8 example kernel",
    summary=_md(
        """
        The API reference of `asc_mmad`, the Ascend C C-API matrix multiply-accumulate:
        `C[M x N] = A[M x K] x B[K x N] + C[M x N]` on pipe M, effective on the AIC only. A sits in L0A,
        B in L0B, C in L0C; fractal formats are A `Nz` (16 x K0), B `Zn` (K0 x 16), C `Nz` (16 x 16) on
        NPU architecture 3510 (Ascend 950PR/950DT) and A `Zz`, B `Zn`, C `Nz` on 2201 (Atlas A2/A3),
        with K0 = 32 B / sizeof(dtype) (64 for int4). C starts as zeros (`c_matrix_init_val`), the
        current L0C contents, or the BiasTable row broadcast over M (`c_matrix_source`); a second
        overload takes an explicit bias address.

        | | 3510 (950) | 2201 (A2/A3) |
        |---|---|---|
        | L0A / L0B / L0C / BiasTable | 64 KB / 64 KB / 256 KB / 4 KB | 64 KB / 64 KB / 128 KB / 1 KB |
        | a x b -> c | int8 -> int32; half, bfloat16, float -> float; hifloat8 and the four fp8 pairs -> float | int8 -> int32; half, bfloat16, float -> float; int4 (`asc_mmad_s4`) -> int32 |
        | extra parameter | `disable_gemv` (M = 1 runs GEMV, A read as ND) | `k_direction_align` (float: K aligned to 8 or 16) |

        Parameters `m`, `k`, `n` are the valid sizes in [0, 4095]; buffers are allocated padded (M, N to
        16, K to K0) and padding does not contribute; any of them 0 makes the call a NOP. C must be
        1024 B aligned, A and B 512 B, a bias address 64 B, and no operand may run past its buffer.
        Constraints: K-split mmads accumulating into the same L0C need a `PIPE_M` barrier between them
        when `(m / 16) * (n / 16) < 10`; the unit-flag rules of [seed 001](001-unit-flag.md); in
        saturation mode (CTRL[48] = 0, the default) inf results saturate to +-max and NaN to 0, in
        non-saturation mode they stay (integers always saturate). The page ends with a complete int8
        example kernel for 950 with its host code.
        """
    ),
    examples=(
        Example(
            "int8-example",
            "The complete example: an int8 mmad on Ascend 950",
            _md(
                """
                M = 48, K = 96, N = 80, int8 -> int32. The host fills `a[row, k] = (row + 2k) % 5 - 2` and
                `b[col, k] = (3col + k) % 7 - 3` (B kept N x K in GM), the kernel loads both into L1 with
                ND -> NZ, moves them to L0A / L0B (MTE2 -> MTE1 flag), runs
                `asc_mmad(c_l0, a_l0, b_l0, M, K, N, DISABLE, true, false, true)` (MTE1 -> M flag), moves C
                out with the unit flag off (M -> FIX flag) and ends with `asc_sync_pipe(PIPE_ALL)`. The
                host compares the output with `golden[row, col] = sum_k a[row, k] * b[col, k]` and prints
                `[Success] asc_mmad passed.`
                """
            ),
            (
                Run(
                    f"{K_MM}::seed004_int8",
                    (Code(K_MM, "asc_mmad_kernel"),),
                    show=_int8_rows,
                    note="The second block is what the seed's host code prints, computed from this run's "
                    "inputs and output.",
                ),
            ),
        ),
        Example(
            "alignment",
            "Rule: operand addresses are aligned",
            _md(
                """
                C's start address in L0C must be 1024 B aligned, A's and B's 512 B, the bias address 64 B.
                """
            ),
            (Run(f"{K_SR}::mmad_c_misaligned", (Code(K_SR, "misaligned_c_kernel"),), raises="ValueError"),),
            after="Every placement rule (alignment, capacity, overlap, format) is checked when the tile is allocated.",
        ),
        Example(
            "capacity",
            "Rule: buffer sizes per architecture",
            _md(
                """
                L0C is 256 KB on Ascend 950 and 128 KB on Atlas A2/A3; an operand's start address and size
                must stay inside its buffer.
                """
            ),
            (
                Run(f"{K_SR}::l0c_256k_on_a2", raises="ValueError"),
                Run(f"{K_SR}::l0c_256k_on_950"),
            ),
            code=(Code(K_SR, "l0c_256k_kernel"),),
        ),
        Example(
            "dtypes",
            "Rule: the supported dtype combinations depend on the architecture",
            _md(
                """
                Arch 3510 accepts int8, hifloat8, fp8 (four pairs), half, bfloat16 and float; arch 2201
                int8, half, bfloat16, float and int4. Any other combination is not supported.
                """
            ),
            (Run(f"{K_SR}::mmad_hifloat8_on_a2", (Code(K_SR, "hifloat8_kernel"),), raises="ValueError"),),
            after="The same kernel on chip `950` is accepted; [numerics](../numerics.md) covers the low-precision formats.",
        ),
        Example(
            "zero-size",
            "Rule: m, k or n equal to 0 makes the call a NOP",
            _md(
                """
                `m`, `k` and `n` are the valid sizes; any of them 0 and the instruction is a NOP, leaving C
                as it was.
                """
            ),
            (Run(f"{K_SR}::mmad_k_zero_is_nop", (Code(K_SR, "zero_k_kernel"),)),),
            after="The result equals one mmad's: the error against `A @ B` is within tolerance.",
        ),
        Example(
            "bias",
            "Parameter: C initialised from the BiasTable",
            _md(
                """
                With `c_matrix_init_val=false` and `c_matrix_source=true`, C starts from the BiasTable
                (read from address 0), a 1 x N row broadcast over the M rows.
                """
            ),
            (
                Run(
                    f"{K_SR}::mmad_bias_table",
                    (Code(K_SR, "_stage", "if bias:", "k.copy_l12bt"), Code(K_SR, "bias_table_kernel")),
                ),
            ),
        ),
        Example(
            "gemv",
            "Rule: M = 1 runs GEMV, which reads A as ND",
            _md(
                """
                When M is 1 (and, on 3510, `disable_gemv` is false) the cube runs GEMV and reads A from L0A
                in ND layout; A must then be laid out in ND.
                """
            ),
            (Run(f"{K_SR}::mmad_gemv_fractal_a", (Code(K_SR, "gemv_kernel"),), raises="ValueError"),),
            after="With a traced `m` the same mistake is a `layout` verdict for the scenarios where `m == 1`.",
        ),
        Example(
            "small-tile",
            "Sync rule: a PIPE_M barrier between small accumulating mmads",
            _md(
                """
                When K-split mmads accumulate into the same L0C and `(m / 16) * (n / 16) < 10`, call
                `asc_sync_pipe(PIPE_M)` between consecutive mmads.
                """
            ),
            (Run(f"{K_SR}::mmad_small_tile_no_barrier"), Run(f"{K_SR}::mmad_small_tile_barrier")),
            code=(Code(K_SR, "small_tile_kernel"),),
        ),
        Example(
            "saturation",
            "Special values: saturation mode (CTRL[48])",
            _md(
                """
                With CTRL[48] = 0 (saturation mode) inf results saturate to +-max and NaN results become 0;
                with CTRL[48] = 1 inf and NaN are kept. NaN inputs should be avoided; integers always
                saturate.
                """
            ),
            (
                Run(f"{K_SR}::mmad_saturation", show=_special_rows),
                Run(f"{K_SR}::mmad_no_saturation", show=_special_rows),
            ),
            code=(Code(K_SR, "saturation_kernel"), Code(K_SR, "_special_inputs")),
            after="Rows 0 to 2 are +inf, -inf and inf - inf (NaN); row 3 is the plain sum 16 of ones.",
        ),
        Example(
            "aic-only",
            "Rule: asc_mmad works on the AIC only",
            _md(
                """
                The interface takes effect only on the AIC; called on an AIV it returns at once.
                """
            ),
            (
                Run(
                    f"{K_SR}::mmad_on_aiv",
                    (Code(K_SR, "mmad_on_aiv_kernel"),),
                    raises="ValueError",
                    note="ascjax is stricter than the seed here: rather than skipping the call silently, it "
                    "refuses a cube op issued on a vector core, naming the section to move it to.",
                ),
            ),
        ),
    ),
)

SEEDS = {s.number: s for s in (SEED_000, SEED_001, SEED_002, SEED_004)}


# =========================================================================================
# Running cases and writing pages
# =========================================================================================
@dataclasses.dataclass
class Outcome:
    target: str
    text: str  # what `python -m ascjax run TARGET` prints (and its error line, if it cannot run)
    description: str
    chip: str
    expected: str  # a verdict label, or the exception the case is refused with
    actual: str
    cycles: float | None = None
    err: float | None = None
    atol: float = 0.0
    extra: list[str] = dataclasses.field(default_factory=list)

    @property
    def agrees(self) -> bool:
        return self.expected == self.actual


def run_target(run: Run) -> Outcome:
    """Run ``python -m ascjax run TARGET`` in this process and keep what it printed and found."""
    seen = {}

    def recording_run_case(c, **kwargs):
        seen["case"] = c
        result, rep, err = aj.run_case(c, **kwargs)
        seen.update(result=result, report=rep, err=err)
        return result, rep, err

    path, name = run.target.split("::")
    case = aj.build_case(path, name)
    out, err_out = io.StringIO(), io.StringIO()
    with (
        mock.patch.object(cli, "run_case", recording_run_case),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err_out),
    ):
        code = cli.main(["run", run.target])
    text = out.getvalue()
    if code != 0:  # the command's own error line (stderr also holds library warnings: leave those out)
        text += "".join(line for line in err_out.getvalue().splitlines(True) if line.startswith("error:"))
    expected = run.raises or case.expect.label
    outcome = Outcome(run.target, text.rstrip("\n"), case.description, case.chip, expected, "", atol=case.atol)
    if "report" in seen:
        rep = seen["report"]
        outcome.actual, outcome.cycles, outcome.err = rep.verdict.label, rep.cycles, seen["err"]
        if run.show is not None:
            outcome.extra = run.show(seen["case"], seen["result"])
    else:
        match = re.search(r"error: cannot run: (\w+):", text)
        outcome.actual = match.group(1) if match else "error"
    return outcome


_MODULES: dict[str, object] = {}


def _function(path: str, name: str):
    if path not in _MODULES:
        cases = aj.load_cases(path)
        _MODULES[path] = sys.modules[next(iter(cases.values())).__module__]
    return getattr(_MODULES[path], name)


def render_code(code: Code) -> str:
    """A fenced Python block of the function's lines, numbered as in its file."""
    lines, first = inspect.getsourcelines(_function(code.path, code.name))
    lo, hi = 0, len(lines) - 1
    if code.start is not None:
        lo = next((i for i, line in enumerate(lines) if code.start in line), None)
        if lo is None:
            raise ValueError(f"{code.path}::{code.name} has no line containing {code.start!r}")
    if code.stop is not None:
        hi = next((i for i in range(lo, len(lines)) if code.stop in lines[i]), None)
        if hi is None:
            raise ValueError(f"{code.path}::{code.name} has no line containing {code.stop!r} after {code.start!r}")
    body = textwrap.dedent("".join(lines[lo : hi + 1])).rstrip("\n")
    return f'```python title="{code.path}" linenums="{first + lo}"\n{body}\n```'


def _fmt_err(err: float) -> str:
    return f"{err:.3g}"


def verdict_line(o: Outcome) -> str:
    if o.cycles is None:
        got = f"**refused while tracing: `{o.actual}`**"
        parts = [got + (f" (expected: `{o.expected}`)" if o.expected != o.actual else ", as expected"), "nothing ran"]
    else:
        parts = [f"**verdict `{o.actual}`**" + (", as expected" if o.agrees else f" (expected: `{o.expected}`)")]
        parts.append(f"{o.cycles:,.0f} cycle{'' if o.cycles == 1 else 's'} on chip {o.chip}")
        if o.err is not None:
            parts.append(f"max abs error {_fmt_err(o.err)} against the reference (atol {o.atol:g})")
    line = " · ".join(parts)
    if not o.agrees:
        line += '\n\n!!! warning "ascjax disagrees with the seed here"\n    The case expects `' + o.expected + "`."
    return line


def render_run(run: Run, o: Outcome, case_name: str) -> str:
    out = [f"### `{case_name}` {{ #{case_name} }}", "", f"`{run.target}`: {o.description}", ""]
    for code in run.code:
        out += [render_code(code), ""]
    out += [f"`python -m ascjax run {run.target}`", "", "```text", o.text, "```", ""]
    if o.extra:
        out += ["```text", *o.extra, "```", ""]
    out += [verdict_line(o), ""]
    if run.note:
        out += [run.note, ""]
    return "\n".join(out)


def summarize(outcomes: list[Outcome]) -> str:
    counts = collections.Counter(o.actual for o in outcomes)
    order = ["ok", "deadlock", "leftover", "sync_error", "bounds", "layout", "race", "uninitialized"]
    keys = [k for k in order if k in counts] + sorted(k for k in counts if k not in order)
    parts = ", ".join(f"{counts[k]} {k if k in order else 'refused (' + k + ')'}" for k in keys)
    bad = sum(not o.agrees for o in outcomes)
    tail = "all as expected" if not bad else f"{bad} NOT as expected"
    return f"{len(outcomes)} runs: {parts}; {tail}"


def render_page(seed: Seed, outcomes: dict[str, Outcome]) -> str:
    all_outcomes = [outcomes[r.target] for ex in seed.examples for r in ex.runs]
    summary = summarize(all_outcomes)
    files = sorted({r.target.split("::")[0] for ex in seed.examples for r in ex.runs})
    out = [
        f"# {seed.title}",
        "",
        "<!-- Generated by docs/seeds/generate.py from ascjax's output: edit that script, not this page. -->",
        f"<!-- index: {summary} -->",
        "",
        "## The document",
        "",
        seed.summary,
        "",
        "## What ascjax does with each example",
        "",
        "| example | case | verdict | as the seed says |",
        "|---|---|---|---|",
    ]
    for ex in seed.examples:
        for run in ex.runs:
            o = outcomes[run.target]
            verdict = f"`{o.actual}`" if o.cycles is not None else f"refused (`{o.actual}`)"
            out.append(
                f"| [{ex.title}](#{ex.anchor}) | `{run.target.split('::')[1]}` | {verdict} | "
                f"{'yes' if o.agrees else '**no**'} |"
            )
    out += [
        "",
        f"**{summary}.** Each output below is what `python -m ascjax run FILE::CASE` prints; the code "
        f"comes from {', '.join(f'`{f}`' for f in files)} (line numbers as in the files).",
        "",
    ]
    for i, ex in enumerate(seed.examples, 1):
        lead = "**The seed.**" + ("\n\n" if ex.seed[:1].isdigit() or ex.seed.startswith("- ") else " ")
        out += [f"## {i}. {ex.title} {{ #{ex.anchor} }}", "", lead + ex.seed, ""]
        for code in ex.code:
            out += [render_code(code), ""]
        for run in ex.runs:
            out.append(render_run(run, outcomes[run.target], run.target.split("::")[1]))
        if ex.after:
            out += [ex.after, ""]
    out += [
        "## Regenerating this page",
        "",
        f"`python docs/seeds/generate.py --only {seed.number}` runs these cases again and rewrites the page.",
        "",
    ]
    return "\n".join(out)


INDEX_HEAD = _md(
    """
    # Seed documents

    ascjax reproduces the behaviour described in four Ascend documents (Chinese originals), the
    *seeds*. Each page below summarises one document in English and, for every example and failure
    case it gives, shows the ascjax kernel that reproduces it and the report `python -m ascjax run`
    prints for it: the verdict, the offending op and line, the cycle count and the error against the
    reference. The pages are generated by `docs/seeds/generate.py`, which runs every case again:

    ```
    python docs/seeds/generate.py                 # all four pages and this index (several minutes)
    python docs/seeds/generate.py --only 000,001  # some of them
    ```

    A verdict that differs from the one the seed documents would be marked on its page, and the
    script would exit with status 1.
    """
)

INDEX_TAIL = _md(
    """
    `python -m ascjax list FILE` lists the cases of a kernel file (`kernels/seed_rules.py` holds the
    small ones for the rules no other kernel shows), and `python examples/seed_verdicts.py` prints
    the verdicts of several kernel files' cases as one table. The behaviour these pages show is
    described on
    [the unit flag](../unit-flag.md), [vector cores and cross-core events](../cross-core.md),
    [concurrent sections](../sections.md) and [the sync sanitizer](../sanitizer.md).
    """
)


def render_index() -> str:
    rows = ["| seed | document | covers | page | cases | verdicts |", "|---|---|---|---|---|---|"]
    documents = {
        "000": "PyPTO-Pro: `AccPhase` and `STPhase`",
        "001": "Ascend C: `UnitFlag`",
        "002": "PyPTO-Pro: cross-core sync design guide",
        "004": "Ascend C C-API: `asc_mmad`",
    }
    for number, seed in SEEDS.items():
        page = PAGES / f"{seed.slug}.md"
        match = re.search(r"<!-- index: (.*?) -->", page.read_text())
        if match is None:
            raise ValueError(f"{page} has no index line: regenerate it")
        cases = ", ".join(f"`{f.removeprefix('kernels/')}`" for f in _case_files(seed))
        rows.append(
            f"| {number} | {documents[number]} | {seed.covers} | [{seed.title}]({seed.slug}.md) | {cases} | "
            f"{match.group(1)} |"
        )
    return "\n".join([INDEX_HEAD, "", *rows, "", INDEX_TAIL, ""])


def _case_files(seed: Seed) -> list[str]:
    files = []
    for ex in seed.examples:
        for run in ex.runs:
            f = run.target.split("::")[0]
            if f not in files:
                files.append(f)
    return files


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=None, help="seeds to regenerate, e.g. 000,002 (default: all)")
    args = parser.parse_args(argv)
    numbers = list(SEEDS) if args.only is None else [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [n for n in numbers if n not in SEEDS]
    if unknown:
        parser.error(f"unknown seed(s) {', '.join(unknown)}: choose from {', '.join(SEEDS)}")
    os.chdir(ROOT)  # kernel paths, and the source locations in reports, are relative to the repository
    aj.enable_compile_cache()
    start = time.perf_counter()
    disagree = []
    for number in numbers:
        seed = SEEDS[number]
        runs = [r for ex in seed.examples for r in ex.runs]
        print(f"seed {number}: {len(runs)} cases", flush=True)
        outcomes = {}
        for i, run in enumerate(runs, 1):
            t0 = time.perf_counter()
            o = run_target(run)
            outcomes[run.target] = o
            jax.clear_caches()  # one process runs every case: do not keep their executables
            gc.collect()
            mark = "" if o.agrees else f"   <-- expected {o.expected}"
            print(f"  [{i}/{len(runs)}] {run.target}: {o.actual} ({time.perf_counter() - t0:.1f} s){mark}", flush=True)
            if not o.agrees:
                disagree.append(run.target)
        page = PAGES / f"{seed.slug}.md"
        page.write_text(render_page(seed, outcomes))
        print(f"  wrote {page}", flush=True)
    index = PAGES / "index.md"
    missing = [s.slug for s in SEEDS.values() if not (PAGES / f"{s.slug}.md").exists()]
    if missing:  # the index summarises every page: it waits until all of them exist
        print(f"index not written: {', '.join(missing)} not generated yet (run without --only)")
    else:
        index.write_text(render_index())
        print(f"wrote {index}")
    print(f"done in {time.perf_counter() - start:.0f} s")
    if disagree:
        print("verdicts that differ from the seeds: " + ", ".join(disagree))
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
