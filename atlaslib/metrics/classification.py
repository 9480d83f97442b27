"""Binary classification metrics, the positive class coded 1 (for NegEx: negated), from confusion counts:
TP = #(y=1, ŷ=1), FP = #(y=0, ŷ=1), TN = #(y=0, ŷ=0), FN = #(y=1, ŷ=0), of any shape (one run, or every
resample's summed counts at once: see :mod:`atlaslib.metrics.engine`). The values equal scikit-learn's
(tested against it); the tests' per-array reference (``tests/metrics/reference.py``) computes the same metrics
item by item.

Zero division, one rule for the atlas: a ratio whose denominator is 0 on the items scored is undefined
and comes back as NaN (never 0): precision with nothing predicted positive, a class F1 with the class
absent from both gold and predictions, sensitivity without a positive, specificity without a negative.
The rule is written once, :func:`atlaslib.metrics.engine.ratio`. A result cell stores such a metric as ``n/a (undefined: …)`` (:data:`UNDEFINED_REASONS`); bootstrap
intervals leave out the resamples where it is undefined. A ratio with a non-zero denominator is
defined, even when its numerator is 0: always predicting "affirmed" has F1₁ = 0/FN = 0.
"""
from __future__ import annotations

import numpy as np

from .engine import ratio


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


def majority_macro_f1(n_pos: int, n_neg: int) -> float:
    """Closed form of macro F1 for always predicting the larger class: ``F1_major / 2``,
    ``F1_major = 2·n_major / (2·n_major + n_minor)``."""
    major, minor = max(n_pos, n_neg), min(n_pos, n_neg)
    return (2 * major / (2 * major + minor)) / 2


#: Why each metric can be undefined on a test set (its denominator is 0): the text after "n/a".
UNDEFINED_REASONS = {
    "macro_f1": "undefined: a class is absent from gold and predictions",
    "sensitivity": "undefined: no positive gold item",
    "specificity": "undefined: no negative gold item",
    "precision": "undefined: nothing predicted positive",
    "roc_auc": "undefined: gold has one class only",
}
