"""PyPTO-Pro's vector functions (VF): the ``vf.*`` register operations a ``@pl.vector_function`` body calls.

A VF body works on the vector unit's registers, not on tiles: it loads a register from a UB tile
(``vf.load_align``), computes on registers under predicate masks and stores registers back
(``vf.store_align``). On the device the whole VF is one instruction of pipe V; here each ``vf.*``
call is a JAX function and ``_vf_runtime`` runs the body (its ``pl.range`` loops as ``lax`` loops).

Registers [PyPTO-Pro ``vf_computation/reg_tensor.md``]
    A vector register (``reg_tensor``) holds VL = 256 bytes: a 1-D JAX array of 256 / itemsize lanes
    (64 fp32, 128 fp16/bf16, 256 int8). 64-bit lanes need ``jax_enable_x64``; hifloat8, fp4 and int4
    registers (packed or without a JAX type) are refused by name.

Masks [``mask_operations/create_mask.md``]
    A mask register (``mask_tensor``) is 256 predicate bits, one per byte of the register: a bool
    array of shape ``(256,)``. A mask made for a dtype of ``w`` bytes sets all ``w`` bits of each
    active element (as ``get_mask_spr`` and ``addc`` write them); an operation on ``w``-byte lanes
    reads the lowest bit of each element's group (``mask_gen_with_reg_tensor.md``: "only the lowest
    bit is valid"). So a b32 mask drives b16 data lane-pair by lane-pair, and a mask packed with
    ``StoreDist.PACK`` and reloaded with ``LoadDist.US`` comes back unchanged.

Inactive lanes
    ``MergeMode.ZEROING`` (the default) writes 0 to lanes the mask does not select; ``MERGING`` keeps
    the destination register's lanes. An operation that reads its destination (``MERGING``,
    ``vf.move`` with a mask, ``mul_add_dst``, ``mul_dst_add``, ``axpy``, ``histograms``, and a
    ``load_align`` whose target was declared a mask) returns a ``DestinationRead``: the runtime's
    environment resolves it with the value the assigned name held before the statement
    (``dst = vf.mul_add_dst(a, b, preg)`` reads ``dst``). A name assigned for the first time by a merge
    holds 0 in the lanes the mask leaves out (the device leaves them undefined); an op that computes
    with its destination (``mul_add_dst``, ``axpy``, ``histograms``...) refuses an unassigned one.

Tile memory
    Inside a VF a tile is its bytes as stored (an ND tile's elements in row-major order, an Nz tile's
    fractals), addressed in bytes. ``tile + n`` is a
    ``TileRef`` ``n`` elements (of the tile's dtype) further; an ``offset`` argument counts tile
    elements too (``[row, col]`` means ``row * cols + col``). A load or store whose window runs past
    either end of its tile is refused (``rule 'bounds'``) when its offset and mask are static; with a
    traced offset (a ``pl.range`` index, a traced scalar argument) bytes past the end read as zeros
    and stores to them are dropped. ``post_update=True`` advances the pointer the access used (the
    ``TileRef``; for the unaligned family the alignment register), as the generated code does.

What is refused (``UnsupportedConstruct`` naming the op): ``vf.subc`` (its borrow-in polarity is
documented two ways), ``vf.unsqueeze`` (its formula and its algorithm disagree), ``vf.get_mask_spr``
(the SPR mask lives outside the VF), ``vf.gather`` in ``DATA_BLOCK_LOAD`` mode, conversions to and
from hifloat8 / fp4 / int4 and bf16 -> e8m0, and every ``vf.<name>`` this module does not define.

Numerics: f16/bf16 arithmetic is done in the register's type (IEEE rounding); ``exp`` / ``ln`` /
``sqrt`` / ``div`` are XLA's and need not match the vector unit's last bit; ``mul_add_dst`` /
``mul_dst_add`` / ``axpy`` are fused (an f32 exact product then one rounding for f16/bf16, a
compensated product for f32); ``reduce_sum`` adds in a fixed binary tree (adjacent pairs), f16 in
f32; comparisons, ``max`` / ``min`` and reductions order floats by their bit patterns, so f32
subnormals and the signed zeros behave as the docs say (``max(-0, +0) = +0``) even where XLA's CPU
flushes subnormals.
"""

from __future__ import annotations

import contextvars
import dataclasses
import enum
import itertools
import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np

from ...core.formats import saturate as float_formats
from ...core.formats.saturate import order_key
from ...core.layout import from_fractal, pad_to, to_fractal
from ...isa.ops.vector import RoundMode, round_cast
from ._source import UnsupportedConstruct
from ._types import DataType

#: bytes of one vector register (VL) [reg_tensor.md: "寄存器总大小固定为256字节"]
VECTOR_REGISTER_BYTES = 256
#: predicate bits of one mask register: one per register byte
MASK_REGISTER_BITS = VECTOR_REGISTER_BYTES
#: bytes of one DataBlock (the unit of DATA_BLOCK_COPY, BLK, E2B and datablock reductions)
DATA_BLOCK_BYTES = 32
#: DataBlocks in one register
DATA_BLOCKS = VECTOR_REGISTER_BYTES // DATA_BLOCK_BYTES
BITS_PER_BYTE = 8
#: bins of one ``vf.histograms`` half (BIN0: values 0..127, BIN1: 128..255), one uint16 lane each
HISTOGRAM_BINS = 128


# -- enums (PyPTO-Pro's names: vf_computation/types/*.md) ------------------------------------------------
class MaskPattern(enum.Enum):
    """``pl.MaskPattern``: which elements ``vf.create_mask`` selects."""

    ALL = "ALL"
    ALLF = "ALLF"
    VL1 = "VL1"
    VL2 = "VL2"
    VL3 = "VL3"
    VL4 = "VL4"
    VL8 = "VL8"
    VL16 = "VL16"
    VL32 = "VL32"
    VL64 = "VL64"
    VL128 = "VL128"
    M3 = "M3"
    M4 = "M4"
    H = "H"
    Q = "Q"


class MergeMode(enum.Enum):
    """``pl.MergeMode``: inactive lanes become 0 (ZEROING) or keep the destination's value (MERGING)."""

    ZEROING = "ZEROING"
    MERGING = "MERGING"


class CastLayout(enum.Enum):
    """``pl.CastLayout``: which part of the wider lane the narrower elements occupy (even, odd, 3rd, 4th)."""

    ZERO = 0
    ONE = 1
    TWO = 2
    THREE = 3


class VFRoundMode(enum.Enum):
    """``pl.VFRoundMode``: the rounding of ``vf.astype``."""

    CAST_ROUND = "CAST_ROUND"
    CAST_RINT = "CAST_RINT"
    CAST_FLOOR = "CAST_FLOOR"
    CAST_CEIL = "CAST_CEIL"
    CAST_TRUNC = "CAST_TRUNC"
    CAST_ODD = "CAST_ODD"
    CAST_HYBRID = "CAST_HYBRID"


class SaturateMode(enum.Enum):
    """``pl.SaturateMode``: out-of-range conversions wrap / propagate (OFF) or clamp (ON)."""

    OFF = "OFF"
    ON = "ON"


class LoadDist(enum.Enum):
    """``pl.LoadDist``: how ``vf.load_align`` lays UB bytes into a register."""

    NORM = "NORM"
    BRC = "BRC"
    BRC_B8 = "BRC_B8"
    BRC_B16 = "BRC_B16"
    BRC_B32 = "BRC_B32"
    US = "US"
    US_B8 = "US_B8"
    US_B16 = "US_B16"
    DS = "DS"
    DS_B8 = "DS_B8"
    DS_B16 = "DS_B16"
    UNPK = "UNPK"
    UNPK_B8 = "UNPK_B8"
    UNPK_B16 = "UNPK_B16"
    UNPK_B32 = "UNPK_B32"
    UNPK4 = "UNPK4"
    BLK = "BLK"
    E2B = "E2B"
    E2B_B16 = "E2B_B16"
    E2B_B32 = "E2B_B32"
    DINTLV_B8 = "DINTLV_B8"
    DINTLV_B16 = "DINTLV_B16"
    DINTLV_B32 = "DINTLV_B32"


class StoreDist(enum.Enum):
    """``pl.StoreDist``: how ``vf.store_align`` writes a register (or two, or a mask) to UB."""

    NORM = "NORM"
    NORM_B16 = "NORM_B16"
    FIRST_ELEMENT = "FIRST_ELEMENT"
    PACK = "PACK"
    PACK4 = "PACK4"
    INTLV = "INTLV"
    INTLV_B32 = "INTLV_B32"


class DataCopyMode(enum.Enum):
    """``pl.DataCopyMode``: element-wise (NORM) or DataBlock-wise (DATA_BLOCK_*) copies."""

    NORM = "NORM"
    DATA_BLOCK_LOAD = "DATA_BLOCK_LOAD"
    DATA_BLOCK_COPY = "DATA_BLOCK_COPY"


class DuplicatePos(enum.Enum):
    """``pl.DuplicatePos``: the source lane ``vf.full`` broadcasts in tensor mode."""

    LOWEST = "LOWEST"
    HIGHEST = "HIGHEST"


class IndexOrder(enum.Enum):
    """``pl.IndexOrder``: ``vf.arange`` counts up or down."""

    INCREASE_ORDER = "INCREASE_ORDER"
    DECREASE_ORDER = "DECREASE_ORDER"


class MemBarMode(enum.Enum):
    """``pl.MemBarMode``: the source -> destination access kinds a ``vf.mem_bar`` orders."""

    VST_VLD = "VST_VLD"
    VLD_VST = "VLD_VST"
    VST_VST = "VST_VST"
    VST_LD = "VST_LD"
    VST_ST = "VST_ST"
    VLD_ST = "VLD_ST"
    ST_VLD = "ST_VLD"
    ST_VST = "ST_VST"
    LD_VST = "LD_VST"
    VV_ALL = "VV_ALL"
    VS_ALL = "VS_ALL"
    SV_ALL = "SV_ALL"


class SqueezeMode(enum.Enum):
    """``pl.SqueezeMode``: whether ``vf.squeeze`` writes its byte count to the AR special register."""

    NO_STORE_REG = "NO_STORE_REG"
    STORE_REG = "STORE_REG"


class BinType(enum.Enum):
    """``pl.BinType``: the value half ``vf.histograms`` counts (BIN0: 0..127, BIN1: 128..255)."""

    BIN0 = 0
    BIN1 = 1


class HistType(enum.Enum):
    """``pl.HistType``: cumulative (ACCUMULATE) or per-value (FREQUENCY) counts."""

    ACCUMULATE = "ACCUMULATE"
    FREQUENCY = "FREQUENCY"


class PackPart(enum.Enum):
    """``pl.PackPart``: the half of the narrow register ``vf.pack`` writes / ``vf.unpack`` reads."""

    LOWER = 0
    UPPER = 1


class MaskWidth(enum.Enum):
    """``pl.MaskWidth``: the width ``vf.get_mask_spr`` expands the SPR mask to."""

    B32 = 4
    B16 = 2


#: the enums a kernel reads as ``pl.<Name>``
ENUMS = {
    cls.__name__: cls
    for cls in (MaskPattern, MergeMode, CastLayout, VFRoundMode, SaturateMode, LoadDist, StoreDist, DataCopyMode,
                DuplicatePos, IndexOrder, MemBarMode, SqueezeMode, BinType, HistType, PackPart, MaskWidth)
}  # fmt: skip


# -- errors --------------------------------------------------------------------------------------------------------
def refused(op: str, why: str) -> UnsupportedConstruct:
    """The error for a VF construct ascjax does not model, naming it."""
    return UnsupportedConstruct(f"rule 'construct': vf.{op} {why}")


def _traced(value) -> bool:
    return isinstance(value, jax.core.Tracer)


def _concrete(value) -> bool:
    """Whether every leaf of ``value`` is known while it is read (not a tracer)."""
    return not any(_traced(leaf) for leaf in jax.tree_util.tree_leaves(value))


# -- data types ----------------------------------------------------------------------------------------------------
_REGISTER_DTYPES = (
    "float16", "float32", "bfloat16", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
    "float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu",
)  # fmt: skip
_PACKED_DTYPES = ("float4_e2m1fn", "float4_e1m2", "int4", "hifloat8")


def _dtype_label(dtype) -> str:
    return str(dtype)


def register_dtype(dtype, op: str) -> np.dtype:
    """The JAX dtype of register lanes of PyPTO-Pro type ``dtype`` (``pl.DT_*``, a dtype name or a NumPy dtype)."""
    if isinstance(dtype, DataType):
        name = dtype.name
    elif isinstance(dtype, str):
        name = dtype
    else:
        name = np.dtype(dtype).name
    if name in _PACKED_DTYPES:
        raise refused(
            op, f"on {_dtype_label(dtype)} registers is not modelled: hifloat8 has no JAX type and fp4 / int4 are "
            "packed two to a byte; convert through a wider type outside the VF"
        )  # fmt: skip
    if name not in _REGISTER_DTYPES:
        raise TypeError(f"vf.{op}: {_dtype_label(dtype)} is not a register data type ({', '.join(_REGISTER_DTYPES)})")
    result = jnp.dtype(name)
    if result.itemsize == 8 and not jax.config.jax_enable_x64:
        raise refused(op, f"on {_dtype_label(dtype)} registers needs 64-bit JAX types: enable jax_enable_x64")
    return result


