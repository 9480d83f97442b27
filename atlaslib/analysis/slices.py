"""The card's metric per slice of the test items, with bootstrap (or exact) intervals.

Slices are data: each card module declares ``SLICES`` (slice name -> the prediction-record field, and for
numbers the bands). A slice's groups are the field's values (categories; ``top`` keeps the most frequent,
pooling the rest as "other"), the bands (inclusive ``(low, high)``, ``None`` = open) or, for a missing
value, the ``missing`` label. Each group is scored by the card's declared
:class:`~atlaslib.metrics.engine.SliceRule` (its ``Scoring.slices``): the same formulas as the leaderboard on
the group's per-unit counts, with the card's resampling restricted to the group's units (stratified items,
whole case reports, documents), or the exact Clopper–Pearson interval where the card's interval is exact. A
card whose slices are not groups of its units (mentions by type or length, the scorer's per-group counts)
gives them with its ``slice_counts(cell, spec, group_of, group_order)``.

A metric the rule marks undefined on a group (macro F1 on one gold class: the other class's F1 would count
only false alarms) has no value there, with the reason; a group with fewer units than the rule's
``min_units`` (items; gold mentions for span slices; gold items for the scorer's slices) gets its point
estimate and, instead of an interval, the note "too few … for an interval".
"""
from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd

from . import analysis_of, n_resamples_of, ok_cells, one_model_label, seed_cells, seeds_label

#: the fewest units a group needs for an interval under the cards' bootstrap slice rules
#: (:class:`atlaslib.metrics.engine.SliceRule`'s default ``min_units``)
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


from ..metrics.spans import mention_value  # noqa: E402,F401  (a mention slice's value; the explorer reads it here)


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


def primary_metric(card: str) -> str:
    """The metric a slice of ``card`` is read by (the first its :class:`~atlaslib.metrics.engine.SliceRule`
    shows)."""
    from ..cards import scoring_of

    return next(iter(scoring_of(card).slices.metrics))


def groups_of(cell: dict, spec: dict, slice_counts=None) -> list | None:
    """``[(group, UnitCounts)]`` of one slice of one cell: the card's own ``slice_counts`` when it scores the
    slice itself (mentions, the scorer's per-group counts), else the units grouped by the records' field;
    None when the records lack the field."""
    if slice_counts is not None:
        found = slice_counts(cell, spec, group_of, group_order)
        if found is not None:
            return found
    recs = cell["predictions"]
    f = spec["field"]
    if not all(f in r for r in recs):
        return None
    top = _top_values([r[f] for r in recs], spec)
    labels = [group_of(r[f], spec, top) for r in recs]
    from ..cards import counted

    lab = np.array(labels, dtype=object)
    uc = counted(cell)
    return [(g, uc.take(lab == g)) for g in group_order(spec, labels)]


def slice_table(cells, card: str | None = None, slices: dict | None = None) -> pd.DataFrame:
    """Library entry point: one row per (ok run, slice, group, metric) with ``n`` (units in the group),
    ``value``, ``ci_low``, ``ci_high`` and ``note`` (why there is no interval). ``slices`` defaults to the
    card's ``SLICES``; a slice whose field the records lack (cells written before the field existed) is
    left out. Every number is the card's declared formula on the group's per-unit counts
    (:func:`atlaslib.metrics.engine.slice_rows`), with the card's resampling on the group's units (or the
    exact interval where the card declares one)."""
    from ..cards import card_module, scoring_of
    from ..metrics.engine import slice_rows

    cells = list(cells)
    card = card or (cells[0]["card"] if cells else None)
    columns = COLUMNS
    if card is None:
        return pd.DataFrame([], columns=COLUMNS)
    slices = card_slices(card) if slices is None else slices
    scoring = scoring_of(card)
    rule = scoring.slices
    slice_counts = getattr(card_module(card), "slice_counts", None)
    rows = []
    cache: dict = {}      # the resamples of a group, shared by the runs (same units, same strata)
    for cell in ok_cells(cells):
        if rule is None:
            break
        seed, n_res = _seed(cell, scoring.resampling.seed), n_resamples_of(cell)
        by_seed = seed_cells(cell)
        if by_seed:
            columns = COLUMNS + ["per_seed"]
            rows += seeded_rows(cell, by_seed, slices, scoring, slice_counts, seed, n_res, cache)
            continue
        run = one_model_label(cell)
        for name, spec in slices.items():
            groups = groups_of(cell, spec, slice_counts)
            for g, sub in groups or ():
                for shown, n, v, lo, hi, note in slice_rows(scoring, sub, rule, seed, n_res, cache):
                    rows.append(_row(run, name, g, n, shown, v, lo, hi, note))
    return pd.DataFrame(rows, columns=columns)


