"""``pypto_pro.language`` on ascjax: the front end's surface (``ascjax.front.pypto.language``) and ``jit``."""

from ...front.pypto.language import *  # noqa: F403 - the surface, as PyPTO-Pro spells it
from ...front.pypto.language import SURFACE, __getattr__  # noqa: F401 - a name outside the surface is refused by name
from .._jit import jit as jit

__all__ = [*SURFACE, "jit"]
