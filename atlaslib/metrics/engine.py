"""One scoring engine: every number a page shows, from per-unit counts and the card's declared scoring.

A card declares *how its predictions become numbers* as data, a :class:`Scoring` on its ``CARD``:

- the **count columns** its ``counts(cell)`` function gives per resampling unit (an integer array of shape
  ``(units, k)``: NegEx items ``tp, fp, tn, fn``; MACCROBAT sentences ``<type>:tp, <type>:fp, <type>:fn``;
  the NLI challenge's cases ``correct, case, false_entailment, non_entailing``; TempEval's documents, the
  official scorer's four counts per metric);
- the **metrics** as formulas over *summed* counts (:class:`Metric`; each formula takes a :class:`Cols`
  view of totals of any leading shape, so one call scores the test set, a slice or 1,000 resamples);
- the **declared resampling** (:class:`Resampling`: items stratified by gold, rows, whole clusters such as
  case reports or documents; its seed) and any **extra resampling** beside it, named for what it assumes
  (NegEx sentences, NLI templates);
- the **decisions** McNemar reads (per-unit booleans from the counts) and which metric each one tests;
- the **slices** (:class:`SliceRule`): which metrics a slice shows and how many units it needs.

From a :class:`UnitCounts` and its card's :class:`Scoring`, this module computes point values
(``formula(C.sum(0))``), resampled values (``formula(W @ C)``: ``W[b, u]`` = how often unit ``u`` is drawn in
resample ``b``, exact integers), percentile intervals, exact Clopper–Pearson intervals for proportions, the
paired data of several runs on the same units (:func:`paired`, read by :mod:`atlaslib.metrics.compare`) and
the metric on any subset of units (:meth:`UnitCounts.take`, read by :mod:`atlaslib.analysis.slices`). A rank metric
(ROC-AUC) is computed from the units' scores ranked once: per resample and distinct score, the drawn positives
and negatives are counted from the multiplicities, U = Σ pos·(neg below + neg tied / 2) (exact integers).

Nothing here knows a card: the card's folder holds its :class:`Scoring` and its ``counts`` function.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from . import bootstrap
from .bootstrap import multiplicities
from .intervals import clopper_pearson, clopper_pearson_upper

RULES = ("stratified", "rows", "clusters")


def check_labels(values, valid, what: str) -> np.ndarray:
    """``values`` as an array, after checking each is one of ``valid`` (in the way of scikit-learn's
    ``_check_targets``): a value outside the card's label set is one error naming it and the valid ones.

    >>> check_labels(["negated", "affirmed"], ("affirmed", "negated"), "gold").tolist()
    ['negated', 'affirmed']
    >>> check_labels(["negated", 2], ("affirmed", "negated"), "pred")
    Traceback (most recent call last):
    ...
    ValueError: pred: 2 (item 2) is not a label of this card; valid labels: 'affirmed', 'negated'
    """
    values = list(values)
    ok = set(valid)
    for k, v in enumerate(values):
        if not isinstance(v, (str, int, float, bool, np.generic)) or v not in ok:
            raise ValueError(f"{what}: {v!r} (item {k + 1}) is not a label of this card; valid labels: "
                             + ", ".join(map(repr, valid)))
    return np.asarray(values, dtype=object)


class Cols:
    """Named columns of summed counts ``(..., k)``: ``t["tp"]`` is ``totals[..., k_tp]``; ``t.array`` the
    whole array, ``t.prefix("x:")`` the columns whose names start with ``x:`` (stacked on a last axis)."""

    def __init__(self, totals, columns: Sequence[str]):
        self.array = np.asarray(totals)
        self.columns = tuple(columns)
        self._index = {c: k for k, c in enumerate(self.columns)}

    def __getitem__(self, name: str) -> np.ndarray:
        return self.array[..., self._index[name]]

    def select(self, names: Sequence[str]) -> np.ndarray:
        return self.array[..., [self._index[n] for n in names]]


def ratio(num, den, empty=np.nan):
    """``num / den`` where ``den > 0``, else ``empty`` (the atlas's zero-division rule: undefined is NaN).

    >>> float(ratio(1, 4)), bool(np.isnan(ratio(0, 0)))
    (0.25, True)
    """
    num, den = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(den > 0, num / np.where(den > 0, den, 1), empty)
    return out if out.ndim else float(out)


def rank_auc(positive: np.ndarray, scores: np.ndarray, w: np.ndarray | None = None):
    """ROC-AUC (Mann-Whitney U / (n₁·n₀), ties counted ½) of units with ``scores``, weighted by the
    multiplicities ``w`` (``(B, n)``; None: each unit once). Scores are ranked once; NaN with a class absent.

    >>> float(rank_auc(np.array([1, 0, 1, 0]), np.array([0.9, 0.1, 0.4, 0.4])))
    0.875
    """
    t = np.asarray(positive).astype(bool)
    _, code = np.unique(np.asarray(scores, dtype=float), return_inverse=True)
    code = code.reshape(-1)
    single = w is None
    w = np.ones((1, len(t)), dtype=np.int64) if single else np.asarray(w)
    perm = np.argsort(code, kind="stable")                       # units by score, ties together
    starts = np.flatnonzero(np.r_[True, np.diff(code[perm]) != 0]) if code.size else np.zeros(0, int)
    wp = w[:, perm] * t[perm]                                    # drawn positives per unit (exact integers)
    pc = np.add.reduceat(wp, starts, axis=1)                     # (B, distinct scores)
    nc = np.add.reduceat(w[:, perm], starts, axis=1) - pc
    below = np.cumsum(nc, axis=1) - nc
    u2 = (pc * (2 * below + nc)).sum(1)
    den = (pc.sum(1) * nc.sum(1)).astype(float)
    out = np.atleast_1d(ratio(u2 / 2, den))
    return float(out[0]) if single else out


@dataclass(frozen=True)
class Metric:
    """One metric of a card: ``formula(Cols of totals) -> values`` (vectorised over leading axes), or
    ``rank=True`` for ROC-AUC from the units' scores (the column ``positive`` marks positive units).

    ``decision``: the per-unit decision (a name in :attr:`Scoring.decisions`) McNemar reads for this metric;
    ``exact_test``: McNemar, not the paired bootstrap, decides a pair on it (the metric *is* the share of
    that decision); ``proportion``: ``Cols -> (k, n)`` when the metric is a proportion (its exact interval);
    ``upper_bound``: report the exact one-sided 95 % upper bound beside it; ``undefined_if``: ``Cols ->
    reason or None`` for a case where a value exists but must not be read (e.g. macro F1 on one gold class)."""
    name: str
    formula: Callable | None = None
    higher_is_better: bool = True
    rank: bool = False
    decision: str | None = None
    exact_test: bool = False
    proportion: Callable | None = None
    upper_bound: bool = False
    undefined_if: Callable | None = None
    label: str = ""
    undefined_reason: str = "undefined: empty denominator"   # what a cell says when the value is NaN

    def value(self, totals: Cols):
        return self.formula(totals)


@dataclass(frozen=True)
class Resampling:
    """How intervals resample: ``rule`` ``stratified`` (units drawn with replacement within each value of the
    grouping ``by``, counts per value kept), ``rows`` (units drawn with replacement) or ``clusters`` (whole
    groups of units, named by ``by``, drawn with replacement); ``unit``: what one draw is, for the page;
    ``seed``; ``label`` / ``assumes``: what an extra resampling is called and what it assumes."""
    rule: str
    unit: str
    seed: int = bootstrap.DEFAULT_SEED
    by: str | None = None
    n_resamples: int = bootstrap.DEFAULT_RESAMPLES
    label: str = ""
    assumes: str = ""
    metrics: tuple = ()          # an extra resampling: the metrics it is shown for (empty: all)
    among: Callable | None = None  # an extra resampling of a sub-population: Cols of per-unit counts -> mask

    def __post_init__(self):
        if self.rule not in RULES:
            raise ValueError(f"Resampling.rule: {self.rule!r} is not one of {', '.join(RULES)}")
        if self.rule in ("stratified", "clusters") and not self.by:
            raise ValueError(f"Resampling.rule {self.rule!r} needs by= (the grouping it draws within or by)")


@dataclass(frozen=True)
class SliceRule:
    """What a slice of a card shows: ``metrics`` (name shown -> :class:`Metric`), ``support`` (``Cols`` of a
    group's totals -> the number of units that counts, e.g. items, gold mentions), ``min_units`` (fewer: the
    point value only, ``unit`` names them in the note), ``exact``: the interval is exact Clopper–Pearson on
    the metric's proportion (no resampling)."""
    metrics: dict
    support: Callable
    min_units: int = 20
    unit: str = "items"
    exact: bool = False

    @property
    def primary(self) -> str:
        """The metric a slice table is read by (the first shown)."""
        return next(iter(self.metrics))


@dataclass(frozen=True)
class Scoring:
    """A card's scoring, as data (see the module docstring)."""
    columns: tuple
    metrics: tuple                                # Metric, in the order tables list them
    primary: str
    resampling: Resampling
    decisions: dict = field(default_factory=dict)  # name -> (Cols of per-unit counts -> bool per unit, mask or None)
    extra: tuple = ()                             # Resampling beside the declared one
    slices: SliceRule | None = None
    interval: str = "bootstrap"                   # the card's declared intervals: "bootstrap" or "exact"
    units_are_clusters: bool = False              # a unit holds many items (a document): few units, wide draws
    # decisions on the metrics' values against a run's thresholds (a safety gate): (values by metric name, the
    # run's parameters) -> {gate name: True (pass) / False (fail)}, reported as metrics 1.0 / 0.0 (see evaluate)
    gates: Callable | None = None

    def metric(self, name: str) -> Metric:
        for m in self.metrics:
            if m.name == name:
                return m
        raise KeyError(f"no metric {name!r}; declared: {', '.join(m.name for m in self.metrics)}")


@dataclass
class UnitCounts:
    """Per-unit integer counts of one run: ``ids`` (unit ids), ``columns``, ``counts`` ``(units, k)``, the
    groupings the resamplings draw by (``groups``: name -> one value per unit), the units' ``scores`` (rank
    metrics; None without) and the metrics this run does not report (``undefined``: name -> reason)."""
    ids: list
    columns: tuple
    counts: np.ndarray
    groups: dict = field(default_factory=dict)
    scores: np.ndarray | None = None
    undefined: dict = field(default_factory=dict)

    def __post_init__(self):
        self.counts = np.asarray(self.counts, dtype=np.int64).reshape(len(self.ids), len(self.columns))
        if len(set(map(str, self.ids))) != len(self.ids):
            raise ValueError("UnitCounts: unit ids repeat")
        for name, values in self.groups.items():
            if len(values) != len(self.ids):
                raise ValueError(f"UnitCounts: grouping {name!r} has {len(values)} values for {len(self.ids)} units")
        if (self.counts < 0).any():
            raise ValueError("UnitCounts: counts must be non-negative")

    @property
    def n(self) -> int:
        return len(self.ids)

    def cols(self, rows=None) -> Cols:
        return Cols(self.counts if rows is None else self.counts[rows], self.columns)

    def total(self) -> Cols:
        return Cols(self.counts.sum(0), self.columns)

    def take(self, mask) -> "UnitCounts":
        """The units where ``mask`` holds (a subset: a slice, a sub-population)."""
        m = np.asarray(mask, dtype=bool)
        keep = np.flatnonzero(m)
        return UnitCounts([self.ids[i] for i in keep], self.columns, self.counts[m],
                          {k: [v[i] for i in keep] for k, v in self.groups.items()},
                          None if self.scores is None else self.scores[m], dict(self.undefined))

    # -- in a result cell --
    def to_cell(self) -> dict:
        return {"ids": list(self.ids), "columns": list(self.columns), "counts": self.counts.tolist(),
                "groups": {k: list(v) for k, v in self.groups.items()},
                "scores": None if self.scores is None else [float(x) for x in self.scores],
                "undefined": dict(self.undefined)}

    @classmethod
    def from_cell(cls, d: dict) -> "UnitCounts":
        try:
            return cls(list(d["ids"]), tuple(d["columns"]), np.asarray(d["counts"], dtype=np.int64).reshape(
                len(d["ids"]), len(d["columns"])), dict(d.get("groups") or {}),
                None if d.get("scores") is None else np.asarray(d["scores"], dtype=float), dict(d.get("undefined") or {}))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"unit_counts: not a valid per-unit count table ({exc})") from None


