"""Clinical TempEval: one run path and the declared gate. The notebook and :func:`atlaslib.cards.run.run` make the
same calls (the card's ``predict`` and ``cell_parts``) and give the same cell, equal to the published cells
(``fixtures/tempeval/published_cells.json``: sha256 of each part of the cold build's cells); the runs that need the
note text are decided by the card's declared gate (``CARD.parameter_gates``) through the run's decision, never by
a copy of it in the card; no card function scores."""
from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
import re
from pathlib import Path

import pytest

from atlaslib.cards import NotRun, tempeval
from atlaslib.cards.run import CardRun
from atlaslib.cards.tempeval import runs

PUBLISHED = json.loads((Path(__file__).parent / "fixtures" / "tempeval" / "published_cells.json").read_text())
PARTS = ("metrics", "unit_counts", "predictions", "extra", "split", "seeds")
NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "tempeval.md"


def notebook_cell(version, model, protocol, data_dir, *, decision=None, thyme_text_dir=None):
    """The notebook's calls (notebooks/tempeval.md), in order."""
    card_run = CardRun("tempeval", version, model, protocol, decision=decision,
                       parameters=runs.spec_parameters(data_dir=str(data_dir), thyme_text_dir=thyme_text_dir,
                                                                annotation_dir=None, run_key=None))
    items = tempeval.load_items(data_dir)
    manifest = tempeval.split(items, version)
    result = None
    with card_run.attempt(show=lambda text: None):
        result = tempeval.predict(items, manifest, model, protocol, data_dir=data_dir, load=card_run.load,
                                  thyme_text_dir=thyme_text_dir, annotation_dir=None)
    return card_run.finish(**tempeval.cell_parts(card_run, result, manifest))


def digests(cell) -> dict:
    return {k: hashlib.sha256(json.dumps(json.loads(json.dumps(cell[k])), sort_keys=True).encode()).hexdigest()
            for k in PARTS}


def test_the_notebook_makes_the_calls_of_the_contract():
    text = NOTEBOOK.read_text(encoding="utf-8")
    for call in (r"tempeval\.load_items\(", r"tempeval\.split\(", r"tempeval\.predict\(.*load=card_run\.load",
                 r"card_run\.finish\(\*\*tempeval\.cell_parts\(card_run, result, manifest\)\)"):
        assert re.search(call, text), call
    assert "card_run.score(" not in text and "runs.run(" not in text


@pytest.mark.parametrize("model,protocol", [("closest", "phase2"), ("memorize", "phase1")])
def test_the_contract_run_makes_the_published_cell(model, protocol, data_dir):
    """cards.run.run (load, split, predict, the card's cell_parts, finish) gives the published cell: its metrics,
    intervals, unit counts, predictions, extra, split and seeds, to the bit."""
    from atlaslib.cards import run as cards_run

    published = PUBLISHED[f"synthetic-v1 {model} {protocol}"]
    cell = cards_run.run("tempeval", "synthetic-v1", model, protocol, data_dir=data_dir)
    assert {m: v["value"] for m, v in cell["metrics"].items() if v["value"] is not None} == published["metrics_values"]
    assert digests(cell) == {k: published[k] for k in PARTS}


@pytest.mark.parametrize("key", ["synthetic-v1 closest phase2", "synthetic-v1 memorize phase1",
                                 "synthetic-v1 memorize phase2", "synthetic-v1 closest phase1"])
def test_the_notebooks_calls_make_the_published_cell(key, data_dir):
    assert digests(notebook_cell(*key.split(), data_dir)) == {k: PUBLISHED[key][k] for k in PARTS}


def test_the_declared_gate_decides_through_the_runs_decision(data_dir, monkeypatch):
    """A run's decision is the one that counts: a decision that the run cannot happen is a not-run with its
    reason; without the runner, the card's declared gate (here widened to a synthetic run, which has text) is what
    blocks, worded as every card's gate is (:func:`atlaslib.cards.deciding.decide`)."""
    items = tempeval.load_items(data_dir)
    manifest = tempeval.split(items, "synthetic-v1")
    no = {"run": False, "reason": "decided before the kernel: not here", "profile": None, "capability": None,
          "baseline": True}
    card_run = CardRun("tempeval", "synthetic-v1", "closest", "phase2", decision=no)
    with card_run.attempt(show=lambda text: None):
        tempeval.predict(items, manifest, "closest", "phase2", data_dir=data_dir, load=card_run.load)
    assert not card_run.ok and card_run.not_run_reason == no["reason"]

    gate = dataclasses.replace(tempeval.CARD.parameter_gates[0], versions=("synthetic-v1",))
    monkeypatch.setattr(runs, "CARD", dataclasses.replace(tempeval.CARD, parameter_gates=(gate,)), raising=False)
    with pytest.raises(NotRun, match=r"^closest phase1 needs the note text; THYME text is under a Mayo Clinic DUA"):
        tempeval.predict(items, manifest, "closest", "phase1", data_dir=data_dir)


def test_the_thyme_runs_that_read_text_are_the_gates(data_dir):
    items = tempeval.load_items(data_dir)
    manifest = tempeval.split(items, "thyme-dev-2015")
    for model, protocol in (("memorize", "phase1"), ("memorize", "phase2"), ("closest", "phase1")):
        with pytest.raises(NotRun, match=f"^{model} {protocol} needs the note text"):
            tempeval.predict(items, manifest, model, protocol, data_dir=data_dir)


def test_no_card_function_scores():
    """The one scorer is CardRun.score: the card defines no ``score``, ``metrics_of`` or ``metrics_from_table``
    and calls the engine's ``evaluate`` nowhere; its cells' metrics come from the run."""
    folder = Path(tempeval.__file__).parent
    for path in sorted(folder.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        defined = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        assert not defined & {"score", "metrics_of", "metrics_from_table", "metrics"}, path.name
        assert "evaluate(" not in path.read_text(encoding="utf-8"), path.name


def test_bad_per_document_counts_are_one_error_naming_the_scorer_row(data_dir):
    import copy

    cell = notebook_cell("synthetic-v1", "closest", "phase2", data_dir)
    bad = copy.deepcopy(cell)
    bad["extra"]["scorer_table"]["per_document"]["contains"][1] = [1, 2, 3]
    with pytest.raises(ValueError, match="scorer row 'contains'"):
        tempeval.counts(bad)
