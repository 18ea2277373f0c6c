"""A PyPTO-Pro-style tile language: seed kernels read almost as they do in the documents.

Every function acts on the kernel being traced (:func:`ascjax.program.current`), on the core
of the current section, so a kernel stays a pure function of its arrays (jit, vmap and grad
work)::

    from ascjax import pl

    def kernel(k):
        acc = pl.alloc("Acc", (64, 64), "float32")
        ...
        pl.matmul(acc, left, right, phase=pl.AccPhase.Final)
        pl.move(vec, acc, acc_to_vec_mode=pl.AccToVecMode.DualModeSplitM, phase=pl.STPhase.Final)
        pl.system.set_cross_core(pipe=pl.PipeType.FIX, event_id=0)

        @pl.section_vector
        def _(sub):
            pl.system.wait_cross_core(pipe=pl.PipeType.V, event_id=0)
            pl.maximum(row_max, vec, tmp, dim=0)

Sections run in issue order, the cube's first where it is written first; ``pl.range`` is a
decorator that runs its body as one ``lax.scan``. Which op runs on which pipe follows
PyPTO-Pro's PipeType table: ``load`` MTE2; ``store`` FIX from L0C, MTE3 from UB; ``move``
MTE1 from L1, FIX from L0C, MTE3 from UB (``insert``); vector ops V.
"""

from __future__ import annotations

import types

from .cross_core import SyncMode
from .kinds import Buffer, Pipe
from .ops.ub_move import AccToVecMode
from .ops.unit_flag import AccPhase, STPhase
from .ops.vector import RoundMode
from .program import current

PipeType = Pipe

__all__ = [
    "AccPhase",
    "AccToVecMode",
    "PipeType",
    "RoundMode",
    "STPhase",
    "SyncMode",
    "abs",
    "add",
    "alloc",
    "cast",
    "div",
    "exp",
    "expand_div",
    "expand_mul",
    "expand_sub",
    "fill",
    "get_subblock_idx",
    "insert",
    "load",
    "log",
    "make_tile_group",
    "matmul",
    "matmul_acc",
    "matmul_mx",
    "matmul_mx_acc",
    "maximum",
    "minimum",
    "move",
    "mul",
    "range",
    "relu",
    "section_cube",
    "section_vector",
    "sqrt",
    "store",
    "store_tile",
    "sub",
    "sum",
    "system",
]


def alloc(space, shape, dtype, *, fmt=None, addr=None, name=None):
    """Allocate a tile in a memory space (``"Mat"``, ``"Left"``, ``"Right"``, ``"Acc"``, ``"Bias"``, ``"Vec"``)."""
    return current().alloc(space, shape, dtype, fmt=fmt, addr=addr, name=name)


def make_tile_group(space, shape, dtype, *, depth: int, fmt=None, addr=None, name=None):
    """``make_tile_group``: ``depth`` slots with ``current()``, ``next()``, ``previous()`` and ``group[i]``."""
    return current().tile_group(space, shape, dtype, depth, fmt=fmt, addr=addr, name=name)


def section_cube(body):
    """Decorator: run ``body()`` on the cube core."""
    return current().section_cube(body)


def section_vector(body):
    """Decorator: run ``body(sub)`` on each AIV (``sub`` = 0, 1)."""
    return current().section_vector(body)


def get_subblock_idx() -> int:
    return current().get_subblock_idx()


