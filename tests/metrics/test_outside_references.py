"""The numbers that decide a ranking, each held to a reference outside the code under test.

- the **paired-bootstrap p-value** (it feeds Holm, the tie groups and "decided by"): on a few items the bootstrap
  can be enumerated, every one of the n^n index tuples once; fed those resamples, the comparison's p-value equals
  the docstring's definition counted by hand over the tuples (exact fractions), the exact distribution of the
  resampled difference got another way (n-fold convolution of one draw's distribution) and, on a three-item
  case, a value worked out on paper; on forty items the card's own Monte Carlo resamples land within their
  sampling error of the exact bootstrap p-value (the convolution again);
- **Holm**: a hand-worked family, statsmodels' ``multipletests(method="holm")`` on many families (ties and NaNs
  among them), and a comparison of three models whose significant set the step-down decides (Bonferroni would
  drop a pair Holm keeps);
- **rank intervals and P(rank 1)** on a three- and a four-model case ranked by hand, resample by resample (ties
  share the better rank; the 95 % interval of 41 resamples leaves out a rank seen once), the same under a
  lower-is-better primary metric, and scipy's ``rankdata`` on a larger case;
- **almost stochastic order** (deepsig): the comparison's ε_min is deepsig's ``aso()`` called directly on the
  better row's per-seed scores, oriented so that higher is better, whichever order the rows come in and whether
  the primary metric is higher- or lower-is-better;
- the **seed-level paired difference** with unequal seeds (two against three): its resamples, interval and SD
  computed by hand from given seed draws, in :func:`atlaslib.metrics.seeds.paired_difference` and in the
  comparison of seeded rows;
- the **coverage simulation** (:func:`atlaslib.metrics.intervals.simulate_coverage`) with closed-form intervals
  put in place of the bootstrap ones: the simulated coverage of the Wald and Clopper–Pearson intervals equals their
  exact coverage, summed over the binomial (independent items) and over the convolution of beta-binomial clusters
  (ICC 0.3), within Monte Carlo error;
- **stratified resampling** (:func:`atlaslib.metrics.bootstrap.stratified_indices`, the paired resamples' draws):
  every resample keeps each stratum's size, and an item's multiplicity follows Binomial(n_s, 1/n_s) (mean 1),
  checked with chi-square tests; the training-seed draws likewise.
"""
from __future__ import annotations

from fractions import Fraction
from itertools import combinations, product

import numpy as np
import pytest
from scipy import stats

from atlaslib.metrics import bootstrap, compare, engine, intervals, seeds
from atlaslib.metrics.engine import Metric, Resampling, Scoring, UnitCounts, ratio

ACC = Metric("accuracy", lambda t: ratio(t["correct"], t["item"]))
ERR = Metric("error", lambda t: ratio(t["item"] - t["correct"], t["item"]), higher_is_better=False)
#: one unit per item: correct (0/1) and item (1); accuracy and its complement, the error rate (lower is better)
SCORING = Scoring(("correct", "item"), (ACC, ERR), "accuracy", Resampling("rows", "items", 11))
SCORING_ERROR_FIRST = Scoring(("correct", "item"), (ERR, ACC), "error", Resampling("rows", "items", 11))


def counts(correct) -> UnitCounts:
    return UnitCounts([f"i{k}" for k in range(len(correct))], ("correct", "item"), [[int(c), 1] for c in correct])


def paired_on(mult, rows: dict, scoring=SCORING) -> engine.Paired:
    """The paired data of runs ``{label: per-item correctness}`` on the resamples ``mult`` (B, n) given here."""
    mult = np.asarray(mult, dtype=np.int64)
    return engine.Paired("toy", "v", "items", list(rows), scoring, {k: counts(v) for k, v in rows.items()}, mult,
                         {}, mult.shape[1], {m.name: m.higher_is_better for m in scoring.metrics})


def every_resample(n: int) -> np.ndarray:
    """All n^n index tuples of the bootstrap of n items, as multiplicities (n^n, n)."""
    return np.array([np.bincount(t, minlength=n) for t in product(range(n), repeat=n)])


