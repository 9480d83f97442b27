"""Exact and cluster intervals: Clopper-Pearson against scipy, the cluster bootstrap against concatenated
draws, a seeded coverage simulation, and undefined metrics rendered as n/a."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import beta, binomtest

from atlaslib.metrics import bootstrap as B
from atlaslib.metrics import intervals as I


@pytest.mark.parametrize("k,n", [(0, 21), (21, 21), (7, 30), (1, 207), (0, 132)])
def test_clopper_pearson_equals_scipy_binomtest(k, n):
    ci = binomtest(k, n).proportion_ci(0.95, method="exact")
    lo, hi = I.clopper_pearson(k, n)
    assert lo == pytest.approx(ci.low, abs=1e-12) and hi == pytest.approx(ci.high, abs=1e-12)


def test_one_sided_upper_bound():
    # 0 of n: closed form 1 - 0.05**(1/n) (rule of three: about 3/n)
    assert I.clopper_pearson_upper(0, 132) == pytest.approx(1 - 0.05 ** (1 / 132))
    assert I.clopper_pearson_upper(4, 50) == pytest.approx(beta.ppf(0.95, 5, 46))
    ci = binomtest(4, 50, alternative="less").proportion_ci(0.95, method="exact")
    assert I.clopper_pearson_upper(4, 50) == pytest.approx(ci.high)
    assert I.clopper_pearson_upper(5, 5) == 1.0 and np.isnan(I.clopper_pearson_upper(0, 0))
    with pytest.raises(ValueError, match="k = 3 exceeds n = 2"):
        I.clopper_pearson(3, 2)


def test_cluster_interval_equals_concatenated_draws():
    rng = np.random.default_rng(1)
    groups = np.repeat([f"s{g}" for g in range(25)], rng.integers(1, 6, 25))
    y = (rng.random(len(groups)) < 0.4).astype(int)
    out = I.cluster_proportion_ci(y, groups, n_resamples=200, seed=9)
    loop = [y[idx].mean() for idx in B.cluster_indices(groups, 200, 9)]
    np.testing.assert_allclose(out["resamples"], loop, rtol=0, atol=1e-15)
    assert (out["ci_low"], out["ci_high"]) == pytest.approx(B.percentile_ci(loop))
    assert out["n_clusters"] == 25 and out["few_clusters"] is True      # < 30 clusters: flagged


def test_the_cards_cluster_interval_is_the_confusion_formulas_on_cluster_resamples():
    """A card's extra cluster resampling (NegEx's sentences) through the engine: the point values are the
    classification functions', the interval a loop over the same cluster draws."""
    from atlaslib.cards import negex
    from atlaslib.metrics import engine
    from tests.metrics import reference as C

    rng = np.random.default_rng(2)
    groups = np.repeat(np.arange(40), 3)
    y = (rng.random(120) < 0.3).astype(int)
    p = np.where(rng.random(120) < 0.8, y, 1 - y)
    cell = {"predictions": [{"item_id": f"i{k}", "gold": negex.LABELS[a], "pred": negex.LABELS[b], "score": None,
                             "sentence_key": int(g)} for k, (a, b, g) in enumerate(zip(y, p, groups))]}
    uc = negex.counts(cell)
    rs = engine.Resampling("clusters", "sentences", 4, by="sentence", n_resamples=100)
    f1 = engine.extra_interval(negex.SCORING, uc, rs, "macro_f1")
    sens = engine.extra_interval(negex.SCORING, uc, rs, "sensitivity")
    assert f1["value"] == C.macro_f1(y, p) and engine.point(negex.SCORING, uc, "precision") == C.precision(y, p)
    loop = [C.sensitivity(y[i], p[i]) for i in B.cluster_indices(groups, 100, 4)]
    assert (sens["ci_low"], sens["ci_high"]) == pytest.approx(B.percentile_ci(loop))
    assert f1["n_clusters"] == 40 and not f1["n_clusters"] < I.FEW_CLUSTERS     # not flagged as few clusters


def test_coverage_simulation_cluster_covers_item_undercovers():
    """500 seeded simulations of 100 clusters x 8 items, true proportion 0.3, within-cluster correlation
    0.3: the cluster interval covers 0.3 in 92-98 % of them, the item interval clearly less."""
    sim = I.simulate_coverage(500, icc=0.3)
    assert 0.92 <= sim["cluster"] <= 0.98, sim
    assert sim["item"] < 0.85, sim


def test_undefined_metric_is_na_never_zero():
    from atlaslib.cards import negex, record
    from atlaslib.pages.card_pages import fmt_metric

    gold = ["negated", "affirmed", "affirmed", "negated", "affirmed", "affirmed", "affirmed", "affirmed"]
    from atlaslib.cards.run import CardRun

    m = CardRun(negex, "atlas-n100-v1", "m", "zero_shot").score([record(f"i{k}", g, "affirmed") for k, g in enumerate(gold)],
                                                                n_resamples=50)
    assert m["precision_zero_shot"]["value"] is None
    assert fmt_metric(m["precision_zero_shot"]).startswith("n/a (undefined: nothing predicted positive")
    assert m["macro_f1_zero_shot"]["value"] == pytest.approx(6 / 7 / 2)     # F1 affirmed 12/14, F1 negated 0


def test_nli_certify_gate_uses_the_one_sided_upper_bound():
    from atlaslib.cards.nli_negation.report import run_nli_negation_challenge
    from atlaslib.cards.nli_negation.corpus import default_nli_negation_cases

    cases = default_nli_negation_cases()
    perfect = [c.gold_label for c in cases]
    n = sum(c.gold_label != "entailment" for c in cases)
    plain = run_nli_negation_challenge(perfect, max_false_entailment_rate=0.05)
    assert plain.gate.false_entailment_gate_passed and not plain.gate.certify
    # 0 false entailments among n certify only a rate below 1 - 0.05**(1/n)
    bound = 1 - 0.05 ** (1 / n)
    cert = run_nli_negation_challenge(perfect, max_false_entailment_rate=0.05, certify=True)
    assert cert.gate.false_entailment_upper_bound == pytest.approx(bound)
    assert cert.gate.false_entailment_gate_passed is (bound < 0.05)
    assert not run_nli_negation_challenge(perfect, max_false_entailment_rate=bound * 0.99,
                                          certify=True).gate.false_entailment_gate_passed
    assert not run_nli_negation_challenge(perfect, certify=True).gate.passed      # a ceiling of 0 is never certified
    one_fe = list(perfect)
    one_fe[next(i for i, c in enumerate(cases) if c.gold_label != "entailment")] = "entailment"
    r = run_nli_negation_challenge(one_fe, max_false_entailment_rate=0.05, certify=True)
    ci = binomtest(1, n, alternative="less").proportion_ci(0.95, method="exact")
    assert r.gate.false_entailment_upper_bound == pytest.approx(ci.high)
    assert r.gate.false_entailment_gate_passed is (ci.high < 0.05)
    assert f"{ci.high:.3f}" in r.to_markdown()
