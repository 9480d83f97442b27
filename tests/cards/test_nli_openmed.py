"""The NLI negation card held against the anchor it is modelled on: openmed 3.1.0's
``openmed.eval.nli_negation_challenge``, installed (a pinned test dependency), both ways.

References: openmed's own ``run_nli_negation_challenge``, ``load_nli_negation_fixtures`` and
``default_nli_negation_cases`` (the installed package, imported the ordinary way), and openmed's own accept /
refuse decisions on fixture rows.
"""
from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from openmed.eval import nli_negation_challenge as om

from atlaslib.cards import nli_negation as nn
from atlaslib.cards.nli_negation import anchor, exchange
from atlaslib.cards.nli_negation.anchor import DEPARTURE, DIFFERS, EQUAL
from atlaslib.cards.nli_negation.card import CARD, CASE_SETS, OPENMED_VERSION, version_cases
from atlaslib.cards.nli_negation.errors import NliNegationInputError

BUILTIN = "builtin-v1"
PINNED_SHA256 = "773a9e46f6a3b7046ba731c3c87b6105a0da5197049935edc6dcb14ec3a39a25"  # tests/cards/test_nli_negation.py
FIELDS = {"case_count", "correct_count", "abstention_count", "aggregate_accuracy", "false_entailment_count",
          "false_entailment_case_count", "false_entailment_rate", "gate.false_entailment_gate_passed",
          "gate.aggregate_accuracy_gate_passed", "gate.passed", "gate.max_false_entailment_rate",
          "gate.minimum_aggregate_accuracy"} | {
    f"by_pattern.{p}.{k}" for p in om.NEGATION_PATTERNS
    for k in ("case_count", "correct_count", "abstention_count", "non_entailment_case_count",
              "false_entailment_count", "aggregate_accuracy", "false_entailment_rate")}


def fields(c) -> tuple:
    return (c.case_id, c.pattern, c.premise, c.hypothesis, c.gold_label, c.negation_depth, c.section)


@pytest.fixture(scope="module")
def agreement():
    return anchor.agreement()


# --------------------------------------------------------------------------------------------- the anchor

def test_the_installed_openmed_is_the_release_the_rules_restate():
    assert anchor.openmed_version() == exchange.OPENMED_VERSION == "3.1.0"
    assert anchor.openmed_challenge() is om  # the comparison runs the module the user imports
    assert om._CASE_ID_RE.pattern == om._SECTION_RE.pattern == exchange.IDENTIFIER.pattern
    assert (om.MAX_CASE_ID_LENGTH, om.MAX_NEGATION_CASES, om.MAX_CASE_TEXT_LENGTH) == (
        exchange.MAX_IDENTIFIER_LENGTH, exchange.MAX_CASES, exchange.MAX_TEXT_LENGTH)
    assert len(om.NEGATION_PATTERNS) == exchange.MAX_DEPTH and set(om.NEGATION_PATTERNS) == set(nn.PATTERNS)
    assert {k: v for k, v in om._LABEL_ALIASES.items() if v != "abstention"} == exchange.LABEL_ALIASES
    assert om.NLI_NEGATION_FIXTURE_SCHEMA_VERSION == exchange.FIXTURE_SCHEMA_VERSION


def test_the_books_copy_of_openmeds_module_is_openmeds_code(monkeypatch):
    """Without ``openmed.eval`` imported (a book build), the comparison executes openmed's module file on its
    own (importing ``openmed.eval`` loads all of openmed's suites): the same file, the same reports."""
    monkeypatch.delitem(sys.modules, anchor.MODULE)
    alone = anchor.openmed_challenge()
    assert alone is not om and alone.__file__ == om.__file__
    labels = anchor.prediction_sets(om.default_nli_negation_cases())["random"]
    assert alone.run_nli_negation_challenge(labels).to_dict() == om.run_nli_negation_challenge(labels).to_dict()