def lanes(dtype) -> int:
    """The lanes of a register of ``dtype``: VL / itemsize."""
    return VECTOR_REGISTER_BYTES // np.dtype(dtype).itemsize


def _is_float(dtype) -> bool:
    return jnp.issubdtype(dtype, jnp.floating)


def _unsigned(width: int) -> np.dtype:
    return np.dtype(f"uint{width * BITS_PER_BYTE}")


def _bits(x) -> jax.Array:
    """A register's lanes as unsigned integers of the same width."""
    return (
        x
        if jnp.issubdtype(x.dtype, jnp.unsignedinteger)
        else jax.lax.bitcast_convert_type(x, _unsigned(x.dtype.itemsize))
    )


def _from_bits(bits, dtype) -> jax.Array:
    return bits if bits.dtype == dtype else jax.lax.bitcast_convert_type(bits, dtype)


def to_bytes(x) -> jax.Array:
    """Lanes as their little-endian bytes (uint8)."""
    x = jnp.asarray(x)
    if x.dtype == jnp.bool_:
        return x.astype(jnp.uint8)
    if x.dtype.itemsize == 1:
        return jax.lax.bitcast_convert_type(x, jnp.uint8)
    return jax.lax.bitcast_convert_type(x, jnp.uint8).reshape(*x.shape[:-1], -1)


def from_bytes(data, dtype) -> jax.Array:
    """Little-endian bytes as lanes of ``dtype``."""
    dtype = jnp.dtype(dtype)
    if dtype.itemsize == 1:
        return jax.lax.bitcast_convert_type(data, dtype)
    return jax.lax.bitcast_convert_type(data.reshape(*data.shape[:-1], -1, dtype.itemsize), dtype)


def _wrap_int(value: int, dtype) -> int:
    """A Python int as ``dtype`` would hold it (two's complement wrap)."""
    info = np.iinfo(dtype)
    span = 1 << (np.dtype(dtype).itemsize * BITS_PER_BYTE)
    value %= span
    return value - span if value > info.max else value


def scalar(value, dtype) -> jax.Array:
    """A scalar operand as a 0-d value of the register's ``dtype`` (integers wrap, floats round to nearest)."""
    dtype = jnp.dtype(dtype)
    if isinstance(value, DestinationRead) or _is_register(value) or _is_mask(value):
        raise TypeError(f"expected a scalar of {dtype}, got a register")
    if not _traced(value) and np.ndim(value) == 0 and not isinstance(value, jax.Array):
        if jnp.issubdtype(dtype, jnp.integer):
            return jnp.asarray(np.asarray(_wrap_int(int(value), dtype), dtype))
        return jnp.asarray(np.asarray(float(value), dtype))
    value = jnp.asarray(value)
    if value.ndim != 0:
        raise TypeError(f"expected a scalar of {dtype}, got an array of shape {value.shape}")
    return value.astype(dtype)


# -- registers and masks -------------------------------------------------------------------------------------------
def _is_mask(x) -> bool:
    return hasattr(x, "dtype") and x.dtype == jnp.bool_ and tuple(jnp.shape(x)) == (MASK_REGISTER_BITS,)


def _is_register(x) -> bool:
    if not hasattr(x, "dtype") or x.dtype == jnp.bool_ or len(jnp.shape(x)) != 1:
        return False
    return jnp.shape(x)[0] * x.dtype.itemsize == VECTOR_REGISTER_BYTES


def register(x, op: str, what: str = "src") -> jax.Array:
    """``x`` checked to be a vector register."""
    if isinstance(x, DestinationRead):
        x = x.standalone(op)
    if _is_mask(x):
        raise TypeError(f"vf.{op}: {what} is a mask register, expected a vector register")
    if not _is_register(x):
        raise TypeError(
            f"vf.{op}: {what} must be a vector register ({VECTOR_REGISTER_BYTES} bytes of lanes), got {_describe(x)}"
        )
    return x


def mask_register(x, op: str, what: str = "mask") -> jax.Array:
    """``x`` checked to be a mask register."""
    if isinstance(x, DestinationRead):
        x = x.standalone(op)
    if not _is_mask(x):
        raise TypeError(f"vf.{op}: {what} must be a mask register (vf.create_mask / vf.update_mask / a compare), got "
                        f"{_describe(x)}")  # fmt: skip
    return x


def _describe(x) -> str:
    if hasattr(x, "dtype") and hasattr(x, "shape"):
        return f"an array of shape {tuple(x.shape)} and dtype {x.dtype}"
    return f"{type(x).__name__} {x!r}"


def mask_lanes(mask, width: int) -> jax.Array:
    """The predicate of each ``width``-byte lane: the lowest bit of its group."""
    return mask[::width]


def lanes_to_mask(active, width: int) -> jax.Array:
    """A mask setting every bit of each active ``width``-byte lane."""
    return jnp.repeat(jnp.asarray(active, jnp.bool_), width, total_repeat_length=MASK_REGISTER_BITS)


def _same_dtype(op: str, *regs) -> None:
    dtypes = {r.dtype for r in regs}
    if len(dtypes) != 1:
        raise TypeError(f"vf.{op}: the registers must have one data type, got {', '.join(map(str, dtypes))}")


def _check_dtype(op: str, x, allowed: tuple) -> None:
    if x.dtype.name not in allowed:
        raise TypeError(f"vf.{op} takes {', '.join(allowed)} registers, got {x.dtype}")


_INTS = ("int8", "uint8", "int16", "uint16", "int32", "uint32")
_ARITH = (*_INTS, "float16", "bfloat16", "float32")  # add / sub / max / min / compares
_MUL = ("int16", "uint16", "int32", "uint32", "float16", "bfloat16", "float32")
_DIV = ("int16", "uint16", "int32", "uint32", "float16", "float32")
_MULS = ("int16", "uint16", "int32", "uint32", "float16", "float32")
_FLOAT = ("float16", "float32")
_SIGNED = ("int8", "int16", "int32", "float16", "float32")
_BITWISE = (*_ARITH, "float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu")
_REDUCE = ("int16", "uint16", "int32", "uint32", "float16", "float32")


# -- destination reads ---------------------------------------------------------------------------------------------
class _Unbound:
    def __repr__(self) -> str:
        return "<unbound>"


#: the "previous value" of a name that had none before the statement assigning it
UNBOUND = _Unbound()


@dataclasses.dataclass(frozen=True)
class DestinationRead:
    """The result of an op that reads its destination register: ``resolve(old, name)`` gives the new value of
    the name it is assigned to, from the value ``old`` that name held (``UNBOUND`` if none)."""

    op: str
    combine: Callable
    alone: Callable | None = None  # the value when it is not assigned (None: the op needs its destination)

    def resolve(self, old=UNBOUND, name: str = "the destination"):
        return self.combine(old, name)

    def standalone(self, consumer: str):
        if self.alone is None:
            raise UnsupportedConstruct(
                f"rule 'construct': vf.{self.op} reads its destination register, so its result must be assigned to "
                f"a name (dst = vf.{self.op}(...)), not passed straight to vf.{consumer}"
            )
        return self.alone()


def _old_register(op: str, old, name: str, like, merge: bool = False) -> jax.Array:
    """The destination's previous value, checked to be a register of ``like``'s type. A name never assigned before a
    merge (``MERGING``, ``vf.move``) holds an undefined register on the device; here its lanes are 0. An op that
    computes with its destination (``mul_add_dst``, ``axpy``, ``histograms``...) needs it assigned."""
    if old is UNBOUND and merge:
        return jnp.zeros_like(like)
    if old is UNBOUND:
        raise UnsupportedConstruct(
            f"rule 'construct': vf.{op} reads its destination register {name!r}, which has no value before this "
            f"line: initialise it first (e.g. {name} = vf.full(0, preg, dtype=...))"
        )
    old = register(old, op, f"the destination {name!r}")
    if old.dtype != like.dtype:
        raise TypeError(f"vf.{op}: the destination {name!r} holds {old.dtype} lanes, the result is {like.dtype}")
    return old


def _finish(op: str, result, active, mode) -> jax.Array | DestinationRead:
    """``result`` on the active lanes; the inactive ones 0 (ZEROING) or the destination's (MERGING)."""
    mode = MergeMode.ZEROING if mode is None else mode
    if not isinstance(mode, MergeMode):
        raise TypeError(f"vf.{op}: mode must be a pl.MergeMode, got {mode!r}")
    if mode is MergeMode.ZEROING:
        return jnp.where(active, result, jnp.zeros((), result.dtype))
    return DestinationRead(op, lambda old, name: jnp.where(active, result, _old_register(op, old, name, result, True)))


# -- the machine: tile memory and special registers of one VF run --------------------------------------------------
_MACHINE: contextvars.ContextVar = contextvars.ContextVar("vf_machine", default=None)

#: state keys
_AR = "ar"


class VfMachine:
    """The UB tiles one VF run may touch (as flat byte arrays) and its special registers, all in ``state`` (a dict of
    JAX arrays the runtime carries through loops and branches); ``reads`` / ``writes`` list the tiles accessed."""

    def __init__(self, tiles: dict):
        self.state: dict = {_AR: jnp.int32(0)}
        self._keys: dict = {}  # tile -> "mem:<i>"
        self.tiles: dict = {}  # "mem:<i>" -> tile
        self.shapes: dict = {}  # "mem:<i>" -> the shape its contents came in
        self.reads: dict = {}  # "mem:<i>" -> tile, in access order
        self.writes: dict = {}
        self._serial = itertools.count()
        for i, (tile, contents) in enumerate(tiles.items()):
            key = f"mem:{i}"
            self._keys[tile] = key
            self.tiles[key] = tile
            self.shapes[key] = tuple(jnp.shape(contents))
            self.state[key] = tile_bytes(tile, contents)

    def key(self, tile, op: str) -> str:
        key = self._keys.get(tile)
        if key is None:
            raise ValueError(f"vf.{op}: {tile} was not passed to the vector function (a VF reaches only its tile "
                             "arguments)")  # fmt: skip
        return key

    def contents(self, key: str) -> jax.Array:
        """A tile's memory in the shape its contents came in."""
        return tile_contents(self.tiles[key], self.state[key], self.shapes[key])

    def new_register(self, prefix: str) -> int:
        """A fresh special-register id whose state (a byte offset) starts at 0."""
        serial = next(self._serial)
        self.state[f"{prefix}:{serial}"] = jnp.int32(0)
        return serial

    def offset(self, key: str):
        """The byte offset a pointer or alignment register has advanced (0 where it is not carried here)."""
        return self.state.get(key, jnp.int32(0))

    def advance(self, key: str, nbytes) -> None:
        self.state[key] = self.offset(key) + jnp.asarray(nbytes, jnp.int32)


def machine(op: str) -> VfMachine:
    """The machine of the VF being run (``vf.<op>`` touches memory or a special register)."""
    m = _MACHINE.get()
    if m is None:
        raise RuntimeError(f"vf.{op} accesses UB or a special register: call it inside a @pl.vector_function body")
    return m


def tile_itemsize(tile) -> int:
    """Bytes per element of a tile (sub-byte types are packed: refused)."""
    if tile.dtype in _PACKED_DTYPES and tile.dtype != "hifloat8":
        raise UnsupportedConstruct(
            f"rule 'construct': a vector function on {tile} ({tile.dtype}: packed sub-byte elements) is not "
            "modelled; give the VF tiles of 8-bit or wider elements"
        )
    return np.dtype(tile.np_dtype).itemsize


def tile_bytes(tile, contents) -> jax.Array:
    """A tile's memory as bytes in the order they are stored: ``contents`` is its physical array
    (``tile.physical_shape``: Nz fractals for an Nz tile) or its ``rows x cols`` matrix, laid out as the tile's
    format stores it (the padding of its fractals zero)."""
    tile_itemsize(tile)
    contents = jnp.asarray(contents).astype(tile.np_dtype)
    shape, physical = tuple(contents.shape), tuple(tile.physical_shape)
    if shape != physical:
        if shape != (tile.rows, tile.cols):
            raise ValueError(f"the contents of {tile} have shape {shape}, expected {(tile.rows, tile.cols)} or the "
                             f"physical {physical}")  # fmt: skip
        contents = to_fractal(pad_to(contents, *tile.padded), tile.fmt, tile.c0)
    return to_bytes(contents.reshape(-1))


def tile_contents(tile, data, shape: tuple) -> jax.Array:
    """A tile's memory bytes back to an array of ``shape`` (physical, or ``rows x cols``)."""
    physical = from_bytes(data, tile.np_dtype).reshape(tile.physical_shape)
    if tuple(shape) == tuple(tile.physical_shape):
        return physical
    return from_fractal(physical, tile.fmt)[: tile.rows, : tile.cols]


