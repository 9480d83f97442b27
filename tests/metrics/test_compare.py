"""Paired comparisons: vectorised paired bootstrap vs a per-resample loop, McNemar vs scipy, Holm by hand,
a duplicated model, the notebook entry point."""
from __future__ import annotations

import re

import numpy as np
import pytest
from scipy.stats import binomtest

from atlaslib.metrics import bootstrap as B
from tests.metrics import reference as C
from atlaslib.analysis.paired import compare_cells, paired_from_cells
from atlaslib.metrics import compare as K


def negex_cell(name, y, pred, score=None, version="v"):
    recs = [{"item_id": f"negex-{i:04d}", "gold": "negated" if t else "affirmed",
             "pred": "negated" if p else "affirmed", "score": None if score is None else float(score[i])}
            for i, (t, p) in enumerate(zip(y, pred))]
    return {"card": "negex", "version": version, "model": name, "protocol": "zero_shot", "status": "ok",
            "metrics": {}, "seeds": {"bootstrap": 11}, "predictions": recs}


def nli_cell(name, gold, pred):
    recs = [{"item_id": f"c{i}", "gold": g, "pred": p, "template": f"t{i % 7}"}
            for i, (g, p) in enumerate(zip(gold, pred))]
    return {"card": "nli_negation", "version": "builtin-v1", "model": name, "protocol": "zero_shot", "status": "ok",
            "metrics": {}, "seeds": {}, "predictions": recs}


@pytest.fixture(scope="module")
def negex_data():
    rng = np.random.default_rng(3)
    y = (rng.random(150) < 0.25).astype(int)
    a = np.where(rng.random(150) < 0.85, y, 1 - y)
    b = np.where(rng.random(150) < 0.6, y, 1 - y)
    sa = np.round(rng.random(150) * 0.5 + 0.5 * y, 2)
    return y, a, b, sa


def test_paired_differences_equal_a_per_resample_loop_bit_for_bit(negex_data):
    from tests.metrics.reference import BINARY_LABEL_METRICS

    y, a, b, sa = negex_data
    cells = [negex_cell("A", y, a, sa), negex_cell("B", y, b, sa[::-1].copy())]
    p = paired_from_cells(cells, n_resamples=200)
    idx = B.stratified_indices(y, 200, 11)                     # the card's resamples: same seed, same items
    for name, fn in BINARY_LABEL_METRICS.items():
        loop = np.array([fn(y[r], a[r]) - fn(y[r], b[r]) for r in idx])
        assert np.array_equal(p.resampled("A (zero_shot)", name) - p.resampled("B (zero_shot)", name), loop), name
    from sklearn.metrics import roc_auc_score

    loop_auc = np.array([roc_auc_score(y[r], sa[r]) - roc_auc_score(y[r], sa[::-1][r]) for r in idx])
    np.testing.assert_allclose(p.resampled("A (zero_shot)", "roc_auc") - p.resampled("B (zero_shot)", "roc_auc"),
                               loop_auc, rtol=0, atol=1e-15)
    # the single-model resamples are the card's declared interval
    lo, hi = B.percentile_ci(B.resampled(C.macro_f1, idx, y, a))
    assert B.percentile_ci(p.resampled("A (zero_shot)", "macro_f1")) == (lo, hi)


def test_nli_paired_resamples_equal_a_loop():
    rng = np.random.default_rng(5)
    labels = np.array(["entailment", "neutral", "contradiction"])
    gold = labels[rng.integers(0, 3, 90)]
    pa, pb = labels[rng.integers(0, 3, 90)], np.where(rng.random(90) < 0.7, gold, "entailment")
    p = paired_from_cells([nli_cell("A", gold, pa), nli_cell("B", gold, pb)], n_resamples=100)
    idx = np.random.default_rng(B.DEFAULT_SEED).integers(0, 90, size=(100, 90))
    acc = np.array([np.mean(pa[r] == gold[r]) - np.mean(pb[r] == gold[r]) for r in idx])
    assert np.array_equal(p.resampled("A (zero_shot)", "aggregate_accuracy")
                          - p.resampled("B (zero_shot)", "aggregate_accuracy"), acc)
    ne = gold != "entailment"
    fer = np.array([np.sum((pa[r] == "entailment") & ne[r]) / ne[r].sum() for r in idx])
    assert np.array_equal(p.resampled("A (zero_shot)", "false_entailment_rate"), fer)


