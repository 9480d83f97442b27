"""How a leaderboard frames its rows: which rows are ranked together, what "not distinguishable" and
"equivalent" mean for a pair, and what each pair could have detected.

Bands. Every row of a (card, split version) falls in one band, and ranks, tie groups, P(rank 1), Holm
families and minimum detectable differences are computed within a band only:

- a row whose model declares training data that overlap the card's test data (the cell's ``overlap``
  marker: a rule set built on the kit's own triggers, a model trained on the card's corpus) is **not
  ranked**: it stays visible with its reason and takes part in no rank, tie group, Holm family or MDD;
- otherwise its **regime** (:func:`regime`): ``outside predictions`` (scored by ``atlas score``, made by a
  system the atlas did not run), ``trained on the card's train items`` (a protocol the card declares in
  ``Card.training_protocols`` such as probe, finetune, train_lookup, or a card baseline it declares in
  ``Card.training_baselines``), or ``no training on the card's data`` (zero-shot models, rules, constant
  baselines).

Equivalence (two one-sided tests, TOST, at level ``α``): with the card's margin ``m`` for its primary
metric (``Card.equivalence_margin``) and the paired resamples ``d_b`` of a difference, the paired
``1 − 2α`` percentile interval ``[q_α, q_{1−α}]`` (90 % at α = 5 %) lying inside ``(−m, m)`` is
"equivalent within the margin": each one-sided test rejects a difference of ``m`` or more in its direction.
The one-sided bootstrap p-values ``p₋ = (1 + #{d_b ≤ −m}) / (B + 1)`` and ``p₊ = (1 + #{d_b ≥ m}) / (B + 1)``
are reported with ``p_TOST = max(p₋, p₊)``; the verdict is the interval's.

What the units can detect at all (:func:`resolution`): no paired test at level ``α`` rejects unless at least
``k`` units favour one row (``2·½ᵏ < α``, k = 6 at 5 %), so on ``n`` units no difference below ``k/n`` is
detectable. "Equivalent within the margin" and "best" are claimed only where ``k/n ≤ m``
(:func:`can_detect_margin`); otherwise the page says what the units can detect instead.

Minimum detectable difference of one pair (80 % power, 5 % two-sided): ``(z₀.₉₇₅ + z₀.₈)·SD(d_b)``, the SD
of that pair's own paired resamples, and never below ``k/n``; for a pair with McNemar counts also McNemar's at that pair's
discordance ``(b + c)/n`` (:func:`atlaslib.metrics.compare.mcnemar_mdd`).

A paired cluster interval (:func:`cluster_paired`) resamples whole clusters (sentences, templates) with
:func:`atlaslib.metrics.bootstrap.cluster_multiplicities`, the resamples of the leaderboard's cluster
intervals (same seed, same clusters), applied to the comparison's per-unit counts.

Nothing here names a card: the regimes, margins and clusters are the card's declarations.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.stats import norm

from .. import results
from . import bootstrap

ALPHA = 0.05
POWER = 0.80

REGIME_NONE = "no training on the card's data"
REGIME_TRAINED = "trained on the card's train items"
REGIME_OUTSIDE = "outside predictions"
REGIMES = (REGIME_NONE, REGIME_TRAINED, REGIME_OUTSIDE)
NOT_RANKED = "not ranked"
BANDS = (*REGIMES, NOT_RANKED)
#: the regime column's short labels (the CSV/JSON carry the full ones)
SHORT = {REGIME_NONE: "no card training", REGIME_TRAINED: "trained on train items",
         REGIME_OUTSIDE: "outside predictions", NOT_RANKED: "not ranked"}
#: the leaderboard fields a not-ranked row never carries (in its CSV/JSON rows either)
RANK_FIELDS = ("tie_group", "decided_by", "rank", "rank_low", "rank_high", "p_rank1")

NOT_DISTINGUISHABLE = "not distinguishable from the best (Holm, 5 %)"


def overlap_reason(cell: dict) -> str | None:
    """Why a row is not ranked: its training data overlap the card's test data (the cell's ``overlap``
    marker: the entries of the profile's ``trained_on`` that the card's one rule, :meth:`atlaslib.cards.Card.
    overlap`, picked when the cell was made), else None."""
    marks = [str(m) for m in cell.get("overlap") or []]
    if not marks:
        return None
    return f"trained on data that overlap this card's test data ({', '.join(marks)})"


def regime(card, cell: dict) -> str:
    """The training regime of a row (see module docstring), from the card's declarations."""
    if results.is_external(cell):
        return REGIME_OUTSIDE
    if cell.get("protocol") in tuple(card.training_protocols) or cell.get("model") in tuple(card.training_baselines):
        return REGIME_TRAINED
    return REGIME_NONE


