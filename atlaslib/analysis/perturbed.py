"""Robustness of runs to their variants (:mod:`atlaslib.variants`), from result cells alone.

For each variant cell and the default run it belongs to (same card, version, model and protocol; the
variant's ``parent_run_key`` the default cell's run key when both carry one), on the items the variant
applied to:

- the paired difference of the card's primary metric, variant − default run, with its 95 % paired
  percentile interval: both runs' per-unit data from one call of the card's paired resampling
  (:func:`atlaslib.analysis.paired.paired_from_cells`: the card's resampling unit, seed and stratification), the
  difference taken on each shared resample;
- McNemar's ``b`` (items the default run got right and the variant wrong: what the variant broke) and ``c``
  (the reverse), an item being right when its prediction equals its gold (a row over training seeds: when more
  than half of its seeds' models are right, as the card's paired comparisons count it), and the exact two-sided p
  (:func:`atlaslib.metrics.compare.mcnemar_exact`), Holm-adjusted (:func:`atlaslib.metrics.compare.holm`) over
  the table of one (card, version) and kind (the perturbations; the prompt variants);
- a row over training seeds (``n_seeds`` > 1) whose variant ran every seed's model is compared as a row over
  those seeds: its value the mean over seeds, its difference's interval two-level and seed-paired (``interval``
  :data:`SEED_PAIRED`: each seed's perturbed run against the same seed's default run, one seed draw for both on
  the same resampled units, :func:`atlaslib.metrics.seeds.paired_difference` with ``same_seeds``; every other row's
  ``interval`` is :data:`PAIRED`); a variant cell of its first seed's model alone (written before
  variants ran every seed) is compared with that seed's model (``n_seeds`` 1);
- the number of items the variant read (``n_read``: its predictions; a declared ``max_items`` samples them by
  seed-hash rank), of those it applies to (``n_applicable``) and of the test items (``n_items``).

Each row also holds the smallest stratum of the card's resampling among the items read (``smallest_stratum``; NaN
when the card does not stratify), the card's minimum for an interval (``stratum_minimum``: :func:`stratum_minimum`,
the slice tables' minimum) and whether it is under it (``small_stratum``): such an interval cannot show its
uncertainty. :func:`worst` picks a run's worst perturbation by the declared
:data:`WORST_RULE` (the Holm-adjusted exact McNemar test decides; the largest loss among those it shows worse).
"""
from __future__ import annotations

import copy
from collections import Counter
from typing import Iterable

import numpy as np
import pandas as pd

COLUMNS = ["card", "version", "model", "protocol", "n_seeds", "kind", "variant", "variant_version", "n_read",
           "n_applicable", "n_items",
           "unit", "metric", "default", "variant_value", "difference", "ci_low", "ci_high", "interval", "b", "c", "p_mcnemar",
           "smallest_stratum", "stratum_minimum", "small_stratum", "p_holm", "significant"]

#: what a row's interval is (its ``interval`` column): both runs on the same resamples of the card's units; a row
#: over training seeds whose variant ran every seed also pairs the seeds (one seed draw for both runs)
PAIRED = "paired"
SEED_PAIRED = "seed-paired"
#: the seed pairing in words, for the pages
SEED_PAIRED_TEXT = ("seed-paired: each seed's perturbed run against the same seed's default run, the same seeds "
                    "drawn for both and the same resampled units for every seed")


def _restricted(cell: dict, ids: set, name: str, seeds: bool = False) -> dict:
    """A copy of ``cell`` named ``name`` holding only the predictions of ``ids`` (its per-unit counts are
    counted again from them by the card's scoring); ``seeds``: a row over training seeds stays one, each seed's
    predictions restricted alike (else its first seed's model alone is kept)."""
    out = {k: v for k, v in cell.items() if k not in ("predictions", "unit_counts") and not k.startswith("_")}
    out = copy.deepcopy(out)
    out["model"], out["status"] = name, "ok"
    out["predictions"] = [r for r in cell["predictions"] if r["item_id"] in ids]
    if seeds:    # a row over training seeds keeps each seed's predictions of those items (counted again)
        out["extra"]["seed_runs"] = [{"seed": r["seed"], "predictions": [x for x in r.get("predictions") or []
                                                                           if x["item_id"] in ids]}
                                     for r in out["extra"]["seed_runs"]]
    else:        # compared as its first seed's model (a variant cell written before variants ran every seed)
        (out.get("extra") or {}).pop("seed_runs", None)
    return out


