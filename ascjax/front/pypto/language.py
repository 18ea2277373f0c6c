"""The surface of ``pypto_pro.language`` that one AI Core block runs, on ascjax's record.

A kernel written for PyPTO-Pro calls these as ``pl.*``; its ``with`` sections, ``for ... in pl.range`` loops
and ``if``s are read from its source (``_source``), so the functions here are the operations themselves.
Data movement, matmuls and vector ops are ``ascjax.pl``'s (one implementation), taking GM tensors as the
kernel's parameters rather than by name. What a block of this surface cannot run (SIMT, device printf,
``pl.DN`` views, ...) raises ``UnsupportedConstruct`` naming it; nothing is skipped.
"""

from __future__ import annotations

import builtins
import contextvars
import functools
import types

import jax
import jax.numpy as jnp
import numpy as np

from ...core import Buffer
from ...core import _dtypes as dtypes
from .. import pl as _pl
from .._program import current
from .._sites import spelled
from . import _auto_mutex as auto_mutex
from . import _bounds, _gm_tensor, _struct, _tiles, _vector_function
from . import vf as _vf
from ._gm_tensor import GmTensor
from ._runtime import AIV_ONLY, TILE_NAME, RangeSpec, Runtime, Section
from ._source import UnsupportedConstruct
from ._types import DATA_TYPES, TensorLayout, TileType, dtype_name
from ._types import DYNAMIC as DYNAMIC  # the surface re-exports these
from ._types import FillPadMode as FillPadMode
from ._types import MemorySpace as MemorySpace
from ._types import ReluPreMode as ReluPreMode
from ._types import Tensor as Tensor
from ._types import Tile as Tile
from ._types import TilePad as TilePad

AccPhase = _pl.AccPhase
STPhase = _pl.STPhase
AccToVecMode = _pl.AccToVecMode
AtomicType = _pl.AtomicType
PipeType = _pl.PipeType
RoundMode = _pl.RoundMode
CrossCoreSyncMode = _pl.SyncMode
SyncMode = _pl.SyncMode

ND, DN, NZ, ZN, ZZ, NN = (TensorLayout[name] for name in ("ND", "DN", "NZ", "ZN", "ZZ", "NN"))
globals().update(DATA_TYPES)  # pl.DT_FP16, ...

#: AIVs per AI Core block (facts §3 "Topology": one AIC, two AIVs)
N_SUBBLOCKS = 2
#: the kernel's ``pl.jit(auto_mutex=...)`` during a trace
AUTO_MUTEX: contextvars.ContextVar = contextvars.ContextVar("auto_mutex", default=False)
#: inside an operation's call (the operations it calls in turn are part of it)
_INSIDE: contextvars.ContextVar = contextvars.ContextVar("inside_operation", default=False)


def _gm(tensor, what: str) -> str:
    if isinstance(tensor, GmTensor):
        return tensor.name
    if isinstance(tensor, str):
        return tensor
    raise TypeError(f"pl.{what} takes a GM tensor (a pl.Tensor parameter of the kernel), got {tensor!r}")


def _written(tensor) -> None:
    _gm_tensor.written(_gm(tensor, "store"))


# -- structure --------------------------------------------------------------------------
def section_cube() -> Section:
    """``with pl.section_cube():`` the block is the cube core's program."""
    return Section("cube")


def section_vector() -> Section:
    """``with pl.section_vector():`` the block is each vector core's program (AIV0 and AIV1)."""
    return Section("vector")


def range(*args, step=None) -> RangeSpec:  # noqa: A001 - PyPTO-Pro's name
    """``pl.range(stop)`` / ``pl.range(start, stop, step=1)``: a recorded loop (one ``lax.scan``)."""
    if step is not None:
        args = (*args, step)
    if not 1 <= len(args) <= 3:
        raise TypeError(f"pl.range takes stop, or start, stop[, step]; got {len(args)} arguments")
    start, stop, step = (0, args[0], 1) if len(args) == 1 else (*args, 1)[:3]
    return RangeSpec(start, stop, step)


def constexpr(value):
    """``pl.constexpr(cond)``: a condition evaluated while the kernel is read (it is static here)."""
    return value


set_validshape = _tiles.set_validshape
struct = _struct.struct
struct_array = _struct.struct_array


