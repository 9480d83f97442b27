"""Language models behind an OpenAI-compatible HTTP API (vLLM, llama.cpp server, TGI, hosted endpoints).

Profile (``source: openai-compatible``)::

    my-llm:
      source: openai-compatible
      location: http://127.0.0.1:8000/v1     # the API's base URL
      revision: null                         # or the served model's version, if the server names one
      capabilities: [predict.assertion, predict.nli]   # score.options only if the server returns logprobs
      label_map: {}
      trained_on: []
      description: What the model is.
      options:
        model: llama-3.1-8b-instruct          # the model name the server expects (required)
        api_key_env: MY_LLM_API_KEY           # NAME of the environment variable holding the key (optional)

The key itself never appears in a profile, a cache file or a result cell: a profile with any other option
naming a key is refused. Other options: ``endpoint`` (``chat``: /chat/completions, default; or
``completions``), ``max_tokens`` (default 8), ``timeout`` (seconds, default 60), ``max_retries`` (default 5),
``backoff`` (first wait in seconds, default 1.0, doubled per retry), ``cache`` (``on`` / ``off``).

Capabilities:

- ``predict.assertion``: :data:`ASSERTION_PROMPT` per marked sentence; the answer must be ``yes`` (negated ->
  ABSENT) or ``no`` (-> PRESENT), compared after stripping spaces and one final full stop, ignoring case.
- ``predict.nli``: :data:`NLI_PROMPT`; the answer must be ``entailment``, ``neutral`` or ``contradiction``
  (same comparison).
- ``score.options``: ``/completions`` with ``echo`` and ``logprobs``: the log-likelihood of each option is the
  sum of the log-probabilities of the tokens after the prompt (``text_offset`` >= the prompt's length).

An answer that does not parse is never mapped to a label: :meth:`predict_assertion` returns
:data:`UNPARSEABLE` for it and :meth:`predict_nli` returns ``None`` (an abstention, which the NLI challenge
counts as wrong and never as a false entailment); every such answer is kept verbatim, with its position, in
``info["unparseable"]``, which the run spec records.

Requests: temperature 0; cached on disk (``<atlas cache>/openai/<sha256>.json``) keyed by the base URL, the
model name, the endpoint and the whole request body (prompt, decoding settings, prompt version); retried on
connection errors, 429 and 5xx with exponential back-off, waiting what a ``Retry-After`` header asks when
there is one. A server that cannot be reached raises :class:`EndpointError` naming the URL.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import time
import urllib.error
import urllib.request
from pathlib import Path

PROMPT_VERSION = "atlas-openai-prompts-v1"
UNPARSEABLE = "UNPARSEABLE"
ASSERTION_PROMPT = (
    "A sentence from a clinical report follows; one concept in it is wrapped in [entity] markers.\n"
    "Is the marked concept negated, that is, stated to be absent?\n"
    "Answer with exactly one word: yes or no.\n\n"
    "Sentence: {text}\nAnswer:")
NLI_PROMPT = (
    "Premise: {premise}\nHypothesis: {hypothesis}\n"
    "Does the premise entail the hypothesis, contradict it, or neither?\n"
    "Answer with exactly one word: entailment, contradiction or neutral.\nAnswer:")
ASSERTION_ANSWERS = {"yes": "ABSENT", "no": "PRESENT"}
NLI_ANSWERS = ("entailment", "neutral", "contradiction")
CAPABILITIES = ("predict.assertion", "predict.nli", "score.options")
OPTIONS = {"model", "api_key_env", "endpoint", "max_tokens", "timeout", "max_retries", "backoff", "cache"}
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class EndpointError(RuntimeError):
    """The server could not be reached or answered with an error after the retries (names the URL)."""


def check_entry(name: str, entry: dict, where: str) -> None:
    """Profile validation for ``source: openai-compatible`` (called by the registry's validator)."""
    from . import ProfileError

    loc = str(entry.get("location") or "")
    if not re.match(r"^https?://[^\s/]+", loc):
        raise ProfileError(f"{where}: profile {name!r} key 'location' must be the API's base URL "
                           f"(http://host:port/v1), got {loc!r}")
    opts = entry.get("options") or {}
    if not isinstance(opts, dict):
        raise ProfileError(f"{where}: profile {name!r} key 'options' must be a mapping")
    keyish = [k for k in opts if "key" in k.lower() and k != "api_key_env"] + \
             [k for k in opts if k.lower() in ("token", "secret", "password", "authorization")]
    if keyish:
        raise ProfileError(f"{where}: profile {name!r} option {keyish[0]!r}: never write a key into a file; put the "
                           f"NAME of the environment variable that holds it in 'api_key_env'")
    unknown = set(opts) - OPTIONS
    if unknown:
        raise ProfileError(f"{where}: profile {name!r} has unknown option(s) {sorted(unknown)}; allowed for "
                           f"openai-compatible: {sorted(OPTIONS)}")
    if not isinstance(opts.get("model"), str) or not opts["model"].strip():
        raise ProfileError(f"{where}: profile {name!r} needs options.model: the model name the server expects")
    env = opts.get("api_key_env")
    if env is not None and (not isinstance(env, str) or not _ENV_NAME.match(env)):
        raise ProfileError(f"{where}: profile {name!r} option 'api_key_env' must be an environment variable name")
    if opts.get("endpoint", "chat") not in ("chat", "completions"):
        raise ProfileError(f"{where}: profile {name!r} option 'endpoint' must be chat or completions")
    bad = [c for c in entry.get("capabilities") or [] if c not in CAPABILITIES]
    if bad:
        raise ProfileError(f"{where}: profile {name!r}: an openai-compatible model offers {list(CAPABILITIES)}, "
                           f"not {bad}")


def parse_answer(text: str, allowed) -> str | None:
    """The allowed answer ``text`` is, compared after stripping spaces and one final full stop, ignoring case;
    None when it is anything else (never guessed)."""
    t = (text or "").strip()
    if t.endswith("."):
        t = t[:-1].rstrip()
    t = t.casefold()
    return t if t in allowed else None


class OpenAICompatible:
    """Adapter for one capability of an ``openai-compatible`` profile."""

    def __init__(self, profile, capability: str, *, model: str, api_key_env: str | None = None,
                 endpoint: str = "chat", max_tokens: int = 8, timeout: float = 60.0, max_retries: int = 5,
                 backoff: float = 1.0, cache: str = "on", progress: bool = True, batch_size=None, **unused):
        if unused:
            raise TypeError(f"OpenAICompatible: unknown option(s) {sorted(unused)}")
        self.profile, self.capability = profile, capability
        self.base_url = profile.location.rstrip("/")
        self.model, self.api_key_env, self.endpoint = model, api_key_env, endpoint
        self.max_tokens, self.timeout = int(max_tokens), float(timeout)
        self.max_retries, self.backoff = int(max_retries), float(backoff)
        self.cache = str(cache).lower() not in ("off", "false", "0", "no")
        self.requests_sent = 0
        self.cache_hits = 0
        self.unparseable: list[dict] = []  # shared with info: what the run spec records
        self.info = {"profile": profile.name, "source": "openai-compatible", "base_url": self.base_url,
                     "model": model, "capability": capability, "endpoint": endpoint, "temperature": 0,
                     "max_tokens": self.max_tokens, "prompt_version": PROMPT_VERSION,
                     "api_key_env": api_key_env, "unparseable": self.unparseable}

    # -- transport -----------------------------------------------------------------------------------
    def _cache_path(self, url: str, body: dict) -> Path:
        from ..sources import cache_dir

        key = json.dumps({"base_url": self.base_url, "model": self.model, "url": url, "body": body,
                          "prompt_version": PROMPT_VERSION},
                         sort_keys=True)
        return cache_dir() / "openai" / f"{hashlib.sha256(key.encode()).hexdigest()}.json"

    def _headers(self) -> dict:
        h = {"Content-Type": "application/json"}
        if self.api_key_env:
            key = os.environ.get(self.api_key_env)
            if not key:
                raise EndpointError(f"{self.base_url}: the environment variable {self.api_key_env} (the profile's "
                                    f"api_key_env) is not set")
            h["Authorization"] = f"Bearer {key}"
        return h

    def post(self, path: str, body: dict) -> dict:
        """POST ``body`` to ``<base URL><path>`` (cached, retried); the decoded JSON answer."""
        url = self.base_url + path
        cached = self._cache_path(url, body)
        if self.cache and cached.is_file():
            self.cache_hits += 1
            return json.loads(cached.read_text(encoding="utf-8"))
        data = json.dumps(body).encode()
        last = ""
        for attempt in range(self.max_retries + 1):
            wait = self.backoff * (2 ** attempt)
            try:
                req = urllib.request.Request(url, data=data, headers=self._headers(), method="POST")
                self.requests_sent += 1
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    answer = json.loads(resp.read().decode("utf-8"))
                break
            except urllib.error.HTTPError as exc:
                last = f"HTTP {exc.code}"
                if exc.code != 429 and exc.code < 500:
                    raise EndpointError(f"{url} answered HTTP {exc.code} ({exc.reason}); not retried") from None
                retry_after = exc.headers.get("Retry-After") if exc.headers else None
                if retry_after:
                    try:
                        wait = min(float(retry_after), 120.0)
                    except ValueError:
                        pass
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as exc:
                reason = getattr(exc, "reason", exc)
                last = f"{type(reason).__name__}: {reason}" if not isinstance(reason, str) else reason
            except json.JSONDecodeError:
                raise EndpointError(f"{url} answered with something that is not JSON") from None
            if attempt < self.max_retries:
                time.sleep(wait)
        else:
            raise EndpointError(f"{url} could not be reached after {self.max_retries + 1} attempts ({last})")
        if self.cache:
            from ..results import atomic_write_text

            atomic_write_text(cached, json.dumps(answer))
        return answer

    def complete(self, prompt: str) -> str:
        """The model's answer text to ``prompt`` (temperature 0)."""
        if self.endpoint == "chat":
            body = {"model": self.model, "messages": [{"role": "user", "content": prompt}], "temperature": 0,
                    "max_tokens": self.max_tokens}
            out = self.post("/chat/completions", body)
            try:
                return out["choices"][0]["message"]["content"] or ""
            except (KeyError, IndexError, TypeError):
                raise EndpointError(f"{self.base_url}/chat/completions: the answer lacks "
                                    f"choices[0].message.content") from None
        body = {"model": self.model, "prompt": prompt, "temperature": 0, "max_tokens": self.max_tokens}
        out = self.post("/completions", body)
        try:
            return out["choices"][0]["text"] or ""
        except (KeyError, IndexError, TypeError):
            raise EndpointError(f"{self.base_url}/completions: answer lacks choices[0].text") from None

    # -- capabilities --------------------------------------------------------------------------------
    def _answers(self, prompts, allowed) -> list[str | None]:
        out = []
        for i, p in enumerate(prompts):
            raw = self.complete(p)
            parsed = parse_answer(raw, allowed)
            if parsed is None:
                self.unparseable.append({"position": i, "answer": raw})
            out.append(parsed)
        return out

    def predict_assertion(self, marked_texts) -> list[str]:
        """PRESENT / ABSENT per marked sentence, :data:`UNPARSEABLE` where the answer does not parse."""
        from . import check_texts

        texts = check_texts(marked_texts, "predict_assertion(marked_texts)")
        answers = self._answers([ASSERTION_PROMPT.format(text=t) for t in texts], ASSERTION_ANSWERS)
        return [UNPARSEABLE if a is None else ASSERTION_ANSWERS[a] for a in answers]

    def predict_nli(self, premises, hypotheses) -> list[str | None]:
        """entailment / neutral / contradiction per pair, None (abstention) where the answer does not parse."""
        from . import check_texts

        ps, hs = check_texts(premises, "predict_nli(premises)"), check_texts(hypotheses, "predict_nli(hypotheses)")
        if len(ps) != len(hs):
            raise ValueError(f"predict_nli: {len(ps)} premises, {len(hs)} hypotheses")
        return self._answers([NLI_PROMPT.format(premise=p, hypothesis=h) for p, h in zip(ps, hs)], NLI_ANSWERS)

    def score_options(self, prompts, options) -> dict:
        """``loglik[i, k]`` = sum of the server's log-probabilities of the tokens of ``options[k]`` after
        ``prompts[i]`` (``/completions`` with ``echo``, ``logprobs`` and no new tokens)."""
        import numpy as np

        from . import check_texts

        prompts = check_texts(prompts, "score_options(prompts)")
        options = check_texts(options, "score_options(options)")
        ll = np.zeros((len(prompts), len(options)))
        for i, p in enumerate(prompts):
            for k, o in enumerate(options):
                body = {"model": self.model, "prompt": p + o, "temperature": 0, "max_tokens": 0, "echo": True,
                        "logprobs": 1}
                out = self.post("/completions", body)
                try:
                    lp = out["choices"][0]["logprobs"]
                    offsets, values = lp["text_offset"], lp["token_logprobs"]
                except (KeyError, IndexError, TypeError):
                    raise EndpointError(f"{self.base_url}/completions returned no log-probabilities; remove "
                                        f"score.options from the profile's capabilities") from None
                picked = [v for off, v in zip(offsets, values) if off >= len(p)]
                if not picked or any(v is None for v in picked):
                    raise EndpointError(f"{self.base_url}/completions: no log-probability for the option tokens")
                ll[i, k] = float(sum(picked))
        return {"loglik": ll, "option_token_ids": None, "options": list(options)}