def n_seeds(cell: dict) -> int:
    """How many trained models the cell's row is (``extra.seed_runs``; 1 for a row of one model)."""
    return max(1, len((cell.get("extra") or {}).get("seed_runs") or []))


def _correct(cell: dict) -> dict:
    """Per item: right. A row over training seeds is right on an item when more than half of its seeds' models
    are (the card's paired comparisons count a seeded row's McNemar decisions so)."""
    runs = (cell.get("extra") or {}).get("seed_runs") or []
    if len(runs) < 2:
        return {r["item_id"]: r["gold"] == r["pred"] for r in cell["predictions"]}
    gold = {r["item_id"]: r["gold"] for r in cell["predictions"]}
    right = {i: 0 for i in gold}
    for run in runs:
        for x in run.get("predictions") or []:
            if x["item_id"] in right:
                right[x["item_id"]] += int(x["pred"] == gold[x["item_id"]])
    return {i: right[i] > len(runs) / 2 for i in gold}


def pair_row(base: dict, variant: dict, n_resamples: int | None = None) -> dict:
    """One row of the table: ``variant`` (a variant cell) against ``base`` (its default run's cell)."""
    from ..metrics import bootstrap
    from ..metrics.compare import mcnemar_exact, run_label
    from .paired import paired_from_cells
    from ..variants import variant_of

    v = variant_of(variant)
    ids = [r["item_id"] for r in variant["predictions"]]
    idset = set(ids)
    missing = idset - {r["item_id"] for r in base["predictions"]}
    if missing:
        raise ValueError(f"robustness: variant {v['key']} of {run_label(base)} holds items the default run has not "
                         f"scored, e.g. {sorted(missing)[:3]}")
    # a row over training seeds is compared over its seeds when its variant ran them all (the same seeds)
    seeds = n_seeds(base) > 1 and ([r["seed"] for r in base["extra"]["seed_runs"]]
                                   == [r["seed"] for r in (variant.get("extra") or {}).get("seed_runs") or []])
    a, b_ = _restricted(base, idset, "default run", seeds), _restricted(variant, idset, "variant", seeds)
    n = n_resamples or int(base.get("spec", {}).get("parameters", {}).get("n_resamples") or bootstrap.DEFAULT_RESAMPLES)
    p = paired_from_cells([a, b_], n)
    la, lb = p.labels
    base_v, var_v = p.point(la, p.primary), p.point(lb, p.primary)
    seeded = getattr(p, "seeded", {})
    if seeds and p.primary in seeded.get(la, {}) and p.primary in seeded.get(lb, {}):
        # one row's seeds read two ways: each seed's perturbed run against the same seed's default run, one seed
        # draw for both (the default run's own) on the same resampled units; drawing the two sides' seeds apart
        # gave [-0.012, +0.019] to perturbations under which no seed's model changed an answer
        from ..metrics.seeds import paired_difference

        d = paired_difference(seeded[lb][p.primary][1], seeded[la][p.primary][1], same_seeds=True,
                              seed=bootstrap.DEFAULT_SEED + 1 + p.labels.index(la))["resampled"]
        interval = SEED_PAIRED
    else:
        d = p.resampled(lb, p.primary) - p.resampled(la, p.primary)
        interval = PAIRED
    lo, hi = bootstrap.percentile_ci(d) if np.isfinite(d).any() else (float("nan"), float("nan"))
    # the smallest stratum of the card's resampling among the items read: the stratified resampling keeps each
    # stratum's size, so one under the card's minimum has few distinct draws (a stratum of one: the same item in
    # every resample) and the paired interval cannot show its uncertainty (the exact McNemar p does not resample)
    rs = p.scoring.resampling
    smallest, minimum = smallest_draw(p.counts[la], rs, base["card"])
    ca, cb = _correct(a), _correct(b_)
    nb = sum(ca[i] and not cb[i] for i in ids)
    nc = sum(cb[i] and not ca[i] for i in ids)
    return {"card": base["card"], "version": base["version"], "model": base["model"], "protocol": base["protocol"],
            "kind": v.get("kind", "perturbation"), "variant": v["name"], "variant_version": v.get("version"),
            "n_read": len(ids), "n_applicable": int(v.get("n_applicable") or len(ids)),
            "n_items": int(v.get("n_items") or len(base["predictions"])), "unit": p.unit,
            "metric": p.primary, "default": base_v, "variant_value": var_v, "difference": var_v - base_v,
            "ci_low": lo, "ci_high": hi, "interval": interval, "b": int(nb), "c": int(nc), "p_mcnemar": mcnemar_exact(nb, nc),
            "smallest_stratum": float(smallest), "stratum_minimum": minimum, "small_stratum": bool(smallest < minimum),
            "n_seeds": n_seeds(a)}


