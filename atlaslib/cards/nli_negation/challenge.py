"""The NLI negation challenge's predictions, gates and report types. The rates, overall and per pattern, are the
card's scoring (:mod:`.counting`, through the one engine, with its exact Clopper–Pearson 95 % intervals):
``aggregate_accuracy`` over every case (an abstention, ``None`` or ``"abstention"``, is wrong) and
``false_entailment_rate``, entailment answered on a contradiction or neutral case (an abstention never is one;
undefined, ``None``, without such a case).

Gates, kept separate:

- false-entailment ceiling: passes when ``false_entailment_rate <= max_false_entailment_rate``
  (default 0.0: a single false entailment fails it). An undefined rate fails it (fail closed).
  With ``certify=True`` it passes only when the exact one-sided 95 % upper bound of the rate,
  ``Beta.ppf(0.95; k+1, n−k)`` (1 when k = n), is *under* the ceiling: a claim about the model's rate,
  not about this sample. Zero false entailments among n non-entailing cases certify only a rate below
  ``1 − 0.05^(1/n)`` (about 3/n), so a ceiling of 0 can never be certified.
- accuracy floor: passes when ``aggregate_accuracy >= minimum_aggregate_accuracy``. It is ON by
  default at :data:`DEFAULT_MINIMUM_AGGREGATE_ACCURACY` = 0.5 (see there); ``None`` switches it off.
- combined: both configured gates pass.

Reports hold counts, pattern names, rates with intervals, gate values, the schema version and two
sha256 digests (case set; predictions bound to the case set) — no case text, id or output.
"""
from __future__ import annotations

import hashlib
import inspect
import json
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from .corpus import ABSTENTION, LABELS, NliNegationCase, default_nli_negation_cases, validate_cases
from .errors import NliNegationError, NliNegationInputError, NliNegationPredictorError

REPORT_SCHEMA_VERSION = "atlas.nli_negation.report.v1"
CONFIDENCE_LEVEL = 0.95
DEFAULT_MAX_FALSE_ENTAILMENT_RATE = 0.0
#: The accuracy floor that is on by default. 0.5 is (a) above the accuracy of every constant-label
#: predictor on the built-in corpus — the largest gold-label share there is 75/207 = 0.362
#: (entailment and contradiction each), so "always entailment", "always contradiction", "always
#: neutral" and "always abstain" all fail it (a test pins this) — and (b) the simplest round floor
#: meaning "right on at least half of the challenge". A sanity floor against degenerate
#: predictors, not a quality target.
DEFAULT_MINIMUM_AGGREGATE_ACCURACY = 0.5


@dataclass(frozen=True)
class RateEstimate:
    """k successes out of n trials, the rate k/n (``None`` when n = 0) and its exact interval."""

    successes: int
    trials: int
    value: float | None
    ci_low: float | None
    ci_high: float | None


@dataclass(frozen=True)
class PatternScores:
    pattern: str
    n_cases: int
    n_abstentions: int
    aggregate_accuracy: RateEstimate
    false_entailment_rate: RateEstimate


@dataclass(frozen=True)
class GateDecision:
    """The configured thresholds and the three decisions (``minimum_aggregate_accuracy=None``:
    the accuracy gate is off and counts as passed)."""

    max_false_entailment_rate: float
    minimum_aggregate_accuracy: float | None
    false_entailment_gate_passed: bool
    accuracy_gate_passed: bool
    passed: bool
    certify: bool = False
    false_entailment_upper_bound: float | None = None   # exact one-sided 95 % upper bound of the rate

    @property
    def accuracy_gate_enabled(self) -> bool:
        return self.minimum_aggregate_accuracy is not None

    def to_dict(self) -> dict:
        return {"max_false_entailment_rate": self.max_false_entailment_rate,
                "minimum_aggregate_accuracy": self.minimum_aggregate_accuracy,
                "accuracy_gate_enabled": self.accuracy_gate_enabled,
                "false_entailment_gate_passed": self.false_entailment_gate_passed,
                "accuracy_gate_passed": self.accuracy_gate_passed,
                "passed": self.passed,
                "certify": self.certify,
                "false_entailment_upper_bound": self.false_entailment_upper_bound}


