"""The "training seeds" sub-page of a card version, and the seeded-row table of a run page.

A fine-tuned row holds one trained model per training seed of its recipe (``extra.seed_runs`` in its cell, the
row's metrics the mean over seeds with the two-level interval of :mod:`atlaslib.metrics.seeds`). This page shows,
per seeded row: each metric's mean and two-level interval beside the per-seed range, the single-seed item
interval and the variance split; each seed's primary value with its item interval and whether its weights were
trained in this build or loaded; which rows of other split versions are the same trained models (same
weight-cache keys: trained once per seed for both); and, where two seeded rows meet, almost stochastic order.
Every number comes from the cells. Nothing here knows a card.
"""
from __future__ import annotations

import pandas as pd

from ..escape import md


def _f(x, digits: int = 3) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


def _pct(x) -> str:
    return "n/a" if x is None else f"{100 * x:.0f} %"


def seeded_table(metrics: dict) -> pd.DataFrame:
    """One row per metric of a seeded row: mean over seeds, two-level interval, per-seed range, the first
    seed's item interval, the shares of the interval's variance due to seeds and to items."""
    rows = []
    for name, e in metrics.items():
        s = e.get("seeds")
        if not s:
            rows.append({"metric": name, "mean over seeds": "n/a", "two-level 95 % interval": "",
                         "per-seed range": "", "single-seed item interval": "", "share: seeds": "",
                         "share: items": "", "note": e.get("reason") or ""})
            continue
        one = s["single_seed"]
        rows.append({"metric": name, "mean over seeds": _f(e["value"]),
                     "two-level 95 % interval": f"[{_f(e['ci_low'])}, {_f(e['ci_high'])}]",
                     "per-seed range": f"{_f(s['seed_min'])} – {_f(s['seed_max'])}",
                     "single-seed item interval": f"[{_f(one.get('ci_low'))}, {_f(one.get('ci_high'))}] "
                                                  f"(seed {one['seed']})",
                     "share: seeds": _pct(s.get("share_seeds")), "share: items": _pct(s.get("share_items")),
                     "note": ("the single seed's interval has zero width: that model gives this value on every "
                              "resample of the test items, which is not certainty"
                              if one.get("ci_low") is not None and one.get("ci_low") == one.get("ci_high") else "")})
    return pd.DataFrame(rows).set_index("metric")


def run_markdown(metrics: dict, n_seeds: int) -> str:
    """The run page's sentence on a seeded row (every number from ``metrics``)."""
    first = next((e for e in metrics.values() if e.get("seeds")), None)
    if first is None:
        return f"This row is {n_seeds} trained models, one per training seed; no metric is defined for all of them."
    return (f"This row is {first['seeds']['n_seeds']} trained models, one per training seed of the recipe. Each "
            "metric below is the mean over the seeds; its interval resamples the seeds and the test items "
            "(two-level bootstrap, see the metrics chapter). Per seed, per metric:")


def _primary(card, cell):
    return card.metric_name(card.metrics[0], cell["protocol"]) if hasattr(card, "metric_name") else \
        f"{card.metrics[0]}_{cell['protocol']}"


def _label(c) -> str:
    return f"`{md(c['model'])}` ({md(c['protocol'])})"


def shared_weights(cell: dict, cells: list[dict]) -> list[str]:
    """The other split versions whose row of the same model and protocol holds the same trained models (every
    seed's weight-cache key equal)."""
    keys = [r.get("weights_key") for r in (cell.get("extra") or {}).get("seed_runs") or []]
    if not keys or None in keys:
        return []
    out = []
    for c in cells:
        if c is cell or c["version"] == cell["version"] or c["model"] != cell["model"] \
                or c["protocol"] != cell["protocol"]:
            continue
        other = [r.get("weights_key") for r in (c.get("extra") or {}).get("seed_runs") or []]
        if other == keys:
            out.append(c["version"])
    return sorted(set(out))


