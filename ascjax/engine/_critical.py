"""A run's cycles as a differentiable function of the costs: its binding constraints replayed in floats.

The control plane counts whole cycles in integers, so its times have no derivative. Its run is
piecewise linear in the prices, though: each instance starts at the latest of what it waits for
(its pipe's previous instruction leaving, the signal it consumed plus the edge's latency, the
requests in flight before a set or barrier landing) and ends its price later. ``run_cycles``
replays the run in start order with those same constraints on float prices (the record's
``price``, ``head_price`` and ``flight_price``, and the costs' latencies), rounding each the way the
control plane does but with the derivative of the unrounded price (straight through). Its value is
the control plane's cycle count exactly (each replayed time is pinned to the integer one); its
gradient follows the binding constraint of every instance, so ``d cycles / d cost`` is how many
times that cost lies on the critical path. A start the replay cannot explain (one held by a fence
or a ``PIPE_ALL`` of its core) keeps its integer time, with no derivative.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ._record import Record, Sync, UnitFlagRole

BIG = jnp.iinfo(jnp.int32).max


def _whole(price):
    """``ceil(price)`` with the derivative of ``price`` (straight through)."""
    price = jnp.asarray(price, jnp.float32)
    return jax.lax.stop_gradient(jnp.ceil(price) - price) + price


def _pin(value, exact):
    """``value`` moved onto the integer ``exact``, its derivative kept."""
    return value + jax.lax.stop_gradient(exact.astype(jnp.float32) - value)


def run_cycles(record: Record, result, costs):
    """The cycles of ``result`` (a ``ControlResult`` of ``record``, timeline kept, one scenario): the control plane's
    count, differentiable by ``costs`` (``Costs``) through the prices and latencies on its critical path."""
    names = ("price", "cycles", "flight_price", "flight_cycles", "head_price", "head_cycles")
    t, op = record.template, {k: jnp.asarray(record.operands[k]) for k in names}  # indexed by the replay's tracers
    n = t.n_instances
    start, leave, end = (jnp.asarray(x)[:n] for x in (result.start, result.leave, result.end))
    source = jnp.asarray(result.source)[:n]
    ran = start >= 0
    cycles = _pin(_whole(op["price"]), op["cycles"])
    flight = _pin(_whole(op["flight_price"]), op["flight_cycles"])
    head = _pin(_whole(op["head_price"]), op["head_cycles"])
    sync = jnp.asarray(t.sync)
    uf_role = jnp.asarray(t.uf_role)
    latency = jnp.select(
        [(sync == Sync.WAIT_FLAG) | (sync == Sync.MUTEX_LOCK), sync == Sync.CROSS_WAIT, uf_role != UnitFlagRole.NONE],
        [_whole(costs.flag_latency_cycles), _whole(costs.cross_core_latency_cycles),
         _whole(costs.unit_flag_latency_cycles)],
        0.0,
    )  # fmt: skip
    lands = (
        (sync == Sync.SET_FLAG) | (sync == Sync.CROSS_SET) | (sync == Sync.PIPE_BARRIER) | (sync == Sync.MUTEX_UNLOCK)
    )
    queue = jnp.asarray(t.queue)
    n_queues = int(t.queues.shape[0])
    order = jnp.argsort(jnp.where(ran, start, BIG), stable=True)

    def step(carry, i):
        leave_f, land_f, last, drain_i, drain_f = carry
        q, on = queue[i], ran[i]
        prev = last[q]
        src = jnp.clip(source[i], 0)
        has_prev, has_src = prev >= 0, (source[i] >= 0)
        p = jnp.clip(prev, 0)
        # the candidates of the start: (integer time, float time, whether it applies)
        lat_i = jnp.round(jax.lax.stop_gradient(latency[i])).astype(jnp.int32)
        cands = [
            (leave[p], leave_f[p], has_prev),
            (leave[src] + lat_i, leave_f[src] + latency[i], has_src),
            (drain_i[q], drain_f[q], lands[i]),
        ]
        start_f = jnp.asarray(0.0, jnp.float32)
        found = jnp.asarray(False)
        for value, value_f, applies in cands:  # the first candidate that equals the start binds it
            hit = applies & (value == start[i]) & ~found
            start_f = jnp.where(hit, value_f, start_f)
            found |= hit
        start_f = _pin(jnp.where(found, start_f, 0.0), start[i])
        streams = (op["head_cycles"][i] > 0) & has_prev & (op["head_cycles"][p] > 0) & (leave[p] == start[i])
        leave_i = _pin(start_f + cycles[i] - flight[i] - jnp.where(streams, head[i], 0.0), leave[i])
        land_i = _pin(leave_i + flight[i], end[i])
        leave_f = leave_f.at[i].set(jnp.where(on, leave_i, leave_f[i]))
        land_f = land_f.at[i].set(jnp.where(on, land_i, land_f[i]))
        later = on & (end[i] >= drain_i[q])
        drain_f = drain_f.at[q].set(jnp.where(later, land_i, drain_f[q]))
        drain_i = drain_i.at[q].set(jnp.where(later, end[i], drain_i[q]))
        last = last.at[q].set(jnp.where(on, i, prev))
        return (leave_f, land_f, last, drain_i, drain_f), None

    zeros = jnp.zeros(n, jnp.float32)
    init = (zeros, zeros, jnp.full(n_queues, -1, jnp.int32), jnp.zeros(n_queues, jnp.int32), jnp.zeros(n_queues))
    (_, land_f, _, _, _), _ = jax.lax.scan(step, init, order)
    total = jnp.max(jnp.where(ran, end, 0), initial=0)
    last_f = jnp.max(jnp.where(ran & (end == total), land_f, -jnp.inf), initial=-jnp.inf)
    return _pin(jnp.where(jnp.isfinite(last_f), last_f, 0.0), total)
