"""Cases of the NLI negation challenge: the schema, the frozen built-in corpus, the fixture loader.

The built-in corpus (version ``builtin-v1``) is generated, not typed: premise templates × hypothesis
forms × clinical findings (× section pairs), with every gold label fixed by the construction. It is
synthetic and PHI-free by construction — the only words that vary are generic finding names and
standard section headers; there are no names, dates, places or identifiers of people.

Patterns and their labels (``x`` is the finding the premise talks about, ``y`` another finding):

``simple`` (negation depth 0 or 1)
    A direct negation ("The patient denies x.", "There is no evidence of x.", "x is not present.",
    "The patient was negative for x.") or a plain assertion ("The patient reports x."). Hypotheses:
    "The patient has x." (contradiction after a negation, entailment after an assertion), "The patient
    has no x." (the reverse) and "The patient has y." (neutral: y is never mentioned).
``nested`` (depth 2)
    An evidential negation over a negated clause: "There is no indication that x is not present."
    Having no sign that x is absent is not a sign that x is present, so "The patient has x." is
    neutral, and so is "The patient has no x."; "x has been ruled out." is a contradiction (ruling
    out would be a sign of absence) and "x has not been excluded." is entailed.
``double`` (depth 2 or 3)
    Logical double (or triple) negatives: "x is not absent.", "The patient is not without x." entail
    "The patient has x." and contradict "The patient has no x."; a third negation ("It is not true
    that x is not absent.") flips both.
``section_scoped`` (depth 1)
    A two-section premise where x is negated in the first section and, in the second, either
    asserted or not mentioned (another finding is). Hypotheses speak of one named section: the
    negation holds in its own section and must not leak into the other, where x is entailed when
    asserted and neutral when not mentioned.

``negation_depth`` counts the negation operators stacked over the finding in the premise's negated
clause (0 when the premise negates nothing). ``section`` is the section the hypothesis speaks of
(``section_scoped`` only).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from functools import cache, lru_cache
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from .errors import NliNegationInputError

VERSION = "builtin-v1"
PATTERNS: tuple[str, ...] = ("simple", "nested", "double", "section_scoped")
LABELS: tuple[str, ...] = ("entailment", "neutral", "contradiction")
ABSTENTION = "abstention"

#: Gold labels each pattern admits by construction; every one is present in the built-in corpus.
ADMISSIBLE_LABELS: dict[str, tuple[str, ...]] = {
    "simple": ("entailment", "neutral", "contradiction"),
    "nested": ("entailment", "neutral", "contradiction"),
    "double": ("entailment", "contradiction"),
    "section_scoped": ("entailment", "neutral", "contradiction"),
}

#: Generic clinical findings (no person, place or date can appear in them).
FINDINGS: tuple[str, ...] = (
    "chest pain", "fever", "cough", "shortness of breath", "nausea", "headache",
    "abdominal pain", "pleural effusion", "leg swelling", "rash", "dizziness", "pneumonia",
)

#: Section headers, spelled as medspaCy's default sectionizer rules know them.
SECTIONS: tuple[str, ...] = ("History of Present Illness", "Past Medical History", "Physical Exam",
                             "Assessment")


@dataclass(frozen=True)
class NliNegationCase:
    """One premise–hypothesis pair with its gold label.

    ``negation_depth`` and ``section`` may be ``None`` for cases loaded from exchange files that do
    not carry them; the built-in corpus always sets the depth, and the section for
    ``section_scoped`` cases.
    """

    case_id: str
    pattern: str
    premise: str
    hypothesis: str
    gold_label: str
    negation_depth: int | None = None
    section: str | None = None
    synthetic: bool = True
    contains_real_phi: bool = False

    def __post_init__(self):
        _validate_case(self, "case")

    def to_dict(self) -> dict:
        return asdict(self)


def _validate_case(case: NliNegationCase, w: str) -> None:
    for name in ("case_id", "premise", "hypothesis"):
        v = getattr(case, name)
        if not isinstance(v, str) or not v.strip():
            raise NliNegationInputError(f"{w}: field {name!r} must be a non-empty string")
    if case.pattern not in PATTERNS:
        raise NliNegationInputError(f"{w}: unknown pattern (expected one of {', '.join(PATTERNS)})")
    if case.gold_label not in LABELS:
        raise NliNegationInputError(f"{w}: unknown gold label (expected one of {', '.join(LABELS)})")
    d = case.negation_depth
    if d is not None and (isinstance(d, bool) or not isinstance(d, int) or d < 0):
        raise NliNegationInputError(f"{w}: negation_depth must be a non-negative integer or absent")
    if case.section is not None:
        if case.pattern != "section_scoped":
            raise NliNegationInputError(f"{w}: a section is only allowed for the section_scoped pattern")
        if not isinstance(case.section, str) or not case.section.strip():
            raise NliNegationInputError(f"{w}: section must be a non-empty string or absent")
    if case.synthetic is not True:
        raise NliNegationInputError(f"{w}: only explicitly synthetic cases are accepted (synthetic=true)")
    if case.contains_real_phi is not False:
        raise NliNegationInputError(
            f"{w}: only cases explicitly free of real PHI are accepted (contains_real_phi=false)")


def validate_cases(cases) -> tuple[NliNegationCase, ...]:
    """Check a case set: non-empty, every item an :class:`NliNegationCase`, case ids unique."""
    if isinstance(cases, (str, bytes)) or not hasattr(cases, "__iter__"):
        raise NliNegationInputError("cases must be an iterable of NliNegationCase")
    out = tuple(cases)
    if not out:
        raise NliNegationInputError("the case set is empty")
    seen: dict[str, int] = {}
    for i, c in enumerate(out, 1):
        if not isinstance(c, NliNegationCase):
            raise NliNegationInputError(f"case at position {i} is not an NliNegationCase")
        if c.case_id in seen:
            raise NliNegationInputError(
                f"case at position {i} repeats the case id of the case at position {seen[c.case_id]}")
        seen[c.case_id] = i
    return out


def case_set_sha256(cases) -> str:
    """sha256 of the canonical JSON of the case list (every field, case order kept)."""
    return _case_set_sha256(validate_cases(cases))


@lru_cache(maxsize=16)
def _case_set_sha256(cases: tuple[NliNegationCase, ...]) -> str:  # cases are frozen: a case set hashes by value
    payload = [c.to_dict() for c in cases]
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# ---------------------------------------------------------------------------------------------
# The built-in corpus


def _cap(s: str) -> str:
    return s[0].upper() + s[1:]


# (template, negation depth); ``{x}`` lower-case finding, ``{X}`` capitalised.
_SIMPLE_PREMISES = (
    ("The patient denies {x}.", 1),
    ("There is no evidence of {x}.", 1),
    ("The patient has no {x}.", 1),
    ("{X} is not present.", 1),
    ("The patient was negative for {x}.", 1),
    ("The patient reports {x}.", 0),
    ("{X} is present.", 0),
)
# hypothesis forms: (template, label when the premise negates x, label when it asserts x)
_SIMPLE_HYPOTHESES = (
    ("The patient has {x}.", "contradiction", "entailment"),
    ("The patient has no {x}.", "entailment", "contradiction"),
    ("The patient has {y}.", "neutral", "neutral"),
)
_NESTED_PREMISES = (
    "There is no indication that {x} is not present.",
    "Nothing in the record suggests that {x} is absent.",
    "There is no evidence that the patient does not have {x}.",
    "No finding suggests that {x} is absent.",
)
_NESTED_HYPOTHESES = (
    ("The patient has {x}.", "neutral"),
    ("The patient has no {x}.", "neutral"),
    ("{X} has been ruled out.", "contradiction"),
    ("{X} has not been excluded.", "entailment"),
)
_DOUBLE_PREMISES = (
    ("{X} is not absent.", 2),
    ("The patient is not without {x}.", 2),
    ("It is not true that the patient has no {x}.", 2),
    ("It is not the case that {x} was not found.", 2),
    ("It is not true that {x} is not absent.", 3),
    ("It is not the case that the patient is not without {x}.", 3),
)
_DOUBLE_HYPOTHESES = (
    ("The patient has {x}.", "entailment"),      # label for an even depth; odd depth flips it
    ("The patient has no {x}.", "contradiction"),
)
_SECTION_PREMISES = (
    # (template, x mentioned in the second section?)
    ("{s1}: The patient has no {x}. {s2}: The patient has {x}.", True),
    ("{s1}: The patient has no {x}. {s2}: The patient has {y}.", False),
)
# hypothesis forms: (template, section it speaks of, label if x asserted in s2, label if x absent there)
_SECTION_HYPOTHESES = (
    ("{s2}: The patient has {x}.", "s2", "entailment", "neutral"),
    ("{s2}: The patient has no {x}.", "s2", "contradiction", "neutral"),
    ("{s1}: The patient has {x}.", "s1", "contradiction", "contradiction"),
    ("{s1}: The patient has no {x}.", "s1", "entailment", "entailment"),
)
_FLIP = {"entailment": "contradiction", "contradiction": "entailment", "neutral": "neutral"}


def _finding(k: int) -> tuple[str, str]:
    """The k-th (x, y) pair: y is half the list away from x, so y != x always."""
    n = len(FINDINGS)
    return FINDINGS[k % n], FINDINGS[(k + n // 2) % n]


def _build_default_cases() -> tuple[NliNegationCase, ...]:
    cases: list[NliNegationCase] = []

    def add(pattern, premise, hypothesis, label, depth, section=None):
        cid = f"nlineg-{pattern}-{sum(c.pattern == pattern for c in cases) + 1:03d}"
        cases.append(NliNegationCase(cid, pattern, premise, hypothesis, label, depth, section))

    def fill(t, x, y, s1=None, s2=None):
        return t.format(x=x, X=_cap(x), y=y, s1=s1, s2=s2)

    combo = 0
    for pt, depth in _SIMPLE_PREMISES:                      # 7 × 3 × 3 findings = 63
        for ht, if_neg, if_pos in _SIMPLE_HYPOTHESES:
            for j in range(3):
                x, y = _finding(combo + 4 * j)
                add("simple", fill(pt, x, y), fill(ht, x, y), if_neg if depth else if_pos, depth)
            combo += 1
    combo = 0
    for pt in _NESTED_PREMISES:                             # 4 × 4 × 3 = 48
        for ht, label in _NESTED_HYPOTHESES:
            for j in range(3):
                x, y = _finding(combo + 4 * j)
                add("nested", fill(pt, x, y), fill(ht, x, y), label, 2)
            combo += 1
    combo = 0
    for pt, depth in _DOUBLE_PREMISES:                      # 6 × 2 × 4 = 48
        for ht, label in _DOUBLE_HYPOTHESES:
            for j in range(4):
                x, y = _finding(combo + 3 * j)
                add("double", fill(pt, x, y), fill(ht, x, y), label if depth % 2 == 0 else _FLIP[label],
                    depth)
            combo += 1
    pairs = [(a, b) for a in SECTIONS for b in SECTIONS if a != b]   # 12 ordered section pairs
    combo = 0
    for pt, x_in_s2 in _SECTION_PREMISES:                   # 2 × 4 × 6 = 48
        for ht, which, if_asserted, if_absent in _SECTION_HYPOTHESES:
            for j in range(6):
                x, y = _finding(combo + 2 * j)
                s1, s2 = pairs[(combo + 2 * j) % len(pairs)]
                add("section_scoped", fill(pt, x, y, s1, s2), fill(ht, x, y, s1, s2),
                    if_asserted if x_in_s2 else if_absent, 1, s1 if which == "s1" else s2)
            combo += 1
    return tuple(cases)


@cache
def default_nli_negation_cases() -> tuple[NliNegationCase, ...]:
    """The frozen built-in corpus (``builtin-v1``): 207 synthetic cases, ≥ 48 per pattern."""
    return validate_cases(_build_default_cases())


# ---------------------------------------------------------------------------------------------
# The atlas's own case files (.json list or {"cases": [...]}, or .jsonl): openmed's field names, the atlas's data
# model (depth 0, free-text sections). openmed's fixture files, by openmed's rules: exchange.load_openmed_fixtures

_ALIASES: dict[str, tuple[str, ...]] = {
    "case_id": ("case_id", "id"),
    "pattern": ("pattern", "category"),
    "premise": ("premise",),
    "hypothesis": ("hypothesis",),
    "gold_label": ("gold_label", "label", "expected_label"),
    "negation_depth": ("negation_depth", "depth"),
    "section": ("section",),
    "synthetic": ("synthetic",),
}


def _field(row: dict, name: str, where: str) -> Any:
    present = [k for k in _ALIASES[name] if k in row]
    if not present:
        return None
    first = row[present[0]]
    for k in present[1:]:
        if not (type(row[k]) is type(first) and row[k] == first):
            raise NliNegationInputError(
                f"{where}: ambiguous row: field {name!r} is given as "
                f"{' and '.join(repr(p) for p in present)} with different values")
    return first


def _row_to_case(row: Any, where: str) -> NliNegationCase:
    if not isinstance(row, dict):
        raise NliNegationInputError(f"{where}: expected a JSON object")
    vals = {name: _field(row, name, where) for name in _ALIASES}
    for name in ("case_id", "pattern", "premise", "hypothesis", "gold_label"):
        if vals[name] is None:
            raise NliNegationInputError(
                f"{where}: missing field {name!r} (accepted names: {', '.join(_ALIASES[name])})")
    # PHI flag: contains_real_phi=false, or its positive twin phi_free=true; both given must agree.
    phi_flags = []   # contains real PHI, by each flag given
    for flag in ("contains_real_phi", "phi_free"):
        if flag in row:
            if not isinstance(row[flag], bool):
                raise NliNegationInputError(f"{where}: {flag} must be true or false")
            phi_flags.append(row[flag] if flag == "contains_real_phi" else not row[flag])
    if vals["synthetic"] is None or not phi_flags:
        raise NliNegationInputError(
            f"{where}: missing the synthetic flag and/or the PHI flag "
            "(each row needs synthetic=true and contains_real_phi=false or phi_free=true)")
    if len(phi_flags) == 2 and phi_flags[0] != phi_flags[1]:
        raise NliNegationInputError(
            f"{where}: ambiguous row: contains_real_phi and phi_free disagree")
    if not isinstance(vals["synthetic"], bool):
        raise NliNegationInputError(f"{where}: synthetic must be true or false")
    label, pattern = (v.strip().lower() if isinstance(v, str) else v for v in (vals["gold_label"], vals["pattern"]))
    fields = dict(case_id=vals["case_id"], pattern=pattern, premise=vals["premise"],
                  hypothesis=vals["hypothesis"], gold_label=label, negation_depth=vals["negation_depth"],
                  section=vals["section"], synthetic=vals["synthetic"], contains_real_phi=phi_flags[0])
    _validate_case(SimpleNamespace(**fields), where)
    return NliNegationCase(**fields)


def load_nli_negation_cases(path) -> tuple[NliNegationCase, ...]:
    """Read cases from an atlas case file: ``.json`` (a list of rows or ``{"cases": [...]}``) or
    ``.jsonl`` (one row per non-empty line). (An openmed fixture file, read by openmed's rules:
    :func:`.exchange.load_openmed_fixtures`.)

    Field names (aliases): ``case_id``/``id``, ``pattern``/``category``, ``premise``, ``hypothesis``,
    ``gold_label``/``label``/``expected_label``, optional ``negation_depth``/``depth`` and
    ``section``; every row must carry ``synthetic: true`` and ``contains_real_phi: false`` or
    ``phi_free: true``. A field given under two names with different values, a missing flag, an
    unknown pattern or label, or a repeated case id raises :class:`NliNegationInputError` naming the
    file and the row (1-based), never a value. Other fields are ignored.
    """
    p = Path(path)
    if p.suffix.lower() not in (".json", ".jsonl"):
        raise NliNegationInputError(f"{p}: no such file" if not p.is_file() else
                                    f"{p}: unsupported file type (expected .json or .jsonl)")
    return read_cases(p, "an NLI case file (.json or .jsonl)", _row_to_case)


def read_cases(p: Path, what: str, to_case, keys: tuple = ("cases",), max_cases: int | None = None):
    """The cases of the case file ``p``, ``what`` it is: ``.jsonl`` (one row per non-empty line) or JSON (a list of
    rows, or an object with the list under the first of ``keys`` it has), each row made a case by
    ``to_case(row, where)``; a file without cases, with more than ``max_cases`` or with a case id twice raises
    :class:`NliNegationInputError` naming the file and the row (1-based)."""
    from ... import jsonio

    listed = f'list of rows or an object with a "{keys[0]}"' + "".join(f' (or "{k}")' for k in keys[1:]) + " list"
    if p.suffix.lower() == ".jsonl":
        rows = jsonio.load_lines(p, what=what, error=NliNegationInputError, expected="one case object per row")
    else:
        data = jsonio.load(p, what=what, error=NliNegationInputError, expected="a " + listed)
        if isinstance(data, dict):
            data = next((data[k] for k in keys if k in data), None)
        if not isinstance(data, list):
            raise NliNegationInputError(f"{p}: expected a JSON {listed}")
        rows = list(enumerate(data, 1))
    if not rows:
        raise NliNegationInputError(f"{p}: holds no cases")
    if max_cases is not None and len(rows) > max_cases:
        raise NliNegationInputError(f"{p}: {len(rows)} cases; openmed reads at most {max_cases}")
    cases, seen = [], {}
    for pos, row in rows:
        case = to_case(row, f"{p}, row {pos}")
        if case.case_id in seen:
            raise NliNegationInputError(f"{p}, row {pos}: duplicate case id (first used in row {seen[case.case_id]})")
        seen[case.case_id] = pos
        cases.append(case)
    return tuple(cases)
