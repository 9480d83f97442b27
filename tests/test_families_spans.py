"""The spans family's counting and scoring for any span card (its own types and document grouping, not
MACCROBAT's): strict entity F1, precision, recall and macro F1 equal seqeval's, the per-type table equals
seqeval's per-type report, and a mention slice by type is that type's mentions alone."""
from __future__ import annotations

import numpy as np
import pytest
from seqeval.metrics import classification_report, f1_score, precision_score, recall_score

from atlaslib.cards.families import Spans
from atlaslib.metrics import engine

TYPES = ("drug", "dose")


def _records(seed=3, n=40):
    rng = np.random.default_rng(seed)
    tags = ("O", "B-drug", "I-drug", "B-dose", "I-dose")
    recs = []
    for i in range(n):
        k = int(rng.integers(2, 9))
        gold = [tags[j] for j in rng.choice(5, k, p=[.5, .15, .1, .15, .1])]
        pred = [g if rng.random() < .7 else tags[int(rng.integers(5))] for g in gold]
        recs.append({"item_id": f"s{i}", "gold": gold, "pred": pred, "score": None, "doc": f"d{i % 7}"})
    return recs


def test_span_counts_and_scoring_equal_seqeval():
    recs = _records()
    scoring = Spans.strict_f1(TYPES, 11, by="doc", unit="notes")
    uc = Spans.count_spans({"predictions": recs}, TYPES, {"doc": "doc"})
    assert uc.groups["doc"] == [r["doc"] for r in recs] and scoring.resampling.by == "doc"
    gold, pred = [r["gold"] for r in recs], [r["pred"] for r in recs]
    m = engine.evaluate(scoring, uc, "probe", n_resamples=20)
    assert m["entity_f1_probe"]["value"] == pytest.approx(f1_score(gold, pred))
    assert m["entity_precision_probe"]["value"] == pytest.approx(precision_score(gold, pred))
    assert m["entity_recall_probe"]["value"] == pytest.approx(recall_score(gold, pred))
    assert m["entity_macro_f1_probe"]["value"] == pytest.approx(f1_score(gold, pred, average="macro"))
    report = classification_report(gold, pred, output_dict=True)
    table = Spans.per_type_scores(uc, scoring, TYPES, n_resamples=20)
    for t in TYPES:
        assert table[t]["support"] == report[t]["support"]
        for k, ref in (("precision", "precision"), ("recall", "recall"), ("f1", "f1-score")):
            assert table[t][k]["value"] == pytest.approx(report[t][ref])
    # a mention slice by type: each group's counts are that type's mentions alone
    by_type = dict(Spans.mention_slices({"predictions": recs}, {"unit": "mention", "field": "type"},
                                        lambda v, spec: v, lambda spec, labels: sorted(set(labels)), {"doc": "doc"}))
    for t in TYPES:
        assert engine.point(scoring, by_type[t], "entity_f1") == pytest.approx(report[t]["f1-score"])