def pair(comp, a: str, b: str):
    rows = comp.pairs[(comp.pairs["metric"] == "accuracy") & (comp.pairs["model_a"] == a) & (comp.pairs["model_b"] == b)]
    assert len(rows) == 1, comp.pairs
    return rows.iloc[0]


# -- the paired-bootstrap p-value -------------------------------------------------------------------------------

def pvalue_by_definition(a, b) -> Fraction:
    """``min(1, 2·min((1 + #{d ≤ 0}) / (B + 1), (1 + #{d ≥ 0}) / (B + 1)))`` over every index tuple, by hand."""
    n = len(a)
    le = ge = total = 0
    for t in product(range(n), repeat=n):
        d = Fraction(sum(a[i] - b[i] for i in t), n)
        le, ge, total = le + (d <= 0), ge + (d >= 0), total + 1
    return min(Fraction(1), 2 * min(Fraction(1 + le, total + 1), Fraction(1 + ge, total + 1)))


def sum_distribution(a, b) -> dict[int, int]:
    """How many of the n^n tuples give each sum of item differences: one draw's counts, convolved n times."""
    n = len(a)
    one = np.zeros(3, dtype=object)                 # differences -1, 0, +1
    for x, y in zip(a, b):
        one[x - y + 1] += 1
    dist = np.array([1], dtype=object)
    for _ in range(n):
        dist = np.convolve(dist, one)
    return {s - n: int(c) for s, c in enumerate(dist)}


def test_the_p_value_of_three_items_worked_on_paper():
    """A right on items 0 and 1, B on item 1: the difference of a resample is (draws of item 0) / 3, never
    negative, and zero on the 2³ = 8 of 27 tuples without item 0: p = 2·(1 + 8)/(27 + 1) = 9/14."""
    comp = compare.compare_paired(paired_on(every_resample(3), {"A": [1, 1, 0], "B": [0, 1, 0]}))
    row = pair(comp, "A", "B")
    assert row["p_bootstrap"] == pytest.approx(9 / 14, abs=1e-12) and row["test"] == "paired bootstrap"
    assert row["difference"] == pytest.approx(1 / 3)


@pytest.mark.parametrize("a, b", [([1, 1, 0, 0], [0, 1, 1, 0]), ([1, 1, 1, 0], [0, 0, 1, 1]),
                                  ([1, 0, 1, 1, 0], [1, 1, 0, 0, 0]), ([1, 1, 1, 1, 0], [0, 1, 1, 1, 1])])
def test_the_p_value_on_every_resample_equals_its_definition_and_the_exact_distribution(a, b):
    n = len(a)
    comp = compare.compare_paired(paired_on(every_resample(n), {"A": a, "B": b}))
    got = pair(comp, "A", "B")["p_bootstrap"]
    assert got == pytest.approx(float(pvalue_by_definition(a, b)), abs=1e-12)
    dist = sum_distribution(a, b)                     # the same counts, another way
    total = n ** n
    le, ge = sum(c for s, c in dist.items() if s <= 0), sum(c for s, c in dist.items() if s >= 0)
    assert sum(dist.values()) == total
    assert got == pytest.approx(min(1, 2 * min((1 + le) / (total + 1), (1 + ge) / (total + 1))), abs=1e-12)


