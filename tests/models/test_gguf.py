"""The ``gguf`` model source on tiny GGUF files the tests write (tests/models/tiny_gguf.py): the loader, the
sha256 revision, ``package:`` locations, the dequantised copy, and each capability of a causal LM, checked
against the torch model the file was written from (one sequence at a time, no padding, no batching)."""
from __future__ import annotations

import hashlib
import sys

import numpy as np
import pytest
import torch
import yaml

from atlaslib.models import CapabilityMissing, WeightsUnavailable, check_weights, get_profile, load_adapter
from atlaslib.models import weights as W
from tests.models.tiny_gguf import tiny_llama_gguf

CAPS = ["score.options", "predict.nli", "embed.text.pooled", "embed.text.tokens"]
PROMPTS = ['Sentence: No weakness.\nQuestion: In this sentence, is "weakness" negated (stated as absent)?\nAnswer:',
           "Answer:",
           'Sentence: The patient has chest pain.\nQuestion: is "chest pain" negated?\nAnswer:']


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("gguf")
    path, (model, tok) = tiny_llama_gguf(d, q8_embeddings=True)
    return {"dir": d, "path": path, "model": model, "tok": tok}


@pytest.fixture(autouse=True)
def cache(tmp_path_factory, monkeypatch):
    """One atlas cache per test module (the dequantised copy is made once), no embedding cache."""
    d = tmp_path_factory.getbasetemp() / "gguf-atlas-cache"
    monkeypatch.setenv("ATLAS_CACHE_DIR", str(d))
    monkeypatch.setenv("ATLAS_EMBED_CACHE", "off")
    return d


def _profiles(tmp_path, monkeypatch, location, revision=None, name="tiny-gguf", caps=CAPS, **extra):
    path = tmp_path / f"{name}.yml"
    path.write_text(yaml.safe_dump({name: {
        "source": "gguf", "location": str(location), "revision": revision, "capabilities": list(caps),
        "label_map": {}, "trained_on": [], "description": "a tiny random Llama written as GGUF", **extra}}))
    monkeypatch.setenv("ATLAS_PROFILES", str(path))
    return name


def _hand_logp(model, ids):
    with torch.no_grad():
        return torch.log_softmax(model(torch.tensor([ids])).logits[0].double(), -1)


def _hand_loglik(tiny, prompt, option):
    tok, model = tiny["tok"], tiny["model"]
    p = tok(prompt, add_special_tokens=False)["input_ids"]
    full = tok(prompt + option, add_special_tokens=False)["input_ids"]
    logp = _hand_logp(model, full)
    return float(sum(logp[t - 1, full[t]] for t in range(len(p), len(full))))


def test_revision_is_the_files_sha256_and_a_pinned_one_is_enforced(tiny, tmp_path, monkeypatch):
    digest = hashlib.sha256(tiny["path"].read_bytes()).hexdigest()
    # a relative location is read from the profile file's folder
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "t.gguf").write_bytes(tiny["path"].read_bytes())
    name = _profiles(tmp_path, monkeypatch, "models/t.gguf")
    prof = get_profile(name)
    assert prof.source == "gguf" and prof.revision == digest
    assert prof.location == str((tmp_path / "models" / "t.gguf").resolve())
    check_weights(prof)
    wrong = _profiles(tmp_path, monkeypatch, tiny["path"], revision="0" * 64, name="pinned")
    with pytest.raises(WeightsUnavailable, match=f"has sha256 {digest}, the profile pins 0000"):
        check_weights(get_profile(wrong))
    with pytest.raises(WeightsUnavailable, match="has sha256"):
        load_adapter(wrong, "score.options", progress=False)
    missing = _profiles(tmp_path, monkeypatch, tmp_path / "nowhere.gguf", name="missing")
    with pytest.raises(WeightsUnavailable, match=r"nowhere\.gguf .*does not exist"):
        check_weights(get_profile(missing))