@jax.tree_util.register_pytree_node_class
class TileRef:
    """A pointer into a UB tile inside a VF: the tile and a byte offset. ``ref + n`` / ``ref - n`` move it by ``n``
    elements of the tile's dtype; ``post_update`` accesses advance it in place (its own pointer register)."""

    def __init__(self, tile, byte_offset=0, pointer: int | None = None):
        self.tile = tile
        self.byte_offset = byte_offset
        m = _MACHINE.get()
        self.pointer = pointer if pointer is not None else (m.new_register("ptr") if m is not None else -1)

    # a pytree: the offset is data, the tile and the pointer register are static
    def tree_flatten(self):
        return (self.byte_offset,), (self.tile, self.pointer)

    @classmethod
    def tree_unflatten(cls, aux, children):
        ref = cls.__new__(cls)
        ref.tile, ref.pointer = aux
        (ref.byte_offset,) = children
        return ref

    @property
    def pointer_key(self) -> str:
        return f"ptr:{self.pointer}"

    def address(self):
        """Bytes from the tile's start, post-updates included."""
        m = _MACHINE.get()
        return self.byte_offset if m is None or self.pointer_key not in m.state else self.byte_offset + m.offset(
            self.pointer_key)  # fmt: skip

    def _moved(self, elements, sign: int) -> TileRef:
        if isinstance(elements, (TileRef, DestinationRead)) or _is_register(elements) or _is_mask(elements):
            return NotImplemented
        if not _traced(elements) and not isinstance(elements, (int, np.integer, jax.Array)):
            return NotImplemented
        return TileRef(self.tile, self.address() + sign * elements * tile_itemsize(self.tile))

    def __add__(self, elements):
        return self._moved(elements, 1)

    __radd__ = __add__

    def __sub__(self, elements):
        return self._moved(elements, -1)

    @property
    def name(self) -> str:
        return self.tile.name

    @property
    def rows(self) -> int:
        return self.tile.rows

    @property
    def cols(self) -> int:
        return self.tile.cols

    @property
    def shape(self) -> tuple:
        return (self.tile.rows, self.tile.cols)

    @property
    def dtype(self):
        return self.tile.dtype

    def __repr__(self) -> str:
        return f"TileRef({self.tile.name} + {self.byte_offset} B)"


@jax.tree_util.register_pytree_node_class
@dataclasses.dataclass(frozen=True)
class AddrReg:
    """``vf.create_addr_reg(...)``: an address offset in bytes, for ``load_align`` / ``store_align``."""

    byte_offset: object

    def tree_flatten(self):
        return (self.byte_offset,), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children)


@jax.tree_util.register_pytree_node_class
@dataclasses.dataclass(frozen=True)
class UnalignReg:
    """An alignment register of the unaligned load / store family; its state (the bytes it has advanced) lives in the
    machine, so it survives loops."""

    serial: int
    kind: str  # "store" or "load"

    @property
    def key(self) -> str:
        return f"ureg:{self.serial}"

    def tree_flatten(self):
        return (), (self.serial, self.kind)

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*aux)


def _as_ref(x, op: str, what: str = "tile") -> TileRef:
    if isinstance(x, TileRef):
        return x
    m = _MACHINE.get()
    if m is not None and x in m._keys:
        return TileRef(x, 0)
    raise TypeError(f"vf.{op}: {what} must be a UB tile of the vector function (or tile + offset), got {_describe(x)}")


def _offset_bytes(ref: TileRef, offset, op: str):
    """An ``offset`` argument in bytes: tile elements, ``[row, col]``, or an AddrReg."""
    if offset is None:
        return 0
    if isinstance(offset, AddrReg):
        return offset.byte_offset
    if isinstance(offset, (list, tuple)):
        if len(offset) != 2:
            raise TypeError(f"vf.{op}: a list offset is [row, col], got {offset!r}")
        row, col = offset
        return (row * ref.tile.cols + col) * tile_itemsize(ref.tile)
    if _is_register(offset) or _is_mask(offset):
        raise TypeError(f"vf.{op}: the offset must be an int, [row, col] or an AddrReg, got a register")
    return offset * tile_itemsize(ref.tile)


# -- memory accesses -----------------------------------------------------------------------------------------------
def _window_message(op: str, verb: str, ref: TileRef, lo: int, hi: int, nbytes: int) -> str:
    size = tile_itemsize(ref.tile)
    n = nbytes // size
    return (
        f"rule 'bounds': vf.{op} {verb} bytes [{lo}, {hi}) of tile `{ref.tile.name}` (elements "
        f"{lo / size:g} to {hi / size:g}), which holds {n} elements of {ref.tile.dtype} ({n * size} bytes): the "
        "offset runs past the tile"
    )


def _indices(ref: TileRef, size: int, byte_index, enable, op: str, verb: str):
    """The byte indices of an access to a tile of ``size`` bytes, refused when static and out of range; out-of-range
    traced ones point past the end (reads fill 0, writes drop)."""
    byte_index = jnp.asarray(byte_index, jnp.int32) if _traced(byte_index) else np.asarray(byte_index, np.int64)
    if _concrete((byte_index, enable)):
        idx = np.asarray(byte_index)
        on = np.ones(idx.shape, bool) if enable is None else np.asarray(enable, bool)
        bad = on & ((idx < 0) | (idx >= size))
        if bad.any():
            used = idx[on]
            raise ValueError(_window_message(op, verb, ref, int(used.min()), int(used.max()) + 1, size))
    byte_index = jnp.asarray(byte_index, jnp.int32)
    ok = (byte_index >= 0) & (byte_index < size)
    if enable is not None:
        ok = ok & enable
    return jnp.where(ok, byte_index, size)


def read_bytes(ref: TileRef, byte_index, op: str, enable=None) -> jax.Array:
    """The bytes of ``ref``'s tile at ``byte_index`` (offsets from the tile's start); disabled ones read 0."""
    m = machine(op)
    key = m.key(ref.tile, op)
    m.reads[key] = ref.tile
    idx = _indices(ref, m.state[key].shape[0], byte_index, enable, op, "reads")
    return m.state[key].at[idx].get(mode="fill", fill_value=0)


def write_bytes(ref: TileRef, byte_index, data, op: str, enable=None) -> None:
    """Write ``data`` (uint8) at ``byte_index`` of ``ref``'s tile where ``enable``."""
    m = machine(op)
    key = m.key(ref.tile, op)
    m.writes[key] = ref.tile
    idx = _indices(ref, m.state[key].shape[0], byte_index, enable, op, "writes")
    m.state[key] = m.state[key].at[idx].set(data, mode="drop")


def _span(start, nbytes: int):
    return start + np.arange(nbytes) if not _traced(start) else start + jnp.arange(nbytes, dtype=jnp.int32)


def _start(ref: TileRef, offset, op: str):
    return ref.address() + _offset_bytes(ref, offset, op)


def _block_starts(start, block_stride) -> object:
    """Byte starts of the 8 DataBlocks of a DATA_BLOCK_COPY access, ``block_stride`` blocks apart."""
    stride = 1 if block_stride is None else block_stride
    if _traced(start) or _traced(stride):
        return start + jnp.arange(DATA_BLOCKS, dtype=jnp.int32) * stride * DATA_BLOCK_BYTES
    return start + np.arange(DATA_BLOCKS) * stride * DATA_BLOCK_BYTES


