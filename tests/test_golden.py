"""Golden data (device bytes, .npy, manifest) and the file comparison, through the API and the CLI.

Two kernel runs in the whole file, both in one test: a seeded jit run and a non-jit run of the
same seed (through the CLI). Everything else uses hand-made files or a stubbed run.
"""

import hashlib
import json
import math
import types

import ml_dtypes
import numpy as np
import pytest
from conftest import KERNELS

import ascjax as aj
from ascjax import golden
from ascjax.core.formats.device_bytes import from_device_bytes, to_device_bytes
from ascjax.tools.cli import main
from ascjax.tools.compare import TOLERANCES, compare_files

FILE = str(KERNELS / "matmul_softmax.py")
TARGET = f"{FILE}::matmul_softmax"
SEED = 3


def _sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _input_bytes(seed) -> dict:
    case = aj.build_case(FILE, "matmul_softmax", seed=seed)
    return {name: to_device_bytes(x, x.dtype) for name, x in case.inputs.items()}


def _check_manifest(m: dict, folder):
    assert (folder / "manifest.json").read_text() == json.dumps(m, indent=2, sort_keys=True) + "\n"
    assert m["case"] == TARGET and m["chip"] == "950" and m["seed"] == SEED and m["verdict"] == "ok"
    assert m["tolerance"] == {
        "atol": 1e-5,
        "rtol": 0.0,
        "compare_default": {"float32": {"rtol": 1e-5, "atol": 1e-6}},
    }
    summary = [(t["name"], t["role"], t["shape"], t["dtype"], t["layout"], t["bytes"]) for t in m["tensors"]]
    assert summary == [
        ("a", "input", [64, 64], "float16", "ND", 64 * 64 * 2),
        ("b", "input", [64, 64], "float16", "ND", 64 * 64 * 2),
        ("out", "output", [64, 64], "float32", "ND", 64 * 64 * 4),
    ]
    for t in m["tensors"]:
        assert (folder / f"{t['name']}.bin").stat().st_size == t["bytes"]
        assert _sha(folder / f"{t['name']}.bin") == t["sha256_bin"]
        assert _sha(folder / f"{t['name']}.npy") == t["sha256_npy"]
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        ["manifest.json"] + [t["name"] + ext for t in m["tensors"] for ext in (".bin", ".npy")]
    )


def _check_round_trip_and_seed(m: dict, folder):
    """Each .bin reads back as its .npy; the inputs are the seed's draw, and no other seed's."""
    for t in m["tensors"]:
        held = np.load(folder / f"{t['name']}.npy")
        back = from_device_bytes((folder / f"{t['name']}.bin").read_bytes(), t["dtype"], t["shape"])
        assert back.dtype == held.dtype and np.array_equal(back, held)
    written = {name: (folder / f"{name}.bin").read_bytes() for name in ("a", "b")}
    assert _input_bytes(SEED) == written
    other = _input_bytes(SEED + 1)
    assert all(other[name] != written[name] for name in ("a", "b"))


def _check_identical(jit_dir, eager_dir):
    names = sorted(p.name for p in jit_dir.iterdir())
    assert names == sorted(p.name for p in eager_dir.iterdir())
    for name in names:
        assert (jit_dir / name).read_bytes() == (eager_dir / name).read_bytes(), name


def test_seeded_golden_data_is_described_and_reproducible(tmp_path, capsys):
    """The only kernel runs of this file, in one test so that pytest-xdist cannot repeat them on
    another worker: the same seed written by the API and by the CLI (jit and op by op agree is
    tests/test_vector_ops.py's, test_fixpipe_quant.py's and test_launch.py's to check)."""
    jit_dir, cli_dir = tmp_path / "jit", tmp_path / "cli"
    manifest = golden.write_golden(TARGET, jit_dir, seed=SEED)
    assert main(["golden", TARGET, "--out", str(cli_dir), "--seed", str(SEED)]) == 0
    assert capsys.readouterr().out.strip() == f"wrote {cli_dir}/a.bin b.bin out.bin (+ .npy) and manifest.json"
    _check_manifest(manifest, jit_dir)
    _check_round_trip_and_seed(manifest, jit_dir)
    _check_identical(jit_dir, cli_dir)

    out_bin, out_npy = str(jit_dir / "out.bin"), str(cli_dir / "out.npy")
    r = compare_files(out_bin, out_npy, "float32")
    assert r.passed and r.max_abs == 0.0 and r.mismatches == 0 and r.size == 4096 and r.shape == (64, 64)
    assert main(["compare", out_bin, out_bin, "--dtype", "f32", "--shape", "64,64"]) == 0  # agrees with the manifest
    assert capsys.readouterr().out.strip().splitlines() == [
        f"as float32 64x64, out (ND) from {jit_dir / 'manifest.json'}",
        "max abs 0.0e+00  max rel 0.0e+00  outside tol 0 / 4096  PASS",
        f"  tolerance atol 1e-05, rtol 0 from {jit_dir / 'manifest.json'}",  # the case's, recorded in the manifest
    ]
    assert main(["compare", out_bin, out_npy]) == 0  # the manifest beside out.bin gives dtype and shape


