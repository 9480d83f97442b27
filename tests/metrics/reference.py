"""The reference the scoring engine is checked against: NegEx-style binary metrics with a stratified bootstrap,
computed index by index (each resample's rows taken from ``stratified_indices``, each metric computed on
them by the per-array functions below, :func:`macro_f1` …), with none of the engine's
per-unit counts, weights or formulas over totals; but ROC-AUC, which is the engine's own :func:`rank_auc` per
array (checked against scikit-learn's ``roc_auc_score`` in tests/metrics/test_classification.py), so for it the
reference checks the engine's resampling and weighting, not its formula. The engine (:func:`atlaslib.metrics.engine.evaluate`
under a card's ``SCORING``) must give these numbers to the bit. Also TempEval's document bootstrap of one scorer
row's F1 (:func:`bootstrap_f1`), index by index."""
from __future__ import annotations

import numpy as np

from atlaslib.metrics import bootstrap
from atlaslib.metrics.classification import UNDEFINED_REASONS
from atlaslib.metrics.engine import rank_auc
from atlaslib.results import metric


# -- binary metrics per array ---------------------------------------------------------------------------------
# Each takes ``y_true`` and ``y_pred`` (or ``y_score``) of shape ``(n,)`` or ``(B, n)`` (each row scored on its
# own, ``B`` values back: one call scores every resample of an index array); the values equal scikit-learn's
# (tests/metrics/test_classification.py). No atlas code calls them: they are what the engine is checked against.

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


def confusion_counts(y_true, y_pred) -> dict:
    """Confusion counts of one run as plain ints.

    >>> confusion_counts([1, 1, 0, 0], [1, 0, 0, 1])
    {'tp': 1, 'fp': 1, 'tn': 1, 'fn': 1}
    """
    return {k: int(v) for k, v in zip(("tp", "fp", "tn", "fn"), _counts(np.asarray(y_true, int), np.asarray(y_pred, int)))}


def _frac(num, den):
    """``num / den``, NaN where ``den`` is 0 (the atlas's rule, written out here rather than read from it)."""
    num, den = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    out = np.full(np.broadcast(num, den).shape, np.nan)
    np.divide(num, den, out=out, where=den > 0)
    return out if out.ndim else float(out)


def sensitivity(y_true, y_pred):
    """Sensitivity (recall of the positive class) = TP / (TP + FN); NaN when there is no positive."""
    tp, fp, tn, fn = _counts(y_true, y_pred)
    return _frac(tp, tp + fn)


def specificity(y_true, y_pred):
    """Specificity (recall of the negative class) = TN / (TN + FP); NaN when there is no negative."""
    tp, fp, tn, fn = _counts(y_true, y_pred)
    return _frac(tn, tn + fp)


def precision(y_true, y_pred):
    """Precision / PPV of the positive class = TP / (TP + FP); NaN (undefined) when nothing is called
    positive (scikit-learn's ``zero_division=np.nan``)."""
    tp, fp, tn, fn = _counts(y_true, y_pred)
    return _frac(tp, tp + fp)


def macro_f1(y_true, y_pred):
    """Macro F1 over the two classes = (F1₁ + F1₀) / 2, F1_c = 2·TP_c / (2·TP_c + FP_c + FN_c).

    For the negative class TP₀ = TN, FP₀ = FN, FN₀ = FP. A class with 2·TP_c + FP_c + FN_c = 0
    (absent from gold and predictions) has no F1, and macro F1 is then NaN (undefined). Always predicting the
    majority class 0 with ``p`` the share of positives gives ``F1₀ = 2(1-p)/(2-p)``, ``F1₁ = 0`` and so macro
    F1 = ``(1-p)/(2-p)``.
    """
    tp, fp, tn, fn = _counts(y_true, y_pred)
    return (_frac(2 * tp, 2 * tp + fp + fn) + _frac(2 * tn, 2 * tn + fn + fp)) / 2


def roc_auc(y_true, y_score):
    """ROC-AUC = P(score of a random positive > score of a random negative) + ½·P(tie): the Mann-Whitney U
    statistic over n₁·n₀, equal to scikit-learn's ``roc_auc_score`` (trapezoidal ROC) including ties; NaN when a
    class is absent. One definition, :func:`rank_auc`, the one the scoring engine uses; 2-D inputs
    give one value per row."""
    t, s = np.asarray(y_true), np.asarray(y_score, dtype=float)
    if t.ndim == 1:
        return rank_auc(t, s)
    return np.array([rank_auc(a, b) for a, b in zip(t, s)])


