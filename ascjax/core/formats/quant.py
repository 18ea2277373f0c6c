"""Fixpipe quantisation modes (``QuantMode_t``): which conversions exist on which chip, and their arithmetic.

[facts §5 "Quantization"; asc-devkit ``随路量化.md``, ``随路量化与随路ReLU场景组合.md`` and the golden
scripts ``fixpipe_l0c2gm/scripts/gen_data_{s322s8,s322f16,f322s8}.py``]

* The scale (QUANT_PRE M1) is a float32 of which the hardware reads bits 13..31: sign, 8
  exponent bits and the top 10 mantissa bits, the (1, 8, 10) format. ``scale_1_8_10``
  truncates a scale the same way. A ``V``-prefixed mode takes one scale per output column
  (the per-channel vector in the fixpipe buffer), the plain mode one scale for the tensor.
* Arithmetic, element by element: int32 sources become float32 (round to nearest even);
  the value is multiplied by the scale in float32; with ReLU a negative *source* gives 0
  (the ReLU coefficient M2 = 0). b8 outputs (``QF322B8_PRE``, ``REQ8``) clip to [-256, 255],
  round half to even, add the 9-bit offset and clip to int8 / uint8; float outputs convert
  with ``ascjax.formats.saturate.cast`` (CTRL[48] saturation mode).
* Not modelled: the 2201 MCB shift (bits 32..36; the page says N = field + 1, the golden
  script shifts by the field), leaky-ReLU coefficients, and hybrid HiF8 rounding
  (``QF322HIF8_PRE_HYBRID``, not publicly defined: refused).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from .._straight_through import straight_through as _straight_through
from . import saturate as _saturate

ARCH_2201, ARCH_3510 = "2201", "3510"
BOTH = (ARCH_2201, ARCH_3510)
OFFSET_RANGE = (-256, 255)  # the 9-bit offset of b8 modes


@dataclasses.dataclass(frozen=True)
class QuantMode:
    """One ``QuantMode_t`` (its ``V`` twin takes a per-channel scale vector)."""

    name: str
    pairs: tuple  # (L0C dtype, output dtype) conversions
    scaled: bool  # multiplies by a QUANT_PRE scale
    archs: tuple  # NPU architectures that have it
    offset: bool = False  # adds the 9-bit offset (b8 outputs)
    rounding: str | None = None  # None: the output type's default (see saturate.cast)

    def chips_text(self) -> str:
        return "all chips" if self.archs == BOTH else "chip 950 (arch 3510) only"


_F32, _S32 = "float32", "int32"
MODES = {
    m.name: m
    for m in (
        QuantMode("NoQuant", ((_F32, _F32), (_S32, _S32)), False, BOTH),
        QuantMode("F322F16", ((_F32, "float16"),), False, BOTH),
        QuantMode("F322BF16", ((_F32, "bfloat16"),), False, BOTH),
        QuantMode("DEQF16", ((_S32, "float16"),), True, BOTH),
        QuantMode("QF322B8_PRE", ((_F32, "int8"), (_F32, "uint8")), True, BOTH, offset=True),
        QuantMode("REQ8", ((_S32, "int8"), (_S32, "uint8")), True, BOTH, offset=True),
        QuantMode("QF322FP8_PRE", ((_F32, "float8_e4m3fn"),), True, (ARCH_3510,)),
        QuantMode("QF322HIF8_PRE", ((_F32, "hifloat8"),), True, (ARCH_3510,), rounding="away"),
        QuantMode("QF322HIF8_PRE_HYBRID", ((_F32, "hifloat8"),), True, (ARCH_3510,), rounding="hybrid"),
        QuantMode("QS322BF16_PRE", ((_S32, "bfloat16"),), True, (ARCH_3510,)),
        QuantMode("QF322F16_PRE", ((_F32, "float16"),), True, (ARCH_3510,)),
        QuantMode("QF322BF16_PRE", ((_F32, "bfloat16"),), True, (ARCH_3510,)),
        QuantMode("QF322F32_PRE", ((_F32, _F32),), True, (ARCH_3510,)),
    )
}


def mode_names(arch: str | None = None) -> list[str]:
    """Every mode name (with the ``V`` twins), optionally only those of one architecture."""
    names = []
    for m in MODES.values():
        if arch is None or arch in m.archs:
            names.append(m.name)
            if m.scaled:
                names.append("V" + m.name)
    return names


def _infer(src: str, out: str, scaled: bool, arch: str, chip: str) -> QuantMode:
    plain = [m for m in MODES.values() if (src, out) in m.pairs and m.rounding != "hybrid"]
    if not plain:
        outs = sorted({o for m in MODES.values() if arch in m.archs for s, o in m.pairs if s == src})
        hint = ""
        if out == "float8_e5m2":
            hint = " (the fixpipe's fp8 mode QF322FP8_PRE writes float8_e4m3fn only)"
        raise ValueError(
            f"rule 'fixpipe dtypes': no quantisation mode converts L0C {src} to {out}{hint}; "
            f"on chip {chip} {src} converts to {', '.join(outs)}"
            + (" (hifloat8 as uint8 codes, with quant_mode='QF322HIF8_PRE')" if "hifloat8" in outs else "")
        )
    for m in plain:
        if m.scaled == scaled:
            return m
    m = plain[0]
    if m.scaled:
        raise ValueError(
            f"rule 'quant scale': {src} -> {out} is quantisation mode {m.name}, which multiplies by a scale: "
            "pass quant_scale= (1.0 for a plain conversion)"
        )
    raise ValueError(
        f"rule 'quant scale': {src} -> {out} with a scale has no quantisation mode on any chip "
        f"({m.name} is a plain conversion): drop quant_scale"
    )


def resolve(src: str, out: str, *, arch: str, chip: str, mode: str | None = None, scale: str | None = None):
    """The mode a fixpipe runs, checked at trace time; returns ``(QuantMode, output dtype)``.

    ``out`` is the GM tensor's dtype; a uint8 tensor holds HiF8 codes when ``mode`` is a HiF8 mode.
    ``scale`` is None, ``"tensor"`` (one scale) or ``"channel"`` (one per output column).
    """
    vector = False
    if mode is not None:
        name = str(mode).upper()
        if name not in MODES and name.startswith("V") and name[1:] in MODES and MODES[name[1:]].scaled:
            name, vector = name[1:], True
        if name not in MODES:
            raise ValueError(f"unknown quantisation mode {mode!r}: expected one of {mode_names()}")
        q = MODES[name]
        if out == "uint8" and any(o == "hifloat8" for _, o in q.pairs):
            out = "hifloat8"  # HiF8 is held as uint8 codes
        if (src, out) not in q.pairs:
            converts = ", ".join(f"{s} -> {o}" for s, o in q.pairs)
            raise ValueError(
                f"rule 'fixpipe dtypes': quantisation mode {mode} converts {converts}, not L0C {src} -> GM {out}"
            )
    else:
        q = _infer(src, out, scale is not None, arch, chip)
        vector = scale == "channel"
    label = ("V" if vector else "") + q.name
    if arch not in q.archs:
        raise ValueError(
            f"rule 'quantisation mode': {label} ({src} -> {out}) exists on {q.chips_text()}, not on chip {chip} "
            f"(arch {arch}); this chip has {', '.join(mode_names(arch))}"
        )
    if q.rounding == "hybrid":
        raise NotImplementedError(
            f"{label}: HiFloat8 hybrid rounding is not defined in public Ascend material, so ascjax cannot "
            "emulate it bit-exactly; use QF322HIF8_PRE (ties away from zero)"
        )
    if q.scaled and scale is None:
        raise ValueError(f"rule 'quant scale': {label} multiplies by a scale: pass quant_scale= (1.0 for none)")
    if not q.scaled and scale is not None:
        raise ValueError(f"rule 'quant scale': {label} is a plain conversion without a scale: drop quant_scale")
    if q.scaled and vector != (scale == "channel"):
        want = "a per-channel vector (one scale per output column)" if vector else "one scale for the tensor"
        raise ValueError(f"rule 'quant scale': {label} takes {want}, got a {scale} scale")
    return q, out


def scale_1_8_10(scale) -> jax.Array:
    """A float32 scale as the hardware reads it: bits 13..31, i.e. the mantissa truncated to 10 bits."""
    bits = jax.lax.bitcast_convert_type(jnp.asarray(scale, jnp.float32), jnp.uint32)
    return jax.lax.bitcast_convert_type(bits & jnp.uint32(0xFFFFE000), jnp.float32)


def apply(
    x, q: QuantMode, out: str, *, scale=None, offset: int = 0, relu=False, saturate=True, straight_through=False
) -> jax.Array:
    """Convert L0C values ``x`` (rows x cols) with mode ``q`` to ``out`` storage (HiF8: uint8 codes).

    ``scale`` is a scalar or a vector over the last axis (per channel); ``relu`` and ``saturate``
    (CTRL[48] == 0) may be traced. ``straight_through`` (static) differentiates the rounding and
    saturation as the identity; the scale and ReLU keep their derivatives.
    """
    x = jnp.asarray(x)
    relu = jnp.asarray(relu)
    if q.name == "NoQuant":
        v = jnp.where(relu & (x < 0), jnp.zeros((), x.dtype), x)
        if out == _S32:
            return v
    else:
        xf = x.astype(jnp.float32)
        v = xf * scale_1_8_10(scale) if q.scaled else xf
        v = jnp.where(relu & (xf < 0), 0.0, v)  # ReLU coefficient M2 = 0 for negative sources

    def convert(v):
        if q.offset:
            lo, hi = OFFSET_RANGE
            v = jnp.round(jnp.clip(v, lo, hi)) + offset
        return _saturate.cast(v, out, saturate=saturate, rounding=q.rounding)

    return _straight_through(v, convert) if straight_through else convert(v)
