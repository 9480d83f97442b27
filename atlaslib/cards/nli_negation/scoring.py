"""``atlas score nli_negation``: the challenge's report on a case set and a predictions file, as JSON (or
Markdown), without a result cell — for a team that keeps its cases as openmed fixture files.

    atlas score nli_negation (--cases FIXTURE | --version V) --predictions FILE
                             [--max-false-entailment-rate X] [--minimum-aggregate-accuracy X|off]
                             [--certify] [--markdown]

``--cases`` reads an openmed fixture file (``.json`` / ``.jsonl``, :func:`.exchange.load_openmed_fixtures`);
``--version`` takes a split version's cases. The predictions file is what ``atlas score --card`` reads
(JSONL ``{"item_id": <case id>, "label": ...}`` or CSV ``item_id,label``; ``abstention`` abstains), one row
per case. Bad input gives one line naming the file and the row, exit 2; the report, like every report of the
challenge, holds no case text, id or label.
"""
from __future__ import annotations

import argparse
import sys

PROG = "atlas score nli_negation"
#: what ``atlas score nli_negation`` (:func:`main`, the package's ``score_command``) gives
SCORE_COMMAND = "the challenge's report"


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def _floor(value: str):
    if value.strip().lower() in ("off", "none"):
        return None
    try:
        return float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1] or 'off', got {value!r}") from None


def parser() -> argparse.ArgumentParser:
    from .challenge import DEFAULT_MAX_FALSE_ENTAILMENT_RATE, DEFAULT_MINIMUM_AGGREGATE_ACCURACY

    p = _Parser(prog=PROG, description="The NLI negation challenge's report on a case set and predictions")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--cases", help="an openmed fixture file (.json or .jsonl)")
    which.add_argument("--version", help="a split version of the card (its cases)")
    p.add_argument("--predictions", required=True, help="JSONL or CSV: item_id (the case id), label")
    p.add_argument("--max-false-entailment-rate", type=float, default=DEFAULT_MAX_FALSE_ENTAILMENT_RATE)
    p.add_argument("--minimum-aggregate-accuracy", type=_floor, default=DEFAULT_MINIMUM_AGGREGATE_ACCURACY,
                   help=f"the accuracy floor (default {DEFAULT_MINIMUM_AGGREGATE_ACCURACY}; 'off' switches it off)")
    p.add_argument("--certify", action="store_true",
                   help="the safety gate compares the one-sided 95 %% upper bound with the ceiling")
    p.add_argument("--markdown", action="store_true", help="print the Markdown report instead of JSON")
    return p


def read_labels(path, cases) -> list:
    """One label per case (case order) from a predictions file; one error naming the file and the row."""
    from pathlib import Path

    from ...predfiles import read_predictions
    from .challenge import normalise_label
    from .errors import NliNegationInputError

    path = Path(path)
    if not path.exists():
        raise NliNegationInputError(f"{path}: no such file")
    preds = read_predictions(path, "label", who="nli_negation")
    known, seen = {c.case_id for c in cases}, {}
    for p in preds:
        where = f"{path}, row {p.row}"
        if p.item_id in seen:
            raise NliNegationInputError(f"{where}: the case id of row {seen[p.item_id]} again")
        if p.item_id not in known:
            raise NliNegationInputError(f"{where}: not a case id of the case set")
        seen[p.item_id] = p.row
        try:
            normalise_label(p.label, p.row)
        except NliNegationInputError:
            raise NliNegationInputError(f"{where}: the label is not entailment, neutral, contradiction or "
                                        "abstention") from None
    missing = len(known) - len(seen)
    if missing:
        raise NliNegationInputError(f"{path}: {missing} case(s) have no prediction (one row per case)")
    labels = {p.item_id: p.label for p in preds}
    return [labels[c.case_id] for c in cases]


def main(argv=None) -> int:
    from ...predfiles import PredictionsError
    from .card import version_cases
    from .report import run_nli_negation_challenge
    from .errors import NliNegationInputError
    from .exchange import load_openmed_fixtures

    args = parser().parse_args(argv)
    try:
        cases = load_openmed_fixtures(args.cases) if args.cases else version_cases(args.version)
        labels = read_labels(args.predictions, cases)
        report = run_nli_negation_challenge(labels, cases=cases,
                                            max_false_entailment_rate=args.max_false_entailment_rate,
                                            minimum_aggregate_accuracy=args.minimum_aggregate_accuracy,
                                            certify=args.certify)
    except (NliNegationInputError, PredictionsError) as exc:
        print(f"{PROG}: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    print(report.to_markdown() if args.markdown else report.to_json())
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
