"""The data plane's order within a core against the device's (semantics §8, decoupled issue).

Semantics §8's test vector: mmad; mmad; fixpipe; fixpipe on one L0C tile with unit-flag mode 3 is OK,
because the second mmad waits until the first fixpipe drains the flag. On the device the first fixpipe
therefore stores the first product, and so does ascjax: the data plane computes each window of issues
in the order the control plane ran them (``ascjax.engine.emit_order``). Where no order of windows can
(the second mmad inside a ``k.cond``, its own window), the run says its outputs are not the device's,
names both instructions, and golden data is refused. Its twin, issued in the order it runs, is exact.
"""

import numpy as np
import pytest

import ascjax as aj
from ascjax import golden

UPDATE = aj.UnitFlagMode.ENABLE_UPDATE
OUTPUTS = {"out0": ((32, 32), "float32"), "out1": ((32, 32), "float32")}


def _staged(k, a_rows: int):
    """GM a (a_rows x 32) and b (32 x 32) in L1 and b in L0B, with the 32 x 32 L0C tile: (a1, b1, b, c)."""
    a1, b1 = k.alloc("L1", (a_rows, 32), "float16"), k.alloc("L1", (32, 32), "float16")
    b = k.alloc("L0B", (32, 32), "float16")
    c = k.alloc("L0C", (32, 32), "float32")
    k.copy_gm2l1_nd2nz(a1, "a")
    k.copy_gm2l1_nd2nz(b1, "b")
    k.sync_notify("MTE2", "MTE1", 0)
    k.sync_wait("MTE2", "MTE1", 0)
    k.copy_l12l0b(b, b1, transpose=True)
    return a1, b1, b, c


def _two_products(k, in_run_order=False, second_in_cond=False):
    """out0 := a @ b and out1 := b @ b through one L0C tile, the unit flag between each mmad and its fixpipe."""
    a1, b1, b, c = _staged(k, 32)
    a, a2 = k.alloc("L0A", (32, 32), "float16"), k.alloc("L0A", (32, 32), "float16")
    k.copy_l12l0a(a, a1)
    k.copy_l12l0a(a2, b1)
    k.sync_notify("MTE1", "M", 0)
    k.sync_wait("MTE1", "M", 0)
    k.mmad(c, a, b, 32, 32, 32, unit_flag_mode=UPDATE, c_matrix_init_val=True)
    if in_run_order:
        k.fixpipe("out0", c, unit_flag_mode=UPDATE)
    second = lambda: k.mmad(c, a2, b, 32, 32, 32, unit_flag_mode=UPDATE, c_matrix_init_val=True)  # noqa: E731
    if second_in_cond:  # a window of its own
        k.cond(True, second)
    else:
        second()  # waits for out0's fixpipe
    if not in_run_order:
        k.fixpipe("out0", c, unit_flag_mode=UPDATE)
    k.fixpipe("out1", c, unit_flag_mode=UPDATE)


def _inputs():
    rng = np.random.default_rng(7)
    return {name: rng.standard_normal((32, 32)).astype(np.float16) for name in ("a", "b")}


def _reference(inputs):
    a, b = (inputs[name].astype(np.float32) for name in ("a", "b"))
    return {"out0": a @ b, "out1": b @ b}


def _run(jit=True, **params):
    return aj.run(_two_products, _inputs(), OUTPUTS, params=params, jit=jit)


def _assert_device_outputs(result):
    assert result.ok and result.device_outputs
    assert not any("not the device's" in w for w in result.report().warnings)
    for name, want in _reference(_inputs()).items():
        np.testing.assert_allclose(np.asarray(result.outputs[name]), want, rtol=1e-5, atol=1e-5, err_msg=name)


def test_a_kernel_issued_in_the_order_it_runs_gives_the_device_outputs():
    _assert_device_outputs(_run(in_run_order=True))


