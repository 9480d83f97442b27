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
from .challenge import decide_gates
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
    g = decide_gates(values["aggregate_accuracy"], values.get("false_entailment_rate"), parameters=parameters)
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


# -- the challenge's report, made by the engine -------------------------------------------------------------------

#: the report's per-case counts: the cell's :data:`COLUMNS` and ``abstained`` (the label ``abstention``), grouped by
#: ``pattern`` (its per-pattern rows) besides the cell's groups
REPORT_COLUMNS = (*COLUMNS, "abstained")


def report_counts(cell: dict) -> UnitCounts:
    """The per-case counts a report reads: the cell's unit counts (``unit_counts``, else :func:`counts` of its
    predictions) with the column ``abstained`` and the grouping ``pattern`` from its predictions."""
    recs = cell.get("predictions") or []
    uc = UnitCounts.from_cell(cell["unit_counts"]) if cell.get("unit_counts") else counts(cell)
    if [str(i) for i in uc.ids] != [str(r["item_id"]) for r in recs]:
        raise ValueError("nli_negation report: the cell's unit counts and predictions name other cases")
    abstained = np.array([r["pred"] == ABSTENTION for r in recs], np.int64).reshape(-1, 1)
    return UnitCounts(uc.ids, REPORT_COLUMNS, np.hstack([uc.counts[:, [uc.columns.index(c) for c in COLUMNS]],
                                                         abstained]),
                      {**uc.groups, "pattern": [r["pattern"] for r in recs]})


def _rate(metric, tot):
    """A :class:`.challenge.RateEstimate` of a proportion metric on summed counts: its value by the metric's
    formula (:func:`~atlaslib.metrics.engine.ratio`: undefined is None) and the engine's exact interval."""
    from ...metrics.engine import exact_interval
    from .challenge import RateEstimate

    k, n = (int(x) for x in metric.proportion(tot))
    v = float(metric.formula(tot))
    lo, hi = exact_interval(metric, tot) or (None, None)
    return RateEstimate(k, n, v if np.isfinite(v) else None, lo, hi)


def cell_report(cell: dict, certify: bool = False):
    """The challenge's report (:class:`.challenge.NliNegationReport`) of a result cell (its predictions, with its
    unit counts when it has them: :func:`report_counts`; the thresholds its spec records; the case digest its split
    does), every number through the engine: accuracy and false-entailment rate by the card's metrics with their
    exact intervals, overall and per pattern (in :data:`.corpus.PATTERNS` order), the one-sided bound
    :func:`~atlaslib.metrics.engine.upper_bound`, the gates by :func:`.challenge.decide_gates` (``certify``: on the
    bound). What the card's notebook, its pages, the course and the challenge's library call read."""
    from ...metrics.engine import upper_bound
    from .challenge import NliNegationReport, PatternScores, predictions_sha256
    from .corpus import PATTERNS

    def scores(sub: UnitCounts):
        tot = sub.total()
        return (int(tot["case"]), int(tot["abstained"]), _rate(ACCURACY, tot), _rate(FALSE_ENTAILMENT, tot))

    uc = report_counts(cell)
    n, abst, acc, fer = scores(uc)
    pattern = np.asarray(uc.groups["pattern"], dtype=object)
    per = tuple(PatternScores(p, *scores(uc.take(pattern == p))) for p in PATTERNS if (pattern == p).any())
    bound = upper_bound(SCORING, uc, "false_entailment_rate")   # the card's metric on the report's counts
    g = decide_gates(acc.value, fer.value, None if bound is None else bound[2],
                     (cell.get("spec") or {}).get("parameters"), certify=certify)
    labels = [None if r["pred"] == ABSTENTION else r["pred"] for r in cell.get("predictions") or []]
    digest = cell["split"]["hash"]
    return NliNegationReport(n, abst, acc, fer, per, g, digest, predictions_sha256(labels, digest))


def report_of_cell(cell: dict) -> dict:
    """:func:`cell_report` as the cell's ``extra.report`` holds it (:meth:`NliNegationReport.to_dict`)."""
    return cell_report(cell).to_dict()
