"""The run key in two parts: what makes a run's predictions and what scores them (``runner.RUN_KEY_PARTS``). A
change to scoring code re-scores a stored run from its predictions without a kernel, and the re-scored cell and
page are the ones executing the notebook makes."""
import dataclasses
import json

import nbformat
import pytest

from atlaslib import notebook, rescore, runner
from atlaslib.results import record_path
from atlaslib.sources import sha256_file
from tests.myst import myst_header
from tests.rescore_check import bare, tagged as _tagged_outputs, variant_paths


def _files():
    root = notebook.ATLASLIB
    return [p.relative_to(root).as_posix() for p in sorted(root.rglob("*"))
            if p.suffix in {".py", ".yml", ".yaml", ".txt", ".json"} and "__pycache__" not in p.parts and p.is_file()]


def test_every_atlaslib_file_is_declared_in_one_part_of_the_run_key():
    files = _files()
    undeclared = [f for f in files if runner.key_part(f) is None]
    assert not undeclared, f"declare these in runner.RUN_KEY_PARTS: {undeclared}"
    dead = [g for g, _ in runner.RUN_KEY_PARTS if not any(runner._pattern(g).match(f) for f in files)]
    assert not dead, f"declarations naming no file: {dead}"
    assert {runner.key_part(f) for f in files if f.startswith("metrics/")} == {"scoring"}
    assert runner.key_part("cards/negex/counting.py") == "scoring"
    assert runner.key_part("models/hf.py") == runner.key_part("cards/negex/data.py") == "prediction"
    assert runner.key_part("cards/run.py") == "both"
    assert runner.key_part("newmodule.py") is None  # a new module escapes nothing: the test above fails


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """A small atlaslib tree that the run key's source digest reads instead of atlaslib."""
    root = tmp_path / "atlaslib"
    for rel in ("metrics/engine.py", "models/hf.py", "cards/run.py", "cards/negex/counting.py", "cards/negex/data.py"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(f"X = {rel!r}\n")
    real = runner.source_digest
    monkeypatch.setattr(runner, "source_digest", lambda root_=root, part=None: real(root, part))
    monkeypatch.setattr(runner, "_card_data_pins", lambda card: [])
    return root


@pytest.mark.parametrize("edited, moves", [("metrics/engine.py", {"scoring"}), ("cards/negex/counting.py", {"scoring"}),
                                           ("models/hf.py", {"prediction"}), ("cards/negex/data.py", {"prediction"}),
                                           ("cards/run.py", {"prediction", "scoring"})])
def test_an_edit_moves_the_part_of_the_key_its_module_is_in(tree, edited, moves):
    req = runner.RunRequest("negex", "atlas-n100-v1", "majority", "zero_shot")

    def keys():
        return {"prediction": runner.prediction_key(req, "notebook", {"run": True}), "scoring": runner.scoring_key()}

    before = keys()
    (tree / edited).write_text("X = 'changed'\n")
    after = keys()
    assert {part for part in before if before[part] != after[part]} == moves
    assert rescore.split_key(f"{after['prediction']}.{after['scoring']}") == (after["prediction"], after["scoring"])


NOTEBOOK = myst_header() + """
# Toy

```{code-cell} python
:tags: [parameters]
model = "always-even"
protocol = "zero_shot"
version = "toy-v1"
data_dir = None
result_path = None
run_key = None
decision = None
```

```{code-cell} python
import tests.toy_card as toy
from atlaslib.cards.run import CardRun

card_run = CardRun(toy, version, model, protocol, parameters={"run_key": run_key}, result_path=result_path,
                   decision=decision)
items = toy.load_items(data_dir)
manifest = toy.split(items, version)
records = toy.predict(items, manifest, model, protocol, data_dir=data_dir, load=card_run.load)
cell = card_run.finish(**toy.cell_parts(card_run, records, manifest))
# a variant run: the model on the first six test numbers, scored as its run is
first = [r for r in records if r["item_id"] in manifest.test[:6]]
metrics = CardRun(toy, version, model, protocol, parameters={"run_key": run_key}).score(first)
card_run.variant({"key": "first-six", "kind": "subset"}, metrics=metrics, predictions=first, inputs_digest="0" * 64,
                 n_items=len(manifest.test))
variant_cells = card_run.variant_cells
card_run.write_variants()
```

```{code-cell} python
:tags: [TAG]
from IPython.display import Markdown, display
from atlaslib import results
display(Markdown(f"{len(cell['predictions'])} test numbers"))
print("accuracy", cell["metrics"]["accuracy_zero_shot"]["value"])
import matplotlib.pyplot as plt
fig, ax = plt.subplots(figsize=(3, 2))
ax.bar(["accuracy"], [cell["metrics"]["accuracy_zero_shot"]["value"]])
plt.show()
results.metrics_frame(cell["metrics"])
```

```{code-cell} python
:tags: [TAG]
from atlaslib import results
results.metrics_frame(variant_cells[0]["metrics"])
```
"""


def _toy_book(tmp_path, monkeypatch, tag):
    from atlaslib.cards import get_card

    nb = tmp_path / "toy.md"
    nb.write_text(NOTEBOOK.replace("TAG", tag))
    card = dataclasses.replace(get_card("toy"), notebook=str(nb))
    monkeypatch.setattr(runner, "get_card", lambda name: card)
    # atlaslib's digest held still: the tree may be edited while the tests run
    monkeypatch.setattr(runner, "source_digest", lambda root=None, part=None: f"atlaslib {part}")
    req = runner.RunRequest("toy", "toy-v1", "always-even", "zero_shot")
    return req, dict(results_dir=tmp_path / "results", runs_dir=tmp_path / "runs", failed_dir=tmp_path / "failed")


def _stale(out):
    """The stored pair as an older scoring code left it: another scoring key, another accuracy on cell and page."""
    cell = json.loads(open(out.result).read())
    pred, _ = rescore.split_key(cell["run_key"])
    cell["run_key"] = cell["spec"]["parameters"]["run_key"] = f"{pred}.older-scoring"
    cell["metrics"]["accuracy_zero_shot"]["value"] = 0.25
    open(out.result, "w").write(json.dumps(cell))
    for path in variant_paths(out.result):  # its variant cell: of the stored run, with an older number too
        v = json.loads(path.read_text())
        v["parent_run_key"] = cell["run_key"]
        v["metrics"]["accuracy_zero_shot"]["value"] = 0.125
        path.write_text(json.dumps(v))
    record_path(out.notebook).write_text(sha256_file(out.result) + "\n")
    page = nbformat.read(out.notebook, as_version=4)
    fresh = page.metadata.papermill.parameters.run_key
    page.metadata.papermill.parameters.run_key = cell["run_key"]
    for c in page.cells:
        c.source = c.source.replace(fresh, cell["run_key"])
        for o in c.get("outputs", []):
            if o.get("output_type") == "stream":
                o["text"] = o["text"].replace("accuracy 0.5", "accuracy 0.25")
    nbformat.write(page, out.notebook)


def _no_kernel(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("a kernel was started")

    monkeypatch.setattr(runner, "execute_notebook", refuse)


def test_a_scoring_change_rescores_the_stored_run_without_a_kernel(toy_registered, tmp_path, monkeypatch):
    req, dirs = _toy_book(tmp_path, monkeypatch, rescore.FROM_CELL_TAG)
    executed = runner.run(req, **dirs)
    assert executed.status == "ran"
    cell, page = json.loads(open(executed.result).read()), _tagged_outputs(executed.notebook)
    variant = json.loads(variant_paths(executed.result)[0].read_text())
    assert variant["parent_run_key"] == cell["run_key"]
    assert "accuracy 0.5" in json.dumps(page)
    _stale(executed)
    _no_kernel(monkeypatch)

    # a Dask build re-scores it on the client, before any cluster (as it serves current runs)
    from atlaslib import executor

    served = executor._serve_cached([req], dirs, log=lambda *a: None)
    out = served[0]
    assert out.status == "re-scored"
    new = json.loads(open(out.result).read())
    assert bare(new) == bare(cell)   # field for field the executed run's cell, but for its timing and keys
    assert new["run_key"] == new["spec"]["parameters"]["run_key"] == runner.run_key(
        req, open(runner.get_card("toy").notebook).read())
    assert _tagged_outputs(out.notebook) == page  # the page shows the cell's numbers, as the kernel drew them
    rescored_page = nbformat.read(out.notebook, as_version=4)
    injected = [c.source for c in rescored_page.cells if "injected-parameters" in notebook.tags(c)]
    assert f"run_key = {new['run_key']!r}" in injected[0].splitlines() and "older-scoring" not in injected[0]
    assert rescored_page.metadata.papermill.parameters.run_key == new["run_key"]
    [path] = variant_paths(out.result)
    again = json.loads(path.read_text())  # the variant likewise, its parent the re-scored run
    assert again["parent_run_key"] == new["run_key"]
    assert bare(again) == bare(variant)
    assert runner.run(req, **dirs).status == "cached"


def _other_scores(out):
    """The stored cell as a card's counting leaves it that scored another score than its predictions' (nor their
    rounding)."""
    cell = json.loads(open(out.result).read())
    cell["unit_counts"]["scores"] = [0.1234567891] * len(cell["unit_counts"]["ids"])
    for p in cell["predictions"]:
        p["score"] = 0.876543
    open(out.result, "w").write(json.dumps(cell))
    record_path(out.notebook).write_text(sha256_file(out.result) + "\n")


def _raising(*a, **k):
    raise KeyError("a field the new counting reads")


def _with_extra(out):
    """The stored cell as a card's code leaves it that puts a number of its own (maybe scoring code's) in extra."""
    cell = json.loads(open(out.result).read())
    cell["extra"]["report"] = {"accuracy": 0.5}
    open(out.result, "w").write(json.dumps(cell))
    record_path(out.notebook).write_text(sha256_file(out.result) + "\n")


@pytest.mark.parametrize("tag, spoil", [("remove-input", None), ("from-cell", "other-scores"),
                                        ("from-cell", "raises"), ("from-cell", "extra")])
def test_a_run_its_page_or_predictions_cannot_rescore_executes_again(toy_registered, tmp_path, monkeypatch, tag,
                                                                     spoil):
    """A notebook tagging no cell from-cell, a cell whose stored scores are not the ones its counts scored (nor
    their rounding), scoring code
    that cannot score the stored cell (the executed run names the error), or a cell whose extra holds what a
    re-score would not make anew."""
    req, dirs = _toy_book(tmp_path, monkeypatch, tag)
    executed = runner.run(req, **dirs)
    if spoil == "other-scores":
        _other_scores(executed)
    if spoil == "extra":
        _with_extra(executed)
    if spoil == "raises":
        monkeypatch.setattr(rescore, "rescored_cell", _raising)
    _stale(executed)
    _no_kernel(monkeypatch)
    assert runner.run(req, execute=False, **dirs) is None  # left to a worker by a Dask build
    with pytest.raises(runner.RunFailed, match="a kernel was started"):
        runner.run(req, **dirs)


def test_scores_stored_rounded_are_a_rounding_of_the_scores_a_run_scored():
    """A stored score the counts' score rounded to the digits it shows is the score a run scored (re-scored from the
    counts' full precision); any other is not."""
    cell = {"unit_counts": {"ids": ["a", "b"], "scores": [0.1234567891, 0.5]},
            "predictions": [{"item_id": "a", "score": 0.123457}, {"item_id": "b", "score": 0.5}]}
    assert rescore.scored_as_stored(cell)
    cell["predictions"][0]["score"] = 0.1234567891
    assert rescore.scored_as_stored(cell)
    cell["predictions"][0]["score"] = 0.123456   # a truncation, not the rounding
    assert not rescore.scored_as_stored(cell)
    cell["predictions"][0]["score"] = 0.123457
    cell["extra"] = {"seed_runs": [{"unit_counts": {"ids": ["a"], "scores": [0.7]}, "predictions": [
        {"item_id": "a", "score": 0.70001}]}]}
    assert not rescore.scored_as_stored(cell)
    cell["extra"]["seed_runs"][0]["predictions"][0]["score"] = 0.7
    assert rescore.scored_as_stored(cell)


def test_a_seeded_row_is_rescored_from_its_seeds_predictions(toy_registered):
    """Each training seed's answers are scored again: the row equals the one the run made."""
    import tests.toy_card as toy
    from atlaslib.cards.run import CardRun, contract_parts

    items = toy.load_items(None)
    manifest = toy.split(items, "toy-v1")
    base = toy.predict(items, manifest, "parity-rule", "zero_shot")
    seeded = {s: [dict(r, pred=r["pred"] if i % s else 1 - r["pred"], score=0.1 * (i % 7) + 0.01 * s)
                  for i, r in enumerate(base)] for s in (1, 2, 3)}
    run = CardRun(toy, "toy-v1", "some-encoder", "finetune", parameters={"run_key": "p.s"})
    cell = run.finish(**contract_parts(run, seeded, manifest))
    again = rescore.rescored_cell(cell, "p.t")
    assert again["run_key"] == "p.t"
    assert bare(again) == bare(cell)
    assert len({json.dumps(r["metrics"]) for r in cell["extra"]["seed_runs"]}) == 3


@pytest.mark.parametrize("seeded", [False, True])
def test_a_run_read_back_from_its_cell_gives_the_resamples_its_run_drew(toy_registered, seeded):
    """The bootstrap plot of a page cell drawn from the cell alone is the one the run drew."""
    import numpy as np

    import tests.toy_card as toy
    from atlaslib.cards.run import CardRun, contract_parts

    items = toy.load_items(None)
    manifest = toy.split(items, "toy-v1")
    base = toy.predict(items, manifest, "parity-rule", "zero_shot")
    records = {s: [dict(r, pred=r["pred"] if i % s else 1 - r["pred"]) for i, r in enumerate(base)]
               for s in (2, 3)} if seeded else [dict(r, pred=1 - r["pred"] if i % 3 == 0 else r["pred"])
                                                for i, r in enumerate(base)]
    run = CardRun(toy, "toy-v1", "some-encoder" if seeded else "parity-rule", "finetune" if seeded else "zero_shot",
                  parameters={"n_resamples": 50})
    cell = run.finish(**contract_parts(run, records, manifest))
    back = CardRun.of_cell(cell)
    assert back.sampled_metrics == run.sampled_metrics and back.sampled_label == run.sampled_label
    drawn, again = run.samples(), back.samples()
    assert drawn and drawn.keys() == again.keys() and all(np.array_equal(drawn[k], again[k]) for k in drawn)
