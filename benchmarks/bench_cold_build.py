"""Cold `atlas book` of this checkout against an older commit, side by side on one machine in one run.

The older commit is checked out into a temporary git worktree and builds its own default matrix there
(``python -m atlaslib.cli book``, its code first on ``PYTHONPATH``, with this checkout's ``.venv``); this
checkout's committed HEAD, checked out the same way, then builds cold twice, each in a private folder with
empty run, embedding, fine-tune and course caches:

1. **same matrix**: the default matrix without the runs the older commit did not have (the fine-tune
   protocol), i.e. the same runs the older commit executed;
2. **default matrix**: everything ``atlas book`` runs today, fine-tune runs included.

It prints, for each build, the wall time, the runs executed and the kernels started, and the ratios to the
older build (the card-contract goal: the same matrix in at most 60 % of the older time); the default
build against the 10-minute goal, with what the fine-tune runs add; the total HTML of the run pages of
each built book (goal: at least 60 % smaller); and whether any metric of a run present in both builds
changed (``compare_results.py``: the intended renames are listed, not failures).

Run: ``.venv/bin/python benchmarks/bench_cold_build.py [--against COMMIT] [--keep]`` on an otherwise idle
machine (about 20 minutes on the 2-core machine). Exit status 1 when a goal is missed.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, print_machine, use_data_dir  # noqa: E402

#: main before the card contract: every run page re-did its card's data story, and not-run cells started
#: a kernel (the commit the card-contract work started from)
BEFORE_CONTRACT = "7c6f5793d83ae7e1755e87ef7e87d1035ff95f42"
NEW_PROTOCOLS = ("finetune",)  # protocols the older commit did not have: left out of the same-matrix build
RAN = re.compile(r"^\[\d+/\d+\] (\S+): ran \((\w+), ([\d.]+) s\)", re.M)


def run_pages_bytes(html_root: Path) -> tuple[int, int]:
    """Total bytes and number of the run pages (``book/runs/<card>/<version>/<model>/<protocol>.html``;
    data stories, one folder up, are not run pages)."""
    pages = [p for p in (html_root / "book" / "runs").glob("*/*/*/*.html")]
    return sum(p.stat().st_size for p in pages), len(pages)


def caches(root: Path) -> dict:
    """Empty private caches: cold means cold embeddings, fine-tuned weights and course lessons too."""
    return {"ATLAS_EMBED_CACHE_DIR": str(root / "embed-cache"), "ATLAS_FINETUNE_CACHE_DIR": str(root / "ft-cache")}


def old_build(commit: str, root: Path, env: dict) -> dict:
    tree = worktree(commit, root / "old")
    env = {**env, **caches(root / "old-caches"), "PYTHONPATH": str(tree)}
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "atlaslib.cli", "book"], cwd=tree, env=env,
                          capture_output=True, text=True)
    seconds = time.perf_counter() - start
    (root / "old-build.log").write_text(proc.stdout + proc.stderr)
    ran = RAN.findall(proc.stdout + proc.stderr)
    size, pages = run_pages_bytes(tree / "_build" / "site" / "_build" / "html")
    return {"seconds": seconds, "code": proc.returncode, "runs": len(ran), "kernels": len(ran),
            "run_seconds": sum(float(s) for *_, s in ran), "html": size, "pages": pages,
            "results": str(tree / "results")}


def child(which: str, root: Path, data_dir) -> int:
    """One cold build of this checkout in ``root`` (run in a fresh process by :func:`new_build`)."""
    os.environ.update(caches(root))
    from bench_incremental import kernel_counts

    from atlaslib import book
    from atlaslib.pages import course

    requests = book.default_requests()
    if which == "same":
        requests = [r for r in requests if r.protocol not in NEW_PROTOCOLS]
    paths = book.BuildPaths(results=root / "results", runs=root / "runs", build=root / "_build")
    reports, phases = [], {}

    def timed(owner, name, label, keep=False):
        fn = getattr(owner, name)

        def wrapper(*a, **k):
            t0 = time.perf_counter()
            out = fn(*a, **k)
            phases[label] = phases.get(label, 0.0) + time.perf_counter() - t0
            if keep:
                reports.append(out)
            return out
        setattr(owner, name, wrapper)

    # where the wall time goes: data stories, the run matrix, rendering (the course's lessons execute in the
    # background meanwhile), the Jupyter Book build and the link check
    timed(book.datastory, "run_stories", "data stories")
    timed(book, "run_matrix", "run matrix", keep=True)
    timed(course, "execute_all", "lessons (beside the render)")
    timed(book, "render_site", "render (lessons included)")
    timed(book, "jupyter_book_build", "jupyter-book")
    timed(book.linkcheck, "check", "link check")
    start = time.perf_counter()
    code = book.build(paths=paths, requests=requests, data_dir=data_dir, executor="dask", log=lambda *a, **k: None)
    seconds = time.perf_counter() - start
    k = kernel_counts(reports[0])
    finetune = sum(o.seconds for o in reports[0].outcomes if o.status == "ran" and o.request.protocol == "finetune")
    size, pages = run_pages_bytes(paths.build / "site" / "_build" / "html")
    print(json.dumps({"seconds": seconds, "code": code, "runs": k["runs"], "kernels": k["kernels"],
                      "no_kernel": k["no_kernel"], "stories": k["stories"],
                      "run_seconds": k["run_seconds"] + k["story_seconds"], "finetune_seconds": finetune,
                      "html": size, "pages": pages, "results": str(paths.results),
                      "phases": {k: round(v, 1) for k, v in phases.items()}}))
    return code


def worktree(commit: str, tree: Path) -> Path:
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "--force", str(tree), commit],
                   check=True, capture_output=True)
    return tree


def new_build(which: str, tree: Path, root: Path, env: dict) -> dict:
    """A cold build of the committed HEAD (checked out in ``tree``: edits in the working copy during the
    benchmark cannot leak in), in a fresh process."""
    proc = subprocess.run([sys.executable, str(tree / "benchmarks" / Path(__file__).name), "--child", which,
                           "--root", str(root)], cwd=tree, env={**env, "PYTHONPATH": str(tree)},
                          capture_output=True, text=True)
    (root.parent / f"new-{which}.log").write_text(proc.stdout + proc.stderr)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        raise SystemExit(f"the {which} build printed no result; see {root.parent / f'new-{which}.log'}\n"
                         + proc.stderr[-2000:])
    return json.loads(lines[-1])


def report(old: dict, same: dict, full: dict) -> bool:
    rows = [("older commit, its default matrix", old), ("this checkout, the same runs", same),
            ("this checkout, default matrix", full)]
    print(f"\n{'build':40} {'exit':>4} {'wall s':>8} {'ratio':>7} {'runs':>5} {'kernels':>8} {'summed run s':>13} "
          f"{'run pages':>9} {'run-page HTML':>14}")
    for name, b in rows:
        print(f"{name:40} {b['code']:>4} {b['seconds']:8.1f} {b['seconds'] / old['seconds']:7.1%} {b['runs']:>5} "
              f"{b['kernels']:>8} {b['run_seconds']:13.1f} {b['pages']:>9} {b['html']:>14,}")
    for name, b in rows[1:]:
        print(f"  {name}: " + ", ".join(f"{k} {v:.1f} s" for k, v in b.get("phases", {}).items()))
    ratio = same["seconds"] / old["seconds"]
    print(f"\nsame runs, cold: {ratio:.1%} of the older commit's time (goal <= 60 %: "
          f"{'met' if ratio <= 0.60 else 'MISSED'})")
    print(f"default matrix, cold: {full['seconds']:.1f} s (goal <= 600 s: {'met' if full['seconds'] <= 600 else 'MISSED'}); "
          f"the fine-tune runs add {full['seconds'] - same['seconds']:.1f} s of wall time "
          f"({full['finetune_seconds']:.1f} s summed over their runs)")
    shrink = 1 - full["html"] / old["html"]
    print(f"run pages: {old['pages']} pages {old['html']:,} bytes -> {full['pages']} pages {full['html']:,} bytes: "
          f"{shrink:.1%} smaller in total (goal >= 60 %: {'met' if shrink >= 0.60 else 'MISSED'}); "
          f"{old['html'] / old['pages'] / 1024:.1f} KiB -> {full['html'] / full['pages'] / 1024:.1f} KiB per page")
    cmp = subprocess.run([sys.executable, str(Path(__file__).with_name("compare_results.py")), old["results"],
                          same["results"]], capture_output=True, text=True)
    print("\nmetrics, older commit -> this checkout (same runs; renamed runs and metrics are listed as "
          "present on one side only):\n" + cmp.stdout.rstrip())
    return all(b["code"] == 0 for _, b in rows) and ratio <= 0.60 and full["seconds"] <= 600 and shrink >= 0.60


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--against", default=BEFORE_CONTRACT, help="the older commit (default: main before the "
                                                               "card contract)")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder (logs, builds)")
    ap.add_argument("--child", choices=("same", "full"), help=argparse.SUPPRESS)
    ap.add_argument("--root", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    data_dir = use_data_dir(args.data_dir)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.child:
        return child(args.child, args.root, data_dir)

    root = Path(tempfile.mkdtemp(prefix="atlas-bench-cold-"))
    env = {**os.environ, "ATLAS_DATA_DIR": data_dir or "", "HF_HUB_OFFLINE": os.environ["HF_HUB_OFFLINE"]}
    env.pop("PYTHONPATH", None)
    print_machine()
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    print(f"older commit {args.against[:12]} against this checkout ({head}); folder {root}")
    try:
        old = old_build(args.against, root, env)
        tree = worktree("HEAD", root / "new")
        same = new_build("same", tree, root / "same", env)
        full = new_build("full", tree, root / "full", env)
        ok = report(old, same, full)
    finally:
        if not args.keep:
            for tree in ("old", "new"):
                subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(root / tree)],
                               capture_output=True)
            shutil.rmtree(root, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
