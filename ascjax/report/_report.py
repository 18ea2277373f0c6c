"""A run's report: its verdict, the most severe finding in words, and where to look (``Report``)."""

from __future__ import annotations

import dataclasses

from ..core import Verdict
from ._timeline import summary_text


@dataclasses.dataclass
class Report:
    """What a run found: the verdict, a precise message, and where to look."""

    verdict: Verdict
    message: str
    location: str | None  # file:line of the offending op
    op: str | None
    warnings: list[str]
    chip: str
    timing: dict  # see ascjax.report._timeline.Timeline.summary: cycles, bound, cube peak fraction, per-pipe busy/stall
    events: str = ""  # the cross-core event table (empty when the kernel used none)
    poisoned: str = ""  # how many output elements a RAW race's reads can poison (empty: none, or not run)

    @property
    def cycles(self) -> float:
        return self.timing["cycles"]

    def __str__(self) -> str:
        text = self.message
        if self.poisoned:
            text += "\n  " + self.poisoned
        if self.warnings:
            text += "\n" + "\n".join(f"warning: {w}" for w in self.warnings)
        if self.events:
            text += "\n" + self.events
        return text + "\n" + summary_text(self.timing).splitlines()[0]

    def to_dict(self) -> dict:
        return {
            "verdict": self.verdict.label,
            "message": self.message,
            "location": self.location,
            "op": self.op,
            "warnings": self.warnings,
            "chip": self.chip,
            "cycles": self.cycles,
            "bound": self.timing["bound"],
            "cube_peak_fraction": self.timing["cube_peak_fraction"],
            "events": self.events,
            "poisoned": self.poisoned,
        }
