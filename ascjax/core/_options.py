"""Run options: which checks run and how races show up. Static: changing one recompiles."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Options:
    """What a run checks.

    - ``sanitize``: happens-before race detection and uninitialised-read checks. Off, the control
      plane reports only the hardware's own findings (deadlock, leftover, sync errors, bounds)
      (``ascjax.engine.ControlOptions.sanitize``).
    - ``poison_races``: a read the control plane finds racy writes NaN (integers: INT_MIN) to its
      whole destination, so the "precision problem" of a race shows up in the outputs.
    - ``gm_granule_bytes``: the GM granule of a launch's merge (32 B, the DMA burst): two blocks
      writing one granule, one with a plain store, race.
    - ``straight_through``: differentiate through rounding and saturation with the
      straight-through estimator (``ascjax.core._straight_through``): vector ``cast`` and the fixpipe's
      quantisation keep their bit-exact outputs, and the gradient passes each rounding step as the
      identity (a scale before it keeps its factor). Integer and code (HiFloat8) outputs still
      stop the gradient. Off, those gradients are zero or fail (docs/numerics.md).
    - ``lower_loops``: the data plane computes the part of a loop's iterations that does not depend
      on the iteration before as one batched op (a K chain's products as one batched matmul), the
      carried rest as a scan (``ascjax.engine.scan_lowered``); the buffers are the same bits as the
      plain scan's. Off (the default), every loop runs iteration by iteration: on a CPU that is faster
      (docs/performance.md).
    - ``parallel_loops``: the data plane computes a loop whose iterations use the on-chip buffers privately
      (each loads, computes or finds as the loop found them every tile it reads; the tiled matmul's
      output-tile loops) as one ``vmap``, its GM stores applied in order after it
      (``ascjax.engine.private_loops``). The same bits; off, every such loop runs iteration by iteration.
    """

    sanitize: bool = True
    poison_races: bool = False
    gm_granule_bytes: int = 32
    straight_through: bool = False
    lower_loops: bool = False
    parallel_loops: bool = True

    def __post_init__(self):
        if self.gm_granule_bytes <= 0 or self.gm_granule_bytes & (self.gm_granule_bytes - 1):
            raise ValueError(f"gm_granule_bytes must be a power of two, got {self.gm_granule_bytes}")

    def for_data_plane(self) -> Options:
        """These options as the data plane reads them: ``sanitize`` is the control plane's alone, so runs that differ
        only in it share one compiled data plane."""
        return dataclasses.replace(self, sanitize=True)
