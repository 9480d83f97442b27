"""Brier and ECE against hand-computed values and scikit-learn; equal-mass reliability bins, and equal-width ones
against scikit-learn's ``calibration_curve``."""
from __future__ import annotations

import numpy as np
import pytest
from sklearn.calibration import calibration_curve
from sklearn.metrics import brier_score_loss

from atlaslib.analysis import calibration as C
from atlaslib.metrics import bootstrap

from .cells import negex_cell



def equal_mass_bins(s, n_bins: int = C.N_BINS) -> list[np.ndarray]:
    """The reference for the equal-mass bins: the stable score order cut by ``np.array_split`` (empty bins
    dropped)."""
    order = np.argsort(np.asarray(s, float), kind="stable")
    return [b for b in np.array_split(order, n_bins) if len(b)]

def test_brier_equals_hand_value_and_sklearn():
    y = np.array([1, 0, 1, 0])
    s = np.array([0.9, 0.2, 0.4, 0.0])
    hand = (0.1 ** 2 + 0.2 ** 2 + 0.6 ** 2 + 0.0) / 4          # = 0.1025
    assert C.brier(y, s) == pytest.approx(0.1025) == pytest.approx(hand)
    rng = np.random.default_rng(0)
    y2, s2 = rng.integers(0, 2, 57), rng.random(57)
    assert C.brier(y2, s2) == pytest.approx(brier_score_loss(y2, s2))


def test_ece_equals_hand_value_with_equal_mass_bins():
    # 20 items -> 10 bins of 2, in score order
    s = np.linspace(0.025, 0.975, 20)
    y = np.zeros(20)
    y[[1, 3, 19, 18, 10]] = 1
    hand = 0.0
    for b in range(10):
        idx = [2 * b, 2 * b + 1]
        hand += (2 / 20) * abs(y[idx].mean() - s[idx].mean())
    assert C.ece(y, s) == pytest.approx(hand)
    # hand value written out for the first bins: |0.5 - 0.05| and |0.5 - 0.15| ... and a perfect score has ECE 0
    assert C.ece(np.array([0, 0, 1, 1] * 5), np.array([0, 0, 1, 1] * 5, float)) == pytest.approx(0.0)
    # the vectorised form bins every row on its own scores
    rows_y = np.stack([y, y[::-1]])
    rows_s = np.stack([s, s])
    assert C.ece(rows_y, rows_s) == pytest.approx([C.ece(y, s), C.ece(y[::-1], s)])


@pytest.mark.parametrize("n", [20, 25, 1432])
def test_reliability_bins_hold_equal_counts(n):
    rng = np.random.default_rng(n)
    s = rng.random(n)
    s[:5] = 0.5                                                   # ties stay in one stable order
    y = (rng.random(n) < s).astype(int)
    r = C.reliability(y, s)
    assert len(r) == C.N_BINS == 10 and r["n"].sum() == n
    assert r["n"].max() - r["n"].min() <= (0 if n % 10 == 0 else 1)
    assert (np.diff(r["mean_score"]) >= 0).all()
    assert r["observed_rate"].tolist() == pytest.approx(
        [y[idx].mean() for idx in equal_mass_bins(s)])


def test_calibration_table_intervals_use_the_cards_stratified_resamples():
    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 60)
    s = np.clip(y * 0.6 + rng.random(60) * 0.4, 0, 1)
    gold = ["negated" if v else "affirmed" for v in y]
    probe = negex_cell("probe-model", gold, gold, score=list(s))
    probe["spec"]["parameters"] = {"n_resamples": 300}              # the run's own resample count is used
    cells = [probe, negex_cell("rules", gold, gold)]                # labels only
    t = C.calibration_table(cells).set_index("run")
    row = t.loc["probe-model (probe)"]
    assert row["brier"] == pytest.approx(brier_score_loss(y, s))
    idx = bootstrap.stratified_indices(y, 300, 7)                   # the cell's bootstrap seed
    lo, hi = bootstrap.percentile_ci([C.ece(y[i], s[i]) for i in idx[:]])
    assert (row["ece_low"], row["ece_high"]) == pytest.approx((lo, hi))
    assert t.loc["rules (zero_shot)", "note"] == C.NO_SCORES == "n/a (labels only)"
    assert t.loc["rules (zero_shot)", "brier"] is None or np.isnan(t.loc["rules (zero_shot)", "brier"])


