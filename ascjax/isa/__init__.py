"""The instruction registry: every instruction declared once (``Instruction``), one module per family.

``Program`` methods, the recorder and the tile language's path dispatch are bound to these
declarations. Adding an instruction is one ``Instruction`` in a
family module (or a user's file) and one ``register`` call (docs/design.md walks through it).
"""

from . import cross_core, cube, fixpipe, mte, scalar, sync, vector
from ._instruction import Access as Access
from ._instruction import Instruction as Instruction
from ._instruction import Operand as Operand
from ._registry import instructions as instructions
from ._registry import lookup as lookup
from ._registry import register as register
from ._registry import route as route
from ._registry import routes as routes

for _family in (mte, cube, fixpipe, cross_core, sync, vector, scalar):
    for _instruction, _routes in _family.INSTRUCTIONS:
        register(_instruction, routes=_routes)
del _family, _instruction, _routes
