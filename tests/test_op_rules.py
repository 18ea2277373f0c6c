"""Static rules of the copy and mmad ops: each raises at trace time, naming the rule."""

import jax
import numpy as np
import pytest

import ascjax as aj

# the helper offers GM tensor 'g' to every kernel; most of the rules here never read it
pytestmark = pytest.mark.filterwarnings("ignore::ascjax.front._tracing.UnusedInputWarning")


def _trace(body, chip="a2", inputs=None, outputs=None):
    """Trace ``body`` as a kernel (the static rules fire while tracing; nothing is compiled)."""
    inputs = inputs or {"g": np.zeros((32, 32), np.float16)}
    return jax.eval_shape(lambda: aj.run(body, inputs, outputs or {}, chip=chip).verdict)


def test_copy_rules():
    with pytest.raises(ValueError, match="does not convert"):
        _trace(lambda k: k.copy_gm2l1(k.alloc("L1", (16, 16), "float32"), "g"))
    with pytest.raises(ValueError, match="not an input or output"):
        _trace(lambda k: k.copy_gm2l1(k.alloc("L1", (16, 16), "float16"), "missing"))
    with pytest.raises(ValueError, match=r"64x16 window does not fit GM tensor 'g'"):
        _trace(lambda k: k.copy_gm2l1(k.alloc("L1", (64, 16), "float16"), "g"))
    with pytest.raises(ValueError, match=r"row offset 20 is outside \[0, 16\]"):
        _trace(lambda k: k.copy_gm2l1(k.alloc("L1", (16, 16), "float16"), "g", row=20))
    with pytest.raises(ValueError, match=r"dst must be a tile in L1"):
        _trace(lambda k: k.copy_gm2l1(k.alloc("L0A", (16, 16), "float16"), "g"))
    with pytest.raises(ValueError, match=r"copy_gm2l1_nd2nz writes Nz"):
        _trace(lambda k: k.copy_gm2l1_nd2nz(k.alloc("L1", (16, 16), "float16", fmt="ND"), "g"))
    with pytest.raises(ValueError, match="fractal alignment"):
        _trace(lambda k: k.copy_l12l0a(k.alloc("L0A", (16, 16), "float16"), k.alloc("L1", (32, 32), "float16"), row=8))
    with pytest.raises(ValueError, match="copy_l12l0a does not convert"):
        _trace(lambda k: k.copy_l12l0a(k.alloc("L0A", (16, 16), "float16"), k.alloc("L1", (16, 16), "float32")))
    with pytest.raises(ValueError, match="copy_l12l0b reads an Nz L1 tile"):
        _trace(
            lambda k: k.copy_l12l0b(k.alloc("L0B", (16, 16), "float16"), k.alloc("L1", (16, 16), "float16", fmt="ND"))
        )
    with pytest.raises(ValueError, match="converts only f16/bf16 -> float32"):
        _trace(
            lambda k: k.copy_l12bt(k.alloc("BiasTable", (1, 16), "int32"), k.alloc("L1", (1, 16), "float16", fmt="ND"))
        )


def _tiles(k, m=16, kk=32, n=16, dtype="float16"):
    return (k.alloc("L0C", (m, n), "float32"), k.alloc("L0A", (m, kk), dtype), k.alloc("L0B", (kk, n), dtype))


def test_mmad_rules():
    with pytest.raises(ValueError, match=r"mmad sizes.*k = 33 is outside \[0, 32\]"):
        _trace(lambda k: k.mmad(*_tiles(k), 16, 33, 16))
    with pytest.raises(ValueError, match=r"c must be a tile in L0C"):
        _trace(lambda k: k.mmad(k.alloc("L0A", (16, 16), "float16"), *_tiles(k)[1:], 16, 16, 16))
    with pytest.raises(ValueError, match="no tile lives there"):
        _trace(lambda k: k.mmad(*_tiles(k), 16, 32, 16, c_matrix_source=True))
    with pytest.raises(ValueError, match="leave c_matrix_source / c_matrix_init_val unset"):
        _trace(
            lambda k: k.mmad(
                *_tiles(k), 16, 32, 16, c_matrix_init_val=True, bias=k.alloc("BiasTable", (1, 16), "float32")
            )
        )
    with pytest.raises(ValueError, match=r"bias dtype.*int32"):
        _trace(lambda k: k.mmad(*_tiles(k), 16, 32, 16, bias=k.alloc("BiasTable", (1, 16), "int32")))
    with pytest.raises(ValueError, match="unit_flag_mode must be DISABLE"):
        _trace(lambda k: k.mmad(*_tiles(k), 16, 32, 16, unit_flag_mode=1))
    with pytest.raises(ValueError, match=r"GEMV layout.*load A into an ND L0A tile"):
        _trace(lambda k: k.mmad(*_tiles(k), 1, 32, 16))  # a2: GEMV cannot be disabled
    _trace(lambda k: k.mmad(*_tiles(k), 1, 32, 16, disable_gemv=True), chip="950")  # the good twin
    with pytest.raises(ValueError, match="mmad direction"):
        _trace(lambda k: k.set_mmad_direction("k"))


