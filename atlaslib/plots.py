"""Plots shared by the card pages and the book: bootstrap distributions, confusion matrices, forest plots.

Each function returns a matplotlib Figure and computes nothing beyond layout; the numbers come from
atlaslib.metrics or from result cells.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd


def bootstrap_distributions(samples: Mapping[str, Sequence[float]], metrics: Mapping[str, dict],
                            title: str = "") -> plt.Figure:
    """One histogram per metric of its resampled values, with the point estimate and the 95 % interval."""
    names = [n for n in samples if samples[n] is not None]
    ncols = min(3, len(names))
    nrows = -(-len(names) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.6 * ncols, 2.8 * nrows), squeeze=False)
    for ax in axes.flat[len(names):]:
        ax.set_visible(False)
    for ax, name in zip(axes.flat, names):
        vals = np.asarray(samples[name], dtype=float)
        vals = vals[np.isfinite(vals)]
        lo, hi = (vals.min(), vals.max()) if vals.size else (0.0, 1.0)
        span = max(hi - lo, 0.02)
        ax.hist(vals, bins=30, range=(lo - span * 0.05, hi + span * 0.05), color="#8fb3d9", edgecolor="white")
        ax.set_xlim(max(-0.01, lo - span * 0.3), min(1.01, hi + span * 0.3))
        m = metrics.get(name, {})
        if m.get("value") is not None:
            ax.axvline(m["value"], color="#1f3b73", lw=2, label="estimate")
            ax.axvline(m["ci_low"], color="#c0392b", ls="--", lw=1, label="95 % CI")
            ax.axvline(m["ci_high"], color="#c0392b", ls="--", lw=1)
        ax.set_title(name, fontsize=9)
        ax.set_yticks([])
    axes.flat[0].legend(fontsize=7, loc="upper left")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def confusion_matrix(counts: Mapping[str, int], positive: str = "negated", negative: str = "affirmed",
                     title: str = "") -> plt.Figure:
    """2×2 confusion matrix from ``{tp, fp, tn, fn}`` (rows gold, columns predicted)."""
    m = np.array([[counts["tp"], counts["fn"]], [counts["fp"], counts["tn"]]])
    fig, ax = plt.subplots(figsize=(3.4, 3.0))
    ax.imshow(m, cmap="Blues")
    for (i, j), v in np.ndenumerate(m):
        ax.text(j, i, str(v), ha="center", va="center", color="black" if v < m.max() * 0.6 else "white")
    ax.set_xticks([0, 1], [positive, negative])
    ax.set_yticks([0, 1], [positive, negative])
    ax.set_xlabel("predicted")
    ax.set_ylabel("gold")
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig


def forest(frame: pd.DataFrame, value: str, low: str, high: str, label: str = "label",
           title: str = "", xlim: tuple | None = (0, 1), higher_is_better: bool = True,
           xlabel: str | None = None) -> plt.Figure:
    """Forest plot: one row per entry, point estimate with its interval, ordered by the estimate
    (best at the top). Rows without a value are left out (the leaderboard says why)."""
    d = frame.dropna(subset=[value]).astype({value: float, low: float, high: float})
    d = d.sort_values(value, ascending=higher_is_better)
    fig, ax = plt.subplots(figsize=(6.4, 0.45 * max(len(d), 1) + 1.0))
    y = np.arange(len(d))
    lo = (d[value] - d[low]).clip(lower=0).fillna(0).to_numpy(float)
    hi = (d[high] - d[value]).clip(lower=0).fillna(0).to_numpy(float)
    ax.errorbar(d[value].to_numpy(float), y, xerr=[lo, hi], fmt="o", color="#1f3b73", ecolor="#7f8c8d", capsize=3)
    ax.set_yticks(y, d[label].tolist())
    ax.set_ylim(-0.7, len(d) - 0.3)
    if xlim:
        pad = 0.03 * (xlim[1] - xlim[0])
        ax.set_xlim(xlim[0] - pad, xlim[1] + pad)
    ax.grid(axis="x", alpha=0.3)
    ax.set_xlabel(xlabel or value)
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig
