"""Raw device bytes of a tensor, little-endian, as a kernel reads or writes them in GM.

4-bit types (int4, fp4 e2m1 / e1m2) pack two elements per byte, the first element in the low
nibble [PyPTO-Pro ``matmul_mx.md``]; every other type is its elements' bytes in order. Formats
held as uint8 bit patterns (hifloat8, float4_e1m2) are written as those codes.
"""

from __future__ import annotations

import numpy as np

from .. import _dtypes as dtypes


def _uint(itemsize: int, order: str = "=") -> np.dtype:
    return np.dtype(f"{order}u{itemsize}")


def to_device_bytes(array, dtype) -> bytes:
    """The bytes of ``array`` (elements in ``dtype``'s storage type) in device order."""
    name = dtypes.dtype_name(dtype)
    storage = dtypes.to_numpy_dtype(name)
    a = np.ascontiguousarray(np.asarray(array))
    if a.dtype != storage:
        raise ValueError(
            f"to_device_bytes({name}) needs elements stored as {storage}, got {a.dtype}: convert first "
            f"(ascjax.formats.cast for float outputs, .astype for ml_dtypes types)"
        )
    if dtypes.bits(name) == 4:
        codes = a.reshape(-1).view(np.uint8)
        if name in dtypes.CODE_FORMATS and np.any(codes > 0xF):
            raise ValueError(f"{name} codes are 0..15, got {int(codes.max())}")
        if codes.size % 2:
            raise ValueError(f"{name} packs two elements per byte: give an even number of elements, got {codes.size}")
        codes = codes & 0xF
        return (codes[0::2] | (codes[1::2] << 4)).astype(np.uint8).tobytes()
    return a.view(_uint(a.itemsize)).astype(_uint(a.itemsize, "<")).tobytes()


def from_device_bytes(data: bytes, dtype, shape) -> np.ndarray:
    """Inverse of ``to_device_bytes``: an array of ``shape`` in ``dtype``'s storage type."""
    name = dtypes.dtype_name(dtype)
    storage = dtypes.to_numpy_dtype(name)
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    count = int(np.prod(shape, dtype=np.int64))
    raw = np.frombuffer(bytes(data), np.uint8)
    if dtypes.bits(name) == 4:
        if count % 2 or raw.size != count // 2:
            raise ValueError(
                f"{name} of shape {shape} packs into {count / 2:g} bytes (an even element count), got {raw.size}"
            )
        codes = np.empty(count, np.uint8)
        codes[0::2], codes[1::2] = raw & 0xF, raw >> 4
        return codes.view(storage).reshape(shape)
    if raw.size != count * storage.itemsize:
        raise ValueError(f"{name} of shape {shape} is {count * storage.itemsize} bytes, got {raw.size}")
    words = np.frombuffer(bytes(data), _uint(storage.itemsize, "<")).astype(_uint(storage.itemsize))
    return words.view(storage).reshape(shape)
