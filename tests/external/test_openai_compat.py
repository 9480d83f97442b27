"""The openai-compatible adapter against a real tiny model behind a real socket (tests/external/llm_server.py)."""
from __future__ import annotations

import socket

import pytest
import yaml

from atlaslib.models import ProfileError, get_profile, load_adapter, load_profiles
from atlaslib.models.openai_compat import NLI_PROMPT, UNPARSEABLE, EndpointError
from tests.external.llm_server import TinyLLMServer
from tests.tiny_models import tiny_causal_lm


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return tiny_causal_lm(tmp_path_factory.mktemp("llm"), max_positions=256)


@pytest.fixture
def profiles(tmp_path, monkeypatch):
    """Write a profile file for ``base_url`` and put it on $ATLAS_PROFILES; the request cache goes to tmp."""
    monkeypatch.setenv("ATLAS_CACHE_DIR", str(tmp_path / "cache"))

    def make(base_url, name="tiny-llm", **options):
        entry = {"source": "openai-compatible", "location": base_url, "revision": None,
                 "capabilities": ["predict.assertion", "predict.nli", "score.options"], "label_map": {},
                 "trained_on": [], "description": "A tiny GPT-2 behind a local server.",
                 "options": {"model": "tiny-gpt2", "max_retries": 2, "backoff": 0.01, "timeout": 10, **options}}
        path = tmp_path / f"{name}.yml"
        path.write_text(yaml.safe_dump({name: entry}))
        monkeypatch.setenv("ATLAS_PROFILES", str(path))
        return name
    return make


def test_correct_answers_run_through_the_nli_card(model_dir, profiles):
    from atlaslib.cards import nli_negation

    with TinyLLMServer(model_dir, answers=("Contradiction.",)) as server:
        name = profiles(server.base_url)
        run = nli_negation.run_card(name)
        # each answer came from the model: the argmax the server computed is the model's own for that prompt
        first = run.cases[0]
        assert server.argmax[0] == server.next_token(NLI_PROMPT.format(premise=first.premise,
                                                                       hypothesis=first.hypothesis))
        assert len(server.argmax) == len(run.cases)
    cell = run.cell()
    gold = [c.gold_label for c in run.cases]
    assert cell["metrics"]["aggregate_accuracy_zero_shot"]["value"] == pytest.approx(
        gold.count("contradiction") / len(gold))
    assert cell["metrics"]["false_entailment_rate_zero_shot"]["value"] == 0.0
    assert cell["spec"]["profile"]["base_url"] == server.base_url and cell["spec"]["profile"]["unparseable"] == []


def test_unparseable_answers_count_wrong_and_are_kept_verbatim(model_dir, profiles):
    from atlaslib.cards import nli_negation

    with TinyLLMServer(model_dir, answers=("I cannot tell",)) as server:
        run = nli_negation.run_card(profiles(server.base_url))
        adapter = load_adapter("tiny-llm", "predict.assertion")
        labels = adapter.predict_assertion(["No [entity] fever [entity]."])
    cell = run.cell()
    assert cell["metrics"]["aggregate_accuracy_zero_shot"]["value"] == 0.0  # abstentions are wrong
    assert cell["metrics"]["false_entailment_rate_zero_shot"]["value"] == 0.0  # and never false entailments
    kept = cell["spec"]["profile"]["unparseable"]
    assert len(kept) == len(run.cases) and {k["answer"] for k in kept} == {"I cannot tell"}
    assert labels == [UNPARSEABLE] and adapter.info["unparseable"] == [{"position": 0, "answer": "I cannot tell"}]


def test_429_then_success_waits_and_retries(model_dir, profiles):
    with TinyLLMServer(model_dir, answers=("no",)) as server:
        server.fail_next, server.retry_after = 1, "0.2"
        adapter = load_adapter(profiles(server.base_url, cache="off"), "predict.assertion")
        import time
        t0 = time.perf_counter()
        assert adapter.predict_assertion(["The patient has [entity] fever [entity]."]) == ["PRESENT"]
        assert time.perf_counter() - t0 >= 0.2  # Retry-After honoured
        assert server.requests == 2 and adapter.requests_sent == 2


def test_server_down_is_one_error_naming_the_url(profiles):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    adapter = load_adapter(profiles(url), "predict.nli")
    with pytest.raises(EndpointError, match=f"{url}/chat/completions could not be reached after 3 attempts"):
        adapter.predict_nli(["No fever."], ["The patient has fever."])


def test_cache_hit_sends_no_request(model_dir, profiles):
    with TinyLLMServer(model_dir, answers=("yes",)) as server:
        name = profiles(server.base_url)
        first = load_adapter(name, "predict.assertion").predict_assertion(["No [entity] cough [entity]."])
        again = load_adapter(name, "predict.assertion")
        assert again.predict_assertion(["No [entity] cough [entity]."]) == first == ["ABSENT"]
        assert server.requests == 1 and again.requests_sent == 0 and again.cache_hits == 1


def test_score_options_are_the_models_log_likelihoods(model_dir, profiles):
    import torch

    with TinyLLMServer(model_dir) as server:
        adapter = load_adapter(profiles(server.base_url), "score.options")
        out = adapter.score_options(["Sentence: No fever.\nAnswer:"], [" yes", " no"])
        tok, model = server.tokenizer, server.model
    for k, option in enumerate([" yes", " no"]):
        prompt_ids = tok("Sentence: No fever.\nAnswer:")["input_ids"]
        ids = tok("Sentence: No fever.\nAnswer:" + option)["input_ids"]
        with torch.no_grad():
            logp = torch.log_softmax(model(torch.tensor([ids])).logits[0], -1)
        expected = sum(float(logp[j - 1, ids[j]]) for j in range(len(prompt_ids), len(ids)))
        assert out["loglik"][0, k] == pytest.approx(expected, abs=1e-5)


def test_profiles_refuse_a_key_in_the_file_and_a_name_clash(tmp_path, monkeypatch):
    keyed = tmp_path / "keyed.yml"
    keyed.write_text(yaml.safe_dump({"llm": {
        "source": "openai-compatible", "location": "http://127.0.0.1:1/v1", "revision": None,
        "capabilities": ["predict.nli"], "label_map": {}, "trained_on": [], "description": "",
        "options": {"model": "m", "api_key": "sk-secret"}}}))
    with pytest.raises(ProfileError, match="never write a key into a file"):
        load_profiles(keyed)
    clash = tmp_path / "clash.yml"
    clash.write_text(yaml.safe_dump({"majority": {
        "source": "builtin", "location": "majority", "revision": None, "capabilities": ["predict.assertion"],
        "label_map": {}, "trained_on": [], "description": ""}}))
    monkeypatch.setenv("ATLAS_PROFILES", str(clash))
    with pytest.raises(ProfileError, match=r"clash.yml: profile 'majority' is already defined in the built-in"):
        get_profile("majority")
