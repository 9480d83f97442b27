"""Slice metrics equal the card's metric functions applied to the slice's items (hand-built cells)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import f1_score

from atlaslib.analysis import slices as S
from scipy.stats import binomtest
from atlaslib.cards.tempeval.scoring import f1_from_counts
from tests.metrics.reference import bootstrap_f1, macro_f1
from atlaslib.metrics import bootstrap
from atlaslib.metrics.spans import span_metrics_with_ci

from .cells import cell, negex_cell


def _negex_cells():
    rng = np.random.default_rng(11)
    n = 60
    gold = ["negated" if v else "affirmed" for v in rng.integers(0, 2, n)]
    pred = [g if rng.random() < 0.8 else ("affirmed" if g == "negated" else "negated") for g in gold]
    words = list(rng.integers(1, 60, n))
    words[:3] = [10, 11, 41]                                      # band edges
    section = ["HISTORY"] * 25 + [None] * 30 + ["RARE"] * 5
    return [negex_cell("m", gold, pred, sentence_words=words, section=section),
            negex_cell("m2", gold, gold[::-1], sentence_words=words, section=section)], gold, pred, words, section


def test_negex_slice_equals_card_metric_on_the_slice_items():
    cells, gold, pred, words, section = _negex_cells()
    spec = {"sentence length (words)": {"field": "sentence_words", "bands": ((1, 10), (11, 20), (21, 40), (41, None))},
            "section header": {"field": "section", "missing": "no header"}}
    t = S.slice_table(cells, "negex", spec)
    y = np.array([g == "negated" for g in gold], int)
    p = np.array([q == "negated" for q in pred], int)
    w = np.array(words)
    for label, mask in (("1–10", w <= 10), ("11–20", (w >= 11) & (w <= 20)), ("≥ 41", w >= 41)):
        row = t[(t.run == "m (zero_shot)") & (t.group == label) & (t.metric == "macro_f1")].iloc[0]
        assert row["n"] == mask.sum()
        assert row["value"] == pytest.approx(macro_f1(y[mask], p[mask]))
        assert row["value"] == pytest.approx(f1_score(y[mask], p[mask], average="macro"))
        if mask.sum() >= S.MIN_ITEMS:
            idx = bootstrap.stratified_indices(y[mask], bootstrap.DEFAULT_RESAMPLES, 7)
            lo, hi = bootstrap.percentile_ci(bootstrap.resampled(macro_f1, idx, y[mask], p[mask]))
            assert (row["ci_low"], row["ci_high"]) == pytest.approx((lo, hi))
        else:
            assert pd.isna(row["ci_low"]) and "too few items" in row["note"]
    groups = t[(t.run == "m (zero_shot)") & (t.slice == "section header") & (t.metric == "sensitivity")]
    assert groups["group"].tolist() == ["HISTORY", "RARE", "no header"]     # frequency order, missing last
    assert groups.set_index("group").loc["no header", "n"] == 30
    rare = groups.set_index("group").loc["RARE"]
    assert pd.isna(rare["ci_low"]) and rare["note"].startswith("too few items (5 < 20)")


def test_nli_slice_accuracy_and_exact_interval():
    recs = [{"item_id": f"c{i}", "gold": "entailment", "pred": "entailment" if i % 3 else "neutral",
             "pattern": "simple" if i < 30 else "nested", "template": "T1" if i < 35 else "T2"} for i in range(40)]
    t = S.slice_table([cell("nli_negation", "a", recs), cell("nli_negation", "b", recs)], "nli_negation")
    row = t[(t.run == "a (zero_shot)") & (t.group == "simple")].iloc[0]
    k = sum(1 for r in recs[:30] if r["pred"] == r["gold"])
    assert (row["n"], row["value"]) == (30, pytest.approx(k / 30))
    assert (row["ci_low"], row["ci_high"]) == pytest.approx(tuple(binomtest(k, 30).proportion_ci(0.95, method="exact")))
    small = t[(t.run == "a (zero_shot)") & (t.group == "T2")].iloc[0]
    assert small["n"] == 5 and pd.isna(small["ci_low"]) and "too few cases" in small["note"]


def _span_recs():
    rng = np.random.default_rng(5)
    kinds = ["problem", "test", "treatment"]
    recs = []
    for i in range(40):
        def tags():
            out, k = [], 0
            while k < 12:
                if rng.random() < 0.3:
                    n = int(rng.integers(1, 5))
                    t = kinds[int(rng.integers(0, 3))]
                    out += [f"B-{t}"] + [f"I-{t}"] * (n - 1)
                    k += n
                else:
                    out.append("O")
                    k += 1
            return out[:12]
        g = tags()
        p = g if rng.random() < 0.4 else tags()
        recs.append({"item_id": f"s{i}", "document": f"d{i // 4}", "gold": g, "pred": p,
                     "report_position": ["first third", "middle third", "last third"][i % 3]})
    return recs


def test_maccrobat_type_slice_equals_card_per_type_scores():
    recs = _span_recs()
    t = S.slice_table([cell("maccrobat", "a", recs), cell("maccrobat", "b", recs[::-1])], "maccrobat",
                      {"entity type": {"unit": "mention", "field": "type"},
                       "position": {"field": "report_position"}})
    ref = span_metrics_with_ci([r["gold"] for r in recs], [r["pred"] for r in recs], [r["document"] for r in recs],
                               seed=7)
    for typ, e in ref["per_type"].items():
        row = t[(t.run == "a (zero_shot)") & (t.group == typ) & (t.metric == "entity_f1")].iloc[0]
        assert row["n"] == e["support"]
        assert row["value"] == pytest.approx(e["f1"]["value"])
        if e["support"] >= S.MIN_ITEMS:
            assert (row["ci_low"], row["ci_high"]) == pytest.approx((e["f1"]["ci_low"], e["f1"]["ci_high"]))
    # an item slice: the card's function on the slice's sentences
    sub = [r for r in recs if r["report_position"] == "middle third"]
    ref = span_metrics_with_ci([r["gold"] for r in sub], [r["pred"] for r in sub], [r["document"] for r in sub], seed=7)
    row = t[(t.run == "a (zero_shot)") & (t.group == "middle third") & (t.metric == "entity_f1")].iloc[0]
    assert row["value"] == pytest.approx(ref["f1"]["value"])


def test_maccrobat_length_slice_equals_direct_mention_count():
    from atlaslib.metrics.spans import mentions

    recs = _span_recs()
    t = S.slice_table([cell("maccrobat", "a", recs), cell("maccrobat", "b", recs)], "maccrobat",
                      {"len": {"unit": "mention", "field": "length", "bands": ((1, 1), (2, 3), (4, None))}})
    for label, lo, hi in (("1", 1, 1), ("2–3", 2, 3), ("≥ 4", 4, 99)):
        tp = fp = fn = 0
        for r in recs:
            g = {m for m in mentions(r["gold"]) if lo <= m[2] - m[1] + 1 <= hi}
            p = {m for m in mentions(r["pred"]) if lo <= m[2] - m[1] + 1 <= hi}
            tp, fp, fn = tp + len(g & p), fp + len(p - g), fn + len(g - p)
        row = t[(t.run == "a (zero_shot)") & (t.group == label) & (t.metric == "entity_f1")].iloc[0]
        assert row["n"] == tp + fn
        assert row["value"] == pytest.approx(2 * tp / (2 * tp + fp + fn))


def test_tempeval_slice_equals_scorer_f1_of_summed_counts():
    per_doc = [{"BEFORE": [3, 2, 2, 2], "OVERLAP": [1, 2, 0, 0]}, {"BEFORE": [20, 18, 15, 15]}]
    metrics = {"doctimerel_accuracy_phase2": {"value": 0.5}}          # phase 2 names it accuracy
    recs = [{"item_id": f"doc{k}", "slices": {"doctimerel": d}} for k, d in enumerate(per_doc)]
    t = S.slice_table([cell("tempeval", "a", recs, protocol="phase2", metrics=metrics, seeds={"bootstrap": 3}),
                       cell("tempeval", "b", recs, protocol="phase2", metrics={})], "tempeval",
                      {"DocTimeRel class": S.card_slices("tempeval")["DocTimeRel class"]})
    assert set(t["run"]) == {"a (phase2)"}                      # b does not address DocTimeRel
    before = t[t.group == "BEFORE"].iloc[0]
    counts = np.array([[3, 2, 2, 2], [20, 18, 15, 15]], float)
    assert before["n"] == 23
    assert before["value"] == pytest.approx(float(f1_from_counts(*counts.sum(0))[2]))
    b = bootstrap_f1(counts, 1000, 3)
    assert (before["ci_low"], before["ci_high"]) == pytest.approx((b["ci_low"], b["ci_high"]))
    overlap = t[t.group == "OVERLAP"].iloc[0]
    assert overlap["n"] == 1 and pd.isna(overlap["ci_low"]) and "too few gold items" in overlap["note"]
