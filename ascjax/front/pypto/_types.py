"""PyPTO-Pro's declarations: data types, memory spaces, layouts, ``TileType``, ``Tensor[...]`` annotations.

Names and spellings are PyPTO-Pro's (``pl.DT_FP16``, ``pl.MemorySpace.Vec``, ``pl.NZ``), so a kernel written
for ``pypto_pro.language`` reads the same here; each maps onto ascjax's own (dtype names, ``Buffer``,
``Format``).
"""

from __future__ import annotations

import dataclasses
import enum

from ...core import Buffer, Format

#: PyPTO-Pro's data types, as ascjax's dtype names (those ascjax has no storage for are refused where used)
DTYPES = {
    "DT_FP16": "float16",
    "DT_FP32": "float32",
    "DT_BF16": "bfloat16",
    "DT_INT8": "int8",
    "DT_INT16": "int16",
    "DT_INT32": "int32",
    "DT_INT64": "int64",
    "DT_UINT8": "uint8",
    "DT_UINT16": "uint16",
    "DT_UINT32": "uint32",
    "DT_UINT64": "uint64",
    "DT_BOOL": "bool",
    "DT_FP8E4M3FN": "float8_e4m3fn",
    "DT_FP8E5M2": "float8_e5m2",
    "DT_FP8E8M0": "float8_e8m0fnu",
    "DT_FP4E2M1": "float4_e2m1fn",
    "DT_HF8": "hifloat8",
    "DT_INT4": "int4",
}


@dataclasses.dataclass(frozen=True)
class DataType:
    """``pl.DT_*``: a PyPTO-Pro data type; ``name`` is ascjax's dtype name."""

    pypto_name: str
    name: str

    def __str__(self) -> str:
        return f"pl.{self.pypto_name}"


DATA_TYPES = {key: DataType(key, value) for key, value in DTYPES.items()}


def dtype_name(dtype) -> str:
    """ascjax's dtype name of a ``pl.DT_*`` (or of a dtype name ascjax knows)."""
    return dtype.name if isinstance(dtype, DataType) else str(dtype)


class MemorySpace(enum.Enum):
    """``pl.MemorySpace``: where a tile lives (PyPTO-Pro's names of the AI Core buffers)."""

    Mat = Buffer.L1
    Left = Buffer.L0A
    Right = Buffer.L0B
    Acc = Buffer.L0C
    Bias = Buffer.BT
    Vec = Buffer.UB
    ScaleLeft = Buffer.SCALE_LEFT
    ScaleRight = Buffer.SCALE_RIGHT


class TensorLayout(enum.Enum):
    """``pl.ND``, ``pl.NZ``, ``pl.ZN``, ``pl.ZZ``, ``pl.NN`` (and ``pl.DN``, column-major: a one-column or one-row
    tile in DN is the same bytes as in ND; any other DN view is refused where it would be needed)."""

    ND = "ND"
    DN = "DN"
    NZ = "Nz"
    ZN = "Zn"
    ZZ = "Zz"
    NN = "Nn"

    @property
    def format(self) -> Format:
        if self is TensorLayout.DN:
            raise NotImplementedError(
                "rule 'layout': pl.DN (a column-major view) is modelled for one-row or one-column tiles; use ND"
            )
        return Format(self.value)


#: PyPTO-Pro's tile shape marker for a dimension known only at run time
DYNAMIC = -1


class ReluPreMode(enum.IntEnum):
    """``pl.ReluPreMode``: a ReLU fused into a store or move out of L0C (``relu_pre_mode=``)."""

    NoRelu = 0
    NormalRelu = 1


#: ``TileType(compact=)``: None / 0 (off), 1 (normal), 2 (row plus one): how a tail window is laid out
COMPACT_MODES = (None, 0, 1, 2)


class TilePad(enum.Enum):
    """``pl.TilePad``: what ``pl.fillpad`` writes outside a tile's valid shape (``null``: nothing is declared)."""

    null = 0
    zero = 1
    max = 2
    min = 3


class FillPadMode(enum.Enum):
    """``pl.FillPadMode``: ``NORMAL`` (equal shapes, two tiles), ``EXPAND`` (a larger destination), ``INPLACE``
    (one tile)."""

    NORMAL = 0
    EXPAND = 1
    INPLACE = 2


