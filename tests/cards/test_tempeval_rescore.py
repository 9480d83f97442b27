"""The real TempEval notebook's runs are re-scored without a kernel: a cheap run (synthetic-v1's closest baseline)
executed into a temporary results/runs folder, its stored scoring key made stale as an older scoring code leaves it,
run again with the kernel forbidden: it reports "re-scored", and its cell and ``from-cell`` outputs (the scorer's
table, the metrics, the DocTimeRel confusion) equal the executed ones. The scorer's Anafora folders are not needed:
its per-document counts are in the cell (``extra.scorer_table``) and the scorer is prediction code in the run key."""
from atlaslib import runner
from tests.rescore_check import rescored_as_executed


def _older_attribute_accuracy(cell):
    """The scorer's table as an older scoring code may have left it: its attribute accuracy A (scoring's
    zero-division rule, not the scorer's) another; the re-score makes it again from the table's F1s."""
    rows = cell["extra"]["scorer_table"]["rows"]
    row = next(r for r in rows if r["row"] == "event_modality")
    assert row["A"] == row["f1"] / next(r["f1"] for r in rows if r["row"] == "event_span") != 0.5
    row["A"] = 0.5


def test_a_tempeval_run_is_rescored_as_it_executed(tmp_path, monkeypatch):
    req = runner.RunRequest("tempeval", "synthetic-v1", "closest", "phase1")
    cell, _, page = rescored_as_executed(req, tmp_path, monkeypatch, edit=_older_attribute_accuracy)
    assert len(page) == 2 and all(page)   # the scorer's table with the metrics, and the confusion


def test_the_scorer_is_prediction_code_and_its_counting_scoring():
    """Why a TempEval re-score needs no Anafora folder: the cell keeps the official scorer's per-document counts, not
    the predicted XML (its records hold each file's sha256 and counts only), and the scorer, its reader and writer are
    prediction code in the run key (a change to them executes the run again); only the counting of the stored counts
    and the engine are scoring code."""
    assert {f: runner.key_part(f"cards/tempeval/{f}") for f in ("scoring.py", "anafora_io.py", "runs.py",
                                                                "counting.py")} == \
        {"scoring.py": "prediction", "anafora_io.py": "prediction", "runs.py": "prediction", "counting.py": "scoring"}