@dataclass(frozen=True)
class NliNegationReport:
    """The value-free outcome of one challenge run."""

    n_cases: int
    n_abstentions: int
    aggregate_accuracy: RateEstimate
    false_entailment_rate: RateEstimate
    patterns: tuple[PatternScores, ...]
    gate: GateDecision
    case_set_sha256: str
    predictions_sha256: str
    confidence_level: float = CONFIDENCE_LEVEL
    schema_version: str = REPORT_SCHEMA_VERSION

    def pattern(self, name: str) -> PatternScores:
        for p in self.patterns:
            if p.pattern == name:
                return p
        raise KeyError(name)

    def to_dict(self) -> dict:
        return {
            "schema_version": self.schema_version,
            "confidence_level": self.confidence_level,
            "interval_method": "clopper-pearson",
            "n_cases": self.n_cases,
            "n_abstentions": self.n_abstentions,
            "aggregate_accuracy": asdict(self.aggregate_accuracy),
            "false_entailment_rate": asdict(self.false_entailment_rate),
            "patterns": [asdict(p) for p in self.patterns],
            "gate": self.gate.to_dict(),
            "case_set_sha256": self.case_set_sha256,
            "predictions_sha256": self.predictions_sha256,
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=True)

    def to_markdown(self) -> str:
        def rate(r: RateEstimate) -> str:
            if r.value is None:
                return "n/a (0 of 0)"
            return f"{r.value:.3f} [{r.ci_low:.3f}, {r.ci_high:.3f}] ({r.successes}/{r.trials})"

        def ok(b: bool) -> str:
            return "pass" if b else "FAIL"

        g = self.gate
        lines = [
            "| Pattern | Cases | Abstentions | Accuracy [95% CI] | False-entailment rate [95% CI] |",
            "|---|---:|---:|---|---|",
        ]
        for p in self.patterns:
            lines.append(f"| {p.pattern} | {p.n_cases} | {p.n_abstentions} | {rate(p.aggregate_accuracy)} | "
                         f"{rate(p.false_entailment_rate)} |")
        lines.append(f"| **all** | {self.n_cases} | {self.n_abstentions} | {rate(self.aggregate_accuracy)} | "
                     f"{rate(self.false_entailment_rate)} |")
        floor = "off" if g.minimum_aggregate_accuracy is None else f"≥ {g.minimum_aggregate_accuracy:.3f}"
        lines += [
            "",
            "| Gate | Threshold | Decision |",
            "|---|---|---|",
            (f"| False-entailment ceiling (certified: 95 % upper bound < ceiling) | "
             f"< {g.max_false_entailment_rate:.3f} | {ok(g.false_entailment_gate_passed)} |" if g.certify else
             f"| False-entailment ceiling | ≤ {g.max_false_entailment_rate:.3f} | "
             f"{ok(g.false_entailment_gate_passed)} |"),
            f"| Accuracy floor | {floor} | {ok(g.accuracy_gate_passed)} |",
            f"| Combined | both | {ok(g.passed)} |",
            "",
            (f"False-entailment rate {rate(self.false_entailment_rate)}; one-sided 95% upper bound "
             f"{g.false_entailment_upper_bound:.3f}." if g.false_entailment_upper_bound is not None else
             "False-entailment rate undefined (no non-entailing case)."),
            "",
            f"Intervals: exact Clopper-Pearson, {self.confidence_level:.0%}. Schema: `{self.schema_version}`.",
            f"Case set sha256: `{self.case_set_sha256}`. Predictions sha256: `{self.predictions_sha256}`.",
        ]
        return "\n".join(lines) + "\n"

    def _repr_markdown_(self) -> str:
        return self.to_markdown()


# ---------------------------------------------------------------------------------------------
# Predictions


