"""Bootstrap confidence intervals: stratified (item-level) and cluster (document-level) resamples.

- :func:`stratified_indices`: each resample draws, with replacement, as many items from each gold
  class as the test set has, so every resample keeps the class counts (a rare class never vanishes
  and prevalence-dependent metrics such as precision stay on the test set's prevalence).
- :func:`cluster_indices`: each resample draws whole groups (case reports) with replacement and keeps
  every item of each drawn group, so items that share a document stay together: the interval then
  reflects document-to-document variation rather than pretending sentences are independent.
- :func:`percentile_ci`: the 2.5th and 97.5th percentiles of the resampled values (NaNs ignored).

Indices come from ``numpy.random.default_rng(seed)``; the same seed gives the same resamples and
therefore the same intervals.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

DEFAULT_RESAMPLES = 1000
DEFAULT_SEED = 20261006


def stratified_indices(y_true: Sequence, n_resamples: int = DEFAULT_RESAMPLES,
                       seed: int = DEFAULT_SEED) -> np.ndarray:
    """A ``(n_resamples, n)`` int array; row ``b`` resamples each class with replacement, class
    counts kept. Classes are visited in sorted order; within a row, class blocks are concatenated."""
    y = np.asarray(y_true)
    rng = np.random.default_rng(seed)
    blocks = []
    for cls in np.unique(y):
        members = np.flatnonzero(y == cls)
        blocks.append(members[rng.integers(0, len(members), size=(n_resamples, len(members)))])
    return np.concatenate(blocks, axis=1)


def multiplicities(indices: np.ndarray, n: int) -> np.ndarray:
    """``(B, n)`` counts of each unit in every row of a ``(B, m)`` index array."""
    idx = np.asarray(indices)
    b = idx.shape[0]
    flat = (idx + (np.arange(b, dtype=np.int64) * n)[:, None]).ravel()
    return np.bincount(flat, minlength=b * n).reshape(b, n)


def cluster_draws(groups: Sequence, n_resamples: int = DEFAULT_RESAMPLES,
                  seed: int = DEFAULT_SEED) -> tuple[np.ndarray, np.ndarray]:
    """The one random draw behind every cluster resample: ``(draws, inverse)`` with ``draws[b]`` the ``G``
    group numbers (indices into the sorted distinct groups) drawn with replacement for resample ``b``, and
    ``inverse[i]`` the group number of item ``i``."""
    uniq, inverse = np.unique(np.asarray(groups), return_inverse=True)
    rng = np.random.default_rng(seed)
    return rng.integers(0, len(uniq), size=(n_resamples, len(uniq))), inverse.reshape(-1)


def cluster_indices(groups: Sequence, n_resamples: int = DEFAULT_RESAMPLES,
                    seed: int = DEFAULT_SEED) -> list[np.ndarray]:
    """A list of ``n_resamples`` index arrays; each draws ``G`` groups with replacement (``G`` = number
    of distinct groups) and holds all item indices of every drawn group (a group drawn twice appears
    twice). Resample sizes vary with the drawn groups' sizes."""
    draws, inverse = cluster_draws(groups, n_resamples, seed)
    members = [np.flatnonzero(inverse == k) for k in range(draws.shape[1])]
    return [np.concatenate([members[k] for k in row]) for row in draws]


def cluster_multiplicities(groups: Sequence, n_resamples: int = DEFAULT_RESAMPLES,
                           seed: int = DEFAULT_SEED) -> tuple[np.ndarray, np.ndarray]:
    """``(M, inverse)``: ``M[b, k]`` = how often group ``k`` is drawn in resample ``b`` (the draws of
    :func:`cluster_draws`, as :func:`cluster_indices` uses them), so resample ``b`` of
    :func:`cluster_indices` holds item ``i`` exactly ``M[b, inverse[i]]`` times."""
    draws, inverse = cluster_draws(groups, n_resamples, seed)
    n_resamples, n_groups = draws.shape
    mult = np.zeros((n_resamples, n_groups), dtype=np.int64)
    np.add.at(mult, (np.repeat(np.arange(n_resamples), n_groups), draws.ravel()), 1)
    return mult, inverse


def percentile_ci(values: Sequence[float], level: float = 0.95) -> tuple[float, float]:
    """Percentile interval ``(q_{(1-level)/2}, q_{(1+level)/2})`` of the finite resampled values."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return (float("nan"), float("nan"))
    alpha = (1 - level) / 2
    lo, hi = np.quantile(v, [alpha, 1 - alpha])
    return float(lo), float(hi)


def resampled(metric: Callable, indices: np.ndarray, *arrays) -> np.ndarray:
    """Apply a vectorised metric (accepting ``(B, n)`` arrays) to every resample at once."""
    return np.asarray(metric(*(np.asarray(a)[indices] for a in arrays)), dtype=float)


