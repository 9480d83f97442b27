"""openmed's fixture format, both ways: atlas cases written as a fixture file that openmed 3.1.0's
``load_nli_negation_fixtures`` loads unchanged, and openmed fixture files read into atlas cases.

No openmed import: the rules of ``openmed.eval.nli_negation_challenge`` (3.1.0) are restated here as constants,
and ``tests/cards/test_nli_openmed.py`` holds them against the installed openmed. Where the atlas's data model
differs from openmed's (negation depth 0, section titles, case ids, the safety flags, the limits, a byte-order
mark) and how a case crosses between the two is declared in the card's departures (``CARD.departures``, the card
page's table). Reading follows openmed's loader: its layouts (``.jsonl``; a JSON list, or an object with a
``cases`` list, else a ``fixtures`` list), field aliases, rows' ``metadata`` and label and pattern spellings.
Errors name the file and the row (1-based), never a value.
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .corpus import LABELS, PATTERNS, NliNegationCase, read_cases, validate_cases
from .errors import NliNegationInputError

#: The openmed release these rules restate (the tests compare them with the installed one).
OPENMED_VERSION = "3.1.0"
FIXTURE_SCHEMA_VERSION = 1           # openmed's NLI_NEGATION_FIXTURE_SCHEMA_VERSION
IDENTIFIER = re.compile(r"^[a-z0-9][a-z0-9_.:-]{0,63}$")   # openmed's rule for case ids and sections
MAX_IDENTIFIER_LENGTH = 64
MIN_DEPTH, MAX_DEPTH = 1, 4           # openmed: 1 <= negation_depth <= len(NEGATION_PATTERNS)
MAX_CASES = 256
MAX_TEXT_LENGTH = 2048
#: openmed's label aliases (lower-cased, inner white space collapsed); ``abstention`` is never a gold label.
LABEL_ALIASES = {"contradict": "contradiction", "contradicted": "contradiction", "contradiction": "contradiction",
                 "entail": "entailment", "entailed": "entailment", "entailment": "entailment",
                 "neutral": "neutral"}
FIXTURE_FILE = "openmed_fixtures.json"   # the name ``atlas export`` writes


def is_identifier(value: Any) -> bool:
    """True when ``value`` is already an openmed identifier (lower case, ``[a-z0-9_.:-]``, at most 64)."""
    return isinstance(value, str) and len(value) <= MAX_IDENTIFIER_LENGTH and bool(IDENTIFIER.fullmatch(value))


def section_identifier(title: str) -> str:
    """The openmed identifier of a section title: lower case, every run of other characters one ``_``,
    no ``_`` at either end, at most 64 characters (``"Past Medical History"`` -> ``past_medical_history``)."""
    if not isinstance(title, str):
        raise NliNegationInputError("a section title must be a string")
    ident = re.sub(r"[^a-z0-9_.:-]+", "_", title.strip().lower()).strip("_.:-")[:MAX_IDENTIFIER_LENGTH]
    ident = ident.rstrip("_")
    if not is_identifier(ident):
        raise NliNegationInputError("a section title has no letter or digit to make an identifier of")
    return ident


# ---------------------------------------------------------------------------------------------- writing

def to_openmed_row(case: NliNegationCase, position: int) -> dict:
    """One case as an openmed fixture row (the mapping: ``CARD.departures``); raises naming the case position
    when openmed could not load it."""
    w = f"case at position {position}"
    if not is_identifier(case.case_id):
        raise NliNegationInputError(
            f"{w}: its case id is not an openmed identifier ({IDENTIFIER.pattern}); give the case an id in that "
            "form to exchange it")
    for name in ("premise", "hypothesis"):
        if len(getattr(case, name)) > MAX_TEXT_LENGTH:
            raise NliNegationInputError(f"{w}: its {name} is longer than openmed's {MAX_TEXT_LENGTH} characters")
    d = case.negation_depth
    if d is not None and d > MAX_DEPTH:
        raise NliNegationInputError(f"{w}: negation depth {d} is above openmed's {MAX_DEPTH}")
    if case.pattern == "section_scoped" and case.section is None:
        raise NliNegationInputError(f"{w}: a section_scoped case needs a section to be read by openmed")
    row = {"case_id": case.case_id, "pattern": case.pattern, "premise": case.premise,
           "hypothesis": case.hypothesis, "gold_label": case.gold_label}
    if d is not None:
        row["negation_depth"] = max(d, MIN_DEPTH)
    if d == 0:
        row["affirmative_control"] = True          # depth 0 in the atlas: nothing negated
    if case.section is not None:
        row["section"] = section_identifier(case.section)
        if case.section != row["section"]:
            row["section_title"] = case.section
    row.update(synthetic=True, contains_real_phi=False, phi_free=True)
    return row


def openmed_fixture_document(cases, source: str) -> dict:
    """The fixture file's content: ``{"schema_version", "source", "synthetic", ..., "cases": [rows]}`` (openmed
    reads the ``cases`` list and ignores the rest)."""
    cases = validate_cases(cases)
    if len(cases) > MAX_CASES:
        raise NliNegationInputError(f"{len(cases)} cases: openmed loads at most {MAX_CASES}")
    return {"schema_version": FIXTURE_SCHEMA_VERSION, "source": source, "synthetic": True,
            "contains_real_phi": False, "phi_free": True,
            "cases": [to_openmed_row(c, i) for i, c in enumerate(cases, 1)]}


def write_openmed_fixtures(cases, path, source: str = "atlaslib") -> Path:
    """Write ``cases`` as an openmed fixture file (JSON) at ``path``; returns the path."""
    from ...results import atomic_write_text

    path = Path(path)
    atomic_write_text(path, json.dumps(openmed_fixture_document(cases, source), indent=1, ensure_ascii=False) + "\n")
    return path


# ---------------------------------------------------------------------------------------------- reading

def _first(row: Mapping, meta: Mapping, *keys: str) -> tuple[bool, Any]:
    """openmed's ``_first_present``: the first key present in the row, else in its metadata."""
    for source in (row, meta):
        for k in keys:
            if k in source:
                return True, source[k]
    return False, None


