"""The card's metric per slice of the test items, with bootstrap (or exact) intervals.

Slices are data: each card module declares ``SLICES`` (slice name -> the prediction-record field, and for
numbers the bands). A slice's groups are the field's values (categories; ``top`` keeps the most frequent,
pooling the rest as "other"), the bands (inclusive ``(low, high)``, ``None`` = open) or, for a missing
value, the ``missing`` label. Each group is scored with the card's own metric functions and interval
method, restricted to the group's items:

==============  ==============================================  =============================================
card            metric                                          interval
==============  ==============================================  =============================================
negex           macro F1, sensitivity, specificity              stratified bootstrap (the card's resamples:
                (:mod:`atlaslib.metrics.classification`)        ``stratified_indices`` with the cell's seed)
nli_negation    accuracy (abstention = wrong)                   exact Clopper–Pearson (the card's)
maccrobat       entity F1 (strict, :mod:`atlaslib.metrics.spans`) cluster bootstrap over case reports
tempeval        the scorer's F1 from its counts                 bootstrap over documents (``bootstrap_f1``)
==============  ==============================================  =============================================

On NegEx, a group whose items all have one gold label gets no macro F1 ("one gold class only": the other
class's F1 would count only false alarms); its sensitivity or specificity still says how the runs did.
A group with fewer than :data:`MIN_ITEMS` units (items; gold mentions for span slices; gold items for
TempEval) gets its point estimate and, instead of an interval, the note "too few … for an interval".
"""
from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd

from . import addresses, analysis_of, n_resamples_of, ok_cells, run_label

#: fewest units (items, gold mentions, gold relations) a group needs for an interval
MIN_ITEMS = 20
COLUMNS = ["run", "slice", "group", "n", "metric", "value", "ci_low", "ci_high", "note"]


def card_slices(card: str) -> dict:
    """The slices a card declares (``CARD.analysis.slices``)."""
    return dict(analysis_of(card).slices)


def band_label(lo, hi) -> str:
    if hi is None:
        return f"≥ {lo}"
    return f"{lo}" if lo == hi else f"{lo}–{hi}"


