"""A run with scores (a probe, a fine-tune, a language model) stores its answers' scores rounded while its per-unit
counts keep the scores its metrics read: re-scoring its stored cell reads the counts' scores, so it gives the cell a
fresh scoring gives, to the bit (ROC-AUC against scikit-learn on the full-precision scores, where the six-digit
scores tie every item); a cell whose counts hold another score than its predictions' is still refused."""
import json

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from atlaslib import rescore
from atlaslib.cards import negex
from atlaslib.cards.run import CardRun
from tests.rescore_check import bare

VERSION = "atlas-n100-v1"


@pytest.fixture(scope="module")
def probe_cell(data_dir):
    """A NegEx probe's cell made by the notebook's calls (predictions, cell_parts, finish) from scores that differ
    only below the sixth digit: every stored score reads 0.5, the full-precision ones rank the classes apart."""
    items = negex.items_from_rows(negex.load_rows(data_dir))
    manifest = negex.split(items, VERSION)
    _, test = negex.split_frames(items, manifest)
    rng = np.random.default_rng(0)
    gold = (test["decision"] == negex.POSITIVE).to_numpy()
    scores = 0.5 + np.where(gold, 3e-7, 1e-7) + rng.uniform(0, 1e-7, len(test))
    out = {"pred": (scores > 0.5000002).astype(int), "score": scores}
    records = negex.predictions(test, out, data_dir)
    run = CardRun("negex", VERSION, "all-minilm-l6-v2", "probe", parameters={"n_resamples": 200, "run_key": "p.s"})
    cell = run.finish(**negex.cell_parts(run, records, manifest))
    return json.loads(json.dumps(cell)), gold, scores


def test_a_probe_cell_is_rescored_from_its_counts_full_precision(probe_cell):
    cell, gold, scores = probe_cell
    assert {p["score"] for p in cell["predictions"]} == {0.5}   # stored at six digits: all tied
    auc = cell["metrics"]["roc_auc_probe"]["value"]
    assert auc == pytest.approx(roc_auc_score(gold, scores)) == 1.0
    assert rescore.scored_as_stored(cell)
    again = rescore.rescored_cell(cell, "p.t")
    assert again["run_key"] == "p.t"
    assert bare(cell) == bare(json.loads(json.dumps(again)))   # metrics, intervals, unit counts (full precision), predictions (six digits)


def test_a_cell_whose_counts_hold_another_score_is_refused(probe_cell):
    cell = json.loads(json.dumps(probe_cell[0]))
    uc = cell["unit_counts"]
    uc["scores"] = [s / 2 for s in uc["scores"]]   # a counting that scored another score than the stored one
    assert not rescore.scored_as_stored(cell)
