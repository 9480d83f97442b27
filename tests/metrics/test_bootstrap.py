import numpy as np
import pytest
from sklearn.metrics import f1_score

from atlaslib.metrics import bootstrap as B
from tests.metrics.reference import macro_f1


def test_stratified_resamples_keep_class_counts_and_stay_in_class():
    y = np.array([1] * 7 + [0] * 30)
    idx = B.stratified_indices(y, 200, seed=5)
    assert idx.shape == (200, 37)
    for row in idx:
        assert (y[row] == 1).sum() == 7
        assert (y[row] == 0).sum() == 30
    assert len(np.unique(idx)) > 30  # it really resamples


def test_same_seed_same_resamples_and_different_seed_differs():
    y = np.array([0, 1] * 20)
    assert np.array_equal(B.stratified_indices(y, 50, 1), B.stratified_indices(y, 50, 1))
    assert not np.array_equal(B.stratified_indices(y, 50, 1), B.stratified_indices(y, 50, 2))


def test_vectorised_interval_equals_sklearn_loop_on_same_indices():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 120)
    p = np.where(rng.random(120) < 0.75, y, 1 - y)
    idx = B.stratified_indices(y, 300, seed=9)
    fast_lo, fast_hi = B.percentile_ci(B.resampled(macro_f1, idx, y, p))
    loop = [f1_score(y[r], p[r], average="macro", labels=[0, 1], zero_division=0) for r in idx]
    lo, hi = np.quantile(loop, [0.025, 0.975])
    assert fast_lo == pytest.approx(lo) and fast_hi == pytest.approx(hi)
    assert macro_f1(y, p) == pytest.approx(f1_score(y, p, average="macro"))


def test_cluster_resamples_take_whole_groups():
    groups = np.array(["a"] * 3 + ["b"] * 1 + ["c"] * 5)
    for idx in B.cluster_indices(groups, 100, seed=2):
        drawn = groups[idx]
        for g in set(drawn):
            # every drawn group appears a multiple of its full size
            assert (drawn == g).sum() % (groups == g).sum() == 0


def test_percentile_ci_ignores_nan():
    assert B.percentile_ci([np.nan, 1.0, 1.0]) == (1.0, 1.0)
    assert all(np.isnan(B.percentile_ci([np.nan])))


def test_resampled_values_are_those_behind_the_intervals():
    from atlaslib.cards import record
    from atlaslib.cards.negex import SCORING, counts
    from atlaslib.metrics import engine

    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 80)
    p = np.where(rng.random(80) < 0.8, y, 1 - y)
    s = rng.random(80)
    word = ("affirmed", "negated")
    recs = [record(f"i{k}", word[a], word[b], float(x)) for k, (a, b, x) in enumerate(zip(y, p, s))]
    uc = counts({"predictions": recs})
    m = engine.evaluate(SCORING, uc, "probe", n_resamples=200, seed=4)
    r = engine.samples(SCORING, uc, "probe", n_resamples=200, seed=4)
    assert set(r) == set(m)
    for name, values in r.items():
        assert len(values) == 200
        assert (m[name]["ci_low"], m[name]["ci_high"]) == pytest.approx(B.percentile_ci(values))
