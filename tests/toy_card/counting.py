"""How the toy card's predictions become numbers: one unit per item (``counts``), scored by the one engine under
the declared ``SCORING`` (``score``)."""
from __future__ import annotations

from atlaslib.metrics import engine
from atlaslib.metrics.engine import UnitCounts, check_labels

from .card import SCORING


def counts(cell: dict) -> UnitCounts:
    """One unit per item: ``correct`` (prediction == gold) and ``item`` (1); labels checked (0 or 1)."""
    recs = cell.get("predictions") or []
    gold = check_labels([r["gold"] for r in recs], (0, 1), "gold")
    pred = check_labels([r["pred"] for r in recs], (0, 1), "pred")
    return UnitCounts([r["item_id"] for r in recs], ("correct", "item"),
                      [[int(g == p), 1] for g, p in zip(gold, pred)])


def score(records: list[dict], protocol: str, *, model: str | None = None) -> dict:
    """accuracy = #(prediction == gold) / n with its exact Clopper-Pearson 95 % interval: the records' counts
    under ``SCORING``."""
    return engine.evaluate(SCORING, counts({"predictions": records}), protocol)