def test_package_location_is_found_without_importing_the_package(tiny, tmp_path, monkeypatch):
    pkg = tmp_path / "site" / "tinyllm_pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise ImportError('the package must not be imported')\n")
    (pkg / "tiny.gguf").write_bytes(tiny["path"].read_bytes())
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    name = _profiles(tmp_path, monkeypatch, "package:tinyllm_pkg/tiny.gguf")
    prof = get_profile(name)
    assert prof.location == "package:tinyllm_pkg/tiny.gguf"           # kept as written, not made relative
    assert prof.revision == hashlib.sha256(tiny["path"].read_bytes()).hexdigest()
    scorer = load_adapter(name, "score.options", progress=False)
    assert scorer.score_options(["Answer:"], [" yes"])["loglik"].shape == (1, 1)
    assert "tinyllm_pkg" not in sys.modules
    gone = _profiles(tmp_path, monkeypatch, "package:no_such_pkg_here/tiny.gguf", name="gone")
    with pytest.raises(WeightsUnavailable, match="'no_such_pkg_here'.*is not installed"):
        check_weights(get_profile(gone))


def test_loader_gives_the_model_the_file_was_written_from(tiny, tmp_path, monkeypatch):
    name = _profiles(tmp_path, monkeypatch, tiny["path"])
    scorer = load_adapter(name, "score.options", batch_size=2, progress=False)
    assert type(scorer.model).__name__ == "LlamaForCausalLM" and scorer.causal
    ids = tiny["tok"](PROMPTS[0], add_special_tokens=False)["input_ids"]
    assert scorer.token_ids(PROMPTS[0]) == ids                      # the tokenizer converted from the file
    with torch.no_grad():
        got = scorer.model(torch.tensor([ids])).logits
        want = tiny["model"](torch.tensor([ids])).logits
    assert float((got - want).abs().max()) < 1e-4                    # weights, q/k permutation, Q8_0 embeddings
    res = scorer.score_options(PROMPTS, [" yes", " no"])
    hand = np.array([[_hand_loglik(tiny, p, o) for o in (" yes", " no")] for p in PROMPTS])
    np.testing.assert_allclose(res["loglik"], hand, atol=1e-4)
    cost = scorer.info["cost"]
    assert cost["items"] == 3 and cost["calls"] == 1 and cost["seconds_per_item"] > 0
    assert cost["prompt_tokens"] == sum(len(scorer.token_ids(p)) for p in PROMPTS)
    assert cost["completion_tokens"] == 6                            # two one-token options per prompt
    assert scorer.info["revision"] == get_profile(name).revision


def test_dequantised_copy_is_made_once_reused_and_made_again_when_corrupt(tiny, tmp_path, monkeypatch, cache):
    name = _profiles(tmp_path, monkeypatch, tiny["path"])
    first = load_adapter(name, "score.options", progress=False).score_options(PROMPTS[:1], [" yes"])["loglik"]
    copy = W.gguf_checkpoint(get_profile(name))
    assert copy.parent == cache / "models" and (copy / "atlas-gguf.json").is_file()
    calls = []
    real = W._convert_gguf
    monkeypatch.setattr(W, "_convert_gguf", lambda *a: calls.append(1) or real(*a))
    again = load_adapter(name, "score.options", progress=False).score_options(PROMPTS[:1], [" yes"])["loglik"]
    assert calls == [] and np.array_equal(first, again)
    weights = copy / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-5] ^= 0xFF
    weights.write_bytes(bytes(data))
    with pytest.warns(UserWarning, match="not usable .*model.safetensors does not match its sha256"):
        third = load_adapter(name, "score.options", progress=False).score_options(PROMPTS[:1], [" yes"])["loglik"]
    assert calls == [1] and np.array_equal(first, third)


