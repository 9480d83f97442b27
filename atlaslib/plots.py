"""Plots shared by the card pages and the book: bootstrap distributions, confusion matrices, forest plots.

Each function returns a matplotlib Figure and computes nothing beyond layout; the numbers come from
atlaslib.metrics or from result cells.

Figures made here are :class:`AtlasFigure`: saved as PNG they carry, in a text chunk
(:data:`TICK_KEY`), the font size of their smallest tick label in image pixels, so that a browser test can
check the size a reader sees (image pixels × rendered width / image width) without reading glyphs.
"""
from __future__ import annotations

import functools
from typing import Iterable, Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

#: PNG text key: the smallest tick-label font size of the figure, in pixels of the saved image
TICK_KEY = "atlas:min-tick-font-px"
#: the resolution the book saves its figures at
DPI = 110


def plain_text(fn):
    """Labels and titles are plain text: model names come from users, and a '$' must not start mathtext
    (which can fail to parse and stop the page)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with plt.rc_context({"text.parse_math": False}):
            return fn(*args, **kwargs)
    return wrapper


def min_tick_font_pt(fig: Figure) -> float | None:
    """The smallest font size (points) of the visible, non-empty tick labels of ``fig``; None without any."""
    sizes = [t.get_fontsize() for ax in fig.axes if ax.get_visible()
             for t in (*ax.get_xticklabels(), *ax.get_yticklabels()) if t.get_visible() and t.get_text().strip()]
    return float(min(sizes)) if sizes else None


class AtlasFigure(Figure):
    """A Figure whose PNG records its smallest tick-label font size in pixels (:data:`TICK_KEY`)."""

    def savefig(self, fname, *args, **kwargs):
        if str(fname).lower().endswith(".png"):
            self.canvas.draw()  # tick labels exist once drawn
            pt = min_tick_font_pt(self)
            dpi = kwargs.get("dpi")
            dpi = self.dpi if dpi in (None, "figure") else float(dpi)
            if pt is not None:
                kwargs["metadata"] = {**(kwargs.get("metadata") or {}), TICK_KEY: f"{pt * dpi / 72:.2f}"}
        return super().savefig(fname, *args, **kwargs)


def subplots(*args, **kwargs):
    """``plt.subplots`` making an :class:`AtlasFigure`."""
    return plt.subplots(*args, FigureClass=AtlasFigure, **kwargs)


def save(fig: Figure, path, dpi: int = DPI) -> None:
    """Save ``fig`` as the book saves its figures (PNG at :data:`DPI`) and close it."""
    fig.savefig(path, dpi=dpi)
    plt.close(fig)


@plain_text
def bootstrap_distributions(samples: Mapping[str, Sequence[float]], metrics: Mapping[str, dict],
                            title: str = "") -> plt.Figure:
    """One histogram per metric of its resampled values, with the point estimate and the 95 % interval."""
    names = [n for n in samples if samples[n] is not None]
    ncols = min(3, len(names))
    nrows = -(-len(names) // ncols)
    fig, axes = subplots(nrows, ncols, figsize=(3.6 * ncols, 2.8 * nrows), squeeze=False)
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


@plain_text
def confusion_matrix(frame: pd.DataFrame, title: str = "") -> plt.Figure:
    """A run's confusion matrix as :func:`atlaslib.analysis.confusion.confusion` reads it from the result cell
    (rows gold, columns predicted, counts), in its order."""
    m = frame.to_numpy()
    fig, ax = subplots(figsize=(1.4 + 1.0 * m.shape[1], 1.0 + 1.0 * m.shape[0]))
    ax.imshow(m, cmap="Blues")
    for (i, j), v in np.ndenumerate(m):
        ax.text(j, i, str(v), ha="center", va="center", color="black" if v < m.max() * 0.6 else "white")
    ax.set_xticks(range(m.shape[1]), [str(c) for c in frame.columns])
    ax.set_yticks(range(m.shape[0]), [str(r) for r in frame.index])
    ax.set_xlabel("predicted")
    ax.set_ylabel("gold")
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig


def _zoom(lows, highs, pad_share=0.08, min_span=0.02, clip=(0.0, 1.0)):
    lo, hi = float(np.nanmin(lows)), float(np.nanmax(highs))
    span = max(hi - lo, min_span)
    a, b = lo - pad_share * span, hi + pad_share * span
    if clip is not None and lo >= clip[0] and hi <= clip[1]:
        a, b = max(a, clip[0] - 0.01), min(b, clip[1] + 0.01)
    return a, b


@plain_text
def forest(frame: pd.DataFrame, value: str, low: str, high: str, label: str = "label",
           title: str = "", xlim: tuple | None = None, higher_is_better: bool = True,
           xlabel: str | None = None) -> plt.Figure:
    """Forest plot: one row per entry, point estimate with its interval, ordered by the estimate
    (best at the top). Rows without a value are left out (the leaderboard says why). The axis zooms to
    the data unless ``xlim`` is given; a zero-width interval is drawn as a short vertical bar (so it is
    seen, not mistaken for a missing one) and named in the legend."""
    d = frame.dropna(subset=[value]).astype({value: float, low: float, high: float})
    d = d.sort_values(value, ascending=higher_is_better)
    fig, ax = subplots(figsize=(6.4, 0.45 * max(len(d), 1) + 1.2))
    y = np.arange(len(d))
    v = d[value].to_numpy(float)
    lo_v = d[low].fillna(d[value]).to_numpy(float)
    hi_v = d[high].fillna(d[value]).to_numpy(float)
    lo = (v - lo_v).clip(min=0)
    hi = (hi_v - v).clip(min=0)
    ax.errorbar(v, y, xerr=[lo, hi], fmt="o", color="#1f3b73", ecolor="#7f8c8d", capsize=3)
    zero = (hi_v - lo_v) == 0
    if zero.any():
        ax.plot(v[zero], y[zero], marker="|", markersize=16, mew=2.5, ls="none", color="#c0392b",
                label="zero-width interval")
        ax.legend(fontsize=7, loc="best")
    ax.set_yticks(y, d[label].tolist())
    ax.set_ylim(-0.7, len(d) - 0.3)
    ax.set_xlim(*(xlim if xlim else _zoom(lo_v, hi_v)))
    ax.grid(axis="x", alpha=0.3)
    ax.set_xlabel(xlabel or value)
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig


def reference_models(pairs: pd.DataFrame, shrink: float = 2.0) -> list[str]:
    """Models whose pairs set the axis of a pairwise figure and squeeze every other pair: repeatedly, the model
    whose removal narrows the span of the remaining pairs' intervals (with 0) the most, when it narrows it by
    at least ``shrink`` times and at least two pairs remain (e.g. a constant baseline far below every run)."""
    def span(d):
        lo = min(0.0, float(d["ci_low"].min()))
        hi = max(0.0, float(d["ci_high"].max()))
        return hi - lo

    out: list[str] = []
    d = pairs
    while True:
        models = sorted(set(d["model_a"]) | set(d["model_b"]))
        best = None
        for m in models:
            rest = d[(d["model_a"] != m) & (d["model_b"] != m)]
            if len(rest) < 2:
                continue
            ratio = span(d) / max(span(rest), 1e-12)
            if ratio >= shrink and (best is None or ratio > best[0]):
                best = (ratio, m, rest)
        if best is None:
            return out
        out.append(best[1])
        d = best[2]


def _pair_panel(ax, d: pd.DataFrame, xlabel: str, fontsize: float) -> None:
    y = np.arange(len(d))[::-1]
    sig = d["significant"].to_numpy(bool)
    for yy, (_, r), s in zip(y, d.iterrows(), sig):
        col = "#c0392b" if s else "#1f3b73"
        ax.errorbar([r["difference"]], [yy], xerr=[[max(r["difference"] - r["ci_low"], 0)],
                                                  [max(r["ci_high"] - r["difference"], 0)]],
                    fmt="o", color=col, ecolor=col, capsize=3)
        if r["ci_high"] == r["ci_low"]:
            ax.plot([r["difference"]], [yy], marker="|", markersize=14, mew=2.5, color=col)
    ax.axvline(0, color="black", ls="--", lw=1)
    ax.set_yticks(y, [f"{a}\n− {b}" + (" *" if s else "") for a, b, s in zip(d["model_a"], d["model_b"], sig)])
    ax.set_ylim(-0.7, len(d) - 0.3)
    lo, hi = _zoom(np.r_[d["ci_low"].to_numpy(float), 0.0], np.r_[d["ci_high"].to_numpy(float), 0.0], clip=None)
    ax.set_xlim(lo, hi)
    ax.grid(axis="x", alpha=0.3)
    ax.tick_params(labelsize=fontsize)
    ax.set_xlabel(xlabel, fontsize=fontsize)


@plain_text
def pairwise_differences(pairs: pd.DataFrame, title: str = "", xlabel: str = "difference (A − B)",
                         references: Iterable[str] | None = None, fontsize: float = 9.0) -> plt.Figure:
    """One row per pair ``A − B``: the difference with its paired 95 % interval; pairs significant after
    Holm in red (and marked ``*``), a dashed line at 0.

    Pairs with a model of ``references`` (default :func:`reference_models`: runs so far from the others, a
    constant baseline for instance, that their pairs would set the axis) get a panel of their own below, with
    its own axis, so that the informative pairs are not squeezed into a sliver of the figure. Tick labels are
    ``fontsize`` points (at the book's width and :data:`DPI` at least 8 px on screen)."""
    d = pairs.reset_index(drop=True)
    refs = list(reference_models(d) if references is None else references)
    mask = d["model_a"].isin(refs) | d["model_b"].isin(refs)
    panels = [(d[~mask], ""), (d[mask], "pairs with " + ", ".join(refs))] if refs and (~mask).any() and mask.any() \
        else [(d, "")]
    heights = [0.55 * max(len(p), 1) + 0.9 for p, _ in panels]
    fig, axes = subplots(len(panels), 1, figsize=(7.2, sum(heights) + 0.5), squeeze=False,
                         gridspec_kw={"height_ratios": heights})
    for ax, (part, label) in zip(axes[:, 0], panels):
        _pair_panel(ax, part.reset_index(drop=True), xlabel, fontsize)
        if label:
            ax.set_title(label + " (own axis)", fontsize=fontsize)
    if title:
        fig.suptitle(title, fontsize=fontsize + 1)
    fig.tight_layout()
    return fig


def _finish_lines(fig: plt.Figure, ax, title: str) -> plt.Figure:
    """The common finish of the line figures: light grid, small legend, optional title, tight layout."""
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig


@plain_text
def width_vs_size(frame: pd.DataFrame, title: str = "") -> plt.Figure:
    """Interval width against test size: one line per model from ``frame`` (columns model, n, width,
    metric), log-scaled size axis."""
    fig, ax = subplots(figsize=(6.4, 3.6))
    for model, g in frame.groupby("model"):
        g = g.sort_values("n")
        ax.plot(g["n"], g["width"], marker="o", label=model)
    ax.set_xscale("log")
    ax.set_xlabel("test items (log scale)")
    ax.set_ylabel("width of the 95 % interval")
    return _finish_lines(fig, ax, title)


@plain_text
def coverage(frame: pd.DataFrame, level: float = 0.95, title: str = "") -> plt.Figure:
    """Coverage of the true value by two intervals against the within-cluster correlation (columns icc,
    cluster, item), with the nominal level dashed."""
    fig, ax = subplots(figsize=(6.0, 3.4))
    ax.plot(frame["icc"], frame["cluster"], marker="o", label="cluster bootstrap")
    ax.plot(frame["icc"], frame["item"], marker="s", label="item bootstrap (items taken as independent)")
    ax.axhline(level, color="black", ls="--", lw=1, label=f"nominal {level:.0%}")
    ax.set_xlabel("within-cluster correlation of the outcomes")
    ax.set_ylabel("coverage of the true proportion")
    ax.set_ylim(min(0.5, float(frame[["cluster", "item"]].min().min()) - 0.05), 1.0)
    return _finish_lines(fig, ax, title)
