"""What the control plane can find, most severe first [semantics §8 "Findings"].

A run reports every finding (each once per distinct site); its verdict is the most severe
one present. The order of ``Finding`` *is* that ranking: a smaller value is more severe.
"""

from __future__ import annotations

import enum


class Finding(enum.IntEnum):
    """One kind of finding; members are ranked by severity (``DEADLOCK`` first)."""

    DEADLOCK = 0  # unfinished instructions and no queue head can execute
    RACE = 1  # conflicting accesses not ordered by happens-before (or the small-tile rule)
    LEFTOVER = 2  # a flag bit, cross-core counter or unit flag still set at the end
    OVERFLOW = 3  # counter chip: the 16th pending signal on one cross-core counter
    DOUBLE_SET = 4  # set_flag on an intra-core bit that is already 1: the second signal is lost
    MERGED_SIGNAL = 5  # bit chip: a cross-core set on a counter already at 1: the signal is lost
    # bit chip: a cross-core set not ordered after the wait that took the counter's previous signal: on other
    # timings it finds that signal still pending, and one is lost (an event id serving two channels)
    UNORDERED_SET = 6
    UNINITIALIZED = 7  # a read of bytes no input covers and no happens-before write wrote
    SYNC_ERROR = 8  # a set and its wait disagree on the cross-core sync mode; an event id out of range
    BOUNDS = 9  # a dynamic index (slot, size, offset, trip count) outside its static range
    LAYOUT = 10  # a traced size makes the instruction read a layout other than the one its tile holds (GEMV)

    @property
    def label(self) -> str:
        return self.name.lower()

    @property
    def verdict(self) -> str:
        """The name of the run verdict this finding gives (a lost signal is a sync error)."""
        lost = (Finding.OVERFLOW, Finding.DOUBLE_SET, Finding.MERGED_SIGNAL, Finding.UNORDERED_SET)
        return "SYNC_ERROR" if self in lost else self.name


#: Race hazard labels, in program order within a core and in as-soon-as-possible order across cores.
RAW, WAR, WAW, SMALL_TILE = 0, 1, 2, 3
HAZARD_NAMES = ("RAW", "WAR", "WAW", "RAW (small-tile rule)")
