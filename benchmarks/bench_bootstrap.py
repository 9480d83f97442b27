"""Bootstrap intervals: the atlas' vectorised bootstraps against a per-resample loop of reference calls.

NegEx (item level, stratified resamples)
    Test set of ``atlas-full-v1`` (1,432 items). Predictions from a real run: by default the
    all-MiniLM-L6-v2 probe (``negex.run_protocol``; its embeddings are served by the model-call store
    when it holds them), or ``--cell results/negex/atlas-full-v1/<model>/<protocol>.json`` (a result cell's
    predictions). 1,000 stratified resamples, every NegEx metric (macro F1, sensitivity, specificity,
    precision, ROC-AUC).

    - atlas: the scoring engine (``atlaslib.metrics.engine.evaluate`` on the card's per-item counts: the
      resamples as multiplicity weights, one product ``W @ C`` for all label metrics, ROC-AUC from the scores
      ranked once and counted with the weights), and for reference ``tests/metrics/reference.py``'s ``binary_metrics``
      (index draw + one vectorised call per metric);
    - reference: the same ``stratified_indices``, then per resample sklearn's ``f1_score(average=
      "macro")``, ``recall_score`` (positive and negative class), ``precision_score`` and
      ``roc_auc_score``, and ``np.quantile`` at the same levels.

MACCROBAT (document level, cluster resamples)
    Test set of ``atlas-n100-v1`` (100 sentences from the case reports drawn), predictions of the
    card's ``memorize`` baseline (deterministic, no weights), 1,000 cluster resamples by case report.

    - atlas: ``atlaslib.metrics.spans.span_metrics_with_ci`` (counts per sentence, one integer product
      for all resamples);
    - reference: the same ``cluster_indices``, then per resample seqeval's ``f1_score``,
      ``precision_score``, ``recall_score`` (micro) and ``f1_score(average="macro")``.

The script prints the times, the ratios (goal >= 100x for the engine on NegEx, >= 50x elsewhere) and checks the intervals: bit for bit for the
four label metrics; ROC-AUC and the span metrics are the same quantities computed by different
floating-point routes (exact Mann-Whitney U vs sklearn's trapezoid; 2TP/(2TP+FP+FN) vs seqeval's
2PR/(P+R)), so they must agree to 1e-15. Exit status 1 when an interval differs or a ratio is below 50.

Run: ``.venv/bin/python benchmarks/bench_bootstrap.py [--repeats 3] [--cell PATH]`` (about a minute).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import REPO, print_machine, use_data_dir  # noqa: E402

LEVEL = 0.95
LEVELS = [(1 - LEVEL) / 2, 1 - (1 - LEVEL) / 2]       # as atlaslib.metrics.bootstrap.percentile_ci
TOLERANCE = 1e-15


def _pct(values):
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    return tuple(float(x) for x in np.quantile(v, LEVELS)) if v.size else (float("nan"), float("nan"))


def _best(fn, repeats):
    best, out = float("inf"), None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


# ------------------------------------------------------------------------------------------- NegEx

def negex_predictions(cell: str | None, model: str, protocol: str):
    """``(y_true, y_pred, y_score or None, where)`` on the atlas-full-v1 test set."""
    from atlaslib.cards import negex

    items = negex.load_items()
    manifest = negex.split(items, "atlas-full-v1")
    train, test = negex.split_frames(items, manifest)
    y = test["label"].to_numpy(dtype=int)
    if cell:
        with open(cell, encoding="utf-8") as f:
            c = json.load(f)
        if c.get("card") != "negex" or c.get("version") != "atlas-full-v1":
            raise SystemExit(f"--cell {cell}: expected a negex atlas-full-v1 result cell, got card "
                             f"{c.get('card')!r} version {c.get('version')!r}")
        by_id = {r["item_id"]: r for r in c.get("predictions") or []}
        missing = [i for i in test["item_id"] if i not in by_id]
        if missing:
            raise SystemExit(f"--cell {cell}: {len(missing)} test items have no prediction, e.g. {missing[:3]}")
        rows = [by_id[i] for i in test["item_id"]]
        pred = np.array([int(r["pred"] == negex.POSITIVE) for r in rows])
        scores = [r.get("score") for r in rows]
        score = None if any(s is None for s in scores) else np.asarray(scores, dtype=float)
        return y, pred, score, f"result cell {cell} ({c.get('model')}, {c.get('protocol')})"
    from atlaslib.results import Timer

    with Timer() as timer:
        out = negex.run_protocol(model, protocol, train, test)
    took, mc = timer.seconds, timer.timing["model_calls"]
    note = f", model calls made {mc['made']} served {mc['served']}"
    score = None if out["score"] is None else np.asarray(out["score"], dtype=float)
    return y, np.asarray(out["pred"], dtype=int), score, f"run {model} {protocol} ({took:.1f} s{note})"


def negex_loop(y, p, s, n_resamples, seed):
    from sklearn.metrics import f1_score, precision_score, recall_score, roc_auc_score

    from atlaslib.metrics.bootstrap import stratified_indices

    idx = stratified_indices(y, n_resamples, seed)
    vals = {"macro_f1": [], "sensitivity": [], "specificity": [], "precision": [], "roc_auc": []}
    for r in idx:
        yt, yp = y[r], p[r]
        vals["macro_f1"].append(f1_score(yt, yp, average="macro", labels=[0, 1], zero_division=0))
        vals["sensitivity"].append(recall_score(yt, yp, pos_label=1, zero_division=0))
        vals["specificity"].append(recall_score(yt, yp, pos_label=0, zero_division=0))
        vals["precision"].append(precision_score(yt, yp, pos_label=1, zero_division=0))
        if s is not None:
            vals["roc_auc"].append(roc_auc_score(yt, s[r]))
    return {k: _pct(v) for k, v in vals.items() if v}


def bench_negex(args) -> bool:
    from atlaslib.metrics.bootstrap import DEFAULT_SEED
    sys.path.insert(0, str(REPO))   # the tests' index-by-index reference
    from tests.metrics.reference import binary_metrics

    y, p, s, where = negex_predictions(args.cell, args.model, args.protocol)
    n = args.resamples
    print(f"\nNegEx atlas-full-v1 test: {len(y)} items ({int(y.sum())} negated); predictions: {where}; "
          f"{n} stratified resamples, seed {DEFAULT_SEED}")
    from atlaslib.cards import negex
    from atlaslib.metrics import engine

    records = [{"item_id": f"i{k}", "gold": negex.LABELS[int(a)], "pred": negex.LABELS[int(b)],
                "score": None if s is None else float(s[k])} for k, (a, b) in enumerate(zip(y, p))]

    def by_engine():
        uc = negex.counts({"predictions": records})
        return engine.evaluate(negex.SCORING, uc, "x", n_resamples=n, seed=DEFAULT_SEED)

    t_eng, fast = _best(by_engine, args.repeats)
    t_vec, vec = _best(lambda: binary_metrics(y, p, s, "x", n_resamples=n, seed=DEFAULT_SEED), args.repeats)
    t_loop, loop = _best(lambda: negex_loop(y, p, s, n, DEFAULT_SEED), args.repeats)
    same_as_vec = all(fast[k] == vec[k] for k in vec)
    ok = True
    print(f"{'metric':<12} {'value':>8} {'ci_low':>20} {'ci_high':>20}  vs sklearn loop")
    for name, (lo, hi) in loop.items():
        m = fast[f"{name}_x"]
        exact = (m["ci_low"], m["ci_high"]) == (lo, hi)
        d = max(abs(m["ci_low"] - lo), abs(m["ci_high"] - hi))
        same = exact or (name == "roc_auc" and d <= TOLERANCE)
        ok &= same
        verdict = "identical" if exact else (f"equal within {d:.1e}" if same else f"DIFFERENT by {d:.3g}")
        print(f"{name:<12} {m['value']:>8.4f} {m['ci_low']!r:>20} {m['ci_high']!r:>20}  {verdict}")
    if s is None:
        print("roc_auc      (no scores in these predictions: not compared)")
    ratio, ratio_vec = t_loop / t_eng, t_loop / t_vec
    print(f"NegEx bootstrap: engine {t_eng * 1000:.1f} ms (counting the items included), binary_metrics "
          f"{t_vec * 1000:.1f} ms, sklearn loop {t_loop:.2f} s; ratio engine {ratio:.0f}x (goal >= 100x: "
          f"{'met' if ratio >= 100 else 'NOT met'}), binary_metrics {ratio_vec:.0f}x; intervals "
          f"{'equal' if ok else 'DIFFERENT'}; engine and binary_metrics {'identical' if same_as_vec else 'DIFFERENT'}")
    return ok and same_as_vec and ratio >= 100


# ------------------------------------------------------------------------------------------- MACCROBAT

def maccrobat_loop(gold, pred, groups, n_resamples, seed):
    from seqeval.metrics import f1_score, precision_score, recall_score

    from atlaslib.metrics.bootstrap import cluster_indices

    vals = {"f1": [], "precision": [], "recall": [], "macro_f1": []}
    for r in cluster_indices(groups, n_resamples, seed):
        g = [gold[i] for i in r]
        q = [pred[i] for i in r]
        vals["f1"].append(f1_score(g, q, zero_division=0))
        vals["precision"].append(precision_score(g, q, zero_division=0))
        vals["recall"].append(recall_score(g, q, zero_division=0))
        vals["macro_f1"].append(f1_score(g, q, average="macro", zero_division=0))
    return {k: _pct(v) for k, v in vals.items()}


def bench_maccrobat(args) -> bool:
    from atlaslib.cards import maccrobat
    from atlaslib.metrics.spans import span_metrics_with_ci

    items = maccrobat.load_items()
    manifest = maccrobat.split(items, "atlas-n100-v1")
    out = maccrobat.run_protocol(items, manifest, "memorize", "zero_shot")
    gold, pred, groups = out.gold, out.pred, out.documents
    n, seed = args.resamples, maccrobat.SEED
    print(f"\nMACCROBAT atlas-n100-v1 test: {len(gold)} sentences from {len(set(groups))} case reports; "
          f"predictions: memorize baseline; {n} cluster resamples by report, seed {seed}")
    t_vec, fast = _best(lambda: span_metrics_with_ci(gold, pred, groups, types=maccrobat.TYPES,
                                                     n_resamples=n, seed=seed), args.repeats)
    t_loop, loop = _best(lambda: maccrobat_loop(gold, pred, groups, n, seed), args.repeats)
    ok = True
    print(f"{'metric':<12} {'value':>8} {'ci_low':>20} {'ci_high':>20}  vs seqeval loop")
    for name, (lo, hi) in loop.items():
        m = fast[name]
        exact = (m["ci_low"], m["ci_high"]) == (lo, hi)
        d = max(abs(m["ci_low"] - lo), abs(m["ci_high"] - hi))
        ok &= d <= TOLERANCE
        verdict = "identical" if exact else (f"equal within {d:.1e}" if d <= TOLERANCE else f"DIFFERENT by {d:.3g}")
        print(f"{name:<12} {m['value']:>8.4f} {m['ci_low']!r:>20} {m['ci_high']!r:>20}  {verdict}")
    ratio = t_loop / t_vec
    print(f"MACCROBAT cluster bootstrap: vectorised {t_vec * 1000:.1f} ms, seqeval loop {t_loop:.2f} s, "
          f"ratio {ratio:.0f}x (goal >= 50x: {'met' if ratio >= 50 else 'NOT met'}); "
          f"intervals {'equal' if ok else 'DIFFERENT'}")
    return ok and ratio >= 50


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3, help="timed runs of each side; the best counts")
    ap.add_argument("--cell", default=None, help="a NegEx atlas-full-v1 result cell to take predictions from")
    ap.add_argument("--model", default="all-minilm-l6-v2", help="NegEx run when no --cell (default: %(default)s)")
    ap.add_argument("--protocol", default="probe", help="NegEx protocol when no --cell (default: %(default)s)")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--only", choices=["negex", "maccrobat"], default=None)
    args = ap.parse_args(argv)
    if args.resamples < 1 or args.repeats < 1:
        ap.error("--resamples and --repeats must be positive integers")
    use_data_dir(args.data_dir)
    print_machine()
    ok = True
    if args.only in (None, "negex"):
        ok &= bench_negex(args)
    if args.only in (None, "maccrobat"):
        ok &= bench_maccrobat(args)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
