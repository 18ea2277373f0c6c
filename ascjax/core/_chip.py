"""Chip table: buffer sizes, alignments, fractal formats and mmad dtype combinations.

Every number cites ``shared/spec/ascend-facts.md`` (section in brackets). A chip is a
frozen, hashable dataclass so it can sit as static metadata in a jitted program.
"""

from __future__ import annotations

import dataclasses
from types import MappingProxyType

from ._buffers import ARCH_2201, ARCH_3510, alignments, capacities
from ._kinds import Buffer, Format

# (a_dtype, b_dtype) -> c_dtype; bias dtype equals c_dtype [facts §5 "Mmad dtypes", seed 004].
_COMMON_MMAD = {
    ("int8", "int8"): "int32",
    ("float16", "float16"): "float32",
    ("bfloat16", "bfloat16"): "float32",
    ("float32", "float32"): "float32",
}
_ARCH_2201_EXTRA = {("int4", "int4"): "int32"}
_ARCH_3510_EXTRA = {
    ("hifloat8", "hifloat8"): "float32",
    ("float8_e5m2", "float8_e5m2"): "float32",
    ("float8_e5m2", "float8_e4m3fn"): "float32",
    ("float8_e4m3fn", "float8_e5m2"): "float32",
    ("float8_e4m3fn", "float8_e4m3fn"): "float32",
}
# MmadMx (950): MXFP8 and MXFP4 pairs within a family, E8M0 scales, -> float32 [facts §5, asc-devkit MmadMx.md]
_MX_FAMILIES = (("float8_e4m3fn", "float8_e5m2"), ("float4_e2m1fn", "float4_e1m2"))
_ARCH_3510_MX = {(a, b): "float32" for family in _MX_FAMILIES for a in family for b in family}


@dataclasses.dataclass(frozen=True)
class Chip:
    """Static description of one Ascend AI Core generation."""

    name: str
    arch: str
    buffer_bytes: MappingProxyType  # Buffer -> capacity in bytes
    align_bytes: MappingProxyType  # Buffer -> minimum address alignment in bytes
    a_format: Format  # fractal format mmad reads A in (L0A)
    mmad_dtypes: MappingProxyType  # (a, b) -> c
    mmad_mx_dtypes: MappingProxyType  # (a, b) -> c of MmadMx (E8M0-scaled MX operands); empty without MX
    intra_event_ids: int  # SetFlag/WaitFlag ids are 0 .. intra_event_ids-1
    cross_event_ids: int  # set/wait_cross_core ids are 0 .. cross_event_ids-1
    unit_flag_block_bytes: int  # one unit-flag bit per block of L0C
    gemv_can_be_disabled: bool  # 3510 has `disable_gemv`; 2201 always runs GEMV when m == 1
    max_mmad_dim: int  # m, k, n upper bound (inclusive)
    clock_mhz: float  # AI Core clock, to turn cycles into time in traces
    cross_core_max_count: int  # signals one cross-core id may hold: 1 = bit semantics, 15 = the API's counter
    cross_core_wait_blocks_core: bool  # A2/A3: a cross-core wait stops every pipe of its core; 950: the named one
    unicast_block: bool  # UNICAST_BLOCK (Ascend C mode 4, AIC <-> one AIV) exists (950 only)
    ai_cores: int  # AI Cores (1 AIC + 2 AIV each) a launch spreads its blocks over (ascjax.launch timing)

    def _key(self) -> tuple:
        key = self.__dict__.get("_key_cache")
        if key is None:  # computed once: a chip is a static argument of every compiled program, hashed at each call
            key = tuple(
                tuple(sorted(v.items(), key=repr)) if isinstance(v, MappingProxyType) else v
                for v in (getattr(self, f.name) for f in dataclasses.fields(self))
            )
            object.__setattr__(self, "_key_cache", key)
        return key

    def __hash__(self) -> int:  # MappingProxyType is unhashable: hash the contents
        return hash(self._key())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Chip) and self._key() == other._key()

    @property
    def l0c_blocks(self) -> int:
        return self.buffer_bytes[Buffer.L0C] // self.unit_flag_block_bytes

    def replace(self, **changes) -> Chip:
        """A copy with some fields changed, e.g. ``chip.replace(intra_event_ids=16)``."""
        return dataclasses.replace(self, **changes)


