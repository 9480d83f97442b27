"""The real MACCROBAT notebook's memorize run is re-scored without a kernel: executed by the runner into a temporary
results/runs folder, its stored scoring key made stale (as an older scoring code leaves it), run again with the kernel
forbidden, it reports "re-scored", and its cell, its variant cells and the notebook's ``from-cell`` outputs equal the
executed ones (``tests/rescore_check.py``)."""
import json

from atlaslib import rescore, runner
from tests.rescore_check import rescored_as_executed


def test_the_memorize_run_is_rescored_as_it_executed(data_dir, tmp_path, monkeypatch):
    req = runner.RunRequest("maccrobat", "atlas-n100-v1", "memorize", "train_lookup")
    _, variants, page = rescored_as_executed(req, tmp_path, monkeypatch)
    assert len(variants) == 3 and len(page) == 6 and all(page)


def test_every_extra_a_maccrobat_cell_holds_is_made_again_or_declared(corpus, manifest):
    """A probe cell with a language model's probes, the reproduction rows and the gold-cut leakage, and a fine-tuned
    row over two seeds with its mark: the guard lets each re-score (every extra key is made by the card's scoring
    or declared its model's), and the re-score gives its metrics and extra again, the per-type table included."""
    from atlaslib.cards import maccrobat as mc
    from atlaslib.cards.maccrobat.gold_cuts import char_mentions, char_span_f1
    from atlaslib.cards.run import CardRun

    items, audit = corpus.items, mc.audit(corpus)
    test = items.set_index("item_id").loc[manifest.test]
    gold = [list(t) for t in test["tags"]]
    pred = [["O"] * len(g) for g in gold[:50]] + gold[50:]
    gold_m, pred_m = ([char_mentions(t, w) for t, w in zip(tags, test["word_spans"])] for tags in (gold, pred))
    leak = {"with_gold_cuts": char_span_f1(gold_m, pred_m), "without_gold_cuts": char_span_f1(gold_m, gold_m),
            "f1_difference": 0.0}
    llm = {"contamination": {"may_have_seen": False}, "memorisation": None, "memorisation_reason": "not measured"}
    for protocol, seeds in (("probe", []), ("finetune", [{"seed": s, "pred": p, "details": {}}
                                                          for s, p in ((1, pred), (2, gold))])):
        out = mc.Outcome(model="m", protocol=protocol, version=manifest.version, status="ok", llm=llm,
                         item_ids=list(manifest.test), documents=test["document"].tolist(), gold=gold, pred=pred,
                         seed_runs=seeds, n_resamples=20)
        run = CardRun("maccrobat", manifest.version, "m", protocol, parameters={"n_resamples": 20})
        cell = run.finish(**mc.outcome_parts(out, manifest, items, metrics=run.score(out.scored_records()),
                                             audit=audit, leakage=None if seeds else leak))
        assert rescore.refusal(mc.CARD, cell, []) is None
        assert {"per_type", "reproduction_rows", "contamination"} <= set(cell["extra"])
        again = rescore.rescored_cell(json.loads(json.dumps(cell)), "p.s")
        assert again["metrics"] == cell["metrics"] and again["extra"] == json.loads(json.dumps(cell["extra"]))