def normalise_label(value: Any, position: int) -> str | None:
    """A prediction → one of :data:`LABELS` or ``None`` (abstention). Case and surrounding space
    are ignored; anything else raises (without echoing the value)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise NliNegationInputError(f"prediction at position {position} is not a string label or None")
    v = value.strip().lower()
    if v == ABSTENTION:
        return None
    if v not in LABELS:
        raise NliNegationInputError(
            f"prediction at position {position} is not a known label "
            f"(expected one of {', '.join(LABELS)}, '{ABSTENTION}' or None)")
    return v


def _calls_with_case(fn: Callable) -> bool:
    """True when ``fn`` takes exactly one required positional argument (a case); otherwise it is
    called as ``fn(premise, hypothesis)``."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return False
    required = [p for p in sig.parameters.values()
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty]
    has_var = any(p.kind == p.VAR_POSITIONAL for p in sig.parameters.values())
    return len(required) == 1 and not has_var


def _run_predictor(predictor, cases: tuple[NliNegationCase, ...]) -> list:
    batch = getattr(predictor, "predict_batch", None)
    if callable(batch):
        out = _value_free(lambda: batch([c.premise for c in cases], [c.hypothesis for c in cases]),
                          f"the batch of {len(cases)} cases")
        if isinstance(out, (str, bytes)) or not hasattr(out, "__iter__"):
            raise NliNegationInputError("the predictor's batch output is not a list of labels")
        out = list(out)
        if len(out) != len(cases):
            raise NliNegationInputError(
                f"the predictor's batch returned {len(out)} labels for {len(cases)} cases")
        return out
    if not callable(predictor):
        raise NliNegationInputError("predictor must be callable (premise, hypothesis) or (case)")
    with_case = _calls_with_case(predictor)
    out = []
    for i, c in enumerate(cases, 1):
        out.append(_value_free(lambda: predictor(c) if with_case else predictor(c.premise, c.hypothesis),
                               f"the case at position {i}"))
    return out


def _value_free(call, where: str):
    """``call()``; an error from it that is not the atlas's own (those are value-free already) becomes one
    :class:`NliNegationPredictorError` naming only the error's type and ``where``: its message may quote case
    text. Raised outside the handler, so neither ``__cause__`` nor ``__context__`` keeps that text."""
    try:
        return call()
    except NliNegationError:
        raise
    except Exception as exc:
        failed = type(exc).__name__
    raise NliNegationPredictorError(f"the predictor raised {failed} on {where} "
                                    "(message withheld: it may quote case text)") from None


def _predictions_by_id_or_position(predictions):
    """Predictions as a :class:`Mapping` (matched by case id) or a plain sequence (case order).

    A pandas Series is mapping-like: it is read by its index (case ids), never by position, and its index
    must be unique; a DataFrame, a numpy array of more than one dimension or a set (no order) is ambiguous
    and refused."""
    import numpy as np

    mod = type(predictions).__module__ or ""
    if mod.startswith("pandas"):
        import pandas as pd

        if isinstance(predictions, pd.Series):
            if not predictions.index.is_unique:
                raise NliNegationInputError("predictions: the Series index (case ids) has repeated entries")
            return {k: (None if v is None or (isinstance(v, float) and v != v) else v)
                    for k, v in predictions.items()}
        raise NliNegationInputError(
            f"predictions: a {type(predictions).__name__} is ambiguous; give a Series indexed by case id, a "
            "dict {case id: label} or a list in case order")
    if isinstance(predictions, np.ndarray):
        if predictions.ndim != 1:
            raise NliNegationInputError(f"predictions: expected a 1-d array, got {predictions.ndim} dimensions")
        return [None if v is None else (str(v) if isinstance(v, np.str_) else v) for v in predictions.tolist()]
    if isinstance(predictions, (set, frozenset)) or type(predictions).__name__ in ("dict_keys", "dict_values"):
        raise NliNegationInputError(
            f"predictions: a {type(predictions).__name__} has no fixed case order; give a list in case order or "
            "a mapping by case id")
    return predictions