@pytest.mark.parametrize("b,c", [(0, 0), (0, 5), (3, 12), (20, 21), (7, 1), (40, 9)])
def test_mcnemar_exact_equals_scipy_binomtest(b, c):
    expected = 1.0 if b + c == 0 else binomtest(b, b + c, 0.5).pvalue
    assert K.mcnemar_exact(b, c) == expected


def test_mcnemar_counts_from_cells_by_hand():
    y = np.array([1, 1, 0, 0, 0, 1, 0, 0])
    a = np.array([1, 1, 0, 0, 1, 0, 0, 0])       # wrong on items 4, 5
    b = np.array([0, 1, 1, 1, 0, 1, 0, 0])       # wrong on items 0, 2, 3
    t = compare_cells([negex_cell("A", y, a), negex_cell("B", y, b)], n_resamples=50)
    row = t[t["metric"] == "macro_f1"].iloc[0]
    assert (row["b"], row["c"]) == (3, 2)        # A right & B wrong: 0, 2, 3; A wrong & B right: 4, 5
    assert row["p_mcnemar"] == binomtest(3, 5, 0.5).pvalue


def test_holm_by_hand():
    # sorted 0.01, 0.02, 0.04, 0.30 -> 4*0.01, 3*0.02, 2*0.04, 1*0.30 = 0.04, 0.06, 0.08, 0.30
    np.testing.assert_allclose(K.holm([0.04, 0.01, 0.30, 0.02]), [0.08, 0.04, 0.30, 0.06])
    # monotone: 0.5*3 = 1.5 -> 1, then max(1, 2*0.6) stays 1
    np.testing.assert_allclose(K.holm([0.5, 0.6, 0.001]), [1.0, 1.0, 0.003])


def test_duplicated_model_is_tied_with_itself(negex_data):
    y, a, b, sa = negex_data
    cells = [negex_cell("A", y, a, sa), negex_cell("A copy", y, a, sa), negex_cell("B", y, b)]
    t = compare_cells(cells, n_resamples=300)
    dup = t[(t["model_a"] == "A (zero_shot)") & (t["model_b"] == "A copy (zero_shot)")]
    assert set(dup["metric"]) == {"macro_f1", "sensitivity", "specificity", "precision", "roc_auc"}
    assert (dup["difference"] == 0).all() and (dup["ci_low"] == 0).all() and (dup["ci_high"] == 0).all()
    assert (dup["p_bootstrap"] == 1).all() and (dup["p_holm"] == 1).all()
    label = dup[dup["metric"] != "roc_auc"]                   # McNemar: on the label decisions
    assert (label["p_mcnemar"] == 1).all() and (label["b"] == 0).all() and (label["c"] == 0).all()
    ranks = t.attrs["ranks"].set_index("model")
    assert ranks.loc["A (zero_shot)", "tie_group"] == ranks.loc["A copy (zero_shot)", "tie_group"] == "top"
    for col in ("rank_low", "rank_high", "p_rank1"):
        assert ranks.loc["A (zero_shot)", col] == ranks.loc["A copy (zero_shot)", col]
    p = paired_from_cells(cells, 300)
    assert np.array_equal(p.resampled("A (zero_shot)", "macro_f1"), p.resampled("A copy (zero_shot)", "macro_f1"))
    # the clearly worse model is out of the top group, decided by the paired bootstrap of macro F1
    assert ranks.loc["B (zero_shot)", "tie_group"] == "—"
    assert ranks.loc["B (zero_shot)", "decided_by"] == "paired bootstrap"


def test_mcnemar_mdd_solves_its_equation():
    n, psi = 200, 0.15
    d = K.mcnemar_mdd(n, psi)
    za, zb = 1.959963984540054, 0.8416212335729143
    assert n * d ** 2 == pytest.approx((za * np.sqrt(psi) + zb * np.sqrt(psi - d ** 2)) ** 2)
    assert K.mcnemar_mdd(4 * n, psi) < d                  # more items detect smaller differences


