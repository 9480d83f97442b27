"""The fine-tune protocol on tiny random encoders built locally: the loop trains, the head's label map is
right, the same seed gives bit-identical weights and predictions, another seed another model, and the
weight cache hits with nothing changed and misses when the recipe or the train items change."""
from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd
import pytest
import torch

from atlaslib import models, results
from atlaslib.pages import finetune as ft_page
from atlaslib.protocols import finetune as ft
from atlaslib.protocols import finetune_cache as ft_cache
from atlaslib.protocols import finetune_training as ft_train
from tests.tiny_models import tiny_encoder
from atlaslib.cards.run import CardRun

RECIPE = {
    "optimizer": "torch.optim.AdamW", "learning_rate": 2e-3, "epochs": 2, "batch_size": 8, "length_grouping": 1,
    "max_length": 32,
    "warmup_ratio": 0.1, "weight_decay": 0.01, "adam_betas": [0.9, 0.999], "adam_eps": 1e-8, "max_grad_norm": 1.0,
    "head_dropout": 0.1, "seeds": [7], "torch_threads": 1, "eval_batch_size": 16, "validation": "none",
}
CONCEPTS = ["fever", "cough", "stridor", "weakness", "chest pain", "air hunger"]


def toy_items(n: int, offset: int = 0):
    """``n`` separable items: "no X" is negated, "the patient has X" affirmed (X cycles over CONCEPTS)."""
    ids, texts, labels = [], [], []
    for i in range(offset, offset + n):
        neg = i % 2 == 1
        x = CONCEPTS[(i // 2) % len(CONCEPTS)]
        ids.append(f"toy-{i:03d}")
        texts.append(f"{'no' if neg else 'the patient has'} [entity] {x} [entity] .")
        labels.append("negated" if neg else "affirmed")
    return ids, texts, labels


@pytest.fixture(scope="module")
def encoder_dir(tmp_path_factory):
    return str(tiny_encoder(tmp_path_factory.mktemp("ft")))


@pytest.fixture(autouse=True)
def weight_cache(tmp_path, monkeypatch):
    monkeypatch.setenv(ft_cache.CACHE_ENV, str(tmp_path / "ftcache"))
    monkeypatch.delenv(ft.RETRAIN_ENV, raising=False)
    monkeypatch.setenv("ATLAS_PROGRESS", "off")
    return tmp_path / "ftcache"


def run_seq(encoder_dir, recipe=RECIPE, labels=("affirmed", "negated"), n_train=32, ids=None, **kw):
    ad = models.load_adapter(encoder_dir, "embed.text.pooled", embed_cache=False, progress=False)
    tr_ids, tr_texts, tr_labels = toy_items(n_train)
    _, te_texts, te_labels = toy_items(12, offset=100)
    out = ft.finetune_sequence(ad, ids or tr_ids, tr_texts, tr_labels, te_texts, labels, recipe, **kw)
    return out, te_labels


def state(out) -> dict:
    return {k: v.detach().clone() for k, v in out["model"].state_dict().items()}


def test_check_recipe_names_the_bad_key():
    with pytest.raises(ft_train.FinetuneError, match="missing key.*'seeds'"):
        ft.check_recipe({k: v for k, v in RECIPE.items() if k != "seeds"})
    for bad in ([], [3, 3], [1, -2], 7):
        with pytest.raises(ft_train.FinetuneError, match="'seeds': expected a non-empty list of distinct"):
            ft.check_recipe({**RECIPE, "seeds": bad})
    with pytest.raises(ft_train.FinetuneError, match="unknown key.*'patience'"):
        ft.check_recipe({**RECIPE, "patience": 3})
    with pytest.raises(ft_train.FinetuneError, match="'epochs'.*positive integer"):
        ft.check_recipe({**RECIPE, "epochs": 0})


def test_epoch_batches_cover_every_item_once_and_group_by_length():
    lengths = [5, 40, 7, 38, 6, 41, 8, 39, 9, 37, 4]
    rng = np.random.default_rng(3)
    plain = ft_train.epoch_batches(lengths, 4, 1, np.random.default_rng(3))
    perm = rng.permutation(len(lengths))
    assert [list(b) for b in plain] == [list(perm[:4]), list(perm[4:8]), list(perm[8:])]
    grouped = ft_train.epoch_batches(lengths, 2, 6, np.random.default_rng(3))  # one group: sorted, then shuffled
    assert sorted(i for b in grouped for i in b) == list(range(len(lengths))) and len(grouped) == 6
    assert sorted(sorted(lengths[i] for i in b) for b in grouped) == [
        [4], [5, 6], [7, 8], [9, 37], [38, 39], [40, 41]]


@pytest.mark.parametrize("labels", [("affirmed", "negated"), ("negated", "affirmed")])
def test_sequence_head_learns_a_separable_set_and_maps_labels(encoder_dir, labels):
    """Whatever order the head's classes have, predicted label names equal the gold names."""
    out, gold = run_seq(encoder_dir, recipe={**RECIPE, "epochs": 3, "batch_size": 4}, labels=labels)
    assert out["labels"] == list(labels) and out["details"]["id2label"] == dict(enumerate(labels))
    assert [out["labels"][p] for p in out["pred"]] == gold
    np.testing.assert_allclose(out["proba"].sum(axis=1), 1.0, rtol=1e-6)
    tr = out["details"]["training"]
    assert tr["steps"] == 3 * 8 == len(tr["loss"]) and tr["epoch_of_step"] == [1] * 8 + [2] * 8 + [3] * 8
    assert np.mean(tr["loss"][-8:]) < np.mean(tr["loss"][:8])          # the loop trains
    assert out["details"]["seeds"]["finetune"] == 7 and out["details"]["versions"]["torch"] == torch.__version__


def test_a_recipe_longer_than_the_encoders_positions_is_one_clear_error(encoder_dir):
    ad = models.load_adapter(encoder_dir, "embed.text.pooled", embed_cache=False, progress=False)
    limit = ad.model.config.max_position_embeddings
    with pytest.raises(ft_train.FinetuneError, match=f"max_length is {limit + 1} sub-words, but this encoder has "
                                                     f"{limit} positions"):
        run_seq(encoder_dir, recipe={**RECIPE, "max_length": limit + 1})


def test_same_seed_is_bit_identical_and_five_seeds_are_five_models(encoder_dir, weight_cache):
    """Five seeds give five different models and predictions (one per seed, each from the pretrained encoder);
    the same seeds again (retrained, nothing cached) give bit-identical weights, losses and probabilities."""
    five = {**RECIPE, "seeds": [7, 8, 9, 10, 11]}
    with results.Timer() as timer:
        a, _ = run_seq(encoder_dir, recipe=five, retrain=True)
    assert timer.timing["phases"]["prediction"]["items"] == 5 * 12        # each seed answers the 12 test items
    b, _ = run_seq(encoder_dir, recipe=five, retrain=True)
    assert [r["seed"] for r in a["seed_runs"]] == [7, 8, 9, 10, 11] == a["details"]["training_seeds"]
    assert all(not r["details"]["weight_cache"]["hit"] for r in a["seed_runs"] + b["seed_runs"])
    weights = [r["details"]["weight_cache"]["weights_sha256"] for r in a["seed_runs"]]
    keys = [r["details"]["weight_cache"]["key"] for r in a["seed_runs"]]
    assert len(set(weights)) == 5 and len(set(keys)) == 5            # five models, five cache entries
    probas = [r["proba"] for r in a["seed_runs"]]
    assert all(not np.array_equal(probas[i], probas[j]) for i in range(5) for j in range(i + 1, 5))
    for ra, rb in zip(a["seed_runs"], b["seed_runs"]):                  # same seed: bit for bit
        assert ra["details"]["weight_cache"]["weights_sha256"] == rb["details"]["weight_cache"]["weights_sha256"]
        assert np.array_equal(ra["proba"], rb["proba"]) and np.array_equal(ra["pred"], rb["pred"])
        assert ra["details"]["training"]["loss"] == rb["details"]["training"]["loss"]
        assert ra["details"]["recipe"]["seeds"] == five["seeds"] and ra["details"]["seed"] == ra["seed"]
    sa, sb = state(a), state(b)
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert np.array_equal(a["proba"], a["seed_runs"][0]["proba"])       # the top is the first seed's model
    # a seed trained alone is the same model as that seed among five (each seed starts from the encoder)
    alone, _ = run_seq(encoder_dir, recipe={**RECIPE, "seeds": [9]}, retrain=True)
    assert np.array_equal(alone["proba"], a["seed_runs"][2]["proba"])
    # the cache serves each seed by its own key: a list with one new seed trains only that one
    more, _ = run_seq(encoder_dir, recipe={**RECIPE, "seeds": [7, 12]})
    assert [r["details"]["weight_cache"]["hit"] for r in more["seed_runs"]] == [True, False]
    assert "2 training seeds (7, 12)" in ft_page.section_markdown(more["details"])


def test_weight_cache_hits_unchanged_and_misses_on_recipe_or_train_ids(encoder_dir, weight_cache, monkeypatch):
    with results.Timer() as t1:
        first, _ = run_seq(encoder_dir)
    assert first["details"]["trained_here"] and (weight_cache / first["details"]["weight_cache"]["key"]).is_dir()
    with results.Timer() as t2:
        again, _ = run_seq(encoder_dir)
    cache = again["details"]["weight_cache"]
    # where the time went: trained in the first run, loaded from the cache in the second; 12 answers each
    p1, p2 = t1.timing["phases"], t2.timing["phases"]
    assert p1["training"]["seconds"] > 0 and p2["training"]["seconds"] == 0 and p2["loading"]["seconds"] > 0
    assert p1["prediction"]["items"] == p2["prediction"]["items"] == 12 and p1["side"]["seconds"] == 0
    assert cache["hit"] and not again["details"]["trained_here"]
    assert cache["key"] == first["details"]["weight_cache"]["key"]
    assert np.array_equal(again["proba"], first["proba"])
    assert again["details"]["training"]["loss"] == first["details"]["training"]["loss"]   # the record comes along
    assert "trained in this run" in ft_page.section_markdown(first["details"])
    assert "loaded from the weight cache" in ft_page.section_markdown(again["details"])
    table = ft_page.recipe_table(again["details"])
    assert set(ft.RECIPE_KEYS) <= set(table.index) and table.loc["weights", "value"] == "loaded from cache"
    fig = ft_page.plot_loss(again["details"])
    assert list(fig.axes[0].lines[0].get_ydata()) == again["details"]["training"]["loss"]
    other_recipe, _ = run_seq(encoder_dir, recipe={**RECIPE, "learning_rate": 1e-3})
    ids = [f"toy-{i:03d}" for i in range(31)] + ["toy-999"]
    other_ids, _ = run_seq(encoder_dir, ids=ids)
    for out in (other_recipe, other_ids):
        assert not out["details"]["weight_cache"]["hit"]
        assert out["details"]["weight_cache"]["key"] != cache["key"]
    forced, _ = run_seq(encoder_dir, retrain=True)
    assert not forced["details"]["weight_cache"]["hit"] and forced["details"]["weight_cache"]["key"] == cache["key"]
    monkeypatch.setenv(ft.RETRAIN_ENV, "1")
    assert not run_seq(encoder_dir)[0]["details"]["weight_cache"]["hit"]


def flip_byte(path, at: float = 0.5) -> None:
    """Flip one bit of the tensor data of a safetensors file (past its JSON header), ``at`` of the way in."""
    data = bytearray(path.read_bytes())
    start = 8 + int.from_bytes(data[:8], "little")
    data[start + int((len(data) - start) * at)] ^= 0x10
    path.write_bytes(bytes(data))


def test_case24_08_a_corrupt_cached_weights_file_is_trained_again_and_said(encoder_dir, weight_cache):
    """Fault injection: a flipped byte in a cached ``model.safetensors`` (still a valid file, so it would load)
    and a truncated one are never used: the weights are trained again, replace the entry, and the run says so
    (cache info, a warning, the run page's paragraph); the next run loads the repaired entry."""
    first, _ = run_seq(encoder_dir)
    info = first["details"]["weight_cache"]
    weights = weight_cache / info["key"] / "model.safetensors"
    assert info["corrupt"] is None and info["weights_sha256"] == hashlib.sha256(weights.read_bytes()).hexdigest()
    for damage in (flip_byte, lambda f: f.write_bytes(f.read_bytes()[:-100])):
        damage(weights)
        with pytest.warns(RuntimeWarning, match="not used, the weights are trained again"):
            again, _ = run_seq(encoder_dir)
        cache = again["details"]["weight_cache"]
        assert again["details"]["trained_here"] and not cache["hit"]
        assert "sha256" in cache["corrupt"] and cache["key"] == info["key"]
        assert "failed their check" in ft_page.section_markdown(again["details"])
        assert np.array_equal(again["proba"], first["proba"])          # the same seed trains the same weights
        assert hashlib.sha256(weights.read_bytes()).hexdigest() == info["weights_sha256"] == cache["weights_sha256"]
        repaired, _ = run_seq(encoder_dir)
        assert repaired["details"]["weight_cache"]["hit"] and repaired["details"]["weight_cache"]["corrupt"] is None


def test_a_weight_cache_that_cannot_be_written_costs_the_cache_never_the_run(encoder_dir, weight_cache, tmp_path,
                                                                          monkeypatch):
    """The cache folder is a regular file: the run trains, predicts what a writable cache gives, and says once
    that the weights are not stored."""
    first, _ = run_seq(encoder_dir)
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder", encoding="utf-8")
    monkeypatch.setenv(ft_cache.CACHE_ENV, str(blocked))
    with pytest.warns(RuntimeWarning, match="cannot be stored .*this run uses them, the next one trains again"):
        out, _ = run_seq(encoder_dir)
    cache = out["details"]["weight_cache"]
    assert not cache["hit"] and "FileExistsError" in cache["unwritable"]  # mkdir of a path that is a file
    assert np.array_equal(out["proba"], first["proba"])
    assert blocked.read_text(encoding="utf-8") == "not a folder"


def test_token_targets_sit_on_first_subwords_and_long_sentences_are_chunked(encoder_dir):
    tags = ["O", "B-problem", "I-problem"]
    ad = models.load_adapter(encoder_dir, "embed.text.tokens", embed_cache=False, progress=False, max_length=12)
    tok = ad.tokenizer
    # "pneumonia" is not in the tiny vocabulary: it splits into several sub-words
    assert len(tok.tokenize("pneumonia")) > 1
    words = [["no", "pneumonia", "fever"]]
    ex, targets, segs, keys = ft_train._word_examples(ad, words, [["O", "B-problem", "B-problem"]],
                                                      {t: k for k, t in enumerate(tags)})
    n_sub = len(tok.tokenize("pneumonia"))
    # 3 words are 2 + n_sub sub-words, more than the 10 that max_length 12 leaves beside CLS and SEP: two chunks
    assert n_sub == 9 and len(ex) == 2 and [s[1:3] for s in segs] == [(0, 2), (2, 3)]
    ig = ft_train.IGNORE_INDEX  # [CLS] no p ##n ##e ... [SEP] | [CLS] fever [SEP]: a label on each first sub-word
    assert targets == [[ig, 0, 1] + [ig] * (n_sub - 1) + [ig], [ig, 1, ig]]
    assert ex[0]["input_ids"][0] == tok.cls_token_id and ex[0]["input_ids"][-1] == tok.sep_token_id
    assert ex[0]["_first"] == [1, 2] and ex[1]["_first"] == [1]


def test_token_finetune_tags_every_word_and_learns_a_separable_set(encoder_dir):
    tags = ["O", "B-problem", "I-problem"]
    ad = models.load_adapter(encoder_dir, "embed.text.tokens", embed_cache=False, progress=False, max_length=32)
    ids, texts, _ = toy_items(32)
    words, gold = [], []
    for t in texts:                       # "no fever ." / "the patient has chest pain ."
        pre, concept = t.split(" [entity] ")[:2]
        c = concept.split()
        words.append(pre.split() + c + ["."])
        gold.append(["O"] * len(pre.split()) + ["B-problem"] + ["I-problem"] * (len(c) - 1) + ["O"])
    recipe = {**RECIPE, "epochs": 4, "batch_size": 4, "learning_rate": 5e-3}
    out = ft.finetune_tokens(ad, ids, words, gold, words[:12], tags, recipe)
    assert [len(t) for t in out["tags"]] == [len(w) for w in words[:12]]
    assert out["tags"] == gold[:12]
    assert out["details"]["word_label"] == "first sub-word" and out["details"]["n_train_items"] == 32
    # a variant run: the trained model on other sentences, nothing trained; on the same ones, the same tags
    assert ft.predict_tokens(ad, out["model"], words[:12], tags, recipe) == out["tags"]
    with pytest.raises(ft_train.FinetuneError, match="max_length is 32, the recipe's 16"):
        ft.finetune_tokens(ad, ids, words, gold, words, tags, {**RECIPE, "max_length": 16})


def test_cards_run_finetune_or_give_a_not_run_reason(encoder_dir, data_dir, monkeypatch):
    from atlaslib.cards import maccrobat, negex
    from atlaslib.splits import SplitManifest

    # NegEx: a missing capability is NotRun, an encoder trains (recipe shrunk for the tiny model)
    import dataclasses

    items = negex.load_items(data_dir)
    manifest = negex.split(items, "atlas-n100-v1")
    train, test = negex.split_frames(items, manifest)
    train, test = train[train.text.str.len() < 90].head(24), test[test.text.str.len() < 90].head(10)
    manifest = dataclasses.replace(manifest, train=train["item_id"].tolist(), test=test["item_id"].tolist())
    with pytest.raises(negex.NotRun, match="capability missing"):
        negex.run_protocol("majority", "finetune", train, test)
    monkeypatch.setitem(negex.CARD.adapter_options, "finetune", {"max_length": 64, "embed_cache": False})
    monkeypatch.setattr(negex.FAMILY, "recipe", {**RECIPE, "max_length": 64, "epochs": 1,
                                                 "seeds": [7, 8, 9]})  # read there
    out = negex.run_protocol(encoder_dir, "finetune", train, test, data_dir=data_dir)
    assert out["capability"] == "embed.text.pooled" and out["pred"].shape == (10,)
    assert np.array_equal(out["pred"], (out["score"] >= 0.5).astype(int))   # 2 classes: arg-max = P >= 0.5
    assert out["details"]["recipe"]["max_length"] == 64
    # the row over three seeds: each metric the mean of the seeds' own, each seed's kept in the cell
    from tests.metrics.reference import binary_metrics
    from atlaslib.pages import seeds as seed_page

    run = CardRun("negex", "atlas-n100-v1", "enc", "finetune", parameters={"n_resamples": 50})
    records = negex.scored_records(test, out, data_dir=data_dir)
    row = run.score(records)
    own = [binary_metrics(test["label"], r["pred"], r["score"], "finetune", n_resamples=50)["roc_auc_finetune"]
           for r in out["seed_runs"]]
    assert row["roc_auc_finetune"]["value"] == pytest.approx(np.mean([m["value"] for m in own]))
    assert [p["value"] for p in row["roc_auc_finetune"]["seeds"]["per_seed"]] == pytest.approx([m["value"] for m in own])
    finished = run.finish(**negex.cell_parts(run, records, manifest, out=out))
    assert finished["metrics"] == row
    runs = finished["extra"]["seed_runs"]
    assert [r["seed"] for r in runs] == [7, 8, 9] and len(runs[1]["predictions"]) == 10
    assert runs[2]["metrics"]["roc_auc_finetune"]["value"] == pytest.approx(own[2]["value"]) and runs[0]["weights_key"]
    assert runs[2]["unit_counts"] and row["roc_auc_finetune"]["seeds"]["per_seed"][2]["ci_low"] == \
        runs[2]["metrics"]["roc_auc_finetune"]["ci_low"]
    assert "3 trained models" in seed_page.run_markdown(row, 3)
    # its variant runs predict with every seed's model (nothing trained again): on the run's own test texts each
    # seed's answers are that seed's; a perturbation's variant cell is a row over the same seeds
    again = out["predict"](test)
    assert [r["seed"] for r in again["seed_runs"]] == [7, 8, 9]
    for mine, first in zip(again["seed_runs"], out["seed_runs"]):
        assert np.array_equal(mine["pred"], first["pred"]) and np.allclose(mine["score"], first["score"], atol=1e-6)
    made = negex.run_variants(CardRun.of_cell(finished), out, train, test, data_dir=data_dir, n_resamples=50)
    assert made and all([r["seed"] for r in v["extra"]["seed_runs"]] == [7, 8, 9] for v in made)
    v = made[0]
    per = [r["metrics"]["macro_f1_finetune"]["value"] for r in v["extra"]["seed_runs"]]
    assert v["metrics"]["macro_f1_finetune"]["value"] == pytest.approx(np.mean(per))
    assert [x["item_id"] for x in v["extra"]["seed_runs"][2]["predictions"]] == [r["item_id"] for r in v["predictions"]]
    assert list(seed_page.seeded_table(row).columns)[:3] == ["mean over seeds", "two-level 95 % interval",
                                                             "per-seed range"]
    # MACCROBAT on a hand-built items frame: no capability -> not_run cell; an encoder -> tags per word
    rows = [{"item_id": f"m-{i}", "document": f"d{i % 3}", "words": ["no", "fever", "today"],
             "tags": ["O", "B-problem", "O"], "mentions": [("problem", 1, 1)], "text": "no fever today"}
            for i in range(9)]
    mitems = pd.DataFrame(rows)
    manifest = SplitManifest("maccrobat", "atlas-n100-v1", 1, [f"m-{i}" for i in range(6)], ["m-6", "m-7", "m-8"])
    assert maccrobat.run_protocol(mitems, manifest, "majority", "finetune", n_resamples=20).status == "not_run"
    monkeypatch.setattr(maccrobat.runs, "FINETUNE_RECIPE", {**RECIPE, "epochs": 1, "seeds": [7, 8]})  # read there
    monkeypatch.setitem(maccrobat.CARD.adapter_options, "finetune", {"max_length": RECIPE["max_length"],
                                                                     "embed_cache": False})  # loaded for it
    res = maccrobat.run_protocol(mitems, manifest, encoder_dir, "finetune", n_resamples=20)
    assert res.status == "ok" and [len(p) for p in res.pred] == [3, 3, 3]
    assert res.details["recipe"]["epochs"] == 1
    assert [r["seed"] for r in res.seed_runs] == [7, 8] and res.pred == res.seed_runs[0]["pred"]
    f1 = res.metrics()["entity_f1_finetune"]
    per = [r["metrics"]["entity_f1_finetune"]["value"] for r in res.seed_runs]
    assert f1["value"] == pytest.approx(np.mean(per)) and f1["seeds"]["n_seeds"] == 2   # gold has mentions: defined
    # a variant run predicts with every seed's model: on the run's own test sentences, each seed's own tags
    again = res.predict_seeds(mitems.set_index("item_id").loc[manifest.test, "words"].tolist())
    assert [s for s, _ in again] == [7, 8] and [t for _, t in again] == [r["pred"] for r in res.seed_runs]


def test_sequence_predict_reuses_the_trained_model(encoder_dir):
    """A variant run's predictions come from the model finetune_sequence returned, never trained again: on
    the run's own test texts they are its probabilities."""
    out, _ = run_seq(encoder_dir)
    _, te_texts, _ = toy_items(12, offset=100)
    before = state(out)
    ad = models.load_adapter(encoder_dir, "embed.text.pooled", embed_cache=False, progress=False)  # its tokenizer
    assert np.allclose(ft.predict_sequence(ad, out["model"], te_texts, RECIPE), out["proba"], atol=1e-6)
    assert all(torch.equal(v, state(out)[k]) for k, v in before.items())
