"""A MACCROBAT probe cell's gold-cut leakage is scored anew on every finish, a re-score's included: a cell whose
stored leakage scores are stale (as an older scoring code leaves them) re-scores to what its kept unit counts give,
checked by hand (P = TP / (TP + FP), R = TP / (TP + FN), F1 = 2PR / (P + R)); a cell without the measure stays
without it."""
import json

from atlaslib import rescore
from atlaslib.cards import get_card


def _cell(corpus, manifest, leakage):
    from atlaslib.cards import maccrobat as mc
    from atlaslib.cards.maccrobat.gold_cuts import char_mentions, char_span_f1
    from atlaslib.cards.run import CardRun

    items = corpus.items
    test = items.set_index("item_id").loc[manifest.test]
    gold = [list(t) for t in test["tags"]]
    pred = [["O"] * len(g) for g in gold[:40]] + gold[40:]
    leak = None
    if leakage:   # with the cuts: the run's tags; without: every mention of the first 80 sentences missed
        units = {"item_ids": list(manifest.test), "documents": test["document"].tolist()}
        g = [char_mentions(t, s) for t, s in zip(gold, test["word_spans"])]
        leak = {"with_gold_cuts": char_span_f1(g, [char_mentions(t, s) for t, s in zip(pred, test["word_spans"])],
                                               **units),
                "without_gold_cuts": char_span_f1(g, [set() for _ in g[:80]] + g[80:], **units),
                "f1_difference": 0.0, "test_mentions": 1, "model": "m"}
    out = mc.Outcome(model="m", protocol="probe", version=manifest.version, status="ok", llm={},
                     item_ids=list(manifest.test), documents=test["document"].tolist(), gold=gold, pred=pred,
                     n_resamples=20)
    run = CardRun("maccrobat", manifest.version, "m", "probe", parameters={"n_resamples": 20})
    return run.finish(**mc.outcome_parts(out, manifest, items, metrics=run.score(out.scored_records()),
                                         leakage=leak))


def _by_hand(part):
    tp, fp, fn = (sum(row[k] for row in part["unit_counts"]["counts"]) for k in range(3))
    p, r = tp / (tp + fp), tp / (tp + fn)
    return {"tp": tp, "fp": fp, "fn": fn, "precision": p, "recall": r, "f1": 2 * p * r / (p + r)}


def test_stale_leakage_scores_are_remade_from_its_unit_counts(corpus, manifest):
    cell = json.loads(json.dumps(_cell(corpus, manifest, leakage=True)))
    leak = cell["extra"]["gold_cut_leakage"]
    assert list(cell["extra"]) == ["per_type", "bootstrap", "gold_cut_leakage"]
    assert list(leak) == ["with_gold_cuts", "without_gold_cuts", "f1_difference", "test_mentions", "model"]
    stale = json.loads(json.dumps(cell))
    for part in ("with_gold_cuts", "without_gold_cuts"):   # an older scoring's numbers beside the same counts
        stale["extra"]["gold_cut_leakage"][part].update(tp=0, precision=0.5, recall=0.5, f1=0.5)
    stale["extra"]["gold_cut_leakage"]["f1_difference"] = 0.0
    assert rescore.refusal(get_card("maccrobat"), stale, []) is None
    again = json.loads(json.dumps(rescore.rescored_cell(stale, "p.s")))
    new = again["extra"]["gold_cut_leakage"]
    for part in ("with_gold_cuts", "without_gold_cuts"):
        want = _by_hand(leak[part])
        assert 0 < want["f1"] < 1 and want["fp"] + want["fn"] > 0
        assert [new[part][k] for k in ("tp", "fp", "fn")] == [want[k] for k in ("tp", "fp", "fn")]
        assert all(abs(new[part][k] - want[k]) < 1e-12 for k in ("precision", "recall", "f1"))
        assert new[part]["unit_counts"] == leak[part]["unit_counts"]
    assert new["without_gold_cuts"]["f1"] < new["with_gold_cuts"]["f1"]
    assert new["f1_difference"] == new["with_gold_cuts"]["f1"] - new["without_gold_cuts"]["f1"] > 0
    assert again["extra"] == cell["extra"] and list(again["extra"]) == list(cell["extra"])
    assert list(new) == list(leak) and new["test_mentions"] == 1 and new["model"] == "m"


def test_a_cell_without_the_measure_stays_without_it(corpus, manifest):
    cell = json.loads(json.dumps(_cell(corpus, manifest, leakage=False)))
    assert "gold_cut_leakage" not in cell["extra"]
    assert "gold_cut_leakage" not in rescore.rescored_cell(cell, "p.s")["extra"]
