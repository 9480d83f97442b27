"""Same numbers before and after: every default result cell's metrics and predictions, and every CSV/JSON
download of the built book, of two builds (an old commit's and a new one's), compared value by value.

A refactor of how numbers are made must not change a published number. This script reads two build trees
(each a checkout after ``atlas book``: ``results/`` and ``_build/site-src/``) or, with ``--render``, renders the
old build's own result cells with this checkout's code (``atlas book --no-run`` into a temporary build: the
reading paths, leaderboards, comparisons, slices, calibration, explorer, all recomputed from the same cells)
with the old checkout's code and with this one's, side by side (timed: the no-op book's rendering), and
compares:

- per result cell present in both: every ``metrics`` entry (value, ci_low, ci_high, reason) and every
  prediction record, exactly;
- per download (``*.csv``, ``*.json`` under ``_build/site-src``, both sides): every field, as text (CSV) or as
  JSON values (numbers equal when they are the same float).

It prints the number of values compared, the files only one side has, and every difference not listed in
``benchmarks/same_numbers_allowed.txt`` (``<file glob> <column> <why>``: an intended change, named); the exit
status is 1 when an unlisted difference remains.

It prints the first 200 unlisted differences (``SAME_NUMBERS_SHOW=N`` in the environment: the first N).

Run: ``.venv/bin/python benchmarks/bench_same_numbers.py --before /path/to/old/checkout --render``
(``--after /path/to/new/checkout`` instead of ``--render`` compares two full builds).
"""
from __future__ import annotations

import argparse
import csv
import fnmatch
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
ALLOWED = HERE / "same_numbers_allowed.txt"


def _allowed() -> list[tuple[str, str, str]]:
    out = []
    if ALLOWED.is_file():
        for line in ALLOWED.read_text(encoding="utf-8").splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                glob, column, why = (line.split(None, 2) + ["", ""])[:3]
                out.append((glob, column, why))
    return out