def _identifier(value: Any, what: str, where: str) -> str:
    if not isinstance(value, str):
        raise NliNegationInputError(f"{where}: {what} must be a string")
    v = value.strip().lower()
    if not is_identifier(v):
        raise NliNegationInputError(f"{where}: {what} is not an identifier ({IDENTIFIER.pattern}, compared "
                                    "lower-cased)")
    return v


def _text(value: Any, name: str, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise NliNegationInputError(f"{where}: field {name!r} must be a non-empty string")
    if len(value) > MAX_TEXT_LENGTH:
        raise NliNegationInputError(f"{where}: field {name!r} is longer than {MAX_TEXT_LENGTH} characters")
    return value


def from_openmed_row(row: Any, where: str) -> NliNegationCase:
    """One fixture row as an atlas case, by openmed's rules (and the atlas's marks, when present)."""
    if not isinstance(row, Mapping):
        raise NliNegationInputError(f"{where}: expected a JSON object")
    meta = row.get("metadata", {})
    meta = {} if meta is None else meta
    if not isinstance(meta, Mapping):
        raise NliNegationInputError(f"{where}: metadata must be an object")
    for flag, want in (("synthetic", True), ("contains_real_phi", False), ("phi_free", True)):
        present, v = _first(row, meta, flag)
        if v is not want:
            raise NliNegationInputError(f"{where}: {flag} must be {str(want).lower()}"
                                        + ("" if present else " (missing)"))
    case_id = _identifier(_first(row, meta, "case_id", "id")[1], "case id", where)
    pattern = _first(row, meta, "pattern", "category")[1]
    if not isinstance(pattern, str) or pattern.strip().lower().replace("-", "_") not in PATTERNS:
        raise NliNegationInputError(f"{where}: unknown pattern (expected one of {', '.join(PATTERNS)})")
    pattern = pattern.strip().lower().replace("-", "_")
    label = _first(row, meta, "gold_label", "expected_label", "label")[1]
    label = LABEL_ALIASES.get(" ".join(label.strip().lower().split())) if isinstance(label, str) else None
    if label is None:
        raise NliNegationInputError(f"{where}: unknown gold label (expected one of {', '.join(LABELS)})")
    premise, hypothesis = _text(row.get("premise"), "premise", where), _text(row.get("hypothesis"), "hypothesis", where)
    depth = row.get("negation_depth", MIN_DEPTH)
    if isinstance(depth, bool) or not isinstance(depth, int) or not MIN_DEPTH <= depth <= MAX_DEPTH:
        raise NliNegationInputError(f"{where}: negation_depth must be an integer from {MIN_DEPTH} to {MAX_DEPTH}")
    control = row.get("affirmative_control", False)
    if not isinstance(control, bool):
        raise NliNegationInputError(f"{where}: affirmative_control must be true or false")
    if control:
        if depth != MIN_DEPTH:
            raise NliNegationInputError(f"{where}: an affirmative control is written with negation_depth "
                                        f"{MIN_DEPTH}")
        depth = 0
    section = _first(row, meta, "section")[1]
    if section is not None:
        section = _identifier(section, "section", where)
    if (pattern == "section_scoped") != (section is not None):
        raise NliNegationInputError(f"{where}: a section is required on section_scoped cases and allowed on "
                                    "no other")
    title = row.get("section_title")
    if title is not None:
        if section is None or not isinstance(title, str) or not title.strip():
            raise NliNegationInputError(f"{where}: section_title must be a non-empty string beside a section")
        if section_identifier(title) != section:
            raise NliNegationInputError(f"{where}: section_title and section disagree")
        section = title
    return NliNegationCase(case_id, pattern, premise, hypothesis, label, depth, section)


def load_openmed_fixtures(path) -> tuple[NliNegationCase, ...]:
    """The cases of an openmed fixture file (``.json`` or ``.jsonl``), read by openmed 3.1.0's rules: the
    same cases, in file order, that ``openmed.eval.nli_negation_challenge.load_nli_negation_fixtures`` loads
    (case ids lower-cased as openmed does); an atlas-written file gives back the atlas's depths and section
    titles. A bad file raises :class:`NliNegationInputError` naming the file and the row."""
    return read_cases(Path(path), "an openmed fixture file (.json or .jsonl)", from_openmed_row,
                      ("cases", "fixtures"), MAX_CASES)
