"""Paired comparisons: their cost in a book build, and the vectorised paired bootstrap against a loop.

1. Comparisons in the book. From a results folder (``--results-dir``, default ``results/``, with the
   executed notebooks in ``--runs-dir``), the script times what the comparisons add to a page render for
   every (card, split version): ``atlaslib.pages.comparisons.comparison_for`` (paired resamples, McNemar,
   Holm, ranks), its section (table, figure, CSV/JSON downloads) and the leaderboard's second table
   (cluster intervals). Reference: the render + Jupyter Book build of the same results without running
   anything (``atlas book --no-run``: what a no-op ``atlas book`` does after finding every run cached).
   Goal: comparisons <= 10 % of that.
2. Paired bootstrap. NegEx ``atlas-full-v1`` cells (every ok run in the results folder): the atlas's
   ``compare_paired`` (unit multiplicities times per-item counts, one product per model) against a loop
   over the same stratified resample indices calling scikit-learn per resample, model and metric (macro
   F1, sensitivity, specificity, precision, ROC-AUC), differences taken per pair. Goal: >= 50x, and the
   differences agree (label metrics bit for bit; ROC-AUC to 1e-15). The loop runs the first
   ``--loop-resamples`` (default 200) resamples; its time is scaled linearly to all of them.

Prints both ratios in one run; exit status 1 when a goal or the agreement check fails.

Run: ``.venv/bin/python benchmarks/bench_compare.py --results-dir results --runs-dir book/runs``
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from itertools import combinations
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, print_machine, use_data_dir  # noqa: E402


def comparisons_time(results_dir: Path, runs_dir: Path, out: Path) -> tuple[float, int]:
    from atlaslib import results
    from atlaslib.pages.card_pages import leaderboard_markdown
    from atlaslib.cards import available_cards
    from atlaslib.pages import comparisons

    total, n = 0.0, 0
    for card in available_cards():
        cells = results.read_cells(results_dir, card.name)
        page_dir = out / "book" / "cards"
        page_dir.mkdir(parents=True, exist_ok=True)
        for version in card.versions:
            if not any(c["version"] == version for c in cells):
                continue
            t = time.perf_counter()
            comp = comparisons.comparison_for(card, version, cells)
            leaderboard_markdown(card, version, cells, page_dir, out, (), comparison=comp)
            comparisons.render(card, version, cells, page_dir, out, comp)
            total += time.perf_counter() - t
            n += 1
    return total, n


def noop_book_time(results_dir: Path, runs_dir: Path, build_dir: Path) -> tuple[float, int]:
    from atlaslib import book

    paths = book.BuildPaths(results=results_dir, runs=runs_dir, build=build_dir)
    t = time.perf_counter()
    code = book.build(paths=paths, run_runs=False, log=lambda *a, **k: None)
    return time.perf_counter() - t, code


def paired_vs_loop(results_dir: Path, n_resamples: int = 1000, loop_resamples: int = 200) -> dict:
    from sklearn.metrics import f1_score, precision_score, recall_score, roc_auc_score

    from atlaslib import results
    from atlaslib.metrics import bootstrap
    from atlaslib.metrics import compare as K

    cells = [c for c in results.read_cells(results_dir, "negex")
             if c["version"] == "atlas-full-v1" and c["status"] == "ok"]
    if len(cells) < 2:
        raise SystemExit(f"bench_compare: needs two ok NegEx atlas-full-v1 cells in {results_dir}")
    K.compare_paired(K.paired(cells, 20))                        # imports and first-call costs out of the timing
    t = time.perf_counter()
    comp = K.compare_paired(K.paired(cells, n_resamples))
    fast = time.perf_counter() - t

    t = time.perf_counter()
    ids = [r["item_id"] for r in cells[0]["predictions"]]
    y = np.array([r["gold"] == "negated" for r in cells[0]["predictions"]], dtype=int)
    idx = bootstrap.stratified_indices(y, n_resamples, int(cells[0]["seeds"]["bootstrap"]))[:loop_resamples]
    per_model = {}
    for c in cells:
        rows = {r["item_id"]: r for r in c["predictions"]}
        p = np.array([rows[i]["pred"] == "negated" for i in ids], dtype=int)
        s = [rows[i].get("score") for i in ids]
        s = None if any(v is None for v in s) else np.asarray(s, float)
        vals = {"macro_f1": [], "sensitivity": [], "specificity": [], "precision": [], "roc_auc": []}
        for r in idx:
            yt, pt = y[r], p[r]
            vals["macro_f1"].append(f1_score(yt, pt, average="macro", labels=[0, 1], zero_division=np.nan))
            vals["sensitivity"].append(recall_score(yt, pt, pos_label=1, zero_division=np.nan))
            vals["specificity"].append(recall_score(yt, pt, pos_label=0, zero_division=np.nan))
            vals["precision"].append(precision_score(yt, pt, pos_label=1, zero_division=np.nan))
            if s is not None:
                vals["roc_auc"].append(roc_auc_score(yt, s[r]))
        per_model[K.run_label(c)] = {k: np.asarray(v, float) for k, v in vals.items()}
    loop_diffs = {}
    for a, b in combinations([K.run_label(c) for c in cells], 2):
        for m in per_model[a]:
            if len(per_model[a][m]) and len(per_model[b][m]):
                loop_diffs[(m, a, b)] = per_model[a][m] - per_model[b][m]
    slow = (time.perf_counter() - t) * n_resamples / len(idx)   # the loop's cost is linear in resamples

    p = comp.data
    worst = 0.0
    for (m, a, b), d in loop_diffs.items():
        ours = (p.resampled(a, m) - p.resampled(b, m))[:len(d)]
        both = np.isfinite(ours) & np.isfinite(d)
        if not np.array_equal(np.isfinite(ours), np.isfinite(d)):
            worst = np.inf
        worst = max(worst, float(np.max(np.abs(ours[both] - d[both]))) if both.any() else 0.0)
    return {"fast": fast, "slow": slow, "pairs": len(loop_diffs), "max_abs_difference": worst,
            "models": len(cells), "items": len(y), "loop_resamples": len(idx)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--results-dir", default=str(REPO / "results"))
    ap.add_argument("--runs-dir", default=str(REPO / "book" / "runs"))
    ap.add_argument("--data-dir")
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--loop-resamples", type=int, default=200,
                    help="resamples the sklearn loop runs (its time is scaled to --resamples; default 200)")
    args = ap.parse_args(argv)
    use_data_dir(args.data_dir)
    print_machine()
    results_dir, runs_dir = Path(args.results_dir), Path(args.runs_dir)
    ok = True
    with tempfile.TemporaryDirectory(prefix="bench-compare-") as tmp:
        comp_s, n_splits = comparisons_time(results_dir, runs_dir, Path(tmp) / "src")
        book_s, code = noop_book_time(results_dir, runs_dir, Path(tmp) / "_build")
    share = comp_s / book_s
    print(f"comparisons of {n_splits} (card, version) splits: {comp_s:.2f} s; render + build without runs: "
          f"{book_s:.1f} s (exit {code}); share {share:.1%} (goal <= 10 %)")
    ok &= share <= 0.10
    r = paired_vs_loop(results_dir, args.resamples, args.loop_resamples)
    ratio = r["slow"] / r["fast"]
    print(f"paired bootstrap, NegEx atlas-full-v1, {r['models']} models x {r['items']:,} items, {args.resamples:,} "
          f"resamples, {r['pairs']} (metric, pair) differences: atlas {r['fast']:.3f} s, per-resample sklearn loop "
          f"{r['slow']:.1f} s (timed on {r['loop_resamples']} resamples, scaled), ratio {ratio:.0f}x (goal >= 50x); "
          f"max |difference| {r['max_abs_difference']:.1e}")
    ok &= ratio >= 50 and r["max_abs_difference"] <= 1e-15
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
