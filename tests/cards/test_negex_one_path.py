"""NegEx has one run path: ``cards.run.run`` (the contract's ``predict``) and the notebook make the same calls and
give the same cell numbers; the card has no ``score`` of its own; the run page's confusion matrix is read from the
result cell (:mod:`atlaslib.analysis.confusion`), never counted again; the reproduction table's counts and rates
are the engine's (the card's per-item counts, the metric formulas), checked against scikit-learn."""

import numpy as np
import pytest
from sklearn.metrics import confusion_matrix, precision_score, recall_score

from atlaslib.cards import negex
from atlaslib.cards.run import CardRun, run

VERSION = "atlas-n100-v1"


def _notebook_cell(data_dir, model="majority", protocol="zero_shot"):
    """The notebook's calls, in its order (notebooks/negex.md), without the reproduction and variants."""
    rows = negex.load_rows(data_dir)
    items = negex.items_from_rows(rows)
    manifest = negex.split(items, VERSION)
    train, test = negex.split_frames(items, manifest)
    card_run = CardRun("negex", VERSION, model, protocol, parameters={"n_resamples": 200})
    with card_run.attempt():
        out = negex.run_protocol(model, protocol, train, test, data_dir=data_dir, load=card_run.load)
    records = negex.scored_records(test, out, negex.predictions(test, out, data_dir))
    return card_run.finish(**negex.cell_parts(card_run, records, manifest, out=out))


@pytest.fixture(scope="module")
def notebook_cell(data_dir):
    return _notebook_cell(data_dir)


def test_the_contract_and_the_notebook_give_the_same_metrics_and_counts(request, data_dir):
    """The majority baseline gives labels without scores: both paths say so with the card's reason."""
    contract = run("negex", VERSION, "majority", "zero_shot", data_dir=data_dir, parameters={"n_resamples": 200})
    assert contract["metrics"]["roc_auc_zero_shot"]["reason"] == negex.NO_SCORE_REASON
    assert not hasattr(negex, "score") and not hasattr(negex.contract, "score")   # CardRun is the one scorer
    notebook_cell = request.getfixturevalue("notebook_cell")
    assert contract["metrics"] == notebook_cell["metrics"]
    assert contract["unit_counts"] == notebook_cell["unit_counts"]
    assert contract["predictions"] == notebook_cell["predictions"] and contract["split"] == notebook_cell["split"]


def test_the_confusion_matrix_is_read_from_the_cell(notebook_cell, repo):
    from atlaslib.analysis.confusion import confusion

    cell = notebook_cell
    assert "confusion" not in (cell.get("extra") or {})      # no second count of the same numbers in the cell
    gold, pred = [r["gold"] for r in cell["predictions"]], [r["pred"] for r in cell["predictions"]]
    frame, caption = confusion(cell, negex.LABELS)
    assert frame.reindex(index=negex.LABELS, columns=negex.LABELS, fill_value=0).to_numpy().tolist() == \
        confusion_matrix(gold, pred, labels=list(negex.LABELS)).tolist()
    assert caption.startswith(f"Gold (rows) against predicted (columns) on {len(gold):,} test items")
    text = (repo / "notebooks" / "negex.md").read_text()
    assert "confusion_counts" not in text and "confusion(cell" in text


def test_the_reproduction_table_is_the_engines_counts_and_formulas(data_dir):
    """A stand-in assertion system (negated when the sentence holds "no"): the table's counts and rates on the
    items and on the rows against scikit-learn; a missing concept counts as affirmed."""
    class NoRule:
        info = {"name": "no-rule"}

        def predict_assertion(self, texts):
            return ["ABSENT" if " no " in f" {t.lower()} " else "PRESENT" for t in texts]

    rows = negex.load_rows(data_dir)
    items = negex.items_from_rows(rows)
    table = negex.reproduction(NoRule(), rows, items)
    all_rows = negex.rows_for_reproduction(rows)
    for name, frame in (("2,365 items", items), ("2,376 rows", all_rows)):
        y = frame["label"].to_numpy()
        p = np.array([0 if t is None else int(" no " in f" {t.lower()} ") for t in frame["text"]])
        (tn, fp), (fn, tp) = confusion_matrix(y, p, labels=[0, 1])
        got = table.loc[name]
        assert [int(got[k]) for k in ("tp", "tn", "fp", "fn")] == [tp, tn, fp, fn]
        assert got["sensitivity"] == round(recall_score(y, p), 3)
        assert got["specificity"] == round(recall_score(y, p, pos_label=0), 3)
        assert got["precision"] == round(precision_score(y, p), 3)
