"""SmolLM2-135M-Instruct ``score.options`` items per second, before and after, side by side in one run.

The NegEx card's zero-shot prompts (``negex.option_prompts`` on the first ``--limit`` test items of
atlas-full-v1, options " yes" / " no") are scored by ``load_adapter("smollm2-135m-instruct", "score.options")``
in a fresh process per measurement, one torch thread each, the model-call store off (every call computed):

- **before**: an older commit's code (``--against``, default the commit before the model-call store), checked
  out into a temporary folder and first on ``PYTHONPATH``;
- **after, rows R**: this checkout with ``batch_size=R`` for each ``--rows`` (the rows of each fixed-shape batch).

The measurements are interleaved (before, after..., before, after...) ``--repeats`` times, so load moves them all
alike; the script prints each side's items per second (median of the repeats, model loading not counted), the
ratio to before, and the agreement with before: the largest |difference| of an option's log-likelihood and the
share of items on which the chosen option is the same.

Run: ``.venv/bin/python benchmarks/bench_options_speed.py [--limit 60] [--rows 1 8] [--repeats 2]``.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, print_machine, use_data_dir  # noqa: E402

BEFORE = "712934a"  # main before the model-call store

def run_side(pythonpath: str, limit: int, rows: int, prompts_file: Path) -> dict:
    code = r"""
import json, os, sys, time
os.environ["ATLAS_MODEL_CALLS"] = "off"; os.environ["ATLAS_EMBED_CACHE"] = "off"
import torch
torch.set_num_threads(1)
from atlaslib import models
data = json.load(open(sys.argv[1]))
prompts, options, rows = data["prompts"], data["options"], int(sys.argv[2])
kw = {"batch_size": rows} if rows else {}
ad = models.load_adapter("smollm2-135m-instruct", "score.options", progress=False, **kw)
ad.score_options(prompts[:2], options)  # warm-up: first-call allocations are not the model's speed
t0 = time.perf_counter()
scores = ad.score_options(prompts, options)
secs = time.perf_counter() - t0
print("RESULT " + json.dumps({"seconds": secs, "items": len(prompts), "scores": [[float(x) for x in s] for s in scores["loglik"]]}))
"""
    env = {**os.environ, "PYTHONPATH": pythonpath, "ATLAS_TORCH_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", code, str(prompts_file), str(rows)], env=env, capture_output=True,
                          text=True)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if line is None:
        raise RuntimeError(f"a measurement failed (PYTHONPATH={pythonpath}, rows {rows}):\n{proc.stderr[-3000:]}")
    return json.loads(line[len("RESULT "):])


def card_prompts(limit: int) -> dict:
    """The first ``limit`` NegEx atlas-full-v1 test items as the card's zero-shot prompts, and its options."""
    from atlaslib.cards import negex
    from atlaslib.cards.negex.card import OPTIONS

    items = negex.load_items()
    _, test = negex.split_frames(items, negex.split(items, "atlas-full-v1"))
    return {"prompts": negex.option_prompts(test)[:limit], "options": list(OPTIONS)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--against", default=BEFORE)
    ap.add_argument("--limit", type=int, default=60)
    ap.add_argument("--rows", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args(argv)
    use_data_dir()
    print_machine()
    tmp = Path(tempfile.mkdtemp(prefix="atlas-bench-options-"))
    prompts_file = tmp / "prompts.json"
    prompts_file.write_text(json.dumps(card_prompts(args.limit)), encoding="utf-8")
    old = tmp / "before"
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "-q", "--detach", str(old), args.against], check=True)
    try:
        sides = [("before", str(old), 0)] + [(f"after, rows {r}", str(REPO), r) for r in args.rows]
        got: dict = {name: [] for name, *_ in sides}
        for _ in range(args.repeats):
            for name, path, rows in sides:
                got[name].append(run_side(path, args.limit, rows, prompts_file))
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(old)], check=False)
    ref = got["before"][0]["scores"]
    base = statistics.median(r["items"] / r["seconds"] for r in got["before"])
    print(f"SmolLM2 score.options, {args.limit} NegEx prompts, one thread, store off, {args.repeats} interleaved "
          f"repeats (median):")
    for name, runs_ in got.items():
        ips = statistics.median(r["items"] / r["seconds"] for r in runs_)
        s = runs_[0]["scores"]
        diff = max(abs(a - b) for x, y in zip(s, ref) for a, b in zip(x, y))
        same = sum(max(range(len(x)), key=x.__getitem__) == max(range(len(y)), key=y.__getitem__)
                   for x, y in zip(s, ref)) / len(ref)
        print(f"  {name:16s} {ips:6.2f} items/s  {ips / base:5.2f}x before  max |d loglik| {diff:.2e}  "
              f"same choice {same:.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
