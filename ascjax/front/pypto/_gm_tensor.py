"""A GM tensor as a PyPTO-Pro kernel sees it: a ``pl.Tensor[...]`` parameter of any rank, held as a 2-D view.

ascjax's GM tensors are row-major matrices, so a rank-N tensor ``[d0, ..., dN-1]`` is held as
``[d0 * ... * dN-2, dN-1]`` (a rank-1 tensor as one row): the bytes are the same, and a tile window at N-D offsets
``[i0, ..., iN-1]`` is the window at row ``((i0 * d1 + i1) * d2 + ...) + iN-2`` and column ``iN-1``. The window
must stay inside dimension N-2 (a tile's rows never run on into the next index of the dimensions before it).

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


@dataclasses.dataclass(frozen=True)
class GmTensor:
    """A GM tensor: its name (the parameter's), its shape (any rank) and dtype; ``view`` is the 2-D shape the
    emulator holds it as."""

    name: str
    shape: tuple
    dtype: str

    def __str__(self) -> str:
        return f"tensor `{self.name}` {list(self.shape)} {self.dtype}"

    @property
    def view(self) -> tuple[int, int]:
        return view_2d(self.shape)

    def offsets_2d(self, offsets, rows: int, what: str) -> tuple:
        """The (row, col) in ``view`` of a ``rows``-row window at N-D element ``offsets``."""
        offsets = tuple(offsets)
        rank = len(self.shape)
        if len(offsets) != max(rank, 2) and not (rank == 1 and len(offsets) == 1):
            raise ValueError(f"rule 'offsets': pl.{what} into {self} takes {rank} offsets, got {list(offsets)}")
        if rank == 1:
            if rows != 1:
                raise ValueError(f"rule 'bounds': pl.{what} of a {rows}-row tile into {self}, which has one row")
            return 0, offsets[-1]
        if rank == 2:
            return offsets
        inner = _static(offsets[-2])
        if inner is not None and inner + rows > self.shape[-2]:
            raise ValueError(
                f"rule 'bounds': pl.{what} of a {rows}-row tile at {list(offsets)} runs past dimension {rank - 2} "
                f"({self.shape[-2]}) of {self}"
            )
        row = 0
        for index, size in zip(offsets[:-1], self.shape[:-1]):
            row = row * size + index
        return row, offsets[-1]

    def element(self, index) -> tuple:
        """The (row, col) in ``view`` of element ``index``: a linear offset, or one index per dimension."""
        index = tuple(index) if isinstance(index, (tuple, list)) else (index,)
        if len(index) == 1:
            (linear,) = index
        elif len(index) == len(self.shape):
            linear = 0
            for i, size in zip(index, self.shape):
                linear = linear * size + i
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


def view_2d(shape) -> tuple[int, int]:
    """The 2-D shape a GM tensor of ``shape`` is held as."""
    shape = tuple(shape)
    if len(shape) == 1:
        return 1, shape[0]
    return math.prod(shape[:-1]), shape[-1]


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
        return jnp.asarray(contents[tensor.name])[row, col]
    k = current()
    if tensor.name in k.state.gm_outputs:
        raise UnsupportedConstruct(
            f"rule 'scalar read': {spelling} of {tensor}, which the kernel writes, is not modelled: its contents "
            "come from the data plane; read a kernel input"
        )
    row, col = tensor.element(index)
    return k.gm(tensor.name)[row, col]
