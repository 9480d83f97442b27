"""How a NegEx run's predictions become numbers: the card's :class:`~atlaslib.metrics.engine.Scoring`, as data,
over the binary-items family's per-item counts (:meth:`~atlaslib.cards.families.BinaryItems.counts`: the confusion
columns ``tp, fp, tn, fn`` and ``positive``, gold negated), resampled stratified by gold decision and, beside it, by
sentence."""
from __future__ import annotations

from ...metrics import bootstrap
from ...metrics.classification import UNDEFINED_REASONS, from_confusion
from ...metrics.engine import Metric, Resampling, Scoring, SliceRule
from ..families import BinaryItems


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
    columns=BinaryItems.columns,
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