def test_reports_equal_openmeds_field_by_field(agreement):
    """Every case set × prediction set × form (mapping, sequence, the card's run) × gate setting, every field."""
    assert agreement.openmed == "3.1.0" and agreement.equal
    assert agreement.rows(DIFFERS) == [] and agreement.rows(DEPARTURE) == []
    sets = ("gold", "all entailment", "all abstain", "all contradiction", "random")
    forms = ("mapping", "sequence", "card run")
    assert sorted((r.version, r.predictions, r.form, r.ceiling, r.floor or 0) for r in agreement.runs) == sorted(
        (v, s, f, c, fl or 0) for v, s, f in itertools.product(CARD.versions, sets, forms)
        for c, fl in anchor.GATE_SETTINGS)
    assert {r.floor for r in agreement.runs} >= {None, 0.5}  # with and without an accuracy floor
    assert set(agreement.fields) == FIELDS and all(len(r.rows) == len(FIELDS) for r in agreement.runs)
    # not a comparison of constants: every gate both passes and fails somewhere, abstentions occur
    seen = {name: {f.atlas for _, f in agreement.rows() if f.field == name}
            for name in ("gate.passed", "gate.false_entailment_gate_passed", "gate.aggregate_accuracy_gate_passed")}
    assert all(v == {True, False} for v in seen.values()), seen
    assert max(f.atlas for _, f in agreement.rows() if f.field == "abstention_count") == len(version_cases(BUILTIN))
    random = anchor.prediction_sets(version_cases(BUILTIN))["random"]
    assert None in random and "abstention" in random and set(random) >= set(nn.LABELS)
    assert agreement.statement().startswith("reports equal to openmed 3.1.0 on the same cases and predictions")


def test_the_comparison_fails_on_a_real_difference():
    cases = version_cases(OPENMED_VERSION)
    gold = [c.gold_label for c in cases]
    wrong = ["entailment"] + gold[1:]   # the first case (gold contradiction) answered entailment
    rows = {f.field: f for f in anchor.compare_reports(nn.run_nli_negation_challenge(gold, cases=cases),
                                                       om.run_nli_negation_challenge(wrong))}
    differs = {k for k, f in rows.items() if f.status == DIFFERS}
    assert {"correct_count", "aggregate_accuracy", "false_entailment_count", "false_entailment_rate",
            "gate.passed", "gate.false_entailment_gate_passed"} <= differs
    assert "case_count" not in differs and rows["case_count"].status == EQUAL
    # a floor given to one side only
    rows = anchor.compare_reports(nn.run_nli_negation_challenge(gold, cases=cases),
                                  om.run_nli_negation_challenge(gold))
    assert [f.field for f in rows if f.status == DIFFERS] == ["gate.minimum_aggregate_accuracy"]


def test_a_rate_on_no_case_is_a_declared_departure_never_equal():
    cases = [nn.NliNegationCase("e-1", "simple", "Fever is present.", "The patient has fever.", "entailment", 0)]
    ocases = [om.NliNegationCase("e-1", "simple", "Fever is present.", "The patient has fever.", "entailment", 1)]
    a = nn.run_nli_negation_challenge(["entailment"], cases=cases, minimum_aggregate_accuracy=None)
    o = om.run_nli_negation_challenge(["entailment"], cases=ocases)
    rows = {f.field: f for f in anchor.compare_reports(a, o)}
    assert (rows["false_entailment_rate"].atlas, rows["false_entailment_rate"].openmed) == (None, 0.0)
    assert (rows["gate.false_entailment_gate_passed"].atlas, rows["gate.false_entailment_gate_passed"].openmed) == (
        False, True)   # the atlas fails closed
    assert {k for k, f in rows.items() if f.status == DEPARTURE} == {
        "false_entailment_rate", "gate.false_entailment_gate_passed", "gate.passed",
        *(f"by_pattern.{p}.{k}" for p in ("nested", "double", "section_scoped")
          for k in ("aggregate_accuracy", "false_entailment_rate")), "by_pattern.simple.false_entailment_rate"}
    assert not any(f.status == DIFFERS for f in rows.values())