# -- resamples -------------------------------------------------------------------------------------------



def weights(uc: UnitCounts, rs: Resampling, n_resamples: int | None = None, seed: int | None = None) -> np.ndarray:
    """``W[b, u]``: how often unit ``u`` is drawn in resample ``b`` under ``rs`` (the same draws as
    :func:`atlaslib.metrics.bootstrap.stratified_indices` / ``cluster_multiplicities`` / a row draw with
    ``default_rng(seed).integers``, so intervals equal an index-by-index computation)."""
    b = rs.n_resamples if n_resamples is None else int(n_resamples)
    seed = rs.seed if seed is None else int(seed)
    n = uc.n
    if rs.rule == "stratified":
        return multiplicities(bootstrap.stratified_indices(np.asarray(uc.groups[rs.by]), b, seed), n)
    if rs.rule == "rows":
        rng = np.random.default_rng(seed)
        return multiplicities(rng.integers(0, n, size=(b, n)), n)
    mult, inverse = bootstrap.cluster_multiplicities(uc.groups[rs.by], b, seed)
    return mult[:, inverse]


def totals(uc: UnitCounts, w: np.ndarray) -> Cols:
    """Summed counts of every resample, ``W @ C`` (float64 BLAS on integers below 2**53: exact)."""
    return Cols(np.rint(np.asarray(w, dtype=float) @ uc.counts.astype(float)).astype(np.int64), uc.columns)




