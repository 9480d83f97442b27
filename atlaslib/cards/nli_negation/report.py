"""The NLI negation challenge as a library call: a case set and labels (or a predictor) in, the challenge's report
out (:func:`score_predictions`, :func:`run_nli_negation_challenge`), made by the card's scoring through the one
engine (:func:`.counting.cell_report`). Apart from :mod:`.challenge` (the gates, the report's types and the
labels' checks), which the card's scoring imports."""
from __future__ import annotations

from .challenge import (DEFAULT_MAX_FALSE_ENTAILMENT_RATE, DEFAULT_MINIMUM_AGGREGATE_ACCURACY, NliNegationReport,
                        _check_threshold, collect_predictions, normalise_label)
from .corpus import ABSTENTION, case_set_sha256, default_nli_negation_cases, validate_cases
from .counting import cell_report
from .errors import NliNegationInputError


def score_predictions(cases, labels: list[str | None], *,
                      max_false_entailment_rate: float = DEFAULT_MAX_FALSE_ENTAILMENT_RATE,
                      minimum_aggregate_accuracy: float | None = DEFAULT_MINIMUM_AGGREGATE_ACCURACY,
                      certify: bool = False) -> NliNegationReport:
    """Score normalised labels (see :func:`collect_predictions`) against the cases' gold labels.
    ``certify=True``: the false-entailment gate compares the one-sided 95 % upper bound with the ceiling."""
    cases = validate_cases(cases)
    max_fe = _check_threshold("max_false_entailment_rate", max_false_entailment_rate, False)
    min_acc = _check_threshold("minimum_aggregate_accuracy", minimum_aggregate_accuracy, True)
    labels = [normalise_label(v, i) for i, v in enumerate(labels, 1)]
    if len(labels) != len(cases):
        raise NliNegationInputError(f"got {len(labels)} predictions for {len(cases)} cases")
    records = [{"item_id": c.case_id, "pattern": c.pattern, "gold": c.gold_label,
                "pred": ABSTENTION if p is None else p} for c, p in zip(cases, labels)]
    return cell_report({"predictions": records, "split": {"hash": case_set_sha256(cases)}, "spec": {"parameters": {
        "max_false_entailment_rate": max_fe, "minimum_aggregate_accuracy": min_acc}}}, certify=certify)


def run_nli_negation_challenge(predictions=None, *, predictor=None, cases=None,
                               max_false_entailment_rate: float = DEFAULT_MAX_FALSE_ENTAILMENT_RATE,
                               minimum_aggregate_accuracy: float | None = DEFAULT_MINIMUM_AGGREGATE_ACCURACY,
                               certify: bool = False) -> NliNegationReport:
    """Run the challenge on ``cases`` (default: the built-in corpus) and return the report.
    ``certify=True``: the safety gate passes only when the one-sided 95 % upper bound of the
    false-entailment rate is under ``max_false_entailment_rate`` (see the module docstring).

    ``predictions``: labels in case order or a mapping keyed by case id; ``predictor``: a callable
    on ``(premise, hypothesis)`` or on one :class:`NliNegationCase` (or an object with
    ``predict_batch``). ``None`` / ``"abstention"`` abstain. Thresholds: see the module docstring.
    """
    cases = validate_cases(default_nli_negation_cases() if cases is None else cases)
    _check_threshold("max_false_entailment_rate", max_false_entailment_rate, False)
    _check_threshold("minimum_aggregate_accuracy", minimum_aggregate_accuracy, True)
    labels = collect_predictions(cases, predictions=predictions, predictor=predictor)
    return score_predictions(cases, labels, max_false_entailment_rate=max_false_entailment_rate,
                             minimum_aggregate_accuracy=minimum_aggregate_accuracy, certify=certify)