def group_of(value, spec: dict, top: set | None = None) -> str:
    """The group label of one field value under a slice spec (see module docstring)."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return spec.get("missing", "missing")
    bands = spec.get("bands")
    if bands:
        for lo, hi in bands:
            if value >= lo and (hi is None or value <= hi):
                return band_label(lo, hi)
        return "outside the bands"
    if top is not None and value not in top:
        return "other"
    return str(value)


def group_order(spec: dict, labels) -> list[str]:
    """Bands in their declared order, categories in ``order`` or by frequency; "other", missing last."""
    counts = Counter(labels)
    tail = ["other", spec.get("missing", "missing"), "outside the bands"]
    if spec.get("bands"):
        head = [band_label(lo, hi) for lo, hi in spec["bands"]]
    elif spec.get("order"):
        head = list(spec["order"])
    else:
        head = sorted((x for x in counts if x not in tail), key=lambda x: (-counts[x], x))
    return [x for x in head + tail if x in counts]


def _top_values(values, spec) -> set | None:
    k = spec.get("top")
    if not k:
        return None
    counts = Counter(v for v in values if v is not None)
    return {v for v, _ in counts.most_common(k)}


def _row(run, slice_name, group, n, metric, value, lo=None, hi=None, note="") -> dict:
    def num(x):
        return None if x is None or not np.isfinite(x) else float(x)
    return {"run": run, "slice": slice_name, "group": group, "n": int(n), "metric": metric, "value": num(value),
            "ci_low": num(lo), "ci_high": num(hi), "note": note}


def _seed(cell: dict, default: int) -> int:
    return int((cell.get("seeds") or {}).get("bootstrap", default))


# -- NegEx ------------------------------------------------------------------------------------------

NEGEX_METRICS = ("macro_f1", "sensitivity", "specificity")


def negex_group_scores(y, p, seed: int, n_resamples: int | None = None, indices=None) -> dict:
    """``{metric: (value, ci_low, ci_high)}`` for one group: the card's functions on the group's items, the
    percentile interval over the card's stratified resamples of the group (None without one). ``indices``
    may pass those resamples in (they depend on the group's gold labels only, so runs share them)."""
    from ..metrics import bootstrap, classification as C

    y, p = np.asarray(y, int), np.asarray(p, int)
    n_resamples = n_resamples or bootstrap.DEFAULT_RESAMPLES
    idx = None
    if len(y) >= MIN_ITEMS:
        idx = indices if indices is not None else bootstrap.stratified_indices(y, n_resamples, seed)
    Y, P = (y[idx], p[idx]) if idx is not None else (None, None)   # gathered once for the three metrics
    out = {}
    for name in NEGEX_METRICS:
        fn = getattr(C, name)
        value = float(fn(y, p))
        lo = hi = None
        if idx is not None and np.isfinite(value):
            lo, hi = bootstrap.percentile_ci(np.asarray(fn(Y, P), dtype=float))
        out[name] = (value, lo, hi)
    return out


def _negex(cell, slices, cache: dict | None = None) -> list[dict]:
    from ..metrics import bootstrap

    cache = {} if cache is None else cache

    recs = cell["predictions"]
    run, seed, n_res = run_label(cell), _seed(cell, bootstrap.DEFAULT_SEED), n_resamples_of(cell)
    rows = []
    for name, spec in slices.items():
        f = spec["field"]
        if not all(f in r for r in recs):
            continue
        top = _top_values([r[f] for r in recs], spec)
        labels = [group_of(r[f], spec, top) for r in recs]
        y = np.array([r["gold"] == "negated" for r in recs], int)
        p = np.array([r["pred"] == "negated" for r in recs], int)
        lab = np.array(labels, dtype=object)
        for g in group_order(spec, labels):
            m = lab == g
            n = int(m.sum())
            note = "" if n >= MIN_ITEMS else f"too few items ({n} < {MIN_ITEMS}) for an interval"
            idx = None
            if n >= MIN_ITEMS:
                key = (seed, y[m].tobytes())
                key = (*key, n_res)
                if key not in cache:
                    cache[key] = bootstrap.stratified_indices(y[m], n_res, seed)
                idx = cache[key]
            for metric, (v, lo, hi) in negex_group_scores(y[m], p[m], seed, indices=idx).items():
                if metric == "macro_f1" and len(set(y[m])) < 2:
                    # one gold class: the other class's F1 only counts false alarms; no macro F1
                    v, lo, hi, why = None, None, None, "one gold class only"
                else:
                    why = note or ("" if np.isfinite(v) else "undefined on this group")
                rows.append(_row(run, name, g, n, metric, v, lo, hi, why))
    return rows


# -- NLI challenge ----------------------------------------------------------------------------------

def _nli(cell, slices) -> list[dict]:
    from ..cards.nli_negation.challenge import RateEstimate

    recs = cell["predictions"]
    run = run_label(cell)
    rows = []
    for name, spec in slices.items():
        f = spec["field"]
        if not all(f in r for r in recs):
            continue
        labels = [group_of(r[f], spec) for r in recs]
        for g in group_order(spec, labels):
            sub = [r for r, lab in zip(recs, labels) if lab == g]
            est = RateEstimate.of(sum(r["pred"] == r["gold"] for r in sub), len(sub))
            if len(sub) >= MIN_NLI:
                rows.append(_row(run, name, g, len(sub), "accuracy", est.value, est.ci_low, est.ci_high))
            else:
                rows.append(_row(run, name, g, len(sub), "accuracy", est.value,
                                 note=f"too few cases ({len(sub)} < {MIN_NLI}) for an interval"))
    return rows


#: the NLI card's interval is exact (Clopper–Pearson), valid for any n; below this many cases it is too wide
#: to say anything and is not shown
MIN_NLI = 10


# -- MACCROBAT --------------------------------------------------------------------------------------

def mention_value(mention, spec):
    """A mention ``(type, first, last)``'s slice value: its ``type`` or its ``length`` in words."""
    t, a, b = mention
    return {"type": t, "length": b - a + 1}[spec["field"]]


def _maccrobat(cell, slices) -> list[dict]:
    from ..metrics.bootstrap import DEFAULT_RESAMPLES, percentile_ci
    from ..metrics.spans import cluster_totals, mentions, scores_from_totals, span_counts, tags_from_mentions

    recs = cell["predictions"]
    run = run_label(cell)
    seed = _seed(cell, 20261006)
    n_res = n_resamples_of(cell, DEFAULT_RESAMPLES)
    docs = [r["document"] for r in recs]
    rows = []
    for name, spec in slices.items():
        if spec.get("unit") == "mention":
            gm = [mentions(r["gold"]) for r in recs]
            pm = [mentions(r["pred"]) for r in recs]
            labels = [group_of(mention_value(m, spec), spec) for ms in gm + pm for m in ms]
            order = group_order(spec, labels)
            code = {g: k for k, g in enumerate(order)}

            def relabel(ms, n):
                return tags_from_mentions(n, [(f"{t}__{code[group_of(mention_value((t, a, b), spec), spec)]}", a, b)
                                              for t, a, b in ms])
            gold = [relabel(ms, len(r["gold"])) for ms, r in zip(gm, recs)]
            pred = [relabel(ms, len(r["pred"])) for ms, r in zip(pm, recs)]
            counts, types = span_counts(gold, pred)
            groups = [(g, [k for k, t in enumerate(types) if t.endswith(f"__{code[g]}")]) for g in order]
            item_masks = None
        else:
            f = spec["field"]
            if not all(f in r for r in recs):
                continue
            labels = [group_of(r[f], spec) for r in recs]
            counts, types = span_counts([r["gold"] for r in recs], [r["pred"] for r in recs])
            lab = np.array(labels, dtype=object)
            groups = [(g, list(range(len(types)))) for g in group_order(spec, labels)]
            item_masks = {g: lab == g for g, _ in groups}
        for g, cols in groups:
            sub = counts[:, cols, :]
            d = docs
            if item_masks is not None:
                sub, d = sub[item_masks[g]], [x for x, keep in zip(docs, item_masks[g]) if keep]
            point = scores_from_totals(sub.sum(0))
            support = int(sub[..., 0].sum() + sub[..., 2].sum())  # gold mentions = TP + FN
            if support >= MIN_ITEMS:
                boot = scores_from_totals(cluster_totals(sub, d, n_resamples=n_res, seed=seed))
                for metric in ("f1", "precision", "recall"):
                    lo, hi = percentile_ci(boot[metric])
                    rows.append(_row(run, name, g, support, f"entity_{metric}", point[metric], lo, hi))
            else:
                for metric in ("f1", "precision", "recall"):
                    rows.append(_row(run, name, g, support, f"entity_{metric}", point[metric],
                                     note=f"too few gold mentions ({support} < {MIN_ITEMS}) for an interval"))
    return rows


# -- TempEval ---------------------------------------------------------------------------------------

def _tempeval(cell, slices) -> list[dict]:
    from ..cards.tempeval.runs import BOOTSTRAP
    from ..cards.tempeval.scoring import bootstrap_f1, f1_from_counts

    recs = cell["predictions"]
    run = run_label(cell)
    rows = []
    for name, spec in slices.items():
        f, metric = spec["field"], spec["metric"]
        if not addresses(cell, metric):
            continue  # the run does not address this sub-task
        if not all("slices" in r and f in r["slices"] for r in recs):
            continue
        values = sorted({v for r in recs for v in r["slices"][f]})
        for g in group_order(spec, values):
            per_doc = np.array([r["slices"][f].get(g, [0, 0, 0, 0]) for r in recs], dtype=float)
            ref = int(per_doc[:, 0].sum())
            value = float(f1_from_counts(*per_doc.sum(axis=0))[2])
            if ref >= MIN_ITEMS:
                b = bootstrap_f1(per_doc, BOOTSTRAP["n_resamples"], _seed(cell, BOOTSTRAP["seed"]))
                rows.append(_row(run, name, g, ref, "f1", b["value"], b["ci_low"], b["ci_high"]))
            else:
                rows.append(_row(run, name, g, ref, "f1", value,
                                 note=f"too few gold items ({ref} < {MIN_ITEMS}) for an interval"))
    return rows


#: per kind of card (:class:`atlaslib.cards.Analysis`): the slice scorer and the metric a slice is read by
SCORERS = {"binary": _negex, "labels": _nli, "spans": _maccrobat, "temporal": _tempeval}
PRIMARY = {"binary": "macro_f1", "labels": "accuracy", "spans": "entity_f1", "temporal": "f1"}


def primary_metric(card: str) -> str:
    """The metric a slice of ``card`` is read by (``PRIMARY`` of its kind)."""
    return PRIMARY[analysis_of(card).kind]


def slice_table(cells, card: str | None = None, slices: dict | None = None) -> pd.DataFrame:
    """Library entry point: one row per (ok run, slice, group, metric) with ``n`` (units in the group),
    ``value``, ``ci_low``, ``ci_high`` and ``note`` (why there is no interval). ``slices`` defaults to the
    card's ``SLICES``; a slice whose field the records lack (cells written before the field existed) is
    left out."""
    cells = list(cells)
    card = card or (cells[0]["card"] if cells else "negex")
    slices = card_slices(card) if slices is None else slices
    rows = []
    cache: dict = {}      # NegEx: the resamples of a group, shared by the runs (same items, same gold)
    for cell in ok_cells(cells):
        kind = analysis_of(card).kind
        rows.extend(_negex(cell, slices, cache) if kind == "binary" else SCORERS[kind](cell, slices))
    return pd.DataFrame(rows, columns=COLUMNS)
