"""The scoring engine (atlaslib.metrics.engine) against independent references: sklearn on the resampled items,
scipy's and statsmodels' exact (Clopper–Pearson) intervals, index-by-index loops; the cards' declared scorings on
their own cells."""
from __future__ import annotations

import doctest

import numpy as np
import pytest
from sklearn.metrics import f1_score, roc_auc_score

from atlaslib import results
from atlaslib.metrics import bootstrap, classification, engine
from atlaslib.metrics.engine import Metric, Resampling, Scoring, SliceRule, UnitCounts, ratio


def test_doctests_of_the_formulas():
    for module in (engine, classification):
        failed, attempted = doctest.testmod(module)
        assert attempted > 0 and failed == 0, module.__name__


def _binary_uc(y, p, scores=None, groups=None):
    y, p = np.asarray(y, bool), np.asarray(p, bool)
    c = np.stack([y & p, ~y & p, ~y & ~p, y & ~p, y], axis=1)
    g = {"gold": y.astype(int).tolist()}
    if groups is not None:
        g["sentence"] = list(groups)
    return UnitCounts([f"i{k}" for k in range(len(y))], ("tp", "fp", "tn", "fn", "positive"), c, g,
                      None if scores is None else np.asarray(scores, float))


SCORING = Scoring(columns=("tp", "fp", "tn", "fn", "positive"),
                  metrics=(Metric("macro_f1", lambda t: classification.from_confusion(t["tp"], t["fp"], t["tn"], t["fn"])["macro_f1"]),
                           Metric("roc_auc", rank=True)),
                  primary="macro_f1", resampling=Resampling("stratified", "items", 5, by="gold"))


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    y = rng.random(300) < 0.3
    p = np.where(rng.random(300) < 0.8, y, ~y)
    s = np.round(np.clip(y * 0.4 + rng.random(300) * 0.6, 0, 1), 2)    # rounded: many ties
    return y, p, s


def test_stratified_resamples_equal_sklearn_on_the_drawn_items(data):
    y, p, s = data
    uc = _binary_uc(y, p, s)
    w = engine.weights(uc, SCORING.resampling, n_resamples=50)
    idx = bootstrap.stratified_indices(y.astype(int), 50, 5)
    got_f1 = engine.resampled(SCORING, uc, "macro_f1", w)
    got_auc = engine.resampled(SCORING, uc, "roc_auc", w)
    for b in range(50):
        r = idx[b]
        assert got_f1[b] == pytest.approx(f1_score(y[r], p[r], average="macro"), abs=1e-12)
        assert got_auc[b] == pytest.approx(roc_auc_score(y[r], s[r]), abs=1e-12)
    assert engine.point(SCORING, uc, "roc_auc") == pytest.approx(roc_auc_score(y, s), abs=1e-12)
    assert (w.sum(1) == len(y)).all() and (w[:, y].sum(1) == y.sum()).all()     # class counts kept


