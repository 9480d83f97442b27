"""Binary classification metrics, the positive class coded 1 (for NegEx: negated).

Every function takes ``y_true`` and ``y_pred`` (or ``y_score``) as arrays of shape ``(n,)`` or
``(B, n)``; with two dimensions each row is scored on its own and an array of ``B`` values comes back.
That is what makes the bootstrap fast: 1,000 resamples are one ``(1000, n)`` index array and one call
(see :mod:`atlaslib.metrics.bootstrap`). The values equal scikit-learn's on every row (tested).

Confusion counts per row: TP = #(y=1, ŷ=1), FP = #(y=0, ŷ=1), TN = #(y=0, ŷ=0), FN = #(y=1, ŷ=0).

Zero division, one rule for the atlas: a ratio whose denominator is 0 on the items scored is undefined
and comes back as NaN (never 0): precision with nothing predicted positive, a class F1 with the class
absent from both gold and predictions, sensitivity without a positive, specificity without a negative.
The rule is written once, :func:`atlaslib.metrics.engine.ratio`. A result cell stores such a metric as ``n/a (undefined: …)`` (:data:`UNDEFINED_REASONS`); bootstrap
intervals leave out the resamples where it is undefined. A ratio with a non-zero denominator is
defined, even when its numerator is 0: always predicting "affirmed" has F1₁ = 0/FN = 0.
"""
from __future__ import annotations

import numpy as np

from .engine import rank_auc, ratio  # noqa: F401  (rank_auc: ROC-AUC's one definition, re-exported)


def check_binary(y, what: str = "y") -> np.ndarray:
    """``y`` as booleans after checking every value is 0 or 1 (or a bool): the label 2 or the word
    "affirmed" is one error naming it, never silently counted as positive (scikit-learn's ``_check_targets``
    refuses such mixes too).

    >>> check_binary([0, 1, True]).tolist()
    [False, True, True]
    >>> check_binary([0, 2], "y_pred")
    Traceback (most recent call last):
    ...
    ValueError: y_pred: 2 is not a binary label; expected 0 or 1 (1 = the positive class)
    """
    a = np.asarray(y)
    if a.dtype == bool:
        return a
    ok = np.isin(a, (0, 1)) if a.dtype.kind in "iuf" else np.zeros(a.shape, dtype=bool)
    if not ok.all():
        bad = a[~ok].ravel()[0]
        bad = bad.item() if hasattr(bad, "item") else bad
        raise ValueError(f"{what}: {bad!r} is not a binary label; expected 0 or 1 (1 = the positive class)")
    return a.astype(bool)


def _counts(y_true, y_pred):
    t = check_binary(y_true, "y_true")
    p = check_binary(y_pred, "y_pred")
    tp = (t & p).sum(-1)
    fp = (~t & p).sum(-1)
    tn = (~t & ~p).sum(-1)
    fn = (t & ~p).sum(-1)
    return tp, fp, tn, fn


def confusion(y_true, y_pred) -> dict:
    """Confusion counts ``{tp, fp, tn, fn}`` (ints for 1-d input)."""
    tp, fp, tn, fn = _counts(y_true, y_pred)
    return {"tp": tp, "fp": fp, "tn": tn, "fn": fn}


def confusion_counts(y_true, y_pred) -> dict:
    """:func:`confusion` of one run as plain ints (for a result cell and the confusion-matrix plot).

    >>> confusion_counts([1, 1, 0, 0], [1, 0, 0, 1])
    {'tp': 1, 'fp': 1, 'tn': 1, 'fn': 1}
    """
    return {k: int(v) for k, v in confusion(np.asarray(y_true, int), np.asarray(y_pred, int)).items()}


