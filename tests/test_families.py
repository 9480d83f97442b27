"""Task families (:mod:`atlaslib.cards.families`): what a family owns gives what the code each card wrote gave.

References: scikit-learn's accuracy and confusion matrix for the families' counts, the old toy card's own counting
and scoring (copied here as it was, card-level) for a family card's cells, hand counts for outside answers and a
perturbation's variant run, and the analysis modules' dispatch on a family they have never seen."""
from __future__ import annotations

import dataclasses
import types

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, confusion_matrix

from atlaslib.cards import Analysis, Card, NotRun, get_card
from atlaslib.cards.families import (FAMILIES, BinaryItems, LabelledItems, ScoredRelations, Spans, TaskFamily,
                                     family_of)
from atlaslib.cards.run import CardRun, run
from atlaslib.metrics import engine
from atlaslib.metrics.engine import Metric, Resampling, Scoring, SliceRule, UnitCounts, ratio

RNG = np.random.default_rng(7)


def _card(kind: str, **kw) -> Card:
    return Card(name="t", title="T", notebook="t.md", versions=("v",), protocols=("zero_shot",), metrics=("accuracy",),
                default_matrix=(), analysis=Analysis(kind=kind), **kw)


def test_labelled_counts_are_sklearns_accuracy_and_an_abstention_is_wrong():
    gold = RNG.choice(["a", "b", "c"], 200).tolist()
    pred = RNG.choice(["a", "b", "c", "none"], 200).tolist()
    fam = LabelledItems(_card("labels"), None, labels=("a", "b", "c"), abstain="none")
    uc = fam.counts({"predictions": [{"item_id": i, "gold": g, "pred": p} for i, (g, p) in enumerate(zip(gold, pred))]})
    t = uc.total()
    assert t["correct"] / t["item"] == accuracy_score(gold, pred) and t["item"] == 200
    with pytest.raises(ValueError, match="pred: 'none' .* not a label"):
        LabelledItems(_card("labels"), None, labels=("a", "b", "c")).counts(
            {"predictions": [{"item_id": 0, "gold": "a", "pred": "none"}]})


