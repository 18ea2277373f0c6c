"""A control-plane run on a time axis: one span per instruction that ran, the pipes a deadlock left stuck, the
summary (cycles, the bound pipe, the fraction of cube peak), a Chrome/Perfetto trace and a timeline picture.

Reads the record's template and a ``ControlResult`` only (the report layer). Each span names its instruction
and kernel line; a wait names the instruction whose signal it consumed, which the trace draws as a flow arrow
and the picture as an arrow between the two bars.
"""

from __future__ import annotations

import dataclasses
import json

import jax
import numpy as np

from ..core import CORE_NAMES, N_PIPES, Pipe, pipe_name
from ..engine import Record, Sync

#: the bound a summary names for the busiest pipe
BOUND_NAMES = {
    Pipe.M: "cube",
    Pipe.MTE2: "MTE2",
    Pipe.MTE1: "MTE1",
    Pipe.FIX: "FIX",
    Pipe.V: "vector",
    Pipe.MTE3: "MTE3",
    Pipe.S: "scalar",
}
#: below this share of the run on its busiest pipe, waits and latencies dominate: the summary says "sync"
SYNC_BOUND_SHARE = 0.5


@dataclasses.dataclass(frozen=True)
class Span:
    """One instruction that ran: what, where, on which core and pipe, from when to when (cycles)."""

    inst: int
    op: str  # the instruction (its colour in the picture)
    site: str  # the kernel's spelling and line: ``sync_wait at kernel.py:12``
    iteration: tuple[int, ...]
    core: int
    pipe: Pipe
    start_cycle: int
    end_cycle: int
    source: int  # the instance whose signal it consumed (-1: none)
    flight_cycles: int = 0  # a DMA request: the last cycles of the span, in flight once it has left its pipe

    @property
    def queue(self) -> int:
        return self.core * N_PIPES + int(self.pipe)

    @property
    def leave_cycle(self) -> int:
        """When it left its pipe (a DMA request; otherwise its end): the pipe takes its next instruction then."""
        return self.end_cycle - self.flight_cycles


@dataclasses.dataclass(frozen=True)
class Stuck:
    """A pipe a deadlock left with work: the instruction at its head and the cycle the pipe went idle."""

    core: int
    pipe: Pipe
    op: str
    site: str
    since_cycle: int

    @property
    def queue(self) -> int:
        return self.core * N_PIPES + int(self.pipe)


