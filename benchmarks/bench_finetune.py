"""Fine-tuning time per card on this machine, and what the finetune runs add to a cold `atlas book`.

In a private folder (results, executed notebooks, an empty fine-tune weight cache and an empty embedding
cache), the script executes the default matrix's ``finetune`` runs (all-minilm-l6-v2 on NegEx
atlas-n100-v1 and atlas-full-v1, MACCROBAT atlas-n100-v1) through ``atlaslib.runner.run`` (papermill,
exactly as ``atlas book`` runs them), one after the other:

1. cold: empty weight cache, so the first run of each train set trains (the two NegEx versions share
   their 500 train items, hence one content key: the second version loads the first one's weights);
2. warm: the same runs again with ``force=True`` (every notebook executes again) and the weight cache
   kept: nothing may train.

Per run it prints the notebook wall time, the training and prediction seconds recorded in the result
cell and whether the weights were trained or loaded. Then the added cold-build time: the cold finetune
runs' total divided by the number of build workers (``--workers``, default: the CPU count, like the
LocalCluster of ``atlas book``), printed beside the cold build without them (``--cold-build SECONDS``, e.g.
from ``bench_incremental.py`` or a build report) or, with ``--measure-cold-build``, beside a cold
``atlas book`` of the whole default matrix (finetune runs included) measured here in the same private
folder. Exit status 1 when a warm run trained, a run is not ``ok``, or the cold build misses the
10-minute goal.

``--select-lr`` instead repeats how MACCROBAT's learning rate was chosen (see the comment above
``maccrobat.FINETUNE_RECIPE``): the train sentences of 24 case reports (101 sentences, first reports by
sha256 of their PMID) are held out of the 500, the recipe is trained on the other 399 with each candidate
learning rate / batch size, and entity F1 on the held-out sentences is printed. Test items are not read.

``--against REV`` instead times one fine-tune per card (the recipe's first seed, weights trained, nothing
cached) with the code of commit ``REV`` (exported with ``git archive`` to a private folder) and with this
checkout, side by side in one run: per card the training steps per second, the training seconds and the
whole fine-tune wall time (tokenising, training, predicting). Both cards run at the same time, as two
processes, the way two build workers run them on this machine; each process uses its commit's recipe
(``torch_threads`` included: that is part of what is compared). Exit status 1 when a card is less than
2x faster in wall time.

Run: ``.venv/bin/python benchmarks/bench_finetune.py [--cold-build 164] [--measure-cold-build]`` or
``... --select-lr`` or ``... --against 299b86a``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_machine, use_data_dir  # noqa: E402

GOAL_SECONDS = 600


CANDIDATES = ({"learning_rate": 5e-5}, {"learning_rate": 1e-4}, {"learning_rate": 2e-4}, {"learning_rate": 3e-4},
              {"learning_rate": 5e-5, "batch_size": 8})


def select_lr(data_dir) -> None:
    """MACCROBAT learning-rate choice on a report-disjoint validation split of the train sentences."""
    import hashlib

    from seqeval.metrics import f1_score

    from atlaslib import models
    from atlaslib.cards import maccrobat
    from atlaslib.protocols import finetune as ft

    items = maccrobat.load_items(data_dir)
    train = items.set_index("item_id").loc[maccrobat.split(items).train]
    docs = sorted(train["document"].unique(), key=lambda d: hashlib.sha256(d.encode()).hexdigest())
    held, n = set(), 0
    for d in docs:
        if n >= 100:
            break
        held.add(d)
        n += int((train["document"] == d).sum())
    fit, val = train[~train["document"].isin(held)], train[train["document"].isin(held)]
    print(f"validation: {len(val)} sentences of {len(held)} train reports held out; {len(fit)} trained")
    for change in CANDIDATES:
        recipe = {**maccrobat.FINETUNE_RECIPE, **change}
        ad = models.load_adapter("all-minilm-l6-v2", "embed.text.tokens", progress=False, embed_cache=False,
                                 max_length=recipe["max_length"])
        out = ft.finetune_tokens(ad, list(fit.index), fit["words"].tolist(), fit["tags"].tolist(),
                                 val["words"].tolist(), maccrobat.TAGS, recipe, retrain=True)
        print(f"  {json.dumps(change):<45} entity F1 {f1_score(val['tags'].tolist(), out['tags']):.3f}  "
              f"(training {out['details']['training']['seconds']:.0f} s)", flush=True)


def one_finetune(card: str) -> dict:
    """One fine-tune of ``card``'s recipe with its first seed (whichever atlaslib is imported: this checkout or
    an exported commit), retrained; the timings as a dict."""
    from atlaslib import models
    from atlaslib.protocols import finetune as ft

    if card == "negex":
        from atlaslib.cards import negex as mod
    else:
        from atlaslib.cards import maccrobat as mod
    recipe = dict(mod.FINETUNE_RECIPE)
    if "seeds" in recipe:                      # one seed: the same model the older single-seed recipe trains
        recipe["seeds"] = recipe["seeds"][:1]
    seed = recipe.get("seeds", [recipe.get("seed")])[0]
    start = time.perf_counter()
    items = mod.load_items(None)
    if card == "negex":
        train, test = mod.split_frames(items, mod.split(items, "atlas-n100-v1"))
        ad = models.load_adapter("all-minilm-l6-v2", "embed.text.pooled", progress=False, embed_cache=False,
                                 max_length=recipe["max_length"])
        out = ft.finetune_sequence(ad, train["item_id"].tolist(), train["text"].tolist(), train["decision"].tolist(),
                                   test["text"].tolist(), mod.LABELS, recipe, retrain=True, progress=False)
    else:
        m = mod.split(items)
        by = items.set_index("item_id")
        train, test = by.loc[m.train], by.loc[m.test]
        ad = models.load_adapter("all-minilm-l6-v2", "embed.text.tokens", progress=False, embed_cache=False,
                                 max_length=recipe["max_length"])
        out = ft.finetune_tokens(ad, list(train.index), train["words"].tolist(), train["tags"].tolist(),
                                 test["words"].tolist(), mod.TAGS, recipe, retrain=True, progress=False)
    wall = time.perf_counter() - start
    tr = out["details"]["training"]
    return {"card": card, "seed": seed, "torch_threads": recipe["torch_threads"], "steps": tr["steps"],
            "train_s": tr["seconds"], "steps_per_s": tr["steps"] / tr["seconds"],
            "predict_s": out["details"].get("predict_seconds"), "wall_s": round(wall, 2)}


def against(rev: str, root: Path) -> int:
    """``--against REV``: both commits side by side (see the module docstring)."""
    import subprocess

    repo = Path(__file__).resolve().parent.parent
    old = root / f"commit-{rev}"
    old.mkdir()
    archive = subprocess.run(["git", "-C", str(repo), "archive", rev, "atlaslib"], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(old)], input=archive.stdout, check=True)
    results = {}
    for name, tree in ((rev, old), ("this checkout", repo)):
        env = {**os.environ, "PYTHONPATH": str(tree), "ATLAS_FINETUNE_CACHE_DIR": str(root / f"ft-{len(results)}")}
        procs = {card: subprocess.Popen([sys.executable, __file__, "--one", card], env=env, stdout=subprocess.PIPE,
                                        text=True) for card in ("negex", "maccrobat")}
        results[name] = {}
        for card, p in procs.items():
            text, _ = p.communicate()
            if p.returncode:
                print(f"FAIL: {card} under {name} exited {p.returncode}")
                return 1
            results[name][card] = json.loads(text.strip().splitlines()[-1])
    code = 0
    print(f"\none fine-tune per card (first seed, trained), both cards at once as two processes on "
          f"{os.cpu_count()} CPU(s)")
    print(f"  {'card':<10} {'commit':<14} {'threads':>7} {'steps':>5} {'steps/s':>8} {'train s':>8} "
          f"{'predict s':>9} {'wall s':>7}")
    for card in ("negex", "maccrobat"):
        for name in (rev, "this checkout"):
            r = results[name][card]
            print(f"  {card:<10} {name:<14} {r['torch_threads']:>7} {r['steps']:>5} {r['steps_per_s']:>8.3f} "
                  f"{r['train_s']:>8.1f} {r['predict_s'] or 0:>9.1f} {r['wall_s']:>7.1f}")
        a, b = results[rev][card], results["this checkout"][card]
        ratio, sratio = a["wall_s"] / b["wall_s"], b["steps_per_s"] / a["steps_per_s"]
        print(f"  {card:<10} speed-up: wall {ratio:.2f}x, training steps per second {sratio:.2f}x "
              f"(goal >= 2x wall): {'ok' if ratio >= 2 else 'MISSED'}")
        code |= int(ratio < 2)
    return code


def finetune_requests():
    from atlaslib import book

    return [r for r in book.default_requests() if r.protocol == "finetune"]


def run_all(requests, paths: dict, data_dir, force: bool) -> list[dict]:
    from atlaslib import runner
    from atlaslib.results import read_cell

    rows = []
    for req in requests:
        start = time.perf_counter()
        out = runner.run(req, data_dir=data_dir, force=force, **paths)
        wall = time.perf_counter() - start
        cell = read_cell(out.result)
        det = cell["spec"]["parameters"].get("details", {})
        tr = det.get("training") or {}
        m = next(iter(cell["metrics"].values()))
        rows.append({"run": req.label, "status": cell["status"], "wall_s": round(wall, 1),
                     "train_s": tr.get("seconds") if det.get("trained_here") else 0.0,
                     "predict_s": det.get("predict_seconds"), "weights": "trained" if det.get("trained_here")
                     else "loaded", "steps": tr.get("steps"), "primary": m})
    return rows


def show(title: str, rows: list[dict]) -> None:
    print(f"\n{title}")
    print(f"  {'run':<48} {'wall s':>7} {'train s':>8} {'predict s':>9}  weights  primary metric [95 % CI]")
    for r in rows:
        m = r["primary"]
        ci = (f"{m['value']:.3f} [{m['ci_low']:.3f}, {m['ci_high']:.3f}]" if m.get("value") is not None
              else f"n/a ({m.get('reason')})")
        print(f"  {r['run']:<48} {r['wall_s']:>7.1f} {r['train_s'] or 0:>8.1f} {r['predict_s'] or 0:>9.1f}  "
              f"{r['weights']:<7}  {ci}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                    help="build workers the finetune runs are spread over (default: CPU count)")
    ap.add_argument("--cold-build", type=float, default=None,
                    help="seconds of a cold `atlas book` of the default matrix without the finetune runs")
    ap.add_argument("--measure-cold-build", action="store_true",
                    help="also time a cold `atlas book` of the whole default matrix (finetune included)")
    ap.add_argument("--executor", choices=("dask", "serial"), default="dask",
                    help="executor of the measured cold build (as `atlas book`)")
    ap.add_argument("--select-lr", action="store_true",
                    help="repeat MACCROBAT's learning-rate choice on held-out train sentences, then stop")
    ap.add_argument("--keep", action="store_true", help="keep the private folder and print its path")
    ap.add_argument("--against", metavar="REV", default=None,
                    help="time one fine-tune per card with commit REV and with this checkout, side by side")
    ap.add_argument("--one", choices=("negex", "maccrobat"), default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        use_data_dir(args.data_dir)
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("ATLAS_PROGRESS", "off")
        print(json.dumps(one_finetune(args.one)))
        return 0
    data_dir = use_data_dir(args.data_dir)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("ATLAS_PROGRESS", "plain")
    root = Path(tempfile.mkdtemp(prefix="atlas-bench-finetune-"))
    os.environ["ATLAS_FINETUNE_CACHE_DIR"] = str(root / "finetune-cache")
    os.environ["ATLAS_EMBED_CACHE_DIR"] = str(root / "embed-cache")
    os.environ.pop("ATLAS_FINETUNE_RETRAIN", None)
    print_machine()
    if args.against:
        code = against(args.against, root)
        if not args.keep:
            import shutil

            shutil.rmtree(root, ignore_errors=True)
        return code
    if args.select_lr:
        select_lr(data_dir)
        return 0

    from atlaslib.cards import maccrobat, negex

    print("recipes: negex " + json.dumps(negex.FINETUNE_RECIPE) + "\n         maccrobat "
          + json.dumps(maccrobat.FINETUNE_RECIPE))
    reqs = finetune_requests()
    paths = {"results_dir": root / "results", "runs_dir": root / "runs", "failed_dir": root / "failed"}
    cold = run_all(reqs, paths, data_dir, force=False)
    show("cold (empty weight cache)", cold)
    warm = run_all(reqs, paths, data_dir, force=True)
    show("warm (notebooks forced to execute again, weight cache kept)", warm)

    per_card: dict[str, float] = {}
    for r in cold:
        card = r["run"].split("/")[0]
        per_card[card] = per_card.get(card, 0.0) + (r["train_s"] or 0.0)
    total_cold = sum(r["wall_s"] for r in cold)
    added = total_cold / max(1, args.workers)
    print("\nfine-tuning time per card (training only, cold): "
          + "; ".join(f"{c} {s:.1f} s" for c, s in per_card.items()))
    print(f"finetune runs, cold, one after the other: {total_cold:.1f} s; spread over {args.workers} build "
          f"worker(s) they add about {added:.1f} s to a cold build; warm: {sum(r['wall_s'] for r in warm):.1f} s")
    failed = [r["run"] for r in cold + warm if r["status"] != "ok"]
    trained_warm = [r["run"] for r in warm if r["weights"] == "trained"]
    code = 0
    if failed:
        print(f"FAIL: not ok: {failed}")
        code = 1
    if trained_warm:
        print(f"FAIL: trained again with nothing changed: {trained_warm}")
        code = 1
    if args.cold_build is not None:
        est = args.cold_build + added
        print(f"cold build without finetune {args.cold_build:.1f} s; with the finetune runs ≈ {est:.1f} s "
              f"(goal ≤ {GOAL_SECONDS} s): {'ok' if est <= GOAL_SECONDS else 'MISSED'}")
        code |= int(est > GOAL_SECONDS)
    if args.measure_cold_build:
        from atlaslib import book

        for sub in ("finetune-cache", "embed-cache"):
            os.environ[f"ATLAS_{'FINETUNE' if sub.startswith('fine') else 'EMBED'}_CACHE_DIR"] = str(root / f"{sub}-2")
        bpaths = book.BuildPaths(results=root / "book-results", runs=root / "book-runs", build=root / "_build")
        start = time.perf_counter()
        rc = book.build(paths=bpaths, data_dir=data_dir, executor=args.executor, log=lambda *a, **k: None)
        secs = time.perf_counter() - start
        print(f"cold `atlas book` of the default matrix ({len(book.default_requests())} runs, "
              f"{len(reqs)} finetune) measured here: {secs:.1f} s (goal ≤ {GOAL_SECONDS} s): "
              f"{'ok' if secs <= GOAL_SECONDS and rc == 0 else 'MISSED'}; without the finetune runs ≈ "
              f"{secs - added:.1f} s")
        code |= int(secs > GOAL_SECONDS or rc != 0)
    if args.keep:
        print(f"private folder kept: {root}")
    else:
        import shutil

        shutil.rmtree(root, ignore_errors=True)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
