"""A PyPTO-Pro-style tile language: seed kernels read almost as they do in the documents.

Every function acts on the kernel being traced (``ascjax.front._program.current``), on the core
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

import numpy as np

from .. import isa
from ..core import Buffer, InstrKind, Pipe, SyncMode
from ..isa.ops.pypto import AtomicType, atomic_add
from ..isa.ops.ub_move import AccToVecMode
from ..isa.ops.unit_flag import AccPhase, STPhase
from ..isa.ops.vector import RoundMode
from ._program import check_body, current

PipeType = Pipe

__all__ = [
    "AccPhase",
    "AccToVecMode",
    "AtomicType",
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
    "expand_add",
    "expand_div",
    "expand_mul",
    "expand_sub",
    "expands",
    "fill",
    "get_block_idx",
    "get_block_num",
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
    "neg",
    "range",
    "recip",
    "relu",
    "rsqrt",
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
    """The current AIV's index (0 or 1); an error on the cube core."""
    return current().get_subblock_idx()


def get_block_idx():
    """The block index (traced int32): on the cube core the launch's block, on AIV ``s`` ``block * 2 + s``."""
    return current().get_block_idx()


def get_block_num() -> int:
    """The launch's ``block_dim`` (a static int; 1 in a plain ``run``)."""
    return current().block_num


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
        check_body(body, 1, f"pl.range({', '.join(map(str, args))}) body", "the loop index i: def _(i): ...")
        current().range(trips, lambda i: body(start + i * step), count=count)
        return body

    return run


# -- cube ------------------------------------------------------------------------------
def _sized(m, k, n) -> dict:
    """The ``m`` / ``k`` / ``n`` keywords given (a tail's sizes; none: the tiles')."""
    return {name: v for name, v in (("m", m), ("k", k), ("n", n)) if v is not None}


def matmul(dst, lhs, rhs, bias=None, *, phase=None, m=None, k=None, n=None):
    """``dst = lhs @ rhs (+ bias)`` on the cube; ``phase`` drives the L0C unit flag; ``m``, ``k``, ``n`` (traced
    allowed): a tail's sizes instead of the tiles'."""
    current().matmul(dst, lhs, rhs, bias, phase=phase, **_sized(m, k, n))


def matmul_acc(dst, acc, lhs, rhs, *, phase=None, m=None, k=None, n=None):
    """``dst = acc + lhs @ rhs`` (``acc`` is ``dst``)."""
    current().matmul_acc(dst, acc, lhs, rhs, phase=phase, **_sized(m, k, n))


def matmul_mx(dst, lhs, rhs, scale_a, scale_b, *, phase=None):
    """Block-scaled (MX) matmul on 950: E8M0 scales per 32 K elements (see docs/numerics.md)."""
    current().matmul_mx(dst, lhs, rhs, scale_a, scale_b, phase=phase)


def matmul_mx_acc(dst, acc, lhs, rhs, scale_a, scale_b, *, phase=None):
    """``dst = acc + matmul_mx(lhs, rhs, scale_a, scale_b)``."""
    current().matmul_mx_acc(dst, acc, lhs, rhs, scale_a, scale_b, phase=phase)


# -- data movement ---------------------------------------------------------------------
#: PyPTO-Pro's names of the buffers, for messages
_SPACE_NAMES = {Buffer.L1: "Mat", Buffer.L0A: "Left", Buffer.L0B: "Right", Buffer.L0C: "Acc", Buffer.BT: "Bias"}
_SPACE_NAMES.update({Buffer.UB: "Vec", Buffer.SCALE_LEFT: "ScaleLeft", Buffer.SCALE_RIGHT: "ScaleRight"})
#: L1 holds B (K x N) as loaded while L0B wants it transposed: ``transpose`` of an L1 -> L0B move flips
_TRANSPOSED_DST = (Buffer.L0B,)


