"""How a NegEx run's predictions become numbers (the card's :class:`~atlaslib.metrics.engine.Scoring`, as
data) and :func:`counts`, the per-item counts the engine reads: one unit per test item, the confusion columns
``tp, fp, tn, fn`` (one of them 1) and ``positive`` (gold negated), grouped by gold decision (the declared
stratified resampling) and by sentence (the sentence-cluster resampling beside it)."""
from __future__ import annotations

import numpy as np

from ...metrics import bootstrap
from ...metrics.engine import Metric, Resampling, Scoring, SliceRule, UnitCounts, check_labels
from ...metrics.classification import from_confusion
from .card import LABELS, NO_SCORE_REASON

COLUMNS = ("tp", "fp", "tn", "fn", "positive")


from ...metrics.classification import UNDEFINED_REASONS  # noqa: E402


def _m(name):
    return lambda t: from_confusion(t["tp"], t["fp"], t["tn"], t["fn"])[name]


def _one_class(t):
    return "one gold class only" if (t["positive"] == 0 or t["positive"] == t.array[..., :4].sum(-1)) else None


MACRO_F1 = Metric("macro_f1", _m("macro_f1"), decision="correct decision", undefined_if=_one_class, label="macro F1",
                  undefined_reason=UNDEFINED_REASONS["macro_f1"])
SENSITIVITY = Metric("sensitivity", _m("sensitivity"), decision="correct decision",
                     proportion=lambda t: (t["tp"], t["tp"] + t["fn"]), undefined_reason=UNDEFINED_REASONS["sensitivity"])
SPECIFICITY = Metric("specificity", _m("specificity"), decision="correct decision",
                     proportion=lambda t: (t["tn"], t["tn"] + t["fp"]), undefined_reason=UNDEFINED_REASONS["specificity"])
PRECISION = Metric("precision", _m("precision"), decision="correct decision",
                   proportion=lambda t: (t["tp"], t["tp"] + t["fp"]), undefined_reason=UNDEFINED_REASONS["precision"])
ROC_AUC = Metric("roc_auc", rank=True, undefined_reason=UNDEFINED_REASONS["roc_auc"])

SCORING = Scoring(
    columns=COLUMNS,
    metrics=(MACRO_F1, SENSITIVITY, SPECIFICITY, PRECISION, ROC_AUC),
    primary="macro_f1",
    resampling=Resampling("stratified", "test items stratified by gold decision", bootstrap.DEFAULT_SEED, by="gold"),
    decisions={"correct decision": lambda c: (c["tp"] + c["tn"]) == 1},
    extra=(Resampling("clusters", "sentences", bootstrap.DEFAULT_SEED, by="sentence", label="macro F1, sentence-cluster",
                      assumes="items of one kit sentence are not independent: whole sentences are drawn",
                      metrics=("macro_f1",)),),
    slices=SliceRule({"macro_f1": MACRO_F1, "sensitivity": SENSITIVITY, "specificity": SPECIFICITY},
                     support=lambda t: t.array[..., :4].sum(-1), min_units=20, unit="items"),
)


def counts(cell: dict) -> UnitCounts:
    """The per-item counts of a NegEx cell's predictions (labels checked: ``affirmed`` / ``negated``); records
    without scores leave ROC-AUC unreported with the card's :data:`.card.NO_SCORE_REASON`."""
    recs = cell.get("predictions") or []
    gold = check_labels([r["gold"] for r in recs], LABELS, "gold")
    pred = check_labels([r["pred"] for r in recs], LABELS, "pred")
    t, p = gold == "negated", pred == "negated"
    c = np.stack([t & p, ~t & p, ~t & ~p, t & ~p, t], axis=1).astype(np.int64)
    groups = {"gold": t.astype(int).tolist()}
    if recs and all("sentence_key" in r for r in recs):
        groups["sentence"] = [r["sentence_key"] for r in recs]
    scores = [r.get("score") for r in recs]
    undefined = {}
    if not recs or any(s is None for s in scores):
        scores = None
        undefined["roc_auc"] = NO_SCORE_REASON   # the card's reason, on every path that scores these counts
    return UnitCounts([r["item_id"] for r in recs], COLUMNS, c, groups,
                      None if scores is None else np.asarray(scores, dtype=float), undefined)