# -- values ----------------------------------------------------------------------------------------------

def point(scoring: Scoring, uc: UnitCounts, name: str) -> float:
    """The metric on all units (NaN when the run does not report it or it is undefined)."""
    m = scoring.metric(name)
    if name in uc.undefined:
        return float("nan")
    if m.rank:
        if uc.scores is None:
            return float("nan")
        return rank_auc(uc.cols()["positive"], uc.scores)
    return float(m.formula(uc.total()))


def resampled(scoring: Scoring, uc: UnitCounts, name: str, w: np.ndarray, tot: Cols | None = None) -> np.ndarray:
    """The metric on every resample of ``w`` (``tot``: the resamples' totals when already summed)."""
    m = scoring.metric(name)
    if name in uc.undefined or (m.rank and uc.scores is None):
        return np.full(w.shape[0], np.nan)
    if m.rank:
        return rank_auc(uc.cols()["positive"], uc.scores, w)
    return np.asarray(m.formula(tot if tot is not None else totals(uc, w)), dtype=float)


def exact_interval(metric: Metric, tot: Cols):
    """Clopper–Pearson 95 % interval of a proportion metric from its ``(k, n)``; None otherwise or n = 0."""
    if metric.proportion is None:
        return None
    k, n = (int(x) for x in metric.proportion(tot))
    return None if n == 0 else clopper_pearson(k, n)