def _blocks_enabled(mask) -> jax.Array:
    """A DataBlock is copied when any of its 32 mask bits is set."""
    return mask.reshape(DATA_BLOCKS, MASK_REGISTER_BITS // DATA_BLOCKS).any(axis=1)


def _block_index(starts):
    if _traced(starts):
        return (starts[:, None] + jnp.arange(DATA_BLOCK_BYTES, dtype=jnp.int32)).reshape(-1)
    return (np.asarray(starts)[:, None] + np.arange(DATA_BLOCK_BYTES)).reshape(-1)


def pack_bits(bits) -> jax.Array:
    """Bits (LSB first) as bytes."""
    weights = jnp.asarray(1 << np.arange(BITS_PER_BYTE), jnp.uint8)
    return (bits.reshape(-1, BITS_PER_BYTE).astype(jnp.uint8) * weights).sum(axis=1, dtype=jnp.uint8)


def unpack_bits(data) -> jax.Array:
    """Bytes as bits, LSB first."""
    shifts = jnp.arange(BITS_PER_BYTE, dtype=jnp.uint8)
    return ((data[:, None] >> shifts) & 1).astype(jnp.bool_).reshape(-1)


# -- the op registry -----------------------------------------------------------------------------------------------
OPS: dict[str, Callable] = {}


def _vf(name: str):
    def register_op(fn):
        fn.__name__ = fn.__qualname__ = name
        OPS[name] = fn
        return fn

    return register_op


def _refusal(name: str, why: str):
    def op(*args, **kwargs):
        raise refused(name, why)

    op.__doc__ = f"``vf.{name}``: refused ({why})."
    return _vf(name)(op)


def _lane_predicate(mask, x, op: str) -> jax.Array:
    return mask_lanes(mask_register(mask, op, "preg"), x.dtype.itemsize)


# -- masks ---------------------------------------------------------------------------------------------------------
def _pattern_lanes(pattern: MaskPattern, n: int) -> np.ndarray:
    i = np.arange(n)
    counts = {"ALL": n, "ALLF": 0, "H": n // 2, "Q": n // 4}
    if pattern.value in counts:
        return i < counts[pattern.value]
    if pattern.value.startswith("VL"):
        return i < int(pattern.value[2:])
    return i % int(pattern.value[1:]) == 0  # M3 / M4: every 3rd / 4th element from lane 0


@_vf("create_mask")
def create_mask(pattern=None, dtype=None):
    """A mask of ``pattern`` (default ALL) at the granularity of ``dtype`` (default fp32)."""
    pattern = MaskPattern.ALL if pattern is None else pattern
    if not isinstance(pattern, MaskPattern):
        raise TypeError(f"vf.create_mask: pattern must be a pl.MaskPattern, got {pattern!r}")
    width = _mask_width(dtype, "create_mask")
    return lanes_to_mask(jnp.asarray(_pattern_lanes(pattern, MASK_REGISTER_BITS // width)), width)


def _mask_width(dtype, op: str) -> int:
    """Bytes per element of a mask's dtype (b8 for every 8-bit and packed 4-bit type)."""
    if dtype is None:
        return np.dtype(np.float32).itemsize
    name = dtype.name if isinstance(dtype, DataType) else dtype if isinstance(dtype, str) else np.dtype(dtype).name
    if name in _PACKED_DTYPES:
        return 1
    return register_dtype(dtype, op).itemsize


@_vf("update_mask")
def update_mask(scalar_value, dtype=None):
    """A tail mask: the first ``min(scalar, lanes)`` elements of ``dtype`` (default fp32). PyPTO-Pro passes the
    scalar by value, so the caller's variable is not decremented."""
    width = _mask_width(dtype, "update_mask")
    n = MASK_REGISTER_BITS // width
    count = jnp.asarray(scalar_value) if _traced(scalar_value) else np.asarray(scalar_value)
    if np.ndim(count) != 0:
        raise TypeError(f"vf.update_mask takes a scalar element count, got {_describe(scalar_value)}")
    return lanes_to_mask(jnp.arange(n) < count, width)


@_vf("mask_gen_with_reg_tensor")
def mask_gen_with_reg_tensor(src, offset=None):
    """A mask from the bits of DataBlock ``offset`` of ``src`` (b16: 16 blocks of 16 B, b32: 32 blocks of 8 B), one
    bit per element, LSB first."""
    src = register(src, "mask_gen_with_reg_tensor")
    _check_dtype("mask_gen_with_reg_tensor", src, ("float16", "bfloat16", "int16", "uint16", "float32", "int32",
                                                   "uint32"))  # fmt: skip
    width = src.dtype.itemsize
    n = MASK_REGISTER_BITS // width  # elements, one bit each
    block_bytes = n // BITS_PER_BYTE
    offset = 0 if offset is None else offset
    blocks = VECTOR_REGISTER_BYTES // block_bytes
    if not _traced(offset) and not 0 <= int(offset) < blocks:
        raise ValueError(f"vf.mask_gen_with_reg_tensor: offset must be in [0, {blocks}) for {src.dtype}, got {offset}")
    data = jax.lax.dynamic_slice(to_bytes(src), (jnp.asarray(offset, jnp.int32) * block_bytes,), (block_bytes,))
    return lanes_to_mask(unpack_bits(data), width)


# -- broadcast, index and move -------------------------------------------------------------------------------------
@_vf("full")
def full(scalar_or_src, mask=None, dtype=None, mode=None, pos=None):
    """Scalar mode: ``scalar`` in every lane of ``dtype`` (default fp32). Tensor mode: the lowest (or highest,
    ``pos``) lane of a register in every lane. Lanes ``mask`` leaves out are 0 (or kept, MERGING)."""
    if isinstance(scalar_or_src, DestinationRead) or _is_register(scalar_or_src):
        src = register(scalar_or_src, "full")
        if mask is None:
            raise TypeError("vf.full: broadcasting a register (tensor mode) takes a mask")
        if dtype is not None and register_dtype(dtype, "full") != src.dtype:
            raise TypeError(f"vf.full: tensor mode keeps the source's {src.dtype}, got dtype={_dtype_label(dtype)}")
        pos = DuplicatePos.LOWEST if pos is None else pos
        value = src[0] if pos is DuplicatePos.LOWEST else src[-1]
        result = jnp.broadcast_to(value, src.shape)
    else:
        if pos is not None:
            raise TypeError("vf.full: pos= selects a source lane in tensor mode; a scalar has none")
        out = register_dtype(DataType("DT_FP32", "float32") if dtype is None else dtype, "full")
        result = jnp.broadcast_to(scalar(scalar_or_src, out), (lanes(out),))
    if mask is None:
        if mode is MergeMode.MERGING:
            raise TypeError("vf.full: MERGING keeps the lanes a mask leaves out; give the mask")
        return result
    return _finish("full", result, _lane_predicate(mask, result, "full"), mode)


@_vf("arange")
def arange(start, dtype=None, index_order=None):
    """``start + i`` (or ``start - i``, DECREASE_ORDER) in lane ``i``; integers wrap."""
    if dtype is None:
        raise TypeError("vf.arange: dtype= is required (a scalar start does not give the register's type)")
    out = register_dtype(dtype, "arange")
    _check_dtype("arange", jnp.zeros((), out), ("int8", "uint8", "int16", "uint16", "int32", "uint32", "float16",
                                                "float32", "int64", "uint64"))  # fmt: skip
    order = IndexOrder.INCREASE_ORDER if index_order is None else index_order
    step = 1 if order is IndexOrder.INCREASE_ORDER else -1
    i = jnp.arange(lanes(out), dtype=jnp.int32) * step
    if jnp.issubdtype(out, jnp.integer):
        return scalar(start, out) + i.astype(out)
    return (scalar(start, jnp.float32) + i.astype(jnp.float32)).astype(out)


@_vf("move")
def move(src, mask=None, mode=None):
    """A copy of ``src``: a register's lanes ``mask`` selects (the rest keep the destination's), or a mask's bits
    ANDed with ``mask``."""
    if mode is MergeMode.ZEROING:
        raise refused("move", "with MergeMode.ZEROING is not supported by the device (MERGING only)")
    if isinstance(src, DestinationRead):
        src = src.standalone("move")
    if _is_mask(src):
        return src if mask is None else src & mask_register(mask, "move")
    src = register(src, "move")
    if mask is None:
        return src
    return _finish("move", src, _lane_predicate(mask, src, "move"), MergeMode.MERGING)


@_vf("bit_cast")
def bit_cast(src, *, dtype):
    """``src``'s bits as lanes of ``dtype`` (same total width; no conversion)."""
    src = register(src, "bit_cast")
    out = register_dtype(dtype, "bit_cast")
    if out.itemsize != src.dtype.itemsize:
        raise TypeError(f"vf.bit_cast: {src.dtype} and {out} lanes differ in width; use vf.astype to convert")
    return _from_bits(_bits(src), out)


@_vf("create_addr_reg")
def create_addr_reg(index0, stride0, index1=None, stride1=None, index2=None, stride2=None, index3=None, stride3=None,
                    dtype=None):  # fmt: skip
    """An AddrReg of ``sum(index_k * stride_k)`` elements of ``dtype`` (default fp32)."""
    width = register_dtype(DataType("DT_FP32", "float32") if dtype is None else dtype, "create_addr_reg").itemsize
    pairs = [(index0, stride0), (index1, stride1), (index2, stride2), (index3, stride3)]
    total = 0
    for k, (index, stride) in enumerate(pairs):
        if (index is None) != (stride is None):
            raise TypeError(f"vf.create_addr_reg: index{k} and stride{k} go together")
        if index is not None:
            total = total + index * stride
    return AddrReg(total * width)


# -- arithmetic ----------------------------------------------------------------------------------------------------
def _fused(a, b, c) -> jax.Array:
    """``a * b + c`` with one rounding (ints wrap): 16-bit floats through an exact f32 product, f32 with a
    compensated (Dekker) product. The barriers keep each rounded product as it is: an XLA that contracts
    ``x * y - z`` into one FMA (a GPU's does) would otherwise change the error terms."""
    if not _is_float(a.dtype):
        return a * b + c
    if a.dtype != jnp.float32:
        wide = jnp.float32
        return (a.astype(wide) * b.astype(wide) + c.astype(wide)).astype(a.dtype)
    keep = jax.lax.optimization_barrier
    split = jnp.float32((1 << 12) + 1)  # Veltkamp split of a 24-bit significand

    def halves(x):
        t = keep(split * x)
        hi = t - (t - x)
        return hi, x - hi

    p = keep(a * b)
    ah, al = halves(a)
    bh, bl = halves(b)
    hh, hl, lh, ll = keep((ah * bh, ah * bl, al * bh, al * bl))
    e = ((hh - p) + hl + lh) + ll
    s = p + c
    z = s - p
    t = (p - (s - z)) + (c - z)
    return jnp.where(jnp.isfinite(p) & jnp.isfinite(s), s + (t + e), p + c)


def _float_key(x) -> jax.Array:
    """Int32 keys ordering float lanes by value (-0 just below +0); integers as themselves."""
    return order_key(x.astype(jnp.float32)) if _is_float(x.dtype) else x


def _maximum(a, b, take_max: bool) -> jax.Array:
    """Elementwise max / min; max(-0, +0) = +0 and min(-0, +0) = -0; NaN propagates."""
    if not _is_float(a.dtype):
        return jnp.maximum(a, b) if take_max else jnp.minimum(a, b)
    ka, kb = _float_key(a), _float_key(b)
    pick = jnp.where(ka >= kb, a, b) if take_max else jnp.where(ka <= kb, a, b)
    nan = jnp.isnan(a) | jnp.isnan(b)
    return jnp.where(nan, jnp.asarray(jnp.nan, a.dtype), pick)


def _divide(a, b) -> jax.Array:
    return a / b if _is_float(a.dtype) else jax.lax.div(a, jnp.where(b == 0, jnp.ones((), b.dtype), b))


_BINARY = {
    "add": (_ARITH, jnp.add),
    "sub": (_ARITH, jnp.subtract),
    "mul": (_MUL, jnp.multiply),
    "div": (_DIV, _divide),
    "max": (_ARITH, lambda a, b: _maximum(a, b, True)),
    "min": (_ARITH, lambda a, b: _maximum(a, b, False)),
    "abs_sub": (_FLOAT, lambda a, b: jnp.abs(a - b)),
    "prelu": (_FLOAT, lambda a, s: jnp.where(a >= 0, a, a * s)),
}


def _binary(name: str, allowed: tuple, fn):
    def op(src0, src1, mask, mode=None):
        a, b = register(src0, name, "src0"), register(src1, name, "src1")
        _same_dtype(name, a, b)
        _check_dtype(name, a, allowed)
        return _finish(name, fn(a, b), _lane_predicate(mask, a, name), mode)

    op.__doc__ = f"``vf.{name}(src0, src1, preg, mode=)``: lane-wise on the lanes ``preg`` selects."
    return _vf(name)(op)


for _name, (_allowed, _fn) in _BINARY.items():
    _binary(_name, _allowed, _fn)


_SCALAR = {
    "adds": (_ARITH, jnp.add),
    "subs": (_ARITH, jnp.subtract),
    "muls": (_MULS, jnp.multiply),
    "maxs": (_ARITH, lambda a, s: _maximum(a, jnp.broadcast_to(s, a.shape), True)),
    "mins": (_ARITH, lambda a, s: _maximum(a, jnp.broadcast_to(s, a.shape), False)),
    "leaky_relu": (_FLOAT, lambda a, s: jnp.where(a >= 0, a, a * s)),
}


def _scalar_op(name: str, allowed: tuple, fn):
    def op(src, scalar_value, mask, mode=None):
        a = register(src, name)
        _check_dtype(name, a, allowed)
        return _finish(name, fn(a, scalar(scalar_value, a.dtype)), _lane_predicate(mask, a, name), mode)

    op.__doc__ = f"``vf.{name}(src, scalar, preg, mode=)``: lane-wise with a scalar (in the register's type)."
    return _vf(name)(op)


for _name, (_allowed, _fn) in _SCALAR.items():
    _scalar_op(_name, _allowed, _fn)


def _log_base(base: float):
    def log(x):
        return jnp.log(x) * jnp.asarray(1.0 / math.log(base), x.dtype)  # synthesized as ln(x) * (1 / ln(base))

    return log


_UNARY = {
    "abs": (_SIGNED, jnp.abs),
    "neg": (_SIGNED, jnp.negative),
    "relu": (("float16", "int32", "float32"), lambda x: _maximum(x, jnp.zeros_like(x), True)),
    "exp": (_FLOAT, jnp.exp),
    "ln": (_FLOAT, jnp.log),
    "log": (_FLOAT, jnp.log),
    "log2": (_FLOAT, _log_base(2.0)),
    "log10": (_FLOAT, _log_base(10.0)),
    "sqrt": (_FLOAT, jnp.sqrt),
    "truncate": (("float16", "bfloat16", "float32"), jnp.trunc),
    "not_": (_INTS + _FLOAT, lambda x: _from_bits(~_bits(x), x.dtype)),
}


def _unary(name: str, allowed: tuple, fn):
    def op(src, mask, mode=None, **options):
        if isinstance(src, DestinationRead):
            src = src.standalone(name)
        if name == "not_" and _is_mask(src):
            return ~src & mask_register(mask, name)
        extra = set(options) - {"precision"}
        if extra:
            raise TypeError(f"vf.{name} got unexpected keyword arguments {sorted(extra)}")
        a = register(src, name)
        _check_dtype(name, a, allowed)
        return _finish(name, fn(a), _lane_predicate(mask, a, name), mode)

    op.__doc__ = f"``vf.{name}(src, preg, mode=)``: lane-wise on the lanes ``preg`` selects."
    return _vf(name)(op)


for _name, (_allowed, _fn) in _UNARY.items():
    _unary(_name, _allowed, _fn)


def _bitwise(name: str, fn):
    def op(src0, src1, mask, mode=None, dtype=None):
        if isinstance(src0, DestinationRead):
            src0 = src0.standalone(name)
        if isinstance(src1, DestinationRead):
            src1 = src1.standalone(name)
        if _is_mask(src0) or _is_mask(src1):
            return fn(mask_register(src0, name, "src0"), mask_register(src1, name, "src1")) & mask_register(mask, name)
        a, b = register(src0, name, "src0"), register(src1, name, "src1")
        if dtype is not None:
            a, b = bit_cast(a, dtype=dtype), bit_cast(b, dtype=dtype)
        _same_dtype(name, a, b)
        _check_dtype(name, a, _BITWISE)
        result = _from_bits(fn(_bits(a), _bits(b)), a.dtype)
        return _finish(name, result, _lane_predicate(mask, a, name), mode)

    op.__doc__ = (
        f"``vf.{name}(src0, src1, preg)``: bitwise, on registers (lane-wise) or masks (bit-wise, ANDed with preg)."
    )
    return _vf(name)(op)


_bitwise("and_", jnp.bitwise_and)
_bitwise("or_", jnp.bitwise_or)
_bitwise("xor", jnp.bitwise_xor)


def _shift(name: str, left: bool):
    def op(src, shift, mask, mode=None, dtype=None):
        a = register(src, name)
        if dtype is not None:
            a = bit_cast(a, dtype=dtype)
        _check_dtype(name, a, _INTS)
        if isinstance(shift, DestinationRead) or _is_register(shift):
            amount = register(shift, name, "shift")
            if amount.shape != a.shape:
                raise TypeError(f"vf.{name}: the shift register has {amount.shape[0]} lanes, src {a.shape[0]}")
            amount = _from_bits(_bits(amount), a.dtype) if amount.dtype != a.dtype else amount
        else:
            amount = jnp.broadcast_to(scalar(shift, a.dtype), a.shape)
        if left:
            result = jax.lax.shift_left(a, amount)
        elif jnp.issubdtype(a.dtype, jnp.signedinteger):
            result = jax.lax.shift_right_arithmetic(a, amount)
        else:
            result = jax.lax.shift_right_logical(a, amount)
        return _finish(name, result, _lane_predicate(mask, a, name), mode)

    op.__doc__ = (
        f"``vf.{name}(src, shift, preg)``: by a scalar or per lane; logical for unsigned, arithmetic for signed."
    )
    return _vf(name)(op)


_shift("shift_left", True)
_shift("shift_right", False)


def _reads_destination(name: str, allowed: tuple, compute):
    """An op ``dst = f(dst, ...)``: the result needs the assigned name's previous value."""

    def op(*args, mode=None):
        *operands, mask = args
        regs = [register(x, name, f"src{i}") if not _is_scalar_arg(name, i) else x for i, x in enumerate(operands)]
        first = regs[0]
        _check_dtype(name, first, allowed)
        _same_dtype(name, *[r for r in regs if _is_register(r)])
        active = _lane_predicate(mask, first, name)
        if mode not in (None, MergeMode.ZEROING, MergeMode.MERGING):
            raise TypeError(f"vf.{name}: mode must be a pl.MergeMode, got {mode!r}")

        def combine(old, target):
            dst = _old_register(name, old, target, first)
            result = compute(dst, *regs)
            return jnp.where(active, result, dst if mode is MergeMode.MERGING else jnp.zeros((), dst.dtype))

        return DestinationRead(name, combine)

    return op


def _is_scalar_arg(name: str, index: int) -> bool:
    return name == "axpy" and index == 1


@_vf("mul_add_dst")
def mul_add_dst(src0, src1, mask, mode=None):
    """``dst = src0 * src1 + dst`` (fused; reads the destination it is assigned to)."""
    return _reads_destination("mul_add_dst", _MUL, lambda d, a, b: _fused(a, b, d))(src0, src1, mask, mode=mode)


@_vf("mul_dst_add")
def mul_dst_add(src0, src1, mask, mode=None):
    """``dst = dst * src0 + src1`` (fused; reads the destination it is assigned to)."""
    return _reads_destination("mul_dst_add", ("float16", "bfloat16", "float32"),
                              lambda d, a, b: _fused(d, a, b))(src0, src1, mask, mode=mode)  # fmt: skip


@_vf("axpy")
def axpy(src, scalar_value, mask, mode=None):
    """``dst = scalar * src + dst`` (fused; reads the destination it is assigned to)."""

    def compute(d, a, s):
        return _fused(jnp.broadcast_to(scalar(s, a.dtype), a.shape), a, d)

    return _reads_destination("axpy", _FLOAT, compute)(src, scalar_value, mask, mode=mode)


@_vf("exp_sub")
def exp_sub(src0, src1, mask, layout=None, dtype=None):
    """``exp(src0 - src1)``: f32 lane-wise; f16 sources of the even (ZERO) or odd (ONE) lanes, widened to f32 before
    the subtraction, give an f32 register."""
    a, b = register(src0, "exp_sub", "src0"), register(src1, "exp_sub", "src1")
    _same_dtype("exp_sub", a, b)
    _check_dtype("exp_sub", a, _FLOAT)
    mask = mask_register(mask, "exp_sub", "preg")
    if a.dtype == jnp.float32:
        if dtype is not None and register_dtype(dtype, "exp_sub") != jnp.float32:
            raise TypeError("vf.exp_sub: f32 sources give an f32 result")
        return _finish("exp_sub", jnp.exp(a - b), mask_lanes(mask, a.dtype.itemsize), None)
    if dtype is not None and register_dtype(dtype, "exp_sub") != jnp.float32:
        raise TypeError("vf.exp_sub: f16 sources give an f32 result (dtype=pl.DT_FP32)")
    part = _layout_part("exp_sub", layout, 2)
    wide_a, active = _widened(a, jnp.float32, part, mask)
    wide_b, _ = _widened(b, jnp.float32, part, mask)
    result = jnp.exp(wide_a.astype(jnp.float32) - wide_b.astype(jnp.float32))
    return jnp.where(active, result, jnp.float32(0))


@_vf("muls_cast")
def muls_cast(src, scalar_value, mask, dtype=None, layout=None):
    """``cast_f16(src * scalar)`` (CAST_ROUND) into the even (ZERO) or odd (ONE) f16 lanes; the others are 0."""
    a = register(src, "muls_cast")
    _check_dtype("muls_cast", a, ("float32",))
    out = register_dtype(DataType("DT_FP16", "float16") if dtype is None else dtype, "muls_cast")
    if out != jnp.float16:
        raise TypeError(f"vf.muls_cast converts f32 to f16, got dtype={_dtype_label(dtype)}")
    product = a * scalar(scalar_value, jnp.float32)
    part = _layout_part("muls_cast", layout, 2)
    active = mask_lanes(mask_register(mask, "muls_cast", "preg"), a.dtype.itemsize)
    return _narrowed(round_cast(product, out, RoundMode.CAST_ROUND), active, part)


# -- comparisons and selection -------------------------------------------------------------------------------------
_COMPARE = {
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
    "lt": lambda a, b: a < b,
    "gt": lambda a, b: a > b,
    "le": lambda a, b: a <= b,
    "ge": lambda a, b: a >= b,
}


def _compare_values(name: str, a, b) -> jax.Array:
    """``a <op> b`` with IEEE semantics (NaN unordered, -0 == +0), exact for f32 subnormals."""
    fn = _COMPARE[name]
    if not _is_float(a.dtype):
        return fn(a, b)
    wide_a, wide_b = a.astype(jnp.float32), b.astype(jnp.float32)
    zero = jnp.int32(0)

    def key(x):
        magnitude = jax.lax.bitcast_convert_type(x, jnp.int32) & jnp.int32(0x7FFFFFFF)
        return jnp.where(magnitude == 0, zero, order_key(x))

    nan = jnp.isnan(wide_a) | jnp.isnan(wide_b)
    return jnp.where(nan, name == "ne", fn(key(wide_a), key(wide_b)))


def _compare(name: str):
    def op(a, b, mask, cmp_dtype=None):
        x = register(a, name, "a")
        if cmp_dtype is not None:
            x = bit_cast(x, dtype=cmp_dtype) if register_dtype(cmp_dtype, name).itemsize == x.dtype.itemsize else \
                _from_bits_wide(x, register_dtype(cmp_dtype, name))  # fmt: skip
        _check_dtype(name, x, _ARITH)
        if isinstance(b, DestinationRead) or _is_register(b):
            y = register(b, name, "b")
            if y.dtype != x.dtype:
                y = _from_bits_wide(y, x.dtype)
        else:
            y = jnp.broadcast_to(scalar(b, x.dtype), x.shape)
        width = x.dtype.itemsize
        active = mask_lanes(mask_register(mask, name, "preg"), width)
        return lanes_to_mask(_compare_values(name, x, y) & active, width)

    op.__doc__ = f"``vf.{name}(a, b, preg, cmp_dtype=)``: a mask of the lanes where it holds (b: register or scalar)."
    return _vf(name)(op)


def _from_bits_wide(x, dtype) -> jax.Array:
    """A register's 256 bytes reinterpreted as lanes of ``dtype`` (any width)."""
    return from_bytes(to_bytes(x), dtype)


for _name in _COMPARE:
    _compare(_name)


@_vf("select")
def select(src_true, src_false, mask, mode=None):
    """``mask ? src_true : src_false`` per lane (registers) or per bit (masks)."""
    if isinstance(src_true, DestinationRead):
        src_true = src_true.standalone("select")
    if isinstance(src_false, DestinationRead):
        src_false = src_false.standalone("select")
    mask = mask_register(mask, "select")
    if _is_mask(src_true) or _is_mask(src_false):
        return jnp.where(mask, mask_register(src_true, "select", "src0"), mask_register(src_false, "select", "src1"))
    a, b = register(src_true, "select", "src0"), register(src_false, "select", "src1")
    _same_dtype("select", a, b)
    return jnp.where(mask_lanes(mask, a.dtype.itemsize), a, b)


@_vf("squeeze")
def squeeze(src, mask, gather_mode=None, dtype=None):
    """The lanes ``mask`` selects, packed from lane 0 up, the rest 0; STORE_REG also writes their byte count to
    the AR register (which an unaligned store then uses)."""
    x = register(src, "squeeze")
    if dtype is not None:
        x = bit_cast(x, dtype=dtype)
    _check_dtype("squeeze", x, ("int8", "uint8", "int16", "uint16", "float16", "int32", "uint32", "float32"))
    active = _lane_predicate(mask, x, "squeeze")
    position = jnp.where(active, jnp.cumsum(active) - 1, x.shape[0])
    packed = jnp.zeros_like(x).at[position].set(x, mode="drop")
    mode = SqueezeMode.NO_STORE_REG if gather_mode is None else gather_mode
    if mode is SqueezeMode.STORE_REG:
        machine("squeeze").state[_AR] = (active.sum(dtype=jnp.int32) * x.dtype.itemsize).astype(jnp.int32)
    return packed


@_vf("clear_spr")
def clear_spr():
    """Reset the AR special register (the byte count of ``squeeze(..., STORE_REG)``)."""
    machine("clear_spr").state[_AR] = jnp.int32(0)


def get_spr():
    """``pl.get_spr()``: the AR special register (bytes of the last ``squeeze(..., STORE_REG)``), inside a VF."""
    return machine("get_spr").state[_AR]


# -- reductions ----------------------------------------------------------------------------------------------------
def _tree_sum(x, axis_size: int) -> jax.Array:
    """Sums of the rows of ``x`` (``[..., axis_size]``) by adding adjacent pairs level by level."""
    while axis_size > 1:
        x = x[..., 0::2] + x[..., 1::2]
        axis_size //= 2
    return x[..., 0]


def _segments(x, datablock: bool, width: int):
    """``x`` (one value per ``width``-byte lane) as rows: one per DataBlock, or one row of all lanes."""
    n = x.shape[0]
    per = DATA_BLOCK_BYTES // width if datablock else n
    return x.reshape(n // per, per), per


def _place(values, x, datablock: bool, count: int) -> jax.Array:
    """Reduction results in lane 0 (or the first lane of each DataBlock), the rest 0."""
    out = jnp.zeros_like(x)
    if datablock:
        per = DATA_BLOCK_BYTES // x.dtype.itemsize
        return out.at[jnp.arange(count) * per].set(values)
    return out.at[0].set(values[0])


def _check_merge(op: str, merge_mode) -> None:
    if merge_mode not in (None, MergeMode.ZEROING):
        raise refused(op, "with MergeMode.MERGING is not supported by the device (ZEROING only)")


@_vf("reduce_sum")
def reduce_sum(src, mask, datablock=False, merge_mode=None):
    """The sum of the selected lanes in lane 0 (per DataBlock with ``datablock``), the rest 0; a binary tree of
    adjacent pairs, f16 accumulated in f32; integers wrap."""
    _check_merge("reduce_sum", merge_mode)
    x = register(src, "reduce_sum")
    _check_dtype("reduce_sum", x, _REDUCE)
    active = _lane_predicate(mask, x, "reduce_sum")
    acc = jnp.float32 if x.dtype == jnp.float16 else x.dtype
    values = jnp.where(active, x, jnp.zeros((), x.dtype)).astype(acc)
    rows, per = _segments(values, datablock, x.dtype.itemsize)
    sums = _tree_sum(rows, per).astype(x.dtype)
    return _place(sums, x, datablock, rows.shape[0])


def _reduce_extreme(op: str, take_max: bool):
    def reduce(src, mask, datablock=False, merge_mode=None):
        _check_merge(op, merge_mode)
        x = register(src, op)
        _check_dtype(op, x, _REDUCE)
        active = _lane_predicate(mask, x, op)
        key = _float_key(x)
        info = np.iinfo(key.dtype)
        worst = info.min if take_max else info.max
        width = x.dtype.itemsize
        keys, per = _segments(jnp.where(active, key, worst), datablock, width)
        vals, _ = _segments(x, datablock, width)
        nan, _ = _segments(active & jnp.isnan(x) if _is_float(x.dtype) else jnp.zeros_like(active), datablock, width)
        best = jnp.argmax(keys, axis=1) if take_max else jnp.argmin(keys, axis=1)
        best = jnp.where(nan.any(axis=1), jnp.argmax(nan, axis=1), best)
        value = jnp.take_along_axis(vals, best[:, None], axis=1)[:, 0]
        empty = ~_segments(active, datablock, width)[0].any(axis=1)
        if _is_float(x.dtype):
            none = jnp.asarray(-jnp.inf if take_max else jnp.inf, x.dtype)
        else:
            limits = np.iinfo(x.dtype)
            none = jnp.asarray(limits.min if take_max else limits.max, x.dtype)
        value = jnp.where(empty, none, value)
        out = _place(value, x, datablock, keys.shape[0])
        if datablock:
            return out
        index = _from_bits(jnp.where(empty[0], 0, best[0]).astype(_unsigned(x.dtype.itemsize)), x.dtype)
        return out.at[1].set(index)

    reduce.__doc__ = (
        f"The {'largest' if take_max else 'smallest'} selected lane in lane 0 and the index of its first occurrence "
        f"(as bits of the lane type) in lane 1, the rest 0; NaN wins; no lane selected gives "
        f"{'-inf / the minimum' if take_max else '+inf / the maximum'}. With ``datablock`` one result per DataBlock, "
        "in its first lane."
    )
    return _vf(op)(reduce)


_reduce_extreme("reduce_max", True)
_reduce_extreme("reduce_min", False)


@_vf("pair_reduce_sum")
def pair_reduce_sum(src, mask, mode=None):
    """``dst[i] = src[2i] + src[2i+1]`` in the low half (unselected source lanes count 0), the high half 0."""
    x = register(src, "pair_reduce_sum")
    _check_dtype("pair_reduce_sum", x, _FLOAT)
    _check_merge("pair_reduce_sum", mode)
    values = jnp.where(_lane_predicate(mask, x, "pair_reduce_sum"), x, jnp.zeros((), x.dtype))
    pairs = values[0::2] + values[1::2]
    return jnp.zeros_like(x).at[: pairs.shape[0]].set(pairs)


# -- conversion ----------------------------------------------------------------------------------------------------
#: vf.astype's documented conversions [type_conversion/astype.md, table 1]
CONVERSIONS = {
    "int8": ("int16", "float16", "int32"),
    "uint8": ("uint16", "float16", "uint32"),
    "float8_e8m0fnu": ("bfloat16",),
    "float8_e5m2": ("float32",),
    "float8_e4m3fn": ("float32",),
    "int16": ("uint8", "float16", "int32", "uint32", "float32"),
    "uint16": ("uint8", "uint32"),
    "float16": ("int8", "uint8", "int16", "bfloat16", "int32", "float32"),
    "bfloat16": ("float16", "int32", "float32"),
    "int32": ("uint8", "int16", "uint16", "float32", "int64"),
    "uint32": ("uint8", "int16", "uint16"),
    "float32": ("float8_e5m2", "float8_e4m3fn", "int16", "float16", "bfloat16", "int32", "int64"),
    "int64": ("int32", "float32"),
}
_ROUNDING = {
    VFRoundMode.CAST_RINT: RoundMode.CAST_RINT,
    VFRoundMode.CAST_ROUND: RoundMode.CAST_ROUND,
    VFRoundMode.CAST_FLOOR: RoundMode.CAST_FLOOR,
    VFRoundMode.CAST_CEIL: RoundMode.CAST_CEIL,
    VFRoundMode.CAST_TRUNC: RoundMode.CAST_TRUNC,
    VFRoundMode.CAST_ODD: RoundMode.CAST_ODD,
}
_TWO_TO_16 = 65536.0


def _layout_part(op: str, layout, factor: int) -> int:
    part = CastLayout.ZERO if layout is None else layout
    if not isinstance(part, CastLayout):
        raise TypeError(f"vf.{op}: layout must be a pl.CastLayout, got {layout!r}")
    if part.value >= factor:
        raise ValueError(f"vf.{op}: a {factor}x width change takes layout ZERO..{CastLayout(factor - 1).name}, "
                         f"got {part.name}")  # fmt: skip
    return part.value


def _widened(x, out, part: int, mask):
    """The narrow lanes ``factor * i + part`` of ``x`` (one per lane of the wider ``out``) and their predicate."""
    factor = jnp.dtype(out).itemsize // x.dtype.itemsize
    picked = x[part::factor]
    active = mask[part * x.dtype.itemsize :: jnp.dtype(out).itemsize]
    return picked, active


def _narrowed(values, active, part: int) -> jax.Array:
    """Narrow results of the wide lanes placed at lanes ``factor * i + part``; the other lanes 0."""
    n_out = VECTOR_REGISTER_BYTES // values.dtype.itemsize
    factor = n_out // values.shape[0]
    out = jnp.zeros((n_out,), values.dtype)
    return out.at[part::factor].set(jnp.where(active, values, jnp.zeros((), values.dtype)))


def _float_to_int(x, out, mode: RoundMode, saturate: bool) -> jax.Array:
    """Round to an integer, then clamp (saturate) or wrap to ``out``'s width; +/-inf give the limits, NaN 0."""
    f = x.astype(jnp.float32)
    rounded = {
        RoundMode.CAST_RINT: jnp.round,
        RoundMode.CAST_ROUND: lambda v: (
            jnp.sign(v) * (jnp.floor(jnp.abs(v)) + (jnp.abs(v) - jnp.floor(jnp.abs(v)) >= 0.5))
        ),
        RoundMode.CAST_FLOOR: jnp.floor,
        RoundMode.CAST_CEIL: jnp.ceil,
        RoundMode.CAST_TRUNC: jnp.trunc,
    }.get(mode)
    if rounded is None:
        raise refused("astype", f"from a float to an integer with {mode.name} is not a documented rounding")
    info = np.iinfo(out)
    r = jnp.where(jnp.isnan(f), 0.0, rounded(f))
    high, low = r >= float(info.max), r <= float(info.min)
    limits = jnp.where(r > 0, np.asarray(info.max, out), np.asarray(info.min, out))
    if saturate:
        return jnp.where(high | low, limits, _wrap_to(jnp.where(high | low, 0.0, r), out))
    finite = jnp.where(jnp.isinf(r), 0.0, r)
    return jnp.where(jnp.isinf(r), limits, _wrap_to(finite, out))


def _wrap_to(r, out) -> jax.Array:
    """Integral f32 values modulo 2^bits of ``out`` (the low bits kept, as the unsaturated conversion does)."""
    lo16 = jnp.fmod(r, _TWO_TO_16)  # exact: r mod 2^32 from two exact 16-bit pieces
    hi16 = jnp.fmod((r - lo16) / _TWO_TO_16, _TWO_TO_16)
    wrapped = jax.lax.shift_left(hi16.astype(jnp.int32), jnp.int32(16)) + lo16.astype(jnp.int32)
    return wrapped.astype(out) if out.itemsize < wrapped.dtype.itemsize else _from_bits(_bits(wrapped), out)


def _int_bits_of_float(y) -> jax.Array:
    """An integral f32 (|y| <= 2^32) as int32 bits modulo 2^32."""
    step = jnp.float32(1 << BITS_PER_BYTE)
    hi = jnp.floor(y / step)
    lo = y - hi * step
    return hi.astype(jnp.int32) * jnp.int32(1 << BITS_PER_BYTE) + lo.astype(jnp.int32)


def _int32_to_f32(x, mode: RoundMode) -> jax.Array:
    """A 32-bit integer to f32 with ``mode`` (XLA's conversion rounds to nearest even)."""
    nearest = x.astype(jnp.float32)
    if mode is RoundMode.CAST_RINT:
        return nearest
    xb = _from_bits(_bits(x), jnp.int32)
    gap = _int_bits_of_float(nearest) - xb  # nearest - x: small, exact in wrapping int32 arithmetic
    down = jnp.where(gap > 0, jnp.nextafter(nearest, jnp.float32(-jnp.inf)), nearest)
    up = jnp.where(gap < 0, jnp.nextafter(nearest, jnp.float32(jnp.inf)), nearest)
    below, above = xb - _int_bits_of_float(down), _int_bits_of_float(up) - xb
    positive = (x >= 0) if jnp.issubdtype(x.dtype, jnp.signedinteger) else jnp.ones(x.shape, bool)
    if mode is RoundMode.CAST_FLOOR:
        return down
    if mode is RoundMode.CAST_CEIL:
        return up
    if mode is RoundMode.CAST_TRUNC:
        return jnp.where(positive, down, up)
    if mode is RoundMode.CAST_ROUND:
        return jnp.where(below < above, down, jnp.where(above < below, up, jnp.where(positive, up, down)))
    odd_down = (_bits(down) & 1) == 1
    return jnp.where(gap == 0, nearest, jnp.where(odd_down, down, up))


def _int_to_int(x, out, saturate: bool) -> jax.Array:
    src, dst = np.iinfo(x.dtype), np.iinfo(out)
    widening = out.itemsize > x.dtype.itemsize
    if saturate or (widening and dst.min == 0 and src.min < 0):  # a signed -> wider unsigned conversion saturates
        lo, hi = max(src.min, dst.min), min(src.max, dst.max)
        x = jnp.clip(x, np.asarray(lo, x.dtype), np.asarray(hi, x.dtype))
    return x.astype(out)


def _saturated_float(x, out) -> jax.Array:
    """``x`` (f32) clamped to ``out``'s finite range, NaN -> 0 (SaturateMode.ON)."""
    big = float(ml_dtypes.finfo(out).max)
    return jnp.where(jnp.isnan(x), 0.0, jnp.clip(x, -big, big))


def convert(x, out, round_mode=None, saturate=None, op: str = "astype") -> jax.Array:
    """Lane values of ``x`` as ``out`` [astype.md tables 2-6]."""
    src_name, out_name = x.dtype.name, jnp.dtype(out).name
    if out_name not in CONVERSIONS.get(src_name, ()):
        raise refused(op, f"from {src_name} to {out_name} is not a conversion of the vector unit (documented: "
                      f"{src_name} -> {', '.join(CONVERSIONS.get(src_name, ())) or 'none'})")  # fmt: skip
    if round_mode is VFRoundMode.CAST_HYBRID:
        raise refused(op, "with CAST_HYBRID rounding (hifloat8 only) is not modelled")
    mode = _ROUNDING[VFRoundMode.CAST_RINT if round_mode is None else round_mode]
    sat = saturate is SaturateMode.ON
    if saturate not in (None, SaturateMode.ON, SaturateMode.OFF):
        raise TypeError(f"vf.{op}: saturate must be a pl.SaturateMode, got {saturate!r}")
    out = jnp.dtype(out)
    if _is_float(x.dtype) and _is_float(out):
        if out.itemsize > x.dtype.itemsize or (x.dtype == jnp.float16 and out == jnp.float32):
            return x.astype(jnp.float32).astype(out)  # widening: exact
        wide = x.astype(jnp.float32)
        if out_name.startswith("float8"):
            if mode is not RoundMode.CAST_RINT:
                raise refused(op, f"to {out_name} rounds to nearest even only (CAST_RINT), got {round_mode.name}")
            return float_formats.cast(wide, out_name, saturate=sat)
        if sat:
            wide = _saturated_float(wide, out)
        return round_cast(wide, out, mode)
    if _is_float(x.dtype):
        return _float_to_int(x, out, mode, sat)
    if _is_float(out):
        if x.dtype.itemsize == 4:
            return _int32_to_f32(x, mode).astype(out)
        return round_cast(x.astype(jnp.float32), out, mode)  # 8/16-bit integers are exact in f32
    return _int_to_int(x, out, sat)


@_vf("astype")
def astype(src, mask, dtype=None, layout=None, round_mode=None, saturate=None, mode=None):
    """Convert lanes to ``dtype``. Between widths the wider type sets the lane count and ``layout`` picks the part
    of each wide lane the narrow elements occupy; the mask selects source elements; other lanes are 0."""
    if mode not in (None, MergeMode.ZEROING):
        raise refused("astype", "with MergeMode.MERGING is not supported by the device (ZEROING only)")
    if dtype is None:
        raise TypeError("vf.astype: dtype= (the destination type) is required")
    x = register(src, "astype")
    out = register_dtype(dtype, "astype")
    mask = mask_register(mask, "astype", "preg")
    sw, dw = x.dtype.itemsize, out.itemsize
    if sw == dw:
        return _finish("astype", convert(x, out, round_mode, saturate), mask_lanes(mask, sw), None)
    if sw < dw:
        part = _layout_part("astype", layout, dw // sw)
        picked, active = _widened(x, out, part, mask)
        result = convert(picked, out, round_mode, saturate)
        return jnp.where(active, result, jnp.zeros((), out))
    part = _layout_part("astype", layout, sw // dw)
    return _narrowed(convert(x, out, round_mode, saturate), mask_lanes(mask, sw), part)


@_vf("pack")
def pack(src, dtype=None, part=None):
    """Registers: the low half of each lane's bits into the lower (or upper) half of a narrower register.
    Masks: the even bits into the lower (or upper) half."""
    part = PackPart.LOWER if part is None else part
    if isinstance(src, DestinationRead):
        src = src.standalone("pack")
    half = MASK_REGISTER_BITS // 2
    if _is_mask(src):
        bits = src[0::2]
        return jnp.zeros_like(src).at[part.value * half : part.value * half + half].set(bits)
    x = register(src, "pack")
    _check_dtype("pack", x, ("int16", "uint16", "int32", "uint32", "int64", "uint64"))
    if dtype is None:
        raise TypeError("vf.pack: dtype= (the narrow type) is required for a register")
    out = register_dtype(dtype, "pack")
    if out.itemsize * 2 != x.dtype.itemsize or not jnp.issubdtype(out, jnp.unsignedinteger):
        raise TypeError(f"vf.pack narrows {x.dtype} to the unsigned type of half its width, got {out}")
    low = _bits(x).astype(out)
    n = x.shape[0]
    return jnp.zeros((2 * n,), out).at[part.value * n : part.value * n + n].set(low)


@_vf("unpack")
def unpack(src, dtype=None, part=None):
    """Registers: the lower (or upper) half of the lanes widened (sign- or zero-extended). Masks: the lower (or upper)
    128 bits, each doubled."""
    part = PackPart.LOWER if part is None else part
    if isinstance(src, DestinationRead):
        src = src.standalone("unpack")
    half = MASK_REGISTER_BITS // 2
    if _is_mask(src):
        return jnp.repeat(src[part.value * half : part.value * half + half], 2)
    x = register(src, "unpack")
    _check_dtype("unpack", x, ("int8", "uint8", "int16", "uint16", "int32", "uint32"))
    if dtype is None:
        raise TypeError("vf.unpack: dtype= (the wide type) is required for a register")
    out = register_dtype(dtype, "unpack")
    if out.itemsize != 2 * x.dtype.itemsize:
        raise TypeError(f"vf.unpack widens {x.dtype} to a type of twice its width, got {out}")
    n = x.shape[0] // 2
    return x[part.value * n : part.value * n + n].astype(out)


@_vf("interleave")
def interleave(src0, src1, dtype=None):
    """``(dst0, dst1)``: ``src0`` and ``src1`` lanes alternating (dst0 from their low halves, dst1 from the high)."""
    a, b, width, wrap = _pairwise("interleave", src0, src1, dtype)
    n = a.shape[0]
    mixed = jnp.stack([a, b], axis=1).reshape(-1)
    return wrap(mixed[:n]), wrap(mixed[n:])


@_vf("de_interleave")
def de_interleave(src0, src1, dtype=None):
    """``(dst0, dst1)``: the even and the odd lanes of ``src0`` followed by ``src1``."""
    a, b, width, wrap = _pairwise("de_interleave", src0, src1, dtype)
    joined = jnp.concatenate([a, b])
    return wrap(joined[0::2]), wrap(joined[1::2])


def _pairwise(op: str, src0, src1, dtype):
    """Two registers (or two masks, as lanes of ``dtype``), and a function taking lanes back to that kind."""
    if isinstance(src0, DestinationRead):
        src0 = src0.standalone(op)
    if isinstance(src1, DestinationRead):
        src1 = src1.standalone(op)
    if _is_mask(src0) or _is_mask(src1):
        width = _mask_width(dtype, op)
        a = mask_lanes(mask_register(src0, op, "src0"), width)
        b = mask_lanes(mask_register(src1, op, "src1"), width)
        return a, b, width, lambda v: lanes_to_mask(v, width)
    a, b = register(src0, op, "src0"), register(src1, op, "src1")
    _same_dtype(op, a, b)
    return a, b, a.dtype.itemsize, lambda v: v


@_vf("histograms")
def histograms(src, mask, bin_type=None, hist_type=None):
    """Adds the histogram of the selected byte lanes of ``src`` to the destination (128 uint16 bins: values 0..127 with
    BIN0, 128..255 with BIN1): FREQUENCY counts each value, ACCUMULATE counts every value up to the bin's (from 0, in
    both halves: the cumulative distribution the top-k search walks)."""
    x = register(src, "histograms")
    values = _from_bits_wide(x, jnp.uint8).astype(jnp.int32)
    active = mask_lanes(mask_register(mask, "histograms", "preg"), 1)
    bins = BinType.BIN0 if bin_type is None else bin_type
    kind = HistType.ACCUMULATE if hist_type is None else hist_type
    bin_values = jnp.arange(HISTOGRAM_BINS, dtype=jnp.int32) + bins.value * HISTOGRAM_BINS
    if kind is HistType.FREQUENCY:
        hit = values[:, None] == bin_values[None, :]
    else:  # the cumulative count of every value up to the bin's (BIN1's bin n: values 0 .. 128 + n)
        hit = values[:, None] <= bin_values[None, :]
    counts = (hit & active[:, None]).sum(axis=0).astype(jnp.uint16)

    def combine(old, name):
        dst = _old_register("histograms", old, name, counts)
        return dst + counts

    return DestinationRead("histograms", combine)


@_vf("mull")
def mull(src0, src1, mask, mode=None):
    """``(lo, hi)``: the low and high 32 bits of each 64-bit product (signed for int32)."""
    a, b = register(src0, "mull", "src0"), register(src1, "mull", "src1")
    _same_dtype("mull", a, b)
    _check_dtype("mull", a, ("int32", "uint32"))
    ua, ub = _bits(a), _bits(b)
    half, low_mask = jnp.uint32(16), jnp.uint32(0xFFFF)
    a0, a1, b0, b1 = ua & low_mask, ua >> half, ub & low_mask, ub >> half
    p00, p01, p10, p11 = a0 * b0, a0 * b1, a1 * b0, a1 * b1
    middle = (p00 >> half) + (p01 & low_mask) + (p10 & low_mask)
    lo = (middle << half) | (p00 & low_mask)
    hi = p11 + (p01 >> half) + (p10 >> half) + (middle >> half)
    if jnp.issubdtype(a.dtype, jnp.signedinteger):
        hi = hi - jnp.where(a < 0, ub, 0) - jnp.where(b < 0, ua, 0)
    active = _lane_predicate(mask, a, "mull")
    return _finish("mull", _from_bits(lo, a.dtype), active, mode), _finish("mull", _from_bits(hi, a.dtype), active,
                                                                            mode)  # fmt: skip


@_vf("addc")
def addc(src0, src1, carry_src, mask, mode=None):
    """``(carry, dst)``: ``src0 + src1 + carry_src`` per 32-bit lane and its carry out (a mask)."""
    a, b = register(src0, "addc", "src0"), register(src1, "addc", "src1")
    _same_dtype("addc", a, b)
    _check_dtype("addc", a, ("int32", "uint32"))
    width = a.dtype.itemsize
    carry_in = mask_lanes(mask_register(carry_src, "addc", "carry_src"), width).astype(jnp.uint32)
    ua, ub = _bits(a), _bits(b)
    partial = ua + ub
    total = partial + carry_in
    carry = (partial < ua) | (total < partial)
    active = _lane_predicate(mask, a, "addc")
    return lanes_to_mask(carry & active, width), _finish("addc", _from_bits(total, a.dtype), active, mode)


# -- loads and stores ----------------------------------------------------------------------------------------------
_GENERIC_LOADS = {"BRC": "BRC_B{}", "US": "US_B{}", "DS": "DS_B{}", "E2B": "E2B_B{}"}


def _granularity(op: str, dist: LoadDist, width: int) -> tuple[str, int]:
    """The kind (BRC, US, ...) of a load distribution and its element width in bytes."""
    name = dist.value
    if name in _GENERIC_LOADS:
        return name, width
    if name == "UNPK":
        if width == 1:
            raise ValueError(f"vf.{op}: UNPK widens elements to the register's type, which cannot be 8-bit")
        return name, width // 2
    if name in ("NORM", "BLK", "UNPK4"):
        return name, width
    kind, _, bits = name.rpartition("_B")
    return kind, int(bits) // BITS_PER_BYTE


def _register_load(ref: TileRef, start, out, dist: LoadDist, op: str):
    """A register (or two, DINTLV) of ``out`` lanes read at byte ``start`` with distribution ``dist``."""
    kind, g = _granularity(op, dist, out.itemsize)
    vl = VECTOR_REGISTER_BYTES
    if kind == "NORM":
        return from_bytes(read_bytes(ref, _span(start, vl), op), out)
    if kind == "BRC":
        return from_bytes(jnp.tile(read_bytes(ref, _span(start, g), op), vl // g), out)
    if kind == "US":
        _allowed_width(op, dist, g, (1, 2))
        data = read_bytes(ref, _span(start, vl // 2), op).reshape(-1, g)
        return from_bytes(jnp.repeat(data, 2, axis=0).reshape(-1), out)
    if kind == "DS":
        _allowed_width(op, dist, g, (1, 2))
        data = read_bytes(ref, _span(start, 2 * vl), op).reshape(-1, g)
        return from_bytes(data[0::2].reshape(-1), out)
    if kind in ("UNPK", "UNPK4"):
        copies = 4 if kind == "UNPK4" else 2
        g = 1 if kind == "UNPK4" else g
        data = read_bytes(ref, _span(start, vl // copies), op).reshape(-1, g)
        zeros = jnp.zeros((data.shape[0], g * (copies - 1)), jnp.uint8)
        return from_bytes(jnp.concatenate([data, zeros], axis=1).reshape(-1), out)
    if kind == "BLK":
        return from_bytes(jnp.tile(read_bytes(ref, _span(start, DATA_BLOCK_BYTES), op), DATA_BLOCKS), out)
    if kind == "E2B":
        _allowed_width(op, dist, g, (2, 4))
        data = read_bytes(ref, _span(start, DATA_BLOCKS * g), op).reshape(DATA_BLOCKS, g)
        return from_bytes(jnp.tile(data, (1, DATA_BLOCK_BYTES // g)).reshape(-1), out)
    if kind == "DINTLV":
        data = read_bytes(ref, _span(start, 2 * vl), op).reshape(-1, g)
        return from_bytes(data[0::2].reshape(-1), out), from_bytes(data[1::2].reshape(-1), out)
    raise ValueError(f"vf.{op}: unknown load distribution {dist!r}")


def _allowed_width(op: str, dist: LoadDist, g: int, widths: tuple) -> None:
    if g not in widths:
        raise ValueError(f"vf.{op}: {dist.name} works on {' / '.join(f'{BITS_PER_BYTE * w}-bit' for w in widths)} elements, the "
                         f"register's are {BITS_PER_BYTE * g}-bit")  # fmt: skip


def _mask_load(ref: TileRef, start, dist: LoadDist, op: str) -> jax.Array:
    """A mask register read at byte ``start``: NORM 32 bytes, US 16 bytes each bit doubled, DS 64 bytes every other
    bit."""
    nbytes = MASK_REGISTER_BITS // BITS_PER_BYTE
    if dist is LoadDist.NORM:
        return unpack_bits(read_bytes(ref, _span(start, nbytes), op))
    if dist is LoadDist.US:
        return jnp.repeat(unpack_bits(read_bytes(ref, _span(start, nbytes // 2), op)), 2)
    if dist is LoadDist.DS:
        return unpack_bits(read_bytes(ref, _span(start, nbytes * 2), op))[0::2]
    raise ValueError(f"vf.{op}: a mask register loads with LoadDist NORM, US or DS, got {dist.name}")


def _default_dtype(ref: TileRef, dtype, op: str) -> np.dtype:
    if dtype is not None:
        return register_dtype(dtype, op)
    if ref.tile.dtype in _PACKED_DTYPES:
        raise refused(op, f"from {ref.tile} ({ref.tile.dtype}) is not modelled: give dtype= of a byte type")
    return register_dtype(ref.tile.dtype, op)


@_vf("load_align")
def load_align(src, offset=None, dtype=None, dist=None, data_copy_mode=None, block_stride=None, post_update=False,
               repeat_stride=None):  # fmt: skip
    """A register (two for DINTLV_*) from UB at ``src`` + ``offset`` elements, laid out by ``dist``; assigned to a
    name holding a mask it loads a mask. DATA_BLOCK_COPY: the offset slot is a mask choosing which of the 8
    DataBlocks (``block_stride`` blocks apart) to read (the others are 0). ``post_update`` reads at the pointer and
    then advances it by ``offset`` elements (by ``repeat_stride`` DataBlocks for DATA_BLOCK_COPY)."""
    op = "load_align"
    ref = _as_ref(src, op, "src")
    out = _default_dtype(ref, dtype, op)
    mode = DataCopyMode.NORM if data_copy_mode is None else data_copy_mode
    m = machine(op)
    if mode in (DataCopyMode.DATA_BLOCK_COPY, DataCopyMode.DATA_BLOCK_LOAD):
        blocks = _blocks_enabled(mask_register(offset, op, "the DATA_BLOCK_COPY mask (offset slot)"))
        starts = _block_starts(ref.address(), block_stride)
        spread = np.repeat if _concrete(blocks) else jnp.repeat  # a static mask keeps the bounds check static
        enable = spread(np.asarray(blocks) if _concrete(blocks) else blocks, DATA_BLOCK_BYTES)
        data = read_bytes(ref, _block_index(starts), op, enable)
        if post_update:
            m.advance(ref.pointer_key, (0 if repeat_stride is None else repeat_stride) * DATA_BLOCK_BYTES)
        return from_bytes(data, out)
    dist = LoadDist.NORM if dist is None else dist
    if not isinstance(dist, LoadDist):
        raise TypeError(f"vf.{op}: dist must be a pl.LoadDist, got {dist!r}")
    if post_update:
        start = ref.address()
        if offset is not None:
            m.advance(ref.pointer_key, _offset_bytes(ref, offset, op))
    else:
        start = _start(ref, offset, op)
    if dist not in (LoadDist.NORM, LoadDist.US, LoadDist.DS):
        return _register_load(ref, start, out, dist, op)

    def combine(old, name):  # the target decides: a name holding a mask loads a mask (pld)
        return _mask_load(ref, start, dist, op) if _is_mask(old) else _register_load(ref, start, out, dist, op)

    return DestinationRead(op, combine, lambda: _register_load(ref, start, out, dist, op))


def _store_mask_bytes(mask, width: int) -> jax.Array:
    """Per-byte write enables from a mask read at ``width``-byte granularity."""
    return jnp.repeat(mask_lanes(mask, width), width, total_repeat_length=VECTOR_REGISTER_BYTES)


@_vf("store_align")
def store_align(dst, src, *args, dist=None, data_copy_mode=None, block_stride=None, repeat_stride=None,
                post_update=False):  # fmt: skip
    """Write a register (the lanes ``preg`` selects), two registers interleaved (INTLV: ``src_even, src_odd, preg``)
    or a mask (``vf.store_align(tile, mask)``) to UB at ``dst`` + an optional trailing offset. DATA_BLOCK_COPY
    writes the 8 DataBlocks (``block_stride`` blocks apart) whose mask bits are set. ``post_update`` writes at the
    pointer and advances it by the trailing stride (elements; ``repeat_stride`` DataBlocks for DATA_BLOCK_COPY)."""
    op = "store_align"
    ref = _as_ref(dst, op, "dst")
    m = machine(op)
    if isinstance(src, DestinationRead):
        src = src.standalone(op)
    mode = DataCopyMode.NORM if data_copy_mode is None else data_copy_mode
    if _is_mask(src):  # psts: a mask register
        dist = StoreDist.NORM if dist is None else dist
        offset = args[0] if args else None
        start, advance = _store_address(ref, offset, post_update, op)
        if dist is StoreDist.NORM:
            data = pack_bits(src)
        elif dist is StoreDist.PACK:
            data = pack_bits(src[0::2])
        else:
            raise ValueError(f"vf.{op}: a mask register stores with StoreDist NORM or PACK, got {dist.name}")
        write_bytes(ref, _span(start, data.shape[0]), data, op)
        if post_update:
            m.advance(ref.pointer_key, advance)
        return
    x = register(src, op)
    if mode is DataCopyMode.DATA_BLOCK_COPY:
        if not args:
            raise TypeError(f"vf.{op}: DATA_BLOCK_COPY takes the mask after the register")
        mask = mask_register(args[0], op, "the DATA_BLOCK_COPY mask")
        stride = args[1] if len(args) > 1 else block_stride
        repeat = args[2] if len(args) > 2 else repeat_stride
        blocks = _blocks_enabled(mask)
        enable = jnp.repeat(blocks, DATA_BLOCK_BYTES)
        write_bytes(ref, _block_index(_block_starts(ref.address(), stride)), to_bytes(x), op, enable)
        if post_update:
            m.advance(ref.pointer_key, (0 if repeat is None else repeat) * DATA_BLOCK_BYTES)
        return
    if mode is not DataCopyMode.NORM:
        raise ValueError(f"vf.{op}: data_copy_mode is NORM or DATA_BLOCK_COPY, got {mode!r}")
    dist = StoreDist.NORM if dist is None else dist
    if not isinstance(dist, StoreDist):
        raise TypeError(f"vf.{op}: dist must be a pl.StoreDist, got {dist!r}")
    if dist in (StoreDist.INTLV, StoreDist.INTLV_B32):
        if not args:
            raise TypeError(f"vf.{op}: {dist.name} stores two registers: store_align(tile, src_even, src_odd, preg)")
        y = register(args[0], op, "src_odd")
        _same_dtype(op, x, y)
        args = args[1:]
    if not args:
        raise TypeError(f"vf.{op}: a register store takes a mask: store_align(tile, src, preg[, offset])")
    mask = mask_register(args[0], op, "preg")
    start, advance = _store_address(ref, args[1] if len(args) > 1 else None, post_update, op)
    width = x.dtype.itemsize
    data = to_bytes(x)
    if dist is StoreDist.NORM:
        enable = _store_mask_bytes(mask, width)
    elif dist is StoreDist.NORM_B16:
        enable = _store_mask_bytes(mask, 2)
    elif dist is StoreDist.FIRST_ELEMENT:
        data, enable = data[:width], None
    elif dist in (StoreDist.PACK, StoreDist.PACK4):
        keep = width // 2 if dist is StoreDist.PACK else 1
        if dist is StoreDist.PACK4 and width != 4:
            raise ValueError(
                f"vf.{op}: PACK4 keeps the low byte of 32-bit lanes, the register has {BITS_PER_BYTE * width}-bit"
            )
        if width == 1:
            raise ValueError(f"vf.{op}: PACK keeps the low half of 16-bit or wider lanes")
        data = data.reshape(-1, width)[:, :keep].reshape(-1)
        enable = jnp.repeat(mask_lanes(mask, width), keep)
    else:  # INTLV / INTLV_B32
        g = 4 if dist is StoreDist.INTLV_B32 else width
        pair = jnp.stack([data.reshape(-1, g), to_bytes(y).reshape(-1, g)], axis=1).reshape(-1)
        on = mask_lanes(mask, g)
        data, enable = pair, jnp.repeat(jnp.stack([on, on], axis=1).reshape(-1), g)
    write_bytes(ref, _span(start, data.shape[0]), data, op, enable)
    if post_update:
        m.advance(ref.pointer_key, advance)


def _store_address(ref: TileRef, offset, post_update: bool, op: str):
    """(byte start, bytes to advance the pointer by afterwards) of a store."""
    if post_update:
        return ref.address(), 0 if offset is None else _offset_bytes(ref, offset, op)
    return _start(ref, offset, op), 0


@_vf("gather")
def gather(src, indices, mask=None, data_copy_mode=None):
    """Tile form: ``dst[i] = src[indices[i]]`` (elements of the tile) on the selected lanes (8-bit data zero-extended to
    16 bits; 16-bit data with 32-bit indices fills the even lanes). Register form: ``dst[i] = src[indices[i] % n]``."""
    op = "gather"
    idx = register(indices, op, "indices")
    if _is_register(src) or isinstance(src, DestinationRead):
        x = register(src, op)
        if mask is not None or data_copy_mode is not None:
            raise TypeError("vf.gather: the register form takes no mask or data_copy_mode")
        if idx.dtype.itemsize != x.dtype.itemsize:
            raise TypeError(f"vf.gather: {x.dtype} lanes take indices of the same width, got {idx.dtype}")
        return x[(_bits(idx) % x.shape[0]).astype(jnp.int32)]
    if data_copy_mode not in (None, DataCopyMode.NORM):
        raise refused(op, "in DATA_BLOCK_LOAD mode is not modelled (its index lanes per DataBlock are not documented)")
    ref = _as_ref(src, op, "src")
    data_dtype = _default_dtype(ref, None, op)
    width = data_dtype.itemsize
    mask = mask_register(mask, op, "preg")
    n = idx.shape[0]
    active = mask_lanes(mask, idx.dtype.itemsize)
    element = _bits(idx).astype(jnp.int32)
    starts = ref.address() + element * width
    byte_index = (starts[:, None] + jnp.arange(width, dtype=jnp.int32)).reshape(-1)
    enable = jnp.repeat(active, width)
    raw = read_bytes(ref, byte_index, op, enable).reshape(n, width)
    slot = idx.dtype.itemsize
    if width > slot:
        raise TypeError(f"vf.gather: {data_dtype} data takes indices at least as wide, got {idx.dtype}")
    padded = jnp.concatenate([raw, jnp.zeros((n, slot - width), jnp.uint8)], axis=1).reshape(-1)
    out = (jnp.dtype(jnp.uint16) if data_dtype.kind == "u" else jnp.dtype(jnp.int16)) if width == 1 else data_dtype
    return from_bytes(padded, out)


@_vf("scatter")
def scatter(base_ptr, src, index, mask):
    """``tile[index[i]] = src[i]`` (elements of the tile) for the selected lanes; 8-bit data uses its even lanes."""
    op = "scatter"
    ref = _as_ref(base_ptr, op, "tile")
    x = register(src, op)
    idx = register(index, op, "index")
    mask = mask_register(mask, op, "preg")
    width = x.dtype.itemsize
    if width == 1:
        values, active = x[0::2], mask_lanes(mask, 2)
    else:
        values, active = x, mask_lanes(mask, width)
    n = min(values.shape[0], idx.shape[0])
    values, active = values[:n], active[:n]
    starts = ref.address() + _bits(idx[:n]).astype(jnp.int32) * tile_itemsize(ref.tile)
    byte_index = (starts[:, None] + jnp.arange(width, dtype=jnp.int32)).reshape(-1)
    write_bytes(ref, byte_index, to_bytes(values), op, jnp.repeat(active, width))


@_vf("load")
def load(src_ptr, stride=None, post_update=False, repeat_stride=None, count=None):
    """An unaligned load of one register (``count`` elements, the rest 0); ``post_update`` / ``stride`` advance the
    pointer by ``stride`` elements after it."""
    op = "load"
    ref = _as_ref(src_ptr, op, "src")
    out = _default_dtype(ref, None, op)
    n = lanes(out) if count is None else count
    data = read_bytes(ref, _span(ref.address(), VECTOR_REGISTER_BYTES), op,
                      jnp.arange(VECTOR_REGISTER_BYTES) < n * out.itemsize)  # fmt: skip
    if post_update or stride is not None:
        machine(op).advance(ref.pointer_key, (0 if stride is None else stride) * tile_itemsize(ref.tile))
    return from_bytes(data, out)


@_vf("store")
def store(dst_ptr, src, count=None, post_update=False, repeat_stride=None):
    """An unaligned store of the first ``count`` lanes (default all); ``post_update`` advances the pointer by them."""
    op = "store"
    ref = _as_ref(dst_ptr, op, "dst")
    x = register(src, op)
    n = x.shape[0] if count is None else count
    width = x.dtype.itemsize
    enable = jnp.arange(VECTOR_REGISTER_BYTES) < n * width
    write_bytes(ref, _span(ref.address(), VECTOR_REGISTER_BYTES), to_bytes(x), op, enable)
    if post_update:
        machine(op).advance(ref.pointer_key, jnp.asarray(n) * width)


@_vf("unalign_reg_for_store")
def unalign_reg_for_store():
    """An alignment register for ``store_unalign`` / ``store_unalign_post`` (it tracks the bytes stored so far)."""
    return UnalignReg(machine("unalign_reg_for_store").new_register("ureg"), "store")


@_vf("load_unalign_init")
def load_unalign_init():
    """An alignment register for ``load_unalign_pre`` / ``load_unalign``."""
    return UnalignReg(machine("load_unalign_init").new_register("ureg"), "load")


def _unalign_reg(reg, kind: str, op: str) -> UnalignReg:
    if not isinstance(reg, UnalignReg) or reg.kind != kind:
        maker = "vf.unalign_reg_for_store()" if kind == "store" else "vf.load_unalign_init()"
        raise TypeError(f"vf.{op}: the alignment register must come from {maker}, got {_describe(reg)}")
    return reg


@_vf("store_unalign")
def store_unalign(dst_ptr, src, align_reg, stride=None, post_update=False):
    """Store the first ``stride`` lanes of ``src`` (without ``stride``: the bytes the last ``squeeze(..., STORE_REG)``
    counted) at ``dst_ptr`` plus what ``align_reg`` has advanced; ``post_update`` advances it by them."""
    op = "store_unalign"
    ref = _as_ref(dst_ptr, op, "dst")
    x = register(src, op)
    reg = _unalign_reg(align_reg, "store", op)
    m = machine(op)
    nbytes = m.state[_AR] if stride is None else jnp.asarray(stride, jnp.int32) * x.dtype.itemsize
    start = ref.address() + m.offset(reg.key)
    enable = jnp.arange(VECTOR_REGISTER_BYTES) < nbytes
    write_bytes(ref, _span(start, VECTOR_REGISTER_BYTES), to_bytes(x), op, enable)
    if post_update:
        m.advance(reg.key, nbytes)


@_vf("store_unalign_post")
def store_unalign_post(dst_ptr, align_reg, stride=None, post_update=False):
    """Flush an unaligned store sequence (its data is already in UB here); ``post_update`` advances ``align_reg`` by
    ``stride`` elements."""
    op = "store_unalign_post"
    ref = _as_ref(dst_ptr, op, "dst")
    reg = _unalign_reg(align_reg, "store", op)
    m = machine(op)
    m.writes[m.key(ref.tile, op)] = ref.tile
    if post_update and stride is not None:
        m.advance(reg.key, jnp.asarray(stride, jnp.int32) * tile_itemsize(ref.tile))


@_vf("load_unalign_pre")
def load_unalign_pre(ureg, src_ptr):
    """Prime an unaligned load sequence (its data is read by ``load_unalign`` here)."""
    op = "load_unalign_pre"
    ref = _as_ref(src_ptr, op, "src")
    _unalign_reg(ureg, "load", op)
    m = machine(op)
    m.reads[m.key(ref.tile, op)] = ref.tile


@_vf("load_unalign")
def load_unalign(ureg, src_ptr, stride=None, post_update=False):
    """One register from ``src_ptr`` plus what ``ureg`` has advanced (any byte address); ``stride`` (bytes) or
    ``post_update`` advance ``ureg`` after it."""
    op = "load_unalign"
    ref = _as_ref(src_ptr, op, "src")
    reg = _unalign_reg(ureg, "load", op)
    m = machine(op)
    out = _default_dtype(ref, None, op)
    data = read_bytes(ref, _span(ref.address() + m.offset(reg.key), VECTOR_REGISTER_BYTES), op)
    if post_update or stride is not None:
        m.advance(reg.key, 0 if stride is None else stride)
    return from_bytes(data, out)


@_vf("mem_bar")
def mem_bar(mode=None):
    """A memory barrier: accesses already happen in program order here, so it only checks ``mode``."""
    if mode is not None and not isinstance(mode, MemBarMode):
        raise TypeError(f"vf.mem_bar: mode must be a pl.MemBarMode, got {mode!r}")


# -- refused -------------------------------------------------------------------------------------------------------
_refusal("subc", "is not modelled: its borrow-in is documented both as a borrow (dst = src0 - src1 - borrow) and as "
         "a carry (src0 + ~src1 + borrow_src), which differ by one; use vf.sub and vf.lt")  # fmt: skip
_refusal("unsqueeze", "is not modelled: its documented formula (dst[i] = mask[i]) and algorithm (a running count of "
         "the mask bits) disagree; use vf.select(vf.full(1, ...), vf.full(0, ...), mask)")  # fmt: skip
_refusal("get_mask_spr", "is not modelled: it reads the SPR mask set by pl.set_vec_mask, outside the vector function; "
         "build the mask with vf.create_mask / vf.update_mask")  # fmt: skip


# -- the namespace -------------------------------------------------------------------------------------------------
class _VfNamespace(type):
    """``vf.<name>`` outside the modelled operations is refused by name."""

    def __getattr__(cls, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        raise UnsupportedConstruct(
            f"rule 'construct': vf.{name} is not modelled by ascjax's PyPTO-Pro front end (vector functions: "
            f"{', '.join(sorted(OPS))})"
        )

    def __dir__(cls):
        return sorted(OPS)


class reg_tensor:  # noqa: N801 - PyPTO-Pro's name
    """``vf.reg_tensor``: the type of a vector register, declared implicitly by assignment; not called."""

    def __init__(self, *args, **kwargs):
        raise TypeError("vf.reg_tensor is declared implicitly (reg = vf.load_align(...)); it is not called")


_NAMESPACE = {name: staticmethod(fn) for name, fn in OPS.items()}
_NAMESPACE["reg_tensor"] = reg_tensor
_NAMESPACE["__doc__"] = "PyPTO-Pro's ``Vf`` namespace (``from pypto_pro.language import Vf as vf``)."
Vf = _VfNamespace("Vf", (), _NAMESPACE)
