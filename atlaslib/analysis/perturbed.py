"""Robustness of runs to their variants (:mod:`atlaslib.variants`), from result cells alone.

For each variant cell and the default run it belongs to (same card, version, model and protocol; the
variant's ``parent_run_key`` the default cell's run key when both carry one), on the items the variant
applied to:

- the paired difference of the card's primary metric, variant − default run, with its 95 % paired
  percentile interval: both runs' per-unit data from one call of the card's paired resampling
  (:func:`atlaslib.metrics.compare.paired`: the card's resampling unit, seed and stratification), the
  difference taken on each shared resample;
- McNemar's ``b`` (items the default run got right and the variant wrong: what the variant broke) and ``c``
  (the reverse), an item being right when its prediction equals its gold, and the exact two-sided p
  (:func:`atlaslib.metrics.compare.mcnemar_exact`), Holm-adjusted (:func:`atlaslib.metrics.compare.holm`) over
  the table of one (card, version) and kind (the perturbations; the prompt variants);
- the number of items the variant read (``n_read``: its predictions; a declared ``max_items`` samples them by
  seed-hash rank), of those it applies to (``n_applicable``) and of the test items (``n_items``).
"""
from __future__ import annotations

import copy
from typing import Iterable

import numpy as np
import pandas as pd

COLUMNS = ["card", "version", "model", "protocol", "kind", "variant", "variant_version", "n_read", "n_applicable",
           "n_items",
           "unit", "metric", "default", "variant_value", "difference", "ci_low", "ci_high", "b", "c", "p_mcnemar",
           "p_holm", "significant"]


def _restricted(cell: dict, ids: set, name: str) -> dict:
    """A copy of ``cell`` named ``name`` holding only the predictions of ``ids`` (its per-unit counts are
    counted again from them by the card's scoring)."""
    out = {k: v for k, v in cell.items() if k not in ("predictions", "unit_counts", "_unit_counts")}
    out = copy.deepcopy(out)
    out["model"], out["status"] = name, "ok"
    out["predictions"] = [r for r in cell["predictions"] if r["item_id"] in ids]
    # a row over several training seeds is compared as its first seed's model, the one its variants ran
    (out.get("extra") or {}).pop("seed_runs", None)
    return out


def _correct(cell: dict) -> dict:
    return {r["item_id"]: r["gold"] == r["pred"] for r in cell["predictions"]}


def pair_row(base: dict, variant: dict, n_resamples: int | None = None) -> dict:
    """One row of the table: ``variant`` (a variant cell) against ``base`` (its default run's cell)."""
    from ..metrics import bootstrap
    from ..metrics.compare import mcnemar_exact, paired, run_label
    from ..variants import variant_of

    v = variant_of(variant)
    ids = [r["item_id"] for r in variant["predictions"]]
    idset = set(ids)
    missing = idset - {r["item_id"] for r in base["predictions"]}
    if missing:
        raise ValueError(f"robustness: variant {v['key']} of {run_label(base)} holds items the default run has not "
                         f"scored, e.g. {sorted(missing)[:3]}")
    a, b_ = _restricted(base, idset, "default run"), _restricted(variant, idset, "variant")
    n = n_resamples or int(base.get("spec", {}).get("parameters", {}).get("n_resamples") or bootstrap.DEFAULT_RESAMPLES)
    p = paired([a, b_], n)
    la, lb = p.labels
    base_v, var_v = p.point(la, p.primary), p.point(lb, p.primary)
    d = p.resampled(lb, p.primary) - p.resampled(la, p.primary)
    lo, hi = bootstrap.percentile_ci(d) if np.isfinite(d).any() else (float("nan"), float("nan"))
    ca, cb = _correct(a), _correct(b_)
    nb = sum(ca[i] and not cb[i] for i in ids)
    nc = sum(cb[i] and not ca[i] for i in ids)
    return {"card": base["card"], "version": base["version"], "model": base["model"], "protocol": base["protocol"],
            "kind": v.get("kind", "perturbation"), "variant": v["name"], "variant_version": v.get("version"),
            "n_read": len(ids), "n_applicable": int(v.get("n_applicable") or len(ids)),
            "n_items": int(v.get("n_items") or len(base["predictions"])), "unit": p.unit,
            "metric": p.primary, "default": base_v, "variant_value": var_v, "difference": var_v - base_v,
            "ci_low": lo, "ci_high": hi, "b": int(nb), "c": int(nc), "p_mcnemar": mcnemar_exact(nb, nc)}


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


def worst(table: pd.DataFrame, higher_is_better: bool = True) -> pd.DataFrame:
    """Per (card, version, model, protocol), the perturbation row with the largest loss of the primary metric
    (the lowest difference; the highest when lower is better); prompt variants are not perturbations."""
    t = table[table["kind"] == "perturbation"].dropna(subset=["difference"])
    if t.empty:
        return t
    key = t["difference"] if higher_is_better else -t["difference"]
    t = t.assign(_loss=key).sort_values(["_loss", "variant"])
    return t.groupby(["card", "version", "model", "protocol"], sort=False).head(1).drop(columns="_loss")


def prompt_spread(cells: Iterable[dict], table: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per (card, version, model, protocol) that has prompt variants: the primary metric under the card's
    prompt and each variant, its range (max − min) and standard deviation over those prompts; beside it, the
    same range and SD over the models: every ok default run of the version, scored on the same items the
    prompt variants read (one call of the card's paired resampling, :func:`atlaslib.metrics.compare.paired`)."""
    from ..metrics.compare import paired
    from ..variants import is_variant, parents

    cells = list(cells)
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
                  and c.get("status") == "ok" and c.get("predictions")]
        allm = np.array([], dtype=float)
        if ids and models:
            p = paired([_restricted(c, ids, c["model"]) for c in models])
            allm = np.array([p.point(lab, p.primary) for lab in p.labels], dtype=float)
            allm = allm[np.isfinite(allm)]
        out.append({"card": card, "version": version, "model": model, "protocol": protocol,
                    "metric": g["metric"].iloc[0], "n_items": len(ids), "n_prompts": int(len(vals)),
                    "prompt_min": float(np.nanmin(vals)), "prompt_max": float(np.nanmax(vals)),
                    "prompt_range": float(np.nanmax(vals) - np.nanmin(vals)),
                    "prompt_sd": float(np.nanstd(vals, ddof=1)) if len(vals) > 1 else float("nan"),
                    "n_models": int(len(allm)),
                    "models_min": float(allm.min()) if len(allm) else float("nan"),
                    "models_max": float(allm.max()) if len(allm) else float("nan"),
                    "models_range": float(allm.max() - allm.min()) if len(allm) else float("nan"),
                    "models_sd": float(np.std(allm, ddof=1)) if len(allm) > 1 else float("nan")})
    return pd.DataFrame(out)
