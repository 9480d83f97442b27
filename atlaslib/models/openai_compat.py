"""Language models behind an OpenAI-compatible HTTP API (vLLM, llama.cpp server, TGI, hosted endpoints).

Why one module of this size: one adapter and the one HTTP client it needs (keys, retries, bounded replies, the
reply store), whose rules below are read together; the server-side tokenisation of ``score.options`` is in it.

Profile (``source: openai-compatible``)::

    my-llm:
      source: openai-compatible
      location: http://127.0.0.1:8000/v1     # the API's base URL
      revision: null                         # or the served model's version, if the server names one
      capabilities: [predict.assertion, predict.nli]   # score.options only if the server returns logprobs
      label_map: {}
      trained_on: []
      training_data: [undisclosed]           # what the model learnt from, if its maker says (optional)
      description: What the model is.
      options:
        model: llama-3.1-8b-instruct          # the model name the server expects (required)
        api_key_env: MY_LLM_API_KEY           # NAME of the environment variable holding the key (optional)

The key itself never appears in a profile, a cache file, a result cell, a log or an error message: a
profile with any other option naming a key is refused, and a key that holds anything but printable ASCII
(a trailing carriage return from a Windows file, a newline, a space) is refused by the name of its
variable, before any request, without showing it. Other options: ``endpoint`` (``chat``:
/chat/completions, default; or ``completions``), ``max_tokens`` (default 8), ``timeout`` (seconds for the
whole request, connection to last byte, default 60), ``max_retries`` (default 5), ``backoff`` (first wait in
seconds, default 1.0, doubled per retry), ``cache`` (``on`` / ``off``).

Capabilities:

- ``predict.assertion``: :data:`ASSERTION_PROMPT` per marked sentence; the answer must be ``yes`` (negated ->
  ABSENT) or ``no`` (-> PRESENT), compared after stripping spaces and one final full stop, ignoring case.
- ``predict.nli``: :data:`NLI_PROMPT`; the answer must be ``entailment``, ``neutral`` or ``contradiction``
  (same comparison).
- ``score.options``: the log-likelihood of an option after a prompt is the sum of the log-probabilities of
  its tokens, each *generated* by the server: ``/completions`` with the prompt (extended by the option's
  tokens so far), ``max_tokens`` 1, ``logprobs`` 1 and ``logit_bias`` +100 on the option's next token, which
  makes the greedy choice that token while the log-probability the server reports is the model's own
  (llama.cpp and vLLM report them before any bias). The option's tokens are the server's:
  ``/extras/tokenize`` (llama-cpp-python; ``/tokenize`` of llama.cpp's own server is tried next) of the
  prompt and of prompt + option. A prompt's log-probabilities from ``echo`` are not used: llama-cpp-python
  0.3 pairs each echoed token with the logits *after* it when the model puts no BOS token first (SmolLM2),
  which gives numbers that are not the model's (measured: ``tests/external/test_llama_server.py``).

An answer that does not parse is never mapped to a label: :meth:`predict_assertion` returns
:data:`UNPARSEABLE` for it and :meth:`predict_nli` returns ``None`` (an abstention, which the NLI challenge
counts as wrong and never as a false entailment); every such answer is kept verbatim, with its position, in
``info["unparseable"]``, which the run spec records.

Requests: temperature 0; sent to ``<base URL's path><path>`` (``/chat/completions``, ...; a query string in the
base URL, where a hosted API may want its ``api-version``, follows the joined path). Replies are kept in the
model-call store (:mod:`.calls`, ``<atlas cache>/calls/``): the model's identity is the base URL without user
name, password and query string, the model name, the profile's revision and the ``endpoint`` option; a
reply's input is the sha256 of the canonical JSON of the request's path and body (prompt, decoding
settings), under :data:`PROMPT_VERSION`. Only a reply that parsed into an answer is stored, and a stored
reply is parsed again when read (a bad one is asked again and replaced); with ``ATLAS_REQUEST_CACHE=refresh``
(what ``atlas run --force`` and ``atlas book --force`` set for their runs, :func:`refreshing_requests`)
nothing is read from the store and every reply is asked again (and stored). ``cache: off`` (or
``ATLAS_MODEL_CALLS=off``) reads and stores nothing. A store that cannot be written (``ATLAS_CACHE_DIR`` a
file, a read-only or full disk) costs the store, never the run: the replies are used, one warning says so,
and ``info["request_cache"]`` counts the failed writes. Reply bodies are read by :func:`atlaslib.jsonio.loads`
(bounded nesting and number length).
Retried with exponential back-off (waiting what a ``Retry-After`` header asks when it is a number of seconds
>= 0 or an HTTP-date; anything else is ignored), each wait at most :data:`MAX_WAIT` and all waits of one
request at most :data:`MAX_TOTAL_WAIT` in all: connection refused or reset, a connection closed early (before
or during the answer), a request that ran out of time, 429 and 5xx. Not retried: other 4xx, a redirect (3xx:
never followed, the Location is named), a body longer than :data:`MAX_REPLY_BYTES` (not read past the limit),
and a 2xx whose body is not an answer (not UTF-8, not JSON, an error object, a field missing or of the wrong
type): these raise :class:`EndpointError` at once, naming the URL, what the server sent and where in the
answer it is wrong. Only a 2xx is an answer. ``info["cost"]`` (:mod:`.cost`): wall seconds and
items of the calls, with the ``usage`` token counts the server reported (cached replies count in
``cached``).
"""
from __future__ import annotations

