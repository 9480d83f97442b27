"""The contamination mark (may_have_seen) and the memorisation probe, against hand-worked cases."""
from __future__ import annotations

import hashlib

import pytest

from atlaslib.cards import get_card
from atlaslib.models import get_profile
from atlaslib.models.contamination import may_have_seen, memorisation_probe, probe_sample


def _p(source="gguf", training_data=(), trained_on=()):
    return {"name": "m", "source": source, "training_data": list(training_data), "trained_on": list(trained_on)}


def test_the_mark_follows_the_declared_exposure_and_training_data():
    negex, nli, maccrobat = get_card("negex"), get_card("nli_negation"), get_card("maccrobat")
    smol = may_have_seen(get_profile("smollm2-135m-instruct"), negex)
    assert smol["may_have_seen"] is True and "web-crawl and code-crawl" in smol["reason"]
    assert "since 2009" in smol["reason"] and smol["test_set_exposure"] == "public"
    ref = may_have_seen(get_profile("smollm2-135m-instruct"), nli)
    assert ref["may_have_seen"] is False and "contamination-free reference" in ref["reason"]
    assert may_have_seen(_p(training_data=["undisclosed"]), maccrobat)["may_have_seen"] is True
    assert "undisclosed" in may_have_seen(_p(source="openai-compatible"), negex)["reason"]   # an LLM saying nothing
    assert may_have_seen(_p(source="pypi"), negex) == {
        "may_have_seen": None, "reason": "unknown: the profile declares no training data",
        "test_set_exposure": "public", "training_data": []}
    assert may_have_seen(_p(source="hub", training_data=["pubmed", "mimic-iii"]), negex)["may_have_seen"] is False
    assert may_have_seen(_p(source="builtin", training_data=["none"]), negex)["may_have_seen"] is False
    named = may_have_seen(_p(source="hub", trained_on=["maccrobat"]), maccrobat)
    assert named["may_have_seen"] is True and "(maccrobat)" in named["reason"]
    unknown = may_have_seen(_p(training_data=["web-crawl"]), get_card("tempeval"))
    assert unknown["may_have_seen"] is None                          # the card does not say


class _Parrot:
    """A fake causal LM over whitespace 'tokens': it has memorised ``seen`` sentences (continues them
    exactly) and continues anything else with the token 'x'; counts its calls."""

    def __init__(self, seen, revision="r1"):
        self.seen = [s.split() for s in seen]
        self.calls = 0
        self.vocab: dict[str, int] = {}
        self.info = {"revision": revision, "adapter": "parrot", "model_class": None, "dtype": None}

    def token_ids(self, text):
        return [self.vocab.setdefault(w, len(self.vocab)) for w in text.split()]

    def greedy_continuations(self, prefixes, n_new):
        self.calls += 1
        out = []
        for p, n in zip(prefixes, n_new):
            hit = next((s for s in self.seen if self.token_ids(" ".join(s))[:len(p)] == list(p)), None)
            cont = self.token_ids(" ".join(hit))[len(p):len(p) + n] if hit else [self.vocab.setdefault("x", 99)] * n
            out.append(cont)
        return out


