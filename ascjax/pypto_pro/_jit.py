"""``@pl.jit(...)``: a PyPTO-Pro kernel read from its source and run on the emulator.

``kernel(x, y, z)`` runs it on one block, ``kernel[stream, block_dim](x, y, z)`` launches ``block_dim`` blocks,
as PyPTO-Pro writes them. The ``pl.Tensor[...]`` parameters are GM tensors: the arrays passed for them are the
kernel's inputs, and those the kernel stores to are its outputs, written back into the arrays passed (as the
device writes them) once the run is done. The call returns the run's ``Result`` (``LaunchResult``), whose
``report()`` says what the control plane found; ``last_result`` keeps it too.
"""

from __future__ import annotations

import contextvars
import functools
import inspect

import numpy as np

from ..core import _dtypes as dtypes
from ..front._sites import locate
from ..front._tracing import record_kernel
from ..front.pypto import GmTensor, Runtime, TensorSpec, Translation, UnsupportedConstruct
from ..front.pypto._gm_tensor import GM_CONTENTS, GM_WRITES, ViewSplit
from ..front.pypto._tiles import LEARNT_VALID, Learnt
from ..front.pypto._types import DYNAMIC, dtype_name
from ..front.pypto.language import AUTO_MUTEX
from ..runner import launch, run
from .parser_errors import ParserError, ParserSyntaxError
from .runtime.tilingkey import TilingKeyError, TilingKeySchema

#: where set (a list), every kernel call appends ``(kernel name, result)``: a test runner reports the verdicts
RUNS: contextvars.ContextVar = contextvars.ContextVar("runs", default=None)
#: PyPTO-Pro's ``arch`` names, as ascjax's chips (PyPTO-Pro targets the 950, "a5", by default)
ARCHES = {None: "950", "a5": "950", "950": "950", "a3": "a3", "a2": "a2"}


def jit(target=None, *, arch=None, auto_mutex: bool = True, name=None, pipeline=None, tiling_key=None,
        datatype=None, compile_timeout=None, **unknown):  # fmt: skip
    """``@pl.jit`` / ``@pl.jit(arch=, auto_mutex=, ...)``: the kernel as a ``JitKernel``.

    ``name`` and ``compile_timeout`` concern the device build and change nothing here. ``tiling_key=Cls`` (a class
    of ``TilingKeyField``s) makes the kernel one per key, launched as ``kernel[stream, block_dim, {field: value}]``;
    ``pipeline`` and ``datatype`` specialisations are refused by name (not modelled yet).
    """
    if unknown:
        raise TypeError(f"rule 'jit': pl.jit has no option {', '.join(map(repr, sorted(unknown)))}")
    schema = None if tiling_key is None else TilingKeySchema(tiling_key)
    for option, value in (("pipeline", pipeline), ("datatype", datatype)):
        if value is not None:
            raise UnsupportedConstruct(f"rule 'jit': pl.jit({option}=...) is not modelled yet")
    if arch not in ARCHES:
        raise ValueError(f"rule 'jit': arch={arch!r} is not one of {sorted(a for a in ARCHES if a)}")

    def wrap(fn):
        return JitKernel(fn, chip=ARCHES[arch], auto_mutex=auto_mutex, tiling_key=schema)

    return wrap if target is None else wrap(target)


def _as_array(value) -> np.ndarray:
    """A NumPy view of a kernel argument (a NumPy array, or a CPU torch tensor; bfloat16 as ``ml_dtypes``')."""
    if hasattr(value, "detach"):  # a torch tensor
        value = value.detach().cpu()
        if str(value.dtype) == "torch.bfloat16":  # NumPy has no bfloat16: its bits, as ml_dtypes' bfloat16
            import torch

            return value.view(torch.int16).numpy().view(dtypes.to_numpy_dtype("bfloat16"))
        return value.numpy()
    return np.asarray(value)


def _value_range(array: np.ndarray) -> tuple | None:
    """An integer tensor's lowest and highest element: the bound of the kernel's scalar reads of it (``_bounds``),
    part of the key of the recorded program (None: a float or empty tensor)."""
    if array.size == 0 or not np.issubdtype(array.dtype, np.integer):
        return None
    return int(array.min()), int(array.max())


def _same_bits(given: np.dtype, declared: np.dtype) -> bool:
    """Integers of one width (int32 data passed for a DT_UINT32 tensor): the same GM bytes, read as declared."""
    return given.kind in "iu" and declared.kind in "iu" and given.itemsize == declared.itemsize


