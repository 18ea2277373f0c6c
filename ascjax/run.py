"""``run``: trace a kernel, execute it under ``jax.jit`` and return outputs, final state and verdict."""

from __future__ import annotations

import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from . import dtypes, sites
from .chip import Chip, get_chip
from .core import EXCEPTIONS, MESSAGES, Verdict
from .finish import finish
from .options import Options
from .program import _CURRENT, Program
from .recorder import Recorder
from .report import Report, report
from .state import State
from .timing import Costs, default_costs


class Result(eqx.Module):
    """Outputs (GM tensors named in ``outputs``, from the data plane), the record and what the control plane found."""

    outputs: dict[str, jax.Array]
    state: State  # the buffers at the end (the data plane's: GM, the tiles, the config registers)
    record: object
    control: object
    chip: Chip = eqx.field(static=True)
    costs: object

    @property
    def verdict(self) -> jax.Array:
        """int32 verdict code (a batch of them under ``vmap``); see ``ascjax.Verdict``."""
        from .core import Finding

        table = jnp.asarray([int(Verdict[f.verdict]) for f in sorted(Finding, key=int)], jnp.int32)
        kind = self.control.findings[..., 0, 0]
        return jnp.where(self.control.n_findings > 0, table[jnp.clip(kind, 0)], int(Verdict.OK))

    @property
    def ok(self) -> bool:
        return bool(np.all(np.asarray(self.verdict) == Verdict.OK))

    def findings(self, index: int | None = None):
        from .check import CheckResult
        from .finding_words import describe

        control = self.control if index is None else jax.tree_util.tree_map(lambda x: x[index], self.control)
        record = self.record
        if index is not None:
            record = type(record)(record.template, jax.tree_util.tree_map(lambda x: x[index] if np.ndim(x) > 1 else x, record.operands))
        return CheckResult(record, control, tuple(describe(record, control)), self.chip, self.costs)

    def report(self, index: int | None = None) -> Report:
        """Explain the run (pass ``index`` to pick one scenario of a vmapped batch)."""
        if index is None and np.ndim(self.control.n_findings):
            raise ValueError("this result holds a batch of runs: pass index= to pick one")
        return self.findings(index).report()

    def check(self) -> Result:
        """Raise the typed error (``DeadlockError``, ``SyncError``...) if the verdict is not OK."""
        codes = np.atleast_1d(np.asarray(self.verdict))
        bad = np.flatnonzero(codes != Verdict.OK)
        if bad.size:
            index = int(bad[0]) if np.ndim(self.verdict) else None
            rep = self.report(index)
            prefix = f"scenario {index}: " if index is not None else ""
            raise EXCEPTIONS[rep.verdict](prefix + str(rep), rep)
        return self


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
    """GM before the kernel: the inputs, and every output zero-filled."""
    gm = dict(inputs)
    for name, (shape, dtype) in outputs:
        if name in gm:
            raise ValueError(f"GM tensor {name!r} is both an input and an output: name it once")
        gm[name] = jnp.zeros(shape, dtype)
    return gm


def _trace(kernel, program: Program, params: dict) -> Program:
    """Run ``kernel(program, **params)`` as the current kernel; a trace-time error names the kernel line."""
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


def execute_block(
    kernel, chip: Chip, options: Options, costs, inputs: dict, outputs: tuple, params: dict, *, block=None
) -> State:
    """Trace ``kernel`` on one block and return its finished state.

    ``block`` (a launch's): ``(block_idx, block_num)``; the state then keeps the GM write marks the merge needs.
    """
    names = tuple(name for name, _ in outputs)
    state = State.create(chip, initial_gm(inputs, outputs), names, options, costs, track_gm_writes=block is not None)
    block_idx, block_num = block if block is not None else (None, 1)
    program = _trace(kernel, Program(chip, state, block_idx=block_idx, block_num=block_num), params)
    for name in sorted(set(inputs) - program.gm_named - set(names)):
        file, line = sites.caller()  # the user's call of run / launch / sweep
        warnings.warn_explicit(
            f"input {name!r} is never named by the kernel's ops and is not an output: a misspelt GM name? "
            f"(the kernel names {sorted(program.gm_named) or 'no GM tensor'})",
            UnusedInputWarning,
            file,
            line,
        )
    return finish(program.state)


