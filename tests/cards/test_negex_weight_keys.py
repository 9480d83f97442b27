"""What keys NegEx's trained models and what its cells record of them stays as published: the fine-tune's
weight-cache keys (so no stored weight is trained again), its retrain flag and data hash, the probe's seed and train
data, and the cell's seeds, data hash and seed runs; a language model is asked the card's prompt and options. No model is trained: the fine-tune's one-seed step and the
probe's fit are replaced by stand-ins that record what they were given."""
import hashlib
import json
import time

import numpy as np
import pytest

from atlaslib.cards import negex
from atlaslib.cards.run import CardRun

#: the weights_key of each training seed in the published fine-tune cells (both versions share the train items)
PUBLISHED_KEYS = ["24a5d6e91ae10d575cd57cc9eeb03800db75552e0b8e9baece64c7cc1b2e1a52",
                  "2dd899d8a9b403f8d182037cd87805f305dbfe993f8dfc8c52af357c8d4345b2",
                  "e04fbf06e3bb0ac9296969e21df1159181a03a2e182d8d22aac3d5fb8283b9a2",
                  "2196fe10891d8431725043e769c82600785b99e09a2ead988dffd8320dab13f2",
                  "6aa0cabe1c453b8437b579da171d2b4884627d80992f9c5727157c4ac21c84a0"]
#: sha256 of the probe's train texts and 0/1 targets (json), as the published probes were fit
PROBE_TRAIN = "826ed223817b106218de2b3fa791270b6a13a9f69aff18528371c09498034013"
DATA = {negex.ANNOTATIONS.name: negex.ANNOTATIONS.sha256}


@pytest.fixture
def seen(monkeypatch):
    import torch

    from atlaslib.protocols import finetune as FT
    from atlaslib.protocols import items as P
    from atlaslib.protocols.finetune_cache import WeightCache

    got = []

    def fit(model, fields, one, retrain, train_inputs, targets, test_inputs, *a, n_test, **k):
        key = WeightCache(fields).key
        got.append({"seed": one["seed"], "key": key, "retrain": bool(retrain), "data": fields["data_sha256"]})
        return {}, {"hit": True, "key": key, "weights_sha256": "w"}, [torch.tensor([0.2, 0.1])] * n_test, \
            time.perf_counter()

    def probe(adapter, train_texts, train_y, test_texts, seed=0):
        data = json.dumps([list(train_texts), [int(y) for y in train_y]]).encode()
        got.append({"seed": seed, "train": hashlib.sha256(data).hexdigest()})
        return {"pred": np.zeros(len(test_texts), int), "score": np.zeros(len(test_texts)), "head": None,
                "details": {"capability": "embed.text.pooled"}}

    monkeypatch.setattr(FT, "_fit_one_seed", fit)
    monkeypatch.setattr(P, "probe", probe)
    return got


def _notebook(data_dir, version, protocol, **options):
    """The notebook's calls (notebooks/negex.md): the run, then its cell."""
    items = negex.load_items(data_dir)
    manifest = negex.split(items, version)
    train, test = negex.split_frames(items, manifest)
    card_run = CardRun("negex", version, "all-minilm-l6-v2", protocol, parameters={"n_resamples": 20})
    out = negex.run_protocol("all-minilm-l6-v2", protocol, train, test, data_dir=data_dir, load=card_run.load,
                             **options)
    records = negex.scored_records(test, out, negex.predictions(test, out, data_dir))
    return card_run.finish(**negex.cell_parts(card_run, records, manifest, out=out))


@pytest.mark.parametrize("version", negex.VERSIONS)
def test_the_fine_tune_keys_its_weights_and_records_them_as_published(data_dir, seen, version):
    cell = _notebook(data_dir, version, "finetune")
    assert [g["key"] for g in seen] == PUBLISHED_KEYS
    assert all(g["data"] == DATA and not g["retrain"] for g in seen)
    assert cell["data_sha256"] == DATA
    assert cell["seeds"] == {"split": negex.SEED, "bootstrap": negex.SEED, "finetune": negex.FINETUNE_RECIPE["seeds"]}
    runs = cell["extra"]["seed_runs"]
    assert [(r["seed"], r["weights_key"], r["weights_sha256"], r["trained_here"]) for r in runs] == \
        [(s, k, "w", False) for s, k in zip(negex.FINETUNE_RECIPE["seeds"], PUBLISHED_KEYS)]
    details = cell["spec"]["parameters"]["details"]
    assert details["recipe"] == negex.FINETUNE_RECIPE and details["training_seeds"] == negex.FINETUNE_RECIPE["seeds"]
    assert [r["key"] for r in details["seed_runs"]] == PUBLISHED_KEYS


def test_retrain_reaches_every_seed(data_dir, seen):
    _notebook(data_dir, "atlas-n100-v1", "finetune", retrain=True)
    assert [g["retrain"] for g in seen] == [True] * 5 and [g["key"] for g in seen] == PUBLISHED_KEYS


@pytest.mark.parametrize("version", negex.VERSIONS)
def test_the_probe_is_fit_as_published(data_dir, seen, version):
    cell = _notebook(data_dir, version, "probe")
    assert seen == [{"seed": negex.SEED, "train": PROBE_TRAIN}]
    assert cell["seeds"] == {"split": negex.SEED, "bootstrap": negex.SEED} and cell["data_sha256"] == DATA
    assert cell["spec"]["parameters"]["details"] == {"capability": "embed.text.pooled"}


def test_a_language_model_is_asked_the_cards_prompt_and_options(data_dir):
    """Zero-shot by answer options through the family: each test item's prompt is the card's (the unmarked sentence
    and the concept in OPTION_PROMPT), the options " yes" (negated) then " no"; a prompt variant's own prompts and
    options reach the model as given."""
    from atlaslib.cards.deciding import Loaded

    asked = []

    class Options:
        info = {"name": "lm"}

        def score_options(self, prompts, options):
            asked.append((list(prompts), list(options)))
            return {"loglik": [[-1.0, -2.0]] * len(prompts)}

    items = negex.load_items(data_dir)
    _, test = negex.split_frames(items, negex.split(items, "atlas-n100-v1"))
    predict = negex.FAMILY.predictor(Loaded(Options(), "score.options", {"name": "lm"}), None, "zero_shot")
    pred, _, out = predict(test)
    expected = [f'Sentence: {s}\nQuestion: In this sentence, is "{c}" negated (stated as absent)?\nAnswer:'
                for s, c in zip(test["sentence"], test["concept"])]
    assert asked == [(expected, [" yes", " no"])] and set(pred) == {"negated"} and out["pred"].tolist() == [1] * 100
    predict(test.head(2), prompts=["a", "b"], options=(" Yes", " No"))
    assert asked[-1] == (["a", "b"], [" Yes", " No"])