def const(value, dtype):
    """``pl.const(value, pl.DT_FP32)``: a scalar of that data type (a run-time value converted as it runs)."""
    np_dtype = np.dtype(dtypes.to_numpy_dtype(dtype_name(dtype)))
    return jnp.asarray(value).astype(np_dtype) if isinstance(value, jax.core.Tracer) else np_dtype.type(value)


def max(lhs, rhs):  # noqa: A001 - PyPTO-Pro's name
    """``pl.max(lhs, rhs)``: the larger of two scalars (a select where one is traced)."""
    return Runtime._fold(builtins.max, jnp.maximum, (lhs, rhs), {})


def min(lhs, rhs):  # noqa: A001 - PyPTO-Pro's name
    """``pl.min(lhs, rhs)``: the smaller of two scalars (a select where one is traced)."""
    return Runtime._fold(builtins.min, jnp.minimum, (lhs, rhs), {})


def make_tuple(**fields) -> types.SimpleNamespace:
    """``pl.make_tuple(name=value, ...)``: a record of tiles and values, read by attribute."""
    return types.SimpleNamespace(**fields)


get_block_num = _pl.get_block_num
get_subblock_idx = _pl.get_subblock_idx


def get_subblock_num() -> int:
    """The sub-blocks of the current core's block (facts §3 "Topology"): 2 on an AIV of a mix kernel, 1 on the cube
    and in an AIV-only kernel (its block is one AIV)."""
    return 1 if current().subblock is None or AIV_ONLY.get() else N_SUBBLOCKS


def get_block_idx():
    """The logical block index: in a mix kernel the block on the cube and ``block * 2 + sub`` on an AIV; in an
    AIV-only kernel the block (one AIV each), in ``[0, get_block_num())``."""
    k = current()
    block_num = get_block_num()
    if AIV_ONLY.get():
        return _bounds.note(k.block_idx, (0, block_num - 1))
    return _bounds.note(_pl.get_block_idx(), (0, 2 * block_num - 1))


# -- tiles ------------------------------------------------------------------------------
def _tile_name(k) -> str | None:
    name = TILE_NAME.get()
    if name is None or name not in k.allocator.names:
        return name
    serial = 2
    while f"{name}#{serial}" in k.allocator.names:
        serial += 1
    return f"{name}#{serial}"


def _check_type(tile_type, what: str) -> TileType:
    if not isinstance(tile_type, TileType):
        raise TypeError(f"pl.{what} takes a pl.TileType, got {tile_type!r}")
    return tile_type


def make_tile(tile_type, *, addr=None, size=None):
    """``pl.make_tile(type, addr=, size=)``: a tile at a fixed address (checked: alignment, capacity, overlap)."""
    tile_type = _check_type(tile_type, "make_tile")
    k = current()
    shape, fmt = _tiles.placed(k, tile_type)
    dtype = dtype_name(tile_type.dtype)
    tile = k.declared(
        ("tile", tile_type.buffer, shape, fmt, dtype, addr, TILE_NAME.get()),
        lambda: k.alloc(tile_type.buffer, shape, dtype, fmt=fmt, addr=addr, name=_tile_name(k), view=True),
    )  # PyPTO-Pro places tiles where they are written: two at one address view one array
    _tiles.note_zn(k, tile_type, tile.name)
    _tiles.declare_valid(k, tile_type, tile.name)
    _tiles.declare_pad(k, tile_type, tile.name)
    if size is not None and size < tile.nbytes:
        raise ValueError(f"rule 'tile size': {tile} needs {tile.nbytes} B, but make_tile gives it size={size}")
    return tile


