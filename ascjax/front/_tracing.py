"""Tracing a kernel: its GM inputs and outputs checked, the kernel run on a ``Program``, its record made.

The front end of both planes: ``record_kernel`` records a kernel's instructions for the control
plane (``ascjax.engine``), ``trace_kernel`` runs it on any ``Program`` (the data plane's, a launch's
block). What JAX would change silently (a Python list, a 64-bit array) is refused here, by name.
"""

from __future__ import annotations

import collections
import hashlib
import inspect
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..core import _dtypes as dtypes
from ..core import eval_jaxpr, needed_inputs
from ..core._chip import Chip, get_chip
from ..engine import Costs, sync_latency
from ..engine._state import State
from . import _sites as sites
from ._program import _CURRENT, Program
from ._recorder import Recorder


class UnusedInputWarning(UserWarning):
    """A GM input the kernel never names: usually a misspelt tensor name."""


def gm_inputs(inputs: dict) -> dict:
    """The GM inputs as JAX arrays; what JAX would silently change (a Python list, a 64-bit array) is refused."""
    out = {}
    for name, x in inputs.items():
        if isinstance(x, (list, tuple, int, float, bool, complex)):
            raise TypeError(
                f"input {name!r} is a Python {type(x).__name__}: GM holds typed tensors, so pass an array of the "
                f"dtype the kernel reads, e.g. np.asarray(..., np.float16)"
            )
        arr = jnp.asarray(x)
        given = getattr(x, "dtype", arr.dtype)
        if np.dtype(given) != np.dtype(arr.dtype):
            raise TypeError(
                f"input {name!r} holds {np.dtype(given).name}, which JAX holds as {np.dtype(arr.dtype).name} "
                f"(64-bit types need jax_enable_x64): pass it as the dtype the kernel reads, e.g. "
                f"np.asarray(x, np.{np.dtype(arr.dtype).name})"
            )
        out[name] = arr
    return out


def initial_gm(inputs: dict, outputs: tuple) -> dict:
    """GM before the kernel: the inputs, and every output zero-filled, or holding the input of its name (an output
    passed with its initial contents, as a device buffer the kernel updates in place)."""
    gm = dict(inputs)
    for name, (shape, dtype) in outputs:
        if name in gm:
            given = gm[name]
            if tuple(given.shape) != tuple(shape) or np.dtype(given.dtype) != np.dtype(dtype):
                raise ValueError(
                    f"GM tensor {name!r} is an output of shape {tuple(shape)} {np.dtype(dtype).name} and an input "
                    f"(its initial contents) of shape {tuple(given.shape)} {np.dtype(given.dtype).name}: they must match"
                )
            continue
        gm[name] = jnp.zeros(shape, dtype)
    return gm


def output_spec(outputs: dict) -> tuple:
    """``outputs`` as a static tuple of ``(name, (shape, numpy dtype))``."""
    return tuple((name, _output_spec(name, s)) for name, s in outputs.items())


def _output_spec(name: str, spec):
    if isinstance(spec, jax.ShapeDtypeStruct):
        return tuple(spec.shape), dtypes.to_numpy_dtype(spec.dtype)
    if isinstance(spec, (np.ndarray, jax.Array)):
        raise TypeError(f"output {name!r}: outputs are (shape, dtype) pairs; pass initial contents as inputs")
    form = f"give ((rows, cols), dtype), e.g. {name!r}: ((32, 32), 'float32')"
    if not isinstance(spec, (tuple, list)) or len(spec) != 2 or not isinstance(spec[0], (tuple, list)):
        raise TypeError(f"output {name!r}: {spec!r} is not a (shape, dtype) pair: {form}")
    shape, dtype = spec
    try:
        dims = tuple(int(s) for s in shape)
        np_dtype = dtypes.to_numpy_dtype(dtype)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"output {name!r}: {exc}") from None
    return dims, np_dtype


def kernel_parameters(kernel) -> list[str] | None:
    """The names a kernel takes after its ``Program`` (None: any name, ``**kwargs``, or no signature to read)."""
    try:
        parameters = list(inspect.signature(kernel).parameters.values())[1:]  # the first is the Program
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return None
    return [p.name for p in parameters if p.kind is not inspect.Parameter.VAR_POSITIONAL]