def test_ece_is_biased_upward_at_small_n_and_the_debiased_estimate_removes_it():
    """A calibrated run (y ~ Bernoulli(s)) has true calibration error 0. Its ECE at n = 50 is clearly
    positive on average; the debiased ECE averages near 0 at every n, and the noise floor shrinks with n."""
    rng = np.random.default_rng(11)
    raw, debiased, floors = {}, {}, {}
    for n, reps in ((50, 60), (2000, 6)):
        r, d, f = [], [], []
        for k in range(reps):
            s = rng.random(n)
            y = (rng.random(n) < s).astype(float)
            r.append(C.ece(y, s))
            f.append(C.ece_if_calibrated(s, seed=k))
            d.append(C.ece_debiased(y, s, seed=k))
        raw[n], debiased[n], floors[n] = np.mean(r), np.mean(d), np.mean(f)
    assert raw[50] > 0.08 and raw[2000] < 0.03                  # upward bias, larger at small n
    assert abs(debiased[50]) < 0.02 and abs(debiased[2000]) < 0.005
    assert floors[50] > 4 * floors[2000]
    # a miscalibrated run keeps its error: scores pushed to the edges, outcomes from the true rate
    s = rng.random(2000)
    y = (rng.random(2000) < s).astype(float)
    pushed = np.clip(s + 0.2 * np.sign(s - 0.5), 0, 1)
    assert C.ece_debiased(y, pushed) > 0.1


def test_noise_floor_by_hand_for_one_bin():
    """One bin of n items all scored p: ECE = |k/n − p| with k ~ Binomial(n, p); its mean is computed
    exactly from the binomial probabilities and the consistency estimate agrees within Monte-Carlo error."""
    from scipy.stats import binom

    n, p = 12, 0.3
    exact = sum(binom.pmf(k, n, p) * abs(k / n - p) for k in range(n + 1))
    got = C.ece_if_calibrated(np.full(n, p), n_bins=1, n_draws=20000, seed=5)
    assert got == pytest.approx(exact, abs=0.003)


@pytest.mark.parametrize("n", [7, 57, 400])
def test_equal_width_bins_are_scikit_learns_uniform_calibration_curve(n):
    rng = np.random.default_rng(n)
    s = np.round(rng.random(n), 1 if n == 57 else 3)               # n = 57: many scores on the bins' edges
    y = (rng.random(n) < s).astype(int)
    r = C.reliability(y, s, binning="width")
    prob_true, prob_pred = calibration_curve(y, s, n_bins=10, strategy="uniform")
    assert r["observed_rate"].tolist() == pytest.approx(prob_true.tolist())
    assert r["mean_score"].tolist() == pytest.approx(prob_pred.tolist())
    assert r["n"].sum() == n
    hand = float(np.sum(r["n"] / n * np.abs(prob_true - prob_pred)))
    assert C.ece(y, s, binning="width") == pytest.approx(hand)
    rows = C.ece(np.stack([y, y[::-1]]), np.stack([s, s]), binning="width")   # each row binned on its own
    assert rows == pytest.approx([hand, C.ece(y[::-1], s, binning="width")])


def test_mass_bin_ids_are_the_equal_mass_bins():
    rng = np.random.default_rng(4)
    for n in (3, 10, 25, 101):
        s = np.round(rng.random(n), 1)
        ids = C.bin_ids(s, binning="mass")
        assert [np.flatnonzero(ids == k).tolist() for k in range(ids.max() + 1)] == \
            [sorted(b.tolist()) for b in equal_mass_bins(s)]


