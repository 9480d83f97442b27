"""The real TempEval notebook's runs are re-scored without a kernel: a cheap run (synthetic-v1's closest baseline)
executed into a temporary results/runs folder, its stored scoring key made stale as an older scoring code leaves it,
run again with the kernel forbidden: it reports "re-scored", and its cell and ``from-cell`` outputs (the scorer's
table, the metrics, the DocTimeRel confusion) equal the executed ones. The scorer's Anafora folders are not needed:
its per-document counts are in the cell (``extra.scorer_table``) and the scorer is prediction code in the run key."""
import importlib.util
import json
from pathlib import Path

from tests.conftest import REPO


def _negex_check():   # the executed/stale/bare helpers of the NegEx re-score check, reused
    spec = importlib.util.spec_from_file_location("check_negex_rescore", REPO / "benchmarks" / "check_negex_rescore.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_a_tempeval_run_is_rescored_as_it_executed(tmp_path, monkeypatch):
    from atlaslib import rescore, runner

    check = _negex_check()
    req = runner.RunRequest("tempeval", "synthetic-v1", "closest", "phase1")
    dirs = dict(results_dir=tmp_path / "results", runs_dir=tmp_path / "runs", failed_dir=tmp_path / "failed")
    executed = runner.run(req, **dirs)
    assert executed.status == "ran"
    cell = json.loads(Path(executed.result).read_text())
    page = check._tagged(executed.notebook)
    assert len(page) == 2 and all(page)   # the scorer's table with the metrics, and the confusion
    # the scorer's table as an older scoring code may have left it: its attribute accuracy A (scoring's zero-division
    # rule, not the scorer's) another; the re-score makes it again from the table's F1s
    stored = json.loads(Path(executed.result).read_text())
    row = next(r for r in stored["extra"]["scorer_table"]["rows"] if r["row"] == "event_modality")
    assert row["A"] == row["f1"] / next(r["f1"] for r in stored["extra"]["scorer_table"]["rows"]
                                        if r["row"] == "event_span") != 0.5
    row["A"] = 0.5
    Path(executed.result).write_text(json.dumps(stored))
    check._stale(executed)

    def refuse(*a, **k):
        raise AssertionError("a kernel was started")

    monkeypatch.setattr(runner, "execute_notebook", refuse)
    again = runner.run(req, **dirs)
    assert again.status == "re-scored"
    new = json.loads(Path(again.result).read_text())
    assert check._bare(new) == check._bare(cell)
    assert new["run_key"].split(rescore.KEY_SEPARATOR)[0] == cell["run_key"].split(rescore.KEY_SEPARATOR)[0]
    assert check._tagged(again.notebook) == page


def test_the_scorer_is_prediction_code_and_its_counting_scoring():
    """Why a TempEval re-score needs no Anafora folder: the cell keeps the official scorer's per-document counts, not
    the predicted XML (its records hold each file's sha256 and counts only), and the scorer, its reader and writer are
    prediction code in the run key (a change to them executes the run again); only the counting of the stored counts
    and the engine are scoring code."""
    from atlaslib import runner

    assert {f: runner.key_part(f"cards/tempeval/{f}") for f in ("scoring.py", "anafora_io.py", "runs.py",
                                                                "counting.py")} == \
        {"scoring.py": "prediction", "anafora_io.py": "prediction", "runs.py": "prediction", "counting.py": "scoring"}