def proportion_counts(scoring: Scoring, uc: UnitCounts, name: str):
    """``(k, n)`` of a proportion metric on all units, else None."""
    m = scoring.metric(name)
    if m.proportion is None:
        return None
    return tuple(int(x) for x in m.proportion(uc.total()))


def upper_bound(scoring: Scoring, uc: UnitCounts, name: str):
    """``(k, n, exact one-sided 95 % upper bound)`` of a proportion metric, None when n = 0."""
    kn = proportion_counts(scoring, uc, name)
    if kn is None or kn[1] == 0:
        return None
    return kn[0], kn[1], clopper_pearson_upper(*kn)


def decision(scoring: Scoring, uc: UnitCounts, name: str) -> np.ndarray:
    """The per-unit boolean decision ``name`` (restricted to the units its mask keeps)."""
    fn = scoring.decisions[name]
    return np.asarray(fn(uc.cols()), dtype=bool)


def extra_interval(scoring: Scoring, uc: UnitCounts, rs: Resampling, name: str, seed: int | None = None) -> dict:
    """An extra resampling's interval of ``name``: ``{value, ci_low, ci_high, n_clusters}`` (the units
    ``rs.among`` keeps, when it names a sub-population)."""
    sub = uc.take(rs.among(uc.cols())) if rs.among is not None else uc
    w = weights(sub, rs, seed=seed)
    v = point(scoring, sub, name)
    lo, hi = bootstrap.percentile_ci(resampled(scoring, sub, name, w))
    out = {"value": None if not np.isfinite(v) else v, "ci_low": lo, "ci_high": hi}
    if rs.rule == "clusters":
        out["n_clusters"] = int(len(set(sub.groups[rs.by])))
    return out


