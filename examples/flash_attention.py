"""Flash attention end to end: outputs, verdict, timeline, golden files and a broken twin.

python examples/flash_attention.py [--out DIR]

1. Runs ``kernels/flash_attention.py::f16_s187_d64`` (a cube section and a vector section
   running concurrently, ping-pong slots, READY events) and compares it with a float64
   reference attention.
2. Prints the report: verdict, cycles, per-pipe busy time, the cross-core event table.
3. Draws the pipeline timeline (``DIR/flash_attention.png``, needs matplotlib) and writes a
   Perfetto trace (``DIR/flash_attention.json``, open it in ui.perfetto.dev).
4. Writes golden data for a device test (``DIR/golden``: .bin in the device dtype, .npy,
   manifest.json) from the same run, and compares the golden output with the reference
   attention the way a device test compares its result (``python -m ascjax compare``).
"""

import argparse
import pathlib
import time

import numpy as np

import ascjax as aj
from ascjax.core.formats.device_bytes import to_device_bytes
from ascjax.report import summary_text
from ascjax.tools.compare import compare_files
from ascjax.tools.golden import write_golden

KERNEL = pathlib.Path(__file__).resolve().parent.parent / "kernels" / "flash_attention.py"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="flash_attention_out", help="directory for the picture, trace and golden data")
    args = parser.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    aj.enable_compile_cache()

    start = time.perf_counter()
    case = aj.build_case(str(KERNEL), "f16_s187_d64")
    result, rep, err = aj.run_case(case)
    print(f"{KERNEL.name}::{case.name}: {case.description}  [{time.perf_counter() - start:.1f} s]\n")
    print(rep)
    print("\n".join(summary_text(rep.timing).splitlines()[1:]))
    print(f"max abs err vs float64 attention: {err:.2e} (tolerance {case.atol:g})")

    run = result.timeline()
    run.to_perfetto(str(out / "flash_attention.json"))
    try:
        run.plot(str(out / "flash_attention.png"), title="flash attention, f16, 3 KV tiles")
        print(f"timeline: {out / 'flash_attention.png'}; trace: {out / 'flash_attention.json'}")
    except ImportError:
        print(f"trace: {out / 'flash_attention.json'} (install matplotlib for the timeline picture)")

    manifest = write_golden(case, out / "golden", result=result)
    names = ", ".join(f"{t['name']}.bin ({t['dtype']})" for t in manifest["tensors"])
    print(f"golden data: {out / 'golden'}: {names} + .npy + manifest.json")
    # the check a device test makes: its output file against the golden one; here the "device" is
    # the float64 reference attention rounded to f16, written as raw device bytes
    reference = case.reference(case.inputs)["out"].astype(np.float16)
    (out / "reference_out.bin").write_bytes(to_device_bytes(reference, "float16"))
    check = compare_files(out / "golden" / "out.bin", out / "reference_out.bin", "float16", shape=reference.shape)
    print(f"python -m ascjax compare golden/out.bin reference_out.bin --dtype f16: {check}".splitlines()[0])

    ok = rep.verdict is aj.Verdict.OK and err <= case.atol and check.passed and np.isfinite(err)
    print(f"\ndone in {time.perf_counter() - start:.1f} s: {'OK' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
