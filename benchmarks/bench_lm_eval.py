"""SmolLM2 through the real lm-evaluation-harness on NegEx as an exported task, against the atlas's zero-shot
row, item by item.

    .venv/bin/python benchmarks/bench_lm_eval.py [--version atlas-n100-v1] [--results-dir results]
                                                 [--limit N] [--data-dir DIR]

1. ``atlas export-task lm-eval`` writes the card version as an lm-eval task (the card's prompt, options " yes" /
   " no", the test items as local JSONL);
2. lm-eval 0.4.13 (``.venv/harness``, requirements-harness.txt) runs it with ``--model hf`` on the atlas's own
   dequantised float32 copy of SmolLM2-135M-Instruct (the folder the book's runs load), on the CPU, batch size 1,
   ``--log_samples``;
3. ``atlas import`` reads the log; each item's option log-likelihoods are compared with the atlas's
   ``score.options`` for the same prompts, and each item's decision and the accuracy with the book's zero-shot
   cell (``<results>/negex/<version>/smollm2-135m-instruct/zero_shot.json``) when it exists, else with the atlas's
   own decision from those log-likelihoods.

Prints the machine, the timings, the largest log-likelihood difference, the items whose decision differs and both
accuracies; exits 1 when a log-likelihood differs by more than 1e-4 or a decision or the accuracy differs.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import REPO, print_machine, use_data_dir  # noqa: E402

PROFILE = "smollm2-135m-instruct"
TOLERANCE = 1e-4


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--version", default="atlas-n100-v1")
    ap.add_argument("--results-dir", default=str(REPO / "results"))
    ap.add_argument("--limit", type=int, default=None, help="only the first N items (lm-eval --limit)")
    ap.add_argument("--data-dir", default=None)
    args = ap.parse_args(argv)
    data_dir = use_data_dir(args.data_dir)
    print_machine()
    import numpy as np

    from atlaslib.harness.export import documents, export, prompt_of
    from atlaslib.harness.logs import harness_env, read_lm_eval
    from atlaslib.models import get_profile, load_adapter
    from atlaslib.models.weights import gguf_checkpoint
    from atlaslib.results import cell_path, read_cell

    env_dir = harness_env()
    if not (env_dir / "lm_eval").is_dir():
        print(f"lm-eval is not installed in {env_dir}: see requirements-harness.txt", file=sys.stderr)
        return 1
    folder = gguf_checkpoint(get_profile(PROFILE))
    with tempfile.TemporaryDirectory(prefix="bench-lm-eval-") as tmp:
        tmp = Path(tmp)
        task = export("lm-eval", "negex", args.version, tmp / "task", data_dir=data_dir)
        cmd = [sys.executable, "-m", "lm_eval", "--model", "hf", "--model_args", f"pretrained={folder},dtype=float32",
               "--device", "cpu", "--include_path", str(tmp / "task"), "--tasks", task["task"], "--batch_size", "1",
               "--output_path", str(tmp / "out"), "--log_samples"]
        if args.limit:
            cmd += ["--limit", str(args.limit)]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(env_dir), str(REPO)]), HF_DATASETS_OFFLINE="1",
                   HF_HUB_OFFLINE="1")
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True)
        t_lm = time.perf_counter() - t0
        if proc.returncode != 0:
            print(proc.stderr[-4000:], file=sys.stderr)
            return 1
        (run,) = read_lm_eval(tmp / "out")
    docs, spec = documents("negex", args.version, data_dir)
    by_id = {d["item_id"]: d for d in docs}
    logged = [by_id[d.fields["item_id"]] for d in run.docs]
    t0 = time.perf_counter()
    adapter = load_adapter(PROFILE, "score.options", progress=False)
    ours = np.asarray(adapter.score_options([prompt_of(d, spec) for d in logged], spec["options"])["loglik"])
    t_atlas = time.perf_counter() - t0
    theirs = np.array([d.options for d in run.docs])
    diff = float(np.abs(theirs - ours).max())
    lm_pred = {d.fields["item_id"]: int(np.argmax(d.options) == 0) for d in run.docs}   # 1: " yes" (negated)
    lm_acc = float(np.mean([d.metrics["acc"] for d in run.docs]))
    path = cell_path(args.results_dir, "negex", args.version, PROFILE, "zero_shot")
    if path.is_file():
        cell = read_cell(path)
        from atlaslib.cards.negex.card import POSITIVE

        # the cell's decisions are the card's words ('negated' / 'affirmed'): 1 is the positive class, " yes"
        book = {str(r["item_id"]): (int(r["pred"] == POSITIVE), int(r["gold"] == POSITIVE))
                for r in cell["predictions"]}
        against = f"the book's zero-shot cell {path}"
    else:
        book = {d["item_id"]: (int(ours[k, 0] > ours[k, 1]), int(d["gold"] == 0)) for k, d in enumerate(logged)}
        against = "the atlas's score.options decisions (no zero-shot cell in --results-dir)"
    differ = [i for i in lm_pred if i in book and lm_pred[i] != book[i][0]]
    book_acc = float(np.mean([book[i][0] == book[i][1] for i in lm_pred if i in book]))
    print(json.dumps({"items": len(run.docs), "lm_eval_seconds": round(t_lm, 1), "atlas_seconds": round(t_atlas, 1),
                      "max_abs_loglik_difference": diff, "compared_with": against, "decisions_differ": differ,
                      "accuracy_lm_eval": lm_acc, "accuracy_atlas": book_acc,
                      "lm_eval_version": run.harness_version}, indent=1))
    ok = diff <= TOLERANCE and not differ and lm_acc == book_acc
    print("OK" if ok else "FAILED: the two disagree", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
