"""One row per buffer: its capacity per arch, alignment, granule, formats, and the pipes that touch it.

Every fact cites ``shared/spec/ascend-facts.md`` (section in brackets). The chip table, the
allocator, the race tracking and the instruction registry all read these rows, so a buffer's
facts live in one place.
"""

from __future__ import annotations

import dataclasses
from types import MappingProxyType

from ._kinds import Buffer, Format, Pipe

KIB = 1024
#: Race tracking and unit flags work in 512 B units of an on-chip buffer [facts §1 "Granularity"].
CHIP_GRANULE_BYTES = 512
ARCH_2201, ARCH_3510 = "2201", "3510"


@dataclasses.dataclass(frozen=True)
class BufferRow:
    """The facts of one buffer.

    ``capacity_bytes`` maps an arch to the buffer's size (absent: the arch has no such buffer);
    ``formats`` are the fractal formats a tile in it may have, the default first (empty: the
    chip decides, as for L0A); ``writers`` / ``readers`` are the pipes whose instructions write
    and read it.
    """

    buffer: Buffer
    capacity_bytes: MappingProxyType
    align_bytes: int
    granule_bytes: int | None  # None: GM, whose granule is a run option
    formats: tuple[Format, ...]
    writers: tuple[Pipe, ...]
    readers: tuple[Pipe, ...]


def _row(buffer, sizes, align, formats, writers, readers, granule=CHIP_GRANULE_BYTES) -> BufferRow:
    return BufferRow(buffer, MappingProxyType(dict(sizes)), align, granule, formats, writers, readers)


BUFFERS: MappingProxyType = MappingProxyType(
    {
        row.buffer: row
        for row in (
            # GM: MTE2 loads, FIX and MTE3 store [facts §2 pipes]; alignment per DMA, granule an option. FIX also
            # reads it because ascjax takes fixpipe's quantisation scale as a GM tensor.
            _row(
                Buffer.GM, {}, 1, (Format.ND,), (Pipe.FIX, Pipe.MTE3, Pipe.S), (Pipe.MTE2, Pipe.FIX, Pipe.S),
                None,
            ),
            # L1 512 KB on both arches, 32 B aligned [facts §5 "Sizes", "Alignment"]; written by MTE2 (GM -> L1)
            # and MTE3 (UB -> L1, insert), read by MTE1.
            _row(
                Buffer.L1, {ARCH_2201: 512 * KIB, ARCH_3510: 512 * KIB}, 32, (Format.NZ, Format.ND),
                (Pipe.MTE2, Pipe.MTE3), (Pipe.MTE1,),
            ),
            # L0A / L0B 64 KB, 512 B aligned for mmad [seed 004]; L0A's format is the chip's A format.
            _row(Buffer.L0A, {ARCH_2201: 64 * KIB, ARCH_3510: 64 * KIB}, 512, (), (Pipe.MTE1,), (Pipe.M,)),
            _row(
                Buffer.L0B, {ARCH_2201: 64 * KIB, ARCH_3510: 64 * KIB}, 512, (Format.ZN,), (Pipe.MTE1,),
                (Pipe.M,),
            ),
            # L0C 128 KB (2201) / 256 KB (3510), 1024 B aligned [seed 004]; M writes (and reads when it
            # accumulates), FIX reads.
            _row(
                Buffer.L0C, {ARCH_2201: 128 * KIB, ARCH_3510: 256 * KIB}, 1024, (Format.NZ,), (Pipe.M,),
                (Pipe.M, Pipe.FIX),
            ),
            # BiasTable 1 KB (2201) / 4 KB (3510), 64 B aligned [seed 004].
            _row(Buffer.BT, {ARCH_2201: 1 * KIB, ARCH_3510: 4 * KIB}, 64, (Format.ND,), (Pipe.MTE1,), (Pipe.M,)),
            # UB 192 KB (2201) / 256 KB (3510), 32 B aligned [facts §5]; per AIV. MTE2 loads, FIX delivers
            # L0C -> UB, V computes, MTE3 stores.
            _row(
                Buffer.UB, {ARCH_2201: 192 * KIB, ARCH_3510: 256 * KIB}, 32, (Format.ND, Format.NZ),
                (Pipe.MTE2, Pipe.FIX, Pipe.V, Pipe.S), (Pipe.V, Pipe.MTE3, Pipe.S),
            ),
            # MX scale domains beside L0A / L0B (950 only): 64 KB >> 4 each, 32 B aligned [facts §4 "Spaces", §5].
            _row(Buffer.SCALE_LEFT, {ARCH_3510: 4 * KIB}, 32, (Format.ZZ,), (Pipe.MTE1,), (Pipe.M,)),
            _row(Buffer.SCALE_RIGHT, {ARCH_3510: 4 * KIB}, 32, (Format.NN,), (Pipe.MTE1,), (Pipe.M,)),
        )
    }
)  # fmt: skip


def capacities(arch: str) -> dict:
    """Buffer -> bytes of every on-chip buffer ``arch`` has."""
    return {b: row.capacity_bytes[arch] for b, row in BUFFERS.items() if arch in row.capacity_bytes}


def alignments() -> dict:
    """Buffer -> minimum address alignment in bytes of every on-chip buffer."""
    return {b: row.align_bytes for b, row in BUFFERS.items() if b is not Buffer.GM}