def band_of(card, cell: dict) -> str:
    """The band a row is ranked in: :data:`NOT_RANKED` for an overlap-flagged row, else its regime."""
    return NOT_RANKED if overlap_reason(cell) else regime(card, cell)


def condition_of(card, cell: dict) -> str:
    """The condition a row answers under (``Card.ranking_conditions``, by protocol, e.g. a task's phase 2 with the
    gold spans given), "" where the card declares one question for all its rows."""
    return str((getattr(card, "ranking_conditions", None) or {}).get(cell.get("protocol"), ""))


def chosen_after_test(card, cell: dict) -> str | None:
    """Why a row's recipe is not a held-out result (``Card.chosen_after_test``, by protocol: e.g. chosen after a
    test score), else None. Such a row is ranked and compared, but never called "best"."""
    return (getattr(card, "chosen_after_test", None) or {}).get(cell.get("protocol")) or None


def band_name(band: str, condition: str = "") -> str:
    """A band's name on the page: its regime (or :data:`NOT_RANKED`) and, where the card's rows answer under
    different conditions, the condition."""
    return f"{band}, {condition}" if condition and band != NOT_RANKED else band


def bands(card, cells: list[dict]) -> list[tuple[str, list[dict]]]:
    """``[(band, cells)]`` in the order of :data:`BANDS`, the non-empty ones, each keeping the cells' order. Where
    the card declares conditions (:func:`condition_of`), a regime's rows of different conditions are different
    questions: each condition is a band of its own (:func:`band_name`), in the card's declared order; the
    not-ranked band stays one."""
    declared = list(dict.fromkeys((getattr(card, "ranking_conditions", None) or {}).values()))
    out = []
    for name in BANDS:
        mine = [c for c in cells if band_of(card, c) == name]
        if not mine:
            continue
        if name == NOT_RANKED:
            out.append((name, mine))
            continue
        conds = sorted({condition_of(card, c) for c in mine},
                       key=lambda k: (declared.index(k) if k in declared else len(declared), k))
        for cond in conds:
            out.append((band_name(name, cond), [c for c in mine if condition_of(card, c) == cond]))
    return out


# -- one pair -----------------------------------------------------------------------------------------------

def tost(diffs, margin: float, alpha: float = ALPHA) -> dict:
    """Equivalence within ``±margin`` of a paired difference from its resamples ``diffs`` (see module
    docstring): ``{ci_low, ci_high}`` (the ``1 − 2α`` percentile interval), ``p_lower``, ``p_upper``,
    ``p_tost`` and ``equivalent`` (the interval inside ``(−margin, margin)``). NaN resamples are left out;
    none left: NaNs and ``equivalent`` None."""
    if margin is None or not np.isfinite(margin) or margin <= 0:
        raise ValueError(f"tost: margin must be a positive number, got {margin!r}")
    d = np.asarray(diffs, dtype=float)
    d = d[np.isfinite(d)]
    if d.size == 0:
        nan = float("nan")
        return {"ci_low": nan, "ci_high": nan, "p_lower": nan, "p_upper": nan, "p_tost": nan, "equivalent": None}
    lo, hi = bootstrap.percentile_ci(d, 1 - 2 * alpha)
    p_lower = (1 + np.sum(d <= -margin)) / (d.size + 1)
    p_upper = (1 + np.sum(d >= margin)) / (d.size + 1)
    return {"ci_low": lo, "ci_high": hi, "p_lower": float(p_lower), "p_upper": float(p_upper),
            "p_tost": float(max(p_lower, p_upper)), "equivalent": bool(-margin < lo and hi < margin)}


def margin_of(card) -> float | None:
    """The card's equivalence margin of its primary metric (``Card.equivalence_margin``; None for no card or none
    declared): the one place the comparisons, the leaderboard's verdicts and the pages read it."""
    return None if card is None else getattr(card, "equivalence_margin", None)


def fewest_deciding_units(alpha: float = ALPHA) -> int:
    """The fewest units that must all favour one of two rows before any paired test at two-sided level
    ``alpha`` can reject "no difference": the smallest ``k`` with ``2·½ᵏ < alpha`` (the exact sign test of ``k``
    of ``k``; 6 at 5 %)."""
    k = 1
    while 2 * 0.5 ** k >= alpha:
        k += 1
    return k


def resolution(n_units: int, alpha: float = ALPHA) -> float:
    """The smallest difference a test at level ``alpha`` can detect on ``n_units`` resampling units: that many
    units (:func:`fewest_deciding_units`) out of ``n_units``, as a share; NaN when there are fewer units than
    that (nothing is detectable)."""
    k = fewest_deciding_units(alpha)
    n = int(n_units or 0)
    return float(k / n) if n >= k else float("nan")