def _leaves(x, prefix=""):
    if isinstance(x, dict):
        for k, v in x.items():
            yield from _leaves(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(x, list):
        for k, v in enumerate(x):
            yield from _leaves(v, f"{prefix}[{k}]")
    else:
        yield prefix, x


def _cells(root: Path) -> dict[str, dict]:
    out = {}
    for p in sorted((root / "results").rglob("*.json")):
        try:
            c = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(c, dict) and "metrics" in c and "card" in c:
            out[p.relative_to(root / "results").as_posix()] = c
    return out


def compare_cells(before: Path, after: Path, diffs: list, counter: list) -> None:
    a, b = _cells(before), _cells(after)
    for rel in sorted(set(a) | set(b)):
        if rel not in a or rel not in b:
            diffs.append((f"results/{rel}", "", "only in " + ("after" if rel in b else "before")))
            continue
        for part in ("metrics", "predictions", "status"):
            la, lb = dict(_leaves(a[rel].get(part))), dict(_leaves(b[rel].get(part)))
            for key in sorted(set(la) | set(lb)):
                counter[0] += 1
                if la.get(key, "<absent>") != lb.get(key, "<absent>"):
                    diffs.append((f"results/{rel}", f"{part}.{key}", f"{la.get(key, '<absent>')!r} -> "
                                                                      f"{lb.get(key, '<absent>')!r}"))


def _downloads(site: Path) -> dict[str, Path]:
    return {p.relative_to(site).as_posix(): p for ext in ("*.csv", "*.json") for p in site.rglob(ext)
            if "_atlas_cache" not in p.parts and ".ipynb_checkpoints" not in p.parts}


def compare_downloads(before_site: Path, after_site: Path, diffs: list, counter: list) -> None:
    a, b = _downloads(before_site), _downloads(after_site)
    for rel in sorted(set(a) | set(b)):
        if rel not in a or rel not in b:
            diffs.append((rel, "", "only in " + ("after" if rel in b else "before")))
            continue
        if rel.endswith(".csv"):
            with open(a[rel], newline="", encoding="utf-8") as fa, open(b[rel], newline="", encoding="utf-8") as fb:
                ra, rb = list(csv.reader(fa)), list(csv.reader(fb))
            head = ra[0] if ra else []
            if ra[:1] != rb[:1]:
                diffs.append((rel, "<header>", f"{ra[:1]} -> {rb[:1]}"))
            for i in range(max(len(ra), len(rb))):
                xa = ra[i] if i < len(ra) else []
                xb = rb[i] if i < len(rb) else []
                for j in range(max(len(xa), len(xb))):
                    counter[0] += 1
                    va = xa[j] if j < len(xa) else "<absent>"
                    vb = xb[j] if j < len(xb) else "<absent>"
                    if va != vb:
                        col = head[j] if j < len(head) else str(j)
                        diffs.append((rel, col, f"row {i}: {va!r} -> {vb!r}"))
        else:
            try:
                ja = json.loads(a[rel].read_text(encoding="utf-8"))
                jb = json.loads(b[rel].read_text(encoding="utf-8"))
            except ValueError:
                continue
            la, lb = dict(_leaves(ja)), dict(_leaves(jb))
            for key in sorted(set(la) | set(lb)):
                counter[0] += 1
                if la.get(key, "<absent>") != lb.get(key, "<absent>"):
                    diffs.append((rel, key, f"{la.get(key, '<absent>')!r} -> {lb.get(key, '<absent>')!r}"))


def render(before: Path, code: Path, workdir: Path) -> float:
    """The old build's cells and executed run notebooks, rendered by ``code``'s atlaslib (``atlas book
    --no-run``: no run, every page, table and download made again from the cells); returns the wall time."""
    import time

    shutil.copytree(before / "results", workdir / "results")
    if (before / "book" / "runs").is_dir():
        shutil.copytree(before / "book" / "runs", workdir / "runs")
    env = dict(os.environ, PYTHONPATH=str(code))
    cmd = [sys.executable, "-m", "atlaslib.cli", "book", "--no-run", "--results-dir", str(workdir / "results"),
           "--runs-dir", str(workdir / "runs"), "--build-dir", str(workdir / "_build")]
    t = time.perf_counter()
    subprocess.run(cmd, cwd=code, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True, type=Path, help="the old checkout, built (results/, _build/)")
    ap.add_argument("--after", type=Path, default=None, help="the new checkout, built")
    ap.add_argument("--render", action="store_true", help="render the old build's cells with the old checkout's "
                    "code and with this checkout's, side by side, and compare the two renders")
    args = ap.parse_args(argv)
    if (args.after is None) == (not args.render):
        ap.error("give --after DIR or --render (one of the two)")
    diffs: list = []
    counter = [0]
    with tempfile.TemporaryDirectory(prefix="same-numbers-") as tmp:
        if args.render:
            old, new = Path(tmp) / "old", Path(tmp) / "new"
            t_old = render(args.before.resolve(), args.before.resolve(), old)
            t_new = render(args.before.resolve(), ROOT, new)
            print(f"atlas book --no-run on the old build's cells: old code {t_old:.1f} s, this code {t_new:.1f} s "
                  f"(ratio new/old {t_new / t_old:.2f})")
            compare_downloads(old / "_build" / "site-src", new / "_build" / "site-src", diffs, counter)
            n_cells = 0
        else:
            after = args.after.resolve()
            after_site = after / "_build" / "site-src"
            compare_cells(args.before, after, diffs, counter)
            n_cells = counter[0]
            compare_downloads(args.before / "_build" / "site-src", after_site, diffs, counter)
    allowed = _allowed()
    left = [d for d in diffs if not any(fnmatch.fnmatch(d[0], g) and (c in ("*", d[1]) or
                                                                      fnmatch.fnmatch(d[1], c)) for g, c, _ in allowed)]
    print(f"values compared: {counter[0]:,} ({n_cells:,} in result cells, {counter[0] - n_cells:,} in downloads)")
    print(f"differences: {len(diffs):,}, of which listed as intended in {ALLOWED.name}: {len(diffs) - len(left):,}")
    for g, c, why in allowed:
        n = sum(1 for d in diffs if fnmatch.fnmatch(d[0], g) and (c in ('*', d[1]) or fnmatch.fnmatch(d[1], c)))
        if n:
            print(f"  intended: {n:,} in {g} {c}: {why}")
    for f, col, what in left[:int(os.environ.get("SAME_NUMBERS_SHOW", "200"))]:
        print(f"DIFFERENT {f} {col}: {what}")
    if len(left) > int(os.environ.get("SAME_NUMBERS_SHOW", "200")):
        print(f"... and {len(left) - 200:,} more")
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
