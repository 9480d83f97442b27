"""The test suite's compute threads: N builds of the course book side by side, as pytest-xdist's N workers run
their heaviest items, with every process on all the cores (torch's, OpenMP's and BLAS's defaults) against each
process on its share of them (what ``tests/conftest.py`` sets: cores // N).

    .venv/bin/python benchmarks/bench_test_threads.py [--workers 2] [--rounds 1] [--data-dir DIR]

Each build is a process of its own, sealed as the suite seals a worker (``tests/conftest.py``: its own temporary
atlas cache, so SmolLM2 is dequantised in each), doing what the suite's ``course_book`` fixture does
(``tests.test_course.build_course_book``: the NLI, NegEx and MACCROBAT cells, SmolLM2's NLI cell, the book with
its ten lessons executed). The two settings alternate, ``--rounds`` times each (A B A B ...); printed: each
setting's wall time for its N builds, each build's phases, and the ratio. Exits 1 when a build fails.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, print_machine, use_data_dir  # noqa: E402

THREAD_VARIABLES = ("ATLAS_TORCH_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def child(default_threads: bool) -> None:
    """One course-book build, sealed as a test worker; prints its phases as one JSON line."""
    import shutil

    sys.path.insert(0, str(REPO))
    import tests.conftest as sealed   # seals the environment at import (threads from PYTEST_XDIST_WORKER_COUNT)

    if default_threads:               # every process on all the cores, as before the suite set its share
        for name in THREAD_VARIABLES:
            os.environ.pop(name, None)
    phases, t = {}, time.perf_counter()

    def lap(name):
        nonlocal t
        now = time.perf_counter()
        phases[name] = round(now - t, 1)
        t = now

    from atlaslib.cards.nli_negation.card import NLI_PROMPTS
    from atlaslib.models import load_adapter
    from atlaslib.models.cost import Cost
    from tests import test_course

    lap("imports")
    adapter = load_adapter("smollm2-135m-instruct", "predict.nli", prompt=NLI_PROMPTS, progress=False)
    lap("SmolLM2 load")

    def smollm2():
        adapter.cost, adapter.last_loglik = Cost(), None
        return adapter

    try:
        test_course.build_course_book(sealed.SESSION_DIR / "course-book", Path(os.environ["ATLAS_DATA_DIR"]), smollm2)
        lap("cells and book")
    finally:
        shutil.rmtree(sealed.SESSION_DIR, ignore_errors=True)
    print(json.dumps(phases))


def side_by_side(workers: int, default_threads: bool) -> tuple[float, list[dict]]:
    env = {**os.environ, "PYTEST_XDIST_WORKER_COUNT": str(workers)}
    cmd = [sys.executable, __file__, "--child"] + (["--default-threads"] if default_threads else [])
    start = time.perf_counter()
    procs = [subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(workers)]
    outs = [p.communicate() for p in procs]
    wall = time.perf_counter() - start
    for p, (out, err) in zip(procs, outs):
        if p.returncode:
            raise SystemExit(f"a build failed (exit {p.returncode}):\n{err[-3000:]}")
    return wall, [json.loads(out.strip().splitlines()[-1]) for out, _ in outs]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=2, help="builds side by side (the suite's xdist workers)")
    ap.add_argument("--rounds", type=int, default=1, help="times each setting is measured, alternating")
    ap.add_argument("--data-dir")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--default-threads", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    use_data_dir(args.data_dir)
    if args.child:
        child(args.default_threads)
        return 0
    print_machine()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    share = max(1, cores // args.workers)   # as tests/conftest.py computes it
    walls = {"all cores": [], f"{share} thread(s) each": []}
    for _ in range(args.rounds):
        for label, default in (("all cores", True), (f"{share} thread(s) each", False)):
            wall, phases = side_by_side(args.workers, default)
            walls[label].append(wall)
            print(f"{label:>18}: {args.workers} builds side by side in {wall:6.1f} s; per build "
                  + "; ".join(", ".join(f"{k} {v:.1f} s" for k, v in p.items()) for p in phases), flush=True)
    a, b = (min(w) for w in walls.values())
    print(f"best of {args.rounds}: all cores {a:.1f} s, {share} thread(s) each {b:.1f} s: {a / b:.2f}x faster "
          "on the share")
    return 0


if __name__ == "__main__":
    sys.exit(main())