def _proxy(d):
    return MappingProxyType(dict(d))


# Buffer sizes and alignments are the rows of ``core.BUFFERS`` (each cites its source).
_SIZES_2201 = capacities(ARCH_2201)
_SIZES_3510 = capacities(ARCH_3510)
_ALIGN = alignments()


def _chip(name: str, arch: str, sizes, a_format: Format, extra, ai_cores: int) -> Chip:
    return Chip(
        name=name,
        arch=arch,
        buffer_bytes=_proxy(sizes),
        align_bytes=_proxy(_ALIGN),
        a_format=a_format,
        mmad_dtypes=_proxy({**_COMMON_MMAD, **extra}),
        mmad_mx_dtypes=_proxy(_ARCH_3510_MX if arch == "3510" else {}),
        # SetFlag/WaitFlag ids 0-7 on 950/A2/A3 [facts §2]; PyPTO-Pro documents 0-15 (CONFLICT):
        # the Ascend C limit is the default, `chip.replace(intra_event_ids=16)` lifts it.
        intra_event_ids=8,
        cross_event_ids=16,  # [facts §3]
        unit_flag_block_bytes=512,  # [facts §1 "Granularity"]
        gemv_can_be_disabled=(arch == "3510"),
        max_mmad_dim=4095,  # m, k, n in [0, 4095] [seed 004]
        clock_mhz=1650.0 if arch == "3510" else 1850.0,  # cube_freq of the platform ini files [facts §7]
        # [facts §3 CONFLICT "counter or binary?"]: the API pages describe a 0-15 counter, Huawei's engram kernel
        # and tilelang-ascend PR #1809 treat the ids as bits whose second set is lost. The strict default reports
        # a set while the id still holds a signal; `chip.replace(cross_core_max_count=15)` models the counter.
        cross_core_max_count=1,
        cross_core_wait_blocks_core=(arch == "2201"),  # [facts §3 "Wait"]
        unicast_block=(arch == "3510"),  # [facts §3 "Modes": mode 4 is 950 only]
        ai_cores=ai_cores,
    )


CHIPS: MappingProxyType = _proxy(
    {
        # AI Core counts from the platform ini files [facts §7 "Cores and clocks"]: A2 910B1 24, A3 910C4 24,
        # 950PR_9579 / 950DT_9572 28 (950PR_9589 / 950DT_9581: 32). SKUs with fewer cores (not in those files,
        # e.g. a 20-core 910B): `chip.replace(ai_cores=20)`.
        "a2": _chip("a2", "2201", _SIZES_2201, Format.ZZ, _ARCH_2201_EXTRA, ai_cores=24),
        "a3": _chip("a3", "2201", _SIZES_2201, Format.ZZ, _ARCH_2201_EXTRA, ai_cores=24),
        "950": _chip("950", "3510", _SIZES_3510, Format.NZ, _ARCH_3510_EXTRA, ai_cores=28),
    }
)


def get_chip(chip: str | Chip) -> Chip:
    """Look a chip up by name (``a2``, ``a3``, ``950``) or pass a ``Chip`` through."""
    if isinstance(chip, Chip):
        return chip
    try:
        return CHIPS[str(chip).lower()]
    except KeyError:
        raise ValueError(
            f"unknown chip {chip!r}: choose one of {sorted(CHIPS)} "
            "(a2/a3 = Atlas A2/A3, arch 2201; 950 = Ascend 950PR/DT, arch 3510)"
        ) from None
