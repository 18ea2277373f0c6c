"""Loops whose iterations use the on-chip buffers privately: the ones the data plane may compute as one ``vmap``.

A loop's iterations can be computed apart, each from the buffers as they were before the loop, where

- no iteration reads an on-chip byte that an earlier iteration wrote and it has not written itself first (every
  tile it reads it loads, computes, or finds as the loop found it), and
- the last iteration writes every on-chip byte any iteration writes, so the buffers after the loop are the last
  iteration's.

GM takes no part: the data plane carries GM through the loop's iterations in order (``scan_lowered``). A concrete
record holds every access as an exact atom run, with whether it happens (an mmad that starts from
``c_matrix_init_val`` reads nothing of L0C), so it decides this for each run of each loop; a traced record (a
sweep's scenarios) decides nothing. The tiled matmul's output-tile loops pass; its K loop (L0C accumulates) does not.
"""

from __future__ import annotations

import jax
import numpy as np

from ._record import GM_SPACE_PREFIX, Record


class PrivateLoops:
    """The loops of a record whose iterations use the on-chip buffers privately (``ids``; static and hashable), and
    where each of the front end's issues finds its loops: by its tag (``loops_of``, from ``Template.tags``)."""

    def __init__(self, ids: frozenset, loops_of: dict):
        self.ids = ids
        self.loops_of = loops_of
        self._key = (ids, tuple(sorted(loops_of.items(), key=repr)))
        self._hash = hash(self._key)  # a compiled data plane's static argument: hashed at every call

    @classmethod
    def common(cls, each: list) -> PrivateLoops | None:
        """The loops private in every one of ``each`` (records of one template: a launch's blocks, traced as one
        data plane); None where one of them decided nothing."""
        if not each or any(p is None for p in each):
            return None
        return cls(frozenset.intersection(*(p.ids for p in each)), each[0].loops_of)

    def __hash__(self):
        return self._hash

    def __eq__(self, other):
        return isinstance(other, PrivateLoops) and self._key == other._key

    def private(self, tags, depth: int) -> bool:
        """Whether the loop at nesting ``depth`` around the issues ``tags`` (every issue its body traced) is private:
        the issues name one loop of the record there, and it is."""
        ids = {self.loops_of[tag][depth] if len(self.loops_of.get(tag, ())) > depth else None for tag in tags}
        return len(ids) == 1 and ids <= self.ids


def private_loops(record: Record) -> PrivateLoops | None:
    """The private loops of a concrete ``record`` (None where its operands are traced)."""
    operands = record.operands
    if any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(operands)):
        return None
    t = record.template
    op = {name: np.asarray(x) for name, x in operands.items()}
    on_chip = ~np.asarray([s.name.startswith(GM_SPACE_PREFIX) for s in t.spaces], bool)[t.atom_space]
    accesses = [_touches(t, op, False, on_chip), _touches(t, op, True, on_chip)]
    inst, atom, is_write = (np.concatenate([a[i] for a in accesses]) for i in range(3))
    shared = _shared_spaces(t)  # the data plane keeps a tile by its name: bytes two tiles share stay in order
    keep = ~np.isin(t.atom_space[atom], shared)
    shared_inst = np.unique(inst[~keep])
    inst, atom, is_write = inst[keep], atom[keep], is_write[keep]
    n_loops = 1 + max((max(loops) for loops in t.loops if loops), default=-1)
    ids = frozenset(lid for lid in range(n_loops) if _private(t, lid, inst, atom, is_write, shared_inst))
    return PrivateLoops(ids, {tag: t.loops[e] for e, tag in enumerate(t.tags) if tag is not None})


def _touches(t, op: dict, write: bool, on_chip: np.ndarray):
    """Every on-chip atom each instance reads (or writes) as (instance, atom, is-write) arrays."""
    prefix = "wr" if write else "rd"
    valid = (t.write_valid if write else t.read_valid) & op[f"{prefix}_ok"] & op[f"{prefix}_on"] & op["enable"][:, None]
    inst, slot = np.nonzero(valid)
    lo, hi = op[f"{prefix}_lo"][inst, slot].astype(np.int64), op[f"{prefix}_hi"][inst, slot].astype(np.int64)
    count = np.maximum(hi - lo, 0)
    inst = np.repeat(inst, count)
    atom = np.repeat(lo, count) + (np.arange(count.sum()) - np.repeat(np.cumsum(count) - count, count))
    keep = on_chip[atom]
    return inst[keep], atom[keep], np.full(int(keep.sum()), write)


def _shared_spaces(t) -> np.ndarray:
    """The spaces in which two named tiles share bytes (a tile allocated where a freed one was)."""
    shared = set()
    for space in {r[0] for r in t.regions}:
        spans = sorted({(lo, hi, name) for s, lo, hi, name in t.regions if s == space})
        end, owner = -1, None  # the furthest end so far, and its tile
        for lo, hi, name in spans:
            if lo < end and name != owner:
                shared.add(space)
            end, owner = (hi, name) if hi > end else (end, owner)
    return np.asarray(sorted(shared), np.int64)


def _private(t, lid: int, inst, atom, is_write, shared_inst) -> bool:
    """Whether every run of loop ``lid`` uses the on-chip buffers privately (the module's two conditions), touching
    no bytes two tiles share (``shared_inst``: the instances that do)."""
    depth_of = np.asarray([loops.index(lid) if lid in loops else -1 for loops in t.loops])
    depth = depth_of[t.entry]
    members = np.flatnonzero(depth >= 0)
    if not members.size or np.isin(shared_inst, members).any():
        return False
    d = int(depth[members[0]])
    if np.unique(t.core[members]).size != 1:  # one core's program order is the data plane's
        return False
    runs = np.unique(t.iteration[members, :d], axis=0, return_inverse=True)[1].reshape(-1) if d else 0 * members
    run_of = np.full(t.n_instances, -1)
    run_of[members] = runs
    last = np.full(runs.max() + 1, -1)
    np.maximum.at(last, runs, t.iteration[members, d])
    mine = run_of[inst] >= 0
    inst, atom, is_write = inst[mine], atom[mine], is_write[mine]
    run, it = run_of[inst], t.iteration[inst, d]
    # each (run, iteration, atom)'s accesses in program order, an instance's reads before its writes
    order = np.lexsort((is_write, t.pidx[inst], atom, it, run))
    run, it, atom, is_write = run[order], it[order], atom[order], is_write[order]
    first = np.ones(run.size, bool)
    first[1:] = (run[1:] != run[:-1]) | (it[1:] != it[:-1]) | (atom[1:] != atom[:-1])
    exposed = first & ~is_write  # read before the iteration wrote it
    n_atoms = t.n_atoms
    cell = run * n_atoms + atom
    first_write = np.full((runs.max() + 1) * n_atoms, np.iinfo(np.int64).max)
    np.minimum.at(first_write, cell[is_write], it[is_write])
    if np.any(first_write[cell[exposed]] < it[exposed]):
        return False
    written = np.unique(cell[is_write])
    by_last = np.unique(cell[is_write & (it == last[run])])
    return written.size == by_last.size