def interval(scoring: Scoring, uc: UnitCounts, name: str, seed: int | None = None,
             n_resamples: int | None = None) -> dict:
    """``{value, ci_low, ci_high}`` of one metric under the declared resampling."""
    v = point(scoring, uc, name)
    if not np.isfinite(v):
        return {"value": None, "ci_low": None, "ci_high": None}
    w = weights(uc, scoring.resampling, n_resamples, seed)
    lo, hi = bootstrap.percentile_ci(resampled(scoring, uc, name, w))
    return {"value": v, "ci_low": lo, "ci_high": hi}


def evaluate(scoring: Scoring, uc: UnitCounts, protocol: str, *, seed: int | None = None,
             n_resamples: int | None = None, reasons: dict | None = None, keep: dict | None = None,
             parameters: dict | None = None) -> dict:
    """The cell metrics of one run from its per-unit counts: ``{<metric>_<protocol>: {value, ci_low, ci_high}}``
    for every declared metric, with the card's declared interval (percentile over its resampling, one set of
    weights for all metrics, so the intervals are paired; or exact Clopper–Pearson where the card declares
    exact intervals). A metric the run does not report is null with ``reasons[name]`` or the counts' own
    reason; one that is undefined on the test set (NaN) is null with the metric's ``undefined_reason``.
    ``keep``: a dict that receives the weights and totals drawn (``w``, ``tot``), so :func:`samples` reuses
    them instead of drawing the resamples again. ``parameters``: the run's parameters (its thresholds), given
    when the card declares ``gates``: each gate's decision on the values is a metric, 1.0 (pass) or 0.0 (fail),
    after the declared ones (without ``parameters`` no gate is decided)."""
    from ..results.schema import metric as cell_metric

    reasons = dict(reasons or {})
    w = tot = None
    out = {}
    for m in scoring.metrics:
        key = f"{m.name}_{protocol}"
        if m.name in uc.undefined or (m.rank and uc.scores is None):
            out[key] = cell_metric(None, reason=reasons.get(m.name) or uc.undefined.get(m.name) or "not reported")
            continue
        v = point(scoring, uc, m.name)
        if not np.isfinite(v):
            out[key] = cell_metric(None, reason=m.undefined_reason)
            continue
        if scoring.interval == "exact":
            lo, hi = exact_interval(m, uc.total()) or (None, None)
        else:
            if w is None:
                w = weights(uc, scoring.resampling, n_resamples, seed)
                tot = totals(uc, w)
            lo, hi = bootstrap.percentile_ci(resampled(scoring, uc, m.name, w, tot))
        out[key] = cell_metric(v, lo, hi)
    if keep is not None and w is not None:
        keep.update(w=w, tot=tot)
    if scoring.gates is not None and parameters is not None:
        values = {m.name: out[f"{m.name}_{protocol}"]["value"] for m in scoring.metrics}
        out.update({f"{g}_{protocol}": cell_metric(float(bool(passed)))
                    for g, passed in scoring.gates(values, dict(parameters)).items()})
    return out


