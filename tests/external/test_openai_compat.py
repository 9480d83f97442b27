"""The openai-compatible adapter against a real tiny model behind a real socket (tests/external/llm_server.py: the
server binds port 0 and reports the port it got). No wall time is asserted: a wait is checked as the wait the
adapter asked for, a bound as the error it raises."""
from __future__ import annotations

import pytest
import yaml

from atlaslib.models import ProfileError, get_profile, load_adapter, load_profiles
from atlaslib.models.openai_compat import NLI_PROMPT, UNPARSEABLE, EndpointError
from tests.cards.nli_negation_runs import Ran
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
    with TinyLLMServer(model_dir, answers=("Contradiction.",)) as server:
        name = profiles(server.base_url)
        run = Ran(name)
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
    with TinyLLMServer(model_dir, answers=("I cannot tell",)) as server:
        run = Ran(profiles(server.base_url))
        adapter = load_adapter("tiny-llm", "predict.assertion")
        labels = adapter.predict_assertion(["No [entity] fever [entity]."])
    cell = run.cell()
    assert cell["metrics"]["aggregate_accuracy_zero_shot"]["value"] == 0.0  # abstentions are wrong
    assert cell["metrics"]["false_entailment_rate_zero_shot"]["value"] == 0.0  # and never false entailments
    kept = cell["spec"]["profile"]["unparseable"]
    assert len(kept) == len(run.cases) and {k["answer"] for k in kept} == {"I cannot tell"}
    assert labels == [UNPARSEABLE] and adapter.info["unparseable"] == [{"position": 0, "answer": "I cannot tell"}]


def test_429_then_success_waits_and_retries(model_dir, profiles, monkeypatch):
    import time

    from atlaslib.models import openai_compat

    waits = []

    class Clock:                                   # the adapter's time module, its sleeps recorded (and slept)
        def __getattr__(self, name):
            return getattr(time, name)

        def sleep(self, seconds):
            waits.append(seconds)
            time.sleep(seconds)

    monkeypatch.setattr(openai_compat, "time", Clock())
    with TinyLLMServer(model_dir, answers=("no",)) as server:
        server.fail_next, server.retry_after = 1, "0.2"
        adapter = load_adapter(profiles(server.base_url, cache="off"), "predict.assertion")
        assert adapter.predict_assertion(["The patient has [entity] fever [entity]."]) == ["PRESENT"]
        assert waits == [0.2]                      # Retry-After honoured (not the 0.01 s back-off)
        assert server.requests == 2 and adapter.requests_sent == 2


def test_server_down_is_one_error_naming_the_url(profiles, refused_url):
    url = f"{refused_url}/v1"                      # a port held bound, nobody listening: refused at once
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

    prompt = "Sentence: No fever.\nAnswer:"
    with TinyLLMServer(model_dir) as server:
        adapter = load_adapter(profiles(server.base_url), "score.options")
        out = adapter.score_options([prompt], [" yes", " no"])
        tok, model = server.tokenizer, server.model
        assert "/extras/tokenize" in server.paths and "/v1/completions" in server.paths
    for k, option in enumerate([" yes", " no"]):
        prompt_ids = tok(prompt)["input_ids"]
        ids = tok(prompt + option)["input_ids"]
        with torch.no_grad():
            logp = torch.log_softmax(model(torch.tensor([ids])).logits[0], -1)
        expected = sum(float(logp[j - 1, ids[j]]) for j in range(len(prompt_ids), len(ids)))
        assert out["loglik"][0, k] == pytest.approx(expected, abs=1e-5)
        assert out["option_token_ids"][k] == ids[len(prompt_ids):]
    assert adapter.info["cost"]["items"] == 1 and adapter.info["cost"]["completion_tokens"] > 0


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


# --------------------------------------------------------------------------------------------------------------
# Fault injection: each reproduces a case of the second faults round as written, and failed on 03e579c.

SECRET = "sk-test-4f7a9c2e1b"


def test_case03_a_key_with_control_characters_is_refused_by_its_variable_never_shown(model_dir, profiles,
                                                                                     monkeypatch):
    import traceback

    with TinyLLMServer(model_dir, answers=("no",)) as server:
        adapter = load_adapter(profiles(server.base_url, api_key_env="ATLAS_TEST_LLM_KEY"), "predict.assertion")
        for bad in (SECRET + "\r", SECRET + "\n", "Bearer " + SECRET, SECRET + "\x1b"):
            monkeypatch.setenv("ATLAS_TEST_LLM_KEY", bad)
            with pytest.raises(EndpointError, match="ATLAS_TEST_LLM_KEY") as exc:
                adapter.predict_assertion(["No [entity] fever [entity]."])
            shown = "".join(traceback.format_exception(exc.value))
            assert SECRET not in shown and "key is not shown" in shown
        assert server.requests == 0                                   # refused before anything was sent
        monkeypatch.setenv("ATLAS_TEST_LLM_KEY", SECRET)             # a clean key goes through, as a header only
        assert adapter.predict_assertion(["No [entity] fever [entity]."]) == ["PRESENT"]
        assert server.authorizations == [f"Bearer {SECRET}"]
    assert SECRET not in repr(adapter.info)


