"""The NLI negation challenge as a library call: a case set and labels (or a predictor) in, the challenge's report
out (:func:`run_nli_negation_challenge`, :func:`score_predictions`), made by the card's scoring through the one
engine (:func:`.counting.cell_report`). Apart from :mod:`.challenge` (the gates, the report's types and the
labels' checks), which the card's scoring imports."""
from __future__ import annotations

from .challenge import (DEFAULT_MAX_FALSE_ENTAILMENT_RATE, DEFAULT_MINIMUM_AGGREGATE_ACCURACY, NliNegationReport,
                        _check_threshold, collect_predictions)
from .card import records_of
from .corpus import case_set_sha256, default_nli_negation_cases, validate_cases
from .counting import cell_report


def run_nli_negation_challenge(predictions=None, *, predictor=None, cases=None,
                               max_false_entailment_rate: float = DEFAULT_MAX_FALSE_ENTAILMENT_RATE,
                               minimum_aggregate_accuracy: float | None = DEFAULT_MINIMUM_AGGREGATE_ACCURACY,
                               certify: bool = False) -> NliNegationReport:
    """Run the challenge on ``cases`` (default: the built-in corpus) and return the report.
    ``certify=True``: the safety gate passes only when the one-sided 95 % upper bound of the
    false-entailment rate is under ``max_false_entailment_rate`` (see :mod:`.challenge`).

    ``predictions``: labels in case order or a mapping keyed by case id; ``predictor``: a callable
    on ``(premise, hypothesis)`` or on one :class:`NliNegationCase` (or an object with
    ``predict_batch``). ``None`` / ``"abstention"`` abstain. Thresholds: see :mod:`.challenge`.
    """
    cases = validate_cases(default_nli_negation_cases() if cases is None else cases)
    gates = {"max_false_entailment_rate": _check_threshold("max_false_entailment_rate", max_false_entailment_rate,
                                                           False),
             "minimum_aggregate_accuracy": _check_threshold("minimum_aggregate_accuracy", minimum_aggregate_accuracy,
                                                            True)}
    labels = collect_predictions(cases, predictions=predictions, predictor=predictor)
    return cell_report({"predictions": records_of(cases, labels), "split": {"hash": case_set_sha256(cases)},
                        "spec": {"parameters": gates}}, certify=certify)


def score_predictions(cases, labels, **gates) -> NliNegationReport:
    """The report of ``labels``, one per case in case order (see :func:`run_nli_negation_challenge` for the
    thresholds and ``certify``)."""
    return run_nli_negation_challenge(list(labels), cases=cases, **gates)
