"""Error rates by simulation, on the engine's own paths: the leaderboard's intervals (``engine.evaluate`` under
NegEx's declared scoring: items stratified by gold, 1,000 resamples) cover the true values at about 95 %; the
paired-bootstrap p-value (``compare.compare_paired``) rejects a true null at about 5 %; Holm's adjustment keeps
the family-wise error rate at 5 %, exactly its value on independent null p-values and no more than it on the
engine's six pairs of four equal models.

Every simulation is seeded, with a fixed replicate count R; its tolerance is the binomial one: a rate observed
in R replicates whose true rate is the nominal q lies in ``binom.interval(0.998, R, q) / R`` (one time in 500
outside it by chance; the seeds are fixed, so a run either always passes or always fails)."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom

from atlaslib.cards import scoring_of
from atlaslib.metrics import compare, engine

#: the tolerance's coverage: a nominal rate is accepted when the observed one is in its 99.8 % binomial interval
TOLERANCE = 0.998
NEGEX = scoring_of("negex")
#: a NegEx-like test set: 120 negated and 80 affirmed items; a model is right on a negated item with
#: probability 0.85 (its sensitivity) and on an affirmed one with 0.90 (its specificity)
N_POS, N_NEG, SENS, SPEC = 120, 80, 0.85, 0.90
GOLD = np.r_[np.ones(N_POS, bool), np.zeros(N_NEG, bool)]
IDS = [f"item-{k}" for k in range(len(GOLD))]


def accepted(replicates: int, nominal: float) -> tuple[float, float]:
    """The rates the binomial tolerance accepts for ``replicates`` replicates at the ``nominal`` rate."""
    lo, hi = binom.interval(TOLERANCE, replicates, nominal)
    return lo / replicates, hi / replicates


def simulated_run(rng) -> engine.UnitCounts:
    right = np.where(GOLD, rng.random(GOLD.size) < SENS, rng.random(GOLD.size) < SPEC)
    pred = np.where(right, GOLD, ~GOLD)
    c = np.stack([GOLD & pred, ~GOLD & pred, ~GOLD & ~pred, GOLD & ~pred, GOLD], axis=1)
    return engine.UnitCounts(IDS, NEGEX.columns, c, {"gold": GOLD.astype(int).tolist(), "sentence": IDS},
                             None, {"roc_auc": "no scores"})


def test_leaderboard_intervals_cover_the_true_values_at_their_nominal_level():
    R = 400
    rng = np.random.default_rng(20261205)
    truth = {"sensitivity": SENS, "specificity": SPEC}
    covered = dict.fromkeys(truth, 0)
    for r in range(R):
        cell = engine.evaluate(NEGEX, simulated_run(rng), "zero_shot", seed=r)   # a new bootstrap seed each time
        for name, t in truth.items():
            m = cell[f"{name}_zero_shot"]
            covered[name] += m["ci_low"] <= t <= m["ci_high"]
    lo, hi = accepted(R, 0.95)       # R = 400: 0.9125 to 0.98
    for name, k in covered.items():
        assert lo <= k / R <= hi, (name, k / R, (lo, hi))


def test_paired_bootstrap_p_value_rejects_a_true_null_at_its_nominal_rate():
    """Two models of the same sensitivity and specificity (so the same macro F1), each right or wrong on its own:
    the comparison's paired-bootstrap p-value of macro F1 (the test that decides it) is below 0.05 in about 5 %
    of the replicates."""
    R = 300
    rng = np.random.default_rng(7)
    rejected = 0
    for r in range(R):
        p = engine.paired(NEGEX, "negex", "sim", {"A": simulated_run(rng), "B": simulated_run(rng)}, seed=r)
        row = compare.compare_paired(p).pairs.set_index("metric").loc["macro_f1"]
        assert row["test"] == "paired bootstrap"
        rejected += row["p_bootstrap"] < compare.ALPHA
    lo, hi = accepted(R, compare.ALPHA)     # R = 300: 0.017 to 0.093
    assert lo <= rejected / R <= hi, (rejected / R, (lo, hi))


def test_holm_family_wise_error_rate_on_independent_null_p_values_is_its_nominal_one():
    """m = 6 independent uniform p-values (all nulls true): Holm rejects any exactly when the smallest is at most
    α/m, so its family-wise error rate is 1 − (1 − α/m)^m = 0.0489 for α = 0.05."""
    R, m, alpha = 4000, 6, compare.ALPHA
    p = np.random.default_rng(11).random((R, m))
    any_rejected = sum(bool((compare.holm(row) < alpha).any()) for row in p)
    nominal = 1 - (1 - alpha / m) ** m
    lo, hi = accepted(R, nominal)       # R = 4,000: 0.039 to 0.060
    assert lo <= any_rejected / R <= hi, (any_rejected / R, (lo, hi))


def test_holm_keeps_the_family_wise_error_rate_of_the_engines_pairs_under_the_null():
    """Four models of equal sensitivity and specificity: six pairs, whose paired-bootstrap p-values are
    dependent (each model is in three pairs); Holm holds the family-wise error rate at or below α under any
    dependence, so a replicate where any macro-F1 pair is called significant happens at most about 5 % of
    the time (the binomial interval's upper end)."""
    R = 120
    rng = np.random.default_rng(13)
    any_significant = 0
    for r in range(R):
        p = engine.paired(NEGEX, "negex", "sim", {lab: simulated_run(rng) for lab in "ABCD"}, seed=r)
        pairs = compare.compare_paired(p).pairs
        f1 = pairs[pairs["metric"] == "macro_f1"]
        assert len(f1) == 6
        any_significant += bool(f1["significant"].any())
    _, hi = accepted(R, compare.ALPHA)   # R = 120: at most 0.117
    assert any_significant / R <= hi, (any_significant / R, hi)