def roc_auc_resampled(y_true, y_score, indices):
    """ROC-AUC of every resample ``y_true[indices[b]], y_score[indices[b]]`` at once: the engine's
    :func:`atlaslib.metrics.engine.rank_auc` with each resample's multiplicities (the scores are ranked once; the
    sums are exact integers, so each value equals ``roc_auc`` of that resample bit for bit)."""
    t = np.asarray(y_true)
    return rank_auc(t, np.asarray(y_score, dtype=float), bootstrap.multiplicities(np.asarray(indices), len(t)))


BINARY_LABEL_METRICS = {"macro_f1": macro_f1, "sensitivity": sensitivity, "specificity": specificity,
                        "precision": precision}
BINARY_SCORE_METRICS = {"roc_auc": roc_auc}
# how each score metric is evaluated on every resample at once: (y_true, y_score, indices) -> values
BINARY_SCORE_RESAMPLERS = {"roc_auc": roc_auc_resampled}


def binary_metrics(y_true, y_pred, y_score, protocol: str, *, n_resamples: int = bootstrap.DEFAULT_RESAMPLES,
                   seed: int = bootstrap.DEFAULT_SEED, no_score_reason: str = "labels only: no scores") -> dict:
    """``{<metric>_<protocol>: {value, ci_low, ci_high}}`` for macro F1, sensitivity, specificity, precision
    and ROC-AUC (null with ``no_score_reason`` when ``y_score`` is None): the point estimate on the test set,
    the percentile interval over :func:`binary_resampled`. One set of stratified resample indices serves
    every metric, so the intervals are paired. A metric undefined on the test set (its denominator is 0,
    e.g. precision when nothing is predicted positive) is null with ``undefined: …`` as its reason."""
    y_true = np.asarray(y_true, dtype=int)
    y_pred = np.asarray(y_pred, dtype=int)
    samples = binary_resampled(y_true, y_pred, y_score, protocol, n_resamples=n_resamples, seed=seed)
    out = {}
    for name, fn in BINARY_LABEL_METRICS.items():
        out[f"{name}_{protocol}"] = _defined(name, float(fn(y_true, y_pred)), samples[f"{name}_{protocol}"])
    for name, fn in BINARY_SCORE_METRICS.items():
        key = f"{name}_{protocol}"
        if y_score is None:
            out[key] = metric(None, reason=no_score_reason)
        else:
            out[key] = _defined(name, float(fn(y_true, np.asarray(y_score, float))), samples[key])
    return out


def _defined(name: str, value: float, resamples) -> dict:
    if np.isnan(value):
        return metric(None, reason=UNDEFINED_REASONS[name])
    return metric(value, *bootstrap.percentile_ci(resamples))


def binary_resampled(y_true, y_pred, y_score, protocol: str, *, n_resamples: int = bootstrap.DEFAULT_RESAMPLES,
                     seed: int = bootstrap.DEFAULT_SEED) -> dict:
    """Every resampled value behind :func:`binary_metrics`' intervals (same indices):
    ``{<metric>_<protocol>: array of n_resamples values}``."""
    y_true = np.asarray(y_true, dtype=int)
    y_pred = np.asarray(y_pred, dtype=int)
    idx = bootstrap.stratified_indices(y_true, n_resamples, seed)
    out = {f"{name}_{protocol}": bootstrap.resampled(fn, idx, y_true, y_pred)
           for name, fn in BINARY_LABEL_METRICS.items()}
    if y_score is not None:
        for name, resampler in BINARY_SCORE_RESAMPLERS.items():
            out[f"{name}_{protocol}"] = resampler(y_true, np.asarray(y_score, float), idx)
    return out


def bootstrap_f1(per_document_counts, n_resamples: int = 1000, seed: int = 20150605, level: float = 0.95) -> dict:
    """Document-level bootstrap of one row's F1: resample documents with replacement, sum their scorer
    counts, recompute F1; ``{value, ci_low, ci_high}`` (value from all documents, percentile interval).
    TempEval's scorer counts (:func:`atlaslib.cards.tempeval.scoring.f1_from_counts`, the scorer's conventions);
    no cell's metrics come from here (they come from the card's counts through the one engine): an index-by-index
    reference the tests hold the engine to."""
    from atlaslib.cards.tempeval.scoring import f1_from_counts

    counts = np.asarray(per_document_counts, dtype=float)
    if counts.ndim != 2 or counts.shape[1] != 4 or len(counts) == 0:
        raise ValueError("bootstrap_f1 expects one [reference, predicted, precision_correct, recall_correct] "
                         f"row per document, got shape {counts.shape}")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(counts), size=(n_resamples, len(counts)))
    sums = counts[idx].sum(axis=1)                      # (B, 4)
    _, _, f = f1_from_counts(*sums.T)
    value = float(f1_from_counts(*counts.sum(axis=0))[2])
    lo, hi = bootstrap.percentile_ci(f, level)
    return {"value": value, "ci_low": lo, "ci_high": hi}
