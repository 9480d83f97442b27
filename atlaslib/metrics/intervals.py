"""Intervals that say what they assume: exact binomial (Clopper–Pearson) and cluster bootstrap.

- :func:`clopper_pearson`: the exact two-sided interval for a proportion ``k/n``:
  ``lower = Beta.ppf(α/2; k, n−k+1)`` (0 when k = 0), ``upper = Beta.ppf(1−α/2; k+1, n−k)`` (1 when
  k = n), α = 1 − level. It never collapses to zero width, which a percentile bootstrap interval does
  at 0 % or 100 % (every resample of 21 correct out of 21 is again 21 out of 21).
- :func:`clopper_pearson_upper`: the exact one-sided upper bound ``Beta.ppf(level; k+1, n−k)`` (1 when
  k = n); with k = 0 it is ``1 − (1 − level)^(1/n)`` (≈ 3/n at 95 %, the "rule of three").
- :func:`cluster_proportion_ci`: a percentile bootstrap interval for a proportion whose items come in
  clusters (sentences, templates, documents): each resample draws whole clusters with replacement
  (:func:`atlaslib.metrics.bootstrap.cluster_draws`) and the proportion is the drawn successes over
  the drawn trials. With fewer than :data:`FEW_CLUSTERS` clusters it carries ``few_clusters=True``:
  the percentile interval is then too narrow and the page says so.

A card's own cluster resampling beside its declared one (e.g. NegEx's sentences) is not here: it is the
card's scoring's ``extra``, computed by :func:`atlaslib.metrics.engine.extra_interval` from the cell's
per-unit counts.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from . import bootstrap

FEW_CLUSTERS = 30
LEVEL = 0.95


def _check_counts(k, n) -> tuple[int, int]:
    for name, v in (("k", k), ("n", n)):
        if isinstance(v, bool) or int(v) != v or v < 0:
            raise ValueError(f"clopper_pearson: {name} must be a non-negative integer, got {v!r}")
    if k > n:
        raise ValueError(f"clopper_pearson: k = {k} exceeds n = {n}")
    return int(k), int(n)


def clopper_pearson(k: int, n: int, level: float = LEVEL) -> tuple[float, float]:
    """Exact two-sided interval for ``k`` successes in ``n`` trials (see module docstring); NaNs when
    ``n = 0`` (the proportion is undefined)."""
    from scipy.stats import beta  # imported on first use (scipy.stats takes about 1 s to import)

    k, n = _check_counts(k, n)
    if n == 0:
        return float("nan"), float("nan")
    alpha = 1.0 - level
    lo = 0.0 if k == 0 else float(beta.ppf(alpha / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - alpha / 2, k + 1, n - k))
    return lo, hi


def clopper_pearson_upper(k: int, n: int, level: float = LEVEL) -> float:
    """Exact one-sided upper confidence bound ``Beta.ppf(level; k+1, n−k)`` (1 when k = n): the
    largest rate not rejected at 1 − level by ``P(X ≤ k | p) ≥ 1 − level``. NaN when ``n = 0``."""
    from scipy.stats import beta

    k, n = _check_counts(k, n)
    if n == 0:
        return float("nan")
    return 1.0 if k == n else float(beta.ppf(level, k + 1, n - k))


def _group_sums(values: np.ndarray, inverse: np.ndarray, n_groups: int) -> np.ndarray:
    out = np.zeros((n_groups,) + values.shape[1:], dtype=np.int64)
    np.add.at(out, inverse, values.astype(np.int64))
    return out


def cluster_proportion_ci(successes: Sequence, groups: Sequence, *, n_resamples: int = bootstrap.DEFAULT_RESAMPLES,
                          seed: int = bootstrap.DEFAULT_SEED, level: float = LEVEL) -> dict:
    """``{value, ci_low, ci_high, n_clusters, few_clusters, method}`` for the share of 1s in ``successes``
    (0/1 per item), resampling whole ``groups``: resample ``b`` = Σ_k M[b,k]·s_k / Σ_k M[b,k]·n_k, with
    ``M`` the cluster multiplicities of :func:`atlaslib.metrics.bootstrap.cluster_multiplicities`
    (identical to concatenating the drawn clusters' items)."""
    s = np.asarray(successes).astype(np.int64)
    if len(s) != len(groups):
        raise ValueError(f"cluster_proportion_ci: {len(s)} outcomes but {len(groups)} group labels")
    if s.size == 0:
        return {"value": None, "ci_low": None, "ci_high": None, "n_clusters": 0, "few_clusters": True,
                "method": "cluster bootstrap"}
    mult, inverse = bootstrap.cluster_multiplicities(groups, n_resamples, seed)
    g = mult.shape[1]
    ks = _group_sums(s, inverse, g)
    ns = np.bincount(inverse, minlength=g)
    num, den = mult @ ks, mult @ ns
    values = num / den
    lo, hi = bootstrap.percentile_ci(values, level)
    return {"value": float(s.mean()), "ci_low": lo, "ci_high": hi, "n_clusters": int(g),
            "few_clusters": bool(g < FEW_CLUSTERS), "method": "cluster bootstrap", "resamples": values}


def item_bootstrap_ci(successes: Sequence, *, n_resamples: int = bootstrap.DEFAULT_RESAMPLES,
                      seed: int = bootstrap.DEFAULT_SEED, level: float = LEVEL) -> tuple[float, float]:
    """Percentile bootstrap interval of a proportion treating items as independent (items drawn with
    replacement), for comparison with :func:`cluster_proportion_ci`."""
    s = np.asarray(successes, dtype=float)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(s), size=(n_resamples, len(s)))
    return bootstrap.percentile_ci(s[idx].mean(1), level)


def simulate_coverage(n_sims: int = 500, *, n_clusters: int = 100, cluster_size: int = 8, p: float = 0.3,
                      icc: float = 0.3, n_resamples: int = 400, seed: int = 20261006) -> dict:
    """Coverage of the true proportion ``p`` by the cluster and the item bootstrap intervals on simulated
    clustered binary data: cluster ``g`` has its own rate ``p_g ~ Beta(p·φ, (1−p)·φ)`` with
    ``φ = (1 − icc)/icc`` (so the within-cluster correlation of the outcomes is ``icc``; ``icc = 0``:
    independent items), and ``cluster_size`` items ``~ Bernoulli(p_g)``. Returns ``{"cluster", "item"}``
    shares of the ``n_sims`` intervals that contain ``p``, and the mean interval widths."""
    rng = np.random.default_rng(seed)
    groups = np.repeat(np.arange(n_clusters), cluster_size)
    hit = {"cluster": 0, "item": 0}
    width = {"cluster": 0.0, "item": 0.0}
    for k in range(n_sims):
        if icc > 0:
            phi = (1 - icc) / icc
            pg = rng.beta(p * phi, (1 - p) * phi, size=n_clusters)
        else:
            pg = np.full(n_clusters, p)
        y = (rng.random(n_clusters * cluster_size) < pg[groups]).astype(int)
        c = cluster_proportion_ci(y, groups, n_resamples=n_resamples, seed=seed + k)
        i = item_bootstrap_ci(y, n_resamples=n_resamples, seed=seed + k)
        for name, (lo, hi) in (("cluster", (c["ci_low"], c["ci_high"])), ("item", i)):
            hit[name] += int(lo <= p <= hi)
            width[name] += (hi - lo) / n_sims
    return {"cluster": hit["cluster"] / n_sims, "item": hit["item"] / n_sims,
            "cluster_width": width["cluster"], "item_width": width["item"], "n_sims": n_sims, "icc": icc}
