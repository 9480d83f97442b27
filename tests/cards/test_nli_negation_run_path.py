"""The NLI card's one run path: the notebook and ``cards.run.run`` make the same calls (``predict`` and
``cell_parts``), the run scores through CardRun (no card-level ``score``), and every model a run runs on, the
similarity baseline's embedding weights included, is loaded by the run's decision (CardRun.load), never by the
card."""
import inspect

import numpy as np

import atlaslib.models
from atlaslib.cards import nli_negation as nn
from atlaslib.cards.run import CardRun, run


class _Embed:
    """An embed.text.pooled stand-in: one fixed random vector per distinct text."""
    info = {"adapter": "fake"}

    def embed(self, texts, batch_size=32):
        return np.stack([np.random.default_rng(sum(map(ord, t))).normal(size=8) for t in texts])


def test_the_similarity_baseline_runs_on_the_adapter_its_run_loaded(monkeypatch):
    asked = []

    def fake_load(profile, capability, **kw):
        asked.append((profile.name, capability))
        return _Embed()

    monkeypatch.setattr(atlaslib.models, "load_adapter", fake_load)
    card_run = CardRun("nli_negation", "openmed-builtin-v1", nn.SIMILARITY_PREDICTOR, "zero_shot")
    items = nn.load_items()
    with card_run.attempt():
        records = nn.predict(items, nn.split(items, "openmed-builtin-v1"), nn.SIMILARITY_PREDICTOR, "zero_shot",
                             load=card_run.load)
    cell = card_run.finish(**nn.cell_parts(card_run, records))
    assert cell["status"] == "ok" and asked == [("all-minilm-l6-v2", "embed.text.pooled")]
    assert card_run.loaded.adapter is not None
    assert cell["spec"]["profile"]["adapter"].endswith("EmbeddingSimilarityPredictor")


def test_the_card_neither_resolves_profiles_nor_loads_adapters():
    for mod in (nn.card, nn.predictors, nn.contract):
        src = inspect.getsource(mod)
        assert "get_profile" not in src and "load_adapter(" not in src, mod.__name__


def test_the_contract_and_the_notebook_make_one_cell():
    """cards.run.run (the contract's predict, the card's cell_parts) and the notebook's calls give one cell:
    metrics, unit counts, predictions and the report; the card has no scorer of its own."""
    assert not hasattr(nn, "score") and not hasattr(nn.contract, "score")
    by_contract = run("nli_negation", "openmed-builtin-v1", nn.CONTEXT_PREDICTOR, "zero_shot")
    card_run = CardRun("nli_negation", "openmed-builtin-v1", nn.CONTEXT_PREDICTOR, "zero_shot")
    items = nn.load_items()
    manifest = nn.split(items, "openmed-builtin-v1")
    with card_run.attempt():
        records = nn.predict(items, manifest, nn.CONTEXT_PREDICTOR, "zero_shot", load=card_run.load)
    by_notebook = card_run.finish(**nn.cell_parts(card_run, records, manifest))
    for k in ("metrics", "unit_counts", "predictions", "extra", "split"):
        assert by_contract[k] == by_notebook[k], k
    assert set(by_contract["extra"]) == {"report"} and by_contract["extra"]["report"]["n_cases"] == 7
    assert by_contract["spec"]["profile"] == by_notebook["spec"]["profile"]
    assert by_contract["spec"]["profile"]["adapter"].endswith("ContextRulePredictor")
