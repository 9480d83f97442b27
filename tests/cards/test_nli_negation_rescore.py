"""The real NLI notebook's runs are re-scored without a kernel: a cheap run executed into a temporary results/runs
folder, its stored scoring key made stale as an older scoring code leaves it, run again with the kernel forbidden:
it reports "re-scored", and the cell (its ``extra.report`` made anew of the new cell) and the notebook's
``from-cell`` outputs equal the executed ones (but for timing and keys)."""
import copy
import json
from pathlib import Path

import nbformat
import pytest

from atlaslib import notebook, rescore, runner
from atlaslib.results import record_path
from atlaslib.sources import sha256_file


def _tagged(path) -> list:
    return [c["outputs"] for c in nbformat.read(path, as_version=4).cells if rescore.FROM_CELL_TAG in notebook.tags(c)]


def _stale(out) -> None:
    cell = json.loads(Path(out.result).read_text())
    fresh = cell["run_key"]
    old = f"{rescore.split_key(fresh)[0]}.older-scoring"
    cell["run_key"] = cell["spec"]["parameters"]["run_key"] = old
    cell["extra"]["report"]["schema_version"] = "an older report"   # what the old scoring made: made anew
    Path(out.result).write_text(json.dumps(cell))
    record_path(out.notebook).write_text(sha256_file(out.result) + "\n")
    page = nbformat.read(out.notebook, as_version=4)
    page.metadata.papermill.parameters.run_key = old
    for c in page.cells:
        c.source = c.source.replace(fresh, old)
    nbformat.write(page, out.notebook)


def _bare(c: dict) -> dict:
    c = copy.deepcopy(c)
    for k in ("timing", "run_key"):
        c.pop(k, None)
    c["spec"]["parameters"].pop("run_key", None)
    return c


@pytest.mark.parametrize("model", ["medspacy-context-nli"])
def test_an_nli_run_is_rescored_as_it_executed(model, tmp_path, monkeypatch):
    req = runner.RunRequest("nli_negation", "openmed-builtin-v1", model, "zero_shot")
    dirs = dict(results_dir=tmp_path / "results", runs_dir=tmp_path / "runs", failed_dir=tmp_path / "failed")
    executed = runner.run(req, **dirs)
    assert executed.status == "ran"
    cell, page = json.loads(Path(executed.result).read_text()), _tagged(executed.notebook)
    assert len(page) == 4 and list(cell["extra"]) == ["report"]
    _stale(executed)

    def refuse(*a, **k):
        raise AssertionError("a kernel was started")

    monkeypatch.setattr(runner, "execute_notebook", refuse)
    again = runner.run(req, **dirs)
    assert again.status == "re-scored"
    new = json.loads(Path(again.result).read_text())
    assert _bare(new) == _bare(cell)
    assert _tagged(again.notebook) == page