def test_binary_counts_are_sklearns_confusion_matrix():
    gold = RNG.choice(["affirmed", "negated"], 300).tolist()
    pred = RNG.choice(["affirmed", "negated"], 300).tolist()
    fam = BinaryItems(_card("binary"), None, labels=("affirmed", "negated"))
    recs = [{"item_id": i, "gold": g, "pred": p, "score": None} for i, (g, p) in enumerate(zip(gold, pred))]
    t = fam.counts({"predictions": recs}).total()
    tn, fp, fn, tp = confusion_matrix(gold, pred, labels=["affirmed", "negated"]).ravel()
    assert (t["tp"], t["fp"], t["tn"], t["fn"], t["positive"]) == (tp, fp, tn, fn, tp + fn)
    # the card's own groupings and reason, and the scores when every record has one: the engine's ROC-AUC is sklearn's
    from sklearn.metrics import roc_auc_score

    fam = BinaryItems(_card("binary"), None, labels=("affirmed", "negated"), groups={"sentence": "s"}, no_score="none")
    uc = fam.counts({"predictions": [dict(r, s=i // 3) for i, r in enumerate(recs)]})
    assert uc.groups["sentence"][:4] == [0, 0, 0, 1] and uc.undefined == {"roc_auc": "none"}
    scores = RNG.random(300)
    uc = fam.counts({"predictions": [dict(r, score=float(x)) for r, x in zip(recs, scores)]})
    scoring = engine.Scoring(columns=BinaryItems.columns, metrics=(Metric("roc_auc", rank=True),), primary="roc_auc",
                             resampling=Resampling("stratified", "items", 1, by="gold"))
    auc = engine.evaluate(scoring, uc, "p", n_resamples=20)["roc_auc_p"]["value"]
    assert auc == pytest.approx(roc_auc_score([g == "negated" for g in gold], scores))


# the old toy card's counting and scoring, as the card wrote them before it was a card of a family
_OLD_ACC = Metric("accuracy", lambda t: ratio(t["correct"], t["item"]), decision="correct", exact_test=True,
                  proportion=lambda t: (t["correct"], t["item"]))
OLD_SCORING = Scoring(columns=("correct", "item"), metrics=(_OLD_ACC,), primary="accuracy",
                      resampling=Resampling("rows", "items", 20261006),
                      decisions={"correct": lambda c: c["correct"] == 1},
                      slices=SliceRule({"accuracy": _OLD_ACC}, support=lambda t: t["item"], min_units=5, exact=True),
                      interval="exact")


def old_score(records, protocol):
    uc = UnitCounts([r["item_id"] for r in records], ("correct", "item"),
                    [[int(r["gold"] == r["pred"]), 1] for r in records])
    return engine.evaluate(OLD_SCORING, uc, protocol)


@pytest.mark.parametrize("model", ["always-even", "parity-rule"])
def test_a_family_card_run_is_the_old_toy_cards_cell(toy_registered, model):
    cell = run("toy", "toy-v1", model, "zero_shot")
    gold = [int(n % 2 == 0) for n in range(12, 20)]
    assert [p["gold"] for p in cell["predictions"]] == gold
    assert [p["n"] for p in cell["predictions"]] == list(range(12, 20))
    assert [p["pred"] for p in cell["predictions"]] == ([1] * 8 if model == "always-even" else gold)
    assert cell["metrics"] == old_score(cell["predictions"], "zero_shot")


def test_outside_answers_are_scored_as_a_run(toy_registered):
    """A prediction file's answers on the toy card: the split an outside system sees, and its answers scored
    through the family's counts by a CardRun, equal to the baseline run giving the same answers."""
    from atlaslib.predfiles import Pred
    from atlaslib.results import EXTERNAL
    from tests import toy_card

    s = toy_card.FAMILY.outside_split("toy-v1", "test")
    assert s.ids == [f"toy-{n}" for n in range(12, 20)] and s.records[0] == {"item_id": "toy-12", "text": "12"}
    assert "label" in toy_card.FAMILY.outside_split("toy-v1", "train").records[0]
    preds = [Pred(k, i, 1) for k, i in enumerate(reversed(s.ids), 1)]    # always even, in another order
    parts = toy_card.FAMILY.outside_cell_parts(s, preds, {"name": "mine", "revision": "abc", "trained_on": []},
                                               "zero_shot", "key", 1000)
    assert parts["metrics"] == run("toy", "toy-v1", "always-even", "zero_shot")["metrics"]
    assert parts["capability"] == EXTERNAL and parts["overlap"] == []


def test_a_declared_perturbation_is_a_variant_run_scored_by_the_run(toy_registered, tmp_path):
    """Digits doubled ("12" -> "1212") keep a number even or odd; the parity rule reads the text's last digit,
    so it stays right on every item the perturbation applies to (numbers above 13: six of the eight)."""
    from atlaslib.variants import NOT_APPLICABLE, Perturbation
    from tests import toy_card

    def doubled(item, rng):
        """The digits written twice end in the same digit: the parity is the same."""
        return {"text": item["text"] * 2} if item["n"] > 13 else NOT_APPLICABLE

    card = dataclasses.replace(toy_card.CARD, perturbations=(Perturbation("doubled", "v1", doubled),))
    fam = LabelledItems(card, toy_card.SCORING, load_items=toy_card.load_items, split=toy_card.split, labels=(0, 1),
                        baselines={"parity-rule": lambda row: int(row.text[-1]) % 2 == 0}, fields=("n",))
    mod = types.SimpleNamespace(CARD=card, SCORING=toy_card.SCORING, counts=fam.counts)
    items = toy_card.load_items()
    manifest = toy_card.split(items, "toy-v1")
    r = CardRun(mod, "toy-v1", "parity-rule", "zero_shot", result_path=tmp_path / "zero_shot.json")
    r.finish(**fam.cell_parts(r, fam.predict(items, manifest, "parity-rule", "zero_shot"), manifest))
    (v,) = fam.variants(r, items, manifest)
    extra = v["spec"]["parameters"]["variant"]
    assert (extra["key"], extra["n_items"], extra["n_applicable"], extra["n_read"]) == ("doubled-v1", 8, 6, 6)
    assert v["metrics"]["accuracy_zero_shot"]["value"] == 1.0 and len(v["unit_counts"]["ids"]) == 6


def test_each_card_kind_has_its_family_and_a_new_family_needs_no_generic_module(monkeypatch):
    """The analysis modules read a card's family (its unit, slice note, slice groups), never a kind: a family
    defined here, with a kind no module knows, is dispatched as its class declares."""
    from atlaslib.analysis import disagreement as D
    from atlaslib.pages.analysis import pool_small_slices

    kinds = {"binary": BinaryItems, "labels": LabelledItems, "spans": Spans, "temporal": ScoredRelations}
    assert {k: FAMILIES[k] for k in kinds} == kinds
    for name in ("negex", "nli_negation", "maccrobat", "tempeval"):
        card = get_card(name)
        assert family_of(card) is kinds[card.analysis.kind]
    with pytest.raises(ValueError, match="no task family of kind 'nope'; known kinds: binary, labels"):
        family_of("nope")

    class Ranked(TaskFamily):   # a new family of items: its kind is known to no generic module
        kind = "ranked-items-test"

    try:
        card = _card("ranked-items-test", resampling_unit="query")
        assert family_of(card) is Ranked and Ranked.slice_note(card).endswith("(resampling unit: query)")
        cells = [{"card": "t", "version": "v", "status": "ok", "spec": {"model": m, "protocol": "p"},
                  "predictions": [{"item_id": i, "gold": 1, "pred": p} for i, p in enumerate(preds)]}
                 for m, preds in (("a", [1, 0, 1]), ("b", [1, 1, 0]))]
        monkeypatch.setattr(D, "analysis_of", lambda name: card.analysis)
        d = D.disagreement(cells, "t")   # the item branch, as the family says: one disputed item of three
        assert d.unit == "item" and d.runs == ["a (p)", "b (p)"] and len(d.items) == 3
        assert pool_small_slices(card, cells, 5) == (cells, {})
    finally:
        FAMILIES.pop("ranked-items-test")


def test_zero_shot_by_answer_options_is_the_likelier_option():
    """A model decided on ``score.options``: the declared prompt on each row, the positive label's option first;
    predicted positive when its log-likelihood is the larger, the score the softmax probability of that option."""
    from atlaslib.cards.deciding import Loaded
    from tests import toy_card

    ll = {str(n): (-1.0, -2.0) if n % 3 else (-3.0, -0.5) for n in range(20)}   # by hand: even when n % 3 != 0

    class Options:
        info = {"name": "m"}

        def score_options(self, prompts, options):
            assert options == [" yes", " no"] and prompts[0] == "Is 12 even?"
            return {"loglik": [ll[p.split()[1]] for p in prompts]}

    card = dataclasses.replace(toy_card.CARD, capabilities={"zero_shot": ("score.options",)})
    fam = LabelledItems(card, toy_card.SCORING, labels=(0, 1), prompt="Is {text} even?", options=(" yes", " no"))
    items = toy_card.load_items()
    recs = fam.predict(items, toy_card.split(items, "toy-v1"), "m", "zero_shot",
                       load=lambda data_dir=None: Loaded(Options(), "score.options", {"name": "m"}))
    assert [r["pred"] for r in recs] == [int(n % 3 != 0) for n in range(12, 20)]
    assert recs[0]["score"] == pytest.approx(np.exp(-3) / (np.exp(-3) + np.exp(-0.5)))
    with pytest.raises(NotRun, match="m answers through predict.label, which the LabelledItems family does not run"):
        fam.predict(items, toy_card.split(items, "toy-v1"), "m", "zero_shot",
                    load=lambda data_dir=None: Loaded(Options(), "predict.label", {"name": "m"}))


def test_a_family_refuses_a_card_of_another_kind_or_an_undeclared_baseline():
    with pytest.raises(ValueError, match="card t: its analysis kind is 'binary', not the LabelledItems family's"):
        LabelledItems(_card("binary"), None)
    with pytest.raises(ValueError, match="baselines ghost have a function but are not in CARD.baselines"):
        LabelledItems(_card("labels"), None, baselines={"ghost": lambda row: 1})
