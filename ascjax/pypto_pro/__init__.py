"""``pypto_pro`` on ascjax: ``import ascjax.pypto_pro.language as pl`` runs a PyPTO-Pro kernel as written, on the
emulator (``python -m ascjax pypto FILE`` maps the module name ``pypto_pro`` here for a file left unchanged)."""

from . import framework as framework
from . import language as language
from . import parser_errors as parser_errors
from . import runtime as runtime
from ._jit import JitKernel as JitKernel
from ._jit import jit as jit