def test_monte_carlo_p_value_of_the_cards_resamples_is_the_exact_bootstrap_p_value():
    """Forty items, the scoring's own row resampling (4,000 resamples): the p-value lands within four standard
    errors of the exact bootstrap p-value, ``2·P(D ≤ 0)`` with D the mean of 40 draws from the item
    differences, its distribution by convolution."""
    a = np.array([1] * 32 + [0] * 8)
    b = a.copy()
    b[:6], b[32:34] = 0, 1                      # A right and B wrong on 6 items, the reverse on 2
    one = np.bincount(a - b + 1, minlength=3) / 40
    dist = np.array([1.0])
    for _ in range(40):
        dist = np.convolve(dist, one)
    sums = np.arange(len(dist)) - 40
    p_le, p_ge = dist[sums <= 0].sum(), dist[sums >= 0].sum()
    exact = min(1.0, 2 * min(p_le, p_ge))
    p = engine.paired(SCORING, "toy", "v", {"A": counts(a), "B": counts(b)}, seed=3, n_resamples=4000)
    got = pair(compare.compare_paired(p), "A", "B")["p_bootstrap"]
    se = 2 * np.sqrt(min(p_le, p_ge) * (1 - min(p_le, p_ge)) / 4000)
    assert 0.1 < exact < 0.3 and abs(got - exact) < 4 * se, (got, exact, se)


# -- Holm -------------------------------------------------------------------------------------------------------

def test_holm_by_hand():
    """Sorted 0.01, 0.03, 0.04; times 3, 2, 1: 0.03, 0.06, 0.04; running maximum: 0.03, 0.06, 0.06."""
    assert compare.holm([0.01, 0.04, 0.03]).tolist() == pytest.approx([0.03, 0.06, 0.06])
    assert (compare.holm([0.01, 0.04, 0.03]) < 0.05).tolist() == [True, False, False]


def test_holm_equals_statsmodels_multipletests():
    from statsmodels.stats.multitest import multipletests

    rng = np.random.default_rng(2)
    families = [rng.random(m) ** 3 for m in (1, 2, 3, 5, 8, 13) for _ in range(4)]   # statsmodels: ~0.1 s a call
    families += [np.array([0.01, 0.01, 0.2, 0.2, 0.04]), np.array([0.5, np.nan, 0.001, 0.02]),
                 np.array([0.3, 0.3, 0.3]), np.array([1.0, 0.0, 0.049])]
    boundary = 0
    for p in families:
        ok = np.isfinite(p)
        reject, adjusted, _, _ = multipletests(p[ok], alpha=0.05, method="holm")
        got = compare.holm(p)
        assert np.isnan(got[~ok]).all()
        np.testing.assert_allclose(got[ok], adjusted, rtol=0, atol=1e-12)
        # the same rejections, but where the adjusted p-value is exactly 0.05: statsmodels rejects (p ≤ α), the atlas
        # calls the pair significant only below it (its tie groups take p ≥ 0.05 in, as the module docstring says)
        edge = np.isclose(adjusted, 0.05, rtol=0, atol=1e-12)
        boundary += int(edge.sum())
        assert ((got[ok] < 0.05) == reject)[~edge].all() and not (got[ok] < 0.05)[edge].any()
    assert boundary == 2                                                  # 0.01 × 5 in the family built for it


def test_the_significant_set_of_a_comparison_is_holms_on_enumerated_resamples():
    """Five items, every resample; B right on none, A on three, C on four. By hand: p(B, C) = 2·2/3126 (one tuple,
    all on item 4, has d ≥ 0), p(A, B) = 2·33/3126 (2⁵ tuples drawn from items 3 and 4 only), p(A, C) = 2·1025/3126.
    Holm: 0.0038, 0.0422, 0.656: B–C and A–B significant (Bonferroni's 3 × 0.0211 = 0.063 would drop A–B). The tie
    group of the best, C: A (decided by the paired bootstrap)."""
    from statsmodels.stats.multitest import multipletests

    rows = {"A": [1, 1, 1, 0, 0], "B": [0, 0, 0, 0, 0], "C": [1, 1, 1, 1, 0]}
    comp = compare.compare_paired(paired_on(every_resample(5), rows))
    want = {("A", "B"): 66 / 3126, ("A", "C"): 2050 / 3126, ("B", "C"): 4 / 3126}
    for (a, b), p in want.items():
        assert pair(comp, a, b)["p_bootstrap"] == pytest.approx(p, abs=1e-12)
        assert pair(comp, a, b)["p_bootstrap"] == pytest.approx(float(pvalue_by_definition(rows[a], rows[b])))
    acc = comp.pairs[comp.pairs["metric"] == "accuracy"]
    reject, adjusted, _, _ = multipletests(acc["p"].to_numpy(float), alpha=0.05, method="holm")
    np.testing.assert_allclose(acc["p_holm"].to_numpy(float), adjusted, rtol=0, atol=1e-12)
    assert acc["significant"].tolist() == reject.tolist()
    assert {(r.model_a, r.model_b) for r in acc.itertuples() if r.significant} == {("A", "B"), ("B", "C")}
    assert 3 * want[("A", "B")] > 0.05                                   # Bonferroni would not keep A–B
    ranks = comp.ranks.set_index("model")
    assert ranks.loc["C", "tie_group"] == ranks.loc["A", "tie_group"] == "top" and ranks.loc["B", "tie_group"] == "—"
    assert ranks.loc["A", "decided_by"] == "paired bootstrap" and ranks.loc["A", "p_holm_vs_best"] == \
        pytest.approx(2050 / 3126)