def can_detect_margin(n_units: int, margin: float | None, alpha: float = ALPHA) -> bool:
    """Whether ``n_units`` units can detect a difference of the card's margin at level ``alpha``: the claims
    "equivalent within the margin" and "best" rest on it (without a margin: whether anything is detectable)."""
    r = resolution(n_units, alpha)
    if not np.isfinite(r):
        return False
    return bool(margin is None or r <= margin)


def too_few_units_text(n_units: int, unit: str, margin: float | None, alpha: float = ALPHA) -> str:
    """Why no equivalence or "best" is claimed: what ``n_units`` units can detect against the margin."""
    r, k = resolution(n_units, alpha), fewest_deciding_units(alpha)
    what = (f"no difference at all (a test at {alpha:.0%} needs at least {k} units favouring one row)"
            if not np.isfinite(r) else f"no difference below {r:.3f} ({k} of {int(n_units)} units favouring one row)")
    against = f", wider than the card's margin ±{margin:g}" if margin is not None and np.isfinite(r) else ""
    return f"{int(n_units)} {unit} can detect {what}{against}"


def pair_mdd(sd: float, alpha: float = ALPHA, power: float = POWER, n_units: int | None = None) -> float:
    """Minimum detectable difference of one pair: ``(z_{1−α/2} + z_power)·sd`` (NaN for a NaN SD); with
    ``n_units``, never below what that many units can detect at all (:func:`resolution`; NaN when they can
    detect nothing): a pair that agrees on every unit has SD 0, which is not a test that detects 0."""
    m = float((norm.ppf(1 - alpha / 2) + norm.ppf(power)) * float(sd))
    if n_units is None:
        return m
    r = resolution(n_units, alpha)
    return float("nan") if not np.isfinite(r) else max(m, r)


def framed_pairs(comp, margin: float | None, alpha: float = ALPHA) -> pd.DataFrame:
    """The primary metric's pairs of a :class:`~atlaslib.metrics.compare.Comparison` with, per pair, the
    paired 90 % interval and the TOST verdict (``ci90_low``, ``ci90_high``, ``p_tost``, ``equivalent``: None
    without a margin), its own MDD (``mdd``) and, with McNemar counts, McNemar's MDD at its discordance
    (``mdd_mcnemar``)."""
    from .compare import mcnemar_mdd

    t = comp.pairs
    base = comp.mdd["metric"]
    if t.empty:
        return t.copy()
    t = t[t["metric"] == base].copy()
    rows = []
    for _, r in t.iterrows():
        d = comp.data.resampled(r["model_a"], base) - comp.data.resampled(r["model_b"], base)
        eq = tost(d, margin, alpha) if margin else {"ci_low": np.nan, "ci_high": np.nan, "p_tost": np.nan,
                                                     "equivalent": None}
        mm = np.nan
        if r.get("b") is not None and not pd.isna(r.get("b")) and r.get("n_items"):
            mm = mcnemar_mdd(int(r["n_items"]), (int(r["b"]) + int(r["c"])) / int(r["n_items"]))
        n_units = int(comp.mdd.get("n_units") or 0)
        detectable = can_detect_margin(n_units, margin, alpha)
        if eq["equivalent"] and not detectable:     # an interval of 0 width on too few units is no equivalence
            eq["equivalent"] = None
        rows.append({"ci90_low": eq["ci_low"], "ci90_high": eq["ci_high"], "p_tost": eq["p_tost"],
                     "equivalent": eq["equivalent"], "margin": margin,
                     "mdd": pair_mdd(r["sd"], alpha, n_units=n_units), "mdd_mcnemar": mm,
                     "margin_detectable": detectable})
    extra = pd.DataFrame(rows, index=t.index)
    return pd.concat([t, extra], axis=1)


def top_pair(comp) -> tuple[str, str] | None:
    """(best, second best) of a comparison's ranks by point estimate, or None with fewer than two."""
    r = comp.ranks
    if r is None or len(r) < 2:
        return None
    r = r.sort_values(["rank", "model"])
    return str(r["model"].iloc[0]), str(r["model"].iloc[1])


def pair_row(frame: pd.DataFrame, a: str, b: str):
    """The row of ``frame`` for the pair {a, b} (either order), or None."""
    if frame.empty:
        return None
    m = frame[((frame["model_a"] == a) & (frame["model_b"] == b)) | ((frame["model_a"] == b) & (frame["model_b"] == a))]
    return None if m.empty else m.iloc[0]


