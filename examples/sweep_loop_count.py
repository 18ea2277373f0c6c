"""Find a sync bug that only a zero-trip loop shows, by sweeping the trip count.

python examples/sweep_loop_count.py [--csv OUT.csv]

``kernels/zero_trip.py`` streams ``n`` tiles through one AIV and drains its last MTE3 -> V
signal after the loop. Every test with data passes; with ``n == 0`` the drain waits for a set
that never came. One compiled ``vmap`` runs every trip count from 0 to the kernel's maximum,
for the buggy kernel and for the fix, and the table shows where each one breaks.
"""

import argparse
import pathlib
import sys

import numpy as np

import ascjax as aj

KERNELS = pathlib.Path(__file__).resolve().parent.parent / "kernels"
sys.path.insert(0, str(KERNELS))
import zero_trip  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", help="write the buggy kernel's table as CSV")
    args = parser.parse_args()
    aj.enable_compile_cache()
    counts = {"n": np.arange(zero_trip.N_MAX + 1, dtype=np.int32)}
    reference = lambda x, row: zero_trip.reference(x, int(row["n"]))  # noqa: E731
    tables = {}
    for name in ("buggy_three_tiles", "fixed_zero_tiles"):
        case = aj.build_case(str(KERNELS / "zero_trip.py"), name)
        tables[name] = table = aj.sweep(case, counts, reference=reference)
        print(f"{case.params['variant']} kernel, n = 0..{zero_trip.N_MAX}:")
        print(table.summary(), end="\n\n")
    if args.csv:
        tables["buggy_three_tiles"].to_csv(args.csv)
        print(f"wrote {args.csv}")
    buggy = [r["n"] for r in tables["buggy_three_tiles"].rows if r["verdict"] != "ok"]
    fixed = [r["n"] for r in tables["fixed_zero_tiles"].rows if r["verdict"] != "ok"]
    print(f"the buggy kernel fails for n = {buggy}; the fix fails for n = {fixed or 'none'}")
    return 0 if buggy == [0] and not fixed else 1


if __name__ == "__main__":
    raise SystemExit(main())
