"""NLI negation card: a cell's metrics are made as every card's are, by ``CardRun.score`` (the card's counts under its
SCORING through the one engine), with the gates decided on them; the run happens under the notebook's CardRun.
References: hand counts and scipy's exact binomial interval."""
import pytest
from scipy.stats import binomtest

from atlaslib.cards import nli_negation as nn
from atlaslib.cards.run import CardRun, run

CASES = nn.version_cases("builtin-v1")


class Labels:
    """Gold on every case, except: entailment on the first ``wrong`` non-entailing cases, abstention on the first
    ``abstain`` entailing ones."""

    def __init__(self, wrong: int, abstain: int):
        non = [c.case_id for c in CASES if c.gold_label != "entailment"][:wrong]
        ent = [c.case_id for c in CASES if c.gold_label == "entailment"][:abstain]
        self.labels = {c.case_id: c.gold_label for c in CASES} | dict.fromkeys(non, "entailment") | \
            dict.fromkeys(ent, None)
        self.info = {"name": "labels"}

    def __call__(self, case):
        return self.labels[case.case_id]


def exact(k, n):
    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
    return pytest.approx([k / n, ci.low, ci.high], abs=1e-12)


@pytest.mark.parametrize("ceiling, floor, gates", [(0.0, 0.5, (0.0, 0.0)), (0.1, 0.5, (1.0, 1.0)),
                                                   (0.1, 0.97, (1.0, 0.0)), (0.01, None, (0.0, 0.0))])
def test_cell_metrics_are_the_card_runs_score_with_gates_decided_on_them(ceiling, floor, gates):
    n_non = sum(c.gold_label != "entailment" for c in CASES)
    card_run = CardRun("nli_negation", "builtin-v1", "labels", "zero_shot",
                       parameters={"max_false_entailment_rate": ceiling, "minimum_aggregate_accuracy": floor})
    items = nn.load_items()
    with card_run.attempt():
        records = nn.predict(items, nn.split(items, "builtin-v1"), "labels", "zero_shot", load=card_run.load,
                             predictor=Labels(wrong=5, abstain=3))
    cell = card_run.finish(**nn.cell_parts(card_run, records))
    m = cell["metrics"]
    acc, fer = m["aggregate_accuracy_zero_shot"], m["false_entailment_rate_zero_shot"]
    assert [acc["value"], acc["ci_low"], acc["ci_high"]] == exact(len(CASES) - 8, len(CASES))
    assert [fer["value"], fer["ci_low"], fer["ci_high"]] == exact(5, n_non)
    assert (m["false_entailment_gate_zero_shot"]["value"], m["combined_gate_zero_shot"]["value"]) == gates
    g = cell["extra"]["report"]["gate"]                   # the report, the page's analysis, says the same
    assert (float(g["false_entailment_gate_passed"]), float(g["passed"])) == gates
    assert cell["spec"]["parameters"]["max_false_entailment_rate"] == ceiling
    assert cell["spec"]["capability"] == "predict.nli" and cell["timing"]["phases"]["prediction"]["items"] == len(CASES)


def test_an_undefined_false_entailment_rate_says_why_and_fails_its_gate():
    ent = [c for c in CASES if c.gold_label == "entailment"]
    records = [{"item_id": c.case_id, "gold": c.gold_label, "pred": "entailment"} for c in ent]
    metrics = CardRun("nli_negation", "builtin-v1", "m", "zero_shot").score(records)
    assert metrics["false_entailment_rate_zero_shot"] == {"value": None, "ci_low": None, "ci_high": None,
                                                          "reason": "no contradiction or neutral case"}
    assert metrics["aggregate_accuracy_zero_shot"]["value"] == 1.0
    # its gates, decided by the card's scoring at the default thresholds: no evidence of a false entailment is no
    # evidence of safety
    assert metrics["false_entailment_gate_zero_shot"]["value"] == 0.0
    assert metrics["combined_gate_zero_shot"]["value"] == 0.0


def test_the_contract_scores_an_abstaining_predictor():
    cell = run("nli_negation", "builtin-v1", nn.ALWAYS_ABSTAIN, "zero_shot")
    acc = cell["metrics"]["aggregate_accuracy_zero_shot"]
    assert [acc["value"], acc["ci_low"], acc["ci_high"]] == exact(0, len(CASES))
    assert cell["metrics"]["false_entailment_gate_zero_shot"]["value"] == 1.0
    assert cell["metrics"]["combined_gate_zero_shot"]["value"] == 0.0