def make_tile_group(*, type, addrs, mutex_ids=None, depth=None, fwd_ids=None, bwd_ids=None):  # noqa: A002
    """``pl.make_tile_group(type=, addrs=, mutex_ids=)``: ``depth`` slots (``len(mutex_ids)`` or ``len(addrs)``)
    with ``next()``, ``current()``, ``previous()`` and ``group[i]``."""
    tile_type = _check_type(type, "make_tile_group")
    if fwd_ids is not None or bwd_ids is not None:
        raise UnsupportedConstruct("rule 'pipeline': fwd_ids / bwd_ids (pl.jit(pipeline=...)) are not modelled")
    if mutex_ids is not None and depth is not None and len(mutex_ids) != depth:
        raise ValueError(f"rule 'mutex ids': a depth-{depth} tile group takes {depth} mutex_ids, got {list(mutex_ids)}")
    addr_list = list(addrs) if isinstance(addrs, (list, tuple)) else [addrs]
    depth = depth or (len(mutex_ids) if mutex_ids else None) or len(addr_list)
    gaps = {b - a for a, b in zip(addr_list, addr_list[1:])}
    if len(gaps) > 1 or gaps and builtins.min(gaps) <= 0:
        raise UnsupportedConstruct(
            f"rule 'tile group addresses': slots at {[hex(a) for a in addr_list]} are not evenly spaced upward: "
            "ascjax places a group's slots one stride apart; give addresses a fixed stride apart"
        )
    k = current()
    shape, fmt = _tiles.placed(k, tile_type)
    dtype = dtype_name(tile_type.dtype)
    stride = gaps.pop() if gaps else None
    group = k.declared(
        ("group", tile_type.buffer, shape, fmt, dtype, depth, tuple(addr_list), TILE_NAME.get()),
        lambda: k.tile_group(
            tile_type.buffer, shape, dtype, depth, fmt=fmt, addr=addr_list[0], name=_tile_name(k), view=True,
            stride=stride,
        ),  # PyPTO-Pro places groups where they are written: two at one address view one array
    )  # fmt: skip
    _tiles.note_zn(k, tile_type, group.group.name)
    _tiles.declare_valid(k, tile_type, group.group.name)
    _tiles.declare_pad(k, tile_type, group.group.name)
    if mutex_ids:
        auto_mutex.register(group.group.name, mutex_ids)
    return group


# -- data movement ----------------------------------------------------------------------
def _order(order, what: str, tensor, tile) -> tuple | None:
    """The tensor dimensions a tile window's rows and columns run along, from ``order``: ascending (the last two
    when ``order`` is None), or descending into a ZN Mat tile (a transposed load, which lands the transpose's Nz
    image, so its GM window is the ascending pair's)."""
    rank = len(tensor.shape) if isinstance(tensor, GmTensor) else 2
    if what == "store" and order is not None and list(order) != sorted(order):
        raise ValueError(
            f"rule 'order': pl.store's order must be ascending (a store writes the tile's rows and columns along "
            f"the tensor's dimensions in their order; only a load transposes), got order={list(order)}"
        )
    straight = [builtins.max(rank - 2, 0), rank - 1][-builtins.min(rank, 2) :]
    axes = straight if order is None else [int(a) for a in order]
    if len(axes) != len(straight) or len(set(axes)) != len(axes) or not all(0 <= a < rank for a in axes):
        raise ValueError(
            f"rule 'order': pl.{what}'s order names {len(straight)} distinct dimensions of {tensor} (rank {rank}) "
            f"for the tile's rows and columns, got order={list(order)}"
        )
    transposed = len(axes) == 2 and axes[0] > axes[1]
    if _tiles.is_zn(tile) and not transposed:
        raise UnsupportedConstruct(
            f"rule 'order': pl.{what} into ZN Mat tile {tile} is a transposed load: give order={sorted(axes)[::-1]} "
            "(a ZN load without it is not modelled)"
        )
    if transposed and not _tiles.is_zn(tile):
        raise UnsupportedConstruct(
            f"rule 'order': pl.{what}(..., order={list(order)}) (a transposed GM view) is modelled into a ZN Mat "
            f"tile (pl.TileType(..., target_memory=pl.MemorySpace.Mat, layout=pl.ZN)), and {tile} is not one"
        )
    return tuple(sorted(axes)) if len(axes) == 2 else None


def _window(tensor, offsets, tile, what: str, axes: tuple | None) -> tuple:
    """The (row, col) of a tile window at element ``offsets`` of a GM tensor of any rank (its 2-D view's), its rows
    and columns along dimensions ``axes``."""
    if not isinstance(tensor, GmTensor):
        return tuple(offsets)
    return tensor.offsets_2d(offsets, tile.rows, what, axes)


def _in_tiles(tile_offsets, tile, axes: tuple | None) -> tuple:
    """Element offsets of ``tile_offsets`` counted in tiles along the dimensions the tile's rows and columns run
    (``axes``, from ``_order``; the last two when None), in elements on the others."""
    offsets = list(tile_offsets)
    if len(offsets) == 1:
        return (offsets[0] * tile.cols,)
    row_axis, col_axis = axes or (len(offsets) - 2, len(offsets) - 1)
    offsets[row_axis] = offsets[row_axis] * tile.rows
    offsets[col_axis] = offsets[col_axis] * tile.cols
    return tuple(offsets)


