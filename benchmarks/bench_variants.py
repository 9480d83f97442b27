"""What the variant runs (declared perturbations, prompt variants: :mod:`atlaslib.variants`) add to the runs of
the default book, measured side by side in one process: each chosen run unperturbed (model loading, the
protocol, its metrics and result cell, as its notebook does), then its variants (``run_variants``, as the
notebook's last cell does: the same model and trained head, the perturbed inputs, their metrics and cells).

- Runs: ``--runs`` entries ``card/version/model/protocol`` (default: a subset of the default matrix: a rule
  system and the MiniLM probe on NegEx ``atlas-full-v1``, the MiniLM probe and ``memorize`` on MACCROBAT, and
  SmolLM2's option scoring on NegEx ``atlas-n100-v1`` (its prompt variants too)).
- Caches: a fresh temporary ``ATLAS_CACHE_DIR`` (embedding and request caches cold, as in a cold book); a
  fine-tune run would train first (the weight cache is cold too), which is why the default subset has none:
  a fine-tune's variants cost what a probe's do (one forward pass per perturbed text, no training).
- Printed per run: the unperturbed run's wall seconds, the variants' wall seconds, their number, and the ratio;
  then the totals. The cold default book spends the same per-run work plus costs the variants do not add
  (kernel start-up, data stories, the page build), so the share the variants add to the book is at most the
  total ratio over the runs that read text, when the subset stands for the matrix (the README says how the
  other default runs scale from these). Exit 1 when the measured ratio exceeds ``--goal`` (0.5).

Run: ``.venv/bin/python benchmarks/bench_variants.py [--runs negex/atlas-n100-v1/medspacy-context/zero_shot ...]``
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import print_machine, use_data_dir  # noqa: E402

DEFAULT_RUNS = (
    "negex/atlas-full-v1/medspacy-context/zero_shot",
    "negex/atlas-full-v1/all-minilm-l6-v2/probe",
    "maccrobat/atlas-n100-v1/memorize/train_lookup",
    "maccrobat/atlas-n100-v1/all-minilm-l6-v2/probe",
    "negex/atlas-n100-v1/smollm2-135m-instruct/zero_shot",
)


def negex_run(version, model, protocol):
    from atlaslib.cards import negex
    from atlaslib.cards.run import CardRun

    items = negex.load_items()
    manifest = negex.split(items, version)
    train, test = negex.split_frames(items, manifest)
    t0 = time.perf_counter()
    run = CardRun("negex", version, model, protocol, parameters={"n_resamples": 1000, "run_key": "bench"})
    out = negex.run_protocol(model, protocol, train, test)
    cell = run.finish(**negex.cell_parts(run, negex.scored_records(test, out), manifest, out=out))
    t1 = time.perf_counter()
    variants = negex.run_variants(run, out, train, test)
    return t1 - t0, time.perf_counter() - t1, variants


def maccrobat_run(version, model, protocol):
    from atlaslib.cards import maccrobat
    from atlaslib.cards.run import CardRun

    items = maccrobat.load_items()
    manifest = maccrobat.split(items, version)
    t0 = time.perf_counter()
    run = CardRun("maccrobat", version, model, protocol, parameters={"n_resamples": 1000, "run_key": "bench"})
    out = maccrobat.run_protocol(items, manifest, model, protocol)
    cell = run.finish(**maccrobat.outcome_parts(out, manifest, items))
    t1 = time.perf_counter()
    variants = maccrobat.run_variants(run, out, items, manifest)
    return t1 - t0, time.perf_counter() - t1, variants


RUNNERS = {"negex": negex_run, "maccrobat": maccrobat_run}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", nargs="*", default=list(DEFAULT_RUNS))
    ap.add_argument("--goal", type=float, default=0.5)
    ap.add_argument("--data-dir")
    args = ap.parse_args(argv)
    use_data_dir(args.data_dir)
    os.environ["ATLAS_CACHE_DIR"] = tempfile.mkdtemp(prefix="atlas-bench-variants-")
    os.environ.setdefault("ATLAS_PROGRESS", "plain")
    print_machine()
    rows = []
    for spec in args.runs:
        card, version, model, protocol = spec.split("/", 3) if spec.count("/") == 3 else (None,) * 4
        if card not in RUNNERS:
            print(f"--runs {spec!r}: expected card/version/model/protocol with a card among {sorted(RUNNERS)}")
            return 2
        base, extra, variants = RUNNERS[card](version, model, protocol)
        kinds = sorted({(v["spec"]["parameters"]["variant"]["kind"]) for v in variants})
        rows.append((spec, base, extra, len(variants), kinds))
        print(f"{spec:60s} unperturbed {base:7.1f} s   variants {extra:7.1f} s ({len(variants)}: {', '.join(kinds)})"
              f"   ratio {extra / base:5.2f}", flush=True)
    tb, te = sum(r[1] for r in rows), sum(r[2] for r in rows)
    print(f"\ntotal: unperturbed runs {tb:.1f} s, their variants {te:.1f} s: the variants add {te / tb:.0%} to these "
          f"runs (goal: at most {args.goal:.0%} of the cold book, which also holds costs the variants do not add)")
    return 0 if te / tb <= args.goal else 1


if __name__ == "__main__":
    sys.exit(main())
