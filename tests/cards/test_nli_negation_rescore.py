"""The real NLI notebook's runs are re-scored without a kernel: a cheap run executed into a temporary results/runs
folder, its stored scoring key made stale as an older scoring code leaves it, run again with the kernel forbidden:
it reports "re-scored", and the cell (its ``extra.report`` made anew of the new cell) and the notebook's
``from-cell`` outputs equal the executed ones (but for timing and keys)."""
import pytest

from atlaslib import runner
from tests.rescore_check import rescored_as_executed


def _older_report(cell):   # what the old scoring made: made anew
    cell["extra"]["report"]["schema_version"] = "an older report"


@pytest.mark.parametrize("model", ["medspacy-context-nli"])
def test_an_nli_run_is_rescored_as_it_executed(model, tmp_path, monkeypatch):
    req = runner.RunRequest("nli_negation", "openmed-builtin-v1", model, "zero_shot")
    cell, _, page = rescored_as_executed(req, tmp_path, monkeypatch, edit=_older_report)
    assert len(page) == 4 and list(cell["extra"]) == ["report"]