def _check_params(kernel, params: dict) -> None:
    """Every parameter names one the kernel takes: a misspelt name is refused with the kernel's names."""
    names = kernel_parameters(kernel)
    unknown = [] if names is None else [name for name in params if name not in names]
    if unknown:
        verb = "is not a parameter" if len(unknown) == 1 else "are not parameters"
        raise TypeError(
            f"rule 'params': {', '.join(map(repr, unknown))} {verb} of kernel {getattr(kernel, '__name__', kernel)!r} "
            f"(its parameters: {', '.join(names) or 'none'})"
        )


def trace_kernel(kernel, program: Program, params: dict) -> Program:
    """Run ``kernel(program, **params)`` as the current kernel; a trace-time error names the kernel line."""
    _check_params(kernel, params)
    _CURRENT.append(program)
    try:
        kernel(program, **params)
        program.flush()  # sections declared last
    except (ValueError, TypeError, NotImplementedError) as exc:
        sites.locate(exc)
        raise
    finally:
        _CURRENT.pop()
    return program


def record_kernel(
    kernel,
    inputs: dict,
    outputs: dict,
    *,
    chip: str | Chip = "a2",
    params: dict | None = None,
    costs: Costs | None = None,
    block: dict | None = None,
    shapes_only: bool = False,
):
    """Record ``kernel(k, **params)`` on one block without computing data: the engine's ``Record`` of its issues,
    each with its cycles from ``costs`` (default: the chip's table). An input the kernel never names draws an
    ``UnusedInputWarning`` at the user's call. ``block``: a launch's ``{"block_idx": b, "block_num": n}``.
    ``shapes_only``: the inputs stand for their shapes (their values are another program's tracers); a kernel
    that reads GM contents (``k.gm``) raises ``NeedsData``.

    The control plane (``ascjax.engine.run_control``) then checks the kernel's synchronisation.
    """
    chip = get_chip(chip)
    spec = output_spec(outputs)
    inputs = gm_inputs(inputs)
    gm = initial_gm(inputs, spec)
    state = State.create(chip, gm, tuple(name for name, _ in spec))
    recorder = Recorder(chip, gm, set(inputs), costs)
    program = Program(chip, state, recorder=recorder, **(block or {}))
    program.shapes_only = shapes_only
    program = trace_kernel(kernel, program, params or {})
    warn_unused_inputs(inputs, program, spec)
    return recorder.builder.build()


def _recording(kernel, chip: Chip, spec: tuple, shapes_only: bool, static, block_dim: int | None):
    """The recording as a function of the arguments' arrays (``static``: the rest of them); with ``block_dim``, every
    block's record of a launch at once (a ``vmap`` over the block index: one template, operands per block)."""

    def record(dynamic):
        costs, inputs, params = eqx.combine(dynamic, static)

        def of_block(block):
            return record_kernel(kernel, inputs, dict(spec), chip=chip, params=params, costs=costs, block=block,
                                 shapes_only=shapes_only)  # fmt: skip

        if block_dim is None:
            out = of_block(None)
        else:
            blocks = jnp.arange(block_dim, dtype=jnp.int32)
            out = jax.vmap(lambda b: of_block({"block_idx": b, "block_num": block_dim}))(blocks)
        return out, sync_latency(costs)

    return record


#: Per kernel, static arguments and array shapes: the recording's jaxpr, the structure of what it returns and which
#: arrays it reads; and the records last made, by those arrays' bytes (a run again on other data records nothing).
_RECORDINGS: collections.OrderedDict = collections.OrderedDict()
_RECORDS: collections.OrderedDict = collections.OrderedDict()
RECORDINGS_KEPT, RECORDS_KEPT = 64, 16


def forget_recordings() -> None:
    """Forget every traced recording and record."""
    _RECORDINGS.clear()
    _RECORDS.clear()


def _kept(cache: collections.OrderedDict, key, make, size: int):
    """``cache[key]``, made by ``make()`` when missing (the ``size`` most recently used kept; an unhashable key:
    made each time)."""
    try:
        hit = cache.get(key)
    except TypeError:
        return make()
    if hit is None:
        hit = cache[key] = make()
        while len(cache) > size:
            cache.popitem(last=False)
    else:
        cache.move_to_end(key)
    return hit