@pytest.mark.parametrize("jit", [True, False])
def test_the_data_plane_computes_a_core_in_the_order_sync_ran_it(jit):
    """The second mmad is issued before the first fixpipe and runs after it (the unit flag holds it)."""
    result = _run(jit=jit, in_run_order=False)
    t = result.record.template
    (_, mmad), (fixpipe, _) = (np.flatnonzero([e[0] == name for e in t.entries]) for name in ("mmad", "fixpipe"))
    start, end = np.asarray(result.control.start), np.asarray(result.control.end)
    drained = end - np.asarray(result.record.operands["flight_cycles"])  # the fixpipe's GM write is in flight
    assert start[t.entry == mmad] > drained[t.entry == fixpipe]  # the second mmad starts after the first drain
    _assert_device_outputs(result)


def test_an_order_no_window_can_follow_is_reported_with_both_lines():
    result = _run(in_run_order=False, second_in_cond=True)
    assert result.ok  # the kernel is right on the device
    assert not result.device_outputs
    (text,) = [w for w in result.report().warnings if "not the device's" in w]
    assert text.startswith("the outputs are not the device's: fixpipe at tests/test_data_order.py:51 ran before ")
    assert "mmad at tests/test_data_order.py:45" in text
    assert "Issue fixpipe before mmad in the kernel" in text


def test_golden_data_of_outputs_that_are_not_the_device_s_is_refused(tmp_path):
    params = {"in_run_order": False, "second_in_cond": True}
    case = aj.Case(_two_products, _inputs(), OUTPUTS, params=params, name="two_products")
    with pytest.raises(ValueError, match="the outputs are not the device's: fixpipe at .* No golden data was written"):
        golden.write_golden(case, tmp_path)
    assert not list(tmp_path.iterdir())
    twin = aj.Case(_two_products, _inputs(), OUTPUTS, params={"in_run_order": True}, name="two_products")
    assert {t["name"] for t in golden.write_golden(twin, tmp_path)["tensors"]} >= {"out0", "out1"}


TILES = 4


def _pipelined(k):
    """out rows 32 i.. := a_i @ b for four 32-row tiles a_i through one L0C tile, software-pipelined: in the
    loop, the mmad of tile i + 1 is issued before the fixpipe of tile i, and the unit flag holds it until that
    fixpipe has drained L0C."""
    a1, _, b, c = _staged(k, TILES * 32)
    a = k.tile_group("L0A", (32, 32), "float16", TILES)
    for i in range(TILES):
        k.copy_l12l0a(a[i], a1, row=32 * i)
    k.sync_notify("MTE1", "M", 0)
    k.sync_wait("MTE1", "M", 0)
    k.mmad(c, a[0], b, 32, 32, 32, unit_flag_mode=UPDATE, c_matrix_init_val=True)

    def step(i):
        k.mmad(c, a[i + 1], b, 32, 32, 32, unit_flag_mode=UPDATE, c_matrix_init_val=True)  # tile i + 1
        k.fixpipe("out", c, dst_row=32 * i, unit_flag_mode=UPDATE)  # tile i

    k.range(TILES - 1, step)
    k.fixpipe("out", c, dst_row=32 * (TILES - 1), unit_flag_mode=UPDATE)


def test_a_software_pipelined_loop_is_computed_in_the_order_it_runs():
    rng = np.random.default_rng(3)
    inputs = {"a": rng.standard_normal((TILES * 32, 32)).astype(np.float16),
              "b": rng.standard_normal((32, 32)).astype(np.float16)}  # fmt: skip
    result = aj.run(_pipelined, inputs, {"out": ((TILES * 32, 32), "float32")})
    assert result.ok and result.device_outputs, str(result.report())
    want = inputs["a"].astype(np.float32) @ inputs["b"].astype(np.float32)
    np.testing.assert_allclose(np.asarray(result.outputs["out"]), want, rtol=1e-5, atol=1e-5)
