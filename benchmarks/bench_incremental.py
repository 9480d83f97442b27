"""Incremental build: `atlas book` with nothing changed against the cold build of the same matrix.

In a private folder (results, executed notebooks, site and an empty embedding cache), the script runs
``atlaslib.book.build`` three times on the default matrix:

1. cold: every notebook executes (Dask LocalCluster unless ``--executor serial``);
2. warm: nothing changed, so every run must come from the run cache and no notebook executes;
3. one parameter changed for one run (``n_resamples`` of the NegEx majority run on atlas-n100-v1):
   only that run may execute.

It prints the wall times, the ratio warm / cold (goal <= 5 %), the cold time against the 10-minute goal,
and how many runs executed in each build; for the cold build also the summed wall time of the runs and data
stories (what the build would cost one after the other) and the number of kernels started (an executed run
or data story starts one; a not-run cell decided before the kernel starts none). Exit status 1 when a goal
is missed.

Run: ``.venv/bin/python benchmarks/bench_incremental.py [--executor serial]`` (a few minutes).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_machine, use_data_dir  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--executor", choices=("dask", "serial"), default="dask")
    ap.add_argument("--data-dir", default=None)
    args = ap.parse_args(argv)
    data_dir = use_data_dir(args.data_dir)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    root = Path(tempfile.mkdtemp(prefix="atlas-bench-incremental-"))
    os.environ["ATLAS_EMBED_CACHE_DIR"] = str(root / "embed-cache")  # cold means cold embeddings too

    from atlaslib import book
    from atlaslib.runner import RunRequest

    paths = book.BuildPaths(results=root / "results", runs=root / "runs", build=root / "_build")
    requests = book.default_requests()
    changed = RunRequest("negex", "atlas-n100-v1", "majority", "zero_shot", params=(("n_resamples", 999),))
    requests_changed = [changed if (r.card, r.version, r.model, r.protocol) == (changed.card, changed.version,
                                                                                  changed.model, changed.protocol)
                        else r for r in requests]

    reports = []
    run_matrix = book.run_matrix

    def capture(*a, **k):  # keep each build's matrix report (run outcomes; data stories added by build)
        reports.append(run_matrix(*a, **k))
        return reports[-1]

    book.run_matrix = capture

    def timed(reqs):
        executed = []

        def log(*a, **k):
            line = " ".join(map(str, a))
            if ": ran (" in line:
                executed.append(line)

        start = time.perf_counter()
        code = book.build(paths=paths, requests=reqs, data_dir=data_dir, executor=args.executor, log=log)
        return time.perf_counter() - start, code, len(executed)

    print_machine()
    print(f"matrix: {len(requests)} runs, executor {args.executor}, folder {root}")
    cold, c1, n1 = timed(requests)
    warm, c2, n2 = timed(requests)
    one, c3, n3 = timed(requests_changed)
    print(f"cold build:  {cold:7.1f} s, {n1} runs executed (goal <= 600 s: {'met' if cold <= 600 else 'MISSED'})")
    print(cold_costs(reports[0]))
    print(f"warm build:  {warm:7.1f} s, {n2} runs executed (goal: 0)")
    print(f"one changed: {one:7.1f} s, {n3} runs executed (goal: 1)")
    ratio = warm / cold
    print(f"warm / cold = {ratio:.1%} (goal <= 5 %: {'met' if ratio <= 0.05 else 'MISSED'})")
    ok = all(c == 0 for c in (c1, c2, c3)) and n2 == 0 and n3 == 1 and ratio <= 0.05 and cold <= 600
    return 0 if ok else 1


def kernel_counts(report) -> dict:
    """Executed runs and data stories of one build, their summed wall time, and the kernels they started."""
    ran = [o for o in report.outcomes if o.status == "ran"]
    no_kernel = [o for o in ran if (o.extra or {}).get("preflight")]
    stories = [o for o in getattr(report, "stories", []) if o.status == "ran"]
    return {"runs": len(ran), "no_kernel": len(no_kernel), "stories": len(stories),
            "run_seconds": sum(o.seconds for o in ran), "story_seconds": sum(o.seconds for o in stories),
            "kernels": len(ran) - len(no_kernel) + len(stories)}


def cold_costs(report) -> str:
    k = kernel_counts(report)
    return (f"cold build:  summed per-run wall time {k['run_seconds'] + k['story_seconds']:.1f} s "
            f"({k['runs']} runs {k['run_seconds']:.1f} s, {k['stories']} data stories {k['story_seconds']:.1f} s); "
            f"{k['kernels']} kernels started ({k['runs'] - k['no_kernel']} runs + {k['stories']} data stories; "
            f"{k['no_kernel']} not-run cells decided without a kernel)")


if __name__ == "__main__":
    sys.exit(main())