# -- rank intervals and P(rank 1) ---------------------------------------------------------------------------------

THREE = {"A": [1, 1, 0, 0], "B": [1, 0, 1, 0], "C": [0, 0, 0, 1]}
#: accuracies per resample: [1,1,1,1] A .5 B .5 C .25 (ranks 1 1 3); [2,2,0,0] A 1 B .5 C 0 (1 2 3);
#: [0,0,2,2] A 0 B .5 C .5 (3 1 1); [0,0,0,4] A 0 B 0 C 1 (2 2 1)
THREE_MULT = [[1, 1, 1, 1], [2, 2, 0, 0], [0, 0, 2, 2], [0, 0, 0, 4]]
FOUR = {"A": [1, 1, 0, 0], "B": [1, 0, 1, 0], "C": [1, 1, 1, 0], "D": [0, 0, 0, 1]}
#: 41 resamples: 30 × [1,1,1,1] (C .75, A .5, B .5, D .25: ranks A2 B2 C1 D4), 10 × [2,0,2,0] (A .5, B 1, C 1, D 0:
#: A3 B1 C1 D4), 1 × [0,0,0,4] (D 1, the rest 0: A2 B2 C2 D1)
FOUR_MULT = [[1, 1, 1, 1]] * 30 + [[2, 0, 2, 0]] * 10 + [[0, 0, 0, 4]]


def _ranks(comp) -> dict:
    return {r.model: (r.rank, r.rank_low, r.rank_high, r.p_rank1) for r in comp.ranks.itertuples()}


@pytest.mark.parametrize("scoring", [SCORING, SCORING_ERROR_FIRST], ids=["accuracy", "error (lower is better)"])
def test_three_models_ranked_by_hand(scoring):
    """Ranks per resample: A 1,1,3,2; B 1,2,1,2; C 3,3,1,1 (a tie shares the better rank). With four resamples the
    95 % interval runs from the smallest to the largest; each model is first on two of the four."""
    got = _ranks(compare.compare_paired(paired_on(THREE_MULT, THREE, scoring)))
    assert got == {"A": (1, 1, 3, 0.5), "B": (1, 1, 2, 0.5), "C": (3, 1, 3, 0.5)}


@pytest.mark.parametrize("scoring", [SCORING, SCORING_ERROR_FIRST], ids=["accuracy", "error (lower is better)"])
@pytest.mark.parametrize("n_main", [30, 29], ids=["41 resamples", "40 resamples"])
def test_four_models_ranked_by_hand(scoring, n_main):
    """Over 41 resamples: A 2 (31 times), 3 (10); B 1 (10), 2 (31); C 1 (40), 2 (once); D 4 (40), 1 (once). The
    2.5th percentile (inverted CDF) is the smallest rank whose share reaches 2.5 %: 1/41 does not, so D's interval
    is [4, 4] although it was first once (and C's [1, 1]); P(rank 1) counts that resample all the same. With one
    [1,1,1,1] resample fewer (40), 1/40 reaches 2.5 %: D's interval is [1, 4]."""
    mult = FOUR_MULT[30 - n_main:]
    b = len(mult)
    comp = compare.compare_paired(paired_on(mult, FOUR, scoring))
    got = _ranks(comp)
    d_low = 4 if b == 41 else 1
    assert got == {"A": (2, 2, 3, 0.0), "B": (2, 1, 2, pytest.approx(10 / b)),
                   "C": (1, 1, 1, pytest.approx((b - 1) / b)), "D": (4, d_low, 4, pytest.approx(1 / b))}
    values = comp.ranks.set_index("model")["value"]
    assert values["C"] == pytest.approx(0.75 if scoring is SCORING else 0.25)    # the primary metric's own value


def test_rank_intervals_equal_scipy_rankdata_per_resample():
    rng = np.random.default_rng(9)
    rows = {m: (rng.random(30) < q).astype(int).tolist() for m, q in zip("ABCDE", (0.8, 0.75, 0.7, 0.7, 0.5))}
    mult = engine.multiplicities(rng.integers(0, 30, size=(300, 30)), 30)
    comp = compare.compare_paired(paired_on(mult, rows))
    acc = np.array([mult @ np.array(rows[m]) / 30 for m in rows])         # (models, B)
    ranks = np.stack([stats.rankdata(-acc[:, k], method="min") for k in range(acc.shape[1])], axis=1)
    for k, m in enumerate(rows):
        r = np.sort(ranks[k])
        low, high = r[int(np.ceil(0.025 * len(r))) - 1], r[int(np.ceil(0.975 * len(r))) - 1]
        row = comp.ranks.set_index("model").loc[m]
        assert (row["rank_low"], row["rank_high"]) == (low, high)
        assert row["p_rank1"] == pytest.approx(np.mean(ranks[k] == 1))


# -- almost stochastic order: deepsig's aso() called directly -----------------------------------------------------

def seeded_paired(points: dict, scoring) -> compare.SeededPaired:
    """Two seeded rows with the given per-seed primary values (their item resamples do not matter to ASO)."""
    labels = list(points)
    mult = engine.multiplicities(np.random.default_rng(0).integers(0, 4, size=(20, 4)), 4)
    base = scoring.primary
    other = [m.name for m in scoring.metrics if m.name != base][0]
    seeded = {}
    for lab in labels:
        pts = np.asarray(points[lab], dtype=float)
        v = np.tile(pts, (20, 1))
        seeded[lab] = {base: (pts, v), other: (1 - pts, 1 - v)}
    p = paired_on(mult, {lab: [1, 0, 1, 0] for lab in labels}, scoring)
    from dataclasses import fields

    return compare.SeededPaired(**{f.name: getattr(p, f.name) for f in fields(p)}, seeded=seeded)


#: the atlas's own question to deepsig (seeds.almost_stochastic_order's defaults): 1,000 bootstrap iterations, the
#: atlas's bootstrap seed, 95% confidence, one comparison
ATLAS_ASO = {"confidence_level": 0.95, "num_comparisons": 1, "seed": bootstrap.DEFAULT_SEED,
             "num_bootstrap_iterations": 1000, "show_progress": False}
#: deepsig's answers by question (it is seeded: the same question has the same answer): each distinct question is
#: asked once in the module, at the atlas's own iteration count (about 2 s each, 15 s on a loaded 2-core machine)
_ASKED: dict = {}


def _deepsig(real, a, b, kw):
    q = (tuple(a), tuple(b), tuple(sorted(kw.items())))
    if q not in _ASKED:
        _ASKED[q] = float(real(list(a), list(b), **kw))
    return _ASKED[q]


@pytest.fixture
def deepsig_aso(monkeypatch):
    """deepsig's ``aso()``, called directly (``(better, worse) -> ε_min``, higher is better, the atlas's settings
    given here), and what the atlas handed to it (``.calls``: every (scores_a, scores_b) in order, with the keywords
    it passed unchanged)."""
    import deepsig

    real = deepsig.aso
    calls, kwargs = [], []

    def recorded(scores_a, scores_b, **kw):
        calls.append((list(scores_a), list(scores_b)))
        kwargs.append(dict(kw))
        return _deepsig(real, scores_a, scores_b, kw)

    monkeypatch.setattr(deepsig, "aso", recorded)

    def direct(better, worse) -> float:
        return _deepsig(real, better, worse, ATLAS_ASO)

    direct.calls, direct.kwargs = calls, kwargs
    return direct