def test_probe_counts_exact_continuations_and_token_overlap(tmp_path, monkeypatch):
    monkeypatch.setenv("ATLAS_CACHE_DIR", str(tmp_path))
    seen = "the patient denies any chest pain or shortness of breath today"
    half_x = "no fever was noted on the ward x and x"                     # its second half partly 'x'
    other = "blood pressure and heart rate were within normal limits here"
    short = "too short"
    model = _Parrot([seen])
    import types

    from atlaslib.models import contamination

    now = [50.0]   # the probe's clock, given: its seconds are the model's 1.5 s of generation, nothing else
    monkeypatch.setattr(contamination, "time", types.SimpleNamespace(perf_counter=lambda: now[0]))
    generate = model.greedy_continuations

    def timed(prefixes, n_new):
        now[0] += 1.5
        return generate(prefixes, n_new)

    model.greedy_continuations = timed
    out = memorisation_probe(model, [seen, half_x, other, short, seen], min_tokens=4, max_new_tokens=32)
    assert out["n_distinct_sentences"] == 4 and out["n_skipped_short"] == 1 and out["n_probed"] == 3
    assert out["exact_matches"] == 1 and out["exact_match_rate"] == pytest.approx(1 / 3)
    # second halves: seen -> all 6 right; half_x "ward x and x" -> 2 of 5 ('x' at positions 1 and 3 ... of
    # "the ward x and x"); other -> 0 of 5
    h = "no fever was noted on the ward x and x".split()
    target = h[len(h) // 2:]
    hits = sum(t == "x" for t in target) / len(target)
    assert out["token_overlap"] == pytest.approx((1.0 + hits + 0.0) / 3)
    assert "cached" not in out and out["seconds"] == 1.5 and model.calls == 1
    # the probe keeps no cache of its own (the model-call store is the adapters'): a fake adapter that does not
    # use the store is asked again, and the probe counts no store calls for it
    assert out["model_calls"] == {"made": 0, "served": 0}
    again = memorisation_probe(model, [seen, half_x, other, short], min_tokens=4, max_new_tokens=32)
    assert model.calls == 2 and again["exact_matches"] == 1 and again["token_overlap"] == out["token_overlap"]


def test_probe_caps_the_continuation_and_samples_by_seeded_hash(tmp_path, monkeypatch):
    monkeypatch.setenv("ATLAS_CACHE_DIR", str(tmp_path))
    sentences = [f"sentence number {i} has quite a few words in it" for i in range(10)]
    sample, n = probe_sample(sentences + sentences[:3], 4, seed=7)
    want = sorted(sentences, key=lambda s: hashlib.sha256(f"7:{s}".encode()).hexdigest())[:4]
    assert n == 10 and sample == want
    model = _Parrot(sentences)
    out = memorisation_probe(model, sentences, max_sentences=4, max_new_tokens=2, min_tokens=4, seed=7)
    assert out["n_probed"] == 4 and out["mean_target_tokens"] == 2 and out["exact_match_rate"] == 1.0
    with pytest.raises(ValueError, match="max_new_tokens must be a positive integer"):
        memorisation_probe(model, sentences, max_new_tokens=0)
    with pytest.raises(TypeError, match="cannot continue text"):
        memorisation_probe(object(), sentences)


@pytest.fixture(scope="module")
def tiny_gpt2(tmp_path_factory):
    from tests import tiny_models as tm

    return tm.tiny_causal_lm(tmp_path_factory.mktemp("tiny-lm"))


SENTENCES = ["Denies shortness of breath, stridor, or air hunger.",
             "There is no evidence of pneumonia. Fever and cough were present.",
             "Blood pressure and heart rate were normal; lungs clear.",
             "The patient has chest pain and fever with cough today."]


def test_a_second_probe_of_the_same_model_is_served_by_the_call_store(tiny_gpt2, tmp_path, monkeypatch):
    """The continuations are model calls of the store keyed by the model, not the adapter: a second adapter of
    the same causal LM (another capability, as another protocol would load) probes the same sentences without
    running the model, and reports the same figures; another store folder computes them again."""
    from atlaslib.models import load_adapter

    monkeypatch.setenv("ATLAS_CACHE_DIR", str(tmp_path / "a"))
    monkeypatch.delenv("ATLAS_MODEL_CALLS", raising=False)
    first = memorisation_probe(load_adapter(str(tiny_gpt2), "score.options", progress=False), SENTENCES,
                               min_tokens=4, max_new_tokens=8)
    assert first["n_probed"] == 4 and first["model_calls"] == {"made": 4, "served": 0}
    other = load_adapter(str(tiny_gpt2), "embed.text.pooled", progress=False)
    generate = other.model.generate
    asked = []
    other.model.generate = lambda *a, **kw: asked.append(1) or generate(*a, **kw)
    second = memorisation_probe(other, SENTENCES, min_tokens=4, max_new_tokens=8)
    assert second["model_calls"] == {"made": 0, "served": 4} and asked == []
    figures = ("n_probed", "exact_matches", "token_overlap", "mean_prefix_tokens", "mean_target_tokens")
    assert {k: second[k] for k in figures} == {k: first[k] for k in figures}
    monkeypatch.setenv("ATLAS_CACHE_DIR", str(tmp_path / "b"))        # an empty store: asked again
    third = memorisation_probe(other, SENTENCES, min_tokens=4, max_new_tokens=8)
    assert third["model_calls"] == {"made": 4, "served": 0} and asked
    assert {k: third[k] for k in figures} == {k: first[k] for k in figures}
