"""Run every seed case in kernels/ and print its verdict beside the one the seed documents.

python examples/seed_verdicts.py [--chip a2|a3|950]

ascjax reports every finding, most severe first: the column shows the verdict of each kind found, in rank order,
and a seed's verdict agrees when it is among them (the seed names one symptom; a race that also reads
uninitialised bytes is both).
"""

import argparse
import pathlib
import time

import ascjax as aj

KERNELS = pathlib.Path(__file__).resolve().parent.parent / "kernels"
FILES = ["mmad_int8.py", "unit_flag.py", "phases.py", "matmul.py", "matmul_softmax.py", "vec_cube.py"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chip", choices=sorted(aj.CHIPS), default=None, help="override each case's chip")
    args = parser.parse_args()
    aj.enable_compile_cache()
    rows = []
    for file in FILES:
        for name in aj.load_cases(str(KERNELS / file)):
            case = aj.build_case(str(KERNELS / file), name)
            start = time.perf_counter()
            result, rep, err = aj.run_case(case, chip=args.chip)
            seconds = time.perf_counter() - start
            where = f"{rep.op} @ {rep.location}" if rep.location else "-"
            found = list(dict.fromkeys(aj.Verdict[f.kind.verdict] for f in result.findings())) or [aj.Verdict.OK]
            match = "yes" if case.expect in found else "NO"
            rows.append(
                (
                    f"{file}::{name}",
                    args.chip or case.chip,
                    case.expect.label,
                    found[0].label + "".join(f" +{v.label}" for v in found[1:]),
                    match,
                    where,
                    "-" if err is None else f"{err:.2g}",
                    f"{seconds:.1f}s",
                )
            )
    header = ("case", "chip", "seed says", "ascjax", "agree", "offending op", "max err", "time")
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = "  ".join(h.ljust(w) for h, w in zip(header, widths))
    print(line)
    print("-" * len(line))
    for r in rows:
        print("  ".join(str(v).ljust(w) for v, w in zip(r, widths)))
    print(
        f"\n{sum(r[4] == 'yes' for r in rows)}/{len(rows)} verdicts agree with the seeds. "
        "Details of any case: python -m ascjax run kernels/FILE::CASE"
    )
    return 0 if all(r[4] == "yes" for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