def load(dst_tile, src_tensor, offsets=(0, 0), *, order=None):
    """GM -> L1 (ND -> Nz) or GM -> UB (MTE2) at element ``offsets`` (one per dimension; traced allowed)."""
    axes = _order(order, "load", src_tensor, dst_tile)
    window = _window(src_tensor, offsets, dst_tile, "load", axes)
    _pl.load(dst_tile, _gm(src_tensor, "load"), window, valid=_tiles.valid(dst_tile, placed=True))


def load_tile(dst_tile, src_tensor, tile_offsets, *, order=None):
    """``load`` with the offsets along the tile's rows and columns in units of its shape."""
    axes = _order(order, "load", src_tensor, dst_tile)
    load(dst_tile, src_tensor, _in_tiles(tile_offsets, dst_tile, axes), order=order)


def _scale(scale):
    """A per-tensor ``scale``: a float, or an int holding its float32 bits as the fixpipe's scale register does (a
    ``pl.DT_INT32`` kernel argument, as PyPTO-Pro passes it)."""
    if isinstance(scale, (int, np.integer)) and not isinstance(scale, (bool, np.bool_)):
        return np.array(int(scale) & 0xFFFFFFFF, np.uint32).view(np.float32)[()]
    if isinstance(scale, jax.Array) and scale.ndim == 0 and jnp.issubdtype(scale.dtype, jnp.integer):
        return jax.lax.bitcast_convert_type(scale.astype(jnp.uint32), jnp.float32)
    return scale


#: the fixpipe's mode into a ``pl.DT_HF8`` tensor (GM holds HiFloat8 as uint8 codes, so its dtype cannot name it)
HIF8_STORE_MODE = "QF322HIF8_PRE"


def store(dst_tensor, src_tile, offsets=(0, 0), *, relu_pre_mode=None, scale=None, order=None, atomic=None,
          phase=None):  # fmt: skip
    """L0C -> GM (FIX, ``phase`` = STPhase) or UB -> GM (MTE3) at element ``offsets`` (one per dimension)."""
    axes = _order(order, "store", dst_tensor, src_tile)
    _written(dst_tensor)
    hif8 = isinstance(dst_tensor, GmTensor) and dst_tensor.dtype == "hifloat8" and src_tile.buffer is Buffer.L0C
    _pl.store(_gm(dst_tensor, "store"), src_tile, _window(dst_tensor, offsets, src_tile, "store", axes), phase=phase,
              relu=bool(relu_pre_mode), scale=_scale(scale), atomic=atomic, valid=_tiles.valid(src_tile),
              quant_mode=HIF8_STORE_MODE if hif8 else None)  # fmt: skip


def store_tile(dst_tensor, src_tile, tile_offsets, *, relu_pre_mode=None, scale=None, order=None, atomic=None,
               phase=None):  # fmt: skip
    """``store`` with the offsets along the tile's rows and columns in units of its shape."""
    axes = _order(order, "store", dst_tensor, src_tile)
    store(dst_tensor, src_tile, _in_tiles(tile_offsets, src_tile, axes), relu_pre_mode=relu_pre_mode, scale=scale,
          order=order, atomic=atomic, phase=phase)  # fmt: skip


def setval(container, offset, value) -> None:
    """``pl.setval(tensor, offset, value)`` (``tensor[i, j] = value``): the scalar unit writes one GM element."""
    if not isinstance(container, GmTensor):
        raise UnsupportedConstruct(
            f"rule 'scalar access': pl.setval into {container} is not modelled; write GM tensor elements"
        )
    _gm_tensor.setval(container, offset, value)


def getval(container, offset):
    """``pl.getval(tensor, offset)`` (``tensor[i, j]``): one element of a GM input, read by the scalar unit."""
    if not isinstance(container, GmTensor):
        raise UnsupportedConstruct(
            f"rule 'scalar access': pl.getval of {container} is not modelled; read GM input elements"
        )
    return _gm_tensor.getval(container, offset)


def move(dst_tile, src_tile, offset=None, *, acc_to_vec_mode=None, relu_pre_mode=None, scale=None, phase=None):
    """Between on-chip buffers: L1 -> L0A / L0B / Bias (MTE1), L0C -> UB (FIX), UB -> L1 (MTE3), UB -> UB (V)."""
    transpose = _tiles.is_zn(src_tile)  # a ZN Mat tile holds its transpose's Nz image
    if transpose and offset is not None:
        offset = tuple(offset)[::-1]
    _pl.move(dst_tile, src_tile, offset, acc_to_vec_mode=acc_to_vec_mode, phase=phase, relu=bool(relu_pre_mode),
             transpose=transpose, valid=_tiles.valid(src_tile), scale=_scale(scale))  # fmt: skip


