"""The NLI challenge's report (a cell's ``extra.report``, the card page's per-pattern intervals, the course's gate
rows) is made by the one engine from the cell's unit counts: its rates are the card's metrics under its scoring,
its intervals the engine's, and it equals scipy's exact intervals on hand-counted cases."""
import json

import pytest
from scipy.stats import beta

from atlaslib.cards import nli_negation as nn
from atlaslib.cards.run import run
from atlaslib.metrics import engine


def _cell():
    """Two patterns: ``simple`` 3 cases (1 entailing answered right, 2 non-entailing: one false entailment, one
    abstention); ``nested`` 2 entailing cases (one right), so its false-entailment rate has no denominator."""
    preds = [("s1", "simple", "entailment", "entailment"), ("s2", "simple", "neutral", "entailment"),
             ("s3", "simple", "contradiction", "abstention"), ("n1", "nested", "entailment", "entailment"),
             ("n2", "nested", "entailment", "neutral")]
    return {"predictions": [{"item_id": i, "pattern": p, "gold": g, "pred": y} for i, p, g, y in preds],
            "split": {"hash": "0" * 64},
            "spec": {"parameters": {"max_false_entailment_rate": 0.0, "minimum_aggregate_accuracy": 0.5}}}


def _cp(k, n):
    return (beta.ppf(0.025, k, n - k + 1) if k else 0.0, beta.ppf(0.975, k + 1, n - k) if k < n else 1.0)


def test_the_report_of_a_cell_is_counted_as_by_hand():
    r = nn.counting.report_of_cell(_cell())
    assert (r["n_cases"], r["n_abstentions"]) == (5, 1)
    acc, fer = r["aggregate_accuracy"], r["false_entailment_rate"]
    assert (acc["successes"], acc["trials"], acc["value"]) == (2, 5, 0.4)
    assert (acc["ci_low"], acc["ci_high"]) == pytest.approx(_cp(2, 5), abs=1e-12)
    assert (fer["successes"], fer["trials"], fer["value"]) == (1, 2, 0.5)
    assert (fer["ci_low"], fer["ci_high"]) == pytest.approx(_cp(1, 2), abs=1e-12)
    simple, nested = r["patterns"]
    assert (simple["pattern"], simple["n_cases"], simple["n_abstentions"]) == ("simple", 3, 1)
    assert nested["false_entailment_rate"] == {"successes": 0, "trials": 0, "value": None, "ci_low": None,
                                               "ci_high": None}       # undefined, never 0.0
    g = r["gate"]
    assert g["false_entailment_upper_bound"] == pytest.approx(beta.ppf(0.95, 2, 1), abs=1e-12)
    assert (g["false_entailment_gate_passed"], g["accuracy_gate_passed"], g["passed"]) == (False, False, False)


def test_the_report_takes_its_numbers_from_the_engine(monkeypatch):
    """Every interval in the report is the engine's (a stand-in engine interval shows everywhere), so no second
    computation of the rates can drift from the cell's metrics."""
    monkeypatch.setattr(engine, "exact_interval", lambda metric, tot: (0.125, 0.875))
    cases = nn.default_nli_negation_cases()[:12]
    report = nn.run_nli_negation_challenge(["entailment"] * len(cases), cases=cases)
    rates = [report.aggregate_accuracy, report.false_entailment_rate]
    rates += [r for p in report.patterns for r in (p.aggregate_accuracy, p.false_entailment_rate) if r.trials]
    assert rates and all((r.ci_low, r.ci_high) == (0.125, 0.875) for r in rates)


def test_the_report_equals_the_cells_metrics_and_what_the_challenge_reports():
    """On a real run: the report's overall rates are the cell's metrics (one scoring), and the challenge's own
    entry point (``run_nli_negation_challenge``, ``atlas score nli_negation``) gives the same report."""
    cell = run("nli_negation", "openmed-builtin-v1", "always-entailment", "zero_shot")
    r = cell["extra"]["report"]
    assert r == json.loads(json.dumps(nn.counting.report_of_cell(cell)))
    for name in ("aggregate_accuracy", "false_entailment_rate"):
        m = cell["metrics"][f"{name}_zero_shot"]
        assert (r[name]["value"], r[name]["ci_low"], r[name]["ci_high"]) == (m["value"], m["ci_low"], m["ci_high"])
    cases = nn.version_cases("openmed-builtin-v1")
    again = nn.run_nli_negation_challenge(["entailment"] * len(cases), cases=cases)
    assert again.to_dict() == r