def test_not_a_gguf_file_is_weights_unavailable_naming_it(tmp_path, monkeypatch):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 60)
    name = _profiles(tmp_path, monkeypatch, bad)
    with pytest.raises(WeightsUnavailable, match=r"transformers cannot read .*broken\.gguf"):
        load_adapter(name, "score.options", progress=False)


def test_predict_nli_scores_the_cards_prompt_options(tiny, tmp_path, monkeypatch):
    from atlaslib.cards.nli_negation import NLI_PROMPTS

    name = _profiles(tmp_path, monkeypatch, tiny["path"])
    with pytest.raises(ValueError, match="pass prompt="):
        load_adapter(name, "predict.nli", progress=False)
    nli = load_adapter(name, "predict.nli", prompt=NLI_PROMPTS, progress=False)
    pairs = [("No fever.", "The patient has fever."), ("The patient has a cough.", "The patient has a cough."),
             ("Denies chest pain.", "Chest pain is absent.")]
    labels = nli.predict_nli([p for p, _ in pairs], [h for _, h in pairs])
    card = NLI_PROMPTS.card
    for (p, h), lab in zip(pairs, labels):
        prompt = card.render(premise=p, hypothesis=h)
        hand = [_hand_loglik(tiny, prompt, o) for o in card.option_strings]
        assert lab == card.labels[int(np.argmax(hand))]
    assert nli.last_loglik.shape == (3, 3)
    for row, ll, lab in zip(nli.last_label_probabilities(), nli.last_loglik, labels):  # softmax over the options
        soft = np.exp(ll - ll.max()) / np.exp(ll - ll.max()).sum()
        assert list(row) == card.labels and [row[k] for k in card.labels] == pytest.approx(soft.tolist())
        assert sum(row.values()) == pytest.approx(1.0) and max(row, key=row.get) == lab
    info = nli.info
    assert info["prompt"]["prompt_set"] == "nli-negation-options-v1" and len(info["prompt"]["sha256"]) == 64
    assert info["capability"] == "predict.nli" and info["cost"]["items"] == 3


