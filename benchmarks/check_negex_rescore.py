"""NegEx runs are re-scored without a kernel: each run executed by :func:`atlaslib.runner.run` into a temporary
results/runs folder, its stored cell's scoring key (and its variants' parent key) made stale as an older scoring
code would leave it, then run again with the kernel forbidden. It must report ``re-scored``, and the cell, its
variant cells and the notebook's ``from-cell`` outputs must equal the executed ones field for field (but for
timing and keys); the executed cell's metrics, unit counts and predictions must equal the published ones
(``--published``, a built book's results folder, when given).

    ATLAS_DATA_DIR=/work/shared/data .venv/bin/python benchmarks/check_negex_rescore.py \
        --published /work/final-s8-book/results majority negspacy-negex-kit

With ``--cells``, no run executes: every published NegEx default run passes the guard's cell part or is named with
why it executes, and each that passes re-scores to its published cell and variant cells (:func:`check_cells`).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from atlaslib import rescore, runner

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # the tests' re-score pieces
from tests.rescore_check import bare as _bare, stale as _stale, tagged as _tagged, variant_paths  # noqa: E402


#: the protocol of the runs checked unless ``--protocol`` names another
PROTOCOL = "zero_shot"


def check(model: str, version: str, root: Path, published: Path | None, protocol: str = PROTOCOL) -> list[str]:
    req = runner.RunRequest("negex", version, model, protocol)
    dirs = dict(results_dir=root / "results", runs_dir=root / "runs", failed_dir=root / "failed")
    t = time.perf_counter()
    executed = runner.run(req, **dirs)
    ran_s = time.perf_counter() - t
    problems = [] if executed.status == "ran" else [f"{model}: executed as {executed.status!r}"]
    cell = json.loads(Path(executed.result).read_text())
    variants = [json.loads(p.read_text()) for p in variant_paths(executed.result)]
    page = _tagged(executed.notebook)
    if published is not None:
        pub = json.loads((published / "negex" / version / model / f"{protocol}.json").read_text())
        # the unit counts but for the reason a labels-only run gives no ROC-AUC (NegEx's own wording since
        # 413c401; the metrics carry the same reason as published)
        def counts(c):
            return {k: v for k, v in (c.get("unit_counts") or {}).items() if k != "undefined"}

        for k in ("metrics", "predictions", "split", "data_sha256", "seeds"):
            if cell.get(k) != pub.get(k):
                problems.append(f"{model}: {k} differs from the published cell")
        if cell.get("extra") != {k: v for k, v in (pub.get("extra") or {}).items() if k != "confusion"}:
            problems.append(f"{model}: extra differs from the published cell (but for the dropped confusion)")
        if counts(cell) != counts(pub):
            problems.append(f"{model}: unit_counts differ from the published cell")
        pub_variants = {p.name: json.loads(p.read_text())
                        for p in (published / "negex" / version / model / "variants" / protocol).glob("*.json")}
        mine = {p.name: json.loads(p.read_text()) for p in variant_paths(executed.result)}
        if mine.keys() != pub_variants.keys() or any(
                mine[n].get(k) != pub_variants[n].get(k) or counts(mine[n]) != counts(pub_variants[n])
                for n in mine for k in ("metrics", "predictions")):
            problems.append(f"{model}: variant cells differ from the published ones")
    _stale(executed)
    saved = runner.execute_notebook

    def refuse(*a, **k):
        raise AssertionError("a kernel was started")

    runner.execute_notebook = refuse
    try:
        t = time.perf_counter()
        again = runner.run(req, **dirs)
        rescored_s = time.perf_counter() - t
    except runner.RunFailed as e:
        extra = sorted(cell.get("extra") or {})
        return problems + [f"{model}: not re-scored, it would execute again (extra holds {extra}): {e}"]
    finally:
        runner.execute_notebook = saved
    if again.status != "re-scored":
        return problems + [f"{model}: second run {again.status!r}, not re-scored"]
    new = json.loads(Path(again.result).read_text())
    if _bare(new) != _bare(cell):
        problems.append(f"{model}: the re-scored cell differs: "
                        f"{[k for k in set(new) | set(cell) if _bare(new).get(k) != _bare(cell).get(k)]}")
    new_variants = [json.loads(p.read_text()) for p in variant_paths(again.result)]
    if [_bare(v) for v in new_variants] != [_bare(v) for v in variants]:
        problems.append(f"{model}: the re-scored variant cells differ ({len(new_variants)} vs {len(variants)})")
    if any(v["parent_run_key"] != new["run_key"] for v in new_variants):
        problems.append(f"{model}: a variant cell's parent key is not the re-scored run's")
    if _tagged(again.notebook) != page:
        problems.append(f"{model}: the from-cell outputs differ from the executed ones")
    print(f"{model} {version}: executed {ran_s:.1f} s, re-scored {rescored_s:.1f} s; {len(page)} from-cell cells, "
          f"{len(variants)} variant cells", flush=True)
    return problems


def check_cells(published: Path, card: str = "negex") -> list[str]:
    """Every default run of ``card`` in the built book's results folder ``published`` through the guard's part that
    reads cells (:func:`atlaslib.rescore.refusal`), and each one it passes re-scored from its cell (and its variant
    cells) and compared with them field for field (but for timing and keys); a refused run is named with its
    reason (it executes)."""
    problems = []
    for path in sorted((published / card).glob("*/*/*.json")):
        cell = json.loads(path.read_text())
        variants = [json.loads(p.read_text()) for p in sorted((path.parent / "variants" / cell["protocol"]).glob("*.json"))]
        name = "/".join(path.relative_to(published).parts)
        why = rescore.refusal(runner.get_card(card), cell, variants)
        if why:
            print(f"{name}: executes ({why})")
            continue
        new = json.loads(json.dumps(rescore.rescored_cell(cell, rescore.split_key(cell["run_key"])[0] + ".x")))
        new_variants = json.loads(json.dumps(rescore.rescored_variants(new, variants)))
        same = _bare(new) == _bare(cell) and [_bare(v) for v in new_variants] == [_bare(v) for v in variants]
        print(f"{name}: re-scores, {'equal to' if same else 'DIFFERENT from'} the published cell and its "
              f"{len(variants)} variant cells")
        problems += [] if same else [f"{name}: re-scored cell differs from the published one"]
    return problems


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*")
    ap.add_argument("--version", default="atlas-n100-v1")
    ap.add_argument("--published", type=Path, default=None)
    ap.add_argument("--protocol", default=PROTOCOL)
    ap.add_argument("--cells", action="store_true", help="re-score the published cells (--published) only")
    a = ap.parse_args(argv)
    if a.cells:
        problems = check_cells(a.published)
        print("\n".join(problems) or "ok: every run the guard passes re-scores to its published cell")
        return 1 if problems else 0
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        for m in a.models:
            problems += check(m, a.version, Path(tmp) / m, a.published, a.protocol)
    print("\n".join(problems) or "ok: every run re-scored, equal to the executed one")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
