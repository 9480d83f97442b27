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