def _recording_of(kernel, chip: Chip, costs: Costs, inputs: dict, spec: tuple, params: dict, shapes_only: bool,
                  block_dim: int | None):  # fmt: skip
    """``(key, recording, leaves)``: the recording's cached trace for these arguments (its jaxpr, the structure of
    what it returns, its static outputs and which arrays it reads), and the arrays it takes."""
    dynamic, static = eqx.partition((costs, inputs, params), eqx.is_array)
    leaves, treedef = jax.tree.flatten(dynamic)
    static_leaves, static_def = jax.tree.flatten(static)
    key = (kernel, chip, spec, shapes_only, block_dim, treedef, static_def, tuple(static_leaves),
           tuple((np.shape(x), np.dtype(x.dtype)) for x in leaves))  # fmt: skip

    def trace():
        recording = _recording(kernel, chip, spec, shapes_only, static, block_dim)
        closed, out_struct, out_static = eqx.filter_make_jaxpr(recording)(dynamic)
        return closed, jax.tree.structure(out_struct), out_static, needed_inputs(closed)

    return key, _kept(_RECORDINGS, key, trace, RECORDINGS_KEPT), leaves


def record_on_host(
    kernel,
    chip: Chip,
    costs: Costs,
    inputs: dict,
    spec: tuple,
    params: dict,
    shapes_only: bool = False,
    block_dim: int | None = None,
):
    """``record_kernel`` of concrete arguments, with the sync latencies its control plane runs with: traced once per
    kernel and argument shapes (arrays among ``inputs``, ``params`` and ``costs`` are traced, as under ``jit``; the
    rest is static), then evaluated in NumPy (``core.eval_jaxpr``), with no XLA compile. ``shapes_only``: the
    inputs are zero stand-ins of their shapes, for a run whose data is traced. ``block_dim``: the records of a
    launch's blocks, their operands with a leading block axis."""
    key, (closed, out_def, out_static, needed), leaves = _recording_of(kernel, chip, costs, inputs, spec, params,
                                                                       shapes_only, block_dim)  # fmt: skip
    read = [np.asarray(x) for x, used in zip(leaves, needed) if used]
    digest = hashlib.blake2b(digest_size=16)
    for x in read:
        digest.update(f"{x.dtype}{x.shape};".encode())
        digest.update(np.ascontiguousarray(x).tobytes())

    def evaluate():
        out = [np.asarray(x) for x in eval_jaxpr(closed, *leaves)]
        for x in out:
            x.flags.writeable = False  # the record is shared by the runs that reuse it
        return eqx.combine(jax.tree.unflatten(out_def, out), out_static)

    return _kept(_RECORDS, (key, digest.hexdigest()), evaluate, RECORDS_KEPT)


def record_traced(kernel, chip: Chip, costs: Costs, inputs: dict, spec: tuple, params: dict,
                  shapes_only: bool = False, block_dim: int | None = None):  # fmt: skip
    """``record_on_host``'s record and latencies of traced arguments: its cached trace evaluated by JAX, so that the
    record has the template the host's records of these shapes have (``block_dim``: every block's of a launch)."""
    _, (closed, out_def, out_static, _), leaves = _recording_of(kernel, chip, costs, inputs, spec, params,
                                                                shapes_only, block_dim)  # fmt: skip
    out = jax.core.eval_jaxpr(closed.jaxpr, closed.consts, *leaves)
    return eqx.combine(jax.tree.unflatten(out_def, out), out_static)


def warn_unused_inputs(inputs: dict, program: Program, outputs: tuple) -> None:
    """An ``UnusedInputWarning`` at the user's call of run / check / launch / sweep per input the kernel never
    names and that is not an output (usually a misspelt tensor name)."""
    names = {name for name, _ in outputs}
    for name in sorted(set(inputs) - program.gm_named - names):
        file, line = sites.caller()
        warnings.warn_explicit(
            f"input {name!r} is never named by the kernel's ops and is not an output: a misspelt GM name? "
            f"(the kernel names {sorted(program.gm_named) or 'no GM tensor'})",
            UnusedInputWarning,
            file,
            line,
        )
