"""The PyPTO-Pro front end: a kernel read from its source (``_source``), run by ``_runtime`` on a ``Program``,
with the surface of ``pypto_pro.language`` (``language``)."""

from . import language as language
from ._gm_tensor import GmTensor as GmTensor
from ._runtime import Runtime as Runtime
from ._source import Translation as Translation
from ._source import UnsupportedConstruct as UnsupportedConstruct
from ._types import TensorSpec as TensorSpec
