"""Compare two tensor files (device ``.bin`` bytes or ``.npy``) element by element, in float64.

An element is outside tolerance when ``|actual - expected| > atol + rtol * |expected|``; equal
values (infinities included) always match, NaN matches only NaN at the same place. The result
lists the largest mismatches first (a NaN on one side is the worst), each with its error in ulps
of the dtype at the expected value. A file of a golden set is compared only when the set's files
match its manifest's sha256 sums.

Each of ``rtol`` / ``atol`` is, in this order: the caller's; the case's tolerance a golden
manifest naming the tensor records (``tolerance.rtol`` / ``tolerance.atol``); the dtype's default
(``TOLERANCES``):

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
import functools
import math
import os
from typing import NamedTuple

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
#: how many mismatching elements a result lists (the largest errors)
SHOWN = 5
#: where a tolerance came from: the caller, the golden manifest's case tolerance, ``TOLERANCES``
GIVEN, FROM_MANIFEST, DTYPE_DEFAULT = "given", "manifest", "dtype default"
#: float formats whose ulp is ``np.spacing`` of NumPy's own type; narrower ones use a table of their codes
_SPACING_FORMATS = frozenset({"float32"})


def default_tolerance(dtype) -> tuple[float, float]:
    """(rtol, atol) a comparison of ``dtype`` uses when neither the caller nor a manifest gives one."""
    name = dtypes.dtype_name(dtype)
    if name not in TOLERANCES:
        raise ValueError(
            f"compare has no default tolerance for {name} (it has {sorted(TOLERANCES)}): give rtol and atol"
        )
    return TOLERANCES[name]


class Mismatch(NamedTuple):
    """One element outside tolerance: where, both values, |actual - expected| and that in ulps at expected."""

    index: int | tuple  # a tuple of coordinates when the shape is known, else the flat index
    expected: float
    actual: float
    abs_err: float  # nan when one side is NaN
    ulps: float  # abs_err / ulp(expected) in the dtype (1 for integers)


@dataclasses.dataclass
class CompareResult:
    """What a comparison found: worst errors, how many elements miss the tolerance, and the largest few."""

    dtype: str
    rtol: float
    atol: float
    size: int
    shape: tuple | None  # None when only flat .bin files were given
    max_abs: float  # over elements where neither side is NaN
    max_rel: float  # relative to |expected|, over elements whose expected value is not 0
    max_ulps: float  # |actual - expected| in ulps of the dtype at expected, over elements where neither is NaN
    mismatches: int
    worst: list  # up to SHOWN Mismatch: NaN on one side first, then by abs_err, largest first
    nan_actual: int = 0  # NaN / inf elements of each side
    inf_actual: int = 0
    nan_expected: int = 0
    inf_expected: int = 0
    source: str | None = None  # where the dtype and shape came from (a manifest), when not from the caller
    rtol_source: str = DTYPE_DEFAULT  # GIVEN, FROM_MANIFEST or DTYPE_DEFAULT
    atol_source: str = DTYPE_DEFAULT
    manifest: str | None = None  # the manifest that named the tensor

    @property
    def passed(self) -> bool:
        return self.mismatches == 0

    @property
    def share(self) -> float:
        """Fraction of the elements outside tolerance."""
        return self.mismatches / self.size if self.size else 0.0

    def _said(self, source: str) -> str:
        return {GIVEN: "given", DTYPE_DEFAULT: f"({self.dtype} default)"}.get(source, f"from {self.manifest}")

    @property
    def tolerance_text(self) -> str:
        """The tolerance used and where each part came from."""
        if self.rtol_source == self.atol_source:
            return f"tolerance atol {self.atol:g}, rtol {self.rtol:g} {self._said(self.atol_source)}"
        return (
            f"tolerance atol {self.atol:g} {self._said(self.atol_source)}, "
            f"rtol {self.rtol:g} {self._said(self.rtol_source)}"
        )

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
        lines = [*head, line, f"  {self.tolerance_text}"]
        if self.passed:
            return "\n".join(lines)
        lines.append(
            f"  {self.share:.2%} of the elements miss |actual - expected| <= atol + rtol * |expected|; "
            f"max {self.max_ulps:.3g} ulp of {self.dtype}; largest errors first:"
        )
        lines += [f"  at {_index_text(m.index)}: {_mismatch_text(m)}" for m in self.worst]
        if self.mismatches > len(self.worst):
            lines.append(f"  ... and {self.mismatches - len(self.worst)} more")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        """The statistics as JSON-ready values; a float that is not finite is the string "nan", "inf" or "-inf"."""
        return {
            "passed": self.passed,
            "dtype": self.dtype,
            "shape": None if self.shape is None else list(self.shape),
            "rtol": self.rtol,
            "atol": self.atol,
            "tolerance_source": {"rtol": self.rtol_source, "atol": self.atol_source},
            "manifest": self.manifest,
            "source": self.source,
            "size": self.size,
            "mismatches": self.mismatches,
            "share": self.share,
            "max_abs": _json_float(self.max_abs),
            "max_rel": _json_float(self.max_rel),
            "max_ulps": _json_float(self.max_ulps),
            "nan_actual": self.nan_actual,
            "inf_actual": self.inf_actual,
            "nan_expected": self.nan_expected,
            "inf_expected": self.inf_expected,
            "worst": [
                {
                    "index": list(m.index) if isinstance(m.index, tuple) else m.index,
                    "expected": _json_float(m.expected),
                    "actual": _json_float(m.actual),
                    "abs_err": _json_float(m.abs_err),
                    "ulps": _json_float(m.ulps),
                }
                for m in self.worst
            ],
        }


def _json_float(x: float):
    """``x``, or its name when JSON has no number for it."""
    return x if math.isfinite(x) else ("nan" if math.isnan(x) else ("inf" if x > 0 else "-inf"))


def _index_text(index) -> str:
    return f"[{', '.join(str(i) for i in index)}]" if isinstance(index, tuple) else f"flat {index}"


def _mismatch_text(m: Mismatch) -> str:
    values = f"expected {m.expected:.6g}, actual {m.actual:.6g}"
    if math.isnan(m.abs_err):
        return f"{values}, NaN on one side"
    return f"{values}, error {m.abs_err:.3g} = {m.ulps:.3g} ulp"


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


@functools.cache
def _grid(name: str) -> np.ndarray:
    """The distinct finite magnitudes of a narrow float format, ascending, decoded from every one of its codes."""
    bits = dtypes.bits(name)
    codes = np.arange(2**bits, dtype=np.uint16 if bits > 8 else np.uint8)
    held = codes if name in dtypes.CODE_FORMATS else codes.view(dtypes.to_numpy_dtype(name))
    values = _values(held, name)
    return np.unique(np.abs(values[np.isfinite(values)]))


def ulp(expected: np.ndarray, dtype) -> np.ndarray:
    """Spacing of ``dtype`` at each ``|expected|``: the gap from the value to the next larger one of the format.

    The largest finite value takes the gap below it; integers have ulp 1; a NaN or infinite
    ``expected`` gets 1 (its error is 0, inf or NaN whatever the unit). float32 uses ``np.spacing``;
    narrower formats (ml_dtypes types, and hifloat8 / float4_e1m2 codes) the table of their values.
    """
    name = dtypes.dtype_name(dtype)
    e = np.abs(np.asarray(expected, np.float64))
    finite = np.isfinite(e)
    if not dtypes.is_float(name):
        return np.ones_like(e)
    e = np.where(finite, e, 0.0)
    if name in _SPACING_FORMATS:
        storage = dtypes.to_numpy_dtype(name).type
        below_top = np.nextafter(np.finfo(storage).max, storage(0))
        gap = np.spacing(np.minimum(e, below_top).astype(storage)).astype(np.float64)
    else:
        grid = _grid(name)
        i = np.clip(np.searchsorted(grid, e, side="right"), 1, grid.size - 1)
        gap = grid[i] - grid[i - 1]
    return np.where(finite, gap, 1.0)


def _worst(where: np.ndarray, one_side: np.ndarray, diff: np.ndarray) -> np.ndarray:
    """Up to SHOWN flat indices of ``where``: NaN on one side first, then by error, largest first; ties by index."""
    nan_first = where[one_side[where]][:SHOWN]
    rest = where[~one_side[where]]
    need = SHOWN - nan_first.size
    if need <= 0 or rest.size == 0:
        return nan_first
    d = diff[rest]
    if rest.size > need:  # keep the candidates at least as large as the need-th largest error
        cut = np.partition(d, rest.size - need)[rest.size - need]
        rest, d = rest[d >= cut], d[d >= cut]
    return np.concatenate([nan_first, rest[np.argsort(-d, kind="stable")[:need]]])


def _tolerance(name, rtol, atol, recorded):
    """(rtol, atol, rtol_source, atol_source): each the caller's, else the manifest's ``recorded``, else the dtype's."""
    out = []
    for i, given in enumerate((rtol, atol)):
        if given is not None:
            out.append((float(given), GIVEN))
        elif recorded is not None and recorded[i] is not None:
            out.append((recorded[i], FROM_MANIFEST))
        else:
            out.append((default_tolerance(name)[i], DTYPE_DEFAULT))
    (rtol, rtol_source), (atol, atol_source) = out
    return rtol, atol, rtol_source, atol_source


