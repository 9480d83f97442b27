"""Metric tables with bootstrap intervals, for item-level binary tasks."""
from __future__ import annotations

import numpy as np

from ..results import metric
from . import bootstrap
from .classification import BINARY_LABEL_METRICS, BINARY_SCORE_METRICS, BINARY_SCORE_RESAMPLERS, UNDEFINED_REASONS


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
    """Every resampled value behind :func:`binary_metrics`' intervals (same indices), for plotting the
    bootstrap distributions: ``{<metric>_<protocol>: array of n_resamples values}``."""
    y_true = np.asarray(y_true, dtype=int)
    y_pred = np.asarray(y_pred, dtype=int)
    idx = bootstrap.stratified_indices(y_true, n_resamples, seed)
    out = {f"{name}_{protocol}": bootstrap.resampled(fn, idx, y_true, y_pred)
           for name, fn in BINARY_LABEL_METRICS.items()}
    if y_score is not None:
        for name, resampler in BINARY_SCORE_RESAMPLERS.items():
            out[f"{name}_{protocol}"] = resampler(y_true, np.asarray(y_score, float), idx)
    return out