def test_no_seed_gives_the_cases_default_draw():
    assert _input_bytes(None) == _input_bytes(0) != _input_bytes(1)


def test_refuses_a_broken_or_wrong_run(tmp_path, monkeypatch, capsys):
    deadlock = types.SimpleNamespace(verdict=aj.Verdict.DEADLOCK)
    monkeypatch.setattr(golden, "run_case", lambda c, jit=True: (None, deadlock, None))
    with pytest.raises(ValueError, match=r"verdict deadlock .*`python -m ascjax run .*::matmul_softmax`"):
        golden.write_golden(TARGET, tmp_path / "dead")
    assert not (tmp_path / "dead").exists()
    assert main(["golden", TARGET, "--out", str(tmp_path / "dead")]) == 2
    assert "golden data of a broken kernel is useless" in capsys.readouterr().err

    twos = types.SimpleNamespace(
        outputs={"out": np.full((64, 64), 2.0, np.float32)}, device_outputs=True
    )  # softmax <= 1
    ok = types.SimpleNamespace(verdict=aj.Verdict.OK)
    monkeypatch.setattr(golden, "run_case", lambda c, jit=True: (twos, ok, None))
    with pytest.raises(ValueError, match=r"output 'out' misses the case's reference at 4096 of 4096 elements"):
        golden.write_golden(TARGET, tmp_path / "wrong")
    assert not (tmp_path / "wrong").exists()


def test_a_seed_for_a_case_without_one_is_refused(tmp_path, capsys):
    with pytest.raises(ValueError, match="give its function a `seed` keyword that draws the inputs"):
        aj.build_case(FILE, "matmul_softmax_no_set", seed=1)
    assert main(["golden", f"{FILE}::matmul_softmax_no_set", "--out", str(tmp_path), "--seed", "1"]) == 2
    err = capsys.readouterr().err
    assert "case 'matmul_softmax_no_set'" in err and "seed=1 cannot change its inputs" in err
    assert not any(tmp_path.iterdir())
    built = aj.build_case(FILE, "matmul_softmax")
    with pytest.raises(ValueError, match="already built, so seed 1 cannot draw its inputs: pass FILE::CASE"):
        golden.write_golden(built, tmp_path, seed=1)


def _bin(path, values, dtype):
    path.write_bytes(to_device_bytes(np.asarray(values, dtype), dtype))
    return str(path)


