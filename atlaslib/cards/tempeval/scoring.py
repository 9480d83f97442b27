"""Clinical TempEval scoring through the official scorer, anaforatools 1.2.0 (``anafora.evaluate``).

Nothing here re-implements a match rule: :func:`score_directories` calls ``anafora.evaluate.score_dirs``
(the function behind ``python -m anafora.evaluate``) and arranges its counts into one table per run, in
the paper's layout:

============================  ======================================  ===========================
row                           scorer view                             what counts as an item
============================  ======================================  ===========================
``timex3_span``               ``TIMEX3:<span>``                       (begin, end)
``timex3_class``              ``TIMEX3:Class``                        (begin, end, Class)
``event_span``                ``EVENT:<span>``                        (begin, end)
``event_modality``            ``EVENT:ContextualModality``            (begin, end, value)
``event_degree``              ``EVENT:Degree``                        (begin, end, value)
``event_polarity``            ``EVENT:Polarity``                      (begin, end, value)
``event_type``                ``EVENT:Type``                          (begin, end, value)
``doctimerel``                ``EVENT:DocTimeRel``                    (begin, end, value)
``contains``                  ``TLINK:Type:CONTAINS``                 ((b1, e1), (b2, e2))
``contains_closure``          same, ``TemporalClosureScores``         closure-verified pairs
============================  ======================================  ===========================

P = correct / predicted, R = correct / reference, F1 = 2PR / (P + R) (the scorer's own methods, with its
conventions: P = 1 when nothing is predicted, R = 1 when nothing is in the reference). For the attribute
rows A = attribute F1 / span F1 of the same entity type (the paper's accuracy on the items a system found;
None when the span F1 is 0). With closure, P = |S ∩ closure(H)| / |S| and R = |closure(S) ∩ H| / |H|.

The anaforatools 1.2.0 wheel also installs a stray ``site-packages/venv`` tree (no ``__init__.py``: the standard
library's ``venv`` always wins over it); :func:`check_import_shadowing` (on import) refuses an interpreter where it
would not, and an ``anafora`` that is not anaforatools'.
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import glob
import importlib.util
import json
import logging
import os
import re
import sys
import sysconfig
from importlib import metadata
from pathlib import Path

from ...metrics.engine import ratio
from .anafora_io import TEMPORAL_FILE_RE, AnaforaError, parse_once, parse_root, read_document

#: what ``atlas score tempeval`` (:func:`main`, the package's ``score_command``) gives
SCORE_COMMAND = "official scorer"


def check_import_shadowing() -> dict:
    """Where ``venv`` and ``anafora`` resolve; raises ImportError if ``venv`` is not the stdlib package or
    ``anafora`` is not the one anaforatools installed."""
    stdlib = Path(sysconfig.get_paths()["stdlib"]).resolve()
    spec = importlib.util.find_spec("venv")
    origin = Path(spec.origin).resolve() if spec is not None and spec.origin else None
    if origin is None or stdlib not in origin.parents:
        raise ImportError(
            f"'import venv' resolves to {origin or 'a namespace package'} "
            f"({list(spec.submodule_search_locations or []) if spec else 'not found'}), not the standard library "
            f"under {stdlib}: the stray venv/ folder that the anaforatools 1.2.0 wheel leaves in site-packages is "
            f"shadowing it. Use a Python whose standard library has venv, or delete site-packages/venv.")
    dist = metadata.distribution("anaforatools")
    if "anafora/__init__.py" not in {str(f) for f in (dist.files or [])}:
        raise ImportError("anaforatools' installed files hold no anafora/__init__.py: module 'anafora' is not the "
                          "one it installs")
    where = Path(dist.locate_file("anafora/__init__.py")).resolve()
    aspec = importlib.util.find_spec("anafora")
    if aspec is None or Path(aspec.origin).resolve() != where:
        raise ImportError(f"'import anafora' resolves to {aspec.origin if aspec else 'nothing'}, "
                          f"not anaforatools' {where}")
    return {"venv": str(origin), "anafora": str(where), "anaforatools": metadata.version("anaforatools")}


IMPORTS = check_import_shadowing()

import anafora  # noqa: E402  (after the guard)
import anafora.evaluate as _evaluate  # noqa: E402
import anafora.select as _select  # noqa: E402


class _MemoSelect(_select.Select):
    """anaforatools' ``Select`` (which types, properties and values a view includes) with its answers
    memoised: the same answers, each worked out once per scoring pass instead of millions of times (its
    set expansions were two thirds of a THYME run's scoring time). A value that cannot be hashed is
    answered by ``Select`` itself."""

    def __init__(self, include=None, exclude=None):
        super().__init__(include, exclude)
        self._called, self._excluded = {}, {}

    def __call__(self, type_name, prop_name=None, prop_value=None):
        return self._memo(self._called, super().__call__, type_name, prop_name, prop_value)

    def is_excluded(self, type_name, prop_name=None, prop_value=None):
        return self._memo(self._excluded, super().is_excluded, type_name, prop_name, prop_value)

    @staticmethod
    def _memo(memo, fn, *key):
        try:
            return memo[key]
        except KeyError:
            memo[key] = out = fn(*key)
            return out
        except TypeError:  # an unhashable value
            return fn(*key)


@contextlib.contextmanager
def _memo_select():
    """``anafora.evaluate.score_data`` builds its ``Select`` as ``anafora.select.Select``: inside the block
    it gets :class:`_MemoSelect` (restored after)."""
    original = _select.Select
    _select.Select = _MemoSelect
    try:
        yield
    finally:
        _select.Select = original

#: row name -> (scorer view, entity type whose span row gives A, label in the paper's tables)
ROWS = {
    "timex3_span": (("TIMEX3", "<span>"), None, "TIMEX3 span"),
    "timex3_class": (("TIMEX3", "Class"), "timex3_span", "TIMEX3 span + class"),
    "event_span": (("EVENT", "<span>"), None, "EVENT span"),
    "event_modality": (("EVENT", "ContextualModality"), "event_span", "EVENT span + modality"),
    "event_degree": (("EVENT", "Degree"), "event_span", "EVENT span + degree"),
    "event_polarity": (("EVENT", "Polarity"), "event_span", "EVENT span + polarity"),
    "event_type": (("EVENT", "Type"), "event_span", "EVENT span + type"),
    "doctimerel": (("EVENT", "DocTimeRel"), "event_span", "DOCTIMEREL"),
    "contains": (("TLINK", "Type", "CONTAINS"), None, "CONTAINS"),
}
CLOSURE_ROW = ("contains_closure", ("TLINK", "Type", "CONTAINS"), "CONTAINS (closure)")


class ScoringError(ValueError):
    """Scorer input is missing or malformed."""


def _check_regex(xml_name_regex: str):
    try:
        return re.compile(xml_name_regex)
    except re.error as exc:
        raise ScoringError(f"--xml-name-regex {xml_name_regex!r} is not a valid regular expression "
                           f"({exc.msg} at position {exc.pos})") from None


def _check_dir(path, what: str, xml_name_regex: str) -> Path:
    """The folder, after reading every matching file as Anafora XML (root <data>, each entity's span
    '<start>,<end>', every relation's Source/Target an id of the same file): the first fault raises
    :class:`ScoringError` naming the file and the element."""
    path = Path(path)
    if not path.is_dir():
        raise ScoringError(f"{what} directory {path} does not exist (expected <dir>/<doc>/<doc>.*.xml)")
    regex = _check_regex(xml_name_regex)
    n = 0
    for f in sorted(path.rglob("*.xml")):
        if not regex.search(f.name):
            continue
        n += 1
        try:
            read_document(f, strict_name=False)
        except AnaforaError as exc:
            raise ScoringError(f"{exc} ({what} file)") from None
    if what == "reference" and n == 0:
        raise ScoringError(f"reference directory {path} has no files matching {xml_name_regex!r}")
    return path


def input_warnings(reference_dir, predicted_dir, xml_name_regex: str = TEMPORAL_FILE_RE) -> list[str]:
    """What the scorer would pass over in silence: no predicted file at all, predicted documents that are
    not in the reference (the scorer ignores them), reference documents without a predicted file (scored
    as predicting nothing). One line each; an empty list when the two folders match."""
    regex = _check_regex(xml_name_regex)

    def docs(root: Path) -> set[str]:
        return {str(f.parent.relative_to(root)) for f in root.rglob("*.xml") if regex.search(f.name)}

    ref, pred = docs(Path(reference_dir)), docs(Path(predicted_dir))
    if not pred:
        return [f"predicted directory {predicted_dir} has no files matching {xml_name_regex!r}: every score below "
                "is that of a system that predicts nothing"]
    return [f"{len(odd)} {what}: {', '.join(odd[:5])}{' ...' if len(odd) > 5 else ''}"
            for odd, what in ((sorted(pred - ref), "predicted document(s) are not in the reference and are not scored"),
                              (sorted(ref - pred), "reference document(s) have no predicted file and count as "
                                                   "predicting nothing")) if odd]


def _merge(named_scores, scores_type):
    """The documents' ``{view: scores}`` summed, as the scorer's command line sums them."""
    total = collections.defaultdict(scores_type)
    for named in named_scores:
        for view, scores in named.items():
            total[view].update(scores)
    return total


def _counts(s) -> list[int]:
    c = s.correct
    return [s.reference, s.predicted, *(c if isinstance(c, tuple) else (c, c))]


def _row(name, label, view, s) -> dict:
    correct = s.correct
    row = {"row": name, "label": label, "view": ":".join(view), "reference": s.reference,
           "predicted": s.predicted}
    if isinstance(correct, tuple):
        row["correct"] = None
        row["precision_correct"], row["recall_correct"] = correct
    else:
        row["correct"] = correct
    row.update(precision=s.precision(), recall=s.recall(), f1=s.f1(), A=None)
    return row


def _score_dirs(reference_dir: Path, predicted_dir: Path, xml_name_regex: str, passes: list):
    """``anafora.evaluate.score_dirs`` run for several (include, scores type) passes at once, each file
    parsed once (:func:`.anafora_io.parse_root`, shared with the reader inside ``parse_once``).

    The loop is the scorer's own, step for step: documents from ``anafora.walk`` over the reference, the
    first matching reference file, a reference with a self-referential annotation skipped, the predicted file
    ``<doc>*.xml`` of the same sub-folder (none, or a self-referential one, scores as empty data), and
    ``anafora.evaluate.score_data`` for the counts. Yields ``(doc, [named scores per pass])``. The scorer's
    debug log of each error's text is left out (it needs the note text, which THYME does not publish)."""
    for sub_dir, text_name, xml_names in anafora.walk(str(reference_dir), xml_name_regex):
        reference = anafora.AnaforaData(parse_root(os.path.join(str(reference_dir), sub_dir, xml_names[0])))
        if reference.annotations.find_self_referential() is not None:
            continue
        found = [f for f in glob.glob(os.path.join(str(predicted_dir), sub_dir, text_name + "*.xml"))
                 if re.search(xml_name_regex, f) is not None]
        predicted = anafora.AnaforaData(parse_root(found[0]) if found else None)
        if predicted.annotations.find_self_referential() is not None:
            predicted = anafora.AnaforaData()
        yield text_name, [_evaluate.score_data(reference, predicted, include, scores_type=kind)
                          for include, kind in passes]


def score_directories(reference_dir, predicted_dir, closure: bool = False, *,
                      xml_name_regex: str = TEMPORAL_FILE_RE, per_document: bool = False) -> dict:
    """Score ``predicted_dir`` against ``reference_dir`` (both ``<dir>/<doc>/<doc>.*.xml``) with
    anaforatools; returns ``{"rows": [...], "n_documents", "closure", "scorer"}``, one row per sub-task
    (see module docstring). ``closure=True`` adds the ``contains_closure`` row. ``per_document=True`` adds
    ``"per_document": {"doc_ids": [...], row: [[reference, predicted, precision_correct, recall_correct],
    ...]}`` (the scorer's per-document counts; without closure both correct counts are the same), which
    sum to the table's counts and are the card's per-document units (:func:`.counting.counts`)."""
    with parse_once(), _memo_select():  # each file read once; the scorer's selections worked out once
        return _score_directories(reference_dir, predicted_dir, closure, xml_name_regex, per_document)


def _score_directories(reference_dir, predicted_dir, closure, xml_name_regex, per_document) -> dict:
    ref = _check_dir(reference_dir, "reference", xml_name_regex)
    pred = _check_dir(predicted_dir, "predicted", xml_name_regex)
    passes = [({v for v, _, _ in ROWS.values()}, _evaluate.Scores)]
    passes += [({CLOSURE_ROW[1]}, _evaluate.TemporalClosureScores)] if closure else []
    logger = logging.getLogger()
    level = logger.level
    logger.setLevel(logging.ERROR)  # the scorer's closure warns of each relation it cannot close
    try:
        scored = list(_score_dirs(ref, pred, xml_name_regex, passes))   # (doc, [{view: scores} per pass])
    finally:
        logger.setLevel(level)
    total = _merge((named[0] for _, named in scored), _evaluate.Scores)
    rows = {name: _row(name, label, view, total.get(view, _evaluate.Scores()))
            for name, (view, _, label) in ROWS.items()}
    if closure:
        name, view, label = CLOSURE_ROW
        closed = _merge((named[1] for _, named in scored), _evaluate.TemporalClosureScores)
        rows[name] = _row(name, label, view, closed.get(view, _evaluate.TemporalClosureScores()))
    out = {"rows": list(rows.values()), "n_documents": len(scored), "closure": bool(closure),
           "scorer": f"anaforatools {IMPORTS['anaforatools']} (anafora.evaluate.score_dirs)",
           "xml_name_regex": xml_name_regex}
    if per_document:
        per = {"doc_ids": [name for name, _ in scored]}
        for name, (view, _, _) in ROWS.items():
            per[name] = [_counts(named[0].get(view, _evaluate.Scores())) for _, named in scored]
        if closure:
            per[CLOSURE_ROW[0]] = [_counts(named[1].get(CLOSURE_ROW[1], _evaluate.TemporalClosureScores()))
                                   for _, named in scored]
        out["per_document"] = per
    return with_accuracy(out)


def with_accuracy(table: dict) -> dict:
    """``table`` (a copy; the scorer's, :func:`score_directories`) with each attribute row's A: its F1 divided by
    its entity type's span F1 (:func:`~atlaslib.metrics.engine.ratio`: None where the span F1 is 0). Scoring code
    makes it, on every path (the card's ``scored_extra``): a re-score of a stored table makes it again."""
    import copy

    table = copy.deepcopy(table)
    rows = {r["row"]: r for r in table["rows"]}
    for name, (_, span_row, _) in ROWS.items():
        if span_row is not None and name in rows:
            a = ratio(rows[name]["f1"], rows[span_row]["f1"])   # undefined (None in the table) when the span F1 is 0
            rows[name]["A"] = None if a != a else a
    return table


def f1_from_counts(reference, predicted, precision_correct, recall_correct):
    """The scorer's P, R, F1 from summed counts (P = 1 when nothing is predicted, R = 1 when the
    reference is empty, F1 = 0 when P + R = 0), vectorised over numpy arrays. The card declares this
    convention as a departure from the atlas's zero-division rule (:data:`.card.DEPARTURES`)."""
    import numpy as np

    ref, pred = np.asarray(reference, float), np.asarray(predicted, float)
    pc, rc = np.asarray(precision_correct, float), np.asarray(recall_correct, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(pred == 0, 1.0, pc / np.where(pred == 0, 1, pred))
        r = np.where(ref == 0, 1.0, rc / np.where(ref == 0, 1, ref))
        f = np.where(p + r == 0, 0.0, 2 * p * r / np.where(p + r == 0, 1, p + r))
    return p, r, f


def table_frame(table: dict):
    """The table as a DataFrame in the paper's layout: one line per sub-task, columns P, R, F1, A."""
    import pandas as pd

    df = pd.DataFrame(table["rows"]).set_index("label")
    return df[["reference", "predicted", "precision", "recall", "f1", "A"]].rename(
        columns={"precision": "P", "recall": "R", "f1": "F1"})


def main(argv=None) -> int:
    """``atlas score tempeval -r REF -p PRED [--closure] [--strict]``: print the table as JSON; bad input is
    one line on stderr and exit 2; an empty prediction set or unmatched documents are a warning (exit 2 with
    ``--strict``)."""
    class Parser(argparse.ArgumentParser):
        def error(self, message):  # one line, no usage block
            self.exit(2, f"{self.prog}: error: {message}\n")

    parser = Parser(prog="atlas score tempeval", description=(
        "Score Anafora XML predictions against a reference with the official Clinical TempEval scorer "
        "(anaforatools) and print one JSON table: P/R/F1 (and A) per sub-task."))
    parser.add_argument("-r", "--reference", required=True, help="reference root: <dir>/<doc>/<doc>.*.xml")
    parser.add_argument("-p", "--predicted", required=True, help="predicted root, same layout")
    parser.add_argument("--closure", action="store_true", help="add CONTAINS scored with temporal closure")
    parser.add_argument("-x", "--xml-name-regex", default=TEMPORAL_FILE_RE,
                        help="which XML files to score (default: %(default)r)")
    parser.add_argument("--strict", action="store_true",
                        help="fail (exit 2) instead of warning when no prediction is found or documents do "
                             "not match between the two folders")
    args = parser.parse_args(argv)
    try:
        table = score_directories(args.reference, args.predicted, closure=args.closure,
                                  xml_name_regex=args.xml_name_regex)
        warned = input_warnings(args.reference, args.predicted, args.xml_name_regex)
    except (ScoringError, AnaforaError) as exc:
        print(f"atlas score tempeval: error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # the scorer itself failed on input the checks above let through
        print(f"atlas score tempeval: error: the scorer failed on these folders ({type(exc).__name__}: "
              f"{str(exc).splitlines()[0] if str(exc) else ''})", file=sys.stderr)
        return 2
    for line in warned:
        print(f"atlas score tempeval: {'error' if args.strict else 'warning'}: {line}", file=sys.stderr)
    if warned and args.strict:
        return 2
    print(json.dumps(table, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())


CLOSURE_TOY_PUBLISHED = {"precision": 6 / 7, "recall": 4 / 9}


def closure_toy_dirs():
    """(reference, predicted) folders of anaforatools' own temporal-closure test case as Anafora XML (its test
    expects closure precision 6/7 and recall 4/9: :data:`CLOSURE_TOY_PUBLISHED`)."""
    root = Path(__file__).resolve().parent / "closure_toy"
    return root / "reference", root / "predicted"


def closure_toy_scores() -> dict:
    """Closure P/R/F1 of the toy case through this wrapper, as ``python -m anafora.evaluate --temporal-closure -i
    TLINK:Type`` computes it."""
    ref, pred = closure_toy_dirs()
    view = ("TLINK", "Type")
    total = _merge((named for _, named in _evaluate.score_dirs(str(ref), str(pred), include={view},
                                                                scores_type=_evaluate.TemporalClosureScores)),
                   _evaluate.TemporalClosureScores)
    return _row("TLINK:Type", "TLINK:Type", view, total[view])