def from_confusion(tp, fp, tn, fn) -> dict:
    """The label metrics from confusion counts (any shape; NaN where undefined), the one place their formulas
    are written: sensitivity TP/(TP+FN), specificity TN/(TN+FP), precision TP/(TP+FP), macro F1
    (F1₁ + F1₀)/2 with F1₁ = 2TP/(2TP+FP+FN), F1₀ = 2TN/(2TN+FN+FP).

    >>> m = from_confusion(3, 1, 4, 2)
    >>> round(m["macro_f1"], 4), m["sensitivity"], m["specificity"], m["precision"]
    (0.697, 0.6, 0.8, 0.75)
    >>> bool(np.isnan(from_confusion(0, 0, 5, 0)["sensitivity"]))
    True
    """
    f1_pos = ratio(2 * np.asarray(tp), 2 * np.asarray(tp) + fp + fn)
    f1_neg = ratio(2 * np.asarray(tn), 2 * np.asarray(tn) + fn + fp)
    macro = (np.asarray(f1_pos) + np.asarray(f1_neg)) / 2 if np.ndim(f1_pos) else (f1_pos + f1_neg) / 2
    return {"macro_f1": macro, "sensitivity": ratio(tp, np.asarray(tp) + fn), "specificity": ratio(tn, np.asarray(tn) + fp),
            "precision": ratio(tp, np.asarray(tp) + fp)}


def sensitivity(y_true, y_pred):
    """Sensitivity (recall of the positive class) = TP / (TP + FN); NaN when there is no positive."""
    tp, fp, tn, fn = _counts(y_true, y_pred)
    return ratio(tp, tp + fn)


def specificity(y_true, y_pred):
    """Specificity (recall of the negative class) = TN / (TN + FP); NaN when there is no negative."""
    tp, fp, tn, fn = _counts(y_true, y_pred)
    return ratio(tn, tn + fp)


def precision(y_true, y_pred):
    """Precision / PPV of the positive class = TP / (TP + FP); NaN (undefined) when nothing is called
    positive (scikit-learn's ``zero_division=np.nan``)."""
    tp, fp, tn, fn = _counts(y_true, y_pred)
    return ratio(tp, tp + fp)


def macro_f1(y_true, y_pred):
    """Macro F1 over the two classes = (F1₁ + F1₀) / 2, F1_c = 2·TP_c / (2·TP_c + FP_c + FN_c).

    For the negative class TP₀ = TN, FP₀ = FN, FN₀ = FP. A class with 2·TP_c + FP_c + FN_c = 0
    (absent from gold and predictions) has no F1, and macro F1 is then NaN (undefined). Always predicting the majority class 0 with ``p`` the share of
    positives gives ``F1₀ = 2(1-p)/(2-p)``, ``F1₁ = 0`` and so macro F1 = ``(1-p)/(2-p)``.
    """
    return from_confusion(*_counts(y_true, y_pred))["macro_f1"]


def majority_macro_f1(n_pos: int, n_neg: int) -> float:
    """Closed form of macro F1 for always predicting the larger class: ``F1_major / 2``,
    ``F1_major = 2·n_major / (2·n_major + n_minor)``."""
    major, minor = max(n_pos, n_neg), min(n_pos, n_neg)
    return (2 * major / (2 * major + minor)) / 2


def roc_auc(y_true, y_score):
    """ROC-AUC = P(score of a random positive > score of a random negative) + ½·P(tie): the Mann-Whitney U
    statistic over n₁·n₀, equal to scikit-learn's ``roc_auc_score`` (trapezoidal ROC) including ties; NaN when a
    class is absent. One definition, :func:`rank_auc`, the one the scoring engine uses; 2-D inputs
    give one value per row."""
    t, s = np.asarray(y_true), np.asarray(y_score, dtype=float)
    if t.ndim == 1:
        return rank_auc(t, s)
    return np.array([rank_auc(a, b) for a, b in zip(t, s)])


#: Why each metric can be undefined on a test set (its denominator is 0): the text after "n/a".
UNDEFINED_REASONS = {
    "macro_f1": "undefined: a class is absent from gold and predictions",
    "sensitivity": "undefined: no positive gold item",
    "specificity": "undefined: no negative gold item",
    "precision": "undefined: nothing predicted positive",
    "roc_auc": "undefined: gold has one class only",
}