ERRORS = {"good": [0.10, 0.14, 0.11, 0.09, 0.16], "bad": [0.15, 0.18, 0.22, 0.13, 0.21]}


@pytest.mark.parametrize("order", [("good", "bad"), ("bad", "good")], ids=["good first", "bad first"])
def test_aso_of_a_lower_is_better_metric_is_deepsigs_on_negated_scores(order, deepsig_aso):
    """Error rates: the row with the lower mean is the better, and deepsig (higher is better) is given minus the
    error rates, better row first, in either order of the rows."""
    comp = compare.compare_paired(seeded_paired({k: ERRORS[k] for k in order}, SCORING_ERROR_FIRST))
    row = comp.pairs[comp.pairs["metric"] == "error"].iloc[0]
    good, bad = [-x for x in ERRORS["good"]], [-x for x in ERRORS["bad"]]
    assert deepsig_aso.calls == [(pytest.approx(good), pytest.approx(bad))] and deepsig_aso.kwargs == [ATLAS_ASO]
    want = deepsig_aso(good, bad)
    assert row["aso_better"] == "good" and row["aso_eps_min"] == pytest.approx(want, abs=1e-12)
    assert want < 0.2 < 0.5 < deepsig_aso(ERRORS["good"], ERRORS["bad"])   # unoriented, deepsig says otherwise


@pytest.mark.parametrize("order", [("good", "bad"), ("bad", "good")], ids=["good first", "bad first"])
def test_aso_of_a_higher_is_better_metric_is_deepsigs_on_the_scores(order, deepsig_aso):
    acc = {k: [1 - x for x in v] for k, v in ERRORS.items()}
    comp = compare.compare_paired(seeded_paired({k: acc[k] for k in order}, SCORING))
    row = comp.pairs[comp.pairs["metric"] == "accuracy"].iloc[0]
    assert deepsig_aso.calls == [(pytest.approx(acc["good"]), pytest.approx(acc["bad"]))]
    assert deepsig_aso.kwargs == [ATLAS_ASO]
    assert row["aso_better"] == "good"
    assert row["aso_eps_min"] == pytest.approx(deepsig_aso(acc["good"], acc["bad"]), abs=1e-12)


# -- the seed-level paired difference -------------------------------------------------------------------------------

#: per-seed values on two item resamples: row A has two seeds, row B three
VA = np.array([[0.5, 0.75], [0.5, 1.0]])
VB = np.array([[0.5, 0.75, 0.25], [0.5, 1.0, 0.0]])
#: the seed draws, given: resample 0 draws A's first seed twice and each of B's once; resample 1 each of A's once
#: and B's third seed three times
W = {2: np.array([[2, 0], [1, 1]]), 3: np.array([[1, 1, 1], [0, 0, 3]])}


@pytest.fixture
def given_seed_draws(monkeypatch):
    calls = []

    def draws(n_seeds, n_resamples=bootstrap.DEFAULT_RESAMPLES, seed=bootstrap.DEFAULT_SEED):
        calls.append((n_seeds, n_resamples, seed))
        return W[n_seeds][:n_resamples]

    monkeypatch.setattr(seeds, "seed_multiplicities", draws)
    return calls


