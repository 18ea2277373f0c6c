"""Seed 004: the ``asc_mmad`` int8 example kernel (M=48, K=96, N=80), written as in the C-API doc."""

import numpy as np

import ascjax as aj
from ascjax import UnitFlagMode

M, K, N = 48, 96, 80


def asc_mmad_kernel(k: aj.Program):
    a_l1 = k.alloc("L1", (M, K), "int8", name="a_l1")
    b_l1 = k.alloc("L1", (N, K), "int8", name="b_l1")  # B is kept N x K in GM (its transpose)
    a_l0 = k.alloc("L0A", (M, K), "int8", name="a_l0")
    b_l0 = k.alloc("L0B", (K, N), "int8", name="b_l0")
    c_l0 = k.alloc("L0C", (M, N), "int32", name="c_l0")

    k.copy_gm2l1_nd2nz(a_l1, "a")
    k.copy_gm2l1_nd2nz(b_l1, "b")
    k.sync_notify("MTE2", "MTE1", 0)
    k.sync_wait("MTE2", "MTE1", 0)
    k.copy_l12l0a(a_l0, a_l1)
    k.copy_l12l0b(b_l0, b_l1)  # Nz(B^T) is Zn(B): a plain copy
    k.sync_notify("MTE1", "M", 0)
    k.sync_wait("MTE1", "M", 0)
    k.mmad(
        c_l0,
        a_l0,
        b_l0,
        M,
        K,
        N,
        unit_flag_mode=UnitFlagMode.DISABLE,
        disable_gemv=True,
        c_matrix_source=False,
        c_matrix_init_val=True,
    )
    k.sync_notify("M", "FIX", 0)
    k.sync_wait("M", "FIX", 0)
    k.copy_l0c2gm("output", c_l0, m=M, n=N, unit_flag_mode=UnitFlagMode.DISABLE)
    k.sync_pipe("ALL")


def seed_inputs():
    """The seed's input formulas: a[row, k] = (row + 2k) % 5 - 2, b[col, k] = (3col + k) % 7 - 3."""
    row, kk = np.meshgrid(np.arange(M), np.arange(K), indexing="ij")
    a = ((row + 2 * kk) % 5 - 2).astype(np.int8)
    col, kk = np.meshgrid(np.arange(N), np.arange(K), indexing="ij")
    b = ((3 * col + kk) % 7 - 3).astype(np.int8)
    return {"a": a, "b": b}


def golden(inputs):
    """golden[row, col] = sum_k a[row, k] * b[col, k], in int32."""
    return {"output": inputs["a"].astype(np.int32) @ inputs["b"].astype(np.int32).T}


@aj.case
def seed004_int8():
    """Seed 004's int8 example: bit-exact against its golden formula."""
    return aj.Case(
        kernel=asc_mmad_kernel,
        inputs=seed_inputs(),
        outputs={"output": ((M, N), "int32")},
        reference=golden,
        chip="950",
    )