def test_compare_refuses_mixed_items(negex_data):
    y, a, b, _ = negex_data
    c2 = negex_cell("B", y, b)
    c2["predictions"] = c2["predictions"][1:]
    with pytest.raises(ValueError, match="different v items"):
        compare_cells([negex_cell("A", y, a), c2])


def test_rendered_leaderboard_markdown_without_a_browser(tmp_path):
    """Hand-built NegEx cells: a perfect-sensitivity model (zero-width percentile interval, not constant),
    the majority baseline (precision undefined), a copy, and a not-run cell; the markdown and downloads."""
    import json

    from atlaslib.pages.card_pages import leaderboard_markdown
    from atlaslib.cards import get_card
    from atlaslib.cards.negex import SCORING, counts
    from atlaslib.metrics import engine
    from tests.metrics.reference import confusion_counts
    from atlaslib.pages import comparisons

    card = get_card("negex")
    y = np.array([1] * 12 + [0] * 48)
    good = y.copy()
    good[12:15] = 1                                            # all positives found, 3 false positives
    cells = []
    for name, pred in (("good", good), ("majority", np.zeros(60, int))):
        c = negex_cell(name, y, pred)
        c["metrics"] = engine.evaluate(SCORING, counts(c), "zero_shot", n_resamples=200, seed=11)
        c["extra"] = {"confusion": confusion_counts(y, pred)}
        cells.append(c)
    cells.append({"card": "negex", "version": "v", "model": "hub/model-x", "protocol": "zero_shot",
                  "status": "not_run", "reason": "weights unavailable: not in the local cache",
                  "metrics": {f"{b}_zero_shot": {"value": None, "reason": "not run: weights unavailable"}
                              for b in card.metrics}, "predictions": []})
    md = leaderboard_markdown(card, "v", cells, tmp_path, tmp_path)
    good_row = next(line for line in md.splitlines() if line.startswith("| good"))
    assert "1.000 <span class=\"atlas-ci\">[1.000, 1.000]</span>" in good_row           # sensitivity 12/12
    lo, hi = binomtest(12, 12).proportion_ci(0.95, method="exact")
    assert f"[{lo:.3f}, {hi:.3f}]" in good_row and "exact" in good_row
    maj_row = next(line for line in md.splitlines() if line.startswith("| majority"))
    assert maj_row.split("|")[2].strip().endswith('<span class="atlas-regime">no card training</span>')  # regime
    assert "0.000 [" not in maj_row.split("|")[6]                                         # precision column
    assert "n/a<sup>" in maj_row.split("|")[6]
    assert md.count("undefined: nothing predicted positive") == 1
    assert md.count("weights unavailable") == 1 and "not run<sup>" in md
    # 60 items detect no difference below 6/60, wider than the card's margin: the top row is not called best
    assert "| good (zero_shot) | highest point estimate (too few units to tell) | 1 [1–1] |" in md
    assert "| majority (zero_shot) | below (paired bootstrap) |" in md
    assert re.search(r"\d\.\d{4}", md) is None                                           # three decimals at most
    section = comparisons.render(card, "v", cells, tmp_path, tmp_path)
    assert "What this test set can detect" in section and "b / c" in section
    rows = json.loads((tmp_path / "_downloads" / "comparisons-negex-v.json").read_text())
    f1 = next(r for r in rows if r["metric"] == "macro_f1")
    assert (f1["b"], f1["c"]) == (12, 3)                   # good right & majority wrong: the 12 positives
    assert (tmp_path / "_downloads" / "leaderboard-negex-v.csv").read_text().startswith("card,version,model")


def seeded(cell, preds_by_seed):
    """``cell`` as a fine-tuned row over seeds: ``extra.seed_runs`` with each seed's predictions; the cell's own
    predictions are the first seed's."""
    runs = [{"seed": 100 + k, "metrics": {}, "predictions": [
        {"item_id": r["item_id"], "pred": "negated" if p else "affirmed", "score": None} for r, p in
        zip(cell["predictions"], pred)]} for k, pred in enumerate(preds_by_seed)]
    for r, p in zip(cell["predictions"], preds_by_seed[0]):
        r["pred"] = "negated" if p else "affirmed"
    return dict(cell, protocol="finetune", extra={"seed_runs": runs})


