"""How close a build's matrix came to the fastest any schedule of its runs could be, and what it would take on
more workers, from the build's own log.

The executor prints one line per finished run (``[i/N] <label>: ran (<status>, <seconds> s)``) and, at the end,
``matrix wall time: <seconds> s``. With W workers no schedule of the same work can finish before the runs' own
seconds summed over W, nor before its longest indivisible piece. Splitting a run into smaller tasks (e.g. a
fine-tune's training seeds, each its own executor task) can only move the matrix towards that bound, so the gap
between the wall time and ``max(sum / W, longest piece)`` is all such a split could gain (the same work
assumed: a seed trained alone pays its own model load and kernel start, so the real gain is smaller).

``--simulate 2,4,8,16,64`` replays the log's runs on that many workers with the executor's own rule
(longest-processing-time first: each run, longest first, goes to the worker that frees first) and prints the
simulated matrix time per worker count: once with each run one task (today's executor), and once with the runs
matching ``--split GLOB=N`` cut into N equal pieces (e.g. ``'*finetune*=5'``: a fine-tune's five seeds as five
tasks), each piece paying ``--overhead`` seconds more (its own kernel start and model load; state the value you
assume). The simulation assumes a run's seconds do not change with the number of workers beside it: on a real
machine with fewer cores than workers they do, so read it as what the schedule allows, not a prediction.

``--planned`` replays them as the executor splits them today (:func:`atlaslib.executor.plan_preparation`: on W
workers a run longer than the runs' total over W is cut, a fine-tune into its training seeds, a model's zero-shot
run into slices of its items), each part paying ``--overhead`` more and its run, which then finds every answer in
the caches, taking ``--overhead`` after its last part; parts are handed out first and a run waits for its own, as
the executor does.

Run: ``python benchmarks/bench_schedule.py BUILD.log [BUILD2.log ...] [--workers 2] [--simulate 2,4,8,16,64
--split '*finetune*=5' --overhead 20] [--planned]``.
"""
from __future__ import annotations

import argparse
import fnmatch
import heapq
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


def lpt_makespan(seconds: list[float], workers: int) -> float:
    """The finishing time of longest-processing-time-first list scheduling: tasks sorted longest first, each
    handed to the worker that frees first (the executor's ``longest_first`` order on a pool of ``workers``)."""
    free = [0.0] * max(1, workers)
    for s in sorted(seconds, reverse=True):
        heapq.heapreplace(free, free[0] + s)
    return max(free)


def split_tasks(runs: dict[str, float], splits: list[tuple[str, int]], overhead: float) -> list[float]:
    """The runs as tasks, each run whose label matches a ``(glob, n)`` cut into ``n`` equal pieces that each pay
    ``overhead`` seconds more."""
    tasks = []
    for label, s in runs.items():
        n = next((n for glob, n in splits if fnmatch.fnmatchcase(label, glob)), 1)
        tasks += [s / n + (overhead if n > 1 else 0.0)] * n
    return tasks


def _request(label: str):
    """The run request a log label names (``card/version/model/protocol``; a hub model id has a slash of its own)."""
    from atlaslib.runner import RunRequest

    parts = label.split("/")
    return RunRequest(parts[0], parts[1], "/".join(parts[2:-1]), parts[-1])


