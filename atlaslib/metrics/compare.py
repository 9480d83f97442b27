"""Paired comparisons of models on the same test items: differences with paired bootstrap intervals,
exact McNemar tests, Holm-adjusted p-values, tie groups, rank intervals and the minimum detectable
difference.

Every model of one (card, split version) is resampled with the *same* resamples: the card's own
resampling unit and seed (items stratified by gold for NegEx, case reports for MACCROBAT, documents
for TempEval, cases for the NLI challenge), so the difference of a metric on resample ``b`` is the
difference of two numbers computed on the same drawn items, and its percentile interval is a paired
interval. Each resample is a vector of unit multiplicities ``M[b, u]`` (how often unit ``u`` is drawn);
a model's per-unit counts ``C[u]`` (confusion counts, span counts, scorer counts) give the counts of
all resamples at once as ``M @ C`` (exact integers), and the metric is a vectorised formula of those
counts. This equals computing the metric on each resample's items one by one, bit for bit (tested).

Definitions, for models A and B and a metric where higher is better (signs flipped otherwise):

- difference ``d = m(A) − m(B)``; 95 % interval = 2.5th and 97.5th percentiles of ``d_b``;
- paired-bootstrap p-value ``p = min(1, 2·min((1 + #{d_b ≤ 0}) / (B + 1), (1 + #{d_b ≥ 0}) / (B + 1)))``
  (two-sided; 1 when the models agree on every resample);
- exact McNemar on an item-level binary decision: ``b`` = items where A is right and B wrong, ``c`` the
  reverse; ``p = P(|X − (b+c)/2| ≥ |b − (b+c)/2|)`` for ``X ~ Binomial(b + c, ½)`` (scipy's
  ``binomtest(b, b + c, 0.5)``); 1 when ``b + c = 0``;
- Holm: the ``m`` p-values of a family sorted ascending, ``p̃_(i) = max_{j ≤ i} min(1, (m − j + 1)·p_(j))``;
- tie group: the best model by point estimate, and every model whose Holm-adjusted p-value against it
  is ≥ 0.05 (the table says which test decided);
- rank of a model on resample ``b``: 1 + the number of models strictly better there; rank interval =
  2.5th–97.5th percentile (inverted CDF) of its ranks; ``P(rank 1)`` = share of resamples where it ranks 1;
- minimum detectable difference (MDD) at 80 % power and 5 % two-sided:
  ``(z₀.₉₇₅ + z₀.₈)·SD(d_b)`` with the median paired-bootstrap SD over the pairs (one model only:
  ``√2·SD`` of its own resamples); for paired binary decisions also McNemar's, the ``δ`` solving
  ``n·δ² = (z₀.₉₇₅·√ψ + z₀.₈·√(ψ − δ²))²`` at the observed discordance ``ψ = (b + c)/n``
  (Connor 1987).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations
from typing import Sequence

import numpy as np
import pandas as pd
from scipy.optimize import brentq
from scipy.stats import binomtest, norm

from . import bootstrap, engine

ALPHA = 0.05
POWER = 0.80


# -- statistics ---------------------------------------------------------------------------------------------

def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value on the discordant counts (``binomtest(b, b + c, 0.5)``)."""
    b, c = int(b), int(c)
    if b < 0 or c < 0:
        raise ValueError(f"mcnemar_exact: discordant counts must be non-negative, got b={b}, c={c}")
    if b + c == 0:
        return 1.0
    return float(binomtest(b, b + c, 0.5).pvalue)


def holm(pvalues: Sequence[float]) -> np.ndarray:
    """Holm step-down adjusted p-values (see module docstring); NaNs stay NaN and are not counted."""
    p = np.asarray(pvalues, dtype=float)
    out = np.full_like(p, np.nan)
    ok = np.flatnonzero(np.isfinite(p))
    m = len(ok)
    if m == 0:
        return out
    order = ok[np.argsort(p[ok], kind="stable")]
    adj = np.minimum(1.0, (m - np.arange(m)) * p[order])
    out[order] = np.maximum.accumulate(adj)
    return out