def render(card, version: str, cells: list[dict], all_cells: list[dict] | None = None) -> str | None:
    """The sub-page body for ``version``: None when no ok cell of it is a seeded row."""
    seeded = [c for c in cells if c.get("version") == version and c.get("status") == "ok"
              and len((c.get("extra") or {}).get("seed_runs") or []) > 1]
    if not seeded:
        return None
    all_cells = all_cells if all_cells is not None else cells
    parts = ["A fine-tuned row is one trained model per training seed of its recipe: each seed starts from the "
             "same pretrained encoder and sets the new head's initial weights, the order of the train items and "
             "the dropout. The row's value is the mean over its seeds; its interval resamples the seeds and the "
             "test items together (two-level bootstrap; the metrics chapter states the method). Beside it: the "
             "per-seed range, the declared item interval of the first seed's model alone (what a one-run row "
             "would show), and how much of the interval's variance is due to the seeds and how much to the test "
             "items."]
    for c in seeded:
        runs = c["extra"]["seed_runs"]
        prim = _primary(card, c)
        parts.append(f"## {_label(c)}")
        same = shared_weights(c, all_cells)
        trained = sum(1 for r in runs if r.get("trained_here"))
        text = (f"{len(runs)} training seeds ({', '.join(str(r['seed']) for r in runs)}); the weights of "
                f"{trained} of them were trained in the run behind this cell, {len(runs) - trained} loaded from the "
                "weight cache.")
        if same:
            text += (" The train items of this version are those of " + ", ".join(f"`{md(v)}`" for v in same)
                     + f": the {len(runs)} models of this row are the same trained models as that row's (every seed's "
                     "weight-cache key is equal), trained once per seed and scored on each version's test items.")
        parts.append(text)
        parts.append(seeded_table(c["metrics"]).to_markdown(disable_numparse=True))
        per = pd.DataFrame([{"seed": r["seed"],
                             prim: _f((r.get("metrics") or {}).get(prim, {}).get("value")),
                             "item interval": "[{}, {}]".format(_f((r.get("metrics") or {}).get(prim, {}).get("ci_low")),
                                                                _f((r.get("metrics") or {}).get(prim, {}).get("ci_high"))),
                             "weights": "trained" if r.get("trained_here") else "loaded from cache",
                             "weight-cache key": f"`{r.get('weights_key') or ''}`"} for r in runs]).set_index("seed")
        parts.append(f"Each seed's model on the primary metric, with its declared item interval:\n\n{per.to_markdown(disable_numparse=True)}")
    parts.append(aso_markdown(card, seeded))
    return "\n\n".join(p for p in parts if p)


def aso_markdown(card, seeded: list[dict]) -> str:
    """Almost stochastic order between every two seeded rows of a version (their per-seed primary values)."""
    from ..metrics.seeds import ASO_THRESHOLD, almost_stochastic_order

    if len(seeded) < 2:
        return ("**Almost stochastic order** (deepsig's `aso` on two seeded rows' per-seed values) needs two seeded "
                f"rows; this version has {len(seeded)}, so there is no pair to order.")
    higher = card.higher_is_better.get(card.metrics[0], True)
    lines = ["| row A | row B | ε_min | A almost stochastically better? |", "|---|---|---|---|"]
    for i, a in enumerate(seeded):
        for b in seeded[i + 1:]:
            pa = [r["metrics"][_primary(card, a)]["value"] for r in a["extra"]["seed_runs"]]
            pb = [r["metrics"][_primary(card, b)]["value"] for r in b["extra"]["seed_runs"]]
            if None in pa or None in pb:
                continue
            sg = 1 if higher else -1
            if sg * (sum(pa) / len(pa)) < sg * (sum(pb) / len(pb)):
                a, b, pa, pb = b, a, pb, pa
            res = almost_stochastic_order([sg * x for x in pa], [sg * x for x in pb])
            lines.append(f"| {_label(a)} | {_label(b)} | {res['eps_min']:.3f} | "
                         f"{'yes' if res['a_better'] else 'no'} (ε_min < {ASO_THRESHOLD:g}) |")
    return ("**Almost stochastic order** between seeded rows (deepsig's `aso` on their per-seed values of the "
            f"primary metric; A is the row with the higher mean; threshold ε_min < {ASO_THRESHOLD:g}, deepsig's "
            "recommendation):\n\n" + "\n".join(lines))
