"""The Hugging Face adapters on tiny random models, through load_adapter(<dir>, capability).

References are computed by hand here from the same checkpoints with plain transformers calls, one
sequence at a time (no padding, no batching), so batching, length sorting, padding masks and order
restoration in the adapters are what is being checked.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import pytest
import torch
from transformers import AutoTokenizer

from atlaslib.models import Profile, ProfileError, get_profile, load_adapter
from tests import tiny_models as tm

TEXTS = [
    "No [entity] WEAKNESS [entity].",
    "Denies shortness of breath, stridor, or [entity] AIR HUNGER [entity].",
    "a",
    "The patient has chest pain and fever with cough; lungs clear, abdomen soft and non tender.",
    "zzyzx qqq",
]
WORDS = [
    ["No", "chest", "pain", "."],
    ["zzyzx", "qwerty", "is", "negative"],                 # words of several sub-words
    ["fever"],
    [],                                                     # an empty sentence stays empty
    ["Denies", "shortness", "of", "breath", ",", "stridor", ",", "or", "air", "hunger", "."],
]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("tiny")
    return {
        "encoder": tm.tiny_encoder(d),
        "assertion": tm.tiny_assertion_classifier(d),
        "nli": tm.tiny_nli_classifier(d),
        "ner_i2b2": tm.tiny_token_classifier(d, tm.I2B2_LABELS),
        "ner_maccrobat": tm.tiny_token_classifier(d, tm.MACCROBAT_LABELS),
        "gpt2": tm.tiny_causal_lm(d),
        "dir": d,
    }


@lru_cache(maxsize=None)
def _ref(path, cls_name):
    """The checkpoint loaded with plain transformers, once per (path, class), for hand references."""
    import transformers

    return AutoTokenizer.from_pretrained(path), getattr(transformers, cls_name).from_pretrained(path).eval()


def _adapter(path, capability, **kw):
    return load_adapter(str(path), capability, progress=False, **kw)


# ------------------------------------------------------------------------------------------ pooled

def _hand_mean(path, text):
    tok, model = _ref(path, "AutoModel")
    enc = tok(text, return_tensors="pt", truncation=True, max_length=tm.MAX_POSITIONS)
    with torch.no_grad():
        h = model(**enc).last_hidden_state[0]
    return h.mean(0).numpy()


def test_pooled_mean_equals_hand_mean_and_order_is_restored(models):
    emb = _adapter(models["encoder"], "embed.text.pooled", batch_size=2)
    out = emb.embed(TEXTS)
    assert out.shape == (len(TEXTS), 32) and out.dtype == np.float32
    hand = np.stack([_hand_mean(models["encoder"], t) for t in TEXTS])
    np.testing.assert_allclose(out, hand, atol=1e-5)
    # batch size and input order do not change any row
    np.testing.assert_allclose(emb.embed(TEXTS[::-1], batch_size=1)[::-1], out, atol=1e-5)
    # not normalised
    assert not np.allclose(np.linalg.norm(out, axis=1), 1.0)


def test_pooled_is_deterministic_across_loads(models):
    a = _adapter(models["encoder"], "embed.text.pooled").embed(TEXTS)
    b = _adapter(models["encoder"], "embed.text.pooled").embed(TEXTS)
    assert np.array_equal(a, b)


def test_pooled_truncates_to_max_length_and_counts_it(models):
    emb = _adapter(models["encoder"], "embed.text.pooled")
    long = " ".join(["fever"] * 200)
    out = emb.embed([long])
    np.testing.assert_allclose(out[0], _hand_mean(models["encoder"], long), atol=1e-5)
    assert emb.info["stats"]["n_truncated"] == 1
    assert emb.info["max_length"] == tm.MAX_POSITIONS


def test_pooled_rejects_bad_input(models):
    emb = _adapter(models["encoder"], "embed.text.pooled")
    with pytest.raises(TypeError, match=r"texts\[1\]"):
        emb.embed(["ok", 3])
    with pytest.raises(TypeError, match="list of strings"):
        emb.embed("a single string")
    assert emb.embed([]).shape == (0, 32)


# ------------------------------------------------------------------------------------------ word_mean

def _hand_word_means(path, words):
    tok, model = _ref(path, "AutoModel")
    enc = tok(words, is_split_into_words=True, return_tensors="pt")
    with torch.no_grad():
        h = model(**enc).last_hidden_state[0].numpy()
    wids = enc.word_ids(0)
    return np.stack([h[[t for t, w in enumerate(wids) if w == j]].mean(0) for j in range(len(words))])


def test_word_mean_equals_hand_subword_means(models):
    emb = _adapter(models["encoder"], "embed.text.tokens", batch_size=2)
    out = emb.embed_words(WORDS)
    assert [o.shape for o in out] == [(len(w), 32) for w in WORDS]
    for w, o in zip(WORDS, out):
        if w:
            np.testing.assert_allclose(o, _hand_word_means(models["encoder"], w), atol=1e-5)
    # "zzyzx" is five sub-words: its vector is not any single sub-word's state
    assert emb.info["pooling"] == "word_mean"
    again = emb.embed_words(WORDS[::-1], batch_size=1)[::-1]
    for a, b in zip(out, again):
        np.testing.assert_allclose(a, b, atol=1e-5)


def test_word_mean_long_sentence_is_chunked_on_word_boundaries(models):
    emb = _adapter(models["encoder"], "embed.text.tokens")
    words = ["fever"] * 70                       # 70 sub-words > 64 - 2 special tokens
    out = emb.embed_words([words])[0]
    assert out.shape == (70, 32)
    budget = tm.MAX_POSITIONS - 2
    np.testing.assert_allclose(out[:budget], _hand_word_means(models["encoder"], words[:budget]), atol=1e-5)
    np.testing.assert_allclose(out[budget:], _hand_word_means(models["encoder"], words[budget:]), atol=1e-5)
    assert emb.info["stats"]["n_chunked_sentences"] == 1


def test_word_without_subwords_gets_the_unknown_token(models):
    emb = _adapter(models["encoder"], "embed.text.tokens")
    out = emb.embed_words([["no", "\u200b", "fever"]])[0]
    assert out.shape == (3, 32)
    np.testing.assert_allclose(out, _hand_word_means(models["encoder"], ["no", "[UNK]", "fever"]), atol=1e-5)
    assert emb.info["stats"]["n_unk_words"] == 1


def test_word_longer_than_max_length_raises(models):
    emb = _adapter(models["encoder"], "embed.text.tokens")
    with pytest.raises(ValueError, match=r"words\[0\]\[1\].*max_length"):
        emb.embed_words([["ok", "z" * 100]])
    with pytest.raises(TypeError, match=r"words\[1\]\[0\]"):
        emb.embed_words([["ok"], [5]])


# ------------------------------------------------------------------------------------------ NER

def _hand_first_subword_labels(path, words):
    tok, model = _ref(path, "AutoModelForTokenClassification")
    enc = tok(words, is_split_into_words=True, return_tensors="pt")
    with torch.no_grad():
        pred = model(**enc).logits[0].argmax(-1).tolist()
    wids = enc.word_ids(0)
    first = [wids.index(j) for j in range(len(words))]
    return [model.config.id2label[pred[t]] for t in first]


@pytest.mark.parametrize("kind,labels", [("ner_i2b2", tm.I2B2_LABELS), ("ner_maccrobat", tm.MACCROBAT_LABELS)])
def test_ner_first_subword_native_labels(models, kind, labels):
    tagger = _adapter(models[kind], "predict.ner", batch_size=2)
    out = tagger.predict_words(WORDS)
    assert [len(o) for o in out] == [len(w) for w in WORDS]
    assert {lab for o in out for lab in o} <= set(labels)
    for w, o in zip(WORDS, out):
        if w:
            assert o == _hand_first_subword_labels(models[kind], w)
    assert tagger.predict_words(WORDS[::-1])[::-1] == out
    assert _adapter(models[kind], "predict.ner").predict_words(WORDS) == out   # deterministic
    assert tagger.info["id2label"] == dict(enumerate(labels))


# ------------------------------------------------------------------------------------------ classifiers

def _hand_logits(path, a, b=None):
    tok, model = _ref(path, "AutoModelForSequenceClassification")
    with torch.no_grad():
        return model(**tok(a, b, return_tensors="pt")).logits[0].numpy()


def test_assertion_classifier_labels_match_hand_argmax(models):
    clf = _adapter(models["assertion"], "predict.assertion", batch_size=2)
    out = clf.predict_assertion(TEXTS)
    assert set(out) <= {"PRESENT", "ABSENT", "POSSIBLE"}
    names = ["PRESENT", "ABSENT", "POSSIBLE"]
    assert out == [names[int(_hand_logits(models["assertion"], t).argmax())] for t in TEXTS]
    proba = clf.assertion_proba(TEXTS)
    np.testing.assert_allclose(proba.sum(1), 1.0, atol=1e-6)
    assert [names[j] for j in proba.argmax(1)] == out
    assert clf.predict_assertion(TEXTS[::-1])[::-1] == out


def test_assertion_label_map_and_unknown_labels(models):
    d = models["dir"]
    raw = tm.tiny_assertion_classifier(d, labels=["LABEL_0", "LABEL_1", "LABEL_2"], name="tiny-assertion-raw")
    assert "predict.assertion" not in get_profile(str(raw)).capabilities   # names say nothing
    prof = Profile(name="raw", source="path", location=str(raw), capabilities=["predict.assertion"],
                   label_map={"label_0": "absent", "LABEL_1": "PRESENT", "LABEL_2": "POSSIBLE"})
    clf = load_adapter(prof, "predict.assertion", progress=False)
    ref = _adapter(models["assertion"], "predict.assertion").predict_assertion(TEXTS)   # same weights
    swap = {"PRESENT": "ABSENT", "ABSENT": "PRESENT", "POSSIBLE": "POSSIBLE"}
    assert clf.predict_assertion(TEXTS) == [swap[x] for x in ref]
    odd = tm.tiny_assertion_classifier(d, labels=["present", "negated", "maybe"], name="tiny-assertion-odd")
    prof = Profile(name="odd", source="path", location=str(odd), capabilities=["predict.assertion"])
    with pytest.raises(ProfileError, match=r"'negated', 'maybe'"):
        load_adapter(prof, "predict.assertion")


def test_nli_classifier(models):
    clf = _adapter(models["nli"], "predict.nli", batch_size=2)
    prem = ["No fever.", "The patient has chest pain and cough.", "a"]
    hyp = ["The patient has fever.", "cough", "no evidence of pain in the left lung or abdomen"]
    out = clf.predict_nli(prem, hyp)
    names = ["entailment", "neutral", "contradiction"]
    assert out == [names[int(_hand_logits(models["nli"], p, h).argmax())] for p, h in zip(prem, hyp)]
    # the label probabilities of that call: the softmax of the head's logits, computed here by hand
    for row, (p, h), lab in zip(clf.last_label_probabilities(), zip(prem, hyp), out):
        z = np.asarray(_hand_logits(models["nli"], p, h), dtype=float).ravel()
        soft = np.exp(z - z.max()) / np.exp(z - z.max()).sum()
        assert list(row) == names and [row[n] for n in names] == pytest.approx(soft.tolist(), abs=1e-5)
        assert max(row, key=row.get) == lab
    assert clf.predict_nli(prem[::-1], hyp[::-1])[::-1] == out
    with pytest.raises(ValueError, match="3 premises but 2 hypotheses"):
        clf.predict_nli(prem, hyp[:2])


def test_nli_lowercase_names_and_unknown_names(models):
    d = models["dir"]
    low = tm.tiny_nli_classifier(d, labels=["contradiction", "entailment", "neutral"], name="tiny-nli-low")
    assert "predict.nli" in get_profile(str(low)).capabilities
    clf = _adapter(low, "predict.nli")
    assert clf.label_of == {0: "contradiction", 1: "entailment", 2: "neutral"}
    two = tm.tiny_nli_classifier(d, labels=["ENTAILMENT", "NOT_ENTAILMENT"], name="tiny-nli-two")
    prof = Profile(name="two", source="path", location=str(two), capabilities=["predict.nli"])
    with pytest.raises(ProfileError, match="NOT_ENTAILMENT"):
        load_adapter(prof, "predict.nli")
    prof.label_map = {"not_entailment": "neutral", "entailment": "entailment"}
    assert set(load_adapter(prof, "predict.nli", progress=False).label_of.values()) == {"entailment", "neutral"}


# ------------------------------------------------------------------------------------------ options

def _hand_loglik(path, prompt, option, separate=False):
    tok, model = _ref(path, "AutoModelForCausalLM")
    p_ids = tok(prompt)["input_ids"]
    full = p_ids + tok(option)["input_ids"] if separate else tok(prompt + option)["input_ids"]
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.tensor([full])).logits[0], -1)
    return sum(float(logp[t - 1, full[t]]) for t in range(len(p_ids), len(full)))


def test_option_loglik_equals_hand_sum(models):
    scorer = _adapter(models["gpt2"], "score.options", batch_size=3)
    prompts = [
        'Sentence: No weakness.\nQuestion: In this sentence, is "weakness" negated (stated as absent)?\nAnswer:',
        "Answer:",
        'Sentence: The patient has chest pain.\nQuestion: is "chest pain" negated?\nAnswer:',
    ]
    res = scorer.score_options(prompts, [" yes", " no"])
    assert res["loglik"].shape == (3, 2)
    tok = AutoTokenizer.from_pretrained(models["gpt2"])
    assert res["option_token_ids"] == [tok(" yes")["input_ids"], tok(" no")["input_ids"]]
    assert res["tokenization"] == "joint"
    hand = np.array([[_hand_loglik(models["gpt2"], p, o) for o in (" yes", " no")] for p in prompts])
    np.testing.assert_allclose(res["loglik"], hand, atol=1e-4)
    assert (res["loglik"] < 0).all()
    again = scorer.score_options(prompts[::-1], [" no", " yes"])["loglik"][::-1, ::-1]
    np.testing.assert_allclose(again, res["loglik"], atol=1e-5)


def test_option_boundary_merge_falls_back_to_separate_tokenisation(models):
    scorer = _adapter(models["gpt2"], "score.options")
    res = scorer.score_options(["Answer: ye"], ["s"])      # "ye"+"s" merges into one token jointly
    assert res["tokenization"] == "separate" and res["n_separate"] == 1
    tok = AutoTokenizer.from_pretrained(models["gpt2"])
    assert res["option_token_ids"] == [tok("s")["input_ids"]]
    np.testing.assert_allclose(res["loglik"][0, 0], _hand_loglik(models["gpt2"], "Answer: ye", "s", True),
                               atol=1e-4)


def test_option_scorer_rejects_bad_input(models):
    scorer = _adapter(models["gpt2"], "score.options")
    with pytest.raises(ValueError, match="duplicates"):
        scorer.score_options(["a"], [" yes", " yes"])
    with pytest.raises(ValueError, match="prompt 0 is empty"):
        scorer.score_options([""], [" yes"])
    with pytest.raises(ValueError, match="max_length"):
        scorer.score_options(["fever " * 100], [" yes"])


# ------------------------------------------------------------------------------------------ info

@pytest.mark.parametrize("kind,capability", [
    ("encoder", "embed.text.pooled"), ("encoder", "embed.text.tokens"), ("ner_i2b2", "predict.ner"),
    ("assertion", "predict.assertion"), ("nli", "predict.nli"), ("gpt2", "score.options"),
])
def test_info_has_run_spec_fields(models, kind, capability):
    info = _adapter(models[kind], capability, batch_size=4).info
    for key in ("profile", "revision", "capability", "batch_size", "dtype", "device", "max_length",
                "torch_threads", "pooling"):
        assert key in info
    assert info["capability"] == capability and info["batch_size"] == 4
    assert info["revision"].startswith("sha256:") and info["dtype"] == "float32" and info["device"] == "cpu"
    if capability == "score.options":
        # asked before any call (as in a run the model-call store serves wholly): tiny GPT-2's logits are its
        # output embedding of the last states, so the head is applied at the positions read only
        assert info["lm_head"] == "at the positions read only"


def test_unknown_option_is_refused(models):
    with pytest.raises(TypeError, match="unknown option"):
        load_adapter(str(models["encoder"]), "embed.text.pooled", pooling="cls")


def test_word_mean_with_a_byte_level_tokenizer_uses_prefix_spaces(models):
    """A GPT-2 checkpoint used as a token encoder: pre-split words need add_prefix_space=True."""
    prof = Profile(name="gpt2-as-encoder", source="path", location=str(models["gpt2"]),
                   capabilities=["embed.text.tokens"])
    emb = load_adapter(prof, "embed.text.tokens", progress=False, batch_size=2)
    assert emb.info["add_prefix_space"] is True
    sents = [["No", "weakness", "."], ["Answer", ":", "yes"], ["chest"]]
    out = emb.embed_words(sents)
    import transformers

    tok = AutoTokenizer.from_pretrained(models["gpt2"], add_prefix_space=True)
    model = transformers.AutoModel.from_pretrained(models["gpt2"]).eval()
    for words, o in zip(sents, out):
        enc = tok(words, is_split_into_words=True, return_tensors="pt")
        with torch.no_grad():
            h = model(**enc).last_hidden_state[0].numpy()
        wids = enc.word_ids(0)
        hand = np.stack([h[[t for t, w in enumerate(wids) if w == j]].mean(0) for j in range(len(words))])
        np.testing.assert_allclose(o, hand, atol=1e-5)


def test_progress_bar_modes(monkeypatch, capsys):
    from atlaslib.progress import progress_bar

    monkeypatch.setenv("ATLAS_PROGRESS", "off")
    assert progress_bar(5, "x").disable
    monkeypatch.setenv("ATLAS_PROGRESS", "plain")
    bar = progress_bar(1000, "plain")
    assert bar.mininterval == 30.0 and not bar.disable
    for _ in range(1000):
        bar.update(1)
    bar.close()
    err = capsys.readouterr().err
    assert err.count("plain:") <= 3          # start and end, not one line per update
    assert progress_bar(5, "y", enabled=False).disable


def test_registry_hub_architectures_distilbert_ner_and_deberta_nli(tmp_path):
    """The adapters on the architectures of the registry's hub NER and NLI profiles."""
    db = tm.tiny_distilbert_token_classifier(tmp_path)
    assert "predict.ner" in get_profile(str(db)).capabilities
    out = _adapter(db, "predict.ner", batch_size=2).predict_words(WORDS)
    for w, o in zip(WORDS, out):
        assert o == (_hand_first_subword_labels(db, w) if w else [])
    deb = tm.tiny_deberta_nli_classifier(tmp_path)
    assert "predict.nli" in get_profile(str(deb)).capabilities
    prem, hyp = ["No fever.", "The patient has chest pain."], ["fever", "pain is absent in the chest"]
    names = ["contradiction", "entailment", "neutral"]
    got = _adapter(deb, "predict.nli", batch_size=2).predict_nli(prem, hyp)
    assert got == [names[int(_hand_logits(deb, p, h).argmax())] for p, h in zip(prem, hyp)]
