"""Run options: which checks run and how races show up. Static: changing one recompiles."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Options:
    """What a run checks.

    - ``sanitize``: happens-before race detection and uninitialised-read checks (vector clocks
      and per-granule shadow state). Off, a run keeps only the hardware's own sync semantics
      (deadlock, leftover, sync errors, bounds) and is cheaper.
    - ``poison_races``: an op that reads racy data writes NaN (integers: INT_MIN) to its whole
      destination, so the "precision problem" of a race shows up in the outputs.
    - ``gm_granule_bytes``: race-tracking granule of GM tensors (on-chip buffers use 512 B).
      32 B is the DMA burst: stores of neighbouring tiles by different cores never share one.
    - ``max_events``: size of the trace buffer (one event per executed op; 0: no trace). A
      run that executes more ops keeps the first ``max_events`` and says it was truncated.
    - ``straight_through``: differentiate through rounding and saturation with the
      straight-through estimator (``ascjax.straight_through``): vector ``cast`` and the fixpipe's
      quantisation keep their bit-exact outputs, and the gradient passes each rounding step as the
      identity (a scale before it keeps its factor). Integer and code (HiFloat8) outputs still
      stop the gradient. Off, those gradients are zero or fail (docs/numerics.md).
    """

    sanitize: bool = True
    poison_races: bool = False
    gm_granule_bytes: int = 32
    max_events: int = 0
    straight_through: bool = False

    def __post_init__(self):
        if self.gm_granule_bytes <= 0 or self.gm_granule_bytes & (self.gm_granule_bytes - 1):
            raise ValueError(f"gm_granule_bytes must be a power of two, got {self.gm_granule_bytes}")