def planned_makespan(runs: dict[str, float], workers: int, overhead: float) -> tuple[float, float, int]:
    """(matrix seconds, longest task, runs split) of the executor's own plan on ``workers`` workers: the parts
    :func:`atlaslib.executor.plan_preparation` makes (each ``seconds / n + overhead``) handed out first, then the runs
    longest first, a split run (``overhead`` seconds: served from the caches) starting when its parts are done and a
    worker is free."""
    from atlaslib import executor

    labels = list(runs)
    reqs = [_request(x) for x in labels]
    plan = executor.plan_preparation(reqs, runs, workers)
    n_parts = {}
    for i, _ in plan:
        n_parts[i] = n_parts.get(i, 0) + 1
    tasks = [(runs[labels[i]] / n_parts[i] + overhead, None, i) for i, _ in plan]    # (seconds, waits for, part of)
    tasks += [(overhead if i in n_parts else runs[labels[i]], i if i in n_parts else None, None)
              for i in executor.longest_first(reqs, runs)]
    free = [0.0] * max(1, workers)
    left = dict(n_parts)
    done_at: dict[int, float] = {}
    queue = list(tasks)
    while queue:
        t = heapq.heappop(free)
        ready = [k for k, (_, wait, _) in enumerate(queue) if wait is None or (left.get(wait) == 0 and done_at[wait] <= t)]
        if not ready:  # the free worker waits for the parts of the next run to finish
            pending = [done_at[w] for _, w, _ in queue if w is not None and left.get(w) == 0]
            heapq.heappush(free, min(pending) if pending else t + 1.0)
            continue
        seconds, _, part_of = queue.pop(ready[0])
        end = t + seconds
        if part_of is not None:
            left[part_of] -= 1
            done_at[part_of] = max(done_at.get(part_of, 0.0), end)
        heapq.heappush(free, end)
    longest = max(s for s, _, _ in tasks)
    return max(free), longest, len(n_parts)


def _split_arg(text: str) -> tuple[str, int]:
    glob, sep, n = text.rpartition("=")
    if not sep or not glob or not n.isdigit() or int(n) < 1:
        raise argparse.ArgumentTypeError(f"--split {text!r}: expected GLOB=N with N a whole number >= 1, "
                                         f"e.g. '*finetune*=5'")
    return glob, int(n)


def _workers_arg(text: str) -> list[int]:
    try:
        out = [int(w) for w in text.split(",")]
    except ValueError:
        out = []
    if not out or min(out) < 1:
        raise argparse.ArgumentTypeError(f"--simulate {text!r}: expected worker counts >= 1 separated by commas, "
                                         f"e.g. 2,4,8,16,64")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("logs", nargs="+", type=Path)
    ap.add_argument("--workers", type=int, default=2, help="runs at once in that build (default 2: two cores)")
    ap.add_argument("--simulate", type=_workers_arg, default=None, help="worker counts to replay the runs on")
    ap.add_argument("--split", type=_split_arg, action="append", default=[],
                    help="GLOB=N: runs matching GLOB become N equal tasks (repeatable)")
    ap.add_argument("--overhead", type=float, default=0.0,
                    help="seconds each piece of a split run pays more (kernel start, model load)")
    ap.add_argument("--planned", action="store_true",
                    help="also replay the runs as the executor's own plan splits them on each worker count")
    args = ap.parse_args(argv)
    print("| build log | runs | runs' own seconds summed | longest run | bound: max(sum / workers, longest) | "
          "matrix wall | wall / bound |")
    print("|---|---|---|---|---|---|---|")
    read = [(path, *read_log(path)) for path in args.logs]
    for path, runs, wall in read:
        total, longest = sum(runs.values()), max(runs.values())
        bound = max(total / args.workers, longest)
        print(f"| {path.name} | {len(runs)} | {total:,.0f} | {longest:,.0f} ({max(runs, key=runs.get)}) | "
              f"{bound:,.0f} | {wall:,.0f} | {wall / bound:.3f} |")
    if args.simulate:
        split_name = ", ".join(f"{g} in {n}" for g, n in args.split) or "nothing split"
        print(f"\nSimulated matrix seconds, longest first (split: {split_name}; {args.overhead:g} s more per piece)")
        print("| build log | schedule | " + " | ".join(f"{w} workers" for w in args.simulate) + " |")
        print("|---|---|" + "---|" * len(args.simulate))
        for path, runs, _ in read:
            whole = list(runs.values())
            pieces = split_tasks(runs, args.split, args.overhead)
            for name, tasks in (("one task per run", whole), ("split", pieces)):
                cells = " | ".join(f"{lpt_makespan(tasks, w):,.0f} (longest {max(tasks):,.0f})"
                                   for w in args.simulate)
                print(f"| {path.name} | {name} | {cells} |")
            if args.planned:
                got = [planned_makespan(runs, w, args.overhead) for w in args.simulate]
                cells = " | ".join(f"{m:,.0f} (longest {lo:,.0f}; {k} run(s) split)" for m, lo, k in got)
                print(f"| {path.name} | the executor's plan | {cells} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