def samples(scoring: Scoring, uc: UnitCounts, protocol: str, *, seed: int | None = None,
            n_resamples: int | None = None, kept: dict | None = None) -> dict:
    """Every resampled value behind :func:`evaluate`'s bootstrap intervals (the same weights, ``kept`` from
    its ``keep`` when given), for plots: ``{<metric>_<protocol>: array}`` of the metrics the run reports."""
    if kept:
        w, tot = kept["w"], kept["tot"]
    else:
        w = weights(uc, scoring.resampling, n_resamples, seed)
        tot = totals(uc, w)
    return {f"{m.name}_{protocol}": resampled(scoring, uc, m.name, w, tot) for m in scoring.metrics
            if m.name not in uc.undefined and not (m.rank and uc.scores is None)}


# -- several runs on the same units ----------------------------------------------------------------------

@dataclass
class Paired:
    """Several runs of one (card, version) on the same units and the shared resamples ``mult``:
    ``counts[label]`` the runs' :class:`UnitCounts` (same unit order), ``decisions[name][label]`` the
    per-unit booleans McNemar reads."""
    card: str
    version: str
    unit: str
    labels: list
    scoring: Scoring
    counts: dict
    mult: np.ndarray
    decisions: dict = field(default_factory=dict)
    n_units: int = 0                  # units one resample draws (clusters for a cluster resampling)
    higher_is_better: dict = field(default_factory=dict)
    _cache: dict = field(default_factory=dict, repr=False)

    @property
    def primary(self) -> str:
        return self.scoring.primary

    @property
    def bases(self) -> list:
        return [m.name for m in self.scoring.metrics]

    @property
    def decision_for(self) -> dict:
        return {m.name: m.decision for m in self.scoring.metrics if m.decision}

    def point(self, label: str, base: str) -> float:
        return point(self.scoring, self.counts[label], base)

    def resampled(self, label: str, base: str) -> np.ndarray:
        uc = self.counts[label]
        if label not in self._cache:
            self._cache[label] = totals(uc, self.mult)
        return resampled(self.scoring, uc, base, self.mult, self._cache[label])


def paired(scoring: Scoring, card: str, version: str, counts: dict, seed: int | None = None,
           n_resamples: int | None = None) -> Paired:
    """The :class:`Paired` data of runs ``{label: UnitCounts}`` on the same units (refused otherwise)."""
    labels = list(counts)
    first = counts[labels[0]]
    for lab in labels[1:]:
        if list(map(str, counts[lab].ids)) != list(map(str, first.ids)):
            uc = counts[lab]
            if set(map(str, uc.ids)) != set(map(str, first.ids)):
                raise ValueError(f"compare: {lab} was scored on different {version} items than {labels[0]}; "
                                 "paired comparisons need the same test items")
            order = {str(i): k for k, i in enumerate(uc.ids)}
            perm = [order[str(i)] for i in first.ids]
            counts[lab] = UnitCounts(list(first.ids), uc.columns, uc.counts[perm],
                                     {k: [v[i] for i in perm] for k, v in uc.groups.items()},
                                     None if uc.scores is None else uc.scores[perm], dict(uc.undefined))
    mult = weights(first, scoring.resampling, n_resamples, seed)
    decisions = {name: {lab: decision(scoring, counts[lab], name) for lab in labels} for name in scoring.decisions}
    rs = scoring.resampling
    n_units = len(set(map(str, first.groups[rs.by]))) if rs.rule == "clusters" else first.n
    return Paired(card, version, rs.unit, labels, scoring, counts, mult, decisions, n_units,
                  {m.name: m.higher_is_better for m in scoring.metrics})