def test_embeddings_are_last_layer_means_of_the_decoder(tiny, tmp_path, monkeypatch):
    name = _profiles(tmp_path, monkeypatch, tiny["path"])
    tok, model = tiny["tok"], tiny["model"]
    texts = ["No weakness.", "The patient has chest pain and fever.", "a"]
    emb = load_adapter(name, "embed.text.pooled", batch_size=2, progress=False)
    out = emb.embed(texts)
    for t, row in zip(texts, out):
        ids = tok(t, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            h = model.model(torch.tensor([ids])).last_hidden_state[0]   # decoder stack + final norm
        np.testing.assert_allclose(row, h.mean(0).numpy(), atol=1e-5)
    words = [["No", "chest", "pain", "."], ["Denies", "shortness", "of", "breath"]]
    wemb = load_adapter(name, "embed.text.tokens", progress=False)
    assert wemb.info["add_prefix_space"] is True                    # byte-level BPE: words get their space
    got = wemb.embed_words(words)
    for ws, vecs in zip(words, got):
        pieces = [tok(" " + w, add_special_tokens=False)["input_ids"] for w in ws]
        ids = [i for p in pieces for i in p]
        with torch.no_grad():
            h = model.model(torch.tensor([ids])).last_hidden_state[0].numpy()
        bounds = np.cumsum([0] + [len(p) for p in pieces])
        hand = np.stack([h[a:b].mean(0) for a, b in zip(bounds[:-1], bounds[1:])])
        np.testing.assert_allclose(vecs, hand, atol=1e-5)
    assert wemb.info["cost"]["items"] == 2 and emb.info["cost"]["items"] == 3


def test_greedy_continuations_equal_generate_one_at_a_time(tiny, tmp_path, monkeypatch):
    name = _profiles(tmp_path, monkeypatch, tiny["path"])
    scorer = load_adapter(name, "score.options", batch_size=3, progress=False)
    tok, model = tiny["tok"], tiny["model"]
    prefixes = [tok(t, add_special_tokens=False)["input_ids"] for t in
                ("There is no evidence of", "Blood pressure and heart rate were normal; lungs", "Denies")]
    n_new = [5, 3, 7]
    got = scorer.greedy_continuations(prefixes, n_new)
    for p, n, g in zip(prefixes, n_new, got):
        ids = list(p)
        for _ in range(n):                                           # plain greedy decoding, no cache
            ids.append(int(_hand_logp(model, ids)[-1].argmax()))
        want = ids[len(p):]
        if tok.eos_token_id in want:
            want = want[:want.index(tok.eos_token_id)]
        assert g == want
    assert scorer.greedy_continuations([[]], [3]) == [[]]            # nothing to continue


def test_a_gguf_profile_without_a_capability_is_refused(tiny, tmp_path, monkeypatch):
    name = _profiles(tmp_path, monkeypatch, tiny["path"], caps=["score.options"])
    with pytest.raises(CapabilityMissing, match="embed.text.pooled"):
        load_adapter(name, "embed.text.pooled")


def test_a_gguf_file_from_profiles_runs_every_protocol_its_capabilities_allow(tiny, tmp_path, monkeypatch, data_dir):
    """NegEx zero_shot (option scoring) and probe, the NLI challenge (option scoring over its labels) and the
    MACCROBAT probe (word states), each with the contamination mark and the memorisation probe in its cell
    parts; the profile is a user file, the package untouched."""
    from atlaslib.cards import maccrobat, negex
    from tests.cards.nli_negation_runs import Ran

    name = _profiles(tmp_path, monkeypatch, tiny["path"], training_data=["undisclosed"])
    items = negex.load_items(data_dir)
    train, test = negex.split_frames(items, negex.split(items, "atlas-n100-v1"))
    zs = negex.run_protocol(name, "zero_shot", train, test, data_dir=data_dir)
    assert zs["capability"] == "score.options" and np.all((zs["score"] > 0) & (zs["score"] < 1))
    assert zs["details"]["adapter"]["cost"]["items"] == 100
    mark, mem = zs["llm"]["contamination"], zs["llm"]["memorisation"]
    assert mark["may_have_seen"] is True and "undisclosed" in mark["reason"]
    assert mem["test"]["n_probed"] > 50 and mem["reference_card"] == "nli_negation"
    assert 0 <= mem["test"]["token_overlap"] <= 1 and mem["reference"]["n_probed"] > 20
    pr = negex.run_protocol(name, "probe", train, test, data_dir=data_dir)
    assert pr["capability"] == "embed.text.pooled" and pr["details"]["feature_dim"] == 32
    mem2 = pr["llm"]["memorisation"]["test"]                             # the same sentences, probed once:
    assert mem2["model_calls"]["made"] == 0 and mem2["model_calls"]["served"] > 0   # served by the call store
    same = ("n_probed", "exact_matches", "exact_match_rate", "token_overlap", "mean_prefix_tokens")
    assert {k: mem2[k] for k in same} == {k: mem["test"][k] for k in same}
    run = Ran(name)
    assert run.ok and set(run.labels) <= {"entailment", "neutral", "contradiction"}
    parts = dict(run.cell(), profile=run.profile)
    assert parts["extra"]["contamination"]["may_have_seen"] is False     # the synthetic reference
    assert parts["profile"]["prompt"]["prompt_set"] == "nli-negation-options-v1"
    assert parts["profile"]["cost"]["items"] == 207
    mitems = maccrobat.load_items(data_dir)
    out = maccrobat.run_protocol(mitems, maccrobat.split(mitems), name, "probe", n_resamples=50)
    assert out.status == "ok" and out.capability == "embed.text.tokens"
    assert out.llm["contamination"]["may_have_seen"] is True
    cell = maccrobat.outcome_parts(out, maccrobat.split(mitems), mitems)
    assert cell["extra"]["memorisation"]["test"]["n_probed"] > 0
