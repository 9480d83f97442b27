"""ConText and negspacy assertion adapters on hand-made marked sentences; the kit trigger file parser."""
from __future__ import annotations

import re
from collections import defaultdict

import pytest

from atlaslib.models import load_adapter
from atlaslib.models.rules import NEGEX_TRIGGERS, negex_termsets, parse_negex_triggers, split_marked


@pytest.fixture(scope="module")
def context():
    return load_adapter("medspacy-context", "predict.assertion", progress=False)


@pytest.fixture(scope="module")
def negspacy(data_dir):
    return load_adapter("negspacy-negex-kit", "predict.assertion", progress=False, data_dir=data_dir)


def test_split_marked():
    assert split_marked("No [entity] WEAKNESS [entity].") == ("No WEAKNESS.", 3, 11)
    s, a, b = split_marked("Denies shortness of breath, stridor, or [entity] AIR HUNGER [entity].")
    assert s == "Denies shortness of breath, stridor, or AIR HUNGER." and s[a:b] == "AIR HUNGER"
    s, a, b = split_marked("[entity] EDEMA [entity] is absent.")
    assert (s, a, b) == ("EDEMA is absent.", 0, 5)
    with pytest.raises(ValueError, match=r"marked_texts\[4\].*exactly two.*found 1"):
        split_marked("No [entity] WEAKNESS.", 4)
    with pytest.raises(ValueError, match="empty"):
        split_marked("No [entity]  [entity].")


CASES = [
    # text, ConText, negspacy with the kit triggers
    ("No [entity] WEAKNESS [entity].", "ABSENT", "ABSENT"),
    ("Denies shortness of breath, stridor, or [entity] AIR HUNGER [entity].", "ABSENT", "ABSENT"),
    ("The patient has [entity] CHEST PAIN [entity] and fever.", "PRESENT", "PRESENT"),
    # a negation in the previous sentence does not reach the target
    ("No fever. [entity] COUGH [entity] is present.", "PRESENT", "PRESENT"),
    # "no increase" is a pseudo-negation ([PSEU]) in the kit's trigger file
    ("No increase in [entity] EDEMA [entity].", "ABSENT", "PRESENT"),
    # a [CONJ] ("but") ends the scope of "no"
    ("No fever but [entity] COUGH [entity] persists.", "PRESENT", "PRESENT"),
    # a [POST] trigger after the concept
    ("[entity] PNEUMONIA [entity] was ruled out.", "ABSENT", "ABSENT"),
    # a [PREP] possibility trigger
    ("Rule out [entity] PNEUMONIA [entity].", "POSSIBLE", "POSSIBLE"),
]


@pytest.mark.parametrize("text,expected", [(t, c) for t, c, _ in CASES])
def test_context_default_rules(context, text, expected):
    assert context.predict_assertion([text]) == [expected]


@pytest.mark.parametrize("text,expected", [(t, n) for t, _, n in CASES])
def test_negspacy_with_kit_triggers(negspacy, text, expected):
    assert negspacy.predict_assertion([text]) == [expected]


def test_batch_equals_singles_and_target_is_the_marked_occurrence(context, negspacy):
    texts = [t for t, _, _ in CASES]
    assert context.predict_assertion(texts) == [c for _, c, _ in CASES]
    assert negspacy.predict_assertion(texts) == [n for _, _, n in CASES]
    # the same word twice: only the marked occurrence is judged
    two = ["Cough resolved; no [entity] cough [entity] today.", "[entity] Cough [entity] resolved; no cough today."]
    assert negspacy.predict_assertion(two) == ["ABSENT", "PRESENT"]


def test_hypothetical_is_possible_for_context(context):
    assert context.predict_assertion(["Return if she develops [entity] CHEST PAIN [entity]."]) == ["POSSIBLE"]


def test_rule_adapters_report_their_setup(context, negspacy):
    ci = context.info
    assert ci["capability"] == "predict.assertion" and ci["medspacy"] == "1.3.1"
    assert ci["pipeline"] == ["medspacy_pyrush", "medspacy_context"]
    ni = negspacy.info
    assert ni["triggers_sha256"] == NEGEX_TRIGGERS.sha256 and ni["negspacy"] == "1.0.4"
    assert ni["pipeline"] == ["sentencizer", "negex", "negex_possible"]
    with pytest.raises(ValueError, match=r"marked_texts\[1\]"):
        negspacy.predict_assertion(["No [entity] X [entity].", "no markers here"])
    with pytest.raises(TypeError, match="unknown option"):
        load_adapter("medspacy-context", "predict.assertion", window=3)


def test_trigger_file_parse_matches_an_independent_count(data_dir):
    raw = (data_dir / NEGEX_TRIGGERS.name).read_bytes().decode("utf-8")
    parsed = parse_negex_triggers(raw)
    ref = defaultdict(set)
    for line in raw.splitlines():
        m = re.fullmatch(r"(.+?)\t\t(\[[A-Z]{4}\])\r?", line)
        assert m, line
        ref[m.group(2)].add(" ".join(m.group(1).split()))
    assert {k: set(v) for k, v in parsed.items()} == dict(ref)
    assert {k: len(v) for k, v in parsed.items()} == \
        {"[PREN]": 125, "[POST]": 7, "[PSEU]": 16, "[CONJ]": 89, "[PREP]": 21, "[POSP]": 14}
    assert "no increase" in parsed["[PSEU]"] and "denies" in parsed["[PREN]"]
    negation, possible = negex_termsets(parsed)
    assert set(negation) == {"pseudo_negations", "preceding_negations", "following_negations", "termination"}
    assert negation["preceding_negations"] == parsed["[PREN]"]
    assert set(negation["termination"]) == set(parsed["[CONJ]"]) | set(parsed["[PREP]"]) | set(parsed["[POSP]"])
    assert possible["preceding_negations"] == parsed["[PREP]"]
    with pytest.raises(ValueError, match="line 2"):
        parse_negex_triggers("no\t\t[PREN]\nbroken line\n")
