"""A GM tensor as a PyPTO-Pro kernel sees it: a ``pl.Tensor[...]`` parameter of any rank, held as a 2-D view.

ascjax's GM tensors are row-major matrices, so a rank-N tensor ``[d0, ..., dN-1]`` is held as a 2-D view that
splits its dimensions in two: ``[d0 * ... * dS-1, dS * ... * dN-1]``, the same bytes. The split ``S`` is where the
rows of the kernel's tile windows run: ``N - 1`` for windows on the last two dimensions (the default ``order``),
``i + 1`` for windows whose rows run along dimension ``i`` (``order=[i, N-1]``, as a BSND attention kernel reads one
head's ``[S, D]`` rows, ``N * D`` elements apart). A window at N-D offsets is then the view's window at row
``(i0 * d1 + i1) * ... + iS-1`` and column ``(iS * dS+1 + ...) + iN-1``. The window must stay inside its row
dimension (a tile's rows never run on into the next index of the dimensions before it). A tensor is held in one
view, so its windows all run their rows along one dimension.

Elements are read and written one at a time by the scalar unit: ``tensor[i, j] = value`` (``pl.setval``) issues
``setval_gm``; ``tensor[i, j]`` (``pl.getval``) reads a kernel input, whose contents are known before the kernel
runs. A read of a tensor the kernel itself writes is refused (its contents come from the data plane).
"""

from __future__ import annotations

import contextvars
import dataclasses
import math

import jax.numpy as jnp
import numpy as np

from .._program import current
from .._sites import spelled
from . import _bounds
from ._source import UnsupportedConstruct

#: the GM tensors a trace stores to (the jit learns its outputs from them)
GM_WRITES: contextvars.ContextVar = contextvars.ContextVar("gm_writes", default=None)
#: while the jit learns its outputs (every tensor then writable): the tensors' contents, for the scalar reads
GM_CONTENTS: contextvars.ContextVar = contextvars.ContextVar("gm_contents", default=None)


def written(name: str) -> None:
    """Note that the trace stores to GM tensor ``name``."""
    writes = GM_WRITES.get()
    if writes is not None:
        writes.add(name)


def _static(value) -> int | None:
    return int(value) if isinstance(value, (int, np.integer)) else None


class ViewSplit(Exception):
    """Raised while a kernel is recorded: a window of ``name`` runs its rows along another dimension than its view's
    split, so the recording starts again with the tensor split there (``split``)."""

    def __init__(self, name: str, split: int, where: str):
        super().__init__(f"GM tensor {name!r} has a window whose rows run along dimension {split - 1} ({where})")
        self.name, self.split, self.where = name, split, where


@dataclasses.dataclass(frozen=True)
class GmTensor:
    """A GM tensor: its name (the parameter's), its shape (any rank) and dtype; ``view`` is the 2-D shape the
    emulator holds it as, its rows the first ``split`` dimensions (None: all but the last). ``value_range``: where
    its elements lie, for an integer input (``_bounds``)."""

    name: str
    shape: tuple
    dtype: str
    split: int | None = None
    value_range: tuple | None = None  # an integer input's (lowest, highest) element: the bound of a scalar read

    def __str__(self) -> str:
        return f"tensor `{self.name}` {list(self.shape)} {self.dtype}"

    @property
    def view(self) -> tuple[int, int]:
        return view_2d(self.shape, self.split)

    def offsets_2d(self, offsets, rows: int, what: str, axes: tuple | None = None) -> tuple:
        """The (row, col) in ``view`` of a ``rows``-row window at N-D element ``offsets`` whose rows and columns
        run along dimensions ``axes`` (None: the last two)."""
        offsets = tuple(offsets)
        rank = len(self.shape)
        if len(offsets) != max(rank, 2) and not (rank == 1 and len(offsets) == 1):
            raise ValueError(f"rule 'offsets': pl.{what} into {self} takes {rank} offsets, got {list(offsets)}")
        if rank == 1:
            if rows != 1:
                raise ValueError(f"rule 'bounds': pl.{what} of a {rows}-row tile into {self}, which has one row")
            return 0, offsets[-1]
        row_axis, col_axis = (rank - 2, rank - 1) if axes is None else axes
        if col_axis != rank - 1:
            raise UnsupportedConstruct(
                f"rule 'order': pl.{what} of {self} with columns along dimension {col_axis}: a tile's columns are "
                f"consecutive elements of GM, so they run along the last dimension ({rank - 1})"
            )
        split = row_axis + 1
        if split != (self.split or rank - 1):
            raise ViewSplit(self.name, split, f"pl.{what} at offsets {list(offsets)}")
        inner = _static(offsets[row_axis])
        if rank > 2 and inner is not None and inner + rows > self.shape[row_axis]:
            raise ValueError(
                f"rule 'bounds': pl.{what} of a {rows}-row tile at {list(offsets)} runs past dimension {row_axis} "
                f"({self.shape[row_axis]}) of {self}"
            )
        return _linear(offsets[:split], self.shape[:split]), _linear(offsets[split:], self.shape[split:])

    def element(self, index) -> tuple:
        """The (row, col) in ``view`` of element ``index``: a linear offset, or one index per dimension."""
        index = tuple(index) if isinstance(index, (tuple, list)) else (index,)
        if len(index) == 1:
            (linear,) = index
        elif len(index) == len(self.shape):
            linear = _linear(index, self.shape)
        else:
            raise ValueError(f"rule 'offsets': {self} takes 1 or {len(self.shape)} indices, got {list(index)}")
        cols = self.view[1]
        if _static(linear) is not None:
            return divmod(int(linear), cols)
        return linear // cols, linear % cols

    def __setitem__(self, index, value) -> None:
        setval(self, index, value, spelling="tensor[...] =")

    def __getitem__(self, index):
        return getval(self, index, spelling="tensor[...]")


def view_2d(shape, split: int | None = None) -> tuple[int, int]:
    """The 2-D shape a GM tensor of ``shape`` is held as: its first ``split`` dimensions (None: all but the last)
    as rows."""
    shape = tuple(shape)
    if len(shape) == 1:
        return 1, shape[0]
    split = len(shape) - 1 if split is None else split
    return math.prod(shape[:split]), math.prod(shape[split:])


def _linear(index, shape):
    """The row-major linear offset of ``index`` in ``shape`` (traced entries allowed)."""
    linear = 0
    for i, size in zip(index, shape):
        linear = linear * size + i
    return linear


def setval(tensor: GmTensor, index, value, *, spelling: str = "pl.setval") -> None:
    """The scalar unit writes ``value`` at ``index`` of GM tensor ``tensor`` (a linear offset, or N-D indices)."""
    row, col = tensor.element(index)
    written(tensor.name)
    with spelled(spelling):
        current().setval_gm(tensor.name, value, row=row, col=col)


def getval(tensor: GmTensor, index, *, spelling: str = "pl.getval"):
    """Element ``index`` of GM input ``tensor``, as the scalar unit reads it."""
    contents = GM_CONTENTS.get()
    if contents is not None:  # the outputs are not known yet: read what the caller passed
        row, col = tensor.element(index)
        return _bounds.note(jnp.asarray(contents[tensor.name])[row, col], tensor.value_range)
    k = current()
    if tensor.name in k.state.gm_outputs:
        raise UnsupportedConstruct(
            f"rule 'scalar read': {spelling} of {tensor}, which the kernel writes, is not modelled: its contents "
            "come from the data plane; read a kernel input"
        )
    row, col = tensor.element(index)
    return _bounds.note(k.gm(tensor.name)[row, col], tensor.value_range)