def test_cluster_and_row_weights_equal_the_index_draws(data):
    y, p, _ = data
    groups = [k // 3 for k in range(len(y))]
    uc = _binary_uc(y, p, groups=groups)
    rs = Resampling("clusters", "sentences", 9, by="sentence")
    w = engine.weights(uc, rs, n_resamples=20)
    for b, idx in enumerate(bootstrap.cluster_indices(groups, 20, 9)):
        assert np.array_equal(np.bincount(idx, minlength=len(y)), w[b])
    rows = engine.weights(uc, Resampling("rows", "items", 3), n_resamples=20)
    ref = np.random.default_rng(3).integers(0, len(y), size=(20, len(y)))
    assert np.array_equal(rows, engine.multiplicities(ref, len(y)))


def test_exact_slice_interval_is_scipys_and_statsmodels_clopper_pearson():
    from atlaslib.analysis.slices import group_rows
    from scipy.stats import binomtest
    from statsmodels.stats.proportion import proportion_confint

    acc = Metric("accuracy", lambda t: ratio(t["correct"], t["n"]), proportion=lambda t: (t["correct"], t["n"]))
    rule = SliceRule({"accuracy": acc}, support=lambda t: t["n"], min_units=10, unit="cases", exact=True)
    sc = Scoring(("correct", "n"), (acc,), "accuracy", Resampling("rows", "cases"), slices=rule)
    uc = UnitCounts(list(range(12)), ("correct", "n"), [[int(k < 9), 1] for k in range(12)])
    [(name, n, v, lo, hi, note, per_seed)] = group_rows(sc, [uc], rule)
    assert (name, n, v, note, per_seed) == ("accuracy", 12, 0.75, "", None)
    ref = binomtest(9, 12).proportion_ci(0.95, method="exact")
    assert (lo, hi) == pytest.approx((ref.low, ref.high))
    assert (lo, hi) == pytest.approx(proportion_confint(9, 12, alpha=0.05, method="beta"))
    [(*_, lo, hi, note, _)] = group_rows(sc, [uc.take(np.arange(12) < 5)], rule)
    assert lo is None and note == "too few cases (5 < 10) for an interval"


def test_labels_outside_the_card_are_one_clear_error():
    with pytest.raises(ValueError, match=r"pred: 'maybe' \(item 2\) is not a label of this card; valid labels: "
                                         r"'affirmed', 'negated'"):
        engine.check_labels(["negated", "maybe"], ("affirmed", "negated"), "pred")


def test_unit_counts_round_trip_and_the_cell_check():
    uc = UnitCounts(["a", "b"], ("x", "y"), [[1, 0], [2, 3]], {"doc": ["d1", "d1"]}, np.array([0.1, 0.9]),
                    {"m": "why"})
    back = UnitCounts.from_cell(uc.to_cell())
    assert back.ids == uc.ids and np.array_equal(back.counts, uc.counts) and back.groups == uc.groups
    assert back.undefined == {"m": "why"} and np.allclose(back.scores, uc.scores)
    cell = {"card": "c", "version": "v", "model": "m", "protocol": "p", "status": "ok", "metrics": {},
            "unit_counts": {**uc.to_cell(), "counts": [[1, 0], [2, -1]]}}
    with pytest.raises(results.ResultCellError, match=r"unit_counts.counts\[2\] must be 2 non-negative integers"):
        results.validate_cell(cell, "x.json")
    with pytest.raises(ValueError, match="unit ids repeat"):
        UnitCounts(["a", "a"], ("x",), [[1], [2]])


def test_every_card_declares_a_scoring_its_counts_fill():
    from atlaslib.cards import CONTRACT, available_cards, card_module, scoring_of

    assert "counts" in CONTRACT
    for card in available_cards():
        sc = scoring_of(card)
        assert sc.primary in {m.name for m in sc.metrics}
        assert callable(card_module(card.name).counts)
        for name, fn in sc.decisions.items():
            assert any(m.decision == name for m in sc.metrics), (card.name, name)


def test_a_card_run_scores_through_the_engine_and_its_samples_are_those_resamples(data):
    from atlaslib.cards.run import CardRun
    from tests.metrics.reference import binary_metrics, binary_resampled

    y, p, s = data
    recs = [{"item_id": f"i{k}", "gold": "negated" if a else "affirmed", "pred": "negated" if b else "affirmed",
             "score": float(x)} for k, (a, b, x) in enumerate(zip(y, p, s))]
    run = CardRun("negex", "atlas-n100-v1", "m", "zero_shot", parameters={"n_resamples": 200})
    got = run.score(recs)
    assert got == binary_metrics(y.astype(int), p.astype(int), s, "zero_shot", n_resamples=200)
    ref = binary_resampled(y.astype(int), p.astype(int), s, "zero_shot", n_resamples=200)
    samples = run.samples()
    assert set(samples) == set(ref) and all(np.array_equal(samples[k], ref[k]) for k in ref)
