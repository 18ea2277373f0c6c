"""Verdicts: the result word a run carries, and the typed exceptions it maps to."""

from __future__ import annotations

import enum


class Verdict(enum.IntEnum):
    """Outcome of a run: the most severe finding's (every finding is reported, ranked); ``OK`` means none."""

    OK = 0
    DEADLOCK = 1  # a pipe waits for a flag nothing sets
    LEFTOVER = 2  # a signal (unit flag, SetFlag bit) is still set at the end
    SYNC_ERROR = 3  # misuse of a sync primitive (flag set twice, event id out of range)
    BOUNDS = 4  # a traced size or offset outside its tile or tensor
    LAYOUT = 5  # the data layout an op reads differs from the one the tile holds
    RACE = 6  # two accesses to one granule, at least one a write, not ordered by any sync
    UNINITIALIZED = 7  # a read of a granule nothing wrote (and that is not a kernel input)

    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def parse(cls, name: str | int | Verdict) -> Verdict:
        if isinstance(name, str):
            return cls[name.upper()]
        return cls(int(name))


#: One sentence per verdict: what it means and where to look.
MESSAGES = {
    Verdict.OK: "no error",
    Verdict.DEADLOCK: "a pipe waits for a flag that no op sets: on the device the kernel hangs",
    Verdict.LEFTOVER: "a signal is still set when the kernel ends: the next kernel on this core inherits it",
    Verdict.SYNC_ERROR: "a synchronisation primitive is used against its rules",
    Verdict.BOUNDS: "a traced size or offset lies outside its tile or tensor",
    Verdict.LAYOUT: "an op reads data in a layout other than the one the tile holds",
    Verdict.RACE: "two accesses to one buffer granule are not ordered by any sync: the result depends on timing",
    Verdict.UNINITIALIZED: "an op reads buffer bytes that nothing has written",
}

#: Names of the quantities a BOUNDS error can refer to (ErrorRecord.c indexes this).
BOUNDS_WHAT = (
    "m", "k", "n", "row offset", "column offset", "event_id", "k (aligned)", "TileGroup slot", "trip count",
    "valid rows", "valid columns",
)  # fmt: skip
#: The BOUNDS_WHAT index of a loop's traced trip count past its static maximum.
BOUNDS_TRIP_COUNT = 8
#: SYNC_ERROR kinds (ErrorRecord.a).
SYNC_SET_TWICE = 0
SYNC_EVENT_RANGE = 1
SYNC_CROSS_PENDING = 2  # a cross-core set while the id still holds an unconsumed signal
SYNC_CROSS_MODE = 3  # set and wait of one cross-core id use different sync modes


class AscjaxError(RuntimeError):
    """Base class of the errors a run raises with ``throw=True``."""

    verdict: Verdict = Verdict.OK

    def __init__(self, message: str, report=None):
        super().__init__(message)
        self.report = report


class DeadlockError(AscjaxError):
    verdict = Verdict.DEADLOCK


class LeftoverSignalError(AscjaxError):
    verdict = Verdict.LEFTOVER


class SyncError(AscjaxError):
    verdict = Verdict.SYNC_ERROR


class BoundsError(AscjaxError):
    verdict = Verdict.BOUNDS


class LayoutError(AscjaxError):
    verdict = Verdict.LAYOUT


class RaceError(AscjaxError):
    verdict = Verdict.RACE


class UninitializedError(AscjaxError):
    verdict = Verdict.UNINITIALIZED


EXCEPTIONS = {
    cls.verdict: cls
    for cls in (DeadlockError, LeftoverSignalError, SyncError, BoundsError, LayoutError, RaceError, UninitializedError)
}
