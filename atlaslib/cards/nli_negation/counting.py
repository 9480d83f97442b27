"""How an NLI-challenge run's predictions become numbers (the card's
:class:`~atlaslib.metrics.engine.Scoring`, as data) and :func:`counts`: one unit per case, the columns
``correct`` (the predicted label is the gold one; an abstention is wrong), ``case`` (1), ``false_entailment``
("entailment" predicted for a non-entailing case) and ``non_entailing``, grouped by premise template (the
template-cluster resampling beside the declared one). The declared intervals are exact (Clopper–Pearson);
paired comparisons resample cases."""
from __future__ import annotations

import numpy as np

from ...metrics import bootstrap
from ...metrics.engine import Metric, Resampling, Scoring, SliceRule, UnitCounts, check_labels, ratio
from .challenge import DEFAULT_MAX_FALSE_ENTAILMENT_RATE, DEFAULT_MINIMUM_AGGREGATE_ACCURACY, decide_gates
from .corpus import ABSTENTION, LABELS

COLUMNS = ("correct", "case", "false_entailment", "non_entailing")

ACCURACY = Metric("aggregate_accuracy", lambda t: ratio(t["correct"], t["case"]), decision="correct label",
                  exact_test=True, proportion=lambda t: (t["correct"], t["case"]))
FALSE_ENTAILMENT = Metric("false_entailment_rate", lambda t: ratio(t["false_entailment"], t["non_entailing"]),
                          higher_is_better=False, decision="no false entailment", exact_test=True,
                          proportion=lambda t: (t["false_entailment"], t["non_entailing"]), upper_bound=True,
                          label="false entailment", undefined_reason="no contradiction or neutral case")


def _non_entailing(c):
    return c["non_entailing"] == 1


def gates(values: dict, parameters: dict) -> dict:
    """The card's two gates on a run's values (``aggregate_accuracy``, ``false_entailment_rate``; None when
    undefined) at the run's thresholds (its parameters ``max_false_entailment_rate`` and
    ``minimum_aggregate_accuracy``, the card's defaults when absent; None switches the accuracy floor off), by the
    report's rule (:func:`.challenge.decide_gates`): ``false_entailment_gate`` and ``combined_gate``, True when
    passed. An undefined rate fails its gate: no evidence of a false entailment is no evidence of safety."""
    if values.get("aggregate_accuracy") is None:
        raise ValueError("nli_negation gates: the run has no aggregate accuracy to decide the gates on")
    g = decide_gates(values["aggregate_accuracy"], values.get("false_entailment_rate"),
                     max_false_entailment_rate=parameters.get("max_false_entailment_rate",
                                                              DEFAULT_MAX_FALSE_ENTAILMENT_RATE),
                     minimum_aggregate_accuracy=parameters.get("minimum_aggregate_accuracy",
                                                               DEFAULT_MINIMUM_AGGREGATE_ACCURACY))
    return {"false_entailment_gate": g.false_entailment_gate_passed, "combined_gate": g.passed}


SCORING = Scoring(
    columns=COLUMNS,
    metrics=(ACCURACY, FALSE_ENTAILMENT),
    primary="aggregate_accuracy",
    resampling=Resampling("rows", "cases", bootstrap.DEFAULT_SEED),
    decisions={"correct label": lambda c: c["correct"] == 1,
               "no false entailment": lambda c: (c["false_entailment"] == 0)[c["non_entailing"] == 1]},
    extra=(Resampling("clusters", "premise templates", bootstrap.DEFAULT_SEED, by="template",
                      label="accuracy, template-cluster", metrics=("aggregate_accuracy",),
                      assumes="cases built from one premise template are not independent"),
           Resampling("clusters", "premise templates", bootstrap.DEFAULT_SEED, by="template",
                      label="false entailment, template-cluster", metrics=("false_entailment_rate",),
                      assumes="cases built from one premise template are not independent", among=_non_entailing)),
    slices=SliceRule({"accuracy": ACCURACY}, support=lambda t: t["case"], min_units=10, unit="cases", exact=True),
    interval="exact",
    gates=gates,
)


def counts(cell: dict) -> UnitCounts:
    """The per-case counts of an NLI-challenge cell's predictions (labels checked)."""
    recs = cell.get("predictions") or []
    gold = check_labels([r["gold"] for r in recs], LABELS, "gold")
    pred = check_labels([r["pred"] for r in recs], (*LABELS, ABSTENTION), "pred")
    nonent = gold != "entailment"
    c = np.stack([pred == gold, np.ones(len(recs), bool), (pred == "entailment") & nonent, nonent],
                 axis=1).astype(np.int64)
    groups = {}
    if recs and all("template" in r for r in recs):
        groups["template"] = [r["template"] for r in recs]
    return UnitCounts([r["item_id"] for r in recs], COLUMNS, c, groups)