@dataclasses.dataclass(frozen=True)
class Timeline:
    """One scenario's run: its spans in start order, its stuck pipes, and what the summary needs."""

    spans: tuple[Span, ...]
    stuck: tuple[Stuck, ...]
    chip: str
    clock_mhz: float
    cube_work_cycles: float  # the mmads' MAC cycles (their cost less their head)
    # what-if lines measured by running the control plane again (``timeline(advice=True)``)
    advice: tuple[str, ...] = ()

    @classmethod
    def of(cls, record: Record, result, chip, index: int | None = None) -> Timeline:
        """The timeline of ``result`` (a ``ControlResult``; pass ``index`` for one scenario of a batch)."""
        names = ("cycles", "head_cycles", "enable")
        cycles, head, enable = (np.asarray(record.operands[k]) for k in names)
        if index is not None:
            result = jax.tree_util.tree_map(lambda x: x[index], result)
            cycles, head, enable = (x[index] if x.ndim > 1 else x for x in (cycles, head, enable))
        start, end = np.asarray(result.start), np.asarray(result.end)
        flight = end - np.asarray(result.leave)  # a DMA request, after it left its pipe
        if start.ndim != 1:
            raise ValueError("this result holds a batch of scenarios: pass index= to pick one")
        t = record.template
        if start.shape[0] < t.entry.shape[0]:
            raise ValueError("this run kept no timeline (ControlOptions.keep_timeline=False)")
        source = np.asarray(result.source)
        spans, work = [], 0.0
        ran = np.flatnonzero(start >= 0)
        for i in ran[np.argsort(start[ran], kind="stable")]:
            name, site, core, pipe, _ = t.entries[int(t.entry[i])]
            it = tuple(int(x) for x in t.iteration[i] if x >= 0)
            spans.append(
                Span(
                    int(i), name, site, it, core, Pipe(pipe), int(start[i]), int(end[i]), int(source[i]), int(flight[i])
                )
            )
            if pipe == Pipe.M and t.sync[i] == Sync.NONE and end[i] > start[i]:  # an mmad: M runs mmads and sync only
                work += max(float(cycles[i]) - float(head[i]), 0.0)
        stuck = []
        if bool(np.asarray(result.deadlocked)):
            pos, free = np.asarray(result.machine.pos), np.asarray(result.machine.free_t)
            for q in range(t.queues.shape[0]):
                members = [int(i) for i in t.qlist[q, : int(t.qlen[q])] if enable.reshape(-1)[i]]  # the machine's
                if pos[q] < len(members):  # queues hold the enabled instances only
                    name, site, core, pipe, _ = t.entries[int(t.entry[members[pos[q]]])]
                    stuck.append(Stuck(core, Pipe(pipe), name, site, int(free[q])))
        return cls(tuple(spans), tuple(stuck), chip.name, float(chip.clock_mhz), work)

    @property
    def cycles(self) -> int:
        """When the last instruction completed (a deadlock: when the last one that could run did)."""
        return max((s.end_cycle for s in self.spans), default=0)

    def summary(self) -> dict:
        """Total cycles, busy and stall cycles per pipe, the bound, and the fraction of cube peak achieved.

        A pipe is busy while one of its instructions runs or a DMA request of it is in flight (requests overlap:
        the cycles count once, as a profiler's pipe time does). It stalls before an instruction that consumed a
        signal, from the end of what ran on it before to its start."""
        total = self.cycles
        pipes: dict[int, dict] = {}
        last_end: dict[int, int] = {}
        for s in self.spans:  # in start order
            p = pipes.setdefault(s.queue, {"busy_cycles": 0, "stall_cycles": 0, "end_cycle": 0})
            covered = last_end.get(s.queue, 0)
            p["busy_cycles"] += max(s.end_cycle - max(s.start_cycle, covered), 0)
            if s.source >= 0:
                p["stall_cycles"] += max(s.start_cycle - covered, 0)
            p["end_cycle"] = max(p["end_cycle"], s.end_cycle)
            last_end[s.queue] = max(covered, s.end_cycle)
        busiest = max(pipes, key=lambda q: pipes[q]["busy_cycles"], default=None)
        bound = "none" if busiest is None or total == 0 else BOUND_NAMES[Pipe(busiest % N_PIPES)]
        if busiest is not None and total > 0 and pipes[busiest]["busy_cycles"] < SYNC_BOUND_SHARE * total:
            bound = "sync"
        return {
            "cycles": total,
            "microseconds": total / self.clock_mhz,
            "bound": bound,
            "cube_peak_fraction": self.cube_work_cycles / total if total > 0 else 0.0,
            "pipes": {pipe_name(q): pipes[q] for q in sorted(pipes)},
            "stuck": [f"{pipe_name(s.queue)}: {s.site} ({s.op}), idle from cycle {s.since_cycle}" for s in self.stuck],
            "events": 2 * len(self.spans),
            "advice": list(self.advice),
        }

    def to_perfetto(self, path: str | None = None) -> dict:
        """Chrome/Perfetto trace JSON: a track per core and pipe in use, instructions named with their lines, a
        flow per consumed signal, a slice per stuck pipe from the cycle it went idle, and the advice (if any) as an
        instant at cycle 0."""
        mhz = self.clock_mhz
        queues = sorted({s.queue for s in self.spans} | {s.queue for s in self.stuck})
        trace = [
            {"ph": "M", "name": "process_name", "pid": core, "args": {"name": name}}
            for core, name in enumerate(CORE_NAMES)
            if any(q // N_PIPES == core for q in queues)
        ]
        trace += [
            {"ph": "M", "name": "thread_name", "pid": q // N_PIPES, "tid": q % N_PIPES, "args": {"name": str(Pipe(q % N_PIPES))}}
            for q in queues
        ]  # fmt: skip
        by_inst = {s.inst: s for s in self.spans}
        for s in self.spans:
            args = {"start_cycle": s.start_cycle, "end_cycle": s.end_cycle, "instruction": s.op, "site": s.site}
            if s.iteration:
                args["iteration"] = list(s.iteration)
            src = by_inst.get(s.source)
            if src is not None:
                args["waited_for"] = src.site
            trace.append(
                {"ph": "X", "name": s.site, "pid": s.core, "tid": int(s.pipe),
                 "ts": s.start_cycle / mhz, "dur": (s.leave_cycle - s.start_cycle) / mhz, "args": args}
            )  # fmt: skip
            if s.flight_cycles:  # in flight after it left the pipe: an async slice (requests in flight overlap)
                flight = {"cat": "in flight", "id": s.inst, "name": f"in flight: {s.site}", "pid": s.core,
                          "tid": int(s.pipe)}  # fmt: skip
                trace.append({**flight, "ph": "b", "ts": s.leave_cycle / mhz})
                trace.append({**flight, "ph": "e", "ts": s.end_cycle / mhz})
            if src is not None:
                flow = {"id": s.inst, "name": "sync", "cat": "sync"}
                trace.append({**flow, "ph": "s", "pid": src.core, "tid": int(src.pipe), "ts": src.end_cycle / mhz})
                trace.append(
                    {**flow, "ph": "f", "bp": "e", "pid": s.core, "tid": int(s.pipe), "ts": s.start_cycle / mhz}
                )
        end = max(self.cycles, *(s.since_cycle for s in self.stuck)) if self.stuck else self.cycles
        for s in self.stuck:
            trace.append(
                {"ph": "X", "name": f"stuck: {s.site}", "pid": s.core, "tid": int(s.pipe),
                 "ts": s.since_cycle / mhz, "dur": max(end - s.since_cycle, 1) / mhz,
                 "args": {"since_cycle": s.since_cycle, "instruction": s.op, "site": s.site}}
            )  # fmt: skip
        if self.advice:  # one instant at the start, over every track: the what-if lines
            trace.append({"ph": "i", "s": "g", "name": "advice", "ts": 0, "pid": 0, "tid": 0,
                          "args": {str(i): line for i, line in enumerate(self.advice)}})  # fmt: skip
        info = self.summary()
        doc = {
            "traceEvents": trace,
            "displayTimeUnit": "ns",
            "otherData": {"chip": self.chip, "clock_mhz": mhz, **{k: v for k, v in info.items() if k != "pipes"}},
        }
        if path is not None:
            with open(path, "w") as f:
                json.dump(doc, f)
        return doc

    def plot(self, path: str, title: str | None = None) -> None:
        """A timeline PNG: a row per pipe in use, a bar per instruction (a colour per op), arrows for the signals
        waits consumed, and a hatched marker on each stuck pipe from the cycle it went idle (needs matplotlib)."""
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError as exc:  # pragma: no cover - depends on the optional extra
            raise ImportError("timeline pictures need matplotlib: pip install 'ascjax[plot]'") from exc
        rows = sorted({s.queue for s in self.spans} | {s.queue for s in self.stuck})
        y = {q: i for i, q in enumerate(rows)}
        kinds = sorted({s.op for s in self.spans})
        palette = [*plt.cm.tab20.colors, *plt.cm.tab20b.colors]
        colours = {k: palette[i % len(palette)] for i, k in enumerate(kinds)}
        fig, ax = plt.subplots(figsize=(13, 0.6 * len(rows) + 1.6))
        by_inst = {s.inst: s for s in self.spans}
        for s in self.spans:
            ax.barh(y[s.queue], max(s.leave_cycle - s.start_cycle, 1), left=s.start_cycle, color=colours[s.op],
                    height=0.6, edgecolor="black", linewidth=0.3)  # fmt: skip
            if s.flight_cycles:  # in flight, the pipe already free: a thin hatched bar (requests overlap)
                ax.barh(y[s.queue] + 0.2, s.flight_cycles, left=s.leave_cycle, facecolor="none", hatch="////",
                        edgecolor=colours[s.op], height=0.2, linewidth=0)  # fmt: skip
            src = by_inst.get(s.source)
            if src is not None and src.queue != s.queue:
                ax.annotate("", xy=(s.start_cycle, y[s.queue]), xytext=(src.end_cycle, y[src.queue]),
                            arrowprops={"arrowstyle": "->", "color": "0.35", "linewidth": 0.6})  # fmt: skip
        end = max([self.cycles, *(s.since_cycle for s in self.stuck)])
        for s in self.stuck:
            ax.barh(y[s.queue], max(end - s.since_cycle, 1), left=s.since_cycle, color="mistyrose", hatch="xx",
                    edgecolor="red", height=0.6)  # fmt: skip
            right = s.since_cycle > end / 2  # label inside the axis: left of a marker that starts late
            ax.text(end if right else s.since_cycle, y[s.queue] - 0.38, f"stuck: {s.site}", color="red", fontsize=7,
                    ha="right" if right else "left")  # fmt: skip
        ax.set_yticks(range(len(rows)), [pipe_name(q) for q in rows])
        ax.invert_yaxis()
        ax.set_xlabel(f"cycles (chip {self.chip}, {self.clock_mhz:.0f} MHz)")
        handles = [plt.Rectangle((0, 0), 1, 1, color=colours[k]) for k in kinds]
        labels = list(kinds)
        if any(s.flight_cycles for s in self.spans):
            handles.append(plt.Rectangle((0, 0), 1, 1, facecolor="none", hatch="////", edgecolor="0.3"))
            labels.append("in flight (GM latency)")
        if self.stuck:
            handles.append(plt.Rectangle((0, 0), 1, 1, facecolor="mistyrose", hatch="xx", edgecolor="red"))
            labels.append("stuck")
        ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
        info = self.summary()
        ax.set_title(
            title
            or f"{info['cycles']:,} cycles, {info['bound']}-bound, {100 * info['cube_peak_fraction']:.0f} % of cube peak"
        )
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)


def summary_text(info: dict) -> str:
    """The summary in lines: the headline, then a line per pipe, a launch's GM traffic, a line per stuck pipe and
    per advice."""
    lines = [
        f"cycles: {info['cycles']:,.0f} ({info['microseconds']:.2f} us), bound: {info['bound']}, "
        f"{100 * info['cube_peak_fraction']:.0f} % of cube peak"
    ]
    for name, p in info["pipes"].items():
        lines.append(
            f"  {name:9s} busy {p['busy_cycles']:>10,.0f}  stall {p['stall_cycles']:>10,.0f}  done at {p['end_cycle']:>10,.0f}"
        )
    if "gm_contention" in info:  # a launch: its GM traffic against the chip's shared bandwidth
        lines.append(
            f"  GM       {info['gm_bytes']:,} bytes, {100 * info['gm_bandwidth_fraction']:.1f} % of the chip's GM "
            f"bandwidth; asked for {info['gm_contention']:.2f} x it at the cores' own rates"
        )
    lines += [f"  stuck    {s}" for s in info.get("stuck", [])]
    lines += [f"  advice   {a}" for a in info.get("advice", [])]
    return "\n".join(lines)
