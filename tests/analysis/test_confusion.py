"""The run page's confusion matrix (atlaslib.analysis.confusion) against scikit-learn's confusion_matrix."""
from __future__ import annotations

import numpy as np
from sklearn.metrics import confusion_matrix

from atlaslib.analysis.confusion import NO_ANSWER, confusion, confusion_markdown

LABELS = ("entailment", "neutral", "contradiction")


def _cell(gold, pred, **more):
    return {"card": "c", "version": "v", "model": "m", "protocol": "zero_shot", "status": "ok",
            "spec": {"model": "m", "protocol": "zero_shot"},
            "predictions": [{"item_id": f"i{k}", "gold": g, "pred": p} for k, (g, p) in enumerate(zip(gold, pred))],
            **more}


def test_item_labels_match_sklearn_and_no_answer_is_its_own_column():
    rng = np.random.default_rng(3)
    gold = list(rng.choice(LABELS, 60))
    pred = list(rng.choice(LABELS, 60))
    pred[5] = None
    frame, caption = confusion(_cell(gold, pred), LABELS)
    ref = confusion_matrix(gold, [p or NO_ANSWER for p in pred], labels=[*LABELS, NO_ANSWER])
    assert list(frame.index) == [lab for lab in LABELS if lab in gold]
    assert list(frame.columns) == [*LABELS, NO_ANSWER]
    assert (frame.to_numpy() == ref[:3]).all()
    assert caption.startswith("Gold (rows) against predicted (columns) on 60 test items")


def test_tags_count_per_token_by_entity_type():
    cell = _cell([["B-test", "I-test", "O", "B-problem"]], [["B-test", "O", "B-problem", "I-test"]])
    frame, caption = confusion(cell)
    # by hand: test→test 1, test→O 1, O→problem 1, problem→test 1
    assert frame.loc["test", "test"] == 1 and frame.loc["test", "O"] == 1
    assert frame.loc["O", "problem"] == 1 and frame.loc["problem", "test"] == 1
    assert int(frame.to_numpy().sum()) == 4 and "4 test tokens, by entity type" in caption


def test_a_seeded_row_sums_every_seeds_model_and_says_so():
    gold = ["a", "b", "a"]
    seeds = [{"seed": s, "predictions": [{"item_id": f"i{k}", "pred": p} for k, p in enumerate(preds)]}
             for s, preds in ((1, ["a", "a", "a"]), (2, ["b", "b", "a"]))]
    frame, caption = confusion(_cell(gold, ["a", "a", "a"], extra={"seed_runs": seeds}))
    ref = confusion_matrix(gold * 2, ["a", "a", "a", "b", "b", "a"], labels=["a", "b"])
    assert (frame.to_numpy() == ref).all()
    assert "3 test items, summed over the 2 training seeds' models" in caption


def test_no_pairs_gives_a_reason_and_labels_are_escaped():
    frame, why = confusion({"status": "ok", "predictions": [{"item_id": "d1", "found": {}}]})
    assert frame is None and "no gold and predicted label" in why
    assert confusion({"status": "not_run", "predictions": []})[0] is None
    text = confusion_markdown(_cell(["<b>x|y</b>"], ["<b>x|y</b>"]))
    assert "<b>" not in text and "| 1 |" in text


def test_a_scorer_cards_kept_counts_sum_over_documents():
    """TempEval's records keep, per document, each gold EVENT's DocTimeRel against the prediction's at its spans
    (runs.outcome_record); the matrix sums them. By hand on the document of tests/analysis/test_records.py's
    shape: gold events at (10,15) OVERLAP twice (one item), (20,25) OVERLAP, (30,35) BEFORE; predicted (10,15)
    OVERLAP and (30,35) AFTER."""
    from atlaslib.cards.tempeval import runs
    from atlaslib.cards.tempeval.anafora_io import Document, Entity

    def ev(i, a, b, dtr):
        return Entity(f"{i}@e@d@gold", "EVENT", ((a, b),), {"DocTimeRel": dtr, "Type": "N/A", "Degree": "N/A",
                                                             "Polarity": "POS", "ContextualModality": "ACTUAL"})

    gold = Document("d", [ev(2, 10, 15, "OVERLAP"), ev(3, 10, 15, "OVERLAP"), ev(4, 20, 25, "OVERLAP"),
                          ev(5, 30, 35, "BEFORE")], [])
    pred = Document("d", [ev(2, 10, 15, "OVERLAP"), ev(5, 30, 35, "AFTER")], [], annotator="system")
    rec = {"item_id": "d", **runs.outcome_record(gold, pred)}
    assert rec["confusion"]["counts"] == {"OVERLAP": {"OVERLAP": 1, runs.NO_EVENT: 1}, "BEFORE": {"AFTER": 1}}
    bits = rec["found"]["doctimerel"]               # the scorer's items: one count each, the diagonal its hits
    assert sum(sum(r.values()) for r in rec["confusion"]["counts"].values()) == len(bits)
    assert rec["confusion"]["counts"]["OVERLAP"]["OVERLAP"] == bits.count("1")
    frame, caption = confusion({"status": "ok", "predictions": [rec, {**rec, "item_id": "e"}]})
    assert frame.loc["OVERLAP", "OVERLAP"] == 2 and frame.loc["OVERLAP", runs.NO_EVENT] == 2
    assert frame.loc["BEFORE", "AFTER"] == 2 and int(frame.to_numpy().sum()) == 6
    assert "6 gold EVENTs' DocTimeRel" in caption