def test_paired_difference_with_two_and_three_seeds_by_hand(given_seed_draws):
    """T_A = (2·0.5)/2, (0.5 + 1)/2 = 0.5, 0.75; T_B = (0.5 + 0.75 + 0.25)/3, (3·0)/3 = 0.5, 0; D = 0, 0.75;
    percentile interval (linear) 0.025·0.75, 0.975·0.75; SD 0.375. A's seeds and B's are drawn independently
    (seeds s and s + 1)."""
    d = seeds.paired_difference(VA, VB, seed=7)
    assert d["resampled"].tolist() == [0.0, 0.75]
    assert (d["ci_low"], d["ci_high"], d["sd"]) == pytest.approx((0.01875, 0.73125, 0.375))
    assert given_seed_draws == [(2, 2, 7), (3, 2, 8)]


def test_the_comparison_of_a_two_seed_and_a_three_seed_row_by_hand(given_seed_draws):
    """The same rows in a comparison (seeded on accuracy, a secondary metric here, so no ASO is asked for):
    points are the seeds' means (0.625 and 0.5), the paired resamples as above, and each row's seeds are drawn
    with its own seed."""
    p = paired_on([[1, 1, 1, 1], [2, 0, 2, 0]], {"A": [1, 0, 1, 0], "B": [1, 0, 1, 0]}, SCORING_ERROR_FIRST)
    from dataclasses import fields

    sp = compare.SeededPaired(**{f.name: getattr(p, f.name) for f in fields(p)}, seeded={
        "A": {"accuracy": (np.array([0.5, 0.75]), VA)}, "B": {"accuracy": (np.array([0.5, 0.75, 0.25]), VB)}})
    row = pair(compare.compare_paired(sp), "A", "B")
    assert row["difference"] == pytest.approx(0.125)
    assert (row["ci_low"], row["ci_high"], row["sd"]) == pytest.approx((0.01875, 0.73125, 0.375))
    assert set(given_seed_draws) == {(2, 2, bootstrap.DEFAULT_SEED + 1), (3, 2, bootstrap.DEFAULT_SEED + 2)}


# -- the coverage simulation against closed-form intervals -----------------------------------------------------------

Z = stats.norm.ppf(0.975)


def wald(k, n):
    p = k / n
    h = Z * np.sqrt(p * (1 - p) / n)
    return p - h, p + h


def clopper_pearson(k, n):
    lo = 0.0 if k == 0 else stats.beta.ppf(0.025, k, n - k + 1)
    hi = 1.0 if k == n else stats.beta.ppf(0.975, k + 1, n - k)
    return lo, hi


def exact_coverage(pmf: np.ndarray, interval, p: float) -> float:
    """Σ_k P(K = k)·1[p in interval(k, n)] over k = 0..n."""
    n = len(pmf) - 1
    return float(sum(w for k, w in enumerate(pmf) if interval(k, n)[0] <= p <= interval(k, n)[1]))


@pytest.mark.parametrize("icc", [0.0, 0.3])
def test_simulated_coverage_is_the_exact_coverage_of_closed_form_intervals(monkeypatch, icc):
    """The simulator with Clopper–Pearson in the cluster slot and Wald in the item slot: its coverages equal the
    exact ones, summed over the distribution of the number of successes: Binomial(N, p) for independent items, the
    convolution of the clusters' beta-binomials (a = p·φ, b = (1 − p)·φ, φ = (1 − ICC)/ICC) otherwise."""
    n_clusters, size, p, sims = 20, 5, 0.3, 4000
    monkeypatch.setattr(intervals, "cluster_proportion_ci", lambda y, groups, **kw: dict(
        zip(("ci_low", "ci_high"), clopper_pearson(int(np.sum(y)), len(y)))))
    monkeypatch.setattr(intervals, "item_bootstrap_ci", lambda y, **kw: wald(int(np.sum(y)), len(y)))
    got = intervals.simulate_coverage(sims, n_clusters=n_clusters, cluster_size=size, p=p, icc=icc, n_resamples=1)
    n = n_clusters * size
    if icc == 0:
        pmf = stats.binom.pmf(np.arange(n + 1), n, p)
    else:
        phi = (1 - icc) / icc
        one = stats.betabinom.pmf(np.arange(size + 1), size, p * phi, (1 - p) * phi)
        pmf = np.array([1.0])
        for _ in range(n_clusters):
            pmf = np.convolve(pmf, one)
    for name, interval in (("cluster", clopper_pearson), ("item", wald)):
        want = exact_coverage(pmf, interval, p)
        se = np.sqrt(want * (1 - want) / sims)
        assert abs(got[name] - want) < 4 * se, (name, got[name], want)
    if icc:                                     # clustering costs the item interval its coverage
        assert exact_coverage(pmf, wald, p) < 0.9