def range(*args, count=None):  # noqa: A001 - PyPTO-Pro's name
    """``pl.range(stop)`` / ``pl.range(start, stop, step=1)`` as a decorator: the body runs as one ``lax.scan``.

    ``count`` (traced allowed) runs only the first ``count`` of those iterations::

        @pl.range(8, count=n)
        def _(i): ...
    """
    if not 1 <= len(args) <= 3 or not all(isinstance(a, int) for a in args):
        raise ValueError(f"pl.range takes 1 to 3 static ints (stop | start, stop[, step]), got {args!r}")
    start, stop, step = (0, args[0], 1) if len(args) == 1 else (*args, 1)[:3]
    if step <= 0:
        raise ValueError(f"pl.range step must be positive, got {step}")
    trips = max(0, -(-(stop - start) // step))

    def run(body):
        current().range(trips, lambda i: body(start + i * step), count=count)
        return body

    return run


# -- cube ------------------------------------------------------------------------------
def matmul(dst, lhs, rhs, bias=None, *, phase=None):
    """``dst = lhs @ rhs (+ bias)`` on the cube; ``phase`` drives the L0C unit flag."""
    current().matmul(dst, lhs, rhs, bias, phase=phase)


def matmul_acc(dst, acc, lhs, rhs, *, phase=None):
    """``dst = acc + lhs @ rhs`` (``acc`` is ``dst``)."""
    current().matmul_acc(dst, acc, lhs, rhs, phase=phase)


def matmul_mx(dst, lhs, rhs, scale_a, scale_b, *, phase=None):
    """Block-scaled (MX) matmul on 950: E8M0 scales per 32 K elements (see docs/numerics.md)."""
    current().matmul_mx(dst, lhs, rhs, scale_a, scale_b, phase=phase)


def matmul_mx_acc(dst, acc, lhs, rhs, scale_a, scale_b, *, phase=None):
    """``dst = acc + matmul_mx(lhs, rhs, scale_a, scale_b)``."""
    current().matmul_mx_acc(dst, acc, lhs, rhs, scale_a, scale_b, phase=phase)


# -- data movement ---------------------------------------------------------------------
def load(dst, src: str, offsets=(0, 0)):
    """GM -> L1 (ND -> Nz, cube) or GM -> UB (vector), MTE2; ``offsets`` (row, col) may be traced."""
    k = current()
    row, col = offsets
    if dst.buffer is Buffer.UB:
        k.copy_gm2ub(dst, src, row=row, col=col)
    elif dst.buffer is Buffer.L1:
        k.copy_gm2l1(dst, src, row=row, col=col)
    else:
        raise ValueError(f"pl.load writes Mat (L1) or Vec (UB) tiles, got {dst}")


def store(dst: str, src, offsets=(0, 0), *, phase=None, relu: bool = False, scale=None):
    """L0C -> GM (FIX, Nz -> ND, ``phase`` = STPhase, ``scale`` = quantisation) or UB -> GM (MTE3)."""
    k = current()
    row, col = offsets
    if src.buffer is Buffer.L0C:
        k.store(dst, src, (row, col), phase=phase, relu=relu, scale=scale)
    elif src.buffer is Buffer.UB:
        if phase is not None or scale is not None or relu:
            raise ValueError("phase, scale and relu apply to a store out of L0C (the fixpipe), not from UB")
        k.copy_ub2gm(dst, src, row=row, col=col)
    else:
        raise ValueError(f"pl.store reads Acc (L0C) or Vec (UB) tiles, got {src}")


def store_tile(dst: str, src, tile_offsets=(0, 0), **kwargs):
    """:func:`store` with offsets in units of the tile's shape."""
    store(dst, src, (tile_offsets[0] * src.rows, tile_offsets[1] * src.cols), **kwargs)


def move(dst, src, offset=None, *, acc_to_vec_mode=None, phase=None, relu: bool = False, transpose: bool = False):
    """Between on-chip buffers: L1 -> L0A / L0B / Bias (MTE1), L0C -> UB (FIX), UB -> L1 (MTE3, as ``insert``).

    L1 tiles hold A (M x K) and B (K x N) as loaded; ``transpose=True`` says the L1 tile holds the transpose.
    """
    k = current()
    pair = (src.buffer, dst.buffer)
    if src.buffer is Buffer.L0C and dst.buffer is Buffer.UB:
        mode = AccToVecMode.SingleModeVec0 if acc_to_vec_mode is None else acc_to_vec_mode
        k.move_to_vec(dst, src, acc_to_vec_mode=mode, phase=phase, relu=relu)
        return
    if phase is not None or acc_to_vec_mode is not None:
        raise ValueError(f"phase and acc_to_vec_mode apply to a move out of L0C, not {src.buffer} -> {dst.buffer}")
    row, col = offset or (0, 0)
    if pair == (Buffer.L1, Buffer.L0A):
        k.copy_l12l0a(dst, src, transpose=transpose, row=row, col=col)
    elif pair == (Buffer.L1, Buffer.L0B):
        k.copy_l12l0b(dst, src, transpose=not transpose, row=row, col=col)
    elif pair == (Buffer.L1, Buffer.BT):
        k.copy_l12bt(dst, src, col=col)
    elif src.buffer is Buffer.L1 and dst.buffer in (Buffer.SCALE_LEFT, Buffer.SCALE_RIGHT):
        k.copy_l12scale(dst, src, row=row, col=col)
    elif pair == (Buffer.UB, Buffer.L1):
        k.insert(dst, src, row=row, col=col)
    else:
        raise ValueError(f"pl.move has no path {src.buffer} -> {dst.buffer}")


def insert(dst, src, offset=(0, 0)):
    """``insert`` (TINSERT): a UB tile into an L1 tile at ``offset``, ND -> Nz (MTE3)."""
    current().insert(dst, src, row=offset[0], col=offset[1])


# -- vector ----------------------------------------------------------------------------
def _binary(kind):
    def op(out, lhs, rhs):
        getattr(current(), kind)(out, lhs, rhs)

    op.__name__ = op.__qualname__ = kind
    op.__doc__ = f"``out = lhs {kind} rhs`` elementwise (``rhs`` a tile or a scalar)."
    return op


add, sub, mul, div = _binary("add"), _binary("sub"), _binary("mul"), _binary("div")


def maximum(out, lhs, rhs=None, *, dim=None):
    """Elementwise max, or with ``dim=0`` the row max of ``lhs`` into the ``[rows, 1]`` tile ``out`` (``rhs``: tmp)."""
    if dim is None:
        current().max(out, lhs, rhs)
    elif dim == 0:
        current().row_max(out, lhs)
    else:
        raise ValueError(f"pl.maximum reduces along the last axis with dim=0, got dim={dim}")


def minimum(out, lhs, rhs=None, *, dim=None):
    """Elementwise min, or with ``dim=0`` the row min into ``[rows, 1]``."""
    if dim is None:
        current().min(out, lhs, rhs)
    elif dim == 0:
        current().row_min(out, lhs)
    else:
        raise ValueError(f"pl.minimum reduces along the last axis with dim=0, got dim={dim}")


def sum(out, src, tmp=None, *, dim=0):  # noqa: A001 - PyPTO-Pro's name
    """Row sum of ``src`` into the ``[rows, 1]`` tile ``out`` (``tmp`` accepted for PyPTO-Pro compatibility)."""
    if dim != 0:
        raise ValueError(f"pl.sum reduces along the last axis with dim=0, got dim={dim}")
    current().row_sum(out, src)


def _unary(kind, name):
    def op(out, src):
        getattr(current(), kind)(out, src)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"``out = {kind}(src)`` elementwise."
    return op


abs = _unary("abs", "abs")  # noqa: A001
exp = _unary("exp", "exp")
log = _unary("ln", "log")
sqrt = _unary("sqrt", "sqrt")
relu = _unary("relu", "relu")


def expand_sub(out, src, scalar, *, dim=0):
    """``out = src - scalar`` with the ``[rows, 1]`` tile ``scalar`` broadcast along each row."""
    current().expand_sub(out, src, scalar)


def expand_mul(out, src, scalar, *, dim=0):
    """``out = src * scalar`` (row broadcast)."""
    current().expand_mul(out, src, scalar)


def expand_div(out, src, scalar, *, dim=0):
    """``out = src / scalar`` (row broadcast)."""
    current().expand_div(out, src, scalar)


def cast(out, src, *, mode=RoundMode.CAST_NONE):
    """``out = src`` in ``out``'s dtype, rounding by ``mode`` (integers saturate)."""
    current().cast(out, src, mode=mode)


def fill(out, value):
    """``out[:] = value``."""
    current().fill(out, value)


# -- synchronisation -------------------------------------------------------------------
def _set_cross_core(*, pipe, event_id, sync_mode=SyncMode.INTRA_BLOCK, peer=None, when=True):
    current().set_cross_core(pipe, event_id, sync_mode, peer=peer, when=when)


def _wait_cross_core(*, pipe, event_id, sync_mode=SyncMode.INTRA_BLOCK, peer=None, when=True):
    current().wait_cross_core(pipe, event_id, sync_mode, peer=peer, when=when)


def _sync_src(*, set_pipe, wait_pipe, event_id):
    current().sync_notify(set_pipe, wait_pipe, event_id)


def _sync_dst(*, set_pipe, wait_pipe, event_id):
    current().sync_wait(set_pipe, wait_pipe, event_id)


def _bar(pipe):
    def barrier():
        current().sync_pipe(pipe)

    barrier.__name__ = f"bar_{pipe.lower()}"
    return barrier


system = types.SimpleNamespace(
    set_cross_core=_set_cross_core,
    wait_cross_core=_wait_cross_core,
    sync_src=_sync_src,
    sync_dst=_sync_dst,
    bar_all=_bar("ALL"),
    bar_m=_bar("M"),
    bar_mte1=_bar("MTE1"),
    bar_mte2=_bar("MTE2"),
    bar_mte3=_bar("MTE3"),
    bar_fix=_bar("FIX"),
    bar_v=_bar("V"),
)
"""``pl.system``: cross-core events, intra-core ``sync_src`` / ``sync_dst`` and barriers."""