def _path(what: str, src: Buffer, dst: Buffer, tile) -> isa.Instruction:
    """The registered instruction for the path ``src -> dst`` (``ascjax.isa.route``), or a ValueError naming the paths."""
    instr = isa.route(src, dst)
    if instr is not None:
        return instr
    if what == "move":
        name = lambda b: f"{_SPACE_NAMES.get(b, b)} ({b})"  # noqa: E731
        order = list(Buffer).index
        to = sorted((b for a, b in isa.routes() if a is src and b is not Buffer.GM), key=order)
        into = sorted((a for a, b in isa.routes() if b is dst and a is not Buffer.GM), key=order)
        raise ValueError(
            f"pl.move has no path {name(src)} -> {name(dst)}: from {name(src)} it moves to "
            f"{', '.join(map(name, to)) or 'nothing'}; into {name(dst)} from {', '.join(map(name, into)) or 'nothing'}"
            " (GM is pl.load / pl.store)"
        )
    if what == "load":
        side, ends = "writes", [b for a, b in isa.routes() if a is Buffer.GM]
    else:
        side, ends = "reads", [a for a, b in isa.routes() if b is Buffer.GM]
    names = " or ".join(f"{_SPACE_NAMES.get(b, b)} ({b})" for b in sorted(ends, key=list(Buffer).index))
    raise ValueError(f"pl.{what} {side} {names} tiles, got {tile}")


def _whole(valid, tile) -> bool:
    """Whether ``valid`` is statically all of ``tile``."""
    static = all(isinstance(v, (int, np.integer)) for v in valid)
    return static and tuple(int(v) for v in valid) == (tile.rows, tile.cols)


def _l0c_region(valid, src) -> dict:
    """The ``m`` / ``n`` of a move out of L0C for ``src``'s valid region (run-time values allowed: the split of a
    dual mode then divides the region as it runs)."""
    if valid is None or _whole(valid, src):
        return {}
    return {"m": valid[0], "n": valid[1]}


def _sizes(valid, tile) -> dict:
    """The ``rows`` / ``cols`` keywords of a copy of ``tile``'s ``valid`` region (none for the whole tile)."""
    if valid is None or _whole(valid, tile):
        return {}
    return {"rows": valid[0], "cols": valid[1]}


def load(dst, src: str, offsets=(0, 0), *, valid=None):
    """GM -> L1 (ND -> Nz, cube) or GM -> UB (vector), MTE2; ``offsets`` (row, col) may be traced; ``valid``
    (rows, cols, traced allowed): only that top-left region of ``dst`` (a tail)."""
    k = current()
    row, col = offsets
    instr = _path("load", Buffer.GM, dst.buffer, dst)
    getattr(k, instr.name)(dst, src, row=row, col=col, **_sizes(valid, dst))


def store(dst: str, src, offsets=(0, 0), *, phase=None, relu: bool = False, scale=None, atomic=None, valid=None,
          quant_mode=None):  # fmt: skip
    """L0C -> GM (FIX, Nz -> ND, ``phase`` = STPhase, ``scale`` = quantisation) or UB -> GM (MTE3).

    ``atomic=AtomicType.AtomicAdd`` (or True) adds to GM instead of overwriting it; ``valid`` (rows, cols): only
    that top-left region of ``src`` (a tail); ``quant_mode`` names the fixpipe's mode where the GM dtype does not
    (``"QF322HIF8_PRE"``: HiFloat8 codes into a uint8 tensor).
    """
    k = current()
    row, col = offsets
    add = atomic_add(atomic)
    instr = _path("store", src.buffer, Buffer.GM, src)
    if instr.kind is InstrKind.L0C_READ:
        sizes = {} if valid is None or _whole(valid, src) else {"m": valid[0], "n": valid[1]}
        mode = {} if quant_mode is None else {"quant_mode": quant_mode}
        getattr(k, instr.name)(dst, src, (row, col), phase=phase, relu=relu, scale=scale, atomic=add, **sizes, **mode)
        return
    if phase is not None or scale is not None or relu or quant_mode is not None:
        raise ValueError("phase, scale, relu and quant_mode apply to a store out of L0C (the fixpipe), not from UB")
    getattr(k, instr.name)(dst, src, row=row, col=col, atomic=add, **_sizes(valid, src))


