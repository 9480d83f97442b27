"""The card held against the anchor it is modelled on: openmed's ``run_nli_negation_challenge``, run on the
same cases and the same predictions as the atlas's challenge, report against report, field by field.

:func:`agreement` is the one computation: for every split version of the card (``builtin-v1`` as openmed
loads it from the fixture file ``atlas export`` writes; ``openmed-builtin-v1`` against openmed's own
``default_nli_negation_cases()``), every prediction set of :func:`prediction_sets`, given by mapping (case id
-> label) and by sequence (case order), under every gate setting of :data:`GATE_SETTINGS` (ceiling, floor),
it compares the atlas's reports — :func:`.report.run_nli_negation_challenge` by mapping and by sequence, and
the card's own run (the contract's ``predict``, the report the card makes of its records) — with openmed's.
``tests/cards/test_nli_openmed.py`` asserts it; the card page's sentence (fact ``nli_openmed.agreement``) calls
it while the book builds, and says so when openmed is not installed (a test dependency, never a runtime one).

Field names are openmed's (``case_count``, ``correct_count``, ``gate.aggregate_accuracy_gate_passed``,
``by_pattern.<pattern>.false_entailment_count``, ...). A rate whose denominator is 0 is undefined in the
atlas (None; the false-entailment gate then fails closed) and 0.0 in openmed (the gate passes): such a pair
is a declared ``departure``, never counted as equal (``CARD.departures`` lists every departure).
"""
from __future__ import annotations

import importlib.util
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .corpus import ABSTENTION, LABELS, PATTERNS

#: Seed of the random labelling (:func:`prediction_sets`).
SEED = 30
#: (false-entailment ceiling, accuracy floor) pairs every comparison runs under; None = floor off.
GATE_SETTINGS = ((0.0, None), (0.0, 0.5), (0.25, None), (0.25, 0.3))
MODULE = "openmed.eval.nli_negation_challenge"

EQUAL, DEPARTURE, DIFFERS = "equal", "departure", "differs"


def openmed_version() -> str | None:
    """The installed openmed's version, None when it is not installed."""
    from importlib import metadata

    try:
        return metadata.version("openmed")
    except metadata.PackageNotFoundError:
        return None


def openmed_challenge():
    """openmed's ``nli_negation_challenge`` module, or None when openmed is not installed. The module as
    imported when it already is; otherwise its file executed on its own (it imports only the standard
    library), since importing ``openmed.eval`` first loads every openmed evaluation suite (seconds)."""
    if MODULE in sys.modules:
        return sys.modules[MODULE]
    spec = importlib.util.find_spec("openmed")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "eval" / "nli_negation_challenge.py"
    if not path.is_file():
        return None
    name = "_atlas_openmed_nli_negation_challenge"
    if name not in sys.modules:
        mspec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(mspec)
        sys.modules[name] = module
        try:
            mspec.loader.exec_module(module)
        except ImportError:  # the module grew openmed imports: import it the ordinary way
            del sys.modules[name]
            return importlib.import_module(MODULE)
    return sys.modules[name]


def prediction_sets(cases, seed: int = SEED) -> dict[str, list]:
    """Labels per case, case order: ``gold``, ``all entailment``, ``all abstain`` (None), ``all
    contradiction`` and ``random`` (seeded: each label, None and the string ``"abstention"`` equally likely)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    choices = [*LABELS, None, ABSTENTION]
    return {"gold": [c.gold_label for c in cases],
            "all entailment": ["entailment"] * len(cases),
            "all abstain": [None] * len(cases),
            "all contradiction": ["contradiction"] * len(cases),
            "random": [choices[k] for k in rng.integers(0, len(choices), len(cases))]}


# ------------------------------------------------------------------------------------------- the reports

def atlas_fields(report) -> dict:
    """An atlas :class:`.challenge.NliNegationReport` under openmed's field names; a pattern without cases
    has zero counts and undefined (None) rates, as openmed lists every pattern."""
    acc, fer, g = report.aggregate_accuracy, report.false_entailment_rate, report.gate
    out = {"case_count": report.n_cases, "correct_count": acc.successes, "abstention_count": report.n_abstentions,
           "aggregate_accuracy": acc.value, "false_entailment_count": fer.successes,
           "false_entailment_case_count": fer.trials, "false_entailment_rate": fer.value,
           "gate.max_false_entailment_rate": g.max_false_entailment_rate,
           "gate.minimum_aggregate_accuracy": g.minimum_aggregate_accuracy,
           "gate.false_entailment_gate_passed": g.false_entailment_gate_passed,
           "gate.aggregate_accuracy_gate_passed": g.accuracy_gate_passed, "gate.passed": g.passed}
    present = {p.pattern: p for p in report.patterns}
    for name in PATTERNS:
        p = present.get(name)
        k = f"by_pattern.{name}."
        out.update({k + "case_count": p.n_cases if p else 0,
                    k + "correct_count": p.aggregate_accuracy.successes if p else 0,
                    k + "abstention_count": p.n_abstentions if p else 0,
                    k + "non_entailment_case_count": p.false_entailment_rate.trials if p else 0,
                    k + "false_entailment_count": p.false_entailment_rate.successes if p else 0,
                    k + "aggregate_accuracy": p.aggregate_accuracy.value if p else None,
                    k + "false_entailment_rate": p.false_entailment_rate.value if p else None})
    return out


def openmed_fields(report) -> dict:
    """An openmed report's fields (from its own ``to_dict()``), keyed as :func:`atlas_fields`."""
    d = report.to_dict()
    out = {k: d[k] for k in ("case_count", "correct_count", "abstention_count", "aggregate_accuracy",
                             "false_entailment_count", "false_entailment_case_count", "false_entailment_rate")}
    out.update({f"gate.{k}": d["gate"][k] for k in ("max_false_entailment_rate", "minimum_aggregate_accuracy",
                                                    "false_entailment_gate_passed",
                                                    "aggregate_accuracy_gate_passed", "passed")})
    for name, p in d["by_pattern"].items():
        for k in ("case_count", "correct_count", "abstention_count", "non_entailment_case_count",
                  "false_entailment_count", "aggregate_accuracy", "false_entailment_rate"):
            out[f"by_pattern.{name}.{k}"] = p[k]
    return out


