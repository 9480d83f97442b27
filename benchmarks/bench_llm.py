"""SmolLM2-135M-Instruct items per second for ``score.options`` on NegEx atlas-full-v1: in this process
(transformers, the GGUF file dequantised to float32) against through the llama.cpp server (the same file,
4-bit, ``python -m llama_cpp.server``), printed as a ratio in one run, with the agreement of the two.

- Items: the 1,432 test items of NegEx ``atlas-full-v1`` (``--limit N``: the first N), the card's prompt and
  options (``negex.option_prompts``, ``OPTIONS`` " yes" / " no"): what the card's zero-shot run scores.
- In process: ``load_adapter("smollm2-135m-instruct", "score.options")`` (batch size ``--batch-size``, torch
  threads as the machine gives), one ``score_options`` call over all items; model loading is timed apart.
- Through the server: the openai-compatible adapter against a server started here on 127.0.0.1 (a free
  port, the server's default settings: one thread per two cores), the request cache off: per item the
  server's tokenizer on the prompt and on prompt + option, and one forced-token completion per option
  (``atlaslib.models.openai_compat``); server start-up is timed apart.
- Items per second = items / wall seconds of the scoring call, for each side; the ratio is in-process over
  server. Agreement: the largest and mean absolute difference of the option log-probabilities (nats) and
  the share of items on which both pick the same option. Exit 1 when the two disagree beyond the test
  suite's tolerance (tests/external/test_llama_server.py).

Run: ``.venv/bin/python benchmarks/bench_llm.py [--limit N] [--batch-size 16]`` (several minutes on 2 cores).
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import machine, print_machine, use_data_dir  # noqa: E402

PROFILE = "smollm2-135m-instruct"
TOLERANCE_MAX, TOLERANCE_MEAN, AGREEMENT_MIN = 0.5, 0.15, 0.9


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(model_file: str):
    port = _free_port()
    log = tempfile.NamedTemporaryFile(prefix="llama-server-", suffix=".log", delete=False)
    proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", model_file, "--host", "127.0.0.1",
                             "--port", str(port)], stdout=log, stderr=subprocess.STDOUT)
    root = f"http://127.0.0.1:{port}"
    t0 = time.perf_counter()
    while True:
        try:
            with urllib.request.urlopen(root + "/v1/models", timeout=5) as r:
                json.loads(r.read())
            return proc, root, time.perf_counter() - t0
        except OSError:
            if proc.poll() is not None or time.perf_counter() - t0 > 300:
                proc.kill()
                raise SystemExit(f"llama_cpp.server did not start (log: {log.name})")
            time.sleep(0.5)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, default=None, help="score only the first N test items")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--data-dir", default=None)
    args = ap.parse_args(argv)
    use_data_dir(args.data_dir)
    info = machine()
    print_machine(info)

    import yaml

    from atlaslib.cards import negex
    from atlaslib.cards.negex.card import OPTIONS
    from atlaslib.models import get_profile, load_adapter
    from atlaslib.models.weights import gguf_file

    items = negex.load_items()
    _, test = negex.split_frames(items, negex.split(items, "atlas-full-v1"))
    if args.limit:
        test = test.iloc[:args.limit]
    prompts = negex.option_prompts(test)
    n = len(prompts)
    print(f"items: NegEx atlas-full-v1, {n} test items, options {list(OPTIONS)}")

    t0 = time.perf_counter()
    local = load_adapter(PROFILE, "score.options", batch_size=args.batch_size, progress=False)
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    ours = local.score_options(prompts, list(OPTIONS))
    local_s = time.perf_counter() - t0
    del local

    proc, root, start_s = start_server(str(gguf_file(get_profile(PROFILE))))
    try:
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "served.yml")
            with open(path, "w") as fh:
                yaml.safe_dump({"served": {
                    "source": "openai-compatible", "location": root + "/v1", "revision": None,
                    "capabilities": ["score.options"], "label_map": {}, "trained_on": [], "description": "bench",
                    "options": {"model": "smollm2", "cache": "off", "timeout": 300, "max_retries": 2}}}, fh)
            os.environ["ATLAS_PROFILES"] = path
            served = load_adapter("served", "score.options")
            t0 = time.perf_counter()
            theirs = served.score_options(prompts, list(OPTIONS))
            server_s = time.perf_counter() - t0
            requests = served.requests_sent
    finally:
        proc.terminate()
        proc.wait(timeout=30)

    a, b = np.asarray(ours["loglik"]), np.asarray(theirs["loglik"])
    diff = np.abs(a - b)
    agree = float(np.mean(a.argmax(1) == b.argmax(1)))
    ips_local, ips_server = n / local_s, n / server_s
    print(f"in process (transformers, float32, batch {args.batch_size}): model load {load_s:.1f} s; "
          f"scoring {local_s:.1f} s = {ips_local:.2f} items/s")
    print(f"through llama.cpp's server (4-bit): start-up {start_s:.1f} s; scoring {server_s:.1f} s = "
          f"{ips_server:.2f} items/s ({requests} requests)")
    print(f"ratio in process / server: {ips_local / ips_server:.2f}x")
    print(f"agreement: |log-prob difference| max {diff.max():.3f}, mean {diff.mean():.3f} nats; same option on "
          f"{agree:.1%} of {n} items")
    ok = diff.max() <= TOLERANCE_MAX and diff.mean() <= TOLERANCE_MEAN and agree >= AGREEMENT_MIN
    print("agreement within the test suite's tolerance" if ok else "AGREEMENT OUTSIDE the test suite's tolerance")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