def bootstrap_pvalue(diffs: np.ndarray) -> float:
    """Two-sided paired-bootstrap p-value of a difference (see module docstring); NaN resamples left out."""
    d = np.asarray(diffs, dtype=float)
    d = d[np.isfinite(d)]
    if d.size == 0:
        return float("nan")
    le, ge = (1 + np.sum(d <= 0)) / (d.size + 1), (1 + np.sum(d >= 0)) / (d.size + 1)
    return float(min(1.0, 2 * min(le, ge)))


def mcnemar_mdd(n: int, discordance: float, alpha: float = ALPHA, power: float = POWER) -> float:
    """Smallest accuracy difference δ McNemar's test detects with ``power`` at two-sided ``alpha`` on ``n``
    paired items with discordance ``ψ`` (share of items the two models decide differently): the root of
    ``n·δ² = (z_{1−α/2}·√ψ + z_{power}·√(ψ − δ²))²`` in ``(0, ψ]``; NaN when even δ = ψ is not
    enough."""
    za, zb = norm.ppf(1 - alpha / 2), norm.ppf(power)
    psi = float(discordance)
    if n <= 0 or psi <= 0:
        return float("nan")

    def f(delta):
        return n * delta ** 2 - (za * np.sqrt(psi) + zb * np.sqrt(max(psi - delta ** 2, 0.0))) ** 2

    hi = min(psi, 1.0)
    if f(hi) < 0:
        return float("nan")
    return float(brentq(f, 1e-12, hi))




# -- what one card's paired resampling needs ------------------------------------------------------------------

Paired = engine.Paired


def run_label(cell: dict) -> str:
    return f"{cell['model']} ({cell['protocol']})"


@dataclass
class SeededPaired(engine.Paired):
    """:class:`~atlaslib.metrics.engine.Paired` with rows over several training seeds: ``seeded[label][base] =
    (points (S,), V (B, S))``, each seed's point and its values on the shared resamples ``mult``; ``seed_counts[label]``
    each seed's per-unit counts. Such a row's point is the mean over its seeds and its resamples also draw its
    seeds (:mod:`atlaslib.metrics.seeds`): :meth:`over_seeds` is that draw, the same for every resampling of the
    row (the declared one here, a cluster resampling beside it in :func:`atlaslib.metrics.framing.cluster_paired`)."""
    seeded: dict = field(default_factory=dict)
    seed_counts: dict = field(default_factory=dict)

    def point(self, label: str, base: str) -> float:
        if base in self.seeded.get(label, {}):
            return float(np.mean(self.seeded[label][base][0]))
        return super().point(label, base)

    def over_seeds(self, label: str, values: np.ndarray) -> np.ndarray:
        """``(B,)``: per resample the mean of ``values`` (``(B, S)``, each seed's value on that resample) over the
        seeds drawn with replacement for ``label`` (its own seed stream, so two rows draw independently)."""
        from .seeds import seed_multiplicities

        v = np.asarray(values, dtype=float)
        w = seed_multiplicities(v.shape[1], v.shape[0], bootstrap.DEFAULT_SEED + 1 + self.labels.index(label))
        return (w * v).sum(1) / w.sum(1)

    def resampled(self, label: str, base: str) -> np.ndarray:
        if base in self.seeded.get(label, {}):
            return self.over_seeds(label, self.seeded[label][base][1])
        return super().resampled(label, base)


