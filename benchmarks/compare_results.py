"""Compare the metrics of two result folders run for run (a refactor must not change a published number).

    python benchmarks/compare_results.py BEFORE_RESULTS AFTER_RESULTS [--tol 0]

Prints one line per metric whose value or interval differs (or that exists on one side only), then a
summary; exits 1 when any declared metric of a run present in both folders changed. Metrics new in the
AFTER folder (added analyses) are listed but are not failures; neither are runs present on one side only.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def load(root: Path) -> dict:
    return {str(p.relative_to(root)): json.loads(p.read_text()) for p in sorted(root.rglob("*.json"))}


def differs(a, b, tol: float) -> bool:
    if a is None or b is None:
        return a is not b
    return abs(float(a) - float(b)) > tol


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--tol", type=float, default=0.0, help="absolute tolerance (default 0: bit for bit)")
    args = ap.parse_args(argv)
    before, after = load(args.before), load(args.after)
    changed = added = compared = 0
    for run in sorted(set(before) | set(after)):
        if run not in after or run not in before:
            print(f"only in {'before' if run in before else 'after'}: {run}")
            continue
        b, a = before[run], after[run]
        if b["status"] != a["status"]:
            print(f"CHANGED {run}: status {b['status']} -> {a['status']}")
            changed += 1
        for name in sorted(set(b["metrics"]) | set(a["metrics"])):
            if name not in a["metrics"]:
                print(f"CHANGED {run}: {name} dropped")
                changed += 1
                continue
            if name not in b["metrics"]:
                print(f"new     {run}: {name} = {a['metrics'][name].get('value')}")
                added += 1
                continue
            compared += 1
            mb, ma = b["metrics"][name], a["metrics"][name]
            for f in ("value", "ci_low", "ci_high"):
                if differs(mb.get(f), ma.get(f), args.tol):
                    print(f"CHANGED {run}: {name}.{f} {mb.get(f)} -> {ma.get(f)}")
                    changed += 1
    print(f"{compared} metrics compared in {len(set(before) & set(after))} runs: {changed} changed, {added} new")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