insert = _pl.insert


def _tail_sizes(dst, lhs, rhs) -> dict:
    """A matmul's m, k, n from its tiles' valid shapes (Left's rows and columns, Right's columns); none when no
    tile has one."""
    left, right, acc = _tiles.valid(lhs), _tiles.valid(rhs), _tiles.valid(dst)
    if left is None and right is None and acc is None:
        return {}
    m = left[0] if left is not None else acc[0] if acc is not None else lhs.rows
    k = left[1] if left is not None else right[0] if right is not None else lhs.cols
    n = right[1] if right is not None else acc[1] if acc is not None else rhs.cols
    return {"m": m, "k": k, "n": n}


def matmul(dst, lhs, rhs, bias=None, *, phase=None):
    """``pl.matmul``: dst = lhs @ rhs (+ bias), over the tiles' valid shapes where they have them."""
    _pl.matmul(dst, lhs, rhs, bias, phase=phase, **_tail_sizes(dst, lhs, rhs))


def matmul_acc(dst, acc, lhs, rhs, *, phase=None):
    """``pl.matmul_acc``: dst = acc + lhs @ rhs (``acc`` is ``dst``), over the valid shapes."""
    _pl.matmul_acc(dst, acc, lhs, rhs, phase=phase, **_tail_sizes(dst, lhs, rhs))


matmul_mx = _pl.matmul_mx
matmul_mx_acc = _pl.matmul_mx_acc


# -- vector -----------------------------------------------------------------------------
def _tailed(op):
    """``op`` over the valid region of its tiles: the destination's, or the source's for a reduction (``dim=``)."""

    @functools.wraps(op)
    def tailed(*args, **kwargs):
        reduces = kwargs.get("dim") is not None and op in (_pl.maximum, _pl.minimum) or op is _pl.sum
        valid = _tiles.valid(args[1] if reduces else args[0])
        return op(*args, **kwargs) if valid is None else op(*args, valid=valid, **kwargs)

    return tailed


add, sub, mul, div = map(_tailed, (_pl.add, _pl.sub, _pl.mul, _pl.div))
maximum, minimum, sum = map(_tailed, (_pl.maximum, _pl.minimum, _pl.sum))  # noqa: A001
abs, exp, log, sqrt, relu = map(_tailed, (_pl.abs, _pl.exp, _pl.log, _pl.sqrt, _pl.relu))  # noqa: A001
neg, rsqrt, recip = map(_tailed, (_pl.neg, _pl.rsqrt, _pl.recip))
expand_add, expand_sub, expand_mul, expand_div = map(
    _tailed, (_pl.expand_add, _pl.expand_sub, _pl.expand_mul, _pl.expand_div)
)
cast, fill, expands = _tailed(_pl.cast), _tailed(_pl.fill), _tailed(_pl.expands)


def fillpad(out, src, *, mode=FillPadMode.NORMAL):
    """``pl.fillpad(out, src, mode=)``: ``out`` holds ``src``'s valid region and, elsewhere, the pad ``out``'s
    TileType declares (``pl.TilePad``). NORMAL: equal shapes, two tiles; EXPAND: ``out`` at least as large;
    INPLACE: one tile."""
    if not isinstance(mode, FillPadMode):
        raise TypeError(f"rule 'fillpad': mode is a pl.FillPadMode, got {mode!r}")
    value = _tiles.pad_value(out)
    if value is None:
        raise ValueError(f"rule 'fillpad': {out} was declared without a pad: give its TileType pad=pl.TilePad.zero "
                         "(or max, min)")  # fmt: skip
    same_shape = (out.rows, out.cols) == (src.rows, src.cols)
    same_place = (out.buffer, out.addr) == (src.buffer, src.addr)
    if mode is not FillPadMode.EXPAND and not same_shape:
        raise ValueError(f"rule 'fillpad': {mode.name} takes tiles of one shape, got {out} and {src}")
    if (mode is FillPadMode.INPLACE) != same_place:
        one = "one tile (out is src)" if mode is FillPadMode.INPLACE else "two tiles at different addresses"
        raise ValueError(f"rule 'fillpad': {mode.name} takes {one}, got {out} and {src}")
    _pl.fillpad(out, src, value, valid=_tiles.valid(src))


