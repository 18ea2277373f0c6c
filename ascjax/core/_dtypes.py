"""Element types: canonical names, NumPy/ml_dtypes objects and fractal widths."""

from __future__ import annotations

import ml_dtypes
import numpy as np

# canonical name -> the NumPy dtype arrays hold it in. Formats NumPy lacks are held as their bit
# patterns in uint8 (CODE_FORMATS); 4-bit types take one byte per element in arrays (packed two per
# byte only in device bytes, see ascjax.formats.device_bytes).
_DTYPES: dict[str, np.dtype] = {
    "float32": np.dtype(np.float32),
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "int8": np.dtype(np.int8),
    "int16": np.dtype(np.int16),
    "int32": np.dtype(np.int32),
    "uint8": np.dtype(np.uint8),
    "uint16": np.dtype(np.uint16),
    "uint32": np.dtype(np.uint32),
    "float8_e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn),
    "float8_e5m2": np.dtype(ml_dtypes.float8_e5m2),
    "int4": np.dtype(ml_dtypes.int4),
    "hifloat8": np.dtype(np.uint8),
    "float8_e8m0fnu": np.dtype(ml_dtypes.float8_e8m0fnu),
    "float4_e2m1fn": np.dtype(ml_dtypes.float4_e2m1fn),
    "float4_e1m2": np.dtype(np.uint8),
}
#: formats without an ml_dtypes type, held as uint8 codes (HiFloat8; fp4 e1m2 in the low nibble)
CODE_FORMATS = frozenset({"hifloat8", "float4_e1m2"})
_ALIASES = {
    "f32": "float32",
    "float": "float32",
    "fp32": "float32",
    "f16": "float16",
    "half": "float16",
    "fp16": "float16",
    "bf16": "bfloat16",
    "bfloat16_t": "bfloat16",
    "s8": "int8",
    "int8_t": "int8",
    "s32": "int32",
    "int32_t": "int32",
    "u8": "uint8",
    "s16": "int16",
    "int16_t": "int16",
    "u16": "uint16",
    "uint16_t": "uint16",
    "u32": "uint32",
    "uint32_t": "uint32",
    "int4b_t": "int4",
    "s4": "int4",
    "hif8": "hifloat8",
    "hifloat8_t": "hifloat8",
    "fp8_e4m3fn": "float8_e4m3fn",
    "fp8_e4m3fn_t": "float8_e4m3fn",
    "e4m3": "float8_e4m3fn",
    "fp8_e5m2": "float8_e5m2",
    "fp8_e5m2_t": "float8_e5m2",
    "e5m2": "float8_e5m2",
    "float8_e8m0": "float8_e8m0fnu",
    "fp8_e8m0": "float8_e8m0fnu",
    "fp8_e8m0_t": "float8_e8m0fnu",
    "e8m0": "float8_e8m0fnu",
    "float4_e2m1": "float4_e2m1fn",
    "fp4_e2m1": "float4_e2m1fn",
    "fp4x2_e2m1_t": "float4_e2m1fn",
    "e2m1": "float4_e2m1fn",
    "fp4_e1m2": "float4_e1m2",
    "fp4x2_e1m2_t": "float4_e1m2",
    "e1m2": "float4_e1m2",
}
_BITS = {"int4": 4, "float4_e2m1fn": 4, "float4_e1m2": 4}


def dtype_name(dtype) -> str:
    """Canonical name of a dtype given as a string, NumPy/JAX dtype or scalar type."""
    if isinstance(dtype, str):
        name = _ALIASES.get(dtype.lower(), dtype.lower())
        if name in _DTYPES:
            return name
        raise ValueError(f"unknown dtype {dtype!r}: expected one of {sorted(_DTYPES)}")
    name = np.dtype(dtype).name
    if name in _DTYPES:
        return name
    raise ValueError(f"dtype {name} has no Ascend equivalent: expected one of {sorted(_DTYPES)}")


def to_numpy_dtype(dtype) -> np.dtype:
    """NumPy dtype arrays of an element type are held in (uint8 for the CODE_FORMATS)."""
    return _DTYPES[dtype_name(dtype)]


def bits(dtype) -> int:
    name = dtype_name(dtype)
    return _BITS.get(name) or _DTYPES[name].itemsize * 8


def k0(dtype) -> int:
    """Fractal width of an input fractal: 32 bytes / sizeof(dtype) (int4: 64)."""
    return 256 // bits(dtype)


def is_float(dtype) -> bool:
    name = dtype_name(dtype)
    return name not in ("int8", "int16", "int32", "uint8", "uint16", "uint32", "int4")