def test_loop_rules():
    def alloc_in_loop(k):
        k.range(2, lambda i: k.alloc("L1", (16, 16), "float16"))

    with pytest.raises(ValueError, match="allocate tiles .* before the loop"):
        _trace(alloc_in_loop)
    with pytest.raises(ValueError, match="static trip count"):
        _trace(lambda k: k.range(-1, lambda i: None))


HERE = r"\(at tests/test_op_rules\.py:\d+\)"  # every trace-time error names the kernel's line


def test_unit_flag_modes_and_phases_name_the_side_they_belong_to():
    from ascjax import AccPhase, STPhase

    with pytest.raises(
        ValueError, match=r"rule 'unit flag mode': unit_flag_mode='bogus' is not a unit-flag mode.*" + HERE
    ):
        _trace(lambda k: k.mmad(*_tiles(k), 16, 32, 16, unit_flag_mode="bogus"))
    with pytest.raises(ValueError, match=r"STPhase.Final is the phase of the other side.*an mmad takes AccPhase"):
        _trace(lambda k: k.mmad(*_tiles(k), 16, 32, 16, unit_flag_mode=STPhase.Final))
    with pytest.raises(ValueError, match=r"AccPhase.Partial is the phase .*takes STPhase \(here STPhase.Partial\)"):
        _trace(lambda k: k.fixpipe("c", _tiles(k)[0], unit_flag_mode=AccPhase.Partial), outputs=OUT)
    with pytest.raises(ValueError, match=r"unit_flag_mode='final' is not a unit-flag mode \(for phase Final write "
                                         r"AccPhase.Final\): give"):  # fmt: skip
        _trace(lambda k: k.mmad(*_tiles(k), 16, 32, 16, unit_flag_mode="final"))
    with pytest.raises(ValueError, match=r"\(for phase Partial write STPhase.Partial\)"):
        _trace(lambda k: k.fixpipe("c", _tiles(k)[0], unit_flag_mode="Partial"), outputs=OUT)
    with pytest.raises(ValueError, match=r"unit_flag_mode=1.5 is not a unit-flag mode"):
        _trace(lambda k: k.mmad(*_tiles(k), 16, 32, 16, unit_flag_mode=1.5))
    # the good twins: each side's own phase, a mode by name
    _trace(lambda k: k.mmad(*_tiles(k), 16, 32, 16, unit_flag_mode=AccPhase.Final))
    _trace(lambda k: k.mmad(*_tiles(k), 16, 32, 16, unit_flag_mode="enable_update"))
    _trace(lambda k: k.fixpipe("c", _tiles(k)[0], unit_flag_mode=STPhase.Final), outputs=OUT)


OUT = {"c": ((16, 16), "float32")}


def test_an_event_id_is_an_integer_never_truncated():
    with pytest.raises(TypeError, match=r"rule 'event id': sync_notify\(MTE2 -> MTE1\): .* got 1.5 " + HERE):
        _trace(lambda k: k.sync_notify("MTE2", "MTE1", 1.5))
    with pytest.raises(TypeError, match=r"set_cross_core.*event_id must be an integer, got 2.0"):
        _trace(lambda k: k.set_cross_core("FIX", 2.0, "INTRA_BLOCK"))
    _trace(lambda k: (k.sync_notify("MTE2", "MTE1", 1), k.sync_wait("MTE2", "MTE1", 1)))  # the good twin


def test_a_loop_of_a_billion_iterations_is_refused_at_once():
    import time

    start = time.perf_counter()
    with pytest.raises(ValueError, match=r"rule 'trip count': Program.range\(1000000000\) is past .* 16777216 .*hours"):
        _trace(lambda k: k.range(10**9, lambda i: None))
    assert time.perf_counter() - start < 1.0
    _trace(lambda k: k.range(1000, lambda i: None))  # the good twin


