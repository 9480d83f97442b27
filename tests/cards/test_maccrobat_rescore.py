"""The real MACCROBAT notebook's memorize run is re-scored without a kernel: executed by the runner into a temporary
results/runs folder, its stored scoring key made stale (as an older scoring code leaves it), run again with the kernel
forbidden, it reports "re-scored", and its cell, its variant cells and the notebook's ``from-cell`` outputs equal the
executed ones (the pattern of ``benchmarks/check_negex_rescore.py``)."""
import copy
import json
from pathlib import Path

import nbformat

from atlaslib import notebook, rescore, runner
from atlaslib.results import record_path
from atlaslib.sources import sha256_file


def _stale(out, variants) -> None:
    cell = json.loads(Path(out.result).read_text())
    fresh, old = cell["run_key"], f"{rescore.split_key(cell['run_key'])[0]}.older-scoring"
    cell["run_key"] = cell["spec"]["parameters"]["run_key"] = old
    Path(out.result).write_text(json.dumps(cell))
    for p in variants:
        p.write_text(json.dumps(dict(json.loads(p.read_text()), parent_run_key=old)))
    record_path(out.notebook).write_text(sha256_file(out.result) + "\n")
    page = nbformat.read(out.notebook, as_version=4)
    page.metadata.papermill.parameters.run_key = old
    for c in page.cells:
        c.source = c.source.replace(fresh, old)
    nbformat.write(page, out.notebook)


def _bare(c: dict) -> dict:
    c = copy.deepcopy(c)
    for k in ("timing", "run_key", "parent_run_key"):
        c.pop(k, None)
    c["spec"]["parameters"].pop("run_key", None)
    return c


def _tagged(path) -> list:
    return [c["outputs"] for c in nbformat.read(path, as_version=4).cells if rescore.FROM_CELL_TAG in notebook.tags(c)]


def test_the_memorize_run_is_rescored_as_it_executed(data_dir, tmp_path, monkeypatch):
    req = runner.RunRequest("maccrobat", "atlas-n100-v1", "memorize", "train_lookup")
    dirs = dict(results_dir=tmp_path / "results", runs_dir=tmp_path / "runs", failed_dir=tmp_path / "failed")
    executed = runner.run(req, **dirs)
    assert executed.status == "ran"
    variants = sorted((Path(executed.result).parent / "variants" / "train_lookup").glob("*.json"))
    cell, page = json.loads(Path(executed.result).read_text()), _tagged(executed.notebook)
    before = [json.loads(p.read_text()) for p in variants]
    assert len(variants) == 3 and len(page) == 6 and all(page)
    _stale(executed, variants)

    def refuse(*a, **k):
        raise AssertionError("a kernel was started")

    monkeypatch.setattr(runner, "execute_notebook", refuse)
    again = runner.run(req, **dirs)
    assert again.status == "re-scored"
    new = json.loads(Path(again.result).read_text())
    assert _bare(new) == _bare(cell)
    assert [_bare(json.loads(p.read_text())) for p in variants] == [_bare(v) for v in before]
    assert all(json.loads(p.read_text())["parent_run_key"] == new["run_key"] for p in variants)
    assert _tagged(again.notebook) == page


def test_every_extra_a_maccrobat_cell_holds_is_made_again_or_declared(corpus, manifest):
    """A probe cell with a language model's probes, the reproduction rows and the gold-cut leakage, and a fine-tuned
    row over two seeds with its mark: the guard lets each re-score (every extra key is made by the card's scoring
    or declared its model's), and the re-score gives its metrics and extra again, the per-type table included."""
    from atlaslib.cards import maccrobat as mc
    from atlaslib.cards.run import CardRun

    items, audit = corpus.items, mc.audit(corpus)
    test = items.set_index("item_id").loc[manifest.test]
    gold = [list(t) for t in test["tags"]]
    pred = [["O"] * len(g) for g in gold[:50]] + gold[50:]
    llm = {"contamination": {"may_have_seen": False}, "memorisation": None, "memorisation_reason": "not measured"}
    for protocol, seeds in (("probe", []), ("finetune", [{"seed": s, "pred": p, "details": {}}
                                                          for s, p in ((1, pred), (2, gold))])):
        out = mc.Outcome(model="m", protocol=protocol, version=manifest.version, status="ok", llm=llm,
                         item_ids=list(manifest.test), documents=test["document"].tolist(), gold=gold, pred=pred,
                         seed_runs=seeds, n_resamples=20)
        run = CardRun("maccrobat", manifest.version, "m", protocol, parameters={"n_resamples": 20})
        cell = run.finish(**mc.outcome_parts(out, manifest, items, metrics=run.score(out.scored_records()),
                                             audit=audit, leakage={"f1_difference": 0.0} if not seeds else None))
        assert rescore.refusal(mc.CARD, cell, []) is None
        assert {"per_type", "reproduction_rows", "contamination"} <= set(cell["extra"])
        again = rescore.rescored_cell(json.loads(json.dumps(cell)), "p.s")
        assert again["metrics"] == cell["metrics"] and again["extra"] == json.loads(json.dumps(cell["extra"]))
