"""Concurrent sections: the cube program and the vector programs, each cut at its cross-core waits.

A kernel written PyPTO-Pro style has one ``section_cube`` program and one ``section_vector``
program (run by each AIV), each with its own loop. The record holds each core's program and the
control plane runs them side by side; the data plane (``ascjax.engine._dataplane.run_sections``) runs
their pieces in the order the control plane ran them. This module cuts a section into those pieces:

* A section is a sequence of **regions**: straight code, and top-level loops (``k.range`` /
  ``pl.range``) whose body is cut per iteration. Each region is cut at its cross-core waits into
  **segments**: segment ``s`` holds the ops after the region's ``s``-th wait, that wait first.
* **Discovery** (``discover``) finds the cuts at trace time: it traces the section with every op
  switched off (a ``Gate`` in discovery mode) and counts the waits of each region. A ``Gate`` for
  one segment then switches on that segment's ops only, so a loop body is traced once per
  segment, never unrolled.

A branch (``k.cond``) or an inner loop that holds a wait runs in line (``Gate.flat``): the branch's sides under
their predicates, the loop unrolled, so its waits cut segments in the record's order. Any other runs inside one
segment, where a wait cannot cut (it is refused).
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class Region:
    """Straight code (``trip`` 1) or a top-level loop of a section, with the waits one pass holds."""

    loop: bool
    trip: int = 1
    count: object = None  # traced trip count (<= trip) of a loop, or None
    waits: int = 0


class Gate:
    """Which ops of a section run while it is traced: none (discovery) or one segment's."""

    def __init__(self, discover: bool, region: int = 0, segment: int = 0, index=None):
        self.discover = discover
        self.target = (region, segment)
        self.index = index  # the iteration the target segment runs (a loop region)
        self.region = 0  # where the section's Python code is now
        self.waits = 0
        self.nested = 0  # inside a k.cond / nested k.range that runs inside one segment
        self.regions = [Region(loop=False)]
        # the branches and inner loops that hold a cross-core wait (found by discovery) run in line: a branch's
        # sides under their predicates, a loop unrolled, so their waits cut segments as the record numbers them;
        # per site, the waits, issues and sites one iteration of the loop holds (None: a branch)
        self.flat: dict = {}
        self.sites = 0  # branches and inner loops met so far in this region, outside any ``nested`` one
        self.inner = 0  # inside a top-level loop's body or a branch run in line: a loop met here is no region

    def site(self) -> tuple[int, int]:
        """The next branch or inner loop of the section: the same in every trace (its region, its place there)."""
        self.sites += 1
        return self.region, self.sites - 1

    @property
    def enabled(self) -> bool:
        return not self.discover and (self.region, self.waits) == self.target

    def reaches(self, waits: int) -> bool:
        """Whether code from here on that passes ``waits`` more waits holds an op of the target segment."""
        return (
            not self.discover and self.region == self.target[0] and self.waits <= self.target[1] <= self.waits + waits
        )

    def count_wait(self, where: str) -> None:
        """A wait starts a new segment (inside a nested loop or a cond it cannot)."""
        if self.nested:
            raise ValueError(
                f"rule 'section waits': {where} inside k.cond or a nested loop of a concurrent section cannot "
                "begin a segment: write wait_cross_core(..., when=pred) at the section's top level or in its "
                "top-level loop body"
            )
        self.waits += 1
        if self.discover:
            self.regions[self.region].waits = max(self.regions[self.region].waits, self.waits)

    def enter_loop(self, trip: int, count) -> int:
        """A top-level loop begins: a new region (and another for the code after it)."""
        if self.discover:
            self.regions.append(Region(loop=True, trip=trip, count=count))
            self.regions.append(Region(loop=False))
        self.region += 1
        self.waits = self.sites = 0
        return self.region

    def leave_loop(self) -> None:
        self.region += 1
        self.waits = self.sites = 0


@dataclasses.dataclass
class Plan:
    core: int
    call: object  # runs the section (with its sub-block)
    subblock: int | None
    regions: list
    serial: int = -1  # the how-many-th section the kernel declared (names the section's issues in every trace)
    flat: dict = dataclasses.field(default_factory=dict)  # its branches and inner loops run in line (``Gate.flat``)


def discover(program, plan: Plan) -> list:
    """The regions of ``plan``'s section and the cross-core waits each holds (a pass with every op off)."""
    gate = Gate(discover=True)
    program._run_gated(gate, plan)
    plan.flat = gate.flat
    return gate.regions