@dataclasses.dataclass(frozen=True)
class TileType:
    """``pl.TileType(shape=, dtype=, target_memory=, layout=, fractal=, valid_shape=, compact=, pad=)``: a tile's
    static type (``pad``: what ``pl.fillpad`` writes outside the valid shape of a tile of this type).

    ``compact`` says how a tail window (a ``valid_shape`` inside ``shape``) is laid out; with the whole tile valid it
    changes nothing.
    """

    shape: tuple
    dtype: object
    target_memory: MemorySpace
    layout: TensorLayout | None = None
    fractal: int | None = None
    valid_shape: tuple | None = None
    compact: int | None = None
    pad: TilePad = TilePad.null

    def __init__(
        self, shape, dtype, target_memory, layout=None, fractal=None, valid_shape=None, compact=None, pad=None,
        **unknown,
    ):  # fmt: skip
        if unknown:
            raise TypeError(
                f"rule 'TileType': pl.TileType takes shape, dtype, target_memory, layout, fractal, valid_shape, "
                f"compact and pad; got {', '.join(sorted(unknown))}"
            )
        if compact not in COMPACT_MODES:
            raise ValueError(f"rule 'TileType': compact is None, 0, 1 or 2, got {compact!r}")
        if not isinstance(target_memory, MemorySpace):
            raise TypeError(f"rule 'TileType': target_memory must be a pl.MemorySpace, got {target_memory!r}")
        object.__setattr__(self, "shape", tuple(int(s) for s in shape))
        object.__setattr__(self, "dtype", dtype)
        object.__setattr__(self, "target_memory", target_memory)
        object.__setattr__(self, "layout", layout)
        object.__setattr__(self, "fractal", fractal)
        object.__setattr__(self, "valid_shape", None if valid_shape is None else tuple(valid_shape))
        object.__setattr__(self, "compact", compact)
        if isinstance(pad, int) and not isinstance(pad, bool) and pad in (p.value for p in TilePad):
            pad = TilePad(pad)  # PyPTO-Pro also takes the integers 0..3
        if pad is not None and not isinstance(pad, TilePad):
            raise ValueError(f"rule 'TileType': pad is a pl.TilePad (null, zero, max, min) or 0..3, got {pad!r}")
        object.__setattr__(self, "pad", pad or TilePad.null)

    @property
    def buffer(self) -> Buffer:
        return self.target_memory.value

    @property
    def format(self) -> Format | None:
        """The tile's format in ascjax's terms (None: the buffer's default)."""
        if self.buffer is Buffer.L1 and self.shape[0] == 1 and self.layout in (None, TensorLayout.NZ):
            return Format.ND  # one NZ row (a bias row): fractal k holds columns 16k.., the same bytes as ND
        if self.layout is None:
            return None
        if self.layout is TensorLayout.DN and 1 in self.shape:  # one row or column: the same bytes as ND
            return Format.ND
        fmt = self.layout.format
        if self.buffer is Buffer.L0A and fmt is Format.NZ:  # PyPTO-Pro writes Left tiles as NZ: the chip's A format
            return None
        return fmt


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    """``pl.Tensor[[rows, cols], pl.DT_FP16]``: a kernel parameter that is a GM tensor."""

    shape: tuple
    dtype: object

    def __str__(self) -> str:
        dims = ", ".join("pl.DYNAMIC" if d == DYNAMIC else str(d) for d in self.shape)
        return f"pl.Tensor[[{dims}], {self.dtype}]"


class Tensor:
    """``pl.Tensor[[shape], dtype]`` in a kernel's signature (a GM tensor parameter)."""

    def __class_getitem__(cls, item) -> TensorSpec:
        return _annotation("Tensor", TensorSpec, item)


def _annotation(kind: str, spec, item):
    """``pl.<kind>[[shape], dtype]`` as a ``spec``; anything else refused naming the form."""
    if not isinstance(item, tuple) or len(item) != 2:
        raise TypeError(f"rule '{kind}': write pl.{kind}[[rows, cols], pl.DT_FP16], got pl.{kind}[{item!r}]")
    shape, dtype = item
    return spec(tuple(shape), dtype)


@dataclasses.dataclass(frozen=True)
class TileSpec:
    """``pl.Tile[[rows, cols], pl.DT_FP32]``: a helper's parameter that is a tile (an annotation: the tile passed
    carries its own shape and type)."""

    shape: tuple
    dtype: object


class Tile:
    """``pl.Tile[[shape], dtype]`` in a helper's signature."""

    def __class_getitem__(cls, item) -> TileSpec:
        return _annotation("Tile", TileSpec, item)
