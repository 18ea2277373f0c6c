"""``Instruction``: one declaration per instruction, the single place its facts live.

A declaration holds the data function (``state, *bound, *args -> state``), what the
instruction is (``InstrKind``: what reports dispatch on), the core kind and pipe it runs on,
its operands (which parameters name tiles or GM tensors it reads and writes, and in which
buffers they may lie), its sync effect, the cost fields that price it and its report
wording. ``Program`` methods and ``ascjax.pl`` spellings are bound to declarations
(``ascjax.isa.register`` is the extension point).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable

from ..core import BUFFERS, Buffer, CoreKind, InstrKind, Pipe
from ..core._memory import Tile
from ..engine import Sync

#: The parameters a data function takes besides the user's arguments.
_MACHINE_PARAMS = ("state", "sub")


@dataclasses.dataclass(frozen=True)
class Operand:
    """A parameter that names data: a tile in one of ``buffers``, or (``Buffer.GM``) a GM tensor's name."""

    param: str
    buffers: tuple[Buffer, ...]
    write: bool = False

    def values(self, value) -> tuple:
        """The tiles / GM names the argument holds (a tuple of tiles, one tile, a name, or none)."""
        if value is None:
            return ()
        items = tuple(value) if isinstance(value, (tuple, list)) else (value,)
        return tuple(v for v in items if isinstance(v, Tile) or (isinstance(v, str) and Buffer.GM in self.buffers))


@dataclasses.dataclass(frozen=True)
class Access:
    """One effect of an issued instruction: it reads or writes ``tile`` (or the GM tensor ``gm``)."""

    operand: Operand
    tile: Tile | None = None
    gm: str | None = None

    @property
    def buffer(self) -> Buffer:
        return Buffer.GM if self.tile is None else self.tile.buffer

    @property
    def byte_range(self) -> tuple[int, int] | None:
        """``[lo, hi)`` in its buffer (slot 0 of a TileGroup); None for a GM window (the op's offsets place it)."""
        return None if self.tile is None else (self.tile.addr, self.tile.end)

    def __str__(self) -> str:
        what = f"GM tensor {self.gm!r}" if self.tile is None else str(self.tile)
        return f"{'writes' if self.operand.write else 'reads'} {self.operand.param} = {what}"


@dataclasses.dataclass(frozen=True)
class Instruction:
    """The declaration of one instruction.

    **Fields:** ``name``: the ``Program`` method; ``data``: the data function; ``kind``;
    ``core``: ``CoreKind.CUBE`` / ``VECTOR``, or ``ANY`` (sync: the core it is issued on);
    ``pipe``: the pipe it runs on, or None when an argument names it (sync); ``operands``;
    ``sync``: its effect on the sync hardware; ``bound``: leading arguments of ``data`` the
    declaration fixes (``"add"`` for ``binary``); ``cost``: the ``Costs`` fields that price it;
    ``cycles``: what one issue takes on its pipe, ``cycles(costs, arguments, gm_dtypes)`` of the ``Costs`` table, the
    issue's arguments by parameter name and the GM tensors' dtypes (None: one cycle, a sync
    instruction's: its latency is the edge's, ``SyncLatency``); ``flight``: of those cycles, the trailing part a
    DMA request is in flight (its GM latency, ``flight(costs, arguments, gm_dtypes)``): the pipe takes its next
    request meanwhile, so latencies overlap (None: none); ``gm_bytes``: the bytes one issue moves to or from GM,
    ``gm_bytes(arguments, gm_dtypes)``, what the cores of a launch share the chip's GM bandwidth for (None: none);
    ``faults``: the rules its traced
    operands may break, ``faults(chip, arguments, gm_shapes)`` -> ``engine.Fault`` s (the control plane reports an
    issue that breaks one, and the issue accesses nothing); ``summary``: one line of report and
    documentation wording.
    """

    name: str
    data: Callable
    kind: InstrKind
    core: CoreKind
    pipe: Pipe | None
    summary: str
    operands: tuple[Operand, ...] = ()
    sync: Sync = Sync.NONE
    bound: tuple = ()
    cost: tuple[str, ...] = ()
    cycles: Callable | None = None
    flight: Callable | None = None
    gm_bytes: Callable | None = None
    faults: Callable | None = None

    def __post_init__(self):
        if not self.name.isidentifier():
            raise ValueError(f"an instruction's name is a Python identifier (its Program method), got {self.name!r}")
        params = inspect.signature(self.data).parameters
        for op in self.operands:
            if op.param not in params:
                raise ValueError(f"{self.name}: operand {op.param!r} is not a parameter of {self.data.__name__}")
            for buffer in op.buffers:
                row = BUFFERS[buffer]
                pipes = row.writers if op.write else row.readers
                if self.pipe is not None and self.pipe not in pipes:
                    raise ValueError(
                        f"{self.name} on pipe {self.pipe} {'writes' if op.write else 'reads'} {buffer}, which only "
                        f"pipes {', '.join(map(str, pipes))} {'write' if op.write else 'read'}"
                    )

    @property
    def writes_gm(self) -> bool:
        """Whether an operand it writes may name a GM tensor (a store, a fixpipe to GM)."""
        return any(op.write and Buffer.GM in op.buffers for op in self.operands)

    @functools.cached_property
    def signature(self) -> inspect.Signature:
        """The signature users call: the data function's, less the state, the bound arguments and ``sub`` (read once:
        every issue binds its arguments to it, twice while it is recorded)."""
        params = [p for p in inspect.signature(self.data).parameters.values() if p.name not in _MACHINE_PARAMS]
        return inspect.Signature(params[len(self.bound) :])

    def bind(self, args: tuple, kwargs: dict) -> inspect.BoundArguments:
        """The arguments of one issue bound to the parameters users call; a call that does not fit the signature
        is refused under rule 'arguments', with the signature and, where positional arguments overflow into
        keyword-only parameters, how to write them."""
        signature = self.signature
        try:
            return signature.bind(*args, **kwargs)
        except TypeError as exc:
            params = signature.parameters.values()
            positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
            keywords = [p.name for p in params if p.kind is p.KEYWORD_ONLY]
            hint = ""
            if len(args) > len(positional) and keywords:
                extra = ", ".join(f"{k}=..." for k in keywords if k not in kwargs)
                hint = (
                    f"; it takes {len(positional)} positional argument(s) ({', '.join(positional)}) and {len(args)} "
                    f"were given: name the others ({extra})"
                )
            plain = signature.replace(parameters=[p.replace(annotation=p.empty) for p in params])
            raise TypeError(f"rule 'arguments': {self.name}{plain}: {exc}{hint}") from None

    def effects(self, args: tuple, kwargs: dict) -> tuple[Access, ...]:
        """What one issue with these arguments reads and writes (its tiles and GM tensors)."""
        return self.effects_of(self.bind(args, kwargs).arguments)

    def arguments(self, args: tuple, kwargs: dict) -> dict:
        """The arguments of one issue by parameter name, defaults applied (a ``**kwargs`` parameter's spread out)."""
        bound = self.bind(args, kwargs)
        bound.apply_defaults()
        out = {}
        for name, value in bound.arguments.items():
            if self.signature.parameters[name].kind is inspect.Parameter.VAR_KEYWORD:
                out.update(value)
            else:
                out[name] = value
        return out

    def effects_of(self, bound: dict) -> tuple[Access, ...]:
        """``effects`` from the arguments bound to their parameter names."""
        out = []
        for op in self.operands:
            for v in op.values(bound.get(op.param)):
                out.append(Access(op, gm=v) if isinstance(v, str) else Access(op, tile=v))
        return tuple(out)