def store_tile(dst: str, src, tile_offsets=(0, 0), *, phase=None, relu: bool = False, scale=None, atomic=None,
               valid=None, quant_mode=None):  # fmt: skip
    """``store`` with offsets in units of the tile's shape."""
    store(dst, src, (tile_offsets[0] * src.rows, tile_offsets[1] * src.cols), phase=phase, relu=relu, scale=scale,
          atomic=atomic, valid=valid, quant_mode=quant_mode)  # fmt: skip


def move(dst, src, offset=None, *, acc_to_vec_mode=None, phase=None, relu: bool = False, transpose: bool = False,
         valid=None, scale=None):  # fmt: skip
    """Between on-chip buffers: L1 -> L0A / L0B / Bias (MTE1), L0C -> UB (FIX), UB -> L1 (MTE3, as ``insert``),
    UB -> UB (V: same element count, so a ``[1, n]`` row becomes an ``[n, 1]`` column).

    L1 tiles hold A (M x K) and B (K x N) as loaded; ``transpose=True`` says the L1 tile holds the transpose;
    ``valid`` (rows, cols): the region of an L0C ``src`` moved to UB (a tail; the split mode divides it); ``scale``:
    its per-tensor quantisation into ``dst``'s dtype (as ``store``'s).
    """
    k = current()
    instr = _path("move", src.buffer, dst.buffer, src)
    method = getattr(k, instr.name)
    if instr.kind is InstrKind.L0C_READ:
        mode = AccToVecMode.SingleModeVec0 if acc_to_vec_mode is None else acc_to_vec_mode
        method(dst, src, acc_to_vec_mode=mode, phase=phase, relu=relu, scale=scale, **_l0c_region(valid, src))
        return
    if phase is not None or acc_to_vec_mode is not None or scale is not None:
        raise ValueError(
            f"phase, acc_to_vec_mode and scale apply to a move out of L0C, not {src.buffer} -> {dst.buffer}"
        )
    if instr.kind is InstrKind.VECTOR:
        if offset is not None:
            raise ValueError("a UB -> UB move copies whole tiles: drop offset")
        method(dst, src)
        return
    row, col = offset or (0, 0)
    params = instr.signature.parameters
    kwargs = {name: v for name, v in (("row", row), ("col", col)) if name in params}
    if "transpose" in params:
        kwargs["transpose"] = transpose != (dst.buffer in _TRANSPOSED_DST)
    method(dst, src, **kwargs)


def insert(dst, src, offset=(0, 0)):
    """``insert`` (TINSERT): a UB tile into an L1 tile at ``offset``, ND -> Nz (MTE3)."""
    current().insert(dst, src, row=offset[0], col=offset[1])


# -- vector ----------------------------------------------------------------------------
def _binary(kind):
    def op(out, lhs, rhs, *, valid=None):
        getattr(current(), kind)(out, lhs, rhs, **_region(valid))

    op.__name__ = op.__qualname__ = kind
    op.__doc__ = f"``out = lhs {kind} rhs`` elementwise (``rhs`` a tile or a scalar; ``valid``: a tail region)."
    return op


def _region(valid) -> dict:
    """The ``valid`` keyword of a vector op (none when the op covers its whole tile)."""
    return {} if valid is None else {"valid": tuple(valid)}


add, sub, mul, div = _binary("add"), _binary("sub"), _binary("mul"), _binary("div")


def _reduce(kind, out, src, dim, valid=None):
    if dim == 0:
        getattr(current(), "row_" + kind)(out, src, **_region(valid))
    elif dim == 1:
        getattr(current(), "col_" + kind)(out, src, **_region(valid))
    else:
        raise ValueError(
            f"pl reductions take dim=0 (along rows, to [rows, 1]) or dim=1 (down columns, to [1, cols]), got dim={dim}"
        )


def maximum(out, lhs, rhs=None, *, dim=None, valid=None):
    """Elementwise max; with ``dim=0`` the row max into ``[rows, 1]``, with ``dim=1`` the column max into ``[1, cols]``
    (``valid``: the region of ``lhs`` it covers)."""
    if dim is None:
        current().max(out, lhs, rhs, **_region(valid))
    else:
        _reduce("max", out, lhs, dim, valid)