def with_seed_runs(p: engine.Paired, seed_runs: dict, seed, n_resamples) -> engine.Paired:
    """``p`` with seeded rows: ``seed_runs[label]`` is a row's ``[(training seed, per-unit counts), ...]`` (several
    trained models; :func:`atlaslib.cards.seed_counted` reads them from a cell). Each seed's counts are paired
    with the first row under the same resamples; the row's McNemar decision per unit is right when more than
    half of its seeds' models are right. ``p`` itself when no row has seeds."""
    from dataclasses import fields

    seeded, seed_counts = {}, {}
    labels = p.labels
    for lab, runs in seed_runs.items():
        if not runs:
            continue
        ucs = {f"seed {s}": uc for s, uc in runs}
        sp = engine.paired(p.scoring, p.card, p.version, {labels[0]: p.counts[labels[0]], **ucs}, seed, n_resamples)
        if not np.array_equal(sp.mult, p.mult):
            raise AssertionError(f"compare: the seeds of {lab} were resampled differently")
        names = list(ucs)
        seeded[lab] = {}
        seed_counts[lab] = list(ucs.values())
        for base in p.bases:
            pts = np.array([sp.point(n, base) for n in names])
            if np.isfinite(pts).all():
                seeded[lab][base] = (pts, np.stack([sp.resampled(n, base) for n in names], axis=1))
        for dec, by_label in sp.decisions.items():
            p.decisions.setdefault(dec, {})[lab] = np.mean([by_label[n] for n in names], axis=0) > 0.5
    if not seeded:
        return p
    return SeededPaired(**{f.name: getattr(p, f.name) for f in fields(p)}, seeded=seeded, seed_counts=seed_counts)


# -- the tables -----------------------------------------------------------------------------------------------

@dataclass
class Comparison:
    pairs: pd.DataFrame      # one row per (metric, model A, model B)
    ranks: pd.DataFrame      # one row per model: tie group, rank interval, P(rank 1) on the primary metric
    mdd: dict                # minimum detectable differences of the primary metric
    data: Paired


def _sign(p: Paired, base: str) -> float:
    return 1.0 if p.higher_is_better.get(base, True) else -1.0


def compare_paired(p: Paired, alpha: float = ALPHA) -> Comparison:
    rows = []
    for base in p.bases:
        dec = p.decision_for.get(base)
        for a, b in combinations(p.labels, 2):
            va, vb = p.point(a, base), p.point(b, base)
            if not (np.isfinite(va) and np.isfinite(vb)):
                continue
            d = p.resampled(a, base) - p.resampled(b, base)
            lo, hi = bootstrap.percentile_ci(d)
            row = {"metric": base, "model_a": a, "model_b": b, "value_a": va, "value_b": vb,
                   "difference": va - vb, "ci_low": lo, "ci_high": hi, "sd": float(np.nanstd(d)),
                   "p_bootstrap": bootstrap_pvalue(d), "decision": None, "b": None, "c": None,
                   "p_mcnemar": None}
            seeded = getattr(p, "seeded", {})
            if base == p.primary and base in seeded.get(a, {}) and base in seeded.get(b, {}):
                from .seeds import almost_stochastic_order

                sg = _sign(p, base)     # deepsig: higher is better; A is the row with the better mean
                hi_, lo_ = (a, b) if sg * (va - vb) >= 0 else (b, a)
                aso = almost_stochastic_order(sg * seeded[hi_][base][0], sg * seeded[lo_][base][0])
                row.update(aso_better=hi_, aso_eps_min=aso["eps_min"], aso_threshold=aso["threshold"])
            if dec:
                ra, rb = p.decisions[dec][a], p.decisions[dec][b]
                row.update(decision=dec, b=int(np.sum(ra & ~rb)), c=int(np.sum(~ra & rb)),
                           n_items=int(len(ra)))
                row["p_mcnemar"] = mcnemar_exact(row["b"], row["c"])
            rows.append(row)
    pairs = pd.DataFrame(rows)
    if not pairs.empty:
        # the test that decides: exact McNemar when the metric is the share of a binary decision
        # (accuracy, false-entailment rate), else the paired bootstrap
        exact = pairs["metric"].isin([m.name for m in p.scoring.metrics if m.exact_test])
        pairs["test"] = np.where(exact, "exact McNemar", "paired bootstrap")
        pairs["p"] = np.where(exact, pairs["p_mcnemar"].astype(float), pairs["p_bootstrap"])
        pairs["p_holm"] = np.nan
        for base, idx in pairs.groupby("metric").groups.items():
            pairs.loc[idx, "p_holm"] = holm(pairs.loc[idx, "p"].to_numpy(float))
        pairs["significant"] = pairs["p_holm"] < alpha
        pairs.insert(0, "card", p.card)
        pairs.insert(1, "version", p.version)
    return Comparison(pairs, _ranks(p, pairs, alpha), _mdd(p, pairs), p)