@pytest.mark.parametrize("binning", C.BINNINGS)
def test_brier_decomposition_adds_up_and_is_hand_computed_on_one_score_per_bin(binning):
    rng = np.random.default_rng(5)
    s = rng.random(80)
    y = (rng.random(80) < s).astype(int)
    d = C.brier_decomposition(y, s, binning=binning)
    assert d["brier"] == pytest.approx(brier_score_loss(y, s))
    assert d["reliability"] - d["resolution"] + d["uncertainty"] + d["within_bin"] == pytest.approx(d["brier"])
    # scores 0.25 (y: 1, 0) and 0.85 (y: 1, 1): one score per bin, so within-bin = 0
    y2, s2 = np.array([1, 0, 1, 1]), np.array([0.25, 0.25, 0.85, 0.85])
    d2 = C.brier_decomposition(y2, s2, n_bins=2, binning=binning)
    assert d2["reliability"] == pytest.approx((2 * 0.25 ** 2 + 2 * 0.15 ** 2) / 4)
    assert d2["resolution"] == pytest.approx((2 * 0.25 ** 2 + 2 * 0.25 ** 2) / 4)
    assert d2["uncertainty"] == pytest.approx(0.75 * 0.25) and d2["within_bin"] == pytest.approx(0.0)


def test_an_unknown_binning_is_named():
    with pytest.raises(ValueError, match="binning must be one of mass, width, got 'quantile'"):
        C.ece([0, 1], [0.2, 0.8], binning="quantile")


def test_the_course_and_the_pages_draw_reliability_one_way():
    """One drawing for both (:func:`C.draw_reliability`): each bin's point is the table's (mean score,
    observed rate), a run's name is drawn as text even when it reads as math, and the course's diagram is the
    same drawing with its own axis names."""
    from atlaslib import course

    rng = np.random.default_rng(3)
    s = rng.random(200)
    y = (rng.random(200) < s).astype(int)
    table = C.reliability(y, s, binning="width")
    fig = course.plot_reliability({"$x$ run": table}, ylabel="observed share right")
    ax = fig.axes[0]
    points = ax.collections[0].get_offsets()
    np.testing.assert_allclose(points, table[["mean_score", "observed_rate"]].to_numpy())
    legend = [t for t in ax.get_legend().get_texts() if t.get_text() == "$x$ run"]
    assert legend and not legend[0].get_parse_math()
    assert ax.get_ylabel() == "observed share right" and ax.get_xlabel() == "mean forecast in the bin"


def test_a_run_that_records_every_labels_probability_gets_its_top_label_calibration():
    """The NLI card has no positive label; its SmolLM2 run records each label's probability per item, yet its
    failures page said "n/a (labels only)" while the course computed the calibration from the same cell. The row
    is the probability of the answered label against whether the answer is right (top-label), by hand, the
    course's own frame giving the same pairs."""
    from sklearn.metrics import brier_score_loss

    from atlaslib.course import confidence_frame

    labels = ("entailment", "neutral", "contradiction")
    rng = np.random.default_rng(5)
    recs = []
    for i in range(40):
        p = rng.dirichlet([1, 1, 1])
        pred = labels[int(np.argmax(p))]
        gold = pred if i % 3 else labels[(labels.index(pred) + 1) % 3]
        recs.append({"item_id": f"n{i:02d}", "gold": gold, "pred": pred,
                     "scores": {lab: float(q) for lab, q in zip(labels, p)}})
    cell = {"card": "nli_negation", "version": "builtin-v1", "model": "lm", "protocol": "zero_shot", "status": "ok",
            "predictions": recs, "seeds": {"bootstrap": 3},
            "spec": {"card": "nli_negation", "version": "builtin-v1", "model": "lm", "protocol": "zero_shot",
                     "parameters": {"n_resamples": 200}}}
    y, s, kind = C.scored(cell)
    assert kind == "top-label"
    frame = confidence_frame(cell)
    assert y.tolist() == frame["y"].tolist() and s.tolist() == frame["p"].tolist()
    row = C.calibration_row(cell)
    assert row["note"] == "" and row["of"] == C.KINDS["top-label"]
    assert row["brier"] == pytest.approx(brier_score_loss(y, s))
    idx = bootstrap.stratified_indices(np.zeros(40, dtype=int), 200, 3)     # items resampled
    assert (row["ece_low"], row["ece_high"]) == pytest.approx(bootstrap.percentile_ci([C.ece(y[i], s[i]) for i in idx]))
    # labels only (no probabilities): still n/a
    bare = {**cell, "predictions": [{k: v for k, v in r.items() if k != "scores"} for r in recs]}
    assert C.calibration_row(bare)["note"] == C.NO_SCORES