#: a field -> the count its rate is undefined without (rates) or rests on (the false-entailment gate)
_DENOMINATOR = {"aggregate_accuracy": "case_count", "false_entailment_rate": "false_entailment_case_count",
                "gate.false_entailment_gate_passed": "false_entailment_case_count",
                "gate.passed": "false_entailment_case_count"}


def _denominator(name: str) -> str | None:
    if name in _DENOMINATOR:
        return _DENOMINATOR[name]
    if name.startswith("by_pattern."):
        pattern, key = name.split(".")[1:]
        return {"aggregate_accuracy": f"by_pattern.{pattern}.case_count",
                "false_entailment_rate": f"by_pattern.{pattern}.non_entailment_case_count"}.get(key)
    return None


@dataclass(frozen=True)
class FieldComparison:
    field: str
    atlas: object
    openmed: object
    status: str       # equal | departure (a declared one: a rate on a zero denominator) | differs


def compare_reports(atlas_report, openmed_report) -> list[FieldComparison]:
    """Field by field (:func:`atlas_fields` against :func:`openmed_fields`): values equal exactly (rates are
    the same k/n in both), or a declared departure where the field's denominator is 0 in both reports."""
    a, o = atlas_fields(atlas_report), openmed_fields(openmed_report)
    rows = []
    for name in sorted(set(a) | set(o)):
        av, ov = a.get(name), o.get(name)
        if name in a and name in o and type(av) is type(ov) and av == ov:
            status = EQUAL
        else:
            den = _denominator(name)
            status = DEPARTURE if den and a.get(den) == o.get(den) == 0 else DIFFERS
        rows.append(FieldComparison(name, av, ov, status))
    return rows


# ------------------------------------------------------------------------------------------- both ways

@dataclass
class Run:
    """One comparison: case set, prediction set, how predictions were given, gate setting, the rows."""
    version: str
    predictions: str
    form: str           # mapping | sequence | card run
    ceiling: float
    floor: float | None
    rows: list[FieldComparison]


@dataclass
class Agreement:
    """The outcome of :func:`agreement` (``openmed`` None: not installed, nothing compared)."""
    openmed: str | None
    runs: list[Run] = field(default_factory=list)

    def rows(self, status: str | None = None) -> list[tuple[Run, FieldComparison]]:
        return [(r, f) for r in self.runs for f in r.rows if status is None or f.status == status]

    @property
    def equal(self) -> bool:
        return self.openmed is not None and bool(self.runs) and not self.rows(DIFFERS)

    @property
    def fields(self) -> list[str]:
        return sorted({f.field for r in self.runs for f in r.rows})

    def statement(self) -> str:
        """The card page's sentence on the agreement, from this computation."""
        if self.openmed is None:
            return ("not checked in this build: openmed is not installed (a test dependency, pinned in "
                    "`requirements-lock.txt`; `tests/cards/test_nli_openmed.py` runs the same comparison)")
        n, versions = len(self.runs), sorted({r.version for r in self.runs})
        preds = len({r.predictions for r in self.runs})
        gates = len({(r.ceiling, r.floor) for r in self.runs})
        scope = (f"{len(self.rows()):,} field comparisons in {n:,} pairs of reports ({len(versions)} case sets × "
                 f"{preds} prediction sets × {gates} gate settings; by mapping, by sequence and through the "
                 f"card's run)")
        bad = self.rows(DIFFERS)
        if bad:
            r, f = bad[0]
            return (f"reports differ from openmed {self.openmed} in {len(bad):,} of {scope}; the first: "
                    f"`{f.field}` ({r.version}, {r.predictions}, {r.form}): atlas {f.atlas!r}, openmed {f.openmed!r}")
        dep = len(self.rows(DEPARTURE))
        return (f"reports equal to openmed {self.openmed} on the same cases and predictions: {scope}, every one "
                f"equal" + (f" but {dep:,} declared departures (a rate on no case)" if dep else ""))