def _ranks(p: Paired, pairs: pd.DataFrame, alpha: float) -> pd.DataFrame:
    base, s = p.primary, _sign(p, p.primary)
    labels = [lab for lab in p.labels if np.isfinite(p.point(lab, base))]
    if not labels:
        return pd.DataFrame(columns=["model", "value", "rank", "rank_low", "rank_high", "p_rank1", "tie_group",
                                     "decided_by"])
    point = np.array([s * p.point(lab, base) for lab in labels])
    res = np.stack([s * p.resampled(lab, base) for lab in labels])          # (m, B)
    res = np.where(np.isfinite(res), res, -np.inf)
    better = (res[None, :, :] > res[:, None, :]).sum(1)                      # (m, B): models strictly better
    ranks = 1 + better
    best = labels[int(np.argmax(point))]
    out = []
    for k, lab in enumerate(labels):
        r = ranks[k]
        tie, by, padj = True, "best", None
        if lab != best and not pairs.empty:
            m = pairs[(pairs["metric"] == base) & (((pairs["model_a"] == lab) & (pairs["model_b"] == best)) |
                                                   ((pairs["model_a"] == best) & (pairs["model_b"] == lab)))]
            if not m.empty:
                padj = float(m["p_holm"].iloc[0])
                tie, by = bool(padj >= alpha), str(m["test"].iloc[0])
        out.append({"model": lab, "value": s * point[k], "rank": int(1 + (point > point[k]).sum()),
                    "rank_low": int(np.quantile(r, 0.025, method="inverted_cdf")),
                    "rank_high": int(np.quantile(r, 0.975, method="inverted_cdf")),
                    "p_rank1": float(np.mean(r == 1)), "tie_group": "top" if tie else "—",
                    "p_holm_vs_best": padj, "decided_by": by})
    return pd.DataFrame(out).sort_values(["rank", "model"]).reset_index(drop=True)


def _mdd(p: Paired, pairs: pd.DataFrame) -> dict:
    z = norm.ppf(1 - ALPHA / 2) + norm.ppf(POWER)
    base = p.primary
    out = {"metric": base, "n_units": int(p.n_units), "unit": p.unit, "alpha": ALPHA, "power": POWER}
    prim = pairs[pairs["metric"] == base] if not pairs.empty else pairs
    if not prim.empty:
        out["sd_difference"] = float(prim["sd"].median())
        out["mdd_bootstrap"] = float(z * out["sd_difference"])
        out["basis"] = f"median paired-bootstrap SD of the difference over {len(prim)} pair(s)"
    else:
        finite = [lab for lab in p.labels if np.isfinite(p.point(lab, base))]
        if finite:
            sd = float(np.nanstd(p.resampled(finite[0], base)))
            out.update(sd_difference=float(np.sqrt(2) * sd), mdd_bootstrap=float(z * np.sqrt(2) * sd),
                       basis="one model: √2 × the SD of its own resamples (two independent models assumed)")
    dec = p.decision_for.get(base) or (next(iter(p.decisions)) if p.decisions else None)
    if dec and not pairs.empty:
        d = pairs[(pairs["metric"] == base) & pairs["b"].notna()]
        if not d.empty:
            n = int(d["n_items"].iloc[0])
            psi = float(((d["b"] + d["c"]) / n).median())
            out.update(decision=dec, n_items=n, discordance=psi, mdd_mcnemar=mcnemar_mdd(n, psi))
    return out