def cluster_paired(p, a: str, b: str, base: str, clusters, *, seed: int, n_resamples: int | None = None,
                   level: float = 0.95) -> dict:
    """The paired difference ``a − b`` of ``base`` resampling whole clusters: ``{difference, ci_low, ci_high,
    p_bootstrap, n_clusters, few_clusters}``. ``clusters``: one cluster label per unit of ``p`` (a
    :class:`~atlaslib.metrics.compare.Paired` whose units are items), resampled with
    :func:`atlaslib.metrics.bootstrap.cluster_multiplicities` (the leaderboard's cluster resamples, same
    seed) and applied to ``p``'s per-unit counts; or, for a comparison that carries its card's scoring
    (:mod:`atlaslib.metrics.engine`), that scoring's cluster :class:`~atlaslib.metrics.engine.Resampling`,
    drawn by the engine's own weights. A row over training seeds (a
    :class:`~atlaslib.metrics.compare.SeededPaired` row) is the mean of its seeds' values on each cluster resample,
    its seeds drawn as its declared resamples draw them: the two-level interval, around its mean over seeds."""
    from .compare import bootstrap_pvalue
    from .intervals import FEW_CLUSTERS

    from dataclasses import replace

    from . import engine

    n_resamples = n_resamples or p.mult.shape[0]
    ua = p.counts[a]
    labelled = not hasattr(clusters, "rule")
    if labelled:                                        # one cluster label per unit
        groups = list(clusters)
        if len(groups) != ua.n:
            raise ValueError(f"cluster_paired: {len(groups)} cluster labels for {ua.n} units")
        clusters = engine.Resampling("clusters", "clusters", seed, by="_clusters")

    def counts_of(label):
        """The row's per-unit counts: its one model's, or each training seed's (a seeded row)."""
        ucs = (getattr(p, "seed_counts", {}) or {}).get(label) or [p.counts[label]]
        return [replace(u, groups={**u.groups, "_clusters": groups}) for u in ucs] if labelled else ucs

    def row(label, w):
        """Per cluster resample the row's value: a seeded row's mean over its seeds drawn as its declared
        resamples draw them (:meth:`atlaslib.metrics.compare.SeededPaired.over_seeds`)."""
        ucs = counts_of(label)
        if len(ucs) == 1:
            return engine.resampled(p.scoring, ucs[0], base, w)
        return p.over_seeds(label, np.stack([engine.resampled(p.scoring, u, base, w) for u in ucs], axis=1))

    ua = counts_of(a)[0]
    w = engine.weights(ua, clusters, n_resamples, seed)
    d = row(a, w) - row(b, w)
    g = len(set(map(str, ua.groups[clusters.by])))
    lo, hi = bootstrap.percentile_ci(d, level)
    return {"difference": p.point(a, base) - p.point(b, base), "ci_low": lo, "ci_high": hi,
            "p_bootstrap": bootstrap_pvalue(d), "n_clusters": int(g), "few_clusters": bool(g < FEW_CLUSTERS)}


# -- a (card, version) in bands -------------------------------------------------------------------------------

@dataclass
class Band:
    """One band of a leaderboard: its name (a regime or :data:`NOT_RANKED`), its cells (best first) and its
    comparison (a :class:`~atlaslib.metrics.compare.Comparison`; a string saying why there is none; None
    for the not-ranked band, which is never compared)."""
    name: str
    cells: list
    comparison: object = None

    @property
    def ranked(self) -> bool:
        return self.name != NOT_RANKED


class _BandData:
    """``resampled(label, base)`` / ``point(label, base)`` of whichever band holds ``label``."""

    def __init__(self, banded: "Banded"):
        self._b = banded

    def _data(self, label):
        for band in self._b.compared:
            if label in band.comparison.data.labels:
                return band.comparison.data
        raise KeyError(f"no ranked band holds {label!r}")

    def resampled(self, label, base):
        return self._data(label).resampled(label, base)

    def point(self, label, base):
        return self._data(label).point(label, base)


@dataclass
class Banded:
    """The comparisons of one (card, version), one per ranked band. ``pairs`` and ``ranks`` are the bands'
    own, concatenated with a ``band`` column (pairs never cross bands); ``mdd`` is the first compared
    band's; ``not_ranked`` lists ``(run label, reason)``."""
    bands: list = field(default_factory=list)
    not_ranked: list = field(default_factory=list)

    @property
    def compared(self) -> list:
        return [b for b in self.bands if b.ranked and b.comparison is not None and not isinstance(b.comparison, str)]

    def _concat(self, attr):
        frames = []
        for b in self.compared:
            f = getattr(b.comparison, attr)
            if f is not None and not f.empty:
                f = f.copy()
                f.insert(0, "band", b.name)
                frames.append(f)
        if not frames:
            return pd.DataFrame()
        with warnings.catch_warnings():   # bands whose McNemar columns are all None: kept as they are
            warnings.simplefilter("ignore", FutureWarning)
            return pd.concat(frames, ignore_index=True)

    @property
    def pairs(self) -> pd.DataFrame:
        return self._concat("pairs")

    @property
    def ranks(self) -> pd.DataFrame:
        return self._concat("ranks")

    @property
    def mdd(self) -> dict:
        c = self.compared
        return c[0].comparison.mdd if c else {}

    @property
    def data(self) -> _BandData:
        return _BandData(self)