def record_kernel(
    kernel,
    inputs: dict,
    outputs: dict,
    *,
    chip: str | Chip = "a2",
    params: dict | None = None,
    costs: Costs | None = None,
):
    """Record ``kernel(k, **params)`` on one block without computing data: the engine's ``Record`` of its issues,
    each with its cycles from ``costs`` (default: the chip's table).

    The control plane (``ascjax.engine.run_control``) then checks the kernel's synchronisation.
    """
    chip = get_chip(chip)
    spec = output_spec(outputs)
    inputs = gm_inputs(inputs)
    gm = initial_gm(inputs, spec)
    state = State.create(chip, gm, tuple(name for name, _ in spec), data_only=True)
    recorder = Recorder(chip, gm, set(inputs), costs)
    _trace(kernel, Program(chip, state, recorder=recorder), params or {})
    return recorder.builder.build()


def _execute(kernel, chip: Chip, options: Options, costs, inputs: dict, outputs: tuple, params: dict) -> Result:
    state = execute_block(kernel, chip, options, costs, inputs, outputs, params)
    return Result(outputs={name: state.gm[name] for name, _ in outputs}, state=state)


_execute_jit = eqx.filter_jit(_execute)


def output_spec(outputs: dict) -> tuple:
    """``outputs`` as a static tuple of ``(name, (shape, numpy dtype))``."""
    return tuple((name, _output_spec(name, s)) for name, s in outputs.items())


def raise_if_failed(result, verdict):
    """``throw=True``: the typed error on the host, ``eqx.branched_error_if`` under a trace."""
    if isinstance(verdict, jax.core.Tracer):
        messages = [MESSAGES[v] for v in Verdict]
        return eqx.branched_error_if(result, verdict != Verdict.OK, verdict, messages)
    return result.check()


def run(
    kernel,
    inputs: dict,
    outputs: dict,
    *,
    chip: str | Chip = "a2",
    params: dict | None = None,
    throw: bool = False,
    jit: bool = True,
    sanitize: bool = True,
    poison_races: bool = False,
    options: Options | None = None,
    costs: Costs | None = None,
    max_events: int = 0,
) -> Result:
    """Run ``kernel(k, **params)`` on one AI Core of ``chip`` (several blocks: ``ascjax.launch``).

    **Arguments:**

    - ``kernel``: a function of a ``ascjax.Program`` ``k`` (and ``params``) that allocates
      tiles and issues ops.
    - ``inputs``: GM input tensors by name; ``outputs``: GM output tensors as ``name: (shape, dtype)``
      (zero-filled before the run).
    - ``params``: extra keyword arguments for the kernel; arrays among them are traced, so a
      ``jax.vmap`` over them sweeps scenarios with one compilation.
    - ``throw``: raise the typed error when the verdict is not OK. Keep it False under ``vmap``.
    - ``sanitize``: happens-before race and uninitialised-read checks (on by default);
      ``poison_races``: racy reads produce NaN; ``options``: an ``ascjax.Options`` instead.
    - ``costs``: the timing model's ``ascjax.Costs`` (default: the chip's table; arrays, so a
      ``vmap`` may sweep them); ``max_events``: keep a trace of that many executed ops.

    **Returns:** a ``Result`` with ``outputs``, ``state``, ``verdict`` and ``report()``.
    """
    chip = get_chip(chip)
    options = options or Options(sanitize=sanitize, poison_races=poison_races, max_events=max_events)
    costs = default_costs(chip) if costs is None else costs
    inputs = gm_inputs(inputs)
    spec = output_spec(outputs)
    from .engine import ControlOptions
    from .planes import _planes, _planes_jit

    state, record, control = (_planes_jit if jit else _planes)(
        kernel, chip, options, ControlOptions(), costs, inputs, spec, dict(params or {})
    )
    result = Result({name: state.gm[name] for name, _ in spec}, state, record, control, chip, costs)
    return raise_if_failed(result, result.verdict) if throw else result
