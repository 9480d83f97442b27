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
    (:func:`group_rows`), with the card's resampling on the group's units (or the exact interval where the
    card declares one). A row over training seeds (:func:`atlaslib.analysis.seed_cells`) is scored on every
    seed's model by the leaderboard's rule for it and its rows add ``per_seed`` (see :func:`group_rows`)."""
    from ..cards import card_module, scoring_of

    cells = list(cells)
    card = card or (cells[0]["card"] if cells else None)
    columns = COLUMNS
    if card is None:
        return pd.DataFrame([], columns=COLUMNS)
    slices = card_slices(card) if slices is None else slices
    scoring = scoring_of(card)
    if scoring.slices is None:
        return pd.DataFrame([], columns=COLUMNS)
    slice_counts = getattr(card_module(card), "slice_counts", None)
    rows = []
    cache: dict = {}      # the resamples of a group, shared by the runs (same units, same strata)
    for cell in ok_cells(cells):
        seed, n_res = _seed(cell, scoring.resampling.seed), n_resamples_of(cell)
        by_seed = seed_cells(cell)
        if by_seed:
            columns = COLUMNS + ["per_seed"]
        rows += cell_rows(cell, by_seed, slices, scoring, slice_counts, seed, n_res, cache)
    return pd.DataFrame(rows, columns=columns)


def cell_rows(cell: dict, by_seed: list, slices: dict, scoring, slice_counts, seed: int, n_res: int,
              cache: dict) -> list[dict]:
    """The slice rows of one row of the leaderboard: its own model's groups, or for a row over training seeds
    (``by_seed``: :func:`atlaslib.analysis.seed_cells`) each group's counts of every seed's model (the same
    units, else an error), each scored by :func:`group_rows`. A group some seed's model lacks has no value,
    naming the seed."""
    from ..metrics.seeds import SeedError

    rule = scoring.slices
    run = seeds_label(cell) if by_seed else one_model_label(cell)
    members = by_seed or [(None, cell)]
    names = [sd for sd, _ in members] if by_seed else None
    rows = []
    for name, spec in slices.items():
        per = [groups_of(c, spec, slice_counts) for _, c in members]
        if any(p is None for p in per):
            continue
        maps = [dict(p) for p in per]
        for g in dict.fromkeys(g for p in per for g, _ in p):
            subs = [m.get(g) for m in maps]
            lacking = [sd for (sd, _), u in zip(members, subs) if u is None]
            if lacking:
                rows += [_row(run, name, g, 0, shown, None, note=f"no such group for seed {lacking[0]}'s model")
                         | {"per_seed": ""} for shown in rule.metrics]
                continue
            if any(list(map(str, u.ids)) != list(map(str, subs[0].ids)) for u in subs[1:]):
                raise SeedError(f"slices of {run}: the seeds' models were not scored on the same units of "
                                f"{name} = {g}")
            for shown, n, v, lo, hi, note, per_seed in group_rows(scoring, subs, rule, seed, n_res, cache, names):
                rows.append(_row(run, name, g, n, shown, v, lo, hi, note)
                            | ({} if per_seed is None else {"per_seed": per_seed}))
    return rows


def _weights(scoring, uc, seed: int | None, n_res: int | None, cache: dict | None) -> np.ndarray:
    """The card's resamples of a group's units (``engine.weights``), shared through ``cache`` by every group of
    the same strata under stratified resampling."""
    from ..metrics import engine

    key = None
    if cache is not None and scoring.resampling.rule == "stratified":
        key = (seed, n_res, np.asarray(uc.groups[scoring.resampling.by]).tobytes())
        if key in cache:
            return cache[key]
    w = engine.weights(uc, scoring.resampling, n_res, seed)
    if key is not None:
        cache[key] = w
    return w


def group_rows(scoring, counts: list, rule, seed: int | None = None, n_res: int | None = None,
               cache: dict | None = None, seeds: list | None = None) -> list[tuple]:
    """One group of units scored by ``rule`` (the card's :class:`~atlaslib.metrics.engine.SliceRule`):
    ``[(shown name, n, value, ci_low, ci_high, note, per_seed)]``, one per metric the rule shows.

    ``counts`` is ``[UnitCounts]`` of the group: one model's (``seeds`` None; ``per_seed`` None), or every
    training seed's model's on the same units (``seeds``: their names). ``n`` is the rule's ``support`` of the
    group's totals. A metric the rule marks undefined (``undefined_if``) has no value, with the reason (naming
    the seed when not every seed's model is undefined); a group under ``min_units`` gets the point value (the
    mean over the seeds' models) without an interval. Otherwise one model's interval is the card's resampling on
    the group's units (percentile), or exact Clopper–Pearson where the rule is ``exact``; a row over seeds gets
    the leaderboard's rule for it (:func:`atlaslib.metrics.seeds.seed_mean`: the two-level interval, the same
    unit draw for every seed) and ``per_seed`` gives every seed's figure (:func:`~atlaslib.metrics.seeds.per_seed_text`)."""
    from ..metrics import bootstrap, engine
    from ..metrics.seeds import per_seed_text, seed_mean

    one = seeds is None
    names = [None] if one else list(seeds)
    tots = [u.total() for u in counts]
    n = int(rule.support(tots[0]))
    enough = n >= rule.min_units
    wtots = None
    if enough and not (one and rule.exact):
        w = _weights(scoring, counts[0], seed, n_res, cache)
        wtots = [engine.totals(u, w) for u in counts]
    out = []
    for shown, m in rule.metrics.items():
        whys = [(sd, why) for sd, why in ((sd, m.undefined_if(t)) for sd, t in zip(names, tots)) if why] \
            if m.undefined_if else []
        if whys:
            why = whys[0][1] if len(whys) == len(names) else f"{whys[0][1]} (seed {whys[0][0]})"
            out.append((shown, n, None, None, None, why, None if one else ""))
            continue
        points = [float(m.formula(t)) for t in tots]
        lo = hi = per_seed = None
        if not enough:
            v = points[0] if one else float(np.mean(points))
            if not one:
                per_seed = per_seed_text([{"seed": sd, "value": p if np.isfinite(p) else None}
                                          for sd, p in zip(names, points)])
            out.append((shown, n, v, None, None, f"too few {rule.unit} ({n} < {rule.min_units}) for an interval",
                        per_seed))
            continue
        if one:
            v = points[0]
            if rule.exact:
                lo, hi = engine.exact_interval(m, tots[0]) or (None, None)
            elif np.isfinite(v):
                lo, hi = bootstrap.percentile_ci(np.asarray(m.formula(wtots[0]), dtype=float))
        else:
            got = seed_mean(names, points, np.stack([np.asarray(m.formula(t), dtype=float) for t in wtots], axis=1))
            v = float("nan") if got["value"] is None else got["value"]
            if got["value"] is not None:
                lo, hi = got["ci_low"], got["ci_high"]
            per_seed = per_seed_text(got["per_seed"])
        out.append((shown, n, v, lo, hi, "" if np.isfinite(v) else "undefined on this group", per_seed))
    return out