def robustness(cells: Iterable[dict], n_resamples: int | None = None) -> pd.DataFrame:
    """The robustness table of result cells (default runs' and variant cells mixed, any cards and versions;
    see the module docstring): one row per variant cell whose default run is among ``cells`` and ok, sorted
    by card, version, kind, model, protocol and variant. ``p_holm`` adjusts ``p_mcnemar`` over the rows of one
    (card, version, kind); ``significant`` is ``p_holm < 0.05``."""
    from ..metrics.compare import ALPHA, holm
    from ..variants import is_variant, parents

    cells = list(cells)
    pairs = parents([c for c in cells if is_variant(c)], [c for c in cells if not is_variant(c)])
    rows = [pair_row(b, v, n_resamples) for b, v in pairs
            if b.get("status") == "ok" and v.get("status") == "ok" and b.get("predictions") and v.get("predictions")]
    table = pd.DataFrame(rows, columns=[c for c in COLUMNS if c not in ("p_holm", "significant")])
    table["p_holm"] = np.nan
    for _, idx in table.groupby(["card", "version", "kind"]).groups.items():
        table.loc[idx, "p_holm"] = holm(table.loc[idx, "p_mcnemar"].to_numpy(float))
    table["significant"] = table["p_holm"] < ALPHA
    order = ["card", "version", "kind", "model", "protocol", "variant"]
    return table.sort_values(order).reset_index(drop=True)[COLUMNS]


#: The declared rule of a run's "worst perturbation" (the leaderboard's column, :func:`worst`): one procedure,
#: the exact McNemar test Holm-adjusted over the version's perturbation table, both picks and qualifies it.
WORST_RULE = ("among the run's perturbations whose exact McNemar test, Holm-adjusted over the version's "
              "perturbation table (every run and perturbation of the card's version), rejects at 5 % with more "
              "items broken than fixed (b > c) and that lower the primary metric on the items read (raise it where "
              "lower is better), the one with the largest loss (ties: the smaller Holm p, then the name); when "
              "none does, the run has no worst perturbation: none is shown worse")

RUN = ["card", "version", "model", "protocol"]


def worst(table: pd.DataFrame, higher_is_better: bool = True) -> pd.DataFrame:
    """Per (card, version, model, protocol), the worst perturbation under :data:`WORST_RULE`: among the
    perturbation rows that are ``significant`` (Holm-adjusted exact McNemar, ``p_holm`` < 0.05) with ``b`` > ``c``
    and a finite loss of the primary metric (difference < 0; > 0 when lower is better), the largest loss, ties
    broken by the smaller ``p_holm`` and then the variant name. A run none of whose perturbations qualifies has
    no row: none of its perturbations is shown worse (not the same as shown harmless). Prompt variants are not
    perturbations."""
    t = table[table["kind"] == "perturbation"].dropna(subset=["difference"])
    loss = -t["difference"] if higher_is_better else t["difference"]
    t = t[t["significant"].astype(bool) & (t["b"] > t["c"]) & (loss > 0)]
    if t.empty:
        return t
    t = t.assign(_loss=loss.loc[t.index]).sort_values(["_loss", "p_holm", "variant"],
                                                       ascending=[False, True, True], kind="mergesort")
    return t.groupby(RUN, sort=False).head(1).drop(columns="_loss")


# -- strata of the card's resampling among the items a variant read ------------------------------------------

