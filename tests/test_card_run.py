"""One run of any card (:mod:`atlaslib.cards.run`): frozen spec, timing, not-run decision, one result cell.

References: hand counts on the toy card (4 of its 8 test numbers are even), on the NLI challenge's own
case list (the share of entailment gold labels is what always answering "entailment" scores), and scikit-learn's
accuracy of each training seed's predictions (a fine-tuned row is their mean).
"""
from __future__ import annotations

import json

import pytest

from atlaslib import results
from atlaslib.cards import CARD_MODULES, NotRun, get_card
from atlaslib.cards.run import CardRun, run
from atlaslib.metrics.intervals import clopper_pearson


@pytest.fixture
def toy(toy_registered):
    return get_card("toy")


def test_run_through_the_contract_gives_the_hand_counted_cell(toy, tmp_path):
    target = tmp_path / "cell.json"
    cell = run("toy", "toy-v1", "always-even", "zero_shot", result_path=target)
    assert json.loads(target.read_text()) == cell
    assert cell["status"] == "ok" and cell["split"]["n_test"] == 8 and len(cell["predictions"]) == 8
    acc = cell["metrics"]["accuracy_zero_shot"]
    lo, hi = clopper_pearson(4, 8)
    assert (acc["value"], acc["ci_low"], acc["ci_high"]) == (0.5, lo, hi)
    assert run("toy", "toy-v1", "parity-rule", "zero_shot")["metrics"]["accuracy_zero_shot"]["value"] == 1.0


def test_a_run_that_cannot_happen_is_a_not_run_cell_with_the_cards_metric_names(toy, monkeypatch):
    reason = "card toy runs only always-even, parity-rule under zero_shot"
    cell = run("toy", "toy-v1", "some-encoder", "zero_shot")
    assert cell["status"] == "not_run" and cell["reason"] == reason
    assert list(cell["metrics"]) == toy.metric_names("zero_shot") == ["accuracy_zero_shot"]
    assert cell["metrics"]["accuracy_zero_shot"] == {"value": None, "ci_low": None, "ci_high": None,
                                                     "reason": f"not run: {reason}"}
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")   # a fine-tune whose weights are absent: its not-run cell
    cell = run("toy", "toy-v1", "nobody-org/absent-model", "finetune")
    assert cell["status"] == "not_run" and cell["reason"].startswith("weights unavailable")
    assert cell["metrics"]["accuracy_finetune"]["value"] is None


def test_a_seeded_row_of_no_seed_is_one_clear_error(toy):
    from atlaslib.cards.run import contract_parts
    from tests import toy_card

    manifest = toy_card.split(toy_card.load_items(), "toy-v1")
    with pytest.raises(ValueError, match=r"card toy, predict of m under finetune: a row over training seeds is "
                                         r"\{training seed: list of records\}, at least one seed; got \{\}"):
        contract_parts(CardRun("toy", "toy-v1", "m", "finetune"), {}, manifest)


def test_a_fine_tune_through_the_contract_is_the_books_row_over_its_five_seeds(toy, tmp_path):
    """The row is the mean of the seeds' accuracies (scikit-learn on each seed's predictions), not the first
    seed's, with the two-level interval; every seed's predictions and metrics are in ``extra.seed_runs`` and the
    cell's own predictions are the first seed's, as in the book's fine-tuned rows."""
    import numpy as np
    from sklearn.metrics import accuracy_score

    from tests.tiny_models import tiny_encoder
    from tests.toy_card import FINETUNE_RECIPE

    cell = run("toy", "toy-v1", str(tiny_encoder(tmp_path)), "finetune", parameters={"n_resamples": 200})
    runs = cell["extra"]["seed_runs"]
    assert [r["seed"] for r in runs] == FINETUNE_RECIPE["seeds"] == [1, 2, 3, 4, 5]
    gold = [p["gold"] for p in cell["predictions"]]
    per = [accuracy_score(gold, [p["pred"] for p in r["predictions"]]) for r in runs]
    acc = cell["metrics"]["accuracy_finetune"]
    assert per[0] != np.mean(per)   # the seeds disagree: the first seed alone is another number
    assert acc["value"] == pytest.approx(np.mean(per))
    assert [s["value"] for s in acc["seeds"]["per_seed"]] == pytest.approx(per) and acc["seeds"]["n_seeds"] == 5
    assert acc["ci_low"] <= acc["value"] <= acc["ci_high"]
    for r, a in zip(runs, per):   # each seed's own metric with its exact interval
        k = round(a * len(gold))
        assert (r["metrics"]["accuracy_finetune"]["value"], r["metrics"]["accuracy_finetune"]["ci_low"],
                r["metrics"]["accuracy_finetune"]["ci_high"]) == pytest.approx((a, *clopper_pearson(k, len(gold))))
        assert r["unit_counts"]
    assert [p["pred"] for p in cell["predictions"]] == [p["pred"] for p in runs[0]["predictions"]]
    assert cell["seeds"] == {"split": 0, "bootstrap": 20261006, "finetune": [1, 2, 3, 4, 5]}


