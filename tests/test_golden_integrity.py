"""Trusting golden data: the manifest's tolerance, the largest errors first (in ulps), ``--json``, the sha256
check of a golden set, and a set written whole or not at all.

No kernel runs: golden sets are written from a stubbed run whose output is the case's own float64 reference.
"""

import hashlib
import json
import os
import shutil
import types

import ml_dtypes
import numpy as np
import pytest
from conftest import KERNELS

import ascjax as aj
from ascjax import golden
from ascjax.core.formats import hifloat8
from ascjax.core.formats.device_bytes import to_device_bytes
from ascjax.tools.cli import main
from ascjax.tools.compare import compare_arrays, compare_files

FILE = str(KERNELS / "matmul_softmax.py")
TARGET = f"{FILE}::matmul_softmax"


def _stub_run(case, jit=True):
    """``run_case`` without running: the case's own reference as the device's output, verdict ok."""
    report = types.SimpleNamespace(verdict=aj.Verdict.OK, warnings=[])
    out = case.reference(case.inputs)["out"].astype(np.float32)
    return types.SimpleNamespace(outputs={"out": out}, device_outputs=True, report=lambda: report), report, None


def _write_set(folder, seed):
    """The golden set of matmul_softmax for ``seed`` (no kernel run)."""
    result, _, _ = _stub_run(aj.build_case(FILE, "matmul_softmax", seed=seed))
    return golden.write_golden(TARGET, folder, seed=seed, result=result)


def _snapshot(folder) -> dict:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _temp_folders(parent) -> list:
    return [p.name for p in parent.iterdir() if p.name.startswith(golden.TEMP_PREFIX)]


# --- the sha256 check of a golden set ---------------------------------------------------------------------------


@pytest.fixture
def two_seeds(tmp_path):
    """Golden sets of seeds 3 and 4, and a device output: seed 3's output as the device would dump it."""
    _write_set(tmp_path / "s3", 3)
    _write_set(tmp_path / "s4", 4)
    device = tmp_path / "device_out.bin"
    device.write_bytes((tmp_path / "s3" / "out.bin").read_bytes())
    return tmp_path


