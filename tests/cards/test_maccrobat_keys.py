"""What MACCROBAT hands its protocols and records in a cell stays the published build's: for each run of the
default matrix (the published cells' values kept as a fixture; the zero-shot runs' are not-run stubs,
whose split, seeds and data are every other run's), the cell's split, seeds and data hashes, and for
the fine-tune every training seed's weight-cache key (so no stored weight is trained again) and the retrain
flag. The protocols are replaced by stand-ins that record their arguments (no model runs)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from atlaslib.cards import maccrobat as mc
from atlaslib.cards.deciding import Loaded

PUBLISHED = json.loads((Path(__file__).with_name("fixtures") / "maccrobat_run_keys.json").read_text())


class Fake:
    """An adapter standing in for the published one: its info is what the weight-cache key reads."""
    def __init__(self, info):
        self.info = dict(info)


@pytest.mark.parametrize("run", sorted(PUBLISHED))
def test_cells_and_weight_keys_are_the_published_ones(run, corpus, manifest, monkeypatch):
    from atlaslib.cards.run import CardRun
    from atlaslib.protocols import finetune as FT
    from atlaslib.protocols import finetune_cache as C
    from atlaslib.protocols import tokens as tok

    want = PUBLISHED[run]
    if want["status"] != "ok":   # a stub decided before any kernel: the split, seeds and data of every other run
        want = {**want, **{k: PUBLISHED["memorize/train_lookup"][k] for k in ("split", "seeds", "data_sha256")}}
    items, seen = corpus.items, {}

    def tags(words):
        return [["O"] * len(w) for w in words]

    def finetune_tokens(adapter, train_ids, train_words, train_tags, test_words, labels, recipe, *,
                        data_sha256=None, retrain=False, progress=True):
        seen.update(train_ids=list(train_ids), train_words=[list(w) for w in train_words], labels=list(labels),
                    train_tags=[list(t) for t in train_tags], recipe=dict(recipe), data=dict(data_sha256),
                    retrain=retrain)
        runs = [{"seed": s, "tags": tags(test_words), "details": {}} for s in recipe["seeds"]]
        return {"tags": runs[0]["tags"], "model": None, "models": [(r["seed"], None) for r in runs],
                "details": {}, "seed_runs": runs}

    monkeypatch.setattr(FT, "finetune_tokens", finetune_tokens)
    monkeypatch.setattr(tok, "probe_ner", lambda a, trw, trt, tew, *k, **kw: {"tags": tags(tew), "details": {}})
    monkeypatch.setattr(tok, "zero_shot_ner", lambda a, w, table: {"tags": tags(w), "details": {}, "native": tags(w)})
    card_run = CardRun("maccrobat", "atlas-n100-v1", want["model"], want["protocol"], parameters={"n_resamples": 20})
    profile = {"name": want["model"], "trained_on": want["overlap"]}
    load = None if want["model"] == "memorize" else (
        lambda **kw: Loaded(Fake(want.get("adapter_info") or {}), mc.CARD.capabilities[want["protocol"]][0], profile))
    records = mc.predict(items, manifest, want["model"], want["protocol"], load=load, n_resamples=20)
    cell = card_run.finish(**mc.cell_parts(card_run, records, manifest))
    assert cell["status"] == "ok"
    for k in ("split", "seeds", "data_sha256", "overlap"):
        assert cell[k] == want[k], k
    if want["protocol"] != "finetune":
        return
    assert seen["retrain"] is False and seen["data"] == want["data_sha256"]
    monkeypatch.setattr(C, "versions", lambda: want["versions"])   # the build's torch and transformers
    keys = [C._sha256_json(C.key_fields(Fake(want["adapter_info"]), "token", FT.seed_recipe(seen["recipe"], s),
                                        seen["labels"], seen["train_ids"], seen["train_words"], seen["train_tags"],
                                        seen["data"], want["device"]))
            for s in FT.seeds_to_train(seen["recipe"])]
    assert keys == want["weights_keys"]