def test_a_seeded_row_is_the_mean_over_seeds_with_two_levels_and_majority_mcnemar(negex_data):
    """A seeded row in a comparison: its point is the mean of its seeds' values; with five identical seeds its
    resamples are the single model's (the seed draw changes nothing); with different seeds they are the two-level
    means of the seeds' own resamples on the same items (checked against each seed compared alone); McNemar reads
    the per-item majority of its seeds."""
    from atlaslib.metrics import seeds as S

    y, a, b, _ = negex_data
    rng = np.random.default_rng(8)
    flips = [a if k == 0 else np.where(rng.random(len(y)) < 0.1, 1 - a, a) for k in range(5)]
    base = negex_cell("B", y, b)
    plain = paired_from_cells([negex_cell("A", y, a), base], n_resamples=200)
    same = paired_from_cells([seeded(negex_cell("A", y, a), [a] * 5), base], n_resamples=200)
    np.testing.assert_allclose(same.resampled("A (finetune)", "macro_f1"), plain.resampled("A (zero_shot)", "macro_f1"),
                               rtol=0, atol=1e-15)
    cells = [seeded(negex_cell("A", y, a), flips), base]
    p = paired_from_cells(cells, n_resamples=200)
    alone = [paired_from_cells([negex_cell("A", y, f), base], n_resamples=200) for f in flips]
    values = np.stack([q.resampled("A (zero_shot)", "macro_f1") for q in alone], axis=1)
    assert p.point("A (finetune)", "macro_f1") == pytest.approx(np.mean([C.macro_f1(y, f) for f in flips]))
    w = S.seed_multiplicities(5, 200, B.DEFAULT_SEED + 1)            # the seeded row is label 0 of the pair
    assert np.allclose(p.resampled("A (finetune)", "macro_f1"), (w * values).sum(1) / 5)
    majority = np.mean([f == y for f in flips], axis=0) > 0.5
    assert np.array_equal(p.decisions["correct decision"]["A (finetune)"], majority)
    table = compare_cells(cells, n_resamples=200)
    row = table[table.metric == "macro_f1"].iloc[0]
    assert row["b"] == int(np.sum(majority & (b != y))) and row["c"] == int(np.sum(~majority & (b == y)))
    assert "aso_eps_min" not in table or table["aso_eps_min"].isna().all()   # one seeded row: no ASO


def test_two_seeded_rows_get_almost_stochastic_order_beside_the_paired_interval(negex_data):
    from atlaslib.metrics import seeds as S
    from atlaslib.pages import comparisons

    y, a, b, _ = negex_data
    rng = np.random.default_rng(4)
    fa = [np.where(rng.random(len(y)) < 0.05, 1 - a, a) for _ in range(5)]
    fb = [np.where(rng.random(len(y)) < 0.05, 1 - b, b) for _ in range(5)]
    cells = [seeded(negex_cell("A", y, a), fa), seeded(negex_cell("B", y, b), fb)]
    comp = K.compare_paired(paired_from_cells(cells, n_resamples=200))
    row = comp.pairs[comp.pairs.metric == "macro_f1"].iloc[0]
    eps = S.almost_stochastic_order([C.macro_f1(y, f) for f in fa], [C.macro_f1(y, f) for f in fb])["eps_min"]
    assert row["aso_better"] == "A (finetune)" and row["aso_eps_min"] == eps < 0.2 and row["aso_threshold"] == 0.2
    assert comp.pairs[comp.pairs.metric != "macro_f1"]["aso_eps_min"].isna().all()      # the primary metric only
    text = comparisons.pairs_markdown(comp)
    assert "ASO ε_min (better row)" in text and f"{eps:.3f} (A (finetune); below 0.2)" in text
    assert "majority of their seeds' models" in text