# -- stratified resampling: strata kept, multiplicities as drawn with replacement ------------------------------------

def test_every_stratified_resample_keeps_each_strata_size_and_draws_within_it():
    y = np.array(["b"] * 3 + ["a"] * 7 + ["c"] * 20 + ["a"] * 2)            # strata interleaved, unsorted
    idx = bootstrap.stratified_indices(y, 2000, seed=4)
    assert idx.shape == (2000, len(y))
    sizes = {s: int(np.sum(y == s)) for s in np.unique(y)}
    for s, size in sizes.items():
        assert ((y[idx] == s).sum(axis=1) == size).all(), s                 # every resample, every stratum
    # the engine's weights (the comparisons' shared resamples) are these draws' multiplicities
    uc = UnitCounts([f"i{k}" for k in range(len(y))], ("x",), np.ones((len(y), 1)), {"g": list(y)})
    w = engine.weights(uc, Resampling("stratified", "items", 4, by="g"), n_resamples=2000)
    assert np.array_equal(w, engine.multiplicities(idx, len(y)))
    for s, size in sizes.items():
        assert (w[:, y == s].sum(axis=1) == size).all()


def binomial_fit(multiplicities: np.ndarray, n: int, p: float) -> float:
    """Chi-square p-value of a histogram of multiplicities against Binomial(n, p), the sparse tail (expected < 5)
    pooled into one cell."""
    k = np.arange(n + 1)
    observed = np.bincount(multiplicities.ravel(), minlength=n + 1)[: n + 1].astype(float)
    expected = stats.binom.pmf(k, n, p) * multiplicities.size
    keep = expected >= 5
    obs, exp = observed[keep], expected[keep]
    if (~keep).any():
        obs, exp = np.append(obs, observed[~keep].sum()), np.append(exp, expected[~keep].sum())
    return float(stats.chisquare(obs, exp * obs.sum() / exp.sum()).pvalue)


def test_an_items_multiplicity_is_binomial_with_mean_one():
    """Within a stratum of n_s items drawn n_s times with replacement, an item appears Binomial(n_s, 1/n_s) times:
    over 4,000 resamples every item is drawn about 4,000 times (chi-square against equal shares within its
    stratum) and the multiplicities' histogram fits the binomial pmf (chi-square)."""
    y = np.array([0] * 6 + [1] * 25)
    b = 4000
    w = engine.multiplicities(bootstrap.stratified_indices(y, b, seed=8), len(y))
    for s in (0, 1):
        cols = w[:, y == s]
        n_s = cols.shape[1]
        assert cols.mean() == pytest.approx(1.0)                            # rows sum to n_s: exactly 1 on average
        assert stats.chisquare(cols.sum(axis=0)).pvalue > 1e-3              # no item favoured
        assert binomial_fit(cols, n_s, 1 / n_s) > 1e-3


def test_seed_draws_are_with_replacement_and_uniform():
    w = seeds.seed_multiplicities(5, 4000, seed=12)
    assert (w.sum(axis=1) == 5).all() and w.min() >= 0
    assert stats.chisquare(w.sum(axis=0)).pvalue > 1e-3
    assert binomial_fit(w, 5, 0.2) > 1e-3


def test_pairs_are_every_combination_once():
    """The family Holm adjusts: each unordered pair of models once, per metric."""
    comp = compare.compare_paired(paired_on(THREE_MULT, THREE))
    for metric in ("accuracy", "error"):
        got = comp.pairs[comp.pairs["metric"] == metric][["model_a", "model_b"]].apply(tuple, axis=1).tolist()
        assert got == list(combinations("ABC", 2))
