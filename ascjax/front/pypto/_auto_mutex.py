"""``auto_mutex``: the buffer-id locks PyPTO-Pro inserts around every operation on a tile-group slot with
``mutex_ids``, placed as its parser places them (``_emit_auto_mutex`` in ``pypto_pro/language/parser``).

Before an operation, each distinct slot among its tile arguments is locked on the operation's pipe with the id
``mutex_ids[slot]`` (each of its ids, where a slot has a list); after it, unlocked on the same pipe. A matmul or store given a phase skips its Acc tiles
(the unit flag is their handshake); an id the call locks already is not locked again. The mutex then hands each slot from pipe to pipe in the order the scalar
unit issues the operations, which is the sync the kernel leaves out. The inserted instructions read, in sites
and reports, as ``mutex_lock of tile group `x`, inserted by auto_mutex`` at the line of the access they guard.
"""

from __future__ import annotations

import weakref

import jax.numpy as jnp

from ...core import Buffer, Pipe
from .. import _sites as sites
from .._program import current
from .._tile_group import TileSlot

#: per Program being traced: tile group name -> its mutex ids (a tuple of ids per slot)
_MUTEX_IDS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
#: the operations whose phase hands their Acc tiles to the unit flag instead (PyPTO-Pro's phase-aware skip)
_PHASED = frozenset({"matmul", "matmul_acc", "matmul_mx", "matmul_mx_acc", "store", "store_tile"})
#: pipes by operation (PyPTO-Pro's op pipes: the CCE backend's table); vector operations run on V
_OP_PIPES = {"load": Pipe.MTE2, "load_tile": Pipe.MTE2, "insert": Pipe.MTE3, "matmul": Pipe.M,
             "matmul_acc": Pipe.M, "matmul_mx": Pipe.M, "matmul_mx_acc": Pipe.M}  # fmt: skip
#: a move's pipe by (source, destination) buffer (PyPTO-Pro's ``get_move_pipe``)
_MOVE_PIPES = {(Buffer.L0C, Buffer.UB): Pipe.FIX, (Buffer.UB, Buffer.L1): Pipe.MTE3, (Buffer.L1, Buffer.UB): Pipe.V}
_L1_TO_CUBE = (Buffer.L0A, Buffer.L0B, Buffer.BT, Buffer.SCALE_LEFT, Buffer.SCALE_RIGHT)


def register(group_name: str, mutex_ids) -> None:
    """The slots of tile group ``group_name`` (in the kernel being traced) lock ``mutex_ids[slot]``: one id, or a
    list of ids of the same length for every slot (each locked in its order)."""
    per_slot = [tuple(int(i) for i in ids) if isinstance(ids, (list, tuple)) else (int(ids),) for ids in mutex_ids]
    if len({len(ids) for ids in per_slot}) > 1 or not all(per_slot):
        raise ValueError(
            f"rule 'mutex ids': the slots of tile group `{group_name}` take one mutex id each, or lists of one length, "
            f"got mutex_ids={list(mutex_ids)}"
        )
    _MUTEX_IDS.setdefault(current(), {})[group_name] = tuple(per_slot)


def _pipe(name: str, tiles: list) -> Pipe:
    """The pipe operation ``name`` runs on, given its tile arguments in order (PyPTO-Pro's rule)."""
    if name in ("store", "store_tile"):
        return Pipe.FIX if tiles[0].buffer is Buffer.L0C else Pipe.MTE3
    if name == "move":
        dst, src = tiles[0].buffer, tiles[1].buffer
        if src is Buffer.L1 and dst in _L1_TO_CUBE:
            return Pipe.MTE1
        return _MOVE_PIPES.get((src, dst), Pipe.FIX if src is Buffer.L1 else Pipe.V)
    return _OP_PIPES.get(name, Pipe.V)


def _slots(name: str, args: tuple, kwargs: dict) -> list[tuple[TileSlot, tuple]]:
    """The tile-group slots among the positional arguments that lock, with their group's mutex ids."""
    groups = _MUTEX_IDS.get(current(), {})
    phased = name in _PHASED and kwargs.get("phase") is not None
    return [
        (arg, groups[arg.name])
        for arg in args
        if isinstance(arg, TileSlot) and arg.name in groups and not (phased and arg.buffer is Buffer.L0C)
    ]


def guarded(name: str, args: tuple, kwargs: dict, run):
    """``run()`` with the locks auto_mutex inserts around operation ``name`` on ``args``."""
    slots = _slots(name, args, kwargs)
    if not slots:
        return run()
    k = current()
    pipe = _pipe(name, [a for a in args if hasattr(a, "buffer")])
    locks = []  # (slot, mutex id, whether the id differs from every earlier one of the call)
    for slot, ids in slots:
        table = jnp.asarray(ids, jnp.int32)  # [depth, ids a slot]
        for j in range(table.shape[1]):
            mutex_id = table[slot.slot, j]
            earlier = [other for _, other, _ in locks]
            fresh = jnp.all(jnp.stack([mutex_id != other for other in earlier])) if earlier else True
            locks.append((slot, mutex_id, fresh))

    def each(verb: str) -> None:
        for slot, mutex_id, fresh in locks:
            with sites.spelled(f"mutex_{verb} of tile group `{slot.name}`, inserted by auto_mutex"):
                issue = getattr(k, f"mutex_{verb}")
                if fresh is True:
                    issue(pipe, mutex_id)
                else:  # one id twice in an operation (a slot twice, or groups sharing ids) locks once, as PyPTO-Pro
                    k.cond(fresh, lambda issue=issue, mutex_id=mutex_id: issue(pipe, mutex_id))

    each("lock")
    out = run()
    each("unlock")
    return out
