"""Host-side explanations of cross-core events: stuck waits, leftover signals, misuse, and the event table.

The table is seed 002's checklist done for the user: per event id and core, how many sets
and waits ran, on which pipes and in which modes, and whether every signal was consumed.
"""

from __future__ import annotations

import jax
import numpy as np

from . import sites
from .core import CORE_NAMES, SYNC_CROSS_MODE, SYNC_CROSS_PENDING, Pipe, SyncMode, pipe_name
from .state import WaitKind

_FIX_HINT = (
    "set_cross_core after the producer's last write, wait_cross_core before the consumer's first read, with the "
    "same event_id and sync_mode on both sides"
)


def _where(op_id: int) -> str:
    s = sites.site(op_id)
    return f"{s.op} at {s.location}" if s else "no op"


def _bits(mask: int, names) -> str:
    return "/".join(str(n) for i, n in enumerate(names) if int(mask) >> i & 1) or "-"


def _mode_names(mask: int) -> str:
    return _bits(mask, [m.name for m in SyncMode])


def _pipe_names(mask: int) -> str:
    return _bits(mask, list(Pipe))


def cross_core_wait_lines(state, w, p) -> list[str]:
    """What a pipe stuck on ``wait_cross_core`` waits for, who could have set it, and the fix."""
    xc = jax.tree_util.tree_map(np.asarray, state.xc)
    core = int(p) // len(Pipe)
    mode, ev = SyncMode(int(w.value[p])), int(w.count[p])
    senders = sorted({int(w.lo[p]), int(w.hi[p])})
    names = " and ".join(CORE_NAMES[s] for s in senders)
    lines = [f"  waits for cross-core event {ev} ({mode.name}) from {names}."]
    if len(senders) > 1:
        lines.append("  (INTRA_BLOCK: a cube wait needs a set from each of the two AIVs.)")
    for s in senders:
        sets = int(xc.n_set[s, ev])
        left = int(xc.count[core, s, ev])
        stuck = [q for q in range(s * len(Pipe), (s + 1) * len(Pipe)) if int(w.op[q]) >= 0]
        if left:
            continue
        if stuck:
            lines.append(
                f"  {CORE_NAMES[s]} is itself stuck (see its entry), so its set never comes: "
                "a wait cycle between the cores."
            )
        elif sets == 0:
            lines.append(f"  {CORE_NAMES[s]} never ran set_cross_core(event_id={ev}) on any path.")
        else:
            lines.append(
                f"  {CORE_NAMES[s]} set event {ev} {sets} time(s) and every signal was consumed by an "
                "earlier wait: waits outnumber sets."
            )
    if state.chip.cross_core_wait_blocks_core:
        lines.append(
            f"  On chip {state.chip.name} a cross-core wait holds every pipe of {CORE_NAMES[core]}, so "
            "nothing after it on this core ran."
        )
    lines.append(
        "  Fix: "
        + _FIX_HINT
        + ". A RELEASE wait on a slot's first use needs a pre-posted RELEASE before the loop or a cold-start skip "
        "(seed 002: n+1 RELEASE sets and waits per slot used n times)."
    )
    return lines


def wait_chain(state) -> str | None:
    """The chain of cross-core waits between stuck cores, closing a cycle or ending at a core that never sets."""
    w = jax.tree_util.tree_map(np.asarray, state.wait)
    xc = jax.tree_util.tree_map(np.asarray, state.xc)
    n = len(Pipe)
    stuck = {}  # core -> (global pipe, event, senders still missing)
    for g in np.argsort(w.seq, kind="stable"):
        if int(w.op[g]) < 0 or int(w.kind[g]) != WaitKind.CROSS_CORE or int(g) // n in stuck:
            continue
        core, ev = int(g) // n, int(w.count[g])
        senders = [s for s in sorted({int(w.lo[g]), int(w.hi[g])}) if int(xc.count[core, s, ev]) == 0]
        stuck[core] = (int(g), ev, senders)
    if not stuck:
        return None
    core, seen, parts = next(iter(stuck)), [], []
    while core in stuck and core not in seen:
        seen.append(core)
        g, ev, senders = stuck[core]
        names = "/".join(CORE_NAMES[s] for s in senders) or "-"
        parts.append(f"{pipe_name(g)} waits for event {ev} from {names}")
        nxt = [s for s in senders if s in stuck]
        if not nxt:
            return "  wait-for chain: " + " -> ".join(parts) + f"; {names} never sets it: no core can progress."
        core = nxt[0]
    back = pipe_name(stuck[core][0])
    return "  wait-for chain: " + " -> ".join(parts) + f" -> back to {back}: a cycle, no core can progress."