@pytest.mark.parametrize("replaced", ["a.bin", "b.npy", "out.bin"])
def test_a_set_mixed_from_two_seeds_is_refused_naming_the_file(two_seeds, replaced, capsys):
    s3, device = two_seeds / "s3", str(two_seeds / "device_out.bin")
    assert compare_files(s3 / "out.bin", device).passed  # the untouched set
    assert golden.verify_golden(s3)["seed"] == 3
    shutil.copyfile(two_seeds / "s4" / replaced, s3 / replaced)  # another seed's file
    key = "sha256_bin" if replaced.endswith(".bin") else "sha256_npy"
    want = rf"{s3 / replaced} does not match {s3 / 'manifest.json'}: .*\({key}\); the golden set is inconsistent"
    with pytest.raises(ValueError, match=want):
        compare_files(s3 / "out.bin", device)
    with pytest.raises(ValueError, match=want):
        golden.verify_golden(s3)
    assert main(["compare", str(s3 / "out.bin"), device]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and replaced in err and f"--out {s3} --seed 3" in err  # how to regenerate
    s4 = two_seeds / "s4"
    assert golden.verify_golden(s4)["seed"] == 4 and not compare_files(s4 / "out.bin", device).passed


def test_only_the_golden_side_is_checked(two_seeds):
    s3, device = two_seeds / "s3", two_seeds / "device_out.bin"
    swapped = compare_files(device, s3 / "out.bin")  # the device output given as EXPECTED: nothing to check
    assert swapped.passed and swapped.manifest == str(s3 / "manifest.json")
    wrong = np.load(s3 / "out.npy")
    wrong[0, 0] += 1.0
    (s3 / "out.bin").write_bytes(to_device_bytes(wrong, "float32"))  # a device output dumped into the golden folder
    r = compare_files(s3 / "out.npy", s3 / "out.bin")  # ACTUAL may differ from the manifest's hash
    assert r.mismatches == 1 and r.worst[0].index == (0, 0)
    with pytest.raises(ValueError, match=r"out.bin does not match"):
        golden.verify_golden(s3)  # but the set itself is no longer whole


def test_a_partial_copy_compares_and_verify_golden_wants_every_file(two_seeds):
    s3, device = two_seeds / "s3", str(two_seeds / "device_out.bin")
    for name in ("a.bin", "a.npy", "b.bin", "b.npy", "out.npy"):
        (s3 / name).unlink()  # only out.bin and manifest.json copied to the device machine
    assert compare_files(s3 / "out.bin", device).passed
    with pytest.raises(ValueError, match=rf"{s3 / 'a.bin'} is missing, but .*manifest.json lists it"):
        golden.verify_golden(s3)
    with pytest.raises(FileNotFoundError, match="no manifest.json in"):
        golden.verify_golden(two_seeds)


# --- the manifest's tolerance -----------------------------------------------------------------------------------

#: elements of the honest float32 result that differ from the golden one, each by DRIFT, at expected values < SMALL
HONEST_MISSES, DRIFT, SMALL = 420, 1e-4, 1e-3


def _honest(tmp_path):
    """A golden float32 output (tolerance atol = rtol = 0.01 in its manifest) and an honest device result."""
    rng = np.random.default_rng(0)
    want = rng.uniform(-1, 1, (256, 256)).astype(np.float32)
    flat = rng.choice(want.size, HONEST_MISSES, replace=False)
    want.reshape(-1)[flat] = rng.uniform(-SMALL, SMALL, HONEST_MISSES)
    got = want.copy()
    got.reshape(-1)[flat] += np.float32(DRIFT)
    folder = tmp_path / "golden"
    folder.mkdir()
    raw = to_device_bytes(want, "float32")
    (folder / "out.bin").write_bytes(raw)
    entry = {"name": "out", "dtype": "float32", "shape": [256, 256], "layout": "ND"}
    entry["sha256_bin"] = hashlib.sha256(raw).hexdigest()
    manifest = {"tensors": [entry], "tolerance": {"atol": 0.01, "rtol": 0.01}}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    device = tmp_path / "device.bin"
    device.write_bytes(to_device_bytes(got, "float32"))
    return folder, str(device), want, got, np.sort(flat)


def test_the_manifest_tolerance_is_used_unless_one_is_given(tmp_path, capsys):
    folder, device, want, got, flat = _honest(tmp_path)
    m = folder / "manifest.json"
    r = compare_files(folder / "out.bin", device)
    assert r.passed and (r.atol, r.rtol, r.atol_source, r.rtol_source) == (0.01, 0.01, "manifest", "manifest")
    assert str(r).splitlines()[-1] == f"  tolerance atol 0.01, rtol 0.01 from {m}"
    assert main(["compare", str(folder / "out.bin"), device, "--rtol", "0"]) == 0  # atol 0.01 alone still covers it

    strict = compare_files(folder / "out.bin", device, atol=1e-6)  # rtol 0.01 * |expected| < SMALL / 100 < DRIFT
    assert not strict.passed and strict.mismatches == HONEST_MISSES
    assert (strict.atol_source, strict.rtol_source) == ("given", "manifest")
    assert f"  tolerance atol 1e-06 given, rtol 0.01 from {m}" in str(strict).splitlines()
    assert main(["compare", str(folder / "out.bin"), device, "--atol", "1e-6"]) == 1
    capsys.readouterr()

    (folder / "manifest.json").unlink()  # the twin without a manifest: the dtype defaults, atol 1e-6
    bare = compare_files(folder / "out.bin", device, "float32", shape=(256, 256))
    assert bare.mismatches == HONEST_MISSES and "tolerance atol 1e-06, rtol 1e-05 (float32 default)" in str(bare)
    assert (bare.atol_source, bare.rtol_source) == ("dtype default", "dtype default")


def test_a_case_without_a_reference_records_no_tolerance_and_compares_at_the_dtype_default(tmp_path):
    case = aj.build_case(FILE, "matmul_softmax", seed=0)
    result, _, _ = _stub_run(case)
    out = result.outputs["out"]
    case.reference = None  # the twin of _write_set's case: nothing to hold a tolerance against
    manifest = golden.write_golden(case, tmp_path / "bare", result=result)
    assert (manifest["tolerance"]["atol"], manifest["tolerance"]["rtol"]) == (None, None)
    device = tmp_path / "device.npy"
    np.save(device, out + np.float32(5e-6))  # inside the case's atol 1e-5, outside float32's 1e-6 + 1e-5 |x| < 0.4
    bare = compare_files(tmp_path / "bare" / "out.bin", device)
    assert (bare.atol_source, bare.rtol_source) == ("dtype default", "dtype default") and not bare.passed
    _write_set(tmp_path / "held", 0)
    held = compare_files(tmp_path / "held" / "out.bin", device)
    assert (held.atol_source, held.rtol_source) == ("manifest", "manifest") and held.passed


def test_json_carries_the_statistics(tmp_path, capsys):
    folder, device, want, got, flat = _honest(tmp_path)
    assert main(["compare", str(folder / "out.bin"), device, "--atol", "1e-6", "--json"]) == 1
    out = json.loads(capsys.readouterr().out, parse_constant=lambda c: pytest.fail(f"{c} is not JSON"))
    err = np.abs(got.astype(np.float64) - want.astype(np.float64))
    ulps = err / np.spacing(np.abs(want)).astype(np.float64)
    assert (out["passed"], out["dtype"], out["shape"], out["size"]) == (False, "float32", [256, 256], 65536)
    assert (out["atol"], out["rtol"], out["tolerance_source"]) == (1e-6, 0.01, {"atol": "given", "rtol": "manifest"})
    assert out["manifest"] == str(folder / "manifest.json")
    assert out["mismatches"] == HONEST_MISSES and out["share"] == HONEST_MISSES / 65536
    assert out["max_abs"] == err.max() and out["max_ulps"] == ulps.max()
    assert out["max_rel"] == np.max(err.reshape(-1)[flat] / np.abs(want.reshape(-1)[flat]))
    assert [out[k] for k in ("nan_actual", "inf_actual", "nan_expected", "inf_expected")] == [0, 0, 0, 0]
    worst = out["worst"]
    assert len(worst) == 5 and [w["abs_err"] for w in worst] == sorted(err.reshape(-1)[flat], reverse=True)[:5]
    for w in worst:
        i, j = w["index"]
        assert (w["expected"], w["actual"], w["ulps"]) == (float(want[i, j]), float(got[i, j]), ulps[i, j])
    assert main(["compare", str(folder / "out.bin"), device, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["mismatches"] == 0
    with pytest.raises(SystemExit) as stop:
        main(["compare", str(folder / "out.bin"), device, "--json", "--atol", "x"])
    assert stop.value.code == 2
    assert len(capsys.readouterr().err.splitlines()) == 1


def test_json_names_what_has_no_number(tmp_path, capsys):
    want = tmp_path / "want.bin"
    want.write_bytes(to_device_bytes(np.array([1.0, 2.0, 3.0], np.float32), "float32"))
    got = tmp_path / "got.bin"
    got.write_bytes(to_device_bytes(np.array([np.nan, 2.0, np.inf], np.float32), "float32"))
    assert main(["compare", str(want), str(got), "--dtype", "f32", "--json"]) == 1
    out = json.loads(capsys.readouterr().out, parse_constant=lambda c: pytest.fail(f"{c} is not JSON"))
    assert (out["max_abs"], out["max_ulps"], out["nan_actual"], out["inf_actual"]) == ("nan", "nan", 1, 1)
    assert [(w["index"], w["actual"], w["abs_err"], w["ulps"]) for w in out["worst"]] == [
        (0, "nan", "nan", "nan"),  # NaN on one side: the worst
        (2, "inf", "inf", "inf"),
    ]


# --- the largest errors first, in ulps --------------------------------------------------------------------------


def test_a_planted_error_is_listed_first(tmp_path):
    rng = np.random.default_rng(1)
    want = rng.uniform(1, 1.5, 4096).astype(np.float32)  # ulp 2^-23 everywhere
    got = want.copy()
    got[:100] += np.float32(2**-10)  # 100 small misses before it, all of one size
    planted = 4000
    want[planted], got[planted] = 1.5, 2.5
    r = compare_arrays(want, got, "float32", shape=(64, 64))
    assert r.mismatches == 101 and r.worst[0].index == divmod(planted, 64)
    assert (r.worst[0].abs_err, r.worst[0].ulps) == (1.0, 2.0**23)
    assert [m.index for m in r.worst[1:]] == [(0, i) for i in range(4)]  # equal errors: by index
    lines = str(r).splitlines()
    assert lines[3] == "  at [62, 32]: expected 1.5, actual 2.5, error 1 = 8.39e+06 ulp"
    assert lines[-1] == "  ... and 96 more"
    twin = compare_arrays(want, np.where(np.arange(4096) == planted, want, got), "float32", shape=(64, 64))
    assert twin.mismatches == 100 and all(m.index != divmod(planted, 64) for m in twin.worst)
    got[7] = np.nan  # a NaN on one side beats any number
    first = compare_arrays(want, got, "float32").worst
    assert [m.index for m in first[:2]] == [7, planted] and np.isnan(first[0].abs_err)


def test_ulps_of_narrow_formats():
    # bf16 at 3: 2^1 * 2^-7 apart; e4m3fn at its top 448 (no inf): the gap below, 448 - 416 = 32
    bf16 = compare_arrays(np.array([3.0], ml_dtypes.bfloat16), np.array([3.0625], ml_dtypes.bfloat16), "bf16")
    assert bf16.worst[0].ulps == 0.0625 / 2**-6
    e4 = ml_dtypes.float8_e4m3fn
    assert float(ml_dtypes.finfo(e4).max) == 448.0
    top = compare_arrays(np.array([448.0], e4), np.array([416.0], e4), e4, rtol=0, atol=0)
    assert top.worst[0].ulps == 1.0 and top.max_ulps == 1.0
    # hifloat8 codes: 3 mantissa bits near 1 (1, 1.125, 1.25); fp4 e1m2 codes: 0.25 apart
    one, next_up, two_up = (int(c) for c in np.asarray(hifloat8.encode(np.array([1.0, 1.125, 1.25], np.float32))))
    codes = np.array([one, one], np.uint8)
    hif = compare_arrays(codes, np.array([next_up, two_up], np.uint8), "hifloat8", rtol=0, atol=0)
    assert [m.ulps for m in hif.worst] == [2.0, 1.0]
    e1m2 = compare_arrays(np.array([4], np.uint8), np.array([6], np.uint8), "e1m2", rtol=0, atol=0)  # 1 vs 1.5
    assert (e1m2.worst[0].expected, e1m2.worst[0].actual, e1m2.worst[0].ulps) == (1.0, 1.5, 2.0)
    ints = compare_arrays(np.array([5, 9], np.int32), np.array([5, 2], np.int32), "int32")
    assert ints.worst[0].ulps == 7.0 and ints.max_ulps == 7.0


# --- writing a set whole or not at all --------------------------------------------------------------------------


def test_an_interrupted_write_leaves_the_old_set(tmp_path, monkeypatch):
    folder = tmp_path / "golden"
    _write_set(folder, 3)
    old = _snapshot(folder)
    calls = []

    def fail_on_third(path, data):
        calls.append(path)
        if len(calls) == 3:
            raise OSError("disk full")
        real_write(path, data)

    real_write = golden._write_file
    monkeypatch.setattr(golden, "_write_file", fail_on_third)
    with pytest.raises(OSError, match="disk full"):
        _write_set(folder, 4)
    assert _snapshot(folder) == old and _temp_folders(tmp_path) == []
    assert os.path.dirname(calls[0]) != str(folder)  # written beside the target, not into it
    with pytest.raises(OSError, match="disk full"):
        calls.clear()
        _write_set(tmp_path / "fresh", 4)
    assert not (tmp_path / "fresh").exists() and _temp_folders(tmp_path) == []

    monkeypatch.setattr(golden, "_write_file", real_write)
    real_rename = os.rename

    def fail_into_place(src, dst):
        if os.path.basename(src).startswith(golden.TEMP_PREFIX + "new"):
            raise OSError("interrupted")
        real_rename(src, dst)

    monkeypatch.setattr(golden.os, "rename", fail_into_place)
    with pytest.raises(OSError, match="interrupted"):
        _write_set(folder, 4)  # the old set was moved aside already: it comes back
    assert _snapshot(folder) == old and _temp_folders(tmp_path) == []

    monkeypatch.setattr(golden.os, "rename", real_rename)
    _write_set(folder, 4)  # the good twin: the new set replaces the old, byte for byte a fresh write
    _write_set(tmp_path / "fresh", 4)
    assert _snapshot(folder) == _snapshot(tmp_path / "fresh") != old and _temp_folders(tmp_path) == []


def test_a_folder_of_other_files_is_not_replaced(tmp_path, capsys, monkeypatch):
    folder = tmp_path / "golden"
    _write_set(folder, 3)
    (folder / "notes.txt").write_text("mine")
    before = _snapshot(folder)
    with pytest.raises(ValueError, match=rf"{folder} holds notes.txt, which is not a file its manifest.json lists"):
        _write_set(folder, 4)
    assert _snapshot(folder) == before and _temp_folders(tmp_path) == []
    (folder / "manifest.json").unlink()
    with pytest.raises(ValueError, match=r"holds a.bin, which is not part of a golden set .*no readable manifest"):
        _write_set(folder, 4)
    monkeypatch.setattr(golden, "run_case", _stub_run)
    assert main(["golden", TARGET, "--out", str(folder)]) == 2
    assert len(capsys.readouterr().err.splitlines()) == 1 and (folder / "notes.txt").read_text() == "mine"

    empty = tmp_path / "empty"
    empty.mkdir()
    _write_set(empty, 4)  # an empty folder, and an old golden set, are replaced
    _write_set(tmp_path / "again", 3)
    _write_set(tmp_path / "again", 4)
    assert _snapshot(empty) == _snapshot(tmp_path / "again")
    assert golden.verify_golden(empty)["seed"] == 4
    monkeypatch.chdir(empty)  # replacing the current folder would delete it under the user's feet
    with pytest.raises(ValueError, match=rf"{empty} holds the current folder"):
        _write_set(".", 3)
    assert golden.verify_golden(empty)["seed"] == 4 and _temp_folders(tmp_path) == []
