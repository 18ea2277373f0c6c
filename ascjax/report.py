"""Host-side reports: turn a finished state's error record into words a kernel developer can act on."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np

from . import hazards, isa, sites
from .core import (
    BOUNDS_TRIP_COUNT,
    BOUNDS_WHAT,
    CORE_NAMES,
    HAZARD_NAMES,
    MESSAGES,
    RAW,
    SMALL_TILE,
    SYNC_SET_TWICE,
    WAR,
    WAW,
    Buffer,
    InstrKind,
    Pipe,
    Verdict,
    pipe_name,
)
from .events import cross_core_error, cross_core_leftover, cross_core_wait_lines, event_table, wait_chain
from .finish import LEFTOVER_CROSS_CORE, LEFTOVER_UNIT_FLAG
from .granules import CHIP_GRANULE_BYTES
from .ops.unit_flag import mode_name
from .state import WARN_DIRECTION, WARN_SET_PIPE, WARN_WAIT_PIPE, State, WaitKind
from .trace import summary, summary_text


@dataclasses.dataclass
class Report:
    """What a run found: the verdict, a precise message, and where to look."""

    verdict: Verdict
    message: str
    location: str | None  # file:line of the offending op
    op: str | None
    warnings: list[str]
    chip: str
    timing: dict  # see ascjax.trace.summary: cycles, bound, cube peak fraction, per-pipe busy/stall
    events: str = ""  # the cross-core event table (empty when the kernel used none)

    @property
    def cycles(self) -> float:
        return self.timing["cycles"]

    def __str__(self) -> str:
        text = self.message
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
        }


def _where(op_id: int) -> str:
    s = sites.site(op_id)
    return f"{s.op} at {s.location}" if s else "no op"


def _loop_text(op_id: int, loop) -> str:
    s = sites.site(op_id)
    if not s or not s.loop_depth:
        return ""
    idx = ", ".join(str(int(i)) for i in loop[: s.loop_depth])
    return f" in loop iteration ({idx}) (0-based)"


def _l0c_tile(state: State, block: int) -> str:
    per = state.chip.unit_flag_block_bytes
    for t in reversed(state.tiles):
        if t.buffer is Buffer.L0C and t.addr // per <= block < -(-t.end // per):
            return f"tile {t}"
    return "no tile"


def _unit_flag_wait(state, w, p) -> list[str]:
    value, lo, hi, count = (int(w.value[p]), int(w.lo[p]), int(w.hi[p]), int(w.count[p]))
    last_op, last_mode = int(w.last_op[p]), int(w.last_mode[p])
    lines = [f"  waits for unit flag = {value} on {count} L0C block(s) {lo}..{hi} ({_l0c_tile(state, lo)})"]
    last = sites.site(last_op)
    last_kind = None if last is None else isa.kind_of(last.op)
    if last is None:
        lines.append("  no mmad or fixpipe touched those blocks before it.")
    else:
        lines.append(f"  those blocks were last touched by {last.op} at {last.location} with {mode_name(last_mode)}.")
    if value == 1:  # a read (fixpipe) waits for the mmad's UPDATE
        if last_kind is InstrKind.MMAD and last_mode == 2:
            lines.append(
                "  Fix: the last mmad on this tile must use ENABLE_UPDATE (AccPhase.Final) - rule 'Final closing'."
            )
        elif last_kind is InstrKind.L0C_READ:
            lines.append(
                "  Fix: an earlier read already drained these blocks (UPDATE clears the flag): use ENABLE_KEEP "
                "(STPhase.Partial) for all reads but the last, or let an mmad with UPDATE refill them first."
            )
        else:
            lines.append(
                "  Fix: the mmad that produces these blocks must enable the unit flag and end with ENABLE_UPDATE "
                "(or use DISABLE on both sides with M->FIX sync_notify/sync_wait)."
            )
    else:  # an mmad waits for the fixpipe's UPDATE
        if last_kind is InstrKind.L0C_READ and last_mode == 2:
            lines.append(
                "  Fix: the last read of this tile must use ENABLE_UPDATE (STPhase.Final) to hand it back to the cube."
            )
        else:
            lines.append(
                "  Fix: every block an mmad sets to 1 must be drained by a read with ENABLE_UPDATE (same volume as "
                "the mmad wrote), or reset the flags with set_l0c_copy_config(is_clean_unit_flag=True)."
            )
    return lines


def _deadlock(state: State) -> tuple[str, str | None, str | None]:
    w = jax.tree_util.tree_map(np.asarray, state.wait)
    stuck = [p for p in np.argsort(w.seq, kind="stable") if w.op[p] >= 0]
    lines = [f"DEADLOCK (chip {state.chip.name})"]
    for p in stuck:
        op = int(w.op[p])
        core = int(p) // len(Pipe)
        lines.append(f"  {pipe_name(p)} is stuck at {_where(op)}{_loop_text(op, w.loop[p])}")
        kind = int(w.kind[p])
        if kind == WaitKind.UNIT_FLAG:
            lines += _unit_flag_wait(state, w, p)
        elif kind == WaitKind.CROSS_CORE:
            lines += cross_core_wait_lines(state, w, p)
        elif kind == WaitKind.FLAG:
            src, dst, ev = Pipe(int(w.lo[p])), Pipe(int(w.hi[p])), int(w.count[p])
            lines.append(f"  waits for flag {src}->{dst} event {ev}, which is 0.")
            g_src = hazards.gpipe(core, src)
            if int(w.op[g_src]) >= 0 and g_src != int(p):
                lines.append(
                    f"  pipe {pipe_name(g_src)} is itself stuck (see its entry), so the notify never comes: "
                    "fix that one first."
                )
                continue
            if int(w.last_op[p]) >= 0:
                lines.append(
                    f"  it was last set by {_where(int(w.last_op[p]))} and already consumed by an earlier wait."
                )
            else:
                lines.append(f"  no sync_notify({src}, {dst}, {ev}) ran before it.")
            lines.append(
                "  Fix: every sync_wait needs exactly one sync_notify on the same pipes and event id issued before it."
            )
        else:
            lines.append(
                f"  the PIPE_ALL barrier waits for pipe {CORE_NAMES[core]}.{Pipe(int(w.value[p]))}, "
                "which never finishes."
            )
        hint = int(w.hint_op[p])
        if hint >= 0:
            lines.append(
                f"  Note: {_where(hint)} (pipe {sites.site(hint).pipe}), issued later, would release this wait. "
                "The device runs pipes decoupled, so it may not hang there, but the data is then read out of "
                "order: issue the producer before the consumer."
            )
    chain = wait_chain(state)
    if chain:
        lines.append(chain)
    if len(stuck) < len(w.op):
        lines.append("  All other pipes finished.")
    first = sites.site(int(w.op[stuck[0]]))
    return "\n".join(lines), first.location, first.op


def _leftover(state: State, err) -> str:
    if int(err.a) == LEFTOVER_UNIT_FLAG:
        block, count = int(err.b), int(err.c)
        return (
            f"LEFTOVER unit flag: {count} L0C block(s) from block {block} ({_l0c_tile(state, block)}) still hold 1 "
            f"at the end; last set by {_where(int(err.op))}.\n"
            "  Fix: the last read of every block an mmad sets must use ENABLE_UPDATE (STPhase.Final; rule 'Final "
            "closing'), or reset with set_l0c_copy_config(is_clean_unit_flag=True)."
        )
    if int(err.a) == LEFTOVER_CROSS_CORE:
        return cross_core_leftover(state, err)
    core, pair = divmod(int(err.b), len(Pipe) ** 2)
    src, dst = divmod(pair, len(Pipe))
    return (
        f"LEFTOVER flag {Pipe(src)}->{Pipe(dst)} event {int(err.c)} on {CORE_NAMES[core]}: set by {_where(int(err.op))} and never waited "
        "for (msSanitizer synccheck reports it as an unpaired set_flag; it changes the state later kernels see).\n"
        f"  Fix: add sync_wait({Pipe(src)}, {Pipe(dst)}, {int(err.c)}) or remove the notify."
    )


def _error(state: State, err, code: Verdict) -> str:
    op = int(err.op)
    where = _where(op) + _loop_text(op, err.loop)
    a, b, c = int(err.a), int(err.b), int(err.c)
    if code is Verdict.SYNC_ERROR:
        cross = cross_core_error(state, err, where)
        if cross is not None:
            return cross
        if a == SYNC_SET_TWICE:
            src, dst = divmod(c, 8)
            return (
                f"SYNC_ERROR at {where}: flag {Pipe(src)}->{Pipe(dst)} event {b} is set while it is still 1 "
                "(setting twice is undefined on hardware, and a later PIPE_ALL barrier hangs).\n"
                "  Fix: wait for the flag before notifying it again, or use another event id."
            )
        return f"SYNC_ERROR at {where}: event_id {b} is outside [0, {c}) on chip {state.chip.name}."
    if code is Verdict.BOUNDS:
        if c == BOUNDS_TRIP_COUNT:
            return (
                f"BOUNDS at {where}: trip count = {a} is outside [0, {b}], the loop's static maximum; it ran "
                f"{min(max(a, 0), b)} iterations.\n  Fix: raise the loop's maximum to at least {a} or sweep smaller counts."
            )
        return f"BOUNDS at {where}: {BOUNDS_WHAT[c]} = {a} is outside [0, {b}]; nothing was read or written."
    if code is Verdict.LAYOUT:
        mode = "GEMV (reads A as ND)" if b else "fractal mode"
        return (
            f"LAYOUT at {where}: m = {a} runs the cube in {mode}, but the A tile holds the other layout.\n"
            "  Fix: keep A in an ND L0A tile exactly when m == 1 (or pass disable_gemv=True on 950)."
        )
    return f"{code.name} at {where}: {MESSAGES[code]}"


def _granule_place(state: State, key: str, lo: int, hi: int) -> str:
    """Where granules lo..hi of a shadow lie: buffer, byte range and the tile or tensor there."""
    if key.startswith("GM:"):
        name = key[3:]
        g = state.gm[name]
        size = np.dtype(g.dtype).itemsize
        per = state.options.gm_granule_bytes
        cols = int(np.prod(g.shape[1:])) if g.ndim > 1 else int(g.shape[0])
        first, last = divmod(lo * per // size, cols), divmod(((hi + 1) * per - 1) // size, cols)
        return f"GM tensor `{name}` granules {lo}..{hi} (elements {first}..{last} as (row, col), {per} B each)"
    buffer = Buffer.UB if key.startswith("UB") else Buffer[key]
    start, end = lo * CHIP_GRANULE_BYTES, (hi + 1) * CHIP_GRANULE_BYTES
    tiles = [t for t in state.tiles if t.buffer is buffer and t.addr < end and start < t.end]
    names = ", ".join(f"`{t.name}`" for t in tiles[-2:]) or "no tile"
    if buffer is Buffer.UB:
        buffer = f"UB of AIV{key[2:]}"
    return f"{buffer} granules {lo}..{hi} (bytes [{start}, {end}), tile {names})"


def _race(state: State, err) -> str:
    kind = int(err.a)
    me, other = sites.site(int(err.op)), sites.site(int(err.b))
    key = state.buffer_codes[int(err.c)]
    place = _granule_place(state, key, int(err.d), int(err.e))
    me_pipe = pipe_name(hazards.gpipe(int(err.core), Pipe(int(err.pipe))))
    other_text = f"{other.op:10s} at {other.location}  pipe {other.core}.{other.pipe}" if other else "an earlier op"
    me_text = f"{me.op:10s} at {me.location}  pipe {me_pipe}{_loop_text(int(err.op), err.loop)}"
    first_label, second_label = {
        RAW: ("write", "read "),
        WAR: ("read ", "write"),
        WAW: ("write", "write"),
        SMALL_TILE: ("write", "read "),
    }[kind]
    lines = [
        f"RACE ({HAZARD_NAMES[kind]}) on {place}",
        f"  {first_label}: {other_text}",
        f"  {second_label}: {me_text}",
    ]
    if kind == SMALL_TILE:
        lines.append(
            "  consecutive mmads accumulate into this L0C region with (m/16)*(n/16) < 10 and no PIPE_M "
            "barrier between them: the cube may overlap them."
        )
        lines.append("  Fix: put sync_pipe('M') (PipeBarrier<PIPE_M>) between the accumulating mmads.")
        return "\n".join(lines)
    lines.append("  nothing orders them: no flag, unit-flag handshake or barrier leads from the first to the second.")
    kinds = {isa.kind_of(other.op) if other else None, isa.kind_of(me.op)}
    if key == "L0C" and {InstrKind.MMAD, InstrKind.L0C_READ} <= kinds:
        lines.append(
            "  Order them with the unit flag on both sides (the last mmad ENABLE_UPDATE / AccPhase.Final, the "
            "fixpipe ENABLE_UPDATE / STPhase.Final), or with sync_notify/sync_wait(M, FIX) and the flag off on "
            "both: a phase on one side only leaves them unordered (seed 000 rule 'pairing')."
        )
    if other is not None and other.core != me.core:
        lines.append(
            f"  Fix: the two ops run on different cores ({other.core}, {me.core}): set_cross_core(pipe={other.pipe}, "
            f"event_id=id) on {other.core} after the {other.op} and wait_cross_core(pipe={me.pipe}, event_id=id) on "
            f"{me.core} before the {me.op} (seed 002)."
        )
    elif other is not None:
        lines.append(
            f"  Fix: sync_notify({other.pipe}, {me.pipe}, id) after the {other.op} and sync_wait({other.pipe}, "
            f"{me.pipe}, id) before the {me.op}"
            + (" (same pipe: a PipeBarrier orders it)" if other.pipe == me.pipe else "")
            + "."
        )
    if not state.options.poison_races:
        lines.append("  Run with poison_races=True (--poison-races) to see the damage as NaN in the outputs.")
    return "\n".join(lines)


def _uninitialized(state: State, err) -> str:
    key = state.buffer_codes[int(err.a)]
    place = _granule_place(state, key, int(err.b), int(err.c))
    where = _where(int(err.op)) + _loop_text(int(err.op), err.loop)
    return (
        f"UNINITIALIZED read by {where}: {place} were never written.\n"
        "  Fix: load or compute that data first, or read only the region you wrote."
    )


_WARNING_TEXT = {
    WARN_DIRECTION: "unit flag on, but the mmad direction does not match this fixpipe's read order (NZ2ND reads N "
    "first: set_mmad_direction('n'); Nz kept reads M first: set_mmad_direction('m')). The result is right, the "
    "unit-flag overlap is lost.",
    WARN_SET_PIPE: "a cross-core set runs on a pipe other than the one of the data op before it; it may signal "
    "before that op's data is out (seed 002: set on FIX after a move out of L0C, on MTE3 after a store or insert, "
    "on V after vector compute).",
    WARN_WAIT_PIPE: "a cross-core wait holds a pipe other than the one of the data op after it; on 950 that op is "
    "not held (seed 002: wait on MTE2 before a GM load, on V before computing on UB a move filled, on MTE1 before "
    "moving L1 -> L0).",
}


def _warnings(state: State) -> list[str]:
    ops = {bit: int(state.warn_op[bit]) for bit in _WARNING_TEXT}
    return [f"{_where(op)}: {_WARNING_TEXT[bit]}" for bit, op in ops.items() if op >= 0]


def report(state: State, index: int | None = None) -> Report:
    """Explain a finished state (one scenario: pass ``index`` for a vmapped batch)."""
    if index is not None:
        state = jax.tree_util.tree_map(lambda x: x[index], state)
    if np.ndim(state.error.code) != 0:
        raise ValueError("this state holds a batch of runs: pass index= to pick one")
    err = jax.tree_util.tree_map(np.asarray, state.error)
    code = Verdict(int(err.code))
    location = op = None
    if code is Verdict.OK:
        message = f"OK (chip {state.chip.name})"
    elif code is Verdict.DEADLOCK:
        message, location, op = _deadlock(state)
    else:
        explain = {Verdict.LEFTOVER: _leftover, Verdict.RACE: _race, Verdict.UNINITIALIZED: _uninitialized}
        message = explain[code](state, err) if code in explain else _error(state, err, code)
        s = sites.site(int(err.op))
        location, op = (s.location, s.op) if s else (None, None)
    return Report(code, message, location, op, _warnings(state), state.chip.name, summary(state), event_table(state))
