"""Error classes of the NLI negation challenge.

Every message names the problem and, where there is one, the position of the offending row or
prediction (1-based) — never a premise, hypothesis, case id, label value or predictor output. The
challenge's inputs may be local, sensitive strings; its errors end up in logs and notebooks.
"""
from __future__ import annotations


class NliNegationError(Exception):
    """Base class of every error this card raises on purpose."""


class NliNegationInputError(NliNegationError, ValueError):
    """Bad cases, fixture rows, predictions or parameters (fail closed, value-free message)."""


class NliNegationPredictorError(NliNegationError, RuntimeError):
    """The predictor raised: re-raised with the exception type and case position only (the original
    message and traceback chain are dropped because they may quote the case text)."""