def test_case03_atlas_run_prints_and_keeps_no_key(model_dir, tmp_path, monkeypatch):
    """The whole path: `atlas run` with the key in the environment; nothing it prints or writes holds it."""
    import subprocess
    import sys

    with TinyLLMServer(model_dir, answers=("no",)) as server:
        prof = tmp_path / "llm.yml"
        prof.write_text(yaml.safe_dump({"keyed-llm": {
            "source": "openai-compatible", "location": server.base_url, "revision": None,
            "capabilities": ["predict.assertion"], "label_map": {}, "trained_on": [], "description": "keyed",
            "options": {"model": "tiny", "api_key_env": "ATLAS_TEST_LLM_KEY", "max_retries": 0}}}))
        env = {**__import__("os").environ, "ATLAS_TEST_LLM_KEY": SECRET + "\r",
               "ATLAS_CACHE_DIR": str(tmp_path / "cache")}
        out = tmp_path / "out"
        proc = subprocess.run(
            [sys.executable, "-m", "atlaslib.cli", "run", "--card", "negex", "--model", "keyed-llm",
             "--protocol", "zero_shot", "--version", "atlas-n100-v1", "--profiles", str(prof),
             "--results-dir", str(out / "results"), "--runs-dir", str(out / "runs"), "--build-dir", str(out / "build")],
            capture_output=True, text=True, env=env, timeout=600)
        assert server.requests == 0
    assert proc.returncode == 1, proc.stderr
    assert "ATLAS_TEST_LLM_KEY" in proc.stderr and "carriage return" in proc.stderr
    assert SECRET not in proc.stdout + proc.stderr
    written = [p for p in out.rglob("*") if p.is_file()]
    assert any("failed" in str(p) for p in written)                  # the failed notebook is kept ...
    for p in written:                                                 # ... and holds no key, nor does anything else
        assert SECRET.encode() not in p.read_bytes(), p


def test_case07_only_parsed_replies_are_cached_and_force_bypasses_the_cache(model_dir, profiles, tmp_path):
    from atlaslib.models import calls
    from atlaslib.models.openai_compat import refreshing_requests

    with TinyLLMServer(model_dir, answers=("no",)) as server:
        name = profiles(server.base_url, max_retries=0)
        scorer = load_adapter(name, "score.options")
        scorer.tokenize("Answer:"), scorer.tokenize("Answer: no")     # cached: the fault hits the scoring request
        server.faults = ["no-logprobs"]
        with pytest.raises(EndpointError, match=r"/v1/completions: the answer has no "
                                                r"choices\[0\]\.logprobs\.token_logprobs\[0\]"):
            scorer.score_options(["Answer:"], [" no"])
        server.faults = ["error-200"]
        nli = load_adapter(name, "predict.nli")
        with pytest.raises(EndpointError, match="chat/completions answered HTTP 200 with an error instead of an "
                                                "answer: .*model not loaded"):
            nli.predict_nli(["No fever."], ["Fever."])
        cached = list(calls.entries())
        # only the tokenizer's replies (which parsed) were kept; neither bad reply was
        assert len(cached) == 2 and all(b'"tokens"' in p.read_bytes() for p in cached)
        before = server.requests
        again = load_adapter(name, "score.options").score_options(["Answer:"], [" no"])   # asks the server again
        assert server.requests > before and again["loglik"][0, 0] < 0
        # a bad reply stored by an older version is not used: it is asked again and replaced
        bad = load_adapter(name, "predict.nli")
        key = bad._call_key("/chat/completions", {
            "model": "tiny-gpt2", "messages": [{"role": "user", "content": NLI_PROMPT.format(
                premise="No cough.", hypothesis="Cough.")}], "temperature": 0, "max_tokens": 8})
        bad.calls.put(key, {"reply": {"error": {"message": "overloaded"}}})
        path = bad.calls.path(key)
        n = server.requests
        assert bad.predict_nli(["No cough."], ["Cough."]) == [None] and server.requests == n + 1
        assert b"overloaded" not in path.read_bytes()
        # a good reply is served from the cache, except under --force (refreshing_requests)
        n = server.requests
        load_adapter(name, "predict.nli").predict_nli(["No cough."], ["Cough."])
        assert server.requests == n
        with refreshing_requests():
            load_adapter(name, "predict.nli").predict_nli(["No cough."], ["Cough."])
        assert server.requests == n + 1


