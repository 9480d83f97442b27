"""A small OpenAI-compatible HTTP server on 127.0.0.1 serving a tiny transformers causal LM, for tests.

``/v1/chat/completions`` and ``/v1/completions`` run the real model on the prompt (the last ``max_positions``
tokens) and take the argmax next token; the answer text is ``answers[token_id % len(answers)]``, a fixed
mapping the test chooses, so answers are controllable while a real model sits behind a real socket.
``/v1/completions`` with ``logit_bias`` and ``logprobs`` (what the adapter's score.options sends) generates one
token, the arg-max of the logits plus the bias, and reports its log-probability under the model before the
bias (as llama.cpp does); ``/extras/tokenize`` gives the model's token ids. Every reply carries ``usage``.

Faults, for the fault-injection tests: ``fail_next`` answers that many requests with HTTP 429 and a
``Retry-After`` header first; ``faults`` is a list of fault names served one per request, in order, before
normal answers resume: ``error-200`` (HTTP 200 with an error object), ``no-logprobs`` (a completion without
log-probabilities), ``not-utf8`` (HTTP 200, a body of bytes that are not UTF-8), ``not-json``,
``content-int`` (``message.content`` is the number 5), ``incomplete`` (Content-Length promises more than is
sent, then the connection closes), ``not-http`` (a line that is no HTTP status line), ``hang-up`` (closes
without a byte), ``trickle`` (a valid answer sent one byte every ``trickle_seconds``). Every request is
counted, its Authorization header kept in ``authorizations`` and its argmax token in ``argmax``.
"""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import torch


class TinyLLMServer:
    def __init__(self, model_dir, answers=("yes",)):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        self.model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
        self.max_positions = self.model.config.n_positions
        self.answers = tuple(answers)
        self.fail_next, self.retry_after = 0, "0.05"
        self.faults: list[str] = []
        self.trickle_seconds = 0.25
        self.requests, self.argmax, self.authorizations, self.paths = 0, [], [], []
        self._lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.httpd.timeout = 5
        self.root_url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.base_url = self.root_url + "/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self._threads = torch.get_num_threads()
        torch.set_num_threads(1)  # a 2-layer model: one thread is fastest on a shared machine
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
        torch.set_num_threads(self._threads)

    def ids(self, text: str) -> list[int]:
        return self.tokenizer(text)["input_ids"][-self.max_positions:]

    def logp_next(self, prompt: str) -> torch.Tensor:
        ids = self.ids(prompt)
        with torch.no_grad():
            return torch.log_softmax(self.model(torch.tensor([ids])).logits[0, -1].double(), dim=-1)

    def next_token(self, prompt: str) -> int:
        return int(self.logp_next(prompt).argmax())

    def _usage(self, prompt: str, completion: int) -> dict:
        n = len(self.ids(prompt))
        return {"prompt_tokens": n, "completion_tokens": completion, "total_tokens": n + completion}

    def _answer(self, path: str, body: dict):
        with self._lock:
            if self.fail_next > 0:
                self.fail_next -= 1
                return 429, {"error": {"message": "rate limited"}}
        if path == "/extras/tokenize":
            return 200, {"tokens": self.ids(body["input"])}
        if path == "/v1/chat/completions":
            prompt = body["messages"][-1]["content"]
            tid = self.next_token(prompt)
            self.argmax.append(tid)
            return 200, {"choices": [{"index": 0, "message": {"role": "assistant",
                                                               "content": self.answers[tid % len(self.answers)]}}],
                         "usage": self._usage(prompt, 1)}
        if path == "/v1/completions":
            prompt = body["prompt"]
            if body.get("logit_bias") and body.get("logprobs"):
                logp = self.logp_next(prompt)
                biased = logp.clone()
                for tok, bias in body["logit_bias"].items():
                    biased[int(tok)] += float(bias)
                tid = int(biased.argmax())
                text = self.tokenizer.decode([tid])
                return 200, {"choices": [{"index": 0, "text": text, "logprobs": {
                    "tokens": [text], "token_logprobs": [float(logp[tid])], "text_offset": [len(prompt)]}}],
                    "usage": self._usage(prompt, 1)}
            tid = self.next_token(prompt)
            self.argmax.append(tid)
            return 200, {"choices": [{"index": 0, "text": self.answers[tid % len(self.answers)]}],
                         "usage": self._usage(prompt, 1)}
        return 404, {"error": {"message": f"no route {path}"}}

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                with server._lock:
                    server.requests += 1
                    server.paths.append(self.path)
                    server.authorizations.append(self.headers.get("Authorization"))
                    fault = server.faults.pop(0) if server.faults else None
                if fault is not None:
                    return self._fault(fault, body)
                code, payload = server._answer(self.path, body)
                self._send(code, json.dumps(payload).encode())

            def _send(self, code, data, length=None):
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data) if length is None else length))
                if code == 429:
                    self.send_header("Retry-After", server.retry_after)
                self.end_headers()
                self.wfile.write(data)

            def _fault(self, fault, body):
                if fault == "error-200":
                    return self._send(200, json.dumps({"error": {"message": "model not loaded"}}).encode())
                if fault == "no-logprobs":
                    return self._send(200, json.dumps({"choices": [{"index": 0, "text": " yes"}]}).encode())
                if fault == "not-utf8":
                    return self._send(200, b'{"choices": "\xff\xfe\xfa"}')
                if fault == "not-json":
                    return self._send(200, b"<html>Bad gateway</html>")
                if fault == "content-int":
                    return self._send(200, json.dumps({"choices": [{"index": 0, "message": {
                        "role": "assistant", "content": 5}}]}).encode())
                if fault == "incomplete":
                    return self._send(200, b'{"choices": [', length=400)
                if fault == "not-http":
                    self.wfile.write(b"HELLO FROM NOT A WEB SERVER\r\n\r\n")
                    return None
                if fault == "hang-up":
                    self.close_connection = True
                    return None
                if fault == "trickle":
                    code, payload = server._answer(self.path, body)
                    data = json.dumps(payload).encode()
                    head = (f"HTTP/1.1 {code} OK\r\nContent-Type: application/json\r\n"
                            f"Content-Length: {len(data)}\r\n\r\n").encode()
                    deadline = time.monotonic() + 20              # bounded: the test never waits this long
                    try:
                        for b in head + data:
                            if time.monotonic() > deadline:
                                break
                            self.wfile.write(bytes([b]))
                            self.wfile.flush()
                            time.sleep(server.trickle_seconds)
                    except OSError:                               # the client gave up: what the test wants
                        pass
                    return None
                raise ValueError(f"unknown fault {fault!r}")

            def log_message(self, *args):
                pass

        return Handler