def test_a_freed_tile_cannot_be_used_and_a_free_after_the_last_use_is_fine():
    def after_free(k):
        t = k.alloc("L1", (16, 16), "float16")
        k.free(t)
        k.copy_gm2l1(t, "g")

    with pytest.raises(
        ValueError, match=r"rule 'use after free': copy_gm2l1 writes dst = `l1_0` .*freed at tests/test_op_rules\.py"
    ):
        _trace(after_free)

    def free_last(k):
        t = k.alloc("L1", (16, 16), "float16")
        k.copy_gm2l1(t, "g")
        k.free(t)
        k.copy_gm2l1(k.alloc("L1", (16, 16), "float16"), "g")  # its bytes, reused

    _trace(free_last)


def test_a_fixpipe_into_a_gm_output_smaller_than_its_block_says_so():
    def store(k, rows):
        c = k.alloc("L0C", (32, 32), "float32", name="acc")
        k.fixpipe("c", c, m=rows, n=rows)

    with pytest.raises(
        ValueError, match=r"rule 'GM window': fixpipe writes a 32x32 block of `acc`.*'c', which is 16x16"
    ):
        _trace(lambda k: store(k, 32), outputs=OUT)
    _trace(lambda k: store(k, 16), outputs=OUT)  # the good twin: a 16x16 part of the tile


def test_a_call_that_does_not_fit_an_instruction_names_its_signature_and_the_kernel_line():
    def window(k, **where):
        k.copy_l12l0a(k.alloc("L0A", (16, 16), "float16"), k.alloc("L1", (16, 32), "float16"), **where)

    with pytest.raises(
        TypeError,
        match=r"rule 'arguments': copy_l12l0a\(dst, src, \*, transpose=False, row=0, col=0\): too many positional "
        r"arguments; it takes 2 positional argument\(s\) \(dst, src\) and 3 were given: name the others "
        r"\(transpose=\.\.\., row=\.\.\., col=\.\.\.\) " + HERE,
    ):
        _trace(
            lambda k: k.copy_l12l0a(k.alloc("L0A", (16, 16), "float16"), k.alloc("L1", (16, 32), "float16"), (0, 16))
        )
    with pytest.raises(
        TypeError, match=r"rule 'arguments': copy_l12l0a\(.*\): got an unexpected keyword argument 'column' "
    ):
        _trace(lambda k: window(k, column=16))
    with pytest.raises(
        TypeError, match=r"rule 'arguments': sync_wait\(src, dst, event_id\): missing a required argument: 'dst'"
    ):
        _trace(lambda k: k.sync_wait("MTE2"))
    _trace(lambda k: window(k, col=16))  # the good twin: the window by keyword


def test_a_loop_body_or_branch_that_cannot_take_its_arguments_is_refused_naming_the_call():
    with pytest.raises(TypeError, match=r"rule 'body': Program.range\(2, body\) is .*<lambda>\(\), which takes the loop "
                                        r"index i: def body\(i\): \.\.\. " + HERE):  # fmt: skip
        _trace(lambda k: k.range(2, lambda: None))
    with pytest.raises(TypeError, match=r"rule 'body': Program.cond\(pred, then, otherwise\): otherwise is .*\(i\), "
                                        r"which takes no argument"):  # fmt: skip
        _trace(lambda k: k.cond(True, lambda: None, lambda i: None))
    with pytest.raises(TypeError, match=r"rule 'body': Program.range\(2, body\) is None, not a function"):
        _trace(lambda k: k.range(2, None))
    _trace(lambda k: (k.range(2, lambda i: None), k.cond(True, lambda: None, lambda: None)))  # the good twins


def test_a_section_or_pl_range_body_that_cannot_take_its_arguments_is_refused():
    from ascjax import pl

    def vector_without_sub(k):
        pl.section_vector(lambda: None)

    def range_without_index(k):
        pl.range(0, 4, 2)(lambda: None)

    with pytest.raises(TypeError, match=r"rule 'body': section_vector\(body\) is .*, which takes the sub-block index"):
        _trace(vector_without_sub, chip="950")
    with pytest.raises(TypeError, match=r"rule 'body': section_cube\(body\) is .*\(sub\), which takes no argument"):
        _trace(lambda k: pl.section_cube(lambda sub: None), chip="950")
    with pytest.raises(TypeError, match=r"rule 'body': pl.range\(0, 4, 2\) body is .*, which takes the loop index"):
        _trace(range_without_index, chip="950")
    _trace(lambda k: (pl.section_vector(lambda sub: None), pl.range(0, 4, 2)(lambda i: None)), chip="950")  # good twins