def test_case07_atlas_run_force_asks_the_server_again(model_dir, tmp_path, monkeypatch):
    from atlaslib import runner

    with TinyLLMServer(model_dir, answers=("Contradiction.",)) as server:
        prof = tmp_path / "llm.yml"
        prof.write_text(yaml.safe_dump({"tiny-llm": {
            "source": "openai-compatible", "location": server.base_url, "revision": None,
            "capabilities": ["predict.nli"], "label_map": {}, "trained_on": [], "description": "tiny",
            "options": {"model": "tiny-gpt2", "max_retries": 0}}}))
        monkeypatch.setenv("ATLAS_PROFILES", str(prof))              # the kernels inherit both
        monkeypatch.setenv("ATLAS_CACHE_DIR", str(tmp_path / "cache"))
        req = runner.RunRequest("nli_negation", "builtin-v1", "tiny-llm", "zero_shot")
        kw = dict(results_dir=tmp_path / "results", runs_dir=tmp_path / "runs", failed_dir=tmp_path / "failed")
        runner.run(req, **kw)
        first = server.requests
        assert first == 207                                         # one request per case
        runner.run(req, force=True, **kw)                           # the run cache and the request cache bypassed
        assert server.requests == 2 * first


def test_case11_the_whole_request_is_bounded_not_each_read(model_dir, profiles):
    with TinyLLMServer(model_dir, answers=("no",)) as server:
        server.faults, server.trickle_seconds = ["trickle"], 0.1      # a byte every 0.1 s: no read ever waits 1 s
        adapter = load_adapter(profiles(server.base_url, timeout=1.0, max_retries=0, cache="off"), "predict.assertion")
        # the answer trickles for many seconds and no read ever waits 1 s: only a bound on the whole request can end
        # it with this message (a per-read timeout would read the answer whole, or see the server give up at 20 s)
        with pytest.raises(EndpointError, match=r"could not be reached after 1 attempts \(last: no complete answer "
                                                r"within 1 s \(the whole request\)\)"):
            adapter.predict_assertion(["No [entity] fever [entity]."])
        server.faults = ["trickle"]                                    # retried: the second attempt is answered
        # within 5 s, however loaded the machine (a tiny model's one answer; the trickled attempt, which the server
        # drags out to 20 s, still ends at the bound)
        retrying = load_adapter(profiles(server.base_url, timeout=5.0, max_retries=1, cache="off", name="retry"),
                                "predict.assertion")
        assert retrying.predict_assertion(["No [entity] fever [entity]."]) == ["PRESENT"]


@pytest.mark.parametrize("fault,capability,message", [
    ("not-utf8", "predict.nli", r"chat/completions answered HTTP 200 with a body that is not UTF-8 text \(byte 0xff"),
    ("not-json", "predict.nli", r"chat/completions answered HTTP 200 with a body that is not JSON .*'<html>Bad"),
    ("content-int", "predict.nli", r"chat/completions: the answer's choices\[0\]\.message\.content is a number "
                                   r"5; expected the answer's text"),
    ("not-http", "predict.nli", r"chat/completions answered with something that is not HTTP \(status line "
                                r"'HELLO FROM NOT A WEB SERVER"),
    ("no-logprobs", "score.options", r"completions: the answer has no choices\[0\]\.logprobs"),
])
def test_case17_a_bad_answer_says_what_was_wrong_and_where_and_is_not_retried(model_dir, profiles, fault,
                                                                              capability, message):
    with TinyLLMServer(model_dir, answers=("no",)) as server:
        adapter = load_adapter(profiles(server.base_url, max_retries=3, backoff=0.01), capability)
        call = (lambda: adapter.predict_nli(["No fever."], ["Fever."])) if capability == "predict.nli" else \
            (lambda: adapter.score_options(["Answer:"], [" no"]))
        if capability == "score.options":
            adapter.tokenize("Answer:"), adapter.tokenize("Answer: no")    # cached: the fault hits the scoring request
        server.faults = [fault]
        n = server.requests
        with pytest.raises(EndpointError, match=message) as exc:
            call()
        assert server.base_url in str(exc.value)
        assert server.requests == n + 1                                 # not retried


@pytest.mark.parametrize("fault,said", [("incomplete", "the connection closed after 13 of 400 bytes"),
                                        ("hang-up", "the server closed the connection without answering")])
def test_case17_a_broken_connection_is_retried_and_named(model_dir, profiles, fault, said):
    with TinyLLMServer(model_dir, answers=("no",)) as server:
        adapter = load_adapter(profiles(server.base_url, max_retries=1, backoff=0.01, cache="off"), "predict.assertion")
        server.faults = [fault]
        assert adapter.predict_assertion(["No [entity] fever [entity]."]) == ["PRESENT"]   # the retry answered
        assert server.requests == 2
        server.faults = [fault, fault]
        with pytest.raises(EndpointError, match=f"{server.base_url}/chat/completions could not be reached after 2 "
                                                f"attempts \\(last: {said}"):
            adapter.predict_assertion(["No [entity] fever [entity]."])
