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