def compare_arrays(expected, actual, dtype, *, rtol=None, atol=None, shape=None, recorded=None) -> CompareResult:
    """Compare two arrays of values (see ``compare_files``); ``shape`` unravels the mismatch indices.

    ``recorded``: (rtol, atol) a golden manifest records, used where ``rtol`` / ``atol`` is None.
    """
    name = dtypes.dtype_name(dtype)
    rtol, atol, rtol_source, atol_source = _tolerance(name, rtol, atol, recorded)
    for what, tol in (("rtol", rtol), ("atol", atol)):
        if not tol >= 0:
            raise ValueError(f"{what} bounds |actual - expected|, so it is at least 0: got {tol:g}")
    e = _values(np.asarray(expected), name).reshape(-1)
    a = _values(np.asarray(actual), name).reshape(-1)
    if e.size != a.size:
        raise ValueError(f"expected has {e.size} elements, actual has {a.size}: compare tensors of one size")
    nan = np.isnan(e) | np.isnan(a)
    one_side = np.isnan(e) != np.isnan(a)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        diff = np.where(a == e, 0.0, np.abs(a - e))
        close = (a == e) | (diff <= atol + rtol * np.abs(e))
        bad = ~close & ~(np.isnan(e) & np.isnan(a))
        rel = np.where(e != 0, diff / np.abs(np.where(e != 0, e, 1.0)), 0.0)
        ulps = diff / ulp(e, name)
    counted = ~nan
    max_abs = float(diff[counted].max()) if counted.any() else 0.0
    max_rel = float(rel[counted].max()) if counted.any() else 0.0
    max_ulps = float(ulps[counted].max()) if counted.any() else 0.0
    if one_side.any():  # a NaN on one side only: the worst error is not a number
        max_abs = max_rel = max_ulps = float("nan")
    where = np.flatnonzero(bad)
    worst = []
    for i in _worst(where, one_side, diff):
        index = tuple(int(x) for x in np.unravel_index(i, shape)) if shape is not None else int(i)
        worst.append(Mismatch(index, float(e[i]), float(a[i]), float(diff[i]), float(ulps[i])))
    return CompareResult(
        dtype=name,
        rtol=rtol,
        atol=atol,
        size=int(e.size),
        shape=None if shape is None else tuple(shape),
        max_abs=max_abs,
        max_rel=max_rel,
        max_ulps=max_ulps,
        mismatches=int(where.size),
        worst=worst,
        nan_actual=int(np.isnan(a).sum()),
        inf_actual=int(np.isinf(a).sum()),
        nan_expected=int(np.isnan(e).sum()),
        inf_expected=int(np.isinf(e).sum()),
        rtol_source=rtol_source,
        atol_source=atol_source,
    )


