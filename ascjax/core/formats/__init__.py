"""Numeric formats of the Ascend AI Core as pure functions (no machine state).

* ``.hifloat8`` - HiFloat8 codes: ``decode``, ``encode`` (ties away), the value table.
* ``.mx`` - MX block scaling: E8M0 scales, fp4 e1m2, ``block_scaled_dot``.
* ``.values`` - ``decode(x, dtype)``: the value of stored elements of any format.
* ``.saturate`` - ``cast(x, dtype, saturate=)``: float32 results to every output type.
* ``.quant`` - the fixpipe quantisation modes and their arithmetic.
* ``.device_bytes`` - ``to_device_bytes`` / ``from_device_bytes`` (fp4/int4 packed two per byte).

See ``docs/numerics.md``.
"""

from . import device_bytes, hifloat8, mx, quant, saturate, values
from .device_bytes import from_device_bytes, to_device_bytes
from .saturate import cast
from .values import decode

__all__ = [
    "cast",
    "decode",
    "device_bytes",
    "from_device_bytes",
    "hifloat8",
    "mx",
    "quant",
    "saturate",
    "to_device_bytes",
    "values",
]
