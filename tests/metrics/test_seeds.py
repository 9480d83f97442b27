"""The two-level (seeds × items) bootstrap on hand-built per-seed per-unit counts: with zero seed variance it is
the item interval, with zero item variance the seed percentile interval; the variance split, the paired
difference and deepsig's almost stochastic order on known cases."""
from __future__ import annotations

import numpy as np
import pytest

from atlaslib.metrics import bootstrap, seeds


def accuracy(t):
    t = np.asarray(t, dtype=float)
    return t[..., 0] / t[..., 1]


def unit_counts(correct):
    """(units, 2): [correct, 1] per unit."""
    c = np.asarray(correct, dtype=np.int64)
    return np.stack([c, np.ones_like(c)], axis=1)


def item_mult(n_units, n_resamples=400, seed=3):
    idx = np.random.default_rng(seed).integers(0, n_units, size=(n_resamples, n_units))
    return np.stack([np.bincount(r, minlength=n_units) for r in idx])


def two_level_from_counts(counts, mult, metric, **kw) -> dict:
    """:func:`atlaslib.metrics.seeds.two_level` of ``metric`` on per-seed per-unit counts ``(S, U, k)`` under item
    multiplicities ``(B, U)``: per seed its point ``metric(counts[s].sum(0))`` and resamples
    ``metric(mult @ counts[s])``."""
    c, m = np.asarray(counts), np.asarray(mult)
    points = np.array([float(metric(c[s].sum(0))) for s in range(c.shape[0])])
    values = np.stack([np.asarray(metric(m @ c[s]), dtype=float) for s in range(c.shape[0])], axis=1)
    return seeds.two_level(points, values, **kw)


def test_zero_seed_variance_gives_the_item_interval():
    rng = np.random.default_rng(0)
    correct = rng.random(60) < 0.7
    counts = np.stack([unit_counts(correct)] * 5)               # five seeds, identical models
    mult = item_mult(60)
    out = two_level_from_counts(counts, mult, accuracy, seeds=[1, 2, 3, 4, 5])
    # the item interval of one model, computed directly on resampled items
    idx_values = [np.mean(np.repeat(correct, m)) for m in mult]
    lo, hi = bootstrap.percentile_ci(idx_values)
    assert out["value"] == pytest.approx(correct.mean())
    assert (out["ci_low"], out["ci_high"]) == pytest.approx((lo, hi), abs=1e-12)
    assert out["var_seeds"] == 0 and out["share_seeds"] == 0 and out["share_items"] == 1
    assert out["seed_min"] == out["seed_max"] == pytest.approx(correct.mean())
    assert all((p["ci_low"], p["ci_high"]) == pytest.approx((lo, hi)) for p in out["per_seed"])


def test_zero_item_variance_gives_the_seed_percentile_interval():
    # every unit of seed s is alike (accuracy a_s on each unit: 10 units of (a_s*20 correct of 20)), so no item
    # resample changes a seed's value; only the draw of seeds moves the mean
    acc = np.array([0.55, 0.60, 0.70, 0.75, 0.90])
    counts = np.stack([np.tile([[round(a * 20), 20]], (10, 1)) for a in acc])
    mult = item_mult(10)
    wmult = seeds.seed_multiplicities(5, mult.shape[0], seed=11)
    out = two_level_from_counts(counts, mult, accuracy, seed_mult=wmult)
    # the seed bootstrap of the mean, by hand: seeds drawn as wmult says, items untouched
    means = [np.mean(np.repeat(acc, w)) for w in wmult]
    lo, hi = np.quantile(means, [0.025, 0.975])
    assert out["value"] == pytest.approx(acc.mean())
    assert (out["ci_low"], out["ci_high"]) == pytest.approx((lo, hi), abs=1e-12)
    assert out["var_items"] == pytest.approx(0, abs=1e-20) and out["share_seeds"] == pytest.approx(1)
    assert (out["seed_min"], out["seed_max"]) == pytest.approx((0.55, 0.90))
    assert all(p["ci_low"] == p["ci_high"] == pytest.approx(a) for p, a in zip(out["per_seed"], acc))


def test_seed_multiplicities_draw_seeds_with_replacement():
    w = seeds.seed_multiplicities(5, 2000, seed=1)
    assert w.shape == (2000, 5) and (w.sum(1) == 5).all() and (w >= 0).all()
    assert np.mean(w[:, 0]) == pytest.approx(1, abs=0.05)        # each seed drawn once per resample on average
    assert np.mean((w == 1).all(1)) == pytest.approx(120 / 3125, abs=0.02)   # 5!/5^5: each seed once


