"""The NegEx notebook scores its run once: its code cells, executed in order as a kernel would (the run, its cell,
the from-cell metrics, bootstrap plot and confusion matrix, the variants), draw the bootstrap resamples as many
times as one :meth:`CardRun.score <atlaslib.cards.run.CardRun.score>` of the run's records does, and the bootstrap
plot shows the very resamples the run's intervals were drawn from."""
import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402

from atlaslib.metrics import engine  # noqa: E402
from atlaslib.notebook import read_text_notebook  # noqa: E402
from tests.conftest import REPO  # noqa: E402


def test_the_notebook_draws_its_resamples_once(data_dir, monkeypatch):
    from atlaslib import plots
    from atlaslib.cards.run import CardRun

    draws, shown = [], []
    real = engine.weights
    monkeypatch.setattr(engine, "weights", lambda *a, **k: draws.append(1) or real(*a, **k))
    monkeypatch.setattr(plots, "bootstrap_distributions", lambda samples, metrics, title="": shown.append(samples))
    ns = {}
    for c in read_text_notebook(REPO / "notebooks" / "negex.md").cells:
        if c.cell_type == "code":
            exec(c.source, ns)   # noqa: S102  (the card's own notebook)
            if "parameters" in c.metadata.get("tags", []):
                ns.update(model="majority", version="atlas-n100-v1", data_dir=str(data_dir), n_resamples=200)
    assert ns["cell"]["status"] == "ok" and ns["variant_cells"] == []   # a constant baseline has no variants
    in_notebook, draws[:] = len(draws), []
    again = CardRun("negex", "atlas-n100-v1", "majority", "zero_shot", parameters={"n_resamples": 200})
    assert again.score(ns["records"]) == ns["cell"]["metrics"]
    assert in_notebook == len(draws) > 0
    expected = again.samples()
    assert list(shown[0]) == list(expected) and all(np.array_equal(shown[0][k], expected[k], equal_nan=True)
                                                  for k in expected)
