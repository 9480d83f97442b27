"""How close a build's matrix came to the fastest any schedule of its runs could be, from the build's own log.

The executor prints one line per finished run (``[i/N] <label>: ran (<status>, <seconds> s)``) and, at the end,
``matrix wall time: <seconds> s``. With W workers no schedule of the same work can finish before the runs' own
seconds summed over W, nor before its longest indivisible piece. Splitting a run into smaller tasks (e.g. a
fine-tune's training seeds, each its own executor task) can only move the matrix towards that bound, so the gap
between the wall time and ``max(sum / W, longest piece)`` is all such a split could gain (the same work
assumed: a seed trained alone pays its own model load and kernel start, so the real gain is smaller).

Run: ``python benchmarks/bench_schedule.py BUILD.log [BUILD2.log ...] [--workers 2]``; prints, per log, the
runs, their summed seconds, the bound, the wall time and the ratio wall / bound.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

RUN = re.compile(r"^\[\d+/\d+\] (?P<label>\S+): ran \((?P<status>[a-z_]+), (?P<seconds>[\d.]+) s\)", re.M)
WALL = re.compile(r"^matrix wall time: (?P<seconds>[\d.]+) s", re.M)


def read_log(path: Path) -> tuple[dict[str, float], float]:
    """label -> the run's own seconds, and the matrix's wall seconds; one error naming the file when the log
    has no finished matrix in it."""
    text = path.read_text(encoding="utf-8", errors="replace")
    runs = {m["label"]: float(m["seconds"]) for m in RUN.finditer(text)}
    walls = [float(m["seconds"]) for m in WALL.finditer(text)]
    if not runs or not walls:
        raise SystemExit(f"{path}: no finished matrix in this log (expected lines '[i/N] <label>: ran (<status>, "
                         f"<s> s)' and 'matrix wall time: <s> s'); found {len(runs)} run line(s), "
                         f"{len(walls)} wall line(s)")
    return runs, walls[-1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("logs", nargs="+", type=Path)
    ap.add_argument("--workers", type=int, default=2, help="runs at once in that build (default 2: two cores)")
    args = ap.parse_args(argv)
    print("| build log | runs | runs' own seconds summed | longest run | bound: max(sum / workers, longest) | "
          "matrix wall | wall / bound |")
    print("|---|---|---|---|---|---|---|")
    for path in args.logs:
        runs, wall = read_log(path)
        total, longest = sum(runs.values()), max(runs.values())
        bound = max(total / args.workers, longest)
        print(f"| {path.name} | {len(runs)} | {total:,.0f} | {longest:,.0f} ({max(runs, key=runs.get)}) | "
              f"{bound:,.0f} | {wall:,.0f} | {wall / bound:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