def openmed_cases(version: str, om, workdir: Path):
    """The cases openmed is given for ``version``: its own built-ins for ``openmed-builtin-v1`` (the atlas
    read them from the fixture file openmed wrote); for any other version the fixture file ``atlas export``
    writes, loaded by openmed's ``load_nli_negation_fixtures``."""
    from .card import OPENMED_VERSION, version_cases
    from .exchange import FIXTURE_FILE, write_openmed_fixtures

    if version == OPENMED_VERSION:
        return om.default_nli_negation_cases()
    return om.load_nli_negation_fixtures(write_openmed_fixtures(version_cases(version),
                                                                workdir / f"{version}-{FIXTURE_FILE}"))


def agreement(versions=None, gate_settings=GATE_SETTINGS, seed: int = SEED) -> Agreement:
    """Run the atlas's challenge and openmed's on the same cases and predictions and compare every report
    (see the module docstring). Raises when openmed's cases are not the atlas's, id for id in order."""
    from .card import CARD, version_cases
    from .contract import load_items, predict, split
    from .corpus import case_set_sha256
    from .counting import cell_report
    from .outside import FixedLabels
    from .report import run_nli_negation_challenge

    om = openmed_challenge()
    out = Agreement(openmed_version() if om is not None else None)
    if om is None:
        return out
    with tempfile.TemporaryDirectory(prefix="atlas-openmed-") as tmp:
        for version in versions or CARD.versions:
            cases = version_cases(version)
            ocases = openmed_cases(version, om, Path(tmp))
            if [c.case_id for c in ocases] != [c.case_id for c in cases]:
                raise ValueError(f"{version}: openmed's cases are not the atlas's cases in the same order")
            items = load_items()
            manifest = split(items, version)
            for name, labels in prediction_sets(cases, seed).items():
                by_id = dict(zip((c.case_id for c in cases), labels))
                for ceiling, floor in gate_settings:
                    gates = dict(max_false_entailment_rate=ceiling, minimum_aggregate_accuracy=floor)
                    o_map = om.run_nli_negation_challenge(by_id, cases=ocases, **gates)
                    o_seq = om.run_nli_negation_challenge(list(labels), cases=ocases, **gates)
                    pairs = {"mapping": (run_nli_negation_challenge(by_id, cases=cases, **gates), o_map),
                             "sequence": (run_nli_negation_challenge(list(labels), cases=cases, **gates), o_seq),
                             "card run": (cell_report({"predictions": predict(
                                 items, manifest, "openmed-agreement", "zero_shot", predictor=FixedLabels(by_id, {})),
                                 "split": {"hash": case_set_sha256(cases)}, "spec": {"parameters": gates}}), o_map)}
                    for form, (a, o) in pairs.items():
                        out.runs.append(Run(version, name, form, ceiling, floor, compare_reports(a, o)))
    return out


# ------------------------------------------------------------------------------------------- the card page

def section_map_markdown() -> str:
    """The section titles of ``builtin-v1`` and the identifiers they are exported as."""
    from .corpus import SECTIONS
    from .exchange import section_identifier

    lines = ["| section title (atlas) | `section` (openmed fixture) |", "|---|---|"]
    lines += [f"| {t} | `{section_identifier(t)}` |" for t in SECTIONS]
    return "\n".join(lines)


def page_facts() -> dict[str, tuple]:
    """The card page's facts on openmed, ``{key: (value, kind, source)}``: the agreement sentence (computed
    here and now by :func:`agreement`, or saying openmed is not installed), the section table and the
    counts of the exchange (the departures are ``CARD.departures``, the page's departures table)."""
    from .card import OPENMED_VERSION, version_cases
    from .corpus import VERSION
    from .exchange import OPENMED_VERSION as ANCHOR

    src = "atlaslib.cards.nli_negation.anchor"
    builtin, om_cases = version_cases(VERSION), version_cases(OPENMED_VERSION)
    return {
        "nli_openmed.agreement": (agreement().statement(), "text", f"{src}.agreement, run while the book builds"),
        "nli_openmed.version": (ANCHOR, "text", "atlaslib.cards.nli_negation.exchange.OPENMED_VERSION"),
        "nli_openmed.section_map": (section_map_markdown(), "markdown", "atlaslib.cards.nli_negation.exchange"),
        "nli_openmed.cases": (len(om_cases), "count", f"{OPENMED_VERSION} (openmed's fixture file)"),
        "nli_openmed.affirmative_controls": (sum(c.negation_depth == 0 for c in builtin), "count",
                                             f"{VERSION}: cases of negation depth 0"),
        "nli_openmed.section_cases": (sum(c.section is not None for c in builtin), "count",
                                      f"{VERSION}: cases with a section"),
    }