def test_the_card_page_states_the_agreement_from_the_computation(agreement, repo):
    from atlaslib.pages import departures, facts

    assert facts.fact_text("nli_openmed.agreement") == agreement.statement()
    # the card page and its sub-pages (the comparison with openmed has a page of its own under the card)
    text = "".join(p.read_text() for p in [repo / "book/cards/nli_negation.md",
                                            *sorted((repo / "book/cards/nli_negation").rglob("*.md"))])
    assert "{{fact:nli_openmed.agreement}}" in text and departures.MARK in text
    # the format mapping is card data (Card.departures), a row each in the page's departures table
    table = departures.departures_markdown(CARD)
    for topic in ("negation depth", "section", "case ids", "safety flags", "a rate on no case", "prediction labels"):
        assert f"| {topic} |" in table
    assert "`affirmative_control: true`" in table and "`section_title`" in table
    assert "| Past Medical History | `past_medical_history` |" in facts.fact_text("nli_openmed.section_map")
    assert anchor.Agreement(None).statement().startswith("not checked in this build: openmed is not installed")


# ----------------------------------------------------------------------------------- atlas -> openmed

def _atlas(*args, cwd):
    """The ``atlas`` command of this checkout, in a fresh process."""
    env = dict(os.environ, PYTHONPATH=str(Path(nn.__file__).resolve().parents[3]))
    return subprocess.run([sys.executable, "-m", "atlaslib.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


def test_atlas_export_writes_a_fixture_file_openmed_loads_unchanged(tmp_path):
    out = _atlas("export", "--card", "nli_negation", "--version", BUILTIN, "-o", str(tmp_path / "x"), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    task = json.loads((tmp_path / "x" / "task.json").read_text())
    path = tmp_path / "x" / exchange.FIXTURE_FILE
    assert exchange.FIXTURE_FILE in task["files"] and path.is_file()
    cases = version_cases(BUILTIN)
    loaded = om.load_nli_negation_fixtures(path)
    assert [(c.case_id, c.pattern, c.premise, c.hypothesis, c.gold_label) for c in loaded] == [
        (c.case_id, c.pattern, c.premise, c.hypothesis, c.gold_label) for c in cases]
    rows = json.loads(path.read_text())["cases"]
    assert all(r["synthetic"] is True and r["contains_real_phi"] is False and r["phi_free"] is True for r in rows)
    controls = [r for r, c in zip(rows, cases) if c.negation_depth == 0]
    assert controls and all(r["affirmative_control"] is True and r["negation_depth"] == 1 for r in controls)
    assert sum("affirmative_control" in r for r in rows) == len(controls)
    titled = [(r, c) for r, c in zip(rows, cases) if c.section]
    assert titled and all(r["section_title"] == c.section and r["section"] == exchange.section_identifier(c.section)
                          for r, c in titled)
    # openmed's report on the file it loaded equals the atlas's report on its own cases
    labels = anchor.prediction_sets(cases)["random"]
    o = om.run_nli_negation_challenge(labels, cases=loaded, minimum_aggregate_accuracy=0.5)
    a = nn.run_nli_negation_challenge(labels, cases=cases)
    assert all(f.status == EQUAL for f in anchor.compare_reports(a, o))
    # and the atlas reads the file back to its own cases exactly: depth 0 and the section titles return
    back = nn.load_openmed_fixtures(path)
    assert back == cases and nn.case_set_sha256(back) == PINNED_SHA256


def test_export_refuses_what_openmed_could_not_load():
    ok = dict(pattern="simple", premise="No fever.", hypothesis="The patient has fever.", gold_label="contradiction")
    for case, expect in [
        (nn.NliNegationCase("Upper-Case", **ok), "not an openmed identifier"),
        (nn.NliNegationCase("a", **dict(ok, premise="x" * 2049)), "longer than openmed's 2048"),
        (nn.NliNegationCase("a", **ok, negation_depth=5), "above openmed's 4"),
        (nn.NliNegationCase("a", **dict(ok, pattern="section_scoped")), "needs a section"),
    ]:
        with pytest.raises(NliNegationInputError, match=expect):
            exchange.openmed_fixture_document([case], "test")
    with pytest.raises(NliNegationInputError, match="at most 256"):
        exchange.openmed_fixture_document([nn.NliNegationCase(f"c{i}", **ok) for i in range(257)], "test")


# ----------------------------------------------------------------------------------- openmed -> atlas

def test_openmeds_built_in_cases_are_a_card_version_of_their_own():
    path = Path(nn.card.__file__).with_name(CASE_SETS[OPENMED_VERSION].file)
    # the shipped file is what openmed writes of its built-in cases, and openmed loads it back to them
    doc = json.loads(path.read_text())
    assert doc["cases"] == [c.to_mapping() for c in om.default_nli_negation_cases()]
    assert om.load_nli_negation_fixtures(path) == om.default_nli_negation_cases()
    cases = version_cases(OPENMED_VERSION)
    assert [fields(c) for c in cases] == [fields(c) for c in om.default_nli_negation_cases()]
    assert CARD.test_sizes[OPENMED_VERSION] == len(cases) and OPENMED_VERSION in CARD.versions
    assert not {c.case_id for c in cases} & {c.case_id for c in version_cases(BUILTIN)}  # ids never collide
    assert {m for v, m, _ in CARD.default_matrix if v == OPENMED_VERSION} == {
        "medspacy-context-nli", "always-entailment", "always-abstain", "cross-encoder/nli-deberta-v3-xsmall"}
    # the contract's split of each version holds that version's cases (test_contract.py: and the outside view)
    items = nn.load_items()
    for v in CARD.versions:
        assert sorted(nn.split(items, v).test) == sorted(c.case_id for c in version_cases(v))
    # the ConText rule predictor is told this version's findings: every hypothesis names one
    assert all(any(f in c.hypothesis.lower() for f in CASE_SETS[OPENMED_VERSION].findings) for c in cases)


def test_a_changed_case_file_is_refused(monkeypatch):
    monkeypatch.setitem(CASE_SETS, OPENMED_VERSION, nn.CaseSet("x", CASE_SETS[OPENMED_VERSION].file, "0" * 64))
    version_cases.cache_clear()
    try:
        with pytest.raises(NliNegationInputError, match="was changed"):
            version_cases(OPENMED_VERSION)
    finally:
        monkeypatch.undo()
        version_cases.cache_clear()


def _write(path, rows, wrap=None):
    if path.suffix == ".jsonl":
        path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    else:
        path.write_text(json.dumps(rows if wrap is None else {wrap: rows}))
    return path


FLAGS = {"synthetic": True, "contains_real_phi": False, "phi_free": True}
VARIED = [  # openmed's layouts and aliases, as openmed accepts them
    {"id": " Case-One ", "category": "simple", "premise": "Condition alpha is absent.", "hypothesis": "Condition "
     "alpha is present.", "label": " Contradicted ", **FLAGS},
    {"case_id": "n:2", "pattern": "Nested", "premise": "No sign that beta is not present.", "hypothesis": "Beta.",
     "expected_label": "neutral", "negation_depth": 4, "metadata": FLAGS},
    {"case_id": "s.3", "pattern": "section-scoped", "premise": "A:\nGamma is absent.\nB:\nDelta.", "hypothesis":
     "Delta.", "gold_label": "entailed", "metadata": {"section": "Active_Problems", **FLAGS}},
]


@pytest.mark.parametrize("name,wrap", [("f.json", None), ("f.json", "cases"), ("f.json", "fixtures"),
                                       ("f.jsonl", None)])
def test_an_openmed_fixture_file_gives_the_cases_and_the_report_openmed_gives(tmp_path, name, wrap):
    path = _write(tmp_path / name, VARIED, wrap)
    theirs, ours = om.load_nli_negation_fixtures(path), nn.load_openmed_fixtures(path)
    assert [fields(c) for c in ours] == [fields(c) for c in theirs]
    assert [c.case_id for c in ours] == ["case-one", "n:2", "s.3"]  # lower-cased, as openmed does
    labels = {"case-one": "entailment", "n:2": None, "s.3": "entailment"}
    for floor in (None, 0.5):
        rows = anchor.compare_reports(
            nn.run_nli_negation_challenge(labels, cases=ours, minimum_aggregate_accuracy=floor),
            om.run_nli_negation_challenge(labels, cases=theirs, minimum_aggregate_accuracy=floor))
        assert {f.status for f in rows} <= {EQUAL, DEPARTURE} and [f for f in rows if f.status == DEPARTURE]


BASE = {"case_id": "ok-1", "pattern": "simple", "premise": "Condition alpha is absent.",
        "hypothesis": "Condition alpha is present.", "gold_label": "contradiction", **FLAGS}


DROP = object()


@pytest.mark.parametrize("change", [
    {"synthetic": DROP}, {"synthetic": 1}, {"contains_real_phi": True}, {"phi_free": DROP}, {"phi_free": False},
    {"case_id": "Bad Id"}, {"case_id": "-x"}, {"case_id": "x" * 65}, {"case_id": 7}, {"pattern": "triple"},
    {"gold_label": "abstention"}, {"gold_label": "maybe"}, {"gold_label": 1}, {"premise": "  "},
    {"hypothesis": "x" * 2049}, {"negation_depth": 0}, {"negation_depth": 5}, {"negation_depth": True},
    {"negation_depth": None}, {"negation_depth": 1.0}, {"section": "history"}, {"metadata": []},
    {"pattern": "section_scoped"}, {"pattern": "section_scoped", "section": "Past Medical History"},
])
def test_a_row_openmed_refuses_the_atlas_refuses_naming_file_and_row(tmp_path, change):
    row = {k: v for k, v in {**BASE, **change}.items() if v is not DROP}
    path = _write(tmp_path / "f.jsonl", [BASE | {"case_id": "first"}, row])
    with pytest.raises(om.NliNegationChallengeError):
        om.load_nli_negation_fixtures(path)
    with pytest.raises(NliNegationInputError) as e:
        nn.load_openmed_fixtures(path)
    assert str(e.value).startswith(f"{path}, row 2: ")
    assert "alpha" not in str(e.value) and "Bad Id" not in str(e.value)


@pytest.mark.parametrize("content,expect", [
    ("{not json", "not valid JSON"), ('{"rows": []}', 'an object with a "cases"'), ("[]", "holds no cases"),
    ("[1]", "row 1: expected a JSON object"), (json.dumps([BASE, BASE]), "row 2: duplicate case id"),
])
def test_a_file_openmed_refuses_the_atlas_refuses(tmp_path, content, expect):
    path = tmp_path / "f.json"
    path.write_text(content)
    with pytest.raises(om.NliNegationChallengeError):
        om.load_nli_negation_fixtures(path)
    with pytest.raises(NliNegationInputError, match=expect):
        nn.load_openmed_fixtures(path)


def test_atlas_score_reads_an_openmed_fixture_file_and_a_bad_one_is_one_line_exit_2(tmp_path):
    good = _write(tmp_path / "cases.json", VARIED, "fixtures")
    preds = tmp_path / "preds.jsonl"
    preds.write_text("".join(json.dumps({"item_id": i, "label": lab}) + "\n" for i, lab in
                             [("case-one", "entailment"), ("n:2", "abstention"), ("s.3", "entailment")]))
    out = _atlas("score", "nli_negation", "--cases", str(good), "--predictions", str(preds),
                 "--minimum-aggregate-accuracy", "off", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    theirs = om.run_nli_negation_challenge({"case-one": "entailment", "n:2": None, "s.3": "entailment"},
                                           cases=om.load_nli_negation_fixtures(good))
    assert (report["n_cases"], report["n_abstentions"], report["aggregate_accuracy"]["successes"],
            report["false_entailment_rate"]["successes"], report["gate"]["passed"]) == (
        theirs.case_count, theirs.abstention_count, theirs.correct_count, theirs.false_entailment_count, theirs.passed)
    bad = _write(tmp_path / "bad.jsonl", [BASE, BASE | {"case_id": "two", "negation_depth": 0}])
    out = _atlas("score", "nli_negation", "--cases", str(bad), "--predictions", str(preds), cwd=tmp_path)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.splitlines() == [f"atlas score nli_negation: {bad}, row 2: negation_depth must be an "
                                       "integer from 1 to 4"]