def collect_predictions(cases=None, *, predictions=None, predictor=None) -> list[str | None]:
    """Resolve the prediction source into one normalised label (or ``None``) per case, case order.

    Exactly one of ``predictions`` (a plain sequence in case order, or a mapping keyed by case id whose
    keys equal the case ids; a pandas Series counts as a mapping by its index, see
    :func:`_predictions_by_id_or_position`) and ``predictor`` (a callable on ``(premise, hypothesis)`` or on one
    case; an object with ``predict_batch(premises, hypotheses)`` is called once) must be given.
    """
    cases = validate_cases(default_nli_negation_cases() if cases is None else cases)
    if (predictions is None) == (predictor is None):
        raise NliNegationInputError("give exactly one of predictions= and predictor=")
    if predictor is None:
        predictions = _predictions_by_id_or_position(predictions)
    if predictor is not None:
        raw = _run_predictor(predictor, cases)
    elif isinstance(predictions, Mapping):
        ids = [c.case_id for c in cases]
        keys = set(predictions.keys())
        missing = sum(1 for i in ids if i not in keys)
        extra = len(keys - set(ids))
        if missing or extra:
            raise NliNegationInputError(
                f"prediction mapping keys do not equal the case ids: {missing} case(s) without a "
                f"prediction, {extra} key(s) that are not case ids")
        raw = [predictions[i] for i in ids]
    elif isinstance(predictions, (str, bytes)) or not isinstance(predictions, Iterable):
        raise NliNegationInputError("predictions must be an iterable in case order or a mapping by case id")
    else:
        raw = list(predictions)
        if len(raw) != len(cases):
            raise NliNegationInputError(f"got {len(raw)} predictions for {len(cases)} cases")
    return [normalise_label(v, i) for i, v in enumerate(raw, 1)]


def predictions_sha256(labels: list[str | None], case_digest: str) -> str:
    """sha256 of the canonical JSON ``{"case_set_sha256": ..., "labels": [...]}`` (None = abstention)."""
    text = json.dumps({"case_set_sha256": case_digest, "labels": list(labels)}, sort_keys=True,
                      separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# ---------------------------------------------------------------------------------------------
# Scoring and gates


def _check_threshold(name: str, v, allow_none: bool) -> float | None:
    if v is None and allow_none:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not 0.0 <= v <= 1.0:
        raise NliNegationInputError(f"parameter {name} must be a number in [0, 1]"
                                    + (" or None" if allow_none else ""))
    return float(v)


def decide_gates(accuracy: float, false_entailment_rate: float | None, upper_bound: float | None = None,
                 parameters: dict | None = None, *, certify: bool = False) -> GateDecision:
    """The gates (see the module docstring) decided on an accuracy and a false-entailment rate (None: undefined,
    the ceiling fails) and, under ``certify``, the rate's one-sided upper bound, at the thresholds ``parameters``
    names (``max_false_entailment_rate``, ``minimum_aggregate_accuracy``; the defaults where absent): the one rule
    the report and a result cell's gate metrics (:func:`.counting.gates`) both decide by."""
    parameters = parameters or {}
    max_fe = _check_threshold("max_false_entailment_rate",
                              parameters.get("max_false_entailment_rate", DEFAULT_MAX_FALSE_ENTAILMENT_RATE), False)
    min_acc = _check_threshold("minimum_aggregate_accuracy",
                               parameters.get("minimum_aggregate_accuracy", DEFAULT_MINIMUM_AGGREGATE_ACCURACY), True)
    if certify:
        fe_ok = upper_bound is not None and upper_bound < max_fe
    else:
        fe_ok = false_entailment_rate is not None and false_entailment_rate <= max_fe
    acc_ok = True if min_acc is None else accuracy >= min_acc
    return GateDecision(max_fe, min_acc, fe_ok, acc_ok, fe_ok and acc_ok, bool(certify), upper_bound)
