"""What ``run`` is given: GM inputs and output specs are refused with the name the user gave, never
silently converted, and an input the kernel never names draws a warning."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import ascjax as aj
from ascjax.front._tracing import UnusedInputWarning

A = np.ones((16, 16), np.float16)


def load(k):
    k.copy_gm2l1(k.alloc("L1", (16, 16), "float16"), "a")


@pytest.mark.parametrize(
    ("given", "match"),
    [
        ([[1.0] * 16] * 16, r"input 'a' is a Python list: .*np.asarray"),
        (np.ones((16, 16), np.int64), r"input 'a' holds int64, which JAX holds as int32 .*np.int32"),
        (np.ones((16, 16), np.float64), r"input 'a' holds float64, which JAX holds as float32"),
    ],
)
def test_an_input_jax_would_convert_is_refused_naming_what_was_passed(given, match):
    with pytest.raises(TypeError, match=match):
        aj.run(load, {"a": given}, {})
    aj.run(load, {"a": A}, {})  # the good twin


@pytest.mark.parametrize(
    ("spec", "error", "match"),
    [
        ((16, 16), TypeError, r"output 'c': \(16, 16\) is not a \(shape, dtype\) pair: give \(\(rows, cols\), dtype\)"),
        (((16, 16), "float33"), ValueError, r"output 'c': unknown dtype 'float33'"),
        (np.zeros((16, 16)), TypeError, r"output 'c': outputs are \(shape, dtype\) pairs"),
    ],
)
def test_a_bad_output_spec_names_the_output(spec, error, match):
    with pytest.raises(error, match=match):
        aj.run(load, {"a": A}, {"c": spec})
    aj.run(load, {"a": A}, {"c": ((16, 16), "float32")})  # the good twin


def test_an_input_the_kernel_never_names_draws_a_warning_naming_it():
    with pytest.warns(UnusedInputWarning, match=r"input 'b' is never named by the kernel's ops .*\['a'\]"):
        aj.run(load, {"a": A, "b": A}, {})
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnusedInputWarning)
        aj.run(load, {"a": A}, {})  # the good twin: every input named


def load_rows(k, rows=16, *, cols=16):
    k.copy_gm2l1(k.alloc("L1", (rows, cols), "float16"), "a")


def test_a_misspelt_parameter_is_refused_naming_the_kernels_parameters():
    aj.check(load_rows, {"a": A}, {}, params={"rows": 16})  # the good twin
    with pytest.raises(TypeError, match=r"rule 'params': 'row' is not a parameter of kernel 'load_rows' "
                                        r"\(its parameters: rows, cols\)"):  # fmt: skip
        aj.check(load_rows, {"a": A}, {}, params={"row": 16})
    with pytest.raises(TypeError, match=r"'col', 'row' are not parameters of kernel 'load_rows'"):
        aj.run(load_rows, {"a": A}, {}, params={"row": 16, "col": 16})