def _with_sentences(cell, n_sentences=30):
    for i, r in enumerate(cell["predictions"]):
        r["sentence_key"] = f"s{i % n_sentences}"
    return cell


def _macro_f1(y, p):
    """Macro F1 of binary labels by hand: the mean of the two classes' F1, 2·tp / (2·tp + fp + fn)."""
    out = []
    for pos in (1, 0):
        tp, fp, fn = np.sum((y == pos) & (p == pos)), np.sum((y != pos) & (p == pos)), np.sum((y == pos) & (p != pos))
        out.append(2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0)
    return float(np.mean(out))


def _macro_f1_loop(y, pred_by_seed, draws, seed_draws):
    """Per resample: the mean over the drawn seeds of the hand macro F1 on the drawn items (an index loop)."""
    return np.array([np.mean([_macro_f1(y[idx], pred_by_seed[s][idx]) for s in sd])
                     for idx, sd in zip(draws, seed_draws)])


def test_a_seeded_rows_sentence_cluster_columns_are_over_its_seeds_not_its_first(negex_data):
    """The leaderboard's sentence-cluster column and the comparisons' paired sentence-cluster column of a row over
    five training seeds: the value is the mean of the seeds' macro F1 (sklearn) and the interval the two-level one
    (whole sentences drawn, seeds drawn with replacement), recomputed here by an index loop; the first seed alone
    would give another centre."""
    from sklearn.metrics import f1_score

    from atlaslib.cards import get_card
    from atlaslib.pages import comparisons
    from atlaslib.pages.leaderboard import cluster_intervals

    y, a, b, _ = negex_data
    rng = np.random.default_rng(21)
    flips = [a if k == 0 else np.where(rng.random(len(y)) < 0.15, 1 - a, a) for k in range(5)]
    cell = _with_sentences(seeded(negex_cell("A", y, a), flips))
    cell["seeds"] = {"bootstrap": B.DEFAULT_SEED}
    for r in cell["extra"]["seed_runs"]:             # each seed's records carry the sentence, as the card writes them
        for x, own in zip(r["predictions"], cell["predictions"]):
            x["sentence_key"] = own["sentence_key"]
    groups = [r["sentence_key"] for r in cell["predictions"]]
    d = cluster_intervals(cell)["macro F1, sentence-cluster"]
    per_seed = [f1_score(y, f, average="macro") for f in flips]
    assert per_seed == pytest.approx([_macro_f1(y, f) for f in flips])          # the hand formula is sklearn's
    assert d["value"] == pytest.approx(np.mean(per_seed)) and d["value"] != pytest.approx(per_seed[0])
    draws = B.cluster_indices(groups, B.DEFAULT_RESAMPLES, B.DEFAULT_SEED)
    seed_draws = np.random.default_rng(B.DEFAULT_SEED).integers(0, 5, size=(B.DEFAULT_RESAMPLES, 5))
    lo, hi = np.quantile(_macro_f1_loop(y, flips, draws, seed_draws), [0.025, 0.975])
    assert (d["ci_low"], d["ci_high"]) == (pytest.approx(lo, abs=1e-12), pytest.approx(hi, abs=1e-12))
    assert d["n_clusters"] == 30 and d["n_seeds"] == 5

    base = _with_sentences(negex_cell("B", y, b))
    base["seeds"] = {"bootstrap": B.DEFAULT_SEED}
    comp = K.compare_paired(paired_from_cells([cell, base]))
    col = comparisons.cluster_columns(get_card("negex"), comp, [cell, base])
    (name, vals), = col.items()
    text = vals[("A (finetune)", "B (zero_shot)")]
    seed_a = np.random.default_rng(B.DEFAULT_SEED + 1).integers(0, 5, size=(B.DEFAULT_RESAMPLES, 5))
    diff = _macro_f1_loop(y, flips, draws, seed_a) - _macro_f1_loop(y, [b], draws, np.zeros((len(draws), 1), int))
    lo, hi = np.quantile(diff, [0.025, 0.975])
    assert text.startswith(f"{np.mean(per_seed) - f1_score(y, b, average='macro'):+.3f} [{lo:.3f}, {hi:.3f}]")