def _describe(path, array: np.ndarray, dtype) -> str:
    path = os.fspath(path)
    if path.endswith(".bin"):
        return f"{path} holds {array.size} elements ({os.path.getsize(path)} bytes of {dtypes.dtype_name(dtype)})"
    return f"{path} holds {array.size} elements (shape {array.shape})"


def compare_files(expected, actual, dtype=None, *, rtol=None, atol=None, shape=None, manifest=None) -> CompareResult:
    """Compare tensor file ``actual`` against ``expected``, both holding elements of ``dtype``.

    Each is a ``.bin`` (raw little-endian device bytes, as ``write_golden`` writes) or an ``.npy``.
    ``shape`` (for ``.bin`` files) turns the reported indices into coordinates (an ``.npy`` brings
    its own shape).

    A golden manifest (``manifest``, else a ``manifest.json`` beside either file) that names the
    tensor gives its dtype, shape, layout and, where ``rtol`` / ``atol`` is None, the case's
    tolerance; a ``dtype`` or ``shape`` that contradicts it is refused. When ``expected`` is a file
    of that golden set, the set's files are checked against the manifest's sha256 sums first
    (``actual`` excepted): a set mixed from two runs is refused (ValueError naming the file).
    """
    shape = None if shape is None else tuple(int(s) for s in shape)
    dtype, shape, source, found = _from_manifest((expected, actual), dtype, shape, manifest)
    recorded = None
    if source is not None:
        if golden_manifest.in_set(found, expected):
            skip = () if os.path.realpath(os.fspath(actual)) == os.path.realpath(os.fspath(expected)) else (actual,)
            golden_manifest.verify(found, skip=skip, complete=False)
        recorded = golden_manifest.tolerance(found)
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
    out = compare_arrays(e, a, dtype, rtol=rtol, atol=atol, shape=known, recorded=recorded)
    out.source = source
    out.manifest = found if source is not None else None
    return out


def _from_manifest(paths, dtype, shape, manifest):
    """(dtype, shape, source, manifest path): the caller's, checked against the golden manifest's entry if any."""
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
        return dtype, shape, None, found
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
    return m_dtype, m_shape, f"{name} ({layout}) from {found}", found