def test_nli_challenge_through_the_contract_matches_its_case_list():
    from atlaslib.cards import nli_negation

    cases = nli_negation.default_nli_negation_cases()
    k = sum(c.gold_label == "entailment" for c in cases)
    cell = run("nli_negation", "builtin-v1", "always-entailment", "zero_shot")
    acc = cell["metrics"]["aggregate_accuracy_zero_shot"]
    assert acc["value"] == pytest.approx(k / len(cases))
    assert (acc["ci_low"], acc["ci_high"]) == pytest.approx(clopper_pearson(k, len(cases)))
    assert cell["metrics"]["false_entailment_rate_zero_shot"]["value"] == 1.0
    # the cell says where the run's time went: one answer per case in its prediction phase, nothing trained
    from atlaslib.pages import rowinfo
    from atlaslib.phases import throughput

    ph = cell["timing"]["phases"]
    assert ph["prediction"]["items"] == len(cases) and ph["training"] == {"seconds": 0.0, "items": 0,
                                                                           "served_seconds": 0.0, "served_untimed": 0}
    assert throughput(cell["timing"])["items"] == len(cases)
    # a few cases answered in well under a second: too short for a rate (warm-up would weigh more than them)
    assert rowinfo.speed(cell) is None and rowinfo.speed_cell(cell) == "too short to time"


def test_the_spec_is_frozen_when_the_run_starts_and_completed_by_what_the_adapter_was(toy, monkeypatch):
    import types

    now = [100.0]   # the run's clock, given: the wall time is from the run's start to its finish
    monkeypatch.setattr(results.provenance, "time", types.SimpleNamespace(perf_counter=lambda: now[0]))  # Timer's
    params = {"n_resamples": 1000, "nested": {"seed": 1}}
    r = CardRun("toy", "toy-v1", "always-even", "zero_shot", parameters=params)
    now[0] = 102.25
    params["n_resamples"], params["nested"]["seed"] = 5, 2   # later edits of the caller's dict do not reach it
    cell = r.finish(metrics={"accuracy_zero_shot": results.metric(0.5, 0.2, 0.8)}, predictions=[],
                    profile={"name": "always-even", "revision": "abc"}, capability="builtin",
                    details={"epochs": 3}, env={})
    assert cell["spec"]["parameters"] == {"n_resamples": 1000, "nested": {"seed": 1}, "details": {"epochs": 3}}
    assert (cell["spec"]["revision"], cell["spec"]["capability"]) == ("abc", "builtin")
    assert cell["timing"]["wall_seconds"] == 2.25 and r.cell is cell


def test_attempt_records_not_run_and_lets_real_failures_through(toy):
    class WeightsGone(NotRun):   # a card's own not-run error derives from the contract's
        pass

    shown = []
    r = CardRun("toy", "toy-v1", "always-even", "zero_shot")
    with r.attempt(show=shown.append):
        raise WeightsGone("weights unavailable: no local copy")
    assert not r.ok and shown == ["**Not run:** weights unavailable: no local copy"]
    assert r.finish(env={})["status"] == "not_run"

    r = CardRun("toy", "toy-v1", "always-even", "zero_shot")   # the user's model name in the reason: escaped
    with r.attempt(show=shown.append):
        raise NotRun("no weights for <img src=x onerror=alert(1)> in my_models/*x*")
    assert shown[-1] == r"**Not run:** no weights for &lt;img src=x onerror=alert(1)&gt; in my_models/\*x\*"
    assert r.not_run_reason == "no weights for <img src=x onerror=alert(1)> in my_models/*x*"   # the cell's own

    r = CardRun("toy", "toy-v1", "always-even", "zero_shot")   # a card whose run returns a status instead
    cell = r.finish(env={}, reason="weights unavailable: x@1")
    assert (cell["status"], cell["reason"], r.ok) == ("not_run", "weights unavailable: x@1", False)

    r = CardRun("toy", "toy-v1", "always-even", "zero_shot")
    with pytest.raises(ZeroDivisionError), r.attempt(show=shown.append):
        1 / 0
    assert r.ok
    with pytest.raises(ValueError, match="an ok run needs its metrics"):
        r.finish(env={})


@pytest.mark.parametrize("args, message", [
    (("toy", "toy-v2", "m", "zero_shot"), "card toy has no version 'toy-v2'; expected one of toy-v1"),
    (("toy", "toy-v1", "m", "probe"), "card toy has no protocol 'probe'; expected one of zero_shot, finetune"),
])
def test_bad_version_or_protocol_is_named(toy, args, message):
    with pytest.raises(ValueError, match=message):
        CardRun(*args)