import contextlib
import http.client
import json
import os
import socket
import threading
import time
from urllib.parse import urlsplit

from atlaslib import jsonio
from atlaslib.escape import public_location
from atlaslib.models import calls
from atlaslib.models.cost import Cost
from atlaslib.models.registry import OPENAI_CAPABILITIES, OPENAI_OPTIONS, check_texts

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
CAPABILITIES = OPENAI_CAPABILITIES
OPTIONS = OPENAI_OPTIONS
#: ``refresh``: read no cached reply (ask the server again), still store the valid ones
CACHE_ENV = "ATLAS_REQUEST_CACHE"
#: the bias that makes a token the greedy choice (the OpenAI API's largest)
FORCE_BIAS = 100
#: the largest reply read, in bytes (an answer of a few tokens, or the token ids of a prompt, is a few KiB): a
#: longer one is refused, and what is past the limit is never read
MAX_REPLY_BYTES = 8 * 2 ** 20
#: the longest wait before another attempt, in seconds (the back-off, or what a Retry-After header asks)
MAX_WAIT = 60.0
#: the most the waits of one request may add up to, in seconds; the attempt that would pass it is not made
MAX_TOTAL_WAIT = 300.0


class EndpointError(RuntimeError):
    """The server could not be reached, or its answer is not one (names the URL and what was wrong). The URL in
    the message is the adapter's public one (:func:`atlaslib.escape.public_location`, made once from the profile's
    location when the adapter is made): no user name, password or query string ever reaches a message."""


class _Transient(Exception):
    """A failure worth another attempt (connection refused/reset/closed early, time out, 429, 5xx)."""

    def __init__(self, reason: str, wait: float | None = None):
        super().__init__(reason)
        self.reason, self.wait = reason, wait


@contextlib.contextmanager
def refreshing_requests(enabled: bool = True):
    """Inside the block (and in notebook kernels started inside it), no request is served from the cache:
    ``$ATLAS_REQUEST_CACHE`` is ``refresh``; restored after."""
    if not enabled:
        yield
        return
    old = os.environ.get(CACHE_ENV)
    os.environ[CACHE_ENV] = "refresh"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(CACHE_ENV, None)
        else:
            os.environ[CACHE_ENV] = old


def parse_answer(text: str, allowed) -> str | None:
    """The allowed answer ``text`` is, compared after stripping spaces and one final full stop, ignoring case;
    None when it is anything else (never guessed)."""
    t = (text or "").strip()
    if t.endswith("."):
        t = t[:-1].rstrip()
    t = t.casefold()
    return t if t in allowed else None


def _describe(value) -> str:
    """A short description of a JSON value for an error message: its type and a clipped repr."""
    text = json.dumps(value, ensure_ascii=True)
    if len(text) > 80:
        text = text[:77] + "..."
    kind = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null",
            int: "a number", float: "a number"}.get(type(value), type(value).__name__)
    return f"{kind} {text}" if value is not None else "null"


def _field(answer, path: str, url: str, expected: type | tuple, what: str):
    """``answer`` at ``path`` (``choices[0].message.content``), checked to be of type ``expected``; else
    EndpointError naming the URL, the path, what is there and what was expected."""
    node = answer
    walked = ""
    for part in path.replace("]", "").replace("[", ".").split("."):
        key = int(part) if part.isdigit() else part
        ok = (isinstance(node, list) and isinstance(key, int) and -len(node) <= key < len(node)) or \
             (isinstance(node, dict) and isinstance(key, str) and key in node)
        if not ok:
            where = walked or "the answer"
            raise EndpointError(f"{url}: the answer has no {path} ({where} is {_describe(node)}); expected {what}")
        node = node[key]
        walked = f"{walked}[{key}]" if isinstance(key, int) else (f"{walked}.{key}" if walked else key)
    if not isinstance(node, expected) or (expected is not bool and isinstance(node, bool)):
        raise EndpointError(f"{url}: the answer's {path} is {_describe(node)}; expected {what}")
    return node


def retry_after_seconds(value: str | None) -> float | None:
    """The wait a ``Retry-After`` header asks for, in seconds: a number of seconds (finite, >= 0) or an HTTP-date
    (the time until then; 0 when it is past). None for anything else (``-1``, ``nan``, text): the back-off
    decides then."""
    import email.utils
    import math
    from datetime import datetime, timezone

    text = (value or "").strip()
    if not text:
        return None
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def _read_capped(resp, url: str) -> bytes:
    """The body of ``resp``, read in blocks; EndpointError naming ``url`` once it (or its declared length) passes
    :data:`MAX_REPLY_BYTES`, with the rest never read."""
    def too_large(size: str) -> EndpointError:
        return EndpointError(f"{url} answered with a body of {size}; a reply may have at most {MAX_REPLY_BYTES:,} "
                             f"bytes (MAX_REPLY_BYTES): not read further, not retried")

    declared = (resp.getheader("content-length") or "").strip()
    if declared.isdigit() and int(declared) > MAX_REPLY_BYTES:
        raise too_large(f"{int(declared):,} bytes (its Content-Length)")
    raw = bytearray()
    while block := resp.read(min(1 << 16, MAX_REPLY_BYTES + 1 - len(raw))):
        raw += block
        if len(raw) > MAX_REPLY_BYTES:
            raise too_large(f"more than {MAX_REPLY_BYTES:,} bytes")
    if resp.length:  # the connection ended before the declared length (a read in blocks does not raise it)
        raise http.client.IncompleteRead(bytes(raw), resp.length)
    return bytes(raw)


class OpenAICompatible:
    """Adapter for one capability of an ``openai-compatible`` profile."""

    def __init__(self, profile, capability: str, *, model: str, api_key_env: str | None = None,
                 endpoint: str = "chat", max_tokens: int = 8, timeout: float = 60.0, max_retries: int = 5,
                 backoff: float = 1.0, cache: str = "on", progress: bool = True, batch_size=None, **unused):
        if unused:
            raise TypeError(f"OpenAICompatible: unknown option(s) {sorted(unused)}")
        self.profile, self.capability = profile, capability
        u = urlsplit(profile.location)
        #: the location without user name, password, query string and trailing "/" (paths are joined onto it):
        #: what every message, the cell and the store key show (:func:`atlaslib.escape.public_location`, the one
        #: parsing of a location's user info); the request adds only the query string (:meth:`_send`)
        self.base_url = public_location(f"{u.scheme}://{u.netloc}{u.path.rstrip('/')}")
        self.root_url = public_location(f"{u.scheme}://{u.netloc}")
        self._query = f"?{u.query}" if u.query else ""
        self.model, self.api_key_env, self.endpoint = model, api_key_env, endpoint
        self.max_tokens, self.timeout = int(max_tokens), float(timeout)
        self.max_retries, self.backoff = int(max_retries), float(backoff)
        self.cache = str(cache).lower() not in ("off", "false", "0", "no")
        self.calls = calls.CallSpace(
            {"base_url": self.base_url, "model": self.model, "revision": profile.revision,
             "endpoint": self.endpoint}, "openai.reply", {"prompt_version": PROMPT_VERSION}, enabled=self.cache)
        self.requests_sent = 0
        self.cache_hits = 0
        self.cache_rejected = 0
        self.cost = Cost()
        self._cached_calls = 0
        self.unparseable: list[dict] = []  # shared with info: what the run spec records
        self._tokenize_path: str | None = None
        self._tokens = (0, 0)  # (prompt, completion) tokens the server reported during the current call

    @property
    def info(self) -> dict:
        cost = self.cost.to_dict()
        cost["cached"] = self._cached_calls
        return {"profile": self.profile.name, "source": "openai-compatible",
                "base_url": self.base_url,  # public: the cell records no credentials or keys
                "model": self.model, "capability": self.capability, "endpoint": self.endpoint, "temperature": 0,
                "max_tokens": self.max_tokens, "prompt_version": PROMPT_VERSION,
                "api_key_env": self.api_key_env, "unparseable": self.unparseable,
                "revision": self.profile.revision, "requests_sent": self.requests_sent,
                "cache_hits": self.cache_hits, "request_cache": self.calls.info, "cost": cost,
                **({"scoring": "forced tokens: logit_bias +100, max_tokens 1, logprobs 1 per option token"}
                   if self.capability == "score.options" else {})}

    # -- transport -----------------------------------------------------------------------------------
    def _call_key(self, path: str, body: dict, root: bool = False) -> str:
        """The model-call store's key of the request ``body`` to ``path`` (at the server's root with ``root``)."""
        return self.calls.key(calls.digest({"path": path, "root": bool(root), "body": body}))

    def _headers(self) -> dict:
        h = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key_env:
            key = os.environ.get(self.api_key_env)
            if not key:
                raise EndpointError(f"{self.base_url}: the environment variable {self.api_key_env} (the profile's "
                                    f"api_key_env) is not set")
            bad = [c for c in key if not ("!" <= c <= "~")]
            if bad:
                kinds = sorted({"a carriage return" if c == "\r" else "a newline" if c == "\n" else
                                "a space" if c == " " else "a tab" if c == "\t" else
                                "a control character" if ord(c) < 32 or ord(c) == 127 else "a non-ASCII character"
                                for c in bad})
                raise EndpointError(f"{self.base_url}: the API key in the environment variable {self.api_key_env} "
                                    f"holds {' and '.join(kinds)} (a key is printable ASCII; one copied from a "
                                    f"Windows file often ends in a carriage return); set the variable again "
                                    f"without it. The key is not shown.")
            h["Authorization"] = f"Bearer {key}"
        return h

    def _send(self, url: str, data: bytes, headers: dict) -> tuple[int, dict, bytes]:
        """One POST to ``url`` (public: :attr:`base_url` or :attr:`root_url` and a path) with the location's query
        string; the whole request (connect, send, status, headers, body) is bounded by ``timeout``:
        a watchdog shuts the socket at the deadline, so a server that trickles bytes cannot hold it."""
        u = urlsplit(url)
        path = u.path + self._query
        cls = http.client.HTTPSConnection if u.scheme == "https" else http.client.HTTPConnection
        conn = cls(u.hostname, u.port, timeout=self.timeout)
        expired = threading.Event()

        def stop():
            expired.set()
            sock = conn.sock
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

        late = f"no complete answer within {self.timeout:g} s (the whole request)"
        timer = threading.Timer(self.timeout, stop)
        timer.daemon = True
        timer.start()
        try:
            conn.request("POST", path, body=data, headers=headers)
            resp = conn.getresponse()
            status, resp_headers = resp.status, {k.lower(): v for k, v in resp.getheaders()}
            raw = _read_capped(resp, url)
        except http.client.IncompleteRead as exc:
            if expired.is_set():
                raise _Transient(late) from None
            expected = f" of {len(exc.partial) + exc.expected}" if exc.expected is not None else ""
            raise _Transient(f"the connection closed after {len(exc.partial)}{expected} bytes of the answer") \
                from None
        except http.client.BadStatusLine as exc:
            if expired.is_set():
                raise _Transient(late) from None
            if isinstance(exc, http.client.RemoteDisconnected) or not str(exc.line).strip("'\""):
                raise _Transient("the server closed the connection without answering") from None
            raise EndpointError(f"{url} answered with something that is not HTTP (status line "
                                f"{str(exc.line)[:60]!r}); is the base URL the API's?") from None
        except http.client.InvalidURL:  # its message quotes the path and query string, where keys travel
            raise EndpointError(f"{url}: the profile's location holds a character a request may not carry (a space "
                                f"or a control character) in its path or query string; percent-encode it (a space "
                                f"is %20). The query string is not shown.") from None
        except (http.client.HTTPException, OSError) as exc:  # refused, reset, unreachable, timed out
            if expired.is_set() or isinstance(exc, TimeoutError):
                raise _Transient(late) from None
            reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
            raise _Transient(f"{type(exc).__name__}: {reason}") from None
        finally:
            timer.cancel()
            conn.close()
        if expired.is_set():
            raise _Transient(late)
        return status, resp_headers, raw

    def _post_json(self, url: str, body: dict) -> dict:
        """POST ``body``, retried as the module docstring says; the answer's JSON object."""
        data = json.dumps(body).encode()
        headers = self._headers()
        last, waited = "", 0.0
        for attempt in range(self.max_retries + 1):
            wait = min(self.backoff * 2 ** min(attempt, 60), MAX_WAIT)
            try:
                self.requests_sent += 1
                status, resp_headers, raw = self._send(url, data, headers)
                if status == 429 or status >= 500:
                    raise _Transient(f"HTTP {status}{self._server_message(raw)}",
                                     retry_after_seconds(resp_headers.get("retry-after")))
                if 300 <= status < 400:  # never followed: the answer must come from the profile's own server
                    raise EndpointError(f"{url} answered HTTP {status}, a redirect to "
                                        f"{public_location(resp_headers.get('location') or '(no Location header)')}; redirects are not "
                                        f"followed: set the profile's location to the API's own base URL")
                if not 200 <= status < 300:
                    raise EndpointError(f"{url} answered HTTP {status}{self._server_message(raw)}; not retried")
                return self._decode(url, status, raw)
            except _Transient as exc:
                last = exc.reason
                if exc.wait is not None:
                    wait = min(exc.wait, MAX_WAIT)
            if attempt < self.max_retries:
                if waited + wait > MAX_TOTAL_WAIT:
                    raise EndpointError(f"{url} could not be reached after {attempt + 1} attempts (last: {last}); "
                                        f"waiting {wait:g} s more would pass MAX_TOTAL_WAIT, {MAX_TOTAL_WAIT:g} s of "
                                        f"waits for one request, so no more attempts are made")
                time.sleep(wait)
                waited += wait
        raise EndpointError(f"{url} could not be reached after {self.max_retries + 1} attempts (last: {last})")

    @staticmethod
    def _server_message(raw: bytes) -> str:
        """`` (the server's error message)`` when the body is JSON with one, else ``""``."""
        try:
            obj = jsonio.loads(raw.decode("utf-8"), "reply")
        except (UnicodeDecodeError, ValueError):
            return ""
        err = obj.get("error") if isinstance(obj, dict) else None
        msg = err.get("message") if isinstance(err, dict) else err if isinstance(err, str) else None
        return f" ({str(msg)[:200]})" if msg else ""

    @staticmethod
    def _decode(url: str, status: int, raw: bytes) -> dict:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise EndpointError(f"{url} answered HTTP {status} with a body that is not UTF-8 text (byte "
                                f"0x{raw[exc.start]:02x} at offset {exc.start} of {len(raw)})") from None
        try:
            answer = jsonio.loads(text, "")
        except jsonio.JsonError as exc:
            raise EndpointError(f"{url} answered HTTP {status} with a body that is not JSON the atlas reads "
                                f"({str(exc).removeprefix(': ')}; it starts {text[:60]!r})") from None
        if not isinstance(answer, dict):
            raise EndpointError(f"{url} answered HTTP {status} with {_describe(answer)}; expected a JSON object")
        if "error" in answer and "choices" not in answer and "tokens" not in answer:
            raise EndpointError(f"{url} answered HTTP {status} with an error instead of an answer: "
                                f"{_describe(answer['error'])}")
        return answer

    def request(self, path: str, body: dict, parse, *, root: bool = False):
        """POST ``body`` to ``<base URL><path>`` (``root``: to the server's root) and ``parse(answer, url)``
        the reply (which raises EndpointError for a reply that is not an answer); ``(parsed, answer)``. A
        cached reply is used when it still parses; only a reply that parsed is stored."""
        url = (self.root_url if root else self.base_url) + path
        key = self._call_key(path, body, root)
        refresh = os.environ.get(CACHE_ENV, "").strip().lower() == "refresh"
        stored = None if refresh else self.calls.get(key)
        if stored is not None:
            try:
                answer = stored["reply"]
                value = parse(answer, url)
            except (KeyError, TypeError, ValueError, EndpointError):
                self.cache_rejected += 1            # a reply stored before replies were checked: ask again
            else:
                self.cache_hits += 1
                self.calls.served += 1
                calls.TALLY.served += 1
                return value, answer
        answer = self._post_json(url, body)
        value = parse(answer, url)
        self.calls.made += 1
        calls.TALLY.made += 1
        self.calls.put(key, {"reply": answer})
        return value, answer

    def post(self, path: str, body: dict) -> dict:
        """POST ``body`` to ``<base URL><path>`` (not cached: a caller that caches checks the reply first,
        see :meth:`request`); the decoded JSON answer."""
        return self._post_json(self.base_url + path, body)

    def _usage(self, answer: dict) -> tuple[int, int]:
        usage = answer.get("usage") if isinstance(answer, dict) else None
        if not isinstance(usage, dict):
            return 0, 0
        p, c = usage.get("prompt_tokens"), usage.get("completion_tokens")
        return (p if isinstance(p, int) else 0), (c if isinstance(c, int) else 0)

    def complete(self, prompt: str) -> str:
        """The model's answer text to ``prompt`` (temperature 0)."""
        if self.endpoint == "chat":
            body = {"model": self.model, "messages": [{"role": "user", "content": prompt}], "temperature": 0,
                    "max_tokens": self.max_tokens}
            text, answer = self.request("/chat/completions", body, self._chat_text)
        else:
            body = {"model": self.model, "prompt": prompt, "temperature": 0, "max_tokens": self.max_tokens}
            text, answer = self.request("/completions", body, self._completion_text)
        self._tokens = tuple(a + b for a, b in zip(self._tokens, self._usage(answer)))
        return text

    @staticmethod
    def _chat_text(answer: dict, url: str) -> str:
        content = _field(answer, "choices[0].message", url, dict, "an object with the model's message")
        if content.get("content") is None:            # a message without text (e.g. a refusal or tool call)
            return ""
        return _field(answer, "choices[0].message.content", url, str, "the answer's text (a string)")

    @staticmethod
    def _completion_text(answer: dict, url: str) -> str:
        return _field(answer, "choices[0].text", url, str, "the completion's text (a string)")

    # -- capabilities --------------------------------------------------------------------------------
    def _timed(self, n_items: int):
        adapter = self

        class _Timer:
            def __enter__(self):
                self.t0, self.sent0, self.hits0 = time.perf_counter(), adapter.requests_sent, adapter.cache_hits
                adapter._tokens = (0, 0)
                return self

            def __exit__(self, *exc):
                if exc[0] is None:
                    adapter.cost.add(n_items, time.perf_counter() - self.t0, *adapter._tokens)
                    adapter._cached_calls += adapter.cache_hits - self.hits0
                return False
        return _Timer()

    def _answers(self, prompts, allowed) -> list[str | None]:
        out = []
        with self._timed(len(prompts)):
            for i, p in enumerate(prompts):
                raw = self.complete(p)
                parsed = parse_answer(raw, allowed)
                if parsed is None:
                    self.unparseable.append({"position": i, "answer": raw})
                out.append(parsed)
        return out

    def predict_assertion(self, marked_texts) -> list[str]:
        """PRESENT / ABSENT per marked sentence, :data:`UNPARSEABLE` where the answer does not parse."""
        texts = check_texts(marked_texts, "predict_assertion(marked_texts)")
        answers = self._answers([ASSERTION_PROMPT.format(text=t) for t in texts], ASSERTION_ANSWERS)
        return [UNPARSEABLE if a is None else ASSERTION_ANSWERS[a] for a in answers]

    def predict_nli(self, premises, hypotheses) -> list[str | None]:
        """entailment / neutral / contradiction per pair, None (abstention) where the answer does not parse."""
        ps, hs = check_texts(premises, "predict_nli(premises)"), check_texts(hypotheses, "predict_nli(hypotheses)")
        if len(ps) != len(hs):
            raise ValueError(f"predict_nli: {len(ps)} premises, {len(hs)} hypotheses")
        return self._answers([NLI_PROMPT.format(premise=p, hypothesis=h) for p, h in zip(ps, hs)], NLI_ANSWERS)

    # -- score.options -------------------------------------------------------------------------------
    @staticmethod
    def _token_list(answer: dict, url: str) -> list[int]:
        key = "tokens" if "tokens" in answer else "content" if "content" in answer else "tokens"
        ids = _field(answer, key, url, list, "the list of token ids")
        bad = [t for t in ids if not isinstance(t, int) or isinstance(t, bool)]
        if bad:
            raise EndpointError(f"{url}: the answer's {key} holds {_describe(bad[0])}; expected token ids (integers)")
        return ids

    def tokenize(self, text: str) -> list[int]:
        """The server's token ids of ``text`` (``/extras/tokenize`` of llama-cpp-python, else ``/tokenize``
        of llama.cpp's server), without a BOS token unless the model adds one to every prompt."""
        routes = [self._tokenize_path] if self._tokenize_path else ["/extras/tokenize", "/tokenize"]
        last = None
        for route in routes:
            body = {"model": self.model, "input": text} if route == "/extras/tokenize" else {"content": text}
            try:
                ids, _ = self.request(route, body, self._token_list, root=True)
            except EndpointError as exc:
                if "HTTP 404" in str(exc) and route != routes[-1]:
                    last = exc
                    continue
                raise
            self._tokenize_path = route
            return ids
        raise last  # pragma: no cover - the loop returns or raises

    def _forced_logprob(self, prompt: str, token: int) -> tuple[float, str]:
        """log P(``token`` | ``prompt``): a one-token completion whose greedy choice is made ``token`` by
        ``logit_bias``; the reported log-probability and the generated text."""
        body = {"model": self.model, "prompt": prompt, "max_tokens": 1, "temperature": 0, "logprobs": 1,
                "logit_bias": {str(token): FORCE_BIAS}}

        def parse(answer, url):
            value = _field(answer, "choices[0].logprobs.token_logprobs[0]", url, (int, float),
                           "the generated token's log-probability (a number)")
            text = _field(answer, "choices[0].text", url, str, "the generated text (a string)")
            return float(value), text

        (value, text), answer = self.request("/completions", body, parse)
        self._tokens = tuple(a + b for a, b in zip(self._tokens, self._usage(answer)))
        return value, text

    def score_options(self, prompts, options) -> dict:
        """``loglik[i, k]`` = sum of the server's log-probabilities of the tokens of ``options[k]`` after
        ``prompts[i]``, each token generated under ``logit_bias`` (module docstring)."""
        import numpy as np

        prompts = check_texts(prompts, "score_options(prompts)")
        options = check_texts(options, "score_options(options)")
        ll = np.zeros((len(prompts), len(options)))
        token_ids = [[None] * len(options) for _ in prompts]
        url = self.base_url + "/completions"
        with self._timed(len(prompts)):
            for i, p in enumerate(prompts):
                p_ids = self.tokenize(p)
                for k, o in enumerate(options):
                    full = self.tokenize(p + o)
                    if len(full) <= len(p_ids) or full[:len(p_ids)] != p_ids:
                        raise EndpointError(f"{url}: the server's tokens of prompt {i} + option {o!r} do not "
                                            f"extend the prompt's tokens (the prompt's end and the option merge "
                                            f"into one token), so the option cannot be scored on its own")
                    o_ids = full[len(p_ids):]
                    total, text = 0.0, ""
                    for j, t in enumerate(o_ids):
                        lp, piece = self._forced_logprob(p + text, t)
                        if j < len(o_ids) - 1 and self.tokenize(p + text + piece) != full[:len(p_ids) + j + 1]:
                            raise EndpointError(f"{url}: option {o!r} of prompt {i} cannot be scored token by "
                                                f"token (its first tokens' text tokenises differently)")
                        total += lp
                        text += piece
                    if text != o:
                        raise EndpointError(f"{url}: forcing the tokens of option {o!r} (ids {o_ids}) generated "
                                            f"{text!r}: the server does not honour logit_bias, which score.options "
                                            f"needs")
                    ll[i, k] = total
                    token_ids[i][k] = o_ids
        first = token_ids[0] if prompts else None
        out = {"loglik": ll, "option_token_ids": first, "options": list(options)}
        if prompts and any(row != first for row in token_ids):
            out["option_token_ids_by_prompt"] = token_ids
        return out
