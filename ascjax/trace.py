"""The host side of the timing model: summary, Chrome/Perfetto trace JSON and a timeline picture."""

from __future__ import annotations

import json

import jax
import numpy as np

from . import sites
from .core import CORE_NAMES, N_PIPES, Pipe, pipe_name
from .hazards import N_GLOBAL_PIPES
from .timeline import summary_text  # noqa: F401 - one wording of the summary for both engines
from .timing import REASONS

_BOUND = {
    Pipe.M: "cube",
    Pipe.MTE2: "MTE2",
    Pipe.MTE1: "MTE1",
    Pipe.FIX: "FIX",
    Pipe.V: "vector",
    Pipe.MTE3: "MTE3",
    Pipe.S: "scalar",
}


def _one(state, index):
    if index is not None:
        state = jax.tree_util.tree_map(lambda x: x[index], state)
    if np.ndim(state.time.pipe_t) != 1:
        raise ValueError("this state holds a batch of runs: pass index= to pick one")
    return state, jax.tree_util.tree_map(np.asarray, state.time)


def summary(state, index: int | None = None) -> dict:
    """Total cycles, busy and stall cycles per pipe, the bound, and the fraction of cube peak achieved."""
    state, t = _one(state, index)
    total = float(t.pipe_t.max())
    pipes = {
        pipe_name(g): {
            "busy_cycles": float(t.busy[g]),
            "stall_cycles": float(t.stall[g]),
            "end_cycle": float(t.pipe_t[g]),
        }
        for g in range(N_GLOBAL_PIPES)
        if t.busy[g] > 0 or t.stall[g] > 0
    }
    busiest = int(np.argmax(t.busy))
    bound = _BOUND[Pipe(busiest % N_PIPES)]
    if total > 0 and t.busy[busiest] < 0.5 * total:
        bound = "sync"  # no pipe is busy half the time: waits and latencies dominate
    return {
        "cycles": total,
        "microseconds": total / state.chip.clock_mhz,
        "bound": bound if total > 0 else "none",
        "cube_peak_fraction": float(t.cube_ideal) / total if total > 0 else 0.0,
        "pipes": pipes,
        "events": int(t.ev_count),
        "events_kept": min(int(t.ev_count), int(t.ev_op.shape[0])),
    }


def events(state, index: int | None = None) -> list[dict]:
    """The recorded events as dicts (op, site, pipe, start/end cycle, stall reason, the op it waited for)."""
    state, t = _one(state, index)
    out = []
    for i in range(min(int(t.ev_count), t.ev_op.shape[0])):
        s = sites.site(int(t.ev_op[i]))
        out.append(
            {
                "op": s.op if s else "auto sync wait",
                "location": s.location if s else "",
                "pipe": int(t.ev_pipe[i]),
                "start": float(t.ev_start[i]),
                "end": float(t.ev_end[i]),
                "reason": REASONS[int(t.ev_reason[i])],
                "from_op": int(t.ev_from[i]),
                "op_id": int(t.ev_op[i]),
            }
        )
    return out


def to_perfetto(state, path: str | None = None, index: int | None = None) -> dict:
    """Chrome/Perfetto trace JSON: a track per core and pipe, ops named with source lines, flows for sync edges."""
    one, t = _one(state, index)
    mhz = one.chip.clock_mhz
    evs = events(state, index)
    trace = []
    for core, name in enumerate(CORE_NAMES):
        trace.append({"ph": "M", "name": "process_name", "pid": core, "args": {"name": name}})
        for pipe in Pipe:
            trace.append({"ph": "M", "name": "thread_name", "pid": core, "tid": int(pipe), "args": {"name": str(pipe)}})
    last_end_of = {}
    for i, e in enumerate(evs):
        core, pipe = divmod(e["pipe"], N_PIPES)
        args = {"start_cycle": e["start"], "end_cycle": e["end"], "location": e["location"]}
        if e["reason"]:
            args["waited_for"] = e["reason"]
        trace.append(
            {
                "ph": "X",
                "name": f"{e['op']} {e['location']}",
                "pid": core,
                "tid": pipe,
                "ts": e["start"] / mhz,
                "dur": max(e["end"] - e["start"], 0.0) / mhz,
                "args": args,
            }
        )
        if e["from_op"] >= 0 and e["from_op"] in last_end_of:
            src = last_end_of[e["from_op"]]
            s_core, s_pipe = divmod(src["pipe"], N_PIPES)
            trace.append(
                {
                    "ph": "s",
                    "id": i,
                    "name": "sync",
                    "cat": "sync",
                    "pid": s_core,
                    "tid": s_pipe,
                    "ts": src["end"] / mhz,
                }
            )
            trace.append(
                {
                    "ph": "f",
                    "id": i,
                    "name": "sync",
                    "cat": "sync",
                    "bp": "e",
                    "pid": core,
                    "tid": pipe,
                    "ts": e["start"] / mhz,
                }
            )
        last_end_of[e["op_id"]] = e
    doc = {
        "traceEvents": trace,
        "displayTimeUnit": "ns",
        "otherData": {
            "chip": one.chip.name,
            "clock_mhz": mhz,
            **{k: v for k, v in summary(state, index).items() if k != "pipes"},
        },
    }
    if path is not None:
        with open(path, "w") as f:
            json.dump(doc, f)
    return doc


def plot_timeline(state, path: str, index: int | None = None, title: str | None = None) -> None:
    """A timeline PNG: pipes as rows, ops as bars (colour by op), waits shaded (needs matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the optional extra
        raise ImportError("timeline pictures need matplotlib: pip install 'ascjax[plot]'") from exc
    one, _ = _one(state, index)
    evs = events(state, index)
    rows = sorted({e["pipe"] for e in evs})
    y = {g: i for i, g in enumerate(rows)}
    kinds = sorted({e["op"] for e in evs})
    colours = {k: plt.cm.tab10(i % 10) for i, k in enumerate(kinds)}
    fig, ax = plt.subplots(figsize=(12, 0.6 * len(rows) + 1.5))
    prev_end = {}
    for e in evs:
        row = y[e["pipe"]]
        before = prev_end.get(e["pipe"], 0.0)
        if e["reason"] and e["start"] > before:
            ax.barh(row, e["start"] - before, left=before, color="0.85", hatch="//", edgecolor="0.6", height=0.6)
        if e["end"] > e["start"]:
            ax.barh(
                row,
                e["end"] - e["start"],
                left=e["start"],
                color=colours[e["op"]],
                height=0.6,
                edgecolor="black",
                linewidth=0.3,
            )
        prev_end[e["pipe"]] = max(before, e["end"])
    ax.set_yticks(range(len(rows)), [pipe_name(g) for g in rows])
    ax.invert_yaxis()
    ax.set_xlabel(f"cycles (chip {one.chip.name}, {one.chip.clock_mhz:.0f} MHz)")
    handles = [plt.Rectangle((0, 0), 1, 1, color=colours[k]) for k in kinds]
    handles.append(plt.Rectangle((0, 0), 1, 1, facecolor="0.85", hatch="//", edgecolor="0.6"))
    ax.legend(
        handles,
        [*kinds, "waiting"],
        loc="upper center",
        bbox_to_anchor=(0.5, -0.18),
        ncol=min(6, len(kinds) + 1),
        fontsize=8,
    )
    info = summary(state, index)
    ax.set_title(
        title
        or f"{info['cycles']:,.0f} cycles, {info['bound']}-bound, {100 * info['cube_peak_fraction']:.0f} % of cube peak"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
