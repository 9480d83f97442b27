"""MACCROBAT's numbers through the one engine and one run path: the gold-cut leakage scored under a declared
Scoring with its unit counts (equal to the published probe cells), the run decided and loaded by the card's
declaration, and no card-level scorer."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from atlaslib.cards import maccrobat as mc
from atlaslib.metrics import engine

FIXTURE = Path(__file__).with_name("fixtures") / "maccrobat_probe_leakage.json"


@pytest.mark.parametrize("model", ["all-minilm-l6-v2", "smollm2-135m-instruct"])
def test_gold_cut_leakage_is_the_engines_and_equals_the_published_probe_cell(model, corpus, manifest):
    """The probe cells' ``extra.gold_cut_leakage.with_gold_cuts`` (the build's, kept as a fixture with the run's
    test tags) is what the card's declared CHAR_SPANS gives through the engine, to the bit, and the report keeps
    the per-sentence unit counts (grouped by case report) it was scored from."""
    stored = json.loads(FIXTURE.read_text())[model]
    test = corpus.items.set_index("item_id").loc[manifest.test]
    gold = [mc.char_mentions(g, s) for g, s in zip(test["tags"], test["word_spans"])]
    pred = [mc.char_mentions(stored["pred"][i], s) for i, s in zip(manifest.test, test["word_spans"])]
    got = mc.char_span_f1(gold, pred, manifest.test, test["document"].tolist())
    want = stored["gold_cut_leakage"]["with_gold_cuts"]
    assert {k: got[k] for k in want} == want
    uc = engine.UnitCounts.from_cell(got["unit_counts"])
    assert uc.ids == list(manifest.test) and uc.groups["document"] == test["document"].tolist()
    for name in ("precision", "recall", "f1"):
        assert got[name] == engine.point(mc.CHAR_SPANS, uc, name)
    # by hand from the sets: the pooled counts
    assert got["tp"] == sum(len(g & p) for g, p in zip(gold, pred)) == uc.counts[:, 0].sum()
    test_counts = mc.gold_cut_mentions(test.reset_index())
    assert {f"test_{k}": v for k, v in test_counts.items()} == {
        k: v for k, v in stored["gold_cut_leakage"].items() if k.startswith("test_")}


def test_undefined_leakage_ratio_is_null_with_the_declared_reason():
    """Nothing predicted and nothing in gold: the engine's rule (NaN, never 0.0), and the declared scoring
    says why when evaluated."""
    import math

    got = mc.char_span_f1([set()], [set()], ["s1"], ["d1"])
    assert all(math.isnan(got[k]) for k in ("precision", "recall", "f1"))
    m = engine.evaluate(mc.CHAR_SPANS, engine.UnitCounts.from_cell(got["unit_counts"]), "probe", n_resamples=5)
    assert m["precision_probe"]["reason"] == "undefined: no mention predicted"


def test_the_card_and_its_notebook_decide_and_load_nothing_themselves(repo):
    """The capability, the profile and the adapter come from the run's decision (``CARD.capabilities``,
    ``CardRun.load``): no card module or notebook cell resolves a profile, loads an adapter or keeps its own
    protocol -> capability table."""
    import re

    sources = {p.name: p.read_text(encoding="utf-8") for p in Path(mc.__file__).parent.glob("*.py")}
    sources["notebooks/maccrobat.md"] = (repo / "notebooks" / "maccrobat.md").read_text(encoding="utf-8")
    found = {name for name, src in sources.items()
             if re.search(r"load_adapter\(|get_profile\(|PROTOCOL_CAPABILITY", src)}
    assert not found, found


def test_one_run_path_and_no_card_level_scorer(corpus, manifest, data_dir):
    """The notebook makes the contract's calls (``predict`` with the run's load, ``cell_parts`` of its records, the
    run's ``CardRun.score``): ``atlaslib.cards.run.run`` gives the same cell, and no card function scores."""
    from atlaslib.cards.run import CardRun, run

    assert not hasattr(mc, "score") and not hasattr(mc, "metrics_of")
    card_run = CardRun("maccrobat", manifest.version, "memorize", "train_lookup", parameters={"n_resamples": 30})
    records = mc.predict(corpus.items, manifest, "memorize", "train_lookup", load=card_run.load, n_resamples=30)
    notebook = card_run.finish(**mc.cell_parts(card_run, records, manifest))
    contract = run("maccrobat", manifest.version, "memorize", "train_lookup", data_dir=data_dir,
                   parameters={"n_resamples": 30}, n_resamples=30)
    for k in ("metrics", "unit_counts", "predictions", "extra", "split", "seeds", "overlap"):
        assert contract[k] == notebook[k], k
    assert contract["spec"]["profile"] == notebook["spec"]["profile"] == mc.BASELINE_PROFILE


def test_a_probe_run_loads_once_through_its_card_run(corpus, tmp_path):
    """A model's run is loaded once, by its CardRun (the card's declared capability); its cell's profile and
    capability are the load's, and the gold-cut probe reads the same adapter."""
    from atlaslib.cards.run import CardRun
    from atlaslib.splits import SplitManifest
    from tests.tiny_models import tiny_encoder

    ids = corpus.items["item_id"].tolist()
    m = SplitManifest(card="maccrobat", version="atlas-n100-v1", seed=mc.SEED,
                      train=[i for i in ids if i.startswith("maccrobat-d001-")][:12],
                      test=[i for i in ids if i.startswith("maccrobat-d000-")][:6])
    model = str(tiny_encoder(tmp_path))
    card_run = CardRun("maccrobat", m.version, model, "probe", parameters={"n_resamples": 20})
    loads = []

    def load(**kw):
        loads.append(kw)
        return card_run.load(**kw)

    out = mc.run_protocol(corpus.items, m, model, "probe", n_resamples=20, load=load)
    assert len(loads) == 1 and out.capability == card_run.loaded.capability == mc.CARD.capabilities["probe"][0]
    leakage = mc.probe_without_gold_cuts(corpus.items, m, card_run.loaded.adapter, out.pred)
    cell = card_run.finish(**mc.outcome_parts(out, m, corpus.items, metrics=card_run.score(out.scored_records()),
                                              leakage=leakage))
    assert cell["spec"]["profile"] == card_run.loaded.profile and cell["spec"]["capability"] == "embed.text.tokens"
    assert cell["extra"]["gold_cut_leakage"]["with_gold_cuts"]["unit_counts"]["ids"] == list(m.test)


def test_a_run_decided_not_to_happen_keeps_its_decisions_profile(corpus, manifest, monkeypatch):
    """Weights absent (offline): the run's CardRun decides it cannot happen; the contract's predict raises
    NotRun inside ``attempt`` and the not-run cell carries the decision's profile and, by the card's one rule,
    its overlap mark (the model was trained on MACCROBAT)."""
    from atlaslib.cards.run import CardRun

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model = "d4data/biomedical-ner-all"
    card_run = CardRun("maccrobat", manifest.version, model, "zero_shot", parameters={"n_resamples": 20})
    records = None
    with card_run.attempt(show=lambda text: None):
        records = mc.predict(corpus.items, manifest, model, "zero_shot", load=card_run.load)
    cell = card_run.finish(**mc.cell_parts(card_run, records, manifest))
    assert records is None and cell["status"] == "not_run" and cell["reason"].startswith("weights unavailable")
    assert cell["spec"]["profile"] == card_run.decision["profile"] and cell["overlap"] == ["maccrobat"]