# -- vector functions -------------------------------------------------------------------
def _vf_guard(args, kwargs, issue) -> None:
    if AUTO_MUTEX.get():
        auto_mutex.guarded("vector_function", args, kwargs, issue)
    else:
        issue()


def vector_function(fn):
    """``@pl.vector_function``: register code over Vec tiles, one V instruction per call (``pl.Vf`` its ops)."""
    return _vector_function.vector_function(fn, _vf_guard)


Vf = _vf.Vf
globals().update(_vf.ENUMS)  # pl.MaskPattern, pl.LoadDist, ...


# -- synchronisation --------------------------------------------------------------------
def _mutex_call(verb: str):
    def call(*, pipe, mutex_id, mode=0, max_mutex_id=2, mutex_ids=None):
        if mode != 0:
            raise UnsupportedConstruct(f"rule 'mutex': pl.system.mutex_{verb}(mode={mode}) is not modelled (mode 0 is)")
        getattr(current(), f"mutex_{verb}")(pipe, mutex_id)

    call.__name__ = f"mutex_{verb}"
    call.__doc__ = f"``pl.system.mutex_{verb}(pipe=, mutex_id=)``: the buffer-id mutex by hand (auto_mutex=False)."
    return call


def _operation(name: str, op):
    """``op``, whose instructions read as ``pl.<name>`` in sites and reports (``pl.move``, not ``copy_l12l0a``),
    with the locks auto_mutex inserts around it when the kernel asks for them."""

    @functools.wraps(op)
    def operation(*args, **kwargs):
        if _INSIDE.get():  # an operation another one calls (pl.store_tile's pl.store): the outer one is the call
            return op(*args, **kwargs)

        def run():
            token = _INSIDE.set(True)
            try:
                with spelled(f"pl.{name}"):
                    return op(*args, **kwargs)
            finally:
                _INSIDE.reset(token)

        return auto_mutex.guarded(name, args, kwargs, run) if AUTO_MUTEX.get() else run()

    return operation


def _spelled(name: str, op):
    @functools.wraps(op)
    def spelled_op(*args, **kwargs):
        with spelled(name):
            return op(*args, **kwargs)

    return spelled_op


#: the operations that issue instructions on tiles
_OPERATIONS = (
    "load", "load_tile", "store", "store_tile", "move", "insert", "matmul", "matmul_acc", "matmul_mx",
    "matmul_mx_acc", "add", "sub", "mul", "div", "maximum", "minimum", "sum", "abs", "exp", "log", "sqrt", "relu",
    "expand_add", "expand_sub", "expand_mul", "expand_div", "cast", "fill", "expands", "neg", "rsqrt", "recip",
    "setval", "fillpad",
)  # fmt: skip
globals().update({name: _operation(name, globals()[name]) for name in _OPERATIONS})
system = types.SimpleNamespace(
    **{name: _spelled(f"pl.system.{name}", op) for name, op in vars(_pl.system).items()},
    mutex_lock=_spelled("pl.system.mutex_lock", _mutex_call("lock")),
    mutex_unlock=_spelled("pl.system.mutex_unlock", _mutex_call("unlock")),
)
"""``pl.system``: ``sync_src`` / ``sync_dst``, ``set_cross_core`` / ``wait_cross_core``, the barriers."""

#: what this surface has (``__getattr__`` refuses the rest of PyPTO-Pro by name)
_INTERNAL = {"annotations", "jax", "jnp", "np", "dtypes", "builtins", "contextvars", "functools", "types", "current", "spelled", "GmTensor", "DATA_TYPES", "TILE_NAME",
             "AUTO_MUTEX", "AIV_ONLY", "N_SUBBLOCKS", "auto_mutex", "RangeSpec", "Runtime", "Section", "UnsupportedConstruct", "UnsupportedName", "dtype_name"}  # fmt: skip
SURFACE = sorted(name for name in list(globals()) if not name.startswith("_") and name not in _INTERNAL)


class UnsupportedName(UnsupportedConstruct, AttributeError):
    """A ``pl.<name>`` outside the surface: refused by name, and an ``AttributeError`` (so ``hasattr`` is False)."""


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    raise UnsupportedName(
        f"rule 'construct': pl.{name} is not supported by ascjax's PyPTO-Pro front end (one AI Core block: tiles, "
        "load / store / move / insert, the matmul family, vector ops, pl.system sync); see docs/pypto.md"
    )


__all__ = SURFACE
