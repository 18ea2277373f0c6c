"""Static allocation of tiles: where a tile lives, its shape, dtype and format.

Tiles are plain Python metadata checked at trace time (alignment, capacity, overlap,
format). Their *data* lives in the machine state as typed arrays in physical layout.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from . import _dtypes as dtypes
from ._buffers import BUFFERS
from ._chip import Chip
from ._kinds import Buffer, Format
from .layout import padded_shape, physical_shape

# formats each buffer may hold, the first is the default (L0A: the chip's A format, or ND for GEMV)
_FORMATS = {b: row.formats for b, row in BUFFERS.items() if b is not Buffer.GM}
_ACC_DTYPES = ("float32", "int32")
#: MX scales (E8M0) sit in 16 x 2 fractals of 32 B ("fractal=32"): Zz for scale_a, Nn for scale_b
#: [facts §4 "Spaces", §6 "MX"; asc-devkit MmadMx.md: small fractal (2, 16)]
MX_SCALE_DTYPE = "float8_e8m0fnu"
MX_SCALE_C0 = 2
_MX_SCALE_L1_FORMATS = (Format.ND, Format.ZZ, Format.NN)


@dataclasses.dataclass(frozen=True)
class Tile:
    """A (rows x cols) matrix placed in an on-chip buffer."""

    name: str
    buffer: Buffer
    addr: int  # byte address inside the buffer
    rows: int
    cols: int
    dtype: str  # canonical dtype name, see ascjax.core._dtypes
    fmt: Format
    storage: str | None = None  # a view's: the tile whose elements it reads and writes (None: its own)

    @property
    def key(self) -> str:
        """The name its elements are kept under (its own, or the viewed tile's)."""
        return self.storage or self.name

    @property
    def c0(self) -> int:
        """Fractal width: 16 on L0C, 32 B / itemsize for input fractals, 2 for MX scales."""
        if self.buffer is Buffer.L0C:
            return 16
        if self.dtype == MX_SCALE_DTYPE and self.fmt is not Format.ND:
            return MX_SCALE_C0
        return dtypes.k0(self.dtype) if self.fmt is not Format.ND else 1

    @property
    def padded(self) -> tuple[int, int]:
        return padded_shape(self.rows, self.cols, self.fmt, self.c0)

    @property
    def physical_shape(self) -> tuple[int, ...]:
        return physical_shape(self.rows, self.cols, self.fmt, self.c0)

    @property
    def np_dtype(self) -> np.dtype:
        return dtypes.to_numpy_dtype(self.dtype)

    @property
    def nbytes(self) -> int:
        rp, cp = self.padded
        return rp * cp * dtypes.bits(self.dtype) // 8

    @property
    def end(self) -> int:
        return self.addr + self.nbytes

    @property
    def base(self) -> Tile:
        """The static tile (a TileGroup slot overrides this with its slot-0 tile)."""
        return self

    def __str__(self) -> str:
        return f"`{self.name}` ({self.buffer} @{self.addr:#x}, {self.rows}x{self.cols} {self.dtype} {self.fmt})"


class Allocator:
    """Places tiles in the buffers of one core and checks every placement rule."""

    def __init__(self, chip: Chip):
        self.chip = chip
        self.live: dict[Buffer, list[Tile]] = {b: [] for b in Buffer if b is not Buffer.GM}
        self.names: set[str] = set()
        self.groups: dict[str, tuple[Tile, int, int]] = {}  # a TileGroup's span name -> (slot 0, stride, depth)

    def default_format(self, buffer: Buffer) -> Format:
        if buffer is Buffer.L0A:
            return self.chip.a_format
        return _FORMATS[buffer][0]

    def alloc(self, buffer, shape, dtype, *, fmt=None, addr=None, name=None, view: bool = False) -> Tile:
        """Place a tile; with ``view``, one at exactly the bytes of a live ND tile of its dtype is a view of it (the
        same elements in row-major order, another shape: a ``[64, 1]`` column and a ``[1, 64]`` row), and so is one
        of the same shape, dtype and format as the live tile there (another name for its elements)."""
        probe = self._probe(buffer, shape, dtype, fmt, name)
        viewed = self._viewed(probe, addr) if view else None
        if viewed is not None:
            tile = dataclasses.replace(probe, addr=viewed.addr, storage=viewed.key)
        else:
            tile = self._place(probe, probe.nbytes, addr)
        self.live[tile.buffer].append(tile)
        self.names.add(tile.name)
        return tile

    def _viewed(self, probe: Tile, addr) -> Tile | None:
        """The live tile a ``probe`` at ``addr`` would be a view of: the same bytes and dtype, both ND or of one
        shape and format."""
        if addr is None:
            return None
        for other in self.live[probe.buffer]:
            same = (other.addr, other.nbytes, other.dtype) == (int(addr), probe.nbytes, probe.dtype)
            layout = other.fmt is probe.fmt is Format.ND or (other.rows, other.cols, other.fmt) == (
                probe.rows, probe.cols, probe.fmt,
            )  # fmt: skip
            if same and layout and other.name in self.names:  # a tile, not a TileGroup's span
                return other
        return None

    def alloc_group(
        self, buffer, shape, dtype, depth: int, *, fmt=None, addr=None, name=None, view: bool = False, stride=None
    ) -> tuple[Tile, int]:
        """Place ``depth`` equal tiles side by side; returns (slot-0 tile, stride in bytes).

        The stride is the tile's size rounded up to the buffer alignment and to whole 512 B
        granules, so slots never share a granule (or a unit-flag block); a ``stride`` given (slots the kernel placed)
        holds a tile, aligned as the buffer's tiles are (L0C's in whole 512 B unit-flag blocks), and the bytes
        between slots belong to the group. With
        ``view``, a group at exactly the bytes of a live group whose slots hold as many elements of its dtype, both
        ND or of one shape and format, is a view of it (the same elements slot by slot).
        """
        probe = self._probe(buffer, shape, dtype, fmt, name)
        unit = max(self.chip.align_bytes[probe.buffer], 512)
        stride = -(-probe.nbytes // unit) * unit if stride is None else int(stride)
        # slots the kernel placed: aligned as any tile of the buffer (L0C's in whole unit-flag blocks), apart
        placed = self.chip.align_bytes[probe.buffer] if probe.buffer is not Buffer.L0C else unit
        if stride < probe.nbytes or stride % placed:
            raise ValueError(
                f"rule 'tile group addresses': slots {stride} B apart do not hold {probe} ({probe.nbytes} B) each, "
                f"aligned to {placed} B: place them a multiple of {placed} B apart, at least {probe.nbytes} B"
            )
        viewed = self._viewed_group(probe, addr, stride, depth) if view else None
        if viewed is not None:
            tile = dataclasses.replace(probe, addr=viewed.addr, storage=viewed.key)
            self.names.add(tile.name)
            return tile, stride
        tile = self._place(probe, stride * depth, addr, what=f"a depth-{depth} TileGroup of")
        span = Tile(f"{tile.name}[0:{depth}]", tile.buffer, tile.addr, 1, stride * depth, "uint8", Format.ND)
        self.live[tile.buffer].append(span)
        self.groups[span.name] = (tile, stride, depth)
        self.names.add(tile.name)
        return tile, stride

    def _viewed_group(self, probe: Tile, addr, stride: int, depth: int) -> Tile | None:
        """The slot-0 tile of the live group a group of ``probe`` at ``addr`` would be a view of (``alloc_group``)."""
        if addr is None:
            return None
        for span in self.live[probe.buffer]:
            other, other_stride, other_depth = self.groups.get(span.name, (None, 0, 0))
            if other is None or (other.addr, other_stride, other_depth) != (int(addr), stride, depth):
                continue
            same = (other.nbytes, other.dtype) == (probe.nbytes, probe.dtype)
            layout = other.fmt is probe.fmt is Format.ND or (other.rows, other.cols, other.fmt) == (
                probe.rows,
                probe.cols,
                probe.fmt,
            )
            if same and layout:
                return other
        return None

    def _probe(self, buffer, shape, dtype, fmt, name) -> Tile:
        """A tile at address 0 after the static checks of buffer, shape, format, dtype and name."""
        buffer = Buffer.parse(buffer)
        if buffer is Buffer.GM:
            raise ValueError("GM tensors are kernel inputs/outputs, not tiles: pass them to run()")
        if buffer not in self.chip.buffer_bytes:
            have = [b.value for b in self.chip.buffer_bytes]
            raise ValueError(
                f"rule 'buffers': chip {self.chip.name} (arch {self.chip.arch}) has no {buffer} buffer "
                f"(it has {', '.join(have)}); the MX scale domains ScaleLeft/ScaleRight exist on chip 950 only"
            )
        dims = (1, shape) if isinstance(shape, int) else tuple(shape)
        if len(dims) != 2:
            raise ValueError(
                f"rule 'tile shape': a tile is 2-D (rows, cols) or a length, got shape {tuple(dims)} for "
                f"{repr(name) if name else 'a tile in ' + str(buffer)}: fold the leading dimensions into rows"
            )
        rows, cols = dims
        if rows <= 0 or cols <= 0:
            raise ValueError(f"tile shape must be positive, got {rows}x{cols}")
        dtype = dtypes.dtype_name(dtype)
        fmt = self.default_format(buffer) if fmt is None else Format(fmt)
        allowed = (self.chip.a_format, Format.ND) if buffer is Buffer.L0A else _FORMATS[buffer]
        scale_in_l1 = buffer is Buffer.L1 and dtype == MX_SCALE_DTYPE
        if scale_in_l1:
            allowed = _MX_SCALE_L1_FORMATS
        if fmt not in allowed:
            raise ValueError(
                f"rule 'buffer format': {buffer} holds {'/'.join(map(str, allowed))} "
                + (f"{dtype} " if scale_in_l1 else "")
                + f"data on chip {self.chip.name}, not {fmt}"
                + (" (ND in L0A is only for GEMV, m == 1)" if buffer is Buffer.L0A else "")
                + (" (MX scales: fmt='Zz' for scale_a, fmt='Nn' for scale_b)" if scale_in_l1 else "")
            )
        if buffer in (Buffer.SCALE_LEFT, Buffer.SCALE_RIGHT) and dtype != MX_SCALE_DTYPE:
            raise ValueError(f"rule 'MX scale dtype': {buffer} holds E8M0 scales ({MX_SCALE_DTYPE}), not {dtype}")
        if buffer in (Buffer.L0A, Buffer.L0B) and dtype == MX_SCALE_DTYPE:
            raise ValueError(
                f"rule 'MX scale dtype': E8M0 scales live in ScaleLeft/ScaleRight, not {buffer}: "
                "allocate them there at the data tile's address >> 4"
            )
        if buffer in (Buffer.L0C, Buffer.BT) and dtype not in _ACC_DTYPES:
            what = f"tile {name!r}" if name else f"a {rows}x{cols} {buffer} tile"
            raise ValueError(
                f"rule 'accumulator dtype': {what} is {dtype}, but {buffer} holds float32 or int32 (the mmad's "
                "accumulator): allocate it as float32 (int32 for int8 operands) and let the fixpipe convert"
            )
        if buffer is Buffer.BT and rows != 1:
            raise ValueError(f"rule 'bias shape': a BiasTable tile is one row (1 x N), got {rows}x{cols}")
        if name is None:
            name = f"{buffer.name.lower()}_{len(self.names)}"
        if name in self.names:
            raise ValueError(f"tile name {name!r} is already used: give each tile its own name")
        return Tile(name, buffer, 0, rows, cols, dtype, fmt)

    def _place(self, probe: Tile, nbytes: int, addr, what: str = "") -> Tile:
        """``probe`` at ``addr`` (first fit if None), checked for alignment, capacity and overlap."""
        buffer = probe.buffer
        size = self.chip.buffer_bytes[buffer]
        align = self.chip.align_bytes[buffer]
        if addr is None:
            addr = self._first_fit(buffer, nbytes, align)
        tile = dataclasses.replace(probe, addr=int(addr))
        end = tile.addr + nbytes
        label = f"{what} {tile}".strip()
        if tile.addr % align:
            raise ValueError(
                f"rule '{buffer} alignment': {label} starts at byte {tile.addr}, which is not a multiple "
                f"of {align} B; move it to {tile.addr - tile.addr % align + align}"
            )
        if tile.addr < 0 or end > size:
            raise ValueError(
                f"rule '{buffer} capacity': {label} needs bytes [{tile.addr}, {end}) "
                f"({nbytes} B after padding to whole fractals) but {buffer} on chip "
                f"{self.chip.name} has {size} B"
            )
        for other in self.live[buffer]:
            if tile.addr < other.end and other.addr < end:
                raise ValueError(
                    f"rule 'no overlap': {label} bytes [{tile.addr}, {end}) overlap live tile "
                    f"{other} bytes [{other.addr}, {other.end}); free it first or move one of them"
                )
        return tile

    def free(self, tile: Tile) -> None:
        if tile not in self.live[tile.buffer]:
            raise ValueError(f"{tile} is not live: it was never allocated here or was freed already")
        self.live[tile.buffer].remove(tile)

    def _first_fit(self, buffer: Buffer, nbytes: int, align: int) -> int:
        addr = 0
        for other in sorted(self.live[buffer], key=lambda t: t.addr):
            if addr + nbytes <= other.addr:
                break
            addr = max(addr, -(-other.end // align) * align)
        return addr
