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
    fig, axes = plt.subplots(1, len(names), figsize=(3.2 * len(names), 2.6), squeeze=False)
    for ax, name in zip(axes[0], names):
        vals = np.asarray(samples[name], dtype=float)
        vals = vals[np.isfinite(vals)]
        ax.hist(vals, bins=30, color="#8fb3d9", edgecolor="white")
        m = metrics.get(name, {})
        if m.get("value") is not None:
            ax.axvline(m["value"], color="#1f3b73", lw=2, label="estimate")
            ax.axvline(m["ci_low"], color="#c0392b", ls="--", lw=1, label="95 % CI")
            ax.axvline(m["ci_high"], color="#c0392b", ls="--", lw=1)
        ax.set_title(name, fontsize=9)
        ax.set_yticks([])
    axes[0][0].legend(fontsize=7, loc="upper left")
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
           title: str = "", xlim: tuple | None = (0, 1), higher_is_better: bool = True) -> plt.Figure:
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
    if xlim:
        ax.set_xlim(*xlim)
    ax.grid(axis="x", alpha=0.3)
    ax.set_xlabel(value)
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig
