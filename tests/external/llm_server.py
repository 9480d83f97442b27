"""A small OpenAI-compatible HTTP server on 127.0.0.1 serving a tiny transformers causal LM, for tests.

``/v1/chat/completions`` and ``/v1/completions`` run the real model on the prompt (the last ``max_positions``
tokens) and take the argmax next token; the answer text is ``answers[token_id % len(answers)]``, a fixed
mapping the test chooses, so answers are controllable while a real model sits behind a real socket.
``/v1/completions`` with ``echo`` and ``logprobs`` returns the prompt's tokens, their log-probabilities
under the model and their character offsets (the legacy OpenAI format). ``fail_next`` answers that many
requests with HTTP 429 and a ``Retry-After`` header first. Every request is counted and its argmax token
kept in ``argmax``.
"""
from __future__ import annotations

import json
import threading
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
        self.requests, self.argmax = 0, []
        self._lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.timeout = 5
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
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

    def next_token(self, prompt: str) -> int:
        ids = self.tokenizer(prompt)["input_ids"][-self.max_positions:]
        with torch.no_grad():
            logits = self.model(torch.tensor([ids])).logits[0, -1]
        return int(logits.argmax())

    def echo_logprobs(self, text: str) -> dict:
        enc = self.tokenizer(text, return_offsets_mapping=True)
        ids, offsets = enc["input_ids"][-self.max_positions:], enc["offset_mapping"][-self.max_positions:]
        with torch.no_grad():
            logp = torch.log_softmax(self.model(torch.tensor([ids])).logits[0], dim=-1)
        values = [None] + [float(logp[k - 1, ids[k]]) for k in range(1, len(ids))]
        return {"tokens": self.tokenizer.convert_ids_to_tokens(ids), "token_logprobs": values,
                "text_offset": [int(a) for a, _ in offsets]}

    def _answer(self, path: str, body: dict):
        with self._lock:
            self.requests += 1
            if self.fail_next > 0:
                self.fail_next -= 1
                return 429, {"error": {"message": "rate limited"}}
        if path == "/v1/chat/completions":
            tid = self.next_token(body["messages"][-1]["content"])
            self.argmax.append(tid)
            return 200, {"choices": [{"index": 0, "message": {"role": "assistant",
                                                               "content": self.answers[tid % len(self.answers)]}}]}
        if path == "/v1/completions":
            if body.get("echo") and body.get("logprobs"):
                return 200, {"choices": [{"index": 0, "text": body["prompt"],
                                          "logprobs": self.echo_logprobs(body["prompt"])}]}
            tid = self.next_token(body["prompt"])
            self.argmax.append(tid)
            return 200, {"choices": [{"index": 0, "text": self.answers[tid % len(self.answers)]}]}
        return 404, {"error": {"message": f"no route {path}"}}

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                code, payload = server._answer(self.path, body)
                data = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                if code == 429:
                    self.send_header("Retry-After", server.retry_after)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        return Handler