def test_compare_reports_a_perturbation(tmp_path, capsys):
    # float32 defaults: rtol 1e-5, atol 1e-6
    want = np.array([[1.0, 2.0, 4.0], [0.0, -3.0, 10.0]], np.float32)
    got = want.copy()
    got[0, 1] = 2.0 + 2**-9  # diff 2^-9 = 0.001953125, rel 2^-10: outside
    got[1, 0] = 0.5  # expected 0: diff 0.5, no relative error
    got[1, 2] = 10.0 + 2**-20 * 8  # one ulp of 10 (9.5e-7): inside atol + rtol*10
    np.save(tmp_path / "want.npy", want)
    actual = _bin(tmp_path / "got.bin", got, "float32")
    r = compare_files(tmp_path / "want.npy", actual, "float32")
    assert not r.passed and r.mismatches == 2 and r.size == 6 and r.share == pytest.approx(1 / 3)
    assert r.max_abs == 0.5 and r.max_rel == 2**-10
    # largest error first; ulps: 0.5 over float32's smallest subnormal 2^-149 at 0, 2^-9 over 2^-22 at 2
    assert r.worst == [((1, 0), 0.0, 0.5, 0.5, 2.0**148), ((0, 1), 2.0, 2.001953125, 2**-9, 2.0**13)]
    flat = compare_files(_bin(tmp_path / "want.bin", want, "float32"), actual, "float32")
    assert [m.index for m in flat.worst] == [3, 1] and flat.shape is None
    assert main(["compare", str(tmp_path / "want.bin"), actual, "--dtype", "float32", "--shape", "2,3"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "max abs 5.0e-01  max rel 9.8e-04  outside tol 2 / 6  FAIL"
    assert lines[1] == "  tolerance atol 1e-06, rtol 1e-05 (float32 default)"
    assert lines[3] == "  at [1, 0]: expected 0, actual 0.5, error 0.5 = 3.57e+44 ulp"
    assert lines[4] == "  at [0, 1]: expected 2, actual 2.00195, error 0.00195 = 8.19e+03 ulp"
    loose = ["--atol", "0.5", "--rtol", "1e-3"]
    assert main(["compare", str(tmp_path / "want.bin"), actual, "--dtype", "float32", *loose]) == 0


def test_compare_defaults_bf16_and_integers(tmp_path):
    assert TOLERANCES["bfloat16"] == (8e-3, 8e-3) and TOLERANCES["int8"] == (0.0, 0.0)
    bf16 = ml_dtypes.bfloat16
    want = np.array([1.0, 100.0, 1.0], bf16)
    near = np.array([1.0078125, 100.5, 1.0], bf16)  # one bf16 ulp at 1 (2^-7) and at 100 (0.5)
    far = np.array([1.0, 100.0, 1.03125], bf16)  # four ulps at 1: 0.03125 > 8e-3 + 8e-3
    for name, arr in (("want", want), ("near", near), ("far", far)):
        np.save(tmp_path / f"{name}.npy", arr)  # ml_dtypes arrays load back as raw V2
    assert compare_files(tmp_path / "want.npy", tmp_path / "near.npy", "bf16").passed
    r = compare_files(tmp_path / "want.npy", tmp_path / "far.npy", "bf16")
    assert (r.rtol, r.atol, r.mismatches, r.worst) == (8e-3, 8e-3, 1, [((2,), 1.0, 1.03125, 2**-5, 4.0)])
    a = _bin(tmp_path / "a.bin", [1, -2, 3, 127], "int8")
    b = _bin(tmp_path / "b.bin", [1, -1, 3, 127], "int8")
    r = compare_files(a, b, "int8")
    assert (r.mismatches, r.max_abs, r.max_rel, r.worst) == (1, 1.0, 0.5, [(1, -2.0, -1.0, 1.0, 1.0)])  # ulp 1
    assert compare_files(a, a, "int8").passed
    four = _bin(tmp_path / "four.bin", np.array([1, -2, 3, 7], ml_dtypes.int4), "int4")  # packed: 2 bytes
    assert compare_files(four, four, "int4").size == 4


def test_compare_size_mismatch_and_usage_errors(tmp_path, capsys):
    four = _bin(tmp_path / "four.bin", np.ones(4), "float32")
    six = _bin(tmp_path / "six.bin", np.ones(6), "float32")
    with pytest.raises(ValueError, match=r"four.bin holds 4 elements \(16 bytes of float32\) but .*six.bin holds 6"):
        compare_files(four, six, "float32")
    assert main(["compare", four, six, "--dtype", "float32"]) == 2
    assert main(["compare", four, four, "--dtype", "float33"]) == 2
    assert main(["compare", four, four, "--dtype", "float32", "--shape", "2,x"]) == 2
    assert main(["compare", four, str(tmp_path / "four.txt"), "--dtype", "float32"]) == 2
    err = capsys.readouterr().err
    assert "same element count" in err and "unknown dtype 'float33'" in err
    assert "--shape '2,x' is not a shape" in err and "expected a .bin (device bytes) or .npy file" in err


def test_compare_nan_matches_only_nan(tmp_path):
    nan, inf = math.nan, math.inf
    want = _bin(tmp_path / "want.bin", [nan, 1.0, nan, 2.0, inf], "float32")
    got = _bin(tmp_path / "got.bin", [nan, nan, 1.0, 2.0, inf], "float32")
    r = compare_files(want, got, "float32")
    assert r.mismatches == 2 and [m.index for m in r.worst] == [1, 2]
    assert math.isnan(r.max_abs) and math.isnan(r.max_rel)  # a NaN on one side: the headline error is not 0
    assert (r.nan_actual, r.inf_actual, r.nan_expected, r.inf_expected) == (2, 1, 2, 1)
    assert "actual holds 2 NaN and 1 inf; expected holds 2 NaN and 1 inf" in str(r) and "max abs nan" in str(r)
    same = compare_files(want, want, "float32")
    assert same.passed and same.max_abs == 0.0  # NaN where both have it is a match


def test_compare_counts_nan_and_inf_of_a_device_output(tmp_path):
    want = _bin(tmp_path / "want.bin", [1.0, 2.0, 3.0, 4.0], "float32")
    got = _bin(tmp_path / "got.bin", [math.nan, 2.0, math.inf, 4.0], "float32")
    r = compare_files(want, got, "float32")
    assert (r.nan_actual, r.inf_actual, r.mismatches) == (1, 1, 2) and math.isnan(r.max_abs)
    assert str(r).splitlines()[0] == "actual holds 1 NaN and 1 inf; expected holds 0 NaN and 0 inf"


def _golden_folder(folder, values, *, dtype="float32", shape=(2, 2), layout="ND"):
    """A golden folder by hand: out.bin and the manifest entry that describes it."""
    folder.mkdir()
    _bin(folder / "out.bin", values, dtype)
    entry = {"name": "out", "role": "output", "dtype": dtype, "shape": list(shape), "layout": layout}
    (folder / "manifest.json").write_text(json.dumps({"tensors": [entry]}))
    return folder / "out.bin"


def test_compare_takes_dtype_shape_and_layout_from_the_manifest(tmp_path, capsys):
    want = _golden_folder(tmp_path / "golden", [1.0, 2.0, 3.0, 4.0])
    device = _bin(tmp_path / "out.bin", [1.0, 2.0, 3.0, 5.0], "float32")
    r = compare_files(want, device)  # no dtype: the manifest beside the golden file says float32, 2 x 2
    assert (r.dtype, r.shape, r.worst) == ("float32", (2, 2), [((1, 1), 4.0, 5.0, 1.0, 2.0**21)])  # ulp(4) 2^-21
    assert r.source == f"out (ND) from {tmp_path / 'golden' / 'manifest.json'}"
    assert main(["compare", str(want), device]) == 1
    assert capsys.readouterr().out.startswith("as float32 2x2, out (ND) from ")
    explicit = compare_files(device, device, manifest=tmp_path / "golden" / "manifest.json")
    assert explicit.passed and explicit.shape == (2, 2)


def test_compare_refuses_what_contradicts_the_manifest(tmp_path, capsys):
    want = _golden_folder(tmp_path / "golden", [1.0, 2.0, 3.0, 4.0])
    with pytest.raises(ValueError, match=r"--dtype bf16 contradicts .*manifest.json, which records out as float32"):
        compare_files(want, want, "bf16")
    with pytest.raises(ValueError, match=r"--shape 4,1 contradicts .*which records out as shape 2,2"):
        compare_files(want, want, "float32", shape=(4, 1))
    assert compare_files(want, want, "float32", shape=(2, 2)).passed  # agreeing is fine
    nd = _golden_folder(tmp_path / "nz", [1.0, 2.0, 3.0, 4.0], layout="Nz")
    with pytest.raises(ValueError, match="records out in layout Nz: compare reads ND tensors only"):
        compare_files(nd, nd)
    loose = _bin(tmp_path / "loose.bin", [1.0], "float32")
    with pytest.raises(ValueError, match=r"no manifest.json beside .*loose.bin names this tensor.*give --dtype"):
        compare_files(loose, loose)
    with pytest.raises(ValueError, match=r"has no tensor named loose or loose"):
        compare_files(loose, loose, manifest=tmp_path / "golden" / "manifest.json")
    assert main(["compare", str(want), str(want), "--dtype", "bf16"]) == 2
    assert len(capsys.readouterr().err.splitlines()) == 1


def test_compare_refuses_a_negative_tolerance_and_names_the_file_of_a_size_mismatch(tmp_path, capsys):
    four = _bin(tmp_path / "four.bin", np.ones(4), "float32")
    for flag in ("rtol", "atol"):
        with pytest.raises(ValueError, match=f"{flag} bounds .* at least 0: got -0.1"):
            compare_files(four, four, "float32", **{flag: -0.1})
        assert main(["compare", four, four, "--dtype", "float32", f"--{flag}", "-0.1"]) == 2
    assert compare_files(four, four, "float32", rtol=0, atol=0).passed
    with pytest.raises(ValueError, match=r"four.bin: float32 of shape \(3, 3\) is 36 bytes, got 16"):
        compare_files(four, four, "float32", shape=(3, 3))