def cross_core_leftover(state, err) -> str:
    recv, send = divmod(int(err.b), 3)
    ev, count = int(err.c), int(err.d)
    return (
        f"LEFTOVER cross-core event {ev}: {CORE_NAMES[send]} -> {CORE_NAMES[recv]} still holds "
        f"{count} signal(s) at the end; last set by {_where(int(err.op))}.\n"
        f"  Fix: every set must be consumed on every path: wait for it on {CORE_NAMES[recv]} (e.g. drain "
        "the last RELEASE / ACK after the loop), or skip the set where no one waits (seed 002, 'execution counts')."
    )


def cross_core_error(state, err, where: str) -> str | None:
    """The message of a cross-core SYNC_ERROR, or None for other kinds."""
    a, ev = int(err.a), int(err.b)
    if a == SYNC_CROSS_PENDING:
        recv = CORE_NAMES[int(err.d)]
        cap = state.chip.cross_core_max_count
        model = "bit semantics: the second set is lost" if cap == 1 else f"a counter of at most {cap}"
        return (
            f"SYNC_ERROR at {where}: cross-core event {ev} for {recv} still holds {int(err.c)} unconsumed signal(s) "
            f"(from {_where(int(err.e))}), and chip {state.chip.name} is modelled with {model}.\n"
            "  On hardware the signals merge and the consumer later waits forever (tilelang-ascend #1809), or the "
            "counter overflows. Fix: wait for the consumer's RELEASE / ACK before setting again (backpressure), or "
            "give each channel and each ping-pong slot its own event id."
        )
    if a == SYNC_CROSS_MODE:
        return (
            f"SYNC_ERROR at {where}: cross-core event {ev} is used with sync_mode {SyncMode(int(err.c)).name} here "
            f"and {SyncMode(int(err.d)).name} by {_where(int(err.e))}.\n"
            "  Fix: set and wait of one event id must use the same sync_mode (seed 002)."
        )
    return None


def event_table(state) -> str:
    """Per event id and core: sets, waits, pipes, modes, signals left. Empty when no cross-core event ran."""
    xc = jax.tree_util.tree_map(np.asarray, state.xc)
    held = xc.count.sum(axis=1) > 0  # [receiver, id]: signals waiting to be consumed
    active = np.argwhere((xc.n_set > 0) | (xc.n_wait > 0) | held)
    if not active.size:
        return ""
    rows = [("event", "core", "sets", "waits", "set pipes", "wait pipes", "modes", "signals left")]
    for core, ev in sorted(active.tolist(), key=lambda x: (x[1], x[0])):
        left = int(xc.count[core, :, ev].sum())
        rows.append(
            (
                str(ev),
                CORE_NAMES[core],
                str(int(xc.n_set[core, ev])),
                str(int(xc.n_wait[core, ev])),
                _pipe_names(xc.set_pipes[core, ev]),
                _pipe_names(xc.wait_pipes[core, ev]),
                _mode_names(xc.modes[core, ev]),
                str(left) + (" (to be consumed here)" if left else ""),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    text = ["  ".join(c.ljust(wd) for c, wd in zip(r, widths)).rstrip() for r in rows]
    return "cross-core events:\n  " + "\n  ".join(text)