def minimum(out, lhs, rhs=None, *, dim=None, valid=None):
    """Elementwise min, or the row (``dim=0``) / column (``dim=1``) min."""
    if dim is None:
        current().min(out, lhs, rhs, **_region(valid))
    else:
        _reduce("min", out, lhs, dim, valid)


def sum(out, src, tmp=None, *, dim=0, valid=None):  # noqa: A001 - PyPTO-Pro's name
    """Row sum (``dim=0``, into ``[rows, 1]``) or column sum (``dim=1``, into ``[1, cols]``); ``tmp`` is accepted for PyPTO-Pro compatibility."""
    _reduce("sum", out, src, dim, valid)


def _unary(kind, name):
    def op(out, src, *, valid=None):
        getattr(current(), kind)(out, src, **_region(valid))

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"``out = {kind}(src)`` elementwise."
    return op


abs = _unary("abs", "abs")  # noqa: A001
exp = _unary("exp", "exp")
log = _unary("ln", "log")
sqrt = _unary("sqrt", "sqrt")
relu = _unary("relu", "relu")
neg = _unary("neg", "neg")
rsqrt = _unary("rsqrt", "rsqrt")
recip = _unary("recip", "recip")


def _expand(kind, out, src, vec, dim, valid=None):
    want = {0: (src.rows, 1), 1: (1, src.cols)}.get(dim)
    if want is None:
        raise ValueError(
            f"expand_{kind} broadcasts a [rows, 1] column (dim=0) or a [1, cols] row (dim=1), got dim={dim}"
        )
    if (vec.rows, vec.cols) != want:
        raise ValueError(f"expand_{kind}(dim={dim}) of {src} needs a [{want[0]}, {want[1]}] tile, got {vec}")
    getattr(current(), "expand_" + kind)(out, src, vec, **_region(valid))


def expand_add(out, src, vec, *, dim=0, valid=None):
    """``out = src + vec``: a ``[rows, 1]`` column broadcast along rows (``dim=0``) or a ``[1, cols]`` row down columns (``dim=1``)."""
    _expand("add", out, src, vec, dim, valid)


def expand_sub(out, src, vec, *, dim=0, valid=None):
    """``out = src - vec`` (broadcast as for ``expand_add``)."""
    _expand("sub", out, src, vec, dim, valid)


def expand_mul(out, src, vec, *, dim=0, valid=None):
    """``out = src * vec`` (broadcast as for ``expand_add``)."""
    _expand("mul", out, src, vec, dim, valid)


def expand_div(out, src, vec, *, dim=0, valid=None):
    """``out = src / vec`` (broadcast as for ``expand_add``)."""
    _expand("div", out, src, vec, dim, valid)


def fillpad(out, src, value, *, valid=None):
    """``out`` = ``src``'s valid region (``valid``; None: all of it) at its top left, ``value`` elsewhere."""
    current().fillpad(out, src, value, **_region(valid))


def cast(out, src, *, mode=RoundMode.CAST_NONE, valid=None):
    """``out = src`` in ``out``'s dtype, rounding by ``mode`` (integers saturate)."""
    current().cast(out, src, mode=mode, **_region(valid))


def fill(out, value, *, valid=None):
    """``out[:] = value``."""
    current().fill(out, value, **_region(valid))


def expands(out, scalar, *, valid=None):
    """``out[:] = scalar`` (PyPTO-Pro's name of a fill)."""
    fill(out, scalar, valid=valid)


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


def _set_mm_layout_transform(*, enabled: bool):
    """The order the cube walks M and N, as fixpipe reads L0C: N first when ``enabled`` (a K-accumulated matmul
    written back column-major), M first (the default) when not."""
    current().set_mmad_direction("n" if enabled else "m")


system = types.SimpleNamespace(
    set_mm_layout_transform=_set_mm_layout_transform,
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
"""``pl.system``: cross-core events, intra-core ``sync_src`` / ``sync_dst``, barriers and the cube's M / N order."""
