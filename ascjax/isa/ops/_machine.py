"""Shared steps of the data functions: the core an op runs on, static values, and racy reads poisoned."""

from __future__ import annotations

import contextvars

import jax
import jax.numpy as jnp
import numpy as np

from ...core import AIC, AIV0

#: On the data plane: whether the issue whose data function runs now reads racy data (``ascjax.engine._dataplane.Poison``).
RACY_READ = contextvars.ContextVar("racy_read", default=False)
#: On the data plane: the control plane found that no traced operand of the record faults (a BOUNDS or LAYOUT
#: finding), so every issue executes and writes whole; its writes then do not depend on what they overwrite,
#: which lets a loop's iterations be computed independently (``ascjax.engine.scan_lowered``).
NO_FAULTS = contextvars.ContextVar("no_faults", default=False)


def _need(cond: bool, message: str) -> None:
    """Refuse a static operand that breaks a rule (the message names it)."""
    if not cond:
        raise ValueError(message)


def core_of(sub: int | None) -> int:
    """The core an op runs on: the AIC for ``sub=None``, AIV0 / AIV1 for ``sub`` 0 / 1."""
    if sub is None:
        return AIC
    if sub not in (0, 1):
        raise ValueError(f"sub-block index must be 0 or 1 (an AI Core has two AIVs), got {sub!r}")
    return AIV0 + sub


def executes(faults, execute=True):
    """``execute`` and none of ``faults`` (``Fault`` s) holding: a Python bool while every condition is static False
    or the record has no fault (``NO_FAULTS``), else traced."""
    if NO_FAULTS.get():
        return execute
    for f in faults:
        if f.bad is not False:
            execute = execute & ~jnp.asarray(f.bad)
    return execute


def select(cond, new, old):
    """``jnp.where(cond, new, old)``, but ``new`` (``old``) itself where ``cond`` is concrete and all true (false):
    a write that always happens does not depend on the value it overwrites, and one that never does computes
    nothing."""
    if not isinstance(cond, jax.core.Tracer):
        static = np.asarray(cond)
        if static.all() or not static.any():
            shape = jnp.broadcast_shapes(static.shape, jnp.shape(new), jnp.shape(old))
            pick = new if static.all() else old
            return jnp.broadcast_to(jnp.asarray(pick).astype(jnp.result_type(new, old)), shape)
    return jnp.where(cond, new, old)


def outside(value, limit):
    """Whether ``value`` lies outside [0, limit]: a Python bool when it is static, else traced."""
    v = static_int(value)
    if v is not None:
        return not 0 <= v <= limit
    return (jnp.asarray(value) < 0) | (jnp.asarray(value) > limit)


def event_id_int(event_id, where: str) -> int | None:
    """A static event id's value (None when traced); a float or bool id is refused, never truncated."""
    dtype = getattr(event_id, "dtype", None)
    if isinstance(event_id, (bool, float, np.bool_, np.floating)) or (
        dtype is not None and not jnp.issubdtype(dtype, jnp.integer)
    ):
        raise TypeError(f"rule 'event id': {where}: event_id must be an integer, got {event_id!r}")
    return static_int(event_id)


def static_int(x) -> int | None:
    """The value of a Python/NumPy integer, or None for a traced value."""
    try:
        return int(x)
    except (TypeError, Exception):
        return None


def racy_read():
    """Whether the issue whose data function runs now reads racy data: the control plane's finding for its
    instance (``ascjax.engine._dataplane.Poison``), False outside ``poison_races``."""
    return jnp.asarray(RACY_READ.get())


def poison(value, racy, options):
    """With ``poison_races``, data an op derived from a racy read becomes NaN (integers: INT_MIN)."""
    if not options.poison_races:
        return value
    bad = jnp.nan if jnp.issubdtype(value.dtype, jnp.floating) else jnp.iinfo(value.dtype).min
    return jnp.where(racy, jnp.asarray(bad, value.dtype), value)