def seeded_rows(cell: dict, by_seed: list, slices: dict, scoring, slice_counts, seed: int, n_res: int,
                cache: dict) -> list[dict]:
    """The slice rows of a row over training seeds (``by_seed``: :func:`atlaslib.analysis.seed_cells`), by the
    leaderboard's rule for it (:func:`atlaslib.metrics.seeds.seed_mean`): each group's metric is the mean over
    the seeds' models of the card's formula on that model's counts of the group, with the two-level interval
    (seeds drawn with replacement, the group's units by the card's resampling, the same draw for every seed).
    A group under the rule's ``min_units`` gets the mean without an interval; a metric the rule marks undefined
    for some seed's model is undefined for the row (naming the seed). Each row's ``per_seed`` gives every
    seed's figure with its own item interval."""
    from ..metrics import engine
    from ..metrics.seeds import SeedError, per_seed_text, seed_mean

    rule = scoring.slices
    run = seeds_label(cell)
    names = [sd for sd, _ in by_seed]
    rows = []
    for name, spec in slices.items():
        per = [groups_of(c, spec, slice_counts) for _, c in by_seed]
        if any(p is None for p in per):
            continue
        maps = [dict(p) for p in per]
        order = list(dict.fromkeys(g for p in per for g, _ in p))
        for g in order:
            subs = [m.get(g) for m in maps]
            lacking = [sd for sd, u in zip(names, subs) if u is None]
            if lacking:
                for shown in rule.metrics:
                    rows.append(_row(run, name, g, 0, shown, None,
                                     note=f"no such group for seed {lacking[0]}'s model") | {"per_seed": ""})
                continue
            first = subs[0]
            if any(list(map(str, u.ids)) != list(map(str, first.ids)) for u in subs[1:]):
                raise SeedError(f"slices of {run}: the seeds' models were not scored on the same units of "
                                f"{name} = {g}")
            tots = [u.total() for u in subs]
            n = int(rule.support(tots[0]))
            w = None
            if n >= rule.min_units:
                key = None
                if scoring.resampling.rule == "stratified":
                    key = (seed, n_res, np.asarray(first.groups[scoring.resampling.by]).tobytes())
                w = cache.get(key) if key is not None else None
                if w is None:
                    w = engine.weights(first, scoring.resampling, n_res, seed)
                    if key is not None:
                        cache[key] = w
                wtots = [engine.totals(u, w) for u in subs]
            for shown, m in rule.metrics.items():
                whys = [(sd, m.undefined_if(t)) for sd, t in zip(names, tots)] if m.undefined_if else []
                whys = [(sd, why) for sd, why in whys if why]
                if whys:
                    why = whys[0][1] if len(whys) == len(names) else f"{whys[0][1]} (seed {whys[0][0]})"
                    rows.append(_row(run, name, g, n, shown, None, note=why) | {"per_seed": ""})
                    continue
                points = [float(m.formula(t)) for t in tots]
                if n < rule.min_units:
                    v = float(np.mean(points))
                    note = f"too few {rule.unit} ({n} < {rule.min_units}) for an interval"
                    each = [{"seed": sd, "value": p if np.isfinite(p) else None} for sd, p in zip(names, points)]
                    rows.append(_row(run, name, g, n, shown, v, note=note) | {"per_seed": per_seed_text(each)})
                    continue
                values = np.stack([np.asarray(m.formula(t), dtype=float) for t in wtots], axis=1)
                got = seed_mean(names, points, values)
                v = got["value"]
                note = "" if v is not None else "undefined on this group"
                rows.append(_row(run, name, g, n, shown, v if v is not None else float("nan"),
                                 got["ci_low"] if v is not None else None, got["ci_high"] if v is not None else None,
                                 note) | {"per_seed": per_seed_text(got["per_seed"])})
    return rows
