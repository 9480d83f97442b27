"""Result cells as paired data: the one place cells become :class:`~atlaslib.metrics.engine.Paired` (each cell's
per-unit counts under its card's declared scoring and resampling, :func:`atlaslib.cards.counted`; a seeded row's
seeds beside them, :func:`atlaslib.cards.seed_counted`). The comparisons, seeds and robustness pages and the
notebooks' :func:`compare_cells` read it; the statistics themselves are :mod:`atlaslib.metrics.compare`'s, which
looks up no card.
"""
from __future__ import annotations

import pandas as pd

from ..metrics import bootstrap, engine
from ..metrics.compare import ALPHA, compare_paired, run_label, with_seed_runs


def ok_cells(cells) -> list[dict]:
    """The cells a comparison can use: ``ok`` and with predictions."""
    return [c for c in cells if c.get("status") == "ok" and c.get("predictions") is not None]


def paired_from_cells(cells: list[dict], n_resamples: int = bootstrap.DEFAULT_RESAMPLES) -> engine.Paired:
    """The :class:`~atlaslib.metrics.engine.Paired` data of the ``ok`` cells of one (card, version): each
    cell's per-unit counts (:func:`atlaslib.cards.counted`) under its card's declared scoring and
    resampling (seed: the cells' own), a seeded row's seeds paired with them
    (:func:`~atlaslib.metrics.compare.with_seed_runs`)."""
    from ..cards import counted, scoring_of, seed_counted

    cells = ok_cells(cells)
    if not cells:
        raise ValueError("compare: no ok result cell with predictions")
    keys = {(c["card"], c["version"]) for c in cells}
    if len(keys) != 1:
        raise ValueError(f"compare: cells from several (card, version): {sorted(keys)}; rankings never mix them")
    card = cells[0]["card"]
    labels = [run_label(c) for c in cells]
    if len(set(labels)) != len(labels):
        raise ValueError("compare: two cells share a model and protocol: " + ", ".join(sorted(labels)))
    scoring = scoring_of(card)
    seed = int((cells[0].get("seeds") or {}).get("bootstrap") or scoring.resampling.seed)
    p = engine.paired(scoring, card, cells[0]["version"], {lab: counted(c) for lab, c in zip(labels, cells)}, seed,
                      n_resamples)
    return with_seed_runs(p, {lab: seed_counted(c) for lab, c in zip(labels, cells)}, seed, n_resamples)


def compare_cells(cells_or_predictions, *, n_resamples: int = bootstrap.DEFAULT_RESAMPLES, card: str | None = None,
                  version: str = "notebook", alpha: float = ALPHA) -> pd.DataFrame:
    """Paired comparison table of two or more runs of one (card, version), for notebooks.

    ``cells_or_predictions``: result cells (dicts as :func:`atlaslib.results.read_cell` returns, or paths to
    them), or ``{name: predictions}`` with ``card`` given, where predictions are the cell's per-item
    records (``item_id``, ``gold``, ``pred`` and the card's fields). Returns one row per (metric, pair):
    difference, paired 95 % interval, p-values (bootstrap, McNemar with b and c where it applies), Holm
    and whether it is significant; ``.attrs["ranks"]`` holds the tie groups and rank intervals and
    ``.attrs["mdd"]`` the minimum detectable difference."""
    from ..results.store import read_cell

    if isinstance(cells_or_predictions, dict):
        if card is None:
            raise ValueError("compare: give card= with a {name: predictions} mapping")
        cells = [{"card": card, "version": version, "model": name, "protocol": "given", "status": "ok",
                  "metrics": {}, "predictions": list(preds)} for name, preds in cells_or_predictions.items()]
    else:
        cells = [read_cell(c) if not isinstance(c, dict) else c for c in cells_or_predictions]
    if len(ok_cells(cells)) < 2:
        raise ValueError("compare: needs at least two ok runs")
    result = compare_paired(paired_from_cells(cells, n_resamples), alpha)
    table = result.pairs.copy()
    table.attrs["ranks"] = result.ranks
    table.attrs["mdd"] = result.mdd
    return table