def test_both_levels_widen_the_interval_and_split_the_variance():
    rng = np.random.default_rng(5)
    base = rng.random(80) < 0.6
    flips = [rng.random(80) < 0.15 for _ in range(5)]
    counts = np.stack([unit_counts(base ^ f) for f in flips])
    mult = item_mult(80)
    out = two_level_from_counts(counts, mult, accuracy)
    one = out["per_seed"][0]
    assert out["ci_high"] - out["ci_low"] > 0
    assert 0 < out["share_seeds"] < 1 and out["share_seeds"] + out["share_items"] == pytest.approx(1)
    assert out["value"] == pytest.approx(np.mean([(base ^ f).mean() for f in flips]))
    assert one["value"] == pytest.approx((base ^ flips[0]).mean())


def test_paired_difference_of_a_row_with_itself_is_zero_and_shapes_are_checked():
    rng = np.random.default_rng(2)
    v = rng.random((300, 5))
    d = seeds.paired_difference(v, v)
    assert d["ci_low"] < 0 < d["ci_high"]          # independent seed draws: not identically zero
    same = seeds.paired_difference(v[:, :1], v[:, :1])    # one model each: the same item draws, difference 0
    assert same["ci_low"] == same["ci_high"] == 0
    with pytest.raises(seeds.SeedError, match="300 and 10 resamples"):
        seeds.paired_difference(v, v[:10])
    # one row's seeds read two ways: one seed draw for both, each seed against itself (exactly 0 here)
    assert seeds.paired_difference(v, v, same_seeds=True)["ci_low"] == 0 == seeds.paired_difference(
        v, v, same_seeds=True)["ci_high"]
    with pytest.raises(seeds.SeedError, match="5 and 4 seeds; same_seeds compares each seed with itself"):
        seeds.paired_difference(v, v[:, :4], same_seeds=True)
    with pytest.raises(seeds.SeedError, match="5 per-seed values but resamples for 4 seeds"):
        seeds.two_level(np.zeros(5), v[:, :4])


def test_almost_stochastic_order_on_clearly_ordered_and_equal_rows():
    a, b = [0.81, 0.83, 0.82, 0.84, 0.80], [0.61, 0.63, 0.60, 0.62, 0.64]
    kw = {"seed": 1, "num_bootstrap_iterations": 100}      # deepsig's default is 1000; 100 keeps the test fast
    better = seeds.almost_stochastic_order(a, b, **kw)
    assert better["eps_min"] < seeds.ASO_THRESHOLD and better["a_better"] and better["threshold"] == 0.2
    worse = seeds.almost_stochastic_order(b, a, **kw)
    assert worse["eps_min"] > 0.5 and not worse["a_better"]
    with pytest.raises(seeds.SeedError, match="at least two scores"):
        seeds.almost_stochastic_order([0.8], b)


def test_seeded_metrics_mean_interval_and_a_seed_with_an_undefined_metric():
    rng = np.random.default_rng(9)
    V = rng.normal(0.7, 0.02, size=(500, 5))
    per_metrics = [{"acc_finetune": {"value": 0.70 + 0.01 * k, "ci_low": float(np.quantile(V[:, k], 0.025)),
                                     "ci_high": float(np.quantile(V[:, k], 0.975))},
                    "prec_finetune": ({"value": None, "ci_low": None, "ci_high": None, "reason": "undefined: no "
                                      "positive prediction"} if k == 3 else {"value": 0.5, "ci_low": 0.4,
                                                                             "ci_high": 0.6})}
                   for k in range(5)]
    per_res = [{"acc_finetune": V[:, k], "prec_finetune": V[:, k]} for k in range(5)]
    out = seeds.seeded_metrics([11, 12, 13, 14, 15], per_metrics, per_res, seed=4)
    acc = out["acc_finetune"]
    assert acc["value"] == pytest.approx(0.72) and acc["seeds"]["n_seeds"] == 5
    assert (acc["seeds"]["seed_min"], acc["seeds"]["seed_max"]) == pytest.approx((0.70, 0.74))
    assert acc["seeds"]["single_seed"]["seed"] == 11 and acc["seeds"]["single_seed"]["value"] == 0.70
    direct = seeds.two_level([0.70, 0.71, 0.72, 0.73, 0.74], V, seed=4)
    assert (acc["ci_low"], acc["ci_high"]) == (direct["ci_low"], direct["ci_high"])
    assert out["prec_finetune"]["value"] is None and "(seed 14)" in out["prec_finetune"]["reason"]