def test_the_kernel_loads_by_the_runners_decision_and_never_decides_again(toy, monkeypatch):
    """Given the runner's decision, a CardRun loads the adapter it chose, with the card's declared options, and
    decides nothing itself; without one it decides once, by the runner's own rule (the same dict); a decision
    that the run cannot happen becomes the not-run cell with the decision's words."""
    from atlaslib import models, runner
    from atlaslib.cards import deciding

    loaded = []
    monkeypatch.setattr(models, "load_adapter", lambda profile, capability, **kw: loaded.append(
        (profile.name, capability, kw)) or "the adapter")
    decided = runner.decide(runner.RunRequest("toy", "toy-v1", "all-minilm-l6-v2", "finetune"))
    assert decided["run"] and decided["capability"] == "embed.text.pooled"

    def no_second_decision(*a, **k):
        raise AssertionError("decided again in the kernel")

    real_decide = deciding.decide
    monkeypatch.setattr(deciding, "decide", no_second_decision)
    run = CardRun("toy", "toy-v1", "all-minilm-l6-v2", "finetune", decision=decided)
    got = run.load(data_dir="/data")
    assert (got.adapter, got.capability, got.profile["name"]) == ("the adapter", "embed.text.pooled", "all-minilm-l6-v2")
    assert loaded == [("all-minilm-l6-v2", "embed.text.pooled",
                       {"data_dir": "/data", "max_length": 16, "embed_cache": False})]   # toy CARD.adapter_options

    calls = []
    monkeypatch.setattr(deciding, "decide", lambda *a, **k: calls.append(a) or real_decide(*a, **k))
    run = CardRun("toy", "toy-v1", "all-minilm-l6-v2", "finetune")
    assert run.load().capability == "embed.text.pooled" and run.decision == decided and len(calls) == 1

    blocked = dict(decided, run=False, reason="weights unavailable: not in this machine's cache")
    run = CardRun("toy", "toy-v1", "all-minilm-l6-v2", "finetune", decision=blocked)
    with run.attempt(show=lambda text: None):
        run.load()
    cell = run.finish()
    assert cell["status"] == "not_run" and cell["reason"] == blocked["reason"] and len(loaded) == 2


def test_a_variant_run_is_made_and_written_by_its_finished_run(toy, tmp_path):
    """The CardRun writes its variant runs' cells too: refused before the run is finished; after, each variant cell
    is the run's spec with the variant, keyed under the run's key, written beside the run's cell, and a variant
    file of the protocol that no variant of this run names is removed."""
    variant = {"key": "digits-doubled", "kind": "perturbation"}
    run = CardRun("toy", "toy-v1", "always-even", "zero_shot", result_path=tmp_path / "m" / "zero_shot.json")
    with pytest.raises(ValueError, match="finish it first"):
        run.variant(variant, metrics={}, predictions=[], inputs_digest="x", n_items=1)
    stale = tmp_path / "m" / "variants" / "zero_shot" / "dropped.json"
    stale.parent.mkdir(parents=True)
    stale.write_text("{}")
    cell = run.finish(metrics={"accuracy_zero_shot": results.metric(0.5)},
                      predictions=[{"item_id": "t1", "gold": 1, "pred": 1, "score": None, "n": 2}])
    v = run.variant(variant, metrics={"accuracy_zero_shot": results.metric(1.0)},
                    predictions=[{"item_id": "t1", "gold": 1, "pred": 1, "score": None, "n": 2}],
                    inputs_digest="x", n_items=8)
    assert v["spec"]["parameters"]["variant"]["key"] == "digits-doubled" and v["parent_run_key"] == cell.get("run_key")
    written = run.write_variants()
    assert [p.name for p in written] == ["digits-doubled.json"] and not stale.exists()
    assert json.loads(written[0].read_text())["metrics"]["accuracy_zero_shot"]["value"] == 1.0


def test_the_cells_unit_counts_are_the_ones_its_metrics_were_scored_from(tmp_path):
    """A NegEx cell shows its scores with six digits while its metrics read them at full precision. The unit counts
    every page reads are the ones the metrics were scored from: the engine on the cell's unit counts gives the
    cell's ROC-AUC (0.75, by scikit-learn: a negated item scored 0.1000004 ranks above an affirmed one at
    0.1000001), which the six-digit scores (a tie at 0.1, half a pair) would give as 0.625."""
    from sklearn.metrics import roc_auc_score

    from atlaslib.cards import negex
    from atlaslib.metrics import engine

    scores = [0.1000004, 0.9, 0.1000001, 0.2]
    gold = ["negated", "negated", "affirmed", "affirmed"]
    full = [{"item_id": f"i{k}", "gold": g, "pred": "negated" if s > 0.5 else "affirmed", "score": s}
            for k, (g, s) in enumerate(zip(gold, scores))]
    run = CardRun("negex", "atlas-n100-v1", "m", "zero_shot", parameters={"n_resamples": 50})
    metrics = run.score(full)
    cell = run.finish(metrics=metrics, predictions=negex.rounded(full))
    assert [p["score"] for p in cell["predictions"]] == [0.1, 0.9, 0.1, 0.2]
    y = [g == "negated" for g in gold]
    assert metrics["roc_auc_zero_shot"]["value"] == roc_auc_score(y, scores) == 0.75
    assert roc_auc_score(y, [p["score"] for p in cell["predictions"]]) == 0.625
    again = engine.evaluate(negex.SCORING, engine.UnitCounts.from_cell(cell["unit_counts"]), "zero_shot",
                            n_resamples=50)
    assert again == metrics