def smallest_draw(counts, rs, card: str) -> tuple[int, int]:
    """``(what the resampling draws from, the fewest it needs)`` among the units read: under a stratified
    resampling the smallest stratum against the card's minimum (:func:`stratum_minimum`, what its slice tables give
    an interval for); under a resampling of rows or clusters, the units or distinct clusters drawn from against
    :data:`atlaslib.metrics.intervals.FEW_CLUSTERS` (fewer: a percentile interval too narrow to read). A MACCROBAT
    gold-cuts run reading 2 case reports was shown an interval with no mark."""
    from ..metrics.intervals import FEW_CLUSTERS

    if rs.rule == "stratified":
        return min(Counter(map(str, counts.groups[rs.by])).values()), stratum_minimum(card)
    if rs.rule == "clusters":
        return len(set(map(str, counts.groups[rs.by]))), FEW_CLUSTERS
    return counts.n, FEW_CLUSTERS


def stratum_minimum(card: str) -> int:
    """The fewest units the card's slice tables give an interval for (its ``Scoring.slices.min_units``; without
    a slice rule, :class:`atlaslib.metrics.engine.SliceRule`'s default, the slice tables' minimum): a stratum
    with fewer is too small to show its resampling uncertainty."""
    from dataclasses import fields

    from ..cards import scoring_of
    from ..metrics.engine import SliceRule

    rule = scoring_of(card).slices
    if rule is not None:
        return int(rule.min_units)
    return int(next(f.default for f in fields(SliceRule) if f.name == "min_units"))


def collapsed(cell: dict):
    """The one label a run gives every item it read (its answers collapsed to one class), else None; a run
    without labels (spans, relations) is never collapsed here."""
    preds = [r.get("pred") for r in cell.get("predictions") or []]
    if not preds or not all(isinstance(x, str) for x in preds):
        return None
    return preds[0] if len(set(preds)) == 1 else None


def prompt_spread(cells: Iterable[dict], table: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per (card, version, model, protocol) that has prompt variants: the primary metric under the card's
    prompt and each variant, its range (max − min) and standard deviation over those prompts; beside it, the
    same range and SD over the models of the same protocol family (``models_protocol``: every ok default run of
    the version with that protocol, e.g. every zero-shot run), scored on the same items the prompt variants
    read (one call of the card's paired resampling, :func:`atlaslib.analysis.paired.paired_from_cells`). ``cells``: the
    default runs' cells; their variant cells are read beside them when not among ``cells``."""
    from .paired import paired_from_cells
    from ..variants import is_variant, of_cell, parents

    cells = list(cells)
    if not any(is_variant(c) for c in cells):
        cells += [v for c in cells if c.get("status") == "ok" for v in of_cell(c)]
    table = robustness(cells) if table is None else table
    t = table[table["kind"] == "prompt"]
    out = []
    variants = {(v["model"], v["protocol"], (v["spec"]["parameters"]["variant"] or {}).get("name")): v
                for _, v in parents([c for c in cells if is_variant(c)], [c for c in cells if not is_variant(c)])}
    for (card, version, model, protocol), g in t.groupby(["card", "version", "model", "protocol"], sort=True):
        vals = np.array([g["default"].iloc[0], *g["variant_value"]], dtype=float)
        one = variants.get((model, protocol, g["variant"].iloc[0]))
        ids = {r["item_id"] for r in one["predictions"]} if one else set()
        models = [c for c in cells if not is_variant(c) and c["card"] == card and c["version"] == version
                  and c["protocol"] == protocol and c.get("status") == "ok" and c.get("predictions")]
        allm = np.array([], dtype=float)
        if ids and models:
            p = paired_from_cells([_restricted(c, ids, c["model"]) for c in models])
            allm = np.array([p.point(lab, p.primary) for lab in p.labels], dtype=float)
            allm = allm[np.isfinite(allm)]
        out.append({"card": card, "version": version, "model": model, "protocol": protocol,
                    "metric": g["metric"].iloc[0], "n_items": len(ids), "n_prompts": int(len(vals)),
                    "prompt_min": float(np.nanmin(vals)), "prompt_max": float(np.nanmax(vals)),
                    "prompt_range": float(np.nanmax(vals) - np.nanmin(vals)),
                    "prompt_sd": float(np.nanstd(vals, ddof=1)) if len(vals) > 1 else float("nan"),
                    "models_protocol": protocol, "n_models": int(len(allm)),
                    "models_min": float(allm.min()) if len(allm) else float("nan"),
                    "models_max": float(allm.max()) if len(allm) else float("nan"),
                    "models_range": float(allm.max() - allm.min()) if len(allm) else float("nan"),
                    "models_sd": float(np.std(allm, ddof=1)) if len(allm) > 1 else float("nan")})
    return pd.DataFrame(out)