def _write_back(target, out: np.ndarray) -> None:
    """The kernel's output into the caller's array or tensor, as the device writes its GM (its bytes, in the
    caller's dtype where that is an integer type of the same width)."""
    if hasattr(target, "copy_"):  # a torch tensor
        import torch

        bits = out.view(np.int16) if out.dtype == dtypes.to_numpy_dtype("bfloat16") else out
        source = torch.from_numpy(np.array(bits))
        if bits is not out:
            source = source.view(torch.bfloat16)
        elif source.dtype != target.dtype and source.element_size() == target.element_size():
            source = source.view(target.dtype)
        target.copy_(source)
    elif isinstance(target, np.ndarray) and target.flags.writeable:
        np.copyto(target, out.view(target.dtype) if _same_bits(target.dtype, out.dtype) else out)


class JitKernel:
    """A PyPTO-Pro kernel under ``@pl.jit``: call it to run one block, index it to launch several."""

    def __init__(self, fn, *, chip: str, auto_mutex: bool, tiling_key: TilingKeySchema | None = None):
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.chip = chip
        self.auto_mutex = auto_mutex
        self.tiling_key = tiling_key
        self.signature = inspect.signature(fn)
        self._translation: Translation | None = None
        self._programs: dict = {}  # (shapes, scalars, block_dim, key) -> (the Program kernel, its written tensors)
        self.last_result = None

    @functools.cached_property
    def tensor_specs(self) -> dict[str, TensorSpec]:
        """The ``pl.Tensor[...]`` parameters by name."""
        annotations = inspect.get_annotations(self.fn, eval_str=True)
        return {name: spec for name, spec in annotations.items() if isinstance(spec, TensorSpec)}

    @property
    def translation(self) -> Translation:
        if self._translation is None:
            names = () if self.tiling_key is None else self.tiling_key.names
            self._translation = Translation(self.fn, constants=names)
        return self._translation

    def __call__(self, *args, **kwargs):
        if self.tiling_key is not None:
            raise TilingKeyError(
                f"rule 'tiling key': {self.__name__} has a tiling key ({self.tiling_key.cls.__name__}): launch it as "
                f"{self.__name__}[stream, block_dim, {{...}}](...)"
            )
        return self._launch(None, args, kwargs)

    def __getitem__(self, launch):
        """``kernel[stream, block_dim]``: launch on ``block_dim`` blocks (the stream is the caller's);
        ``kernel[stream, block_dim, key]`` for a kernel with a tiling key."""
        form = "kernel[stream, block_dim]" if self.tiling_key is None else "kernel[stream, block_dim, {field: value}]"
        if not isinstance(launch, tuple) or len(launch) != (2 if self.tiling_key is None else 3):
            raise TypeError(f"launch {self.__name__} as {form}(...), got {self.__name__}[{launch!r}]")
        block_dim = int(launch[1])
        key = None if self.tiling_key is None else self.tiling_key.check(launch[2])
        return lambda *args, **kwargs: self._launch(block_dim, args, kwargs, key)

    def arrays(self, args: tuple, kwargs: dict) -> tuple[dict, dict, dict]:
        """The arguments: GM tensors as arrays (checked against their annotations), the rest as values, and the
        objects passed for the tensors (written back after the run)."""
        bound = self.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        arrays, scalars, given = {}, {}, {}
        for name, value in bound.arguments.items():
            spec = self.tensor_specs.get(name)
            if spec is None:
                scalars[name] = value
                continue
            arr = _as_array(value)
            want = dtypes.to_numpy_dtype(dtype_name(spec.dtype))
            shape_ok = len(arr.shape) == len(spec.shape) and all(
                d == DYNAMIC or d == a for d, a in zip(spec.shape, arr.shape)
            )
            if arr.dtype != want and _same_bits(arr.dtype, want):  # GM holds bytes: int32 data for a DT_UINT32
                arr = arr.view(want)
            if not shape_ok or arr.dtype != want:
                raise TypeError(
                    f"rule 'tensor argument': {name} is declared {spec} but got a {list(arr.shape)} {arr.dtype} array"
                )
            if arr.ndim == 0:
                raise UnsupportedConstruct(f"rule 'tensor rank': {name} is a 0-D tensor; pass a scalar argument")
            arrays[name], given[name] = arr, value
        return arrays, scalars, given

    def program(self, arrays: dict, scalars: dict, block_dim: int | None, tiling_key: dict | None = None):
        """The kernel as a function of a ``Program`` for these shapes and values (and tiling key), the tensors it
        stores to, and the 2-D view each GM tensor is held in."""
        shapes = tuple((n, a.shape, str(a.dtype), _value_range(a)) for n, a in arrays.items())
        key = (shapes, repr(sorted(scalars.items())), block_dim, repr(sorted((tiling_key or {}).items())))
        if key not in self._programs:
            splits, first, learnt = {}, {}, Learnt()
            while True:  # until a recording learns nothing new: where windows' rows run, which tiles get a valid shape
                try:
                    recorded = self._record(arrays, scalars, block_dim, tiling_key, splits, learnt)
                except ViewSplit as need:
                    locate(need)
                    if need.name in splits:
                        raise UnsupportedConstruct(
                            f"rule 'order': {need}, after {first[need.name]}: ascjax holds a GM tensor as one 2-D "
                            "view, so its windows' rows run along one dimension"
                        ) from None
                    splits[need.name], first[need.name] = need.split, str(need)
                    continue
                except Exception:
                    if not learnt.new:  # the kernel's own error, not one of a tile recorded without its valid shape
                        raise
                    recorded = None
                if not learnt.new:
                    learnt.closed = True
                    self._programs[key] = recorded
                    break
                learnt.known |= learnt.new
                learnt.new.clear()
        return self._programs[key]

    def _record(self, arrays: dict, scalars: dict, block_dim: int | None, tiling_key: dict | None, splits: dict,
                learnt: Learnt):  # fmt: skip
        """``program``'s kernel with each GM tensor split as ``splits`` says and the tiles ``learnt`` knows given a
        valid shape, recorded once with every tensor writable to learn which ones it stores to."""
        declared = {name: dtype_name(spec.dtype) for name, spec in self.tensor_specs.items()}
        handles = {
            n: GmTensor(n, tuple(a.shape), declared[n], splits.get(n), _value_range(a)) for n, a in arrays.items()
        }
        views = {name: (handles[name].view, a.dtype) for name, a in arrays.items()}
        translation, auto_mutex = self.translation, self.auto_mutex

        def kernel(k):
            tokens = AUTO_MUTEX.set(auto_mutex), LEARNT_VALID.set(learnt)
            try:
                Runtime(translation, constants=tiling_key).run({**handles, **scalars})
            finally:
                AUTO_MUTEX.reset(tokens[0])
                LEARNT_VALID.reset(tokens[1])

        kernel.__name__ = kernel.__qualname__ = self.fn.__name__
        writes: set = set()
        token = GM_WRITES.set(writes)
        contents = GM_CONTENTS.set({name: a.reshape(views[name][0]) for name, a in arrays.items()})
        try:
            block = None if block_dim is None else {"block_idx": np.int32(0), "block_num": block_dim}
            record_kernel(kernel, {}, views, chip=self.chip, block=block)
        except (ValueError, TypeError) as exc:  # a check refused the kernel as it was read: a parse error
            if isinstance(exc, ParserError):
                raise
            raise ParserSyntaxError(str(exc)) from exc
        finally:
            GM_WRITES.reset(token)
            GM_CONTENTS.reset(contents)
        return kernel, frozenset(writes), {name: view for name, (view, _) in views.items()}

    def outputs(self, *args, block_dim: int | None = None, tiling_key: dict | None = None, **kwargs) -> frozenset:
        """The tensors the kernel stores to when called with these arguments (its outputs)."""
        arrays, scalars, _ = self.arrays(args, kwargs)
        return self.program(arrays, scalars, block_dim, tiling_key)[1]

    def _launch(self, block_dim: int | None, args: tuple, kwargs: dict, tiling_key: dict | None = None):
        arrays, scalars, given = self.arrays(args, kwargs)
        kernel, written, views = self.program(arrays, scalars, block_dim, tiling_key)
        # an output passed holding data starts from it (what the kernel does not store keeps it, as on the device)
        inputs = {n: a.reshape(views[n]) for n, a in arrays.items() if n not in written or np.any(a != 0)}
        outputs = {n: (views[n], a.dtype) for n, a in arrays.items() if n in written}
        if block_dim is None:
            result = run(kernel, inputs, outputs, chip=self.chip)
        else:
            result = launch(kernel, inputs, outputs, block_dim=block_dim, chip=self.chip)
        for name in written:
            _write_back(given[name], np.asarray(result.outputs[name]).reshape(arrays[name].shape))
        self.last_result = result
        runs = RUNS.get()
        if runs is not None:
            runs.append((self.__name__, result))
        return result
