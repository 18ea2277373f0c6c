"""The kernel-writing facade: holds the current state at trace time so kernels read like Ascend C.

``k.mmad(c, a, b, m, k, n, ...)`` is ``k.state = ops.mmad(k.state, c, a, b, m, k, n, ...)``; the
kernel as a whole stays a pure function of its arrays. Loops written with :meth:`Program.range`
are ``lax.scan``s, so they compile once whatever their trip count.
"""

from __future__ import annotations

import functools

import equinox as eqx
import jax
import jax.numpy as jnp

from . import ops, sites
from .chip import Chip
from .memory import Allocator, Tile
from .state import MAX_LOOP_DEPTH, State


def _issue(op):
    @functools.wraps(op)
    def method(self, *args, **kwargs):
        self.state = op(self.state, *args, **kwargs)

    return method


class Program:
    """One AI Core program being traced: its allocator and the state its ops thread."""

    def __init__(self, chip: Chip, state: State):
        self.chip = chip
        self.state = state
        self.allocator = Allocator(chip)
        self._depth = 0

    # -- static allocation -------------------------------------------------------------
    def alloc(self, buffer, shape, dtype, *, fmt=None, addr=None, name=None) -> Tile:
        """Place a tile (checked at trace time: alignment, capacity, overlap, format)."""
        tile = self.allocator.alloc(buffer, shape, dtype, fmt=fmt, addr=addr, name=name)
        self.state = self.state.add_tile(tile)
        return tile

    def free(self, tile: Tile) -> None:
        """End a tile's live range so its bytes may be reused."""
        self.allocator.free(tile)

    # -- ops (see ascjax.ops) ----------------------------------------------------------
    copy_gm2l1 = _issue(ops.copy_gm2l1)
    copy_gm2l1_nd2nz = _issue(ops.copy_gm2l1_nd2nz)
    copy_l12l0a = _issue(ops.copy_l12l0a)
    copy_l12l0b = _issue(ops.copy_l12l0b)
    copy_l12bt = _issue(ops.copy_l12bt)
    mmad = _issue(ops.mmad)
    fixpipe = _issue(ops.fixpipe)
    copy_l0c2gm = _issue(ops.fixpipe)
    set_l0c_copy_config = _issue(ops.set_l0c_copy_config)
    set_mmad_direction = _issue(ops.set_mmad_direction)
    set_ctrl_saturation = _issue(ops.set_ctrl_saturation)
    sync_notify = _issue(ops.sync_notify)
    sync_wait = _issue(ops.sync_wait)
    sync_pipe = _issue(ops.sync_pipe)
    # PyPTO-Pro spellings with phases and the framework's auto M -> FIX sync
    matmul = _issue(ops.matmul)
    matmul_acc = _issue(ops.matmul_acc)
    store = _issue(ops.store)

    def gm(self, name: str) -> jax.Array:
        """The current contents of a GM tensor."""
        return self.state.gm[name]

    # -- loops -------------------------------------------------------------------------
    def _traced(self, state: State, fn, where: str) -> State:
        """Run ``fn()`` with ``state`` as the current state (inside a scan or cond body); return the new state."""
        before = jax.tree_util.tree_structure(state)
        outer, self.state = self.state, state
        try:
            fn()
            new = self.state
        finally:
            self.state = outer
        if jax.tree_util.tree_structure(new) != before:
            raise ValueError(
                f"the {where} body changed the state's structure: allocate tiles (k.alloc) before the {where}, "
                "not inside it"
            )
        return new

    def range(self, n: int, body) -> None:
        """Run ``body(i)`` for i in [0, n) as one ``lax.scan`` (the body is traced once)."""
        if not isinstance(n, int) or n < 0:
            raise ValueError(f"Program.range needs a static trip count >= 0, got {n!r}")
        if self._depth >= MAX_LOOP_DEPTH:
            raise ValueError(f"loops nest at most {MAX_LOOP_DEPTH} deep")
        depth = self._depth

        def step(state, i):
            state = eqx.tree_at(lambda s: s.loop, state, state.loop.at[depth].set(i))
            self._depth += 1
            try:
                with sites.loop_scope():
                    return self._traced(state, lambda: body(i), "loop"), None
            finally:
                self._depth -= 1

        self.state, _ = jax.lax.scan(step, self.state, jnp.arange(n, dtype=jnp.int32))

    def cond(self, pred, then, otherwise=None) -> None:
        """``if pred: then() else: otherwise()`` on a traced predicate (a ``lax.cond``).

        Both branches are traced once; under ``vmap`` both run and the state is selected.
        """

        def branch(fn):
            return lambda state: self._traced(state, fn or (lambda: None), "branch")

        self.state = jax.lax.cond(jnp.asarray(pred), branch(then), branch(otherwise), self.state)
