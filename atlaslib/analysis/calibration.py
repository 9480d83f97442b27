"""Calibration of runs that give scores: Brier score, expected calibration error (ECE) and the reliability
diagram, with bootstrap intervals on the card's own resamples.

Scores are the records' ``score`` (the probability the run gives to the positive class, e.g. P(negated) on
the NegEx card); ``y`` is 1 for a positive gold label. A run whose records carry no score (labels only, or
a constant baseline with ``score: null``) gets "n/a (labels only)".

- Brier score ``= (1/N) Σ (s_i − y_i)²``.
- Bins, declared by every caller as ``binning`` (:data:`BINNINGS`):

  - ``"mass"`` (the atlas's pages): the items sorted by score (stable, so ties keep record order) are cut
    into :data:`N_BINS` = 10 consecutive bins of sizes as equal as possible (``numpy.array_split``: the first
    ``N mod 10`` bins hold one item more);
  - ``"width"`` (the course's textbook diagram): ten equal-width bins of the score over [0, 1], a score on an
    inner edge in the lower bin (scikit-learn's ``calibration_curve`` convention).
- ECE ``= Σ_b (n_b / N) · |mean(y in b) − mean(s in b)|`` over the non-empty bins; the Brier score's
  decomposition (Murphy) over the same bins (:func:`brier_decomposition`).
- ECE is biased upward, most at small n: even a perfectly calibrated run shows a positive ECE, because
  each bin's observed rate is a noisy mean of ``n_b`` outcomes and the absolute value turns that noise into
  error. :func:`ece_if_calibrated` estimates that noise floor by consistency resampling (Bröcker & Smith
  2007): outcomes ``y*_i ~ Bernoulli(s_i)`` drawn :data:`N_CONSISTENCY` times for the run's own scores
  (so the scores are calibrated by construction), binned the same way; the mean ECE of the draws is the ECE
  that noise alone gives. The **debiased ECE** is ``ECE − ECE if calibrated`` (:func:`ece_debiased`): about
  0 for a calibrated run at any n, and it may fall below 0 when the observed ECE is within the noise.
- Intervals: the percentile interval of each statistic over the same stratified resamples that give the
  card's other intervals (:func:`atlaslib.metrics.bootstrap.stratified_indices` with the cell's bootstrap
  seed and the card's number of resamples); the bins are recomputed within each resample.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from . import analysis_of, n_resamples_of, ok_cells, one_model_label, seed_cells, seeds_label

N_BINS = 10
#: the two binnings, ``binning=`` of :func:`ece`, :func:`reliability` and :func:`brier_decomposition`
BINNINGS = ("mass", "width")
N_CONSISTENCY = 200
NO_SCORES = "n/a (labels only)"


def brier(y, s):
    """Brier score ``mean((s − y)²)``; vectorised over leading axes."""
    y, s = np.asarray(y, float), np.asarray(s, float)
    return ((s - y) ** 2).mean(axis=-1)


def _bin_sizes(n: int, n_bins: int = N_BINS) -> np.ndarray:
    return np.array([len(a) for a in np.array_split(np.arange(n), n_bins)], dtype=int)




def _check_binning(binning: str) -> None:
    if binning not in BINNINGS:
        raise ValueError(f"calibration: binning must be one of {', '.join(BINNINGS)}, got {binning!r}")


def bin_ids(s, n_bins: int = N_BINS, binning: str = "mass") -> np.ndarray:
    """Each score's bin, ``0 … n_bins−1``, under ``binning``; vectorised over the leading axes (each row is
    binned on its own scores)."""
    _check_binning(binning)
    s = np.asarray(s, float)
    if binning == "width":
        return np.searchsorted(np.linspace(0.0, 1.0, n_bins + 1)[1:-1], s)
    rank = np.argsort(np.argsort(s, axis=-1, kind="stable"), axis=-1)
    return np.searchsorted(np.cumsum(_bin_sizes(s.shape[-1], n_bins)), rank, side="right")


def ece(y, s, n_bins: int = N_BINS, binning: str = "mass"):
    """Expected calibration error, ``Σ_b (n_b/N)·|ȳ_b − s̄_b|`` over the non-empty bins of ``binning``;
    vectorised over the leading axes of ``y`` and ``s`` (each row is binned on its own scores)."""
    _check_binning(binning)
    y, s = np.asarray(y, float), np.asarray(s, float)
    if y.ndim == 1:
        return float(ece(y[None], s[None], n_bins, binning)[0])
    n = y.shape[-1]
    if binning == "width":
        rows = np.arange(int(np.prod(y.shape[:-1]))).reshape(y.shape[:-1] + (1,))
        flat = (rows * n_bins + bin_ids(s, n_bins, "width")).ravel()
        size = rows.size * n_bins
        ysum = np.bincount(flat, y.ravel(), size).reshape(y.shape[:-1] + (n_bins,))
        ssum = np.bincount(flat, s.ravel(), size).reshape(y.shape[:-1] + (n_bins,))
        return (np.abs(ysum - ssum) / n).sum(axis=-1)
    order = np.argsort(s, axis=-1, kind="stable")
    ys, ss = np.take_along_axis(y, order, -1), np.take_along_axis(s, order, -1)
    sizes = _bin_sizes(n, n_bins)
    sizes = sizes[sizes > 0]
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    ysum, ssum = np.add.reduceat(ys, starts, axis=-1), np.add.reduceat(ss, starts, axis=-1)
    return (np.abs(ysum - ssum) / n).sum(axis=-1)  # (n_b/N)·|ysum/n_b − ssum/n_b| = |ysum − ssum|/N


def ece_if_calibrated(s, n_bins: int = N_BINS, n_draws: int = N_CONSISTENCY, seed: int = 0) -> float:
    """The ECE a perfectly calibrated run with scores ``s`` shows on average (its noise floor): the mean ECE
    over ``n_draws`` outcome vectors ``y*_i ~ Bernoulli(s_i)`` (consistency resampling, seeded)."""
    s = np.asarray(s, float)
    rng = np.random.default_rng(seed)
    y_star = (rng.random((n_draws, s.size)) < s).astype(float)
    return float(ece(y_star, np.broadcast_to(s, y_star.shape), n_bins).mean())


def ece_debiased(y, s, n_bins: int = N_BINS, n_draws: int = N_CONSISTENCY, seed: int = 0) -> float:
    """ECE minus its noise floor (:func:`ece_if_calibrated`): about 0 for a calibrated run at any n; below 0
    when the observed ECE is within what noise gives a calibrated run."""
    return ece(y, s, n_bins) - ece_if_calibrated(s, n_bins, n_draws, seed)


def reliability(y, s, n_bins: int = N_BINS, binning: str = "mass") -> pd.DataFrame:
    """The reliability diagram's points: per non-empty bin of ``binning`` (numbered from 1), ``n``, score
    range, mean score (confidence) and observed positive rate."""
    y, s = np.asarray(y, float), np.asarray(s, float)
    ids = bin_ids(s, n_bins, binning)
    rows = []
    for k in range(n_bins):
        idx = np.flatnonzero(ids == k)
        if len(idx):
            rows.append({"bin": k + 1, "n": len(idx), "score_min": float(s[idx].min()),
                         "score_max": float(s[idx].max()), "mean_score": float(s[idx].mean()),
                         "observed_rate": float(y[idx].mean())})
    return pd.DataFrame(rows)


def brier_decomposition(y, s, n_bins: int = N_BINS, binning: str = "mass") -> dict:
    """Murphy's decomposition over the bins of ``binning``: reliability Σ n_k(s̄_k − ȳ_k)²/N (lower is
    better), resolution Σ n_k(ȳ_k − ȳ)²/N (higher is better), uncertainty ȳ(1 − ȳ); Brier = reliability −
    resolution + uncertainty + within-bin, the last term from scores that vary inside a bin (Σ over items of
    (s − s̄_k)² − 2(s − s̄_k)(y − ȳ_k), over N), zero when every bin holds one score value."""
    y, s = np.asarray(y, dtype=float), np.asarray(s, dtype=float)
    k = bin_ids(s, n_bins, binning)
    n, ybar = len(y), y.mean()
    rel = res = within = 0.0
    for b in np.unique(k):
        m = k == b
        sk, yk = s[m].mean(), y[m].mean()
        rel += m.sum() * (sk - yk) ** 2
        res += m.sum() * (yk - ybar) ** 2
        within += np.sum((s[m] - sk) ** 2 - 2 * (s[m] - sk) * (y[m] - yk))
    return {"brier": float(brier(y, s)), "reliability": rel / n, "resolution": res / n,
            "uncertainty": float(ybar * (1 - ybar)), "within_bin": within / n}


#: what a calibration row is of: the score of the card's positive label, or the probability of the label the run
#: answered (top-label, "confidence" calibration) for a run that records every label's probability per item
KINDS = {"positive": "P(positive label)", "top-label": "P(answered label), top-label"}


def scored(cell: dict, positive: str | None = None):
    """``(y, s, kind)`` of a cell, or None when it has nothing to calibrate: with the card's positive label and a
    ``score`` on every record, ``y`` = gold is the positive label and ``s`` the score (``kind`` "positive");
    else, when every record holds its labels' probabilities (``scores``, the answered label among them), ``y`` =
    the answer is right and ``s`` its probability (``kind`` "top-label": the course's confidence calibration, the
    NLI card's runs, which were shown "n/a (labels only)" though their cells hold the probabilities)."""
    recs = cell.get("predictions") or []
    if not recs:
        return None
    positive = positive or analysis_of(cell.get("card", "")).positive
    if positive is not None and all(r.get("score") is not None for r in recs):
        y = np.array([r["gold"] == positive for r in recs], dtype=float)
        return y, np.array([float(r["score"]) for r in recs], dtype=float), "positive"
    if all(isinstance(r.get("scores"), dict) and r.get("pred") in r["scores"] for r in recs):
        return (*top_label(recs), "top-label")
    return None


def top_label(recs) -> tuple[np.ndarray, np.ndarray]:
    """``(y, s)`` of top-label calibration: ``y`` 1 where the answer is the gold label, ``s`` the probability the
    record's ``scores`` give its answer (every record must hold one)."""
    y = np.array([r["pred"] == r["gold"] for r in recs], dtype=float)
    return y, np.array([float(r["scores"][r["pred"]]) for r in recs], dtype=float)


def scores_of(cell: dict, positive: str | None = None):
    """``(y, s)`` of :func:`scored`, or None."""
    got = scored(cell, positive)
    return None if got is None else got[:2]


def calibration_row(cell: dict, n_resamples: int | None = None, seed: int | None = None) -> dict:
    """Brier and ECE (10 equal-mass bins) of one run with their percentile intervals, or n/a."""
    from ..metrics import bootstrap

    if seed_cells(cell):
        return seeded_calibration_row(cell, n_resamples, seed)
    label = one_model_label(cell)
    got = scored(cell)
    if got is None:
        return {"run": label, "n": len(cell.get("predictions") or []), "brier": None, "brier_low": None,
                "brier_high": None, "ece": None, "ece_low": None, "ece_high": None, "ece_if_calibrated": None,
                "ece_debiased": None, "note": NO_SCORES, "of": None}
    y, s, kind = got
    seed = seed if seed is not None else int((cell.get("seeds") or {}).get("bootstrap", bootstrap.DEFAULT_SEED))
    # the positive label's score: resampled within the gold classes, as the card's intervals; the answered label's
    # probability: items resampled (whether an answer is right is what the resampling has to vary)
    strata = y.astype(int) if kind == "positive" else np.zeros(len(y), dtype=int)
    idx = bootstrap.stratified_indices(strata, n_resamples or n_resamples_of(cell), seed)
    b_lo, b_hi = bootstrap.percentile_ci(brier(y[idx], s[idx]))
    e_lo, e_hi = bootstrap.percentile_ci(ece(y[idx], s[idx]))
    floor = ece_if_calibrated(s, seed=seed)
    value = float(ece(y, s))
    return {"run": label, "n": len(y), "brier": float(brier(y, s)), "brier_low": b_lo, "brier_high": b_hi,
            "ece": value, "ece_low": e_lo, "ece_high": e_hi, "ece_if_calibrated": floor,
            "ece_debiased": value - floor, "note": "", "of": KINDS[kind]}


def _no_calibration(label: str, n: int, note: str) -> dict:
    return {"run": label, "n": n, "brier": None, "brier_low": None, "brier_high": None, "ece": None, "ece_low": None,
            "ece_high": None, "ece_if_calibrated": None, "ece_debiased": None, "note": note, "of": None}


def seeded_calibration_row(cell: dict, n_resamples: int | None = None, seed: int | None = None) -> dict:
    """:func:`calibration_row` of a row over training seeds (:func:`atlaslib.analysis.seed_cells`), by the
    leaderboard's rule for it (:func:`atlaslib.metrics.seeds.seed_mean`): Brier and ECE are the means over the
    seeds' models of each model's own, with the two-level interval (seeds drawn with replacement, the items by the
    same stratified resamples for every seed); the ECE if calibrated is the mean of the models' noise floors and
    the debiased ECE the difference of the two means. A row where some seed's records carry no scores has none
    (the note names the seeds), never a mean over fewer seeds. ``brier_seeds`` and ``ece_seeds`` give each seed's
    figure with its own interval."""
    from ..metrics import bootstrap
    from ..metrics.seeds import per_seed_text, seed_mean

    by_seed = seed_cells(cell)
    label = seeds_label(cell)
    n = len(cell.get("predictions") or [])
    got = [(sd, scored(c)) for sd, c in by_seed]
    lacking = [str(sd) for sd, g in got if g is None]
    if len(lacking) == len(got):
        return _no_calibration(label, n, NO_SCORES)
    if lacking:
        return _no_calibration(label, n, f"n/a (the records of seed{'s' if len(lacking) > 1 else ''} "
                                         f"{', '.join(lacking)} of {len(got)} carry no scores)")
    kinds = {g[2] for _, g in got}
    if len(kinds) > 1:
        return _no_calibration(label, n, "n/a (the seeds' models score different things: "
                                         f"{', '.join(sorted(KINDS[k] for k in kinds))})")
    kind = kinds.pop()
    seed = seed if seed is not None else int((cell.get("seeds") or {}).get("bootstrap", bootstrap.DEFAULT_SEED))
    y0 = got[0][1][0]
    strata = y0.astype(int) if kind == "positive" else np.zeros(len(y0), dtype=int)
    idx = bootstrap.stratified_indices(strata, n_resamples or n_resamples_of(cell), seed)
    names = [sd for sd, _ in got]
    b_pts, e_pts, b_res, e_res, floors = [], [], [], [], []
    for _, (y, s, _k) in got:
        b_pts.append(float(brier(y, s)))
        e_pts.append(float(ece(y, s)))
        b_res.append(np.asarray(brier(y[idx], s[idx]), dtype=float))
        e_res.append(np.asarray(ece(y[idx], s[idx]), dtype=float))
        floors.append(ece_if_calibrated(s, seed=seed))
    b = seed_mean(names, b_pts, np.stack(b_res, axis=1))
    e = seed_mean(names, e_pts, np.stack(e_res, axis=1))
    floor = float(np.mean(floors))
    return {"run": label, "n": len(y0), "brier": b["value"], "brier_low": b["ci_low"], "brier_high": b["ci_high"],
            "ece": e["value"], "ece_low": e["ci_low"], "ece_high": e["ci_high"], "ece_if_calibrated": floor,
            "ece_debiased": e["value"] - floor, "note": "", "of": KINDS[kind],
            "brier_seeds": per_seed_text(b["per_seed"]), "ece_seeds": per_seed_text(e["per_seed"])}


def calibration_table(cells) -> pd.DataFrame:
    """Library entry point: one row per ok run: ``n``, Brier and ECE with intervals, the ECE a calibrated run
    with the same scores shows (its noise floor) and the debiased ECE, or ``note = "n/a (labels only)"``. A row
    over training seeds is the mean over its seeds' models (:func:`seeded_calibration_row`); a table with one has
    the columns ``brier_seeds`` and ``ece_seeds`` (each seed's figure) too."""
    cols = ["run", "of", "n", "brier", "brier_low", "brier_high", "ece", "ece_low", "ece_high", "ece_if_calibrated",
            "ece_debiased", "note"]
    rows = [calibration_row(c) for c in ok_cells(cells)]
    if any("brier_seeds" in r for r in rows):
        cols += ["brier_seeds", "ece_seeds"]
    return pd.DataFrame(rows, columns=cols)


def seeded_reliability(cell: dict, n_bins: int = N_BINS) -> pd.DataFrame | None:
    """The reliability diagram's points of a row over training seeds, or None when a seed's records carry no
    scores: per equal-mass bin (every seed's model has the same bin sizes), the mean over the seeds' models of
    the bin's mean score and observed rate; ``score_min``/``score_max`` span every model's bin."""
    tables = []
    for _, c in seed_cells(cell):
        ys = scores_of(c)
        if ys is None:
            return None
        tables.append(reliability(*ys, n_bins=n_bins))
    both = pd.concat(tables)
    return both.groupby("bin", sort=True).agg(n=("n", "first"), score_min=("score_min", "min"),
                                               score_max=("score_max", "max"), mean_score=("mean_score", "mean"),
                                               observed_rate=("observed_rate", "mean")).reset_index()


def draw_reliability(tables: dict, title: str = "", xlabel: str = "mean score in the bin",
                     ylabel: str = "observed rate of the positive class"):
    """The reliability diagram of :func:`reliability` tables (name -> table): observed rate against mean score per
    bin, one series per name (marker size grows with the bin's items), and the diagonal of perfect calibration.
    Names are drawn as text (user names: never mathtext). The atlas's pages and the course draw with it."""
    from .. import plots

    fig, ax = plots.subplots(figsize=(4.8, 4.4))
    ax.plot([0, 1], [0, 1], color="0.6", ls="--", lw=1, label="perfectly calibrated")
    for k, (name, t) in enumerate(tables.items()):
        ax.plot(t["mean_score"], t["observed_rate"], "-", color=f"C{k}", lw=1)
        ax.scatter(t["mean_score"], t["observed_rate"], s=12 + 3 * np.sqrt(np.asarray(t["n"], dtype=float)),
                   color=f"C{k}", label=name, alpha=0.8)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title, fontsize=10)
    for text in ax.legend(frameon=False, fontsize=8, loc="upper left").get_texts():
        text.set_parse_math(False)
    fig.tight_layout()
    return fig


def plot_reliability(cells, title: str = ""):
    """Reliability diagram of the runs with scores (one series per run; equal-mass bins, :func:`draw_reliability`),
    or None when no run has scores."""
    import matplotlib
    matplotlib.use("Agg")

    tables = {}
    for c in ok_cells(cells):
        if seed_cells(c):
            t = seeded_reliability(c)
            if t is not None:
                tables[seeds_label(c)] = t
            continue
        ys = scores_of(c)
        if ys is not None:
            tables[one_model_label(c)] = reliability(*ys)
    if not tables:
        return None
    return draw_reliability(tables, title, xlabel="mean score in bin (10 equal-mass bins)")
