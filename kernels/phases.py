"""Seed 000's K-split matmul in PyPTO-Pro style: ``matmul`` / ``matmul_acc`` with AccPhase, ``store`` with STPhase.

Phases are parameters (0 = no phase, 2 = Partial, 3 = Final) so that one compiled kernel
sweeps all 81 (first, middle, last, store) combinations under ``vmap``; without a phase the
framework's M -> FIX software sync is modelled (see ``ascjax.ops.pypto``).
"""

import jax.numpy as jnp
import numpy as np

import ascjax as aj
from ascjax import AccPhase, STPhase

M, N, K_TOTAL, TILE_K = 64, 64, 512, 64
STEPS = K_TOTAL // TILE_K
NONE = 0


def kloop_kernel(
    k: aj.Program,
    first=AccPhase.Partial,
    middle=AccPhase.Partial,
    last=AccPhase.Final,
    store=STPhase.Final,
    steps=STEPS,
    max_steps: int = STEPS,
):
    """``steps`` K steps (traced allowed, at most the static ``max_steps``; A and B hold ``max_steps`` tiles of K)."""
    a_l1 = k.alloc("L1", (M, TILE_K), "float16", name="a_l1")
    b_l1 = k.alloc("L1", (TILE_K, N), "float16", name="b_l1")
    al = k.alloc("L0A", (M, TILE_K), "float16", name="al")
    br = k.alloc("L0B", (TILE_K, N), "float16", name="br")
    ac = k.alloc("L0C", (M, N), "float32", name="ac")
    k.set_mmad_direction("n")
    k.sync_notify("MTE1", "MTE2", 0)
    k.sync_notify("M", "MTE1", 0)

    def step(i):
        k.sync_wait("MTE1", "MTE2", 0)
        k.copy_gm2l1_nd2nz(a_l1, "a", col=i * TILE_K)
        k.copy_gm2l1_nd2nz(b_l1, "b", row=i * TILE_K)
        k.sync_notify("MTE2", "MTE1", 0)
        k.sync_wait("MTE2", "MTE1", 0)
        k.sync_wait("M", "MTE1", 0)
        k.copy_l12l0a(al, a_l1)
        k.copy_l12l0b(br, b_l1, transpose=True)
        k.sync_notify("MTE1", "MTE2", 0)
        k.sync_notify("MTE1", "M", 0)
        k.sync_wait("MTE1", "M", 0)
        k.cond(
            i == 0,
            lambda: k.matmul(ac, al, br, phase=first),  # first block
            lambda: k.matmul_acc(ac, ac, al, br, phase=_pick(i, steps, middle, last)),  # middle / last blocks
        )
        k.sync_notify("M", "MTE1", 0)

    k.range(max_steps, step, count=steps)
    k.sync_wait("MTE1", "MTE2", 0)
    k.sync_wait("M", "MTE1", 0)
    k.store("out", ac, [0, 0], phase=store)


def _pick(i, steps, middle, last):
    """The middle blocks' phase, or the last block's."""
    return jnp.where(i < steps - 1, middle, last)


def _inputs():
    rng = np.random.default_rng(11)
    return {
        "a": rng.uniform(-1, 1, (M, K_TOTAL)).astype(np.float16),
        "b": rng.uniform(-1, 1, (K_TOTAL, N)).astype(np.float16),
    }


def _reference(inputs):
    return {"out": inputs["a"].astype(np.float64) @ inputs["b"].astype(np.float64)}


def phase_case(first, middle, last, store, expect="ok") -> aj.Case:
    return aj.Case(
        kernel=kloop_kernel,
        inputs=_inputs(),
        outputs={"out": ((M, N), "float32")},
        params={"first": first, "middle": middle, "last": last, "store": store},
        reference=_reference if expect == "ok" else None,
        atol=1e-3,
        expect=aj.Verdict.parse(expect),
    )


@aj.case
def kloop_recipe():
    """Seed 000 K-split recipe: Partial, Partial..., Final; store Final -> ok."""
    return phase_case(AccPhase.Partial, AccPhase.Partial, AccPhase.Final, STPhase.Final)


@aj.case
def kloop_no_phase():
    """No phase anywhere: the framework's M -> FIX sync orders the store -> ok."""
    return phase_case(NONE, NONE, NONE, NONE)


@aj.case
def seed000_error2():
    """Seed 000 error 2: K-loop Partial...Final, store() without phase -> race (RAW on L0C)."""
    return phase_case(AccPhase.Partial, AccPhase.Partial, AccPhase.Final, NONE, expect="race")


@aj.case
def two_tile_pattern_with_eight_tiles():
    """Seed 000's flash-attention pattern (Partial for k == 0, Final otherwise) used with 8 K tiles -> deadlock."""
    return phase_case(AccPhase.Partial, AccPhase.Final, AccPhase.Final, STPhase.Final, expect="deadlock")
