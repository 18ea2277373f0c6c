"""``pypto_pro.runtime`` on ascjax: the tiling keys (``pypto_pro.runtime.tilingkey``)."""

from . import tilingkey as tilingkey
