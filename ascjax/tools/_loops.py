"""Long loops summarised: a run's cycles for any trip count from a few probed trip counts.

The control plane's timing is max-plus linear: every time is a maximum of sums of prices. A loop
whose body is the same each trip is a max-plus power of one body map, and such powers become
periodic after a transient: from some trip count ``t0`` on, ``c`` more trips add the same cycles
``d`` (the cyclicity theorem of max-plus algebra). ``summarise_loop`` runs the kernel for
``1 .. probe`` trips, finds the smallest transient and period that explain every probed step, and
``LoopSummary.cycles(n)`` extends them to any ``n`` in constant time, so a kernel's 2,097,152 K
steps cost what 8 do. Where the probes show no period (a transient longer than they reach) it
says so rather than guess; ``tests/test_loops.py`` checks the summary against stepping through
the loop.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

#: the least number of steps a period must be seen to repeat over before it is trusted
MIN_REPEATS = 2


@dataclasses.dataclass(frozen=True)
class LoopSummary:
    """A loop's cycles by trip count: the probed runs, then ``cycles_per_period`` every ``period`` trips from
    ``transient`` on."""

    probed: tuple[int, ...]  # cycles of 1 .. len(probed) trips
    transient: int  # trips before the cycles repeat
    period: int  # trips per repeat
    cycles_per_period: int

    @property
    def cycles_per_trip(self) -> float:
        """The steady state's cycles per trip."""
        return self.cycles_per_period / self.period

    def cycles(self, trips: int) -> int:
        """The cycles of ``trips`` trips (probed where it was, else extended from the last probed trip count of the
        same phase of the period)."""
        if trips < 1:
            raise ValueError(f"a loop summary gives the cycles of 1 or more trips, got {trips}")
        k = len(self.probed)
        if trips <= k:
            return self.probed[trips - 1]
        m = k - (k - trips) % self.period  # probed, same phase as ``trips``
        return self.probed[m - 1] + (trips - m) // self.period * self.cycles_per_period


def periodic(probed: tuple[int, ...]) -> LoopSummary:
    """The smallest transient (then period) with which every probed step from the transient on repeats, seen to
    repeat ``MIN_REPEATS`` times at least."""
    k = len(probed)
    at = lambda n: probed[n - 1]  # noqa: E731  (cycles of n trips)
    for transient in range(1, k + 1):
        for period in range(1, (k - transient) // MIN_REPEATS + 1):
            step = at(transient + period) - at(transient)
            if all(at(n + period) - at(n) == step for n in range(transient, k - period + 1)):
                return LoopSummary(tuple(probed), transient, period, step)
    raise ValueError(
        f"the cycles of 1 .. {k} trips ({list(probed)}) show no period repeated {MIN_REPEATS} times: probe more "
        "trips (summarise_loop(..., probe=N))"
    )


def summarise_loop(cycles_of: Callable[[int], int], probe: int = 8) -> LoopSummary:
    """Run ``cycles_of(n)`` (a kernel's cycles for ``n`` trips of its loop, e.g.
    ``lambda n: int(ascjax.check(...params={"tiles": n}).timeline().cycles)``) for ``n = 1 .. probe`` and
    summarise: ``summary.cycles(n)`` for any ``n``."""
    if probe < 1 + 2 * MIN_REPEATS:
        raise ValueError(f"summarise_loop probes at least {1 + 2 * MIN_REPEATS} trip counts, got probe={probe}")
    return periodic(tuple(int(cycles_of(n)) for n in range(1, probe + 1)))
