"""Compare two tensor files (device ``.bin`` bytes or ``.npy``) element by element, in float64.

An element is outside tolerance when ``|actual - expected| > atol + rtol * |expected|``; equal
values (infinities included) always match, NaN matches only NaN at the same place.

Default tolerances per dtype (``TOLERANCES``), used when ``rtol`` / ``atol`` is not given (each
falls back on its own):

================  ======  ======  =====================================================
dtype             rtol    atol    why
================  ======  ======  =====================================================
float32           1e-5    1e-6    accumulation order (about 80 ulp), not one rounding
float16           1e-3    1e-3    2^-10: one ulp of 10 mantissa bits
bfloat16          8e-3    8e-3    2^-7: one ulp of 7 mantissa bits
float8_e4m3fn     0.125   0.125   2^-3: 3 mantissa bits
float8_e5m2       0.25    0.25    2^-2: 2 mantissa bits
hifloat8          0.25    0.25    2^-2: tapered, 3 mantissa bits near 1, 2 up to 2^±7, 1 beyond
float4_e2m1fn     0.5     0.5     2^-1: 1 mantissa bit
float4_e1m2       0.25    0.25    2^-2: 2 mantissa bits
float8_e8m0fnu    0       0       a scale exponent: any difference is a factor of two
int8, int32,      0       0       integers are exact
uint8, int4
================  ======  ======  =====================================================
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np

from ..core import _dtypes as dtypes
from ..core.formats.device_bytes import from_device_bytes
from . import _manifest as golden_manifest

#: dtype -> (rtol, atol), see the module docstring for the reasons.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float32": (1e-5, 1e-6),
    "float16": (1e-3, 1e-3),
    "bfloat16": (8e-3, 8e-3),
    "float8_e4m3fn": (0.125, 0.125),
    "float8_e5m2": (0.25, 0.25),
    "hifloat8": (0.25, 0.25),
    "float4_e2m1fn": (0.5, 0.5),
    "float4_e1m2": (0.25, 0.25),
    "float8_e8m0fnu": (0.0, 0.0),
    "int8": (0.0, 0.0),
    "int32": (0.0, 0.0),
    "uint8": (0.0, 0.0),
    "int4": (0.0, 0.0),
}
#: how many mismatching elements a result lists
SHOWN = 5


def default_tolerance(dtype) -> tuple[float, float]:
    """(rtol, atol) a comparison of ``dtype`` uses unless told otherwise."""
    return TOLERANCES[dtypes.dtype_name(dtype)]


@dataclasses.dataclass
class CompareResult:
    """What a comparison found: worst errors, how many elements miss the tolerance, and the first few."""

    dtype: str
    rtol: float
    atol: float
    size: int
    shape: tuple | None  # None when only flat .bin files were given
    max_abs: float  # over elements where neither side is NaN
    max_rel: float  # relative to |expected|, over elements whose expected value is not 0
    mismatches: int
    first: list  # up to SHOWN (index, expected, actual); index is a tuple when the shape is known
    nan_actual: int = 0  # NaN / inf elements of each side
    inf_actual: int = 0
    nan_expected: int = 0
    inf_expected: int = 0
    source: str | None = None  # where the dtype and shape came from (a manifest), when not from the caller

    @property
    def passed(self) -> bool:
        return self.mismatches == 0

    @property
    def share(self) -> float:
        """Fraction of the elements outside tolerance."""
        return self.mismatches / self.size if self.size else 0.0

    def __str__(self) -> str:
        line = (
            f"max abs {self.max_abs:.1e}  max rel {self.max_rel:.1e}  "
            f"outside tol {self.mismatches} / {self.size}  {'PASS' if self.passed else 'FAIL'}"
        )
        head = [f"as {self.dtype}{'' if self.shape is None else ' ' + 'x'.join(map(str, self.shape))}, {self.source}"]
        head = head if self.source else []
        specials = (self.nan_actual, self.inf_actual, self.nan_expected, self.inf_expected)
        if any(specials):
            head.append(
                f"actual holds {self.nan_actual} NaN and {self.inf_actual} inf; expected holds {self.nan_expected} NaN "
                f"and {self.inf_expected} inf"
            )
        if self.passed:
            return "\n".join([*head, line])
        lines = [
            *head,
            line,
            f"  {self.share:.2%} of the elements miss |actual - expected| <= atol {self.atol:g} + rtol {self.rtol:g}"
            f" * |expected| ({self.dtype})",
        ]
        lines += [f"  at {_index_text(i)}: expected {e:.6g}, actual {a:.6g}" for i, e, a in self.first]
        if self.mismatches > len(self.first):
            lines.append(f"  ... and {self.mismatches - len(self.first)} more")
        return "\n".join(lines)


def _index_text(index) -> str:
    return f"[{', '.join(str(i) for i in index)}]" if isinstance(index, tuple) else f"flat {index}"


def load(path, dtype, shape=None) -> tuple[np.ndarray, bool]:
    """Read a tensor file as elements of ``dtype``'s storage type; returns (array, shape_known).

    ``.bin``: device bytes (``from_device_bytes``), flat unless ``shape`` is given. ``.npy``: its own
    shape; ml_dtypes arrays come back from ``np.load`` as raw ``V1``/``V2`` and are viewed as ``dtype``.
    An ``.npy`` of another plain NumPy type (a float64 host reference) is kept as its values.
    """
    path = os.fspath(path)
    name = dtypes.dtype_name(dtype)
    storage = dtypes.to_numpy_dtype(name)
    if path.endswith(".npy"):
        a = np.load(path, allow_pickle=False)
        if shape is not None and tuple(shape) != a.shape:
            raise ValueError(f"{path} holds shape {a.shape}, not the --shape {tuple(shape)} given: drop --shape")
        if a.dtype.kind == "V":
            if a.dtype.itemsize != storage.itemsize:
                raise ValueError(
                    f"{path} holds raw {a.dtype.itemsize}-byte elements, but {name} is held in "
                    f"{storage.itemsize} byte(s): give the dtype the file was written with"
                )
            a = a.view(storage)
        elif a.dtype != storage and not np.issubdtype(a.dtype, np.number):
            raise ValueError(f"{path} holds {a.dtype}, which has no numeric value to compare as {name}")
        return a, True
    if path.endswith(".bin"):
        with open(path, "rb") as f:
            data = f.read()
        if shape is None:
            count = len(data) * 8 // dtypes.bits(name)
            return from_device_bytes(data, name, (count,)), False
        try:
            return from_device_bytes(data, name, shape), True
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None
    raise ValueError(f"cannot read {path}: expected a .bin (device bytes) or .npy file")


def _values(a: np.ndarray, name: str) -> np.ndarray:
    """Element values in float64 (codes of hifloat8 / float4_e1m2 decoded)."""
    if a.dtype == dtypes.to_numpy_dtype(name) and name in dtypes.CODE_FORMATS:
        from ..core.formats.values import decode

        return np.asarray(decode(a, name), np.float64)
    return a.astype(np.float64)


def compare_arrays(expected, actual, dtype, *, rtol=None, atol=None, shape=None) -> CompareResult:
    """Compare two arrays of values (see ``compare_files``); ``shape`` unravels the mismatch indices."""
    name = dtypes.dtype_name(dtype)
    default_rtol, default_atol = TOLERANCES[name]
    rtol = default_rtol if rtol is None else float(rtol)
    atol = default_atol if atol is None else float(atol)
    for what, tol in (("rtol", rtol), ("atol", atol)):
        if not tol >= 0:
            raise ValueError(f"{what} bounds |actual - expected|, so it is at least 0: got {tol:g}")
    e = _values(np.asarray(expected), name).reshape(-1)
    a = _values(np.asarray(actual), name).reshape(-1)
    if e.size != a.size:
        raise ValueError(f"expected has {e.size} elements, actual has {a.size}: compare tensors of one size")
    nan = np.isnan(e) | np.isnan(a)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.where(a == e, 0.0, np.abs(a - e))
        close = (a == e) | (diff <= atol + rtol * np.abs(e))
        bad = ~close & ~(np.isnan(e) & np.isnan(a))
        rel = np.where(e != 0, diff / np.abs(np.where(e != 0, e, 1.0)), 0.0)
    counted = ~nan
    max_abs = float(diff[counted].max()) if counted.any() else 0.0
    max_rel = float(rel[counted].max()) if counted.any() else 0.0
    if np.any(np.isnan(e) != np.isnan(a)):  # a NaN on one side only: the worst error is not a number
        max_abs = max_rel = float("nan")
    where = np.flatnonzero(bad)
    first = []
    for i in where[:SHOWN]:
        index = tuple(int(x) for x in np.unravel_index(i, shape)) if shape is not None else int(i)
        first.append((index, float(e[i]), float(a[i])))
    return CompareResult(
        dtype=name,
        rtol=rtol,
        atol=atol,
        size=int(e.size),
        shape=None if shape is None else tuple(shape),
        max_abs=max_abs,
        max_rel=max_rel,
        mismatches=int(where.size),
        first=first,
        nan_actual=int(np.isnan(a).sum()),
        inf_actual=int(np.isinf(a).sum()),
        nan_expected=int(np.isnan(e).sum()),
        inf_expected=int(np.isinf(e).sum()),
    )


def _describe(path, array: np.ndarray, dtype) -> str:
    path = os.fspath(path)
    if path.endswith(".bin"):
        return f"{path} holds {array.size} elements ({os.path.getsize(path)} bytes of {dtypes.dtype_name(dtype)})"
    return f"{path} holds {array.size} elements (shape {array.shape})"


def compare_files(expected, actual, dtype=None, *, rtol=None, atol=None, shape=None, manifest=None) -> CompareResult:
    """Compare tensor file ``actual`` against ``expected``, both holding elements of ``dtype``.

    Each is a ``.bin`` (raw little-endian device bytes, as ``write_golden`` writes) or an ``.npy``.
    ``rtol`` / ``atol`` default to ``TOLERANCES[dtype]``; ``shape`` (for ``.bin`` files) turns the
    reported indices into coordinates (an ``.npy`` brings its own shape).

    A golden manifest (``manifest``, else a ``manifest.json`` beside either file) that names the
    tensor gives its dtype, shape and layout; a ``dtype`` or ``shape`` that contradicts it is refused.
    """
    shape = None if shape is None else tuple(int(s) for s in shape)
    dtype, shape, source = _from_manifest((expected, actual), dtype, shape, manifest)
    (e, e_known), (a, a_known) = load(expected, dtype, shape), load(actual, dtype, shape)
    if e.size != a.size:
        raise ValueError(
            f"{_describe(expected, e, dtype)} but {_describe(actual, a, dtype)}: "
            f"compare files of one tensor (same element count)"
        )
    if e_known and a_known and e.shape != a.shape:
        raise ValueError(
            f"{os.fspath(expected)} has shape {e.shape} and {os.fspath(actual)} has {a.shape}: compare files of one tensor"
        )
    known = e.shape if e_known else (a.shape if a_known else None)
    out = compare_arrays(e, a, dtype, rtol=rtol, atol=atol, shape=known)
    out.source = source
    return out


def _from_manifest(paths, dtype, shape, manifest):
    """(dtype, shape, source): the caller's, checked against the golden manifest's entry when there is one."""
    found = golden_manifest.find(paths, manifest)
    tensor = golden_manifest.entry(found, paths) if found else None
    if tensor is None:
        if manifest is not None:
            names = " or ".join(os.path.splitext(os.path.basename(os.fspath(p)))[0] for p in paths)
            raise ValueError(f"{found} has no tensor named {names}: give the manifest of these files")
        if dtype is None:
            raise ValueError(
                f"no {golden_manifest.MANIFEST} beside {os.fspath(paths[0])} names this tensor, so its dtype is "
                "unknown: give --dtype (or --manifest)"
            )
        return dtype, shape, None
    name, m_dtype, m_shape = tensor["name"], tensor["dtype"], tuple(int(s) for s in tensor["shape"])
    layout = tensor.get("layout", "ND")
    if dtype is not None and dtypes.dtype_name(dtype) != m_dtype:
        raise ValueError(
            f"--dtype {dtype} contradicts {found}, which records {name} as {m_dtype}: drop --dtype (or fix the manifest)"
        )
    if shape is not None and shape != m_shape:
        given, recorded = ",".join(map(str, shape)), ",".join(map(str, m_shape))
        raise ValueError(f"--shape {given} contradicts {found}, which records {name} as shape {recorded}: drop --shape")
    if layout != "ND":
        raise ValueError(f"{found} records {name} in layout {layout}: compare reads ND tensors only")
    return m_dtype, m_shape, f"{name} ({layout}) from {found}"
