"""A run page's from-cell outputs (:mod:`atlaslib.pages.run_outputs`) read only the run's cell: the confusion
matrix it draws is scikit-learn's of the cell's gold and predicted labels, a row over training seeds shows its
seeded table before the metrics, and a run without variants or without a result says so or shows nothing."""
import json

import numpy as np
import pytest
from sklearn.metrics import confusion_matrix

from atlaslib.pages import run_outputs


@pytest.fixture
def shown(monkeypatch):
    """What the outputs display, in order: the displayed objects, ``("figure", …)`` for each figure shown."""
    import IPython.display
    import matplotlib.pyplot as plt

    out = []
    plt.close("all")   # a kernel's new cell has no figure open (the inline backend closed the last cell's)
    monkeypatch.setattr(IPython.display, "display", lambda *objs, **k: out.extend(objs))
    monkeypatch.setattr(plt, "show", lambda *a, **k: [(out.append(("figure", plt.figure(n))), plt.close(n))
                                                      for n in plt.get_fignums()])
    return out


def _cell(seeded: bool):
    import tests.toy_card as toy
    from atlaslib.cards.run import CardRun, contract_parts

    items = toy.load_items(None)
    manifest = toy.split(items, "toy-v1")
    base = toy.predict(items, manifest, "parity-rule", "zero_shot")
    records = {s: [dict(r, pred=r["pred"] if i % (s + 2) else 1 - r["pred"], score=0.1 * (i % 7) + 0.01 * s)
                   for i, r in enumerate(base)] for s in (1, 2)} if seeded else \
        [dict(r, pred=r["pred"] if i % 3 else 1 - r["pred"]) for i, r in enumerate(base)]
    run = CardRun(toy, "toy-v1", "some-model", "finetune" if seeded else "zero_shot", parameters={"n_resamples": 50})
    return json.loads(json.dumps(run.finish(**contract_parts(run, records, manifest))))


def test_the_confusion_matrix_is_sklearns_of_the_cells_labels(toy_registered, shown, monkeypatch):
    from atlaslib import plots

    cell = _cell(seeded=False)
    names = {0: "odd", 1: "even"}   # as a card's labels read (the toy card counts 0/1)
    cell["predictions"] = [dict(p, gold=names[p["gold"]], pred=names[p["pred"]]) for p in cell["predictions"]]
    drawn = []
    real = plots.confusion_matrix
    monkeypatch.setattr(plots, "confusion_matrix", lambda frame, **k: (drawn.append(frame), real(frame, **k))[1])
    labels = ["odd", "even"]
    run_outputs.confusion(cell, labels)
    gold, pred = [p["gold"] for p in cell["predictions"]], [p["pred"] for p in cell["predictions"]]
    assert len(set(zip(gold, pred))) == 4   # every cell of the matrix filled
    [frame] = drawn
    assert list(frame.index) == list(frame.columns) == labels
    assert np.array_equal(frame.to_numpy(), confusion_matrix(gold, pred, labels=labels))
    assert [type(o).__name__ for o in shown] == ["Markdown", "tuple"] and shown[1][0] == "figure"


def test_each_output_shows_what_the_cell_holds(toy_registered, shown):
    seeded = _cell(seeded=True)
    run_outputs.metrics_table(seeded)   # the seeded row: its sentence, its seeded table, then the metrics
    assert [type(o).__name__ for o in shown] == ["Markdown", "DataFrame", "DataFrame"]
    assert len(shown[2]) == len(seeded["metrics"])
    shown.clear()
    run_outputs.bootstrap_plot(seeded)
    assert [o[0] for o in shown] == ["figure"]
    shown.clear()
    run_outputs.variants_table(seeded, [])
    assert [o.data for o in shown] == [run_outputs.NO_VARIANTS]
    shown.clear()
    not_run = dict(seeded, status="not_run")
    run_outputs.metrics_table(not_run), run_outputs.bootstrap_plot(not_run)
    assert shown == []
