"""One fine-tune seed on the CPU and on CUDA, side by side in one run: seconds, their ratio, and whether the answers agree.

The NegEx atlas-n100-v1 fine-tune of all-minilm-l6-v2 (the card's recipe, its first seed only), trained from an
empty weight cache in two child processes, one per device (``ATLAS_DEVICE=cpu`` and ``ATLAS_DEVICE=cuda``), each
through the card's own run (``negex.runs.run_protocol``: the encoder placed by ``atlaslib.models.devices``, the
deterministic training loop on that device). Printed per device: the training and prediction seconds, and then
the ratio CPU / CUDA, the number of test decisions that differ and the largest difference of a predicted
probability. ``--model PATH`` fine-tunes another encoder (e.g. a local folder when the MiniLM wheel is absent; ``--max-length``
for one with fewer positions than the recipe's); ``--devices cpu,cpu`` checks the script itself without a GPU.

On a machine without CUDA it says so and exits 0 (nothing to compare); exit status 1 when the devices disagree on
more than ``--max-flips`` decisions (default 0).

Run: ``.venv/bin/python benchmarks/bench_finetune_device.py [--model all-minilm-l6-v2] [--max-flips 0]``
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, print_machine, use_data_dir  # noqa: E402

CHILD = r"""
import json, sys, time
from atlaslib.cards import negex
from atlaslib.cards.negex import runs
model, version, max_length = sys.argv[1], sys.argv[2], int(sys.argv[3])
negex.FAMILY.recipe = {**negex.FAMILY.recipe, "seeds": negex.FAMILY.recipe["seeds"][:1],
                       **({"max_length": max_length} if max_length else {})}
items = negex.load_items(None)
train, test = negex.split_frames(items, negex.split(items, version))
t0 = time.perf_counter()
out = runs.run_protocol(model, "finetune", train, test, retrain=True)
d = out["details"]
print(json.dumps({"device": d.get("device"), "wall": round(time.perf_counter() - t0, 3),
                  "train_seconds": d["training"]["seconds"], "predict_seconds": d.get("predict_seconds"),
                  "pred": [int(x) for x in out["pred"]], "score": [float(x) for x in out["score"]]}))
"""


def child(device: str, model: str, version: str, cache: Path, max_length: int = 0) -> dict:
    # empty weight cache and model-call store: each device trains and predicts (nothing served)
    env = {**os.environ, "ATLAS_DEVICE": device, "ATLAS_FINETUNE_CACHE_DIR": str(cache / "finetune"),
           "ATLAS_MODEL_CALLS": "off", "ATLAS_PROGRESS": "off",
           "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", CHILD, model, version, str(max_length)], env=env, capture_output=True, text=True,
                          cwd=REPO)
    if done.returncode:
        sys.exit(f"the {device} fine-tune failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="all-minilm-l6-v2")
    ap.add_argument("--version", default="atlas-n100-v1")
    ap.add_argument("--max-flips", type=int, default=0)
    ap.add_argument("--data-dir")
    ap.add_argument("--max-length", type=int, default=0, help="the recipe's max_length for an encoder with fewer "
                                                                "positions (0: the card's recipe)")
    ap.add_argument("--devices", default="cpu,cuda", help="the two devices compared (cpu,cpu checks the script "
                                                          "itself on a machine without CUDA)")
    args = ap.parse_args(argv)
    use_data_dir(args.data_dir)
    print_machine()
    import torch

    devs = args.devices.split(",")
    if len(devs) != 2:
        ap.error(f"--devices {args.devices!r}: expected two devices, e.g. cpu,cuda")
    if any(d.startswith("cuda") for d in devs) and not torch.cuda.is_available():
        print("CUDA: torch sees no CUDA device here; nothing to compare (run this on a machine with a GPU)")
        return 0
    if torch.cuda.is_available():
        print(f"CUDA: {torch.cuda.get_device_name(0)}")
    with tempfile.TemporaryDirectory(prefix="atlas-ft-device-") as tmp:
        got = [child(dev, args.model, args.version, Path(tmp) / str(k), args.max_length) for k, dev in enumerate(devs)]
    for dev, g in zip(devs, got):
        print(f"{dev:5s}: training {g['train_seconds']:.1f} s, prediction {g['predict_seconds']:.2f} s, "
              f"whole fine-tune {g['wall']:.1f} s (device recorded: {g['device']})")
    cpu, cuda = got
    flips = sum(a != b for a, b in zip(cpu["pred"], cuda["pred"]))
    delta = max((abs(a - b) for a, b in zip(cpu["score"], cuda["score"])), default=0.0)
    print(f"ratio {devs[0]} / {devs[1]}: training {cpu['train_seconds'] / max(cuda['train_seconds'], 1e-9):.1f}x, whole "
          f"{cpu['wall'] / max(cuda['wall'], 1e-9):.1f}x; decisions differing {flips} of {len(cpu['pred'])}; "
          f"largest probability difference {delta:.2e}")
    return 1 if flips > args.max_flips else 0


if __name__ == "__main__":
    sys.exit(main())
