"""NLI negation challenge: corpus, exchange loader, scoring, intervals, gates, value-free errors."""
from __future__ import annotations

import json
import re
import string
import traceback
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binomtest
from sklearn.metrics import accuracy_score, confusion_matrix

from atlaslib.cards import nli_negation as nn
from atlaslib.cards.nli_negation import corpus as corpus_mod
from atlaslib.cards.nli_negation.errors import NliNegationError, NliNegationInputError, NliNegationPredictorError

FIXTURES = Path(__file__).parent / "fixtures" / "nli_negation"
PINNED_SHA256 = "773a9e46f6a3b7046ba731c3c87b6105a0da5197049935edc6dcb14ec3a39a25"
CASES = nn.default_nli_negation_cases()
NEGATION_WORDS = {"no", "not", "without", "absent", "nothing", "denies", "negative"}


def words(text: str) -> list[str]:
    return re.findall(r"[a-z]+", text.lower())


def gold_map(cases=CASES) -> dict:
    return {c.case_id: c.gold_label for c in cases}


# --------------------------------------------------------------------------------------------- corpus

def test_corpus_size_patterns_and_admissible_labels():
    assert len(CASES) >= 200
    per = Counter(c.pattern for c in CASES)
    assert set(per) == set(nn.PATTERNS)
    assert all(n >= 40 for n in per.values()), per
    for pat in nn.PATTERNS:
        labels = {c.gold_label for c in CASES if c.pattern == pat}
        assert labels == set(nn.ADMISSIBLE_LABELS[pat]), pat
    # the minimum: double negatives have both entailment and contradiction targets
    assert {"entailment", "contradiction"} <= set(nn.ADMISSIBLE_LABELS["double"])


def test_corpus_digest_is_pinned_and_generation_deterministic():
    assert nn.case_set_sha256(CASES) == PINNED_SHA256
    assert corpus_mod._build_default_cases() == CASES
    assert nn.default_nli_negation_cases() is CASES            # built once, frozen tuple


def test_corpus_flags_ids_and_sections():
    assert len({c.case_id for c in CASES}) == len(CASES)
    for c in CASES:
        assert c.synthetic is True and c.contains_real_phi is False
        if c.pattern == "section_scoped":
            assert c.section in nn.SECTIONS
            assert c.hypothesis.startswith(c.section + ":")
            assert sum(c.premise.count(s + ":") for s in nn.SECTIONS) == 2
        else:
            assert c.section is None


def test_negation_depth_counts_the_negation_words_of_the_premise():
    for c in CASES:
        n_neg = sum(w in NEGATION_WORDS for w in words(c.premise))
        assert c.negation_depth == n_neg, c.case_id
    depths = {p: {c.negation_depth for c in CASES if c.pattern == p} for p in nn.PATTERNS}
    assert depths == {"simple": {0, 1}, "nested": {2}, "double": {2, 3}, "section_scoped": {1}}


def test_corpus_is_phi_free_by_construction():
    """Every word is a template word, a finding word or a section-header word: no name, date, place
    or identifier can be in it (and there are no digits at all)."""
    templates = [t for t, *_ in corpus_mod._SIMPLE_PREMISES + corpus_mod._SIMPLE_HYPOTHESES
                 + corpus_mod._DOUBLE_PREMISES + corpus_mod._DOUBLE_HYPOTHESES + corpus_mod._NESTED_HYPOTHESES
                 + corpus_mod._SECTION_PREMISES + corpus_mod._SECTION_HYPOTHESES] + list(corpus_mod._NESTED_PREMISES)
    vocab = set()
    for t in templates + list(nn.FINDINGS) + list(nn.SECTIONS):
        vocab |= set(words(re.sub(r"\{\w+\}", " ", t)))
    for c in CASES:
        text = c.premise + " " + c.hypothesis
        assert not any(ch in string.digits for ch in text)
        assert set(words(text)) <= vocab, c.case_id


@pytest.mark.parametrize("premise,hypothesis,gold", [
    # hand-labelled: read the sentences, not the generator
    ("The patient denies chest pain.", "The patient has chest pain.", "contradiction"),
    ("There is no indication that chest pain is not present.", "The patient has chest pain.", "neutral"),
    ("Chest pain is not absent.", "The patient has chest pain.", "entailment"),
    ("Fever is not absent.", "The patient has no fever.", "contradiction"),
    ("It is not true that pneumonia is not absent.", "The patient has pneumonia.", "contradiction"),
    ("Past Medical History: The patient has no nausea. Physical Exam: The patient has dizziness.",
     "Physical Exam: The patient has nausea.", "neutral"),
    ("History of Present Illness: The patient has no chest pain. Past Medical History: The patient has "
     "chest pain.", "Past Medical History: The patient has chest pain.", "entailment"),
])
def test_hand_labelled_cases(premise, hypothesis, gold):
    hits = [c for c in CASES if c.premise == premise and c.hypothesis == hypothesis]
    assert len(hits) == 1 and hits[0].gold_label == gold


def test_case_validation_is_value_free():
    with pytest.raises(NliNegationInputError, match="unknown gold label") as e:
        nn.NliNegationCase("SECRET-ID", "simple", "SECRET-P", "SECRET-H", "SECRET-LABEL", 1)
    assert "SECRET" not in str(e.value)
    with pytest.raises(NliNegationInputError, match="section is only allowed"):
        nn.NliNegationCase("a", "simple", "p", "h", "neutral", 1, section="Assessment")
    with pytest.raises(NliNegationInputError, match="synthetic"):
        nn.NliNegationCase("a", "simple", "p", "h", "neutral", 1, synthetic=False)
    with pytest.raises(NliNegationInputError, match="PHI"):
        nn.NliNegationCase("a", "simple", "p", "h", "neutral", 1, contains_real_phi=True)


# --------------------------------------------------------------------------------------------- loader

def test_exchange_formats_load_to_the_same_cases():
    a = nn.load_nli_negation_cases(FIXTURES / "exchange_list.json")
    b = nn.load_nli_negation_cases(FIXTURES / "exchange_wrapped.json")
    c = nn.load_nli_negation_cases(FIXTURES / "exchange.jsonl")
    assert a == b == c
    assert [x.case_id for x in a] == [f"fx-00{i}" for i in range(1, 7)]
    assert [x.pattern for x in a] == ["simple", "simple", "nested", "double", "section_scoped", "section_scoped"]
    assert a[0].gold_label == "contradiction" and a[0].negation_depth is None
    report = nn.run_nli_negation_challenge(gold_map(a), cases=a)
    assert report.gate.passed and report.n_cases == 6


def write_rows(tmp_path, rows, name="cases.json"):
    p = tmp_path / name
    if name.endswith(".jsonl"):
        p.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    else:
        p.write_text(json.dumps(rows))
    return p


def row(**kw):
    base = {"case_id": "SECRET-ID-1", "pattern": "simple", "premise": "SECRET-PREMISE no fever.",
            "hypothesis": "SECRET-HYPOTHESIS fever.", "gold_label": "contradiction", "synthetic": True,
            "contains_real_phi": False}
    base.update(kw)
    return {k: v for k, v in base.items() if v is not ...}


@pytest.mark.parametrize("bad,expect", [
    ({"synthetic": ...}, "synthetic flag"),
    ({"contains_real_phi": ...}, "PHI flag"),
    ({"contains_real_phi": True}, "free of real PHI"),
    ({"synthetic": False}, "explicitly synthetic"),
    ({"id": "SECRET-ID-OTHER"}, "ambiguous row"),
    ({"label": "SECRET-LABEL-OTHER"}, "ambiguous row"),
    ({"category": "nested"}, "ambiguous row"),
    ({"phi_free": False}, "disagree"),
    ({"phi_free": "yes"}, "phi_free must be true or false"),
    ({"contains_real_phi": "no"}, "contains_real_phi must be true or false"),
    ({"contains_real_phi": ..., "phi_free": False}, "free of real PHI"),
    ({"gold_label": "SECRET-LABEL"}, "unknown gold label"),
    ({"pattern": "SECRET-PATTERN"}, "unknown pattern"),
    ({"premise": ...}, "missing field 'premise'"),
    ({"negation_depth": -1}, "negation_depth"),
    ({"synthetic": "yes"}, "synthetic must be true or false"),
])
@pytest.mark.parametrize("suffix", [".json", ".jsonl"])
def test_bad_fixture_rows_fail_closed_naming_file_and_row(tmp_path, bad, expect, suffix):
    rows = [row(case_id="ok-1"), row(**bad)]
    p = write_rows(tmp_path, rows, "cases" + suffix)
    with pytest.raises(NliNegationInputError) as e:
        nn.load_nli_negation_cases(p)
    msg = str(e.value)
    assert expect in msg and "row 2" in msg and str(p) in msg
    assert_value_free(msg.replace(str(p), ""))
    assert "fever" not in msg


def test_fixture_duplicates_and_same_valued_aliases(tmp_path):
    p = write_rows(tmp_path, [row(), row()])
    with pytest.raises(NliNegationInputError, match=r"row 2: duplicate case id \(first used in row 1\)") as e:
        nn.load_nli_negation_cases(p)
    assert "SECRET" not in str(e.value)
    # the same value under two aliases is not ambiguous
    p = write_rows(tmp_path, [row(id="SECRET-ID-1", label="contradiction", phi_free=True)])
    (case,) = nn.load_nli_negation_cases(p)
    assert case.case_id == "SECRET-ID-1" and case.gold_label == "contradiction"


@pytest.mark.parametrize("content,name,expect", [
    ("{not json", "x.json", "not valid JSON"),
    ('{"rows": []}', "x.json", "expected a JSON list"),
    ("[]", "x.json", "holds no cases"),
    ("[1]", "x.json", "row 1: expected a JSON object"),
    ('{"case_id": 1}\n{bad', "x.jsonl", "row 2: not valid JSON"),
    ("a,b", "x.csv", "unsupported file type"),
])
def test_bad_fixture_files(tmp_path, content, name, expect):
    p = tmp_path / name
    p.write_text(content)
    with pytest.raises(NliNegationInputError, match=re.escape(expect)):
        nn.load_nli_negation_cases(p)
    with pytest.raises(NliNegationInputError, match="no such file"):
        nn.load_nli_negation_cases(tmp_path / "missing.json")


# --------------------------------------------------------------------------------------------- scoring

def test_scores_match_sklearn_on_random_predictions():
    rng = np.random.default_rng(7)
    choices = np.array(["entailment", "neutral", "contradiction", "abstention"])
    preds = list(rng.choice(choices, size=len(CASES)))
    report = nn.run_nli_negation_challenge(preds, minimum_aggregate_accuracy=None)
    for name, idx in [("all", range(len(CASES)))] + [
            (p, [i for i, c in enumerate(CASES) if c.pattern == p]) for p in nn.PATTERNS]:
        gold = [CASES[i].gold_label for i in idx]
        pred = [preds[i] for i in idx]
        labels = ["entailment", "neutral", "contradiction", "abstention"]
        cm = confusion_matrix(gold, pred, labels=labels)
        fe_k, fe_n = int(cm[1:3, 0].sum()), int(cm[1:3, :].sum())
        got = report if name == "all" else report.pattern(name)
        assert got.aggregate_accuracy.value == pytest.approx(accuracy_score(gold, pred), abs=1e-12)
        assert (got.false_entailment_rate.successes, got.false_entailment_rate.trials) == (fe_k, fe_n)
        ci = binomtest(fe_k, fe_n).proportion_ci(confidence_level=0.95, method="exact")
        assert (got.false_entailment_rate.ci_low, got.false_entailment_rate.ci_high) == \
            pytest.approx((ci.low, ci.high), abs=1e-12)
        assert got.n_abstentions == pred.count("abstention")


def test_hand_computed_small_case_set():
    cases = [nn.NliNegationCase("a", "simple", "p1", "h1", "entailment", 0),
             nn.NliNegationCase("b", "simple", "p2", "h2", "contradiction", 1),
             nn.NliNegationCase("c", "double", "p3", "h3", "neutral", 2),
             nn.NliNegationCase("d", "double", "p4", "h4", "contradiction", 2)]
    # a correct; b false entailment; c abstains (wrong, not a false entailment); d correct
    r = nn.run_nli_negation_challenge({"d": "contradiction", "a": "entailment", "b": "entailment", "c": None},
                                      cases=cases, max_false_entailment_rate=0.4)
    assert (r.aggregate_accuracy.successes, r.aggregate_accuracy.trials) == (2, 4)
    assert (r.false_entailment_rate.successes, r.false_entailment_rate.trials) == (1, 3)
    assert r.false_entailment_rate.value == pytest.approx(1 / 3)
    assert r.n_abstentions == 1
    assert [p.pattern for p in r.patterns] == ["simple", "double"]
    simple, double = r.pattern("simple"), r.pattern("double")
    assert simple.aggregate_accuracy.value == 0.5 and simple.false_entailment_rate.value == 1.0
    assert double.aggregate_accuracy.value == 0.5 and double.false_entailment_rate.value == 0.0
    # 1/3 <= 0.4 and 0.5 >= 0.5: both gates pass at their edges
    assert r.gate.false_entailment_gate_passed and r.gate.accuracy_gate_passed and r.gate.passed
    # no contradiction/neutral gold: the rate is undefined and the safety gate fails closed
    r0 = nn.run_nli_negation_challenge(["entailment"], cases=cases[:1])
    assert r0.false_entailment_rate.value is None and not r0.gate.false_entailment_gate_passed


def test_gold_passes_every_gate():
    r = nn.run_nli_negation_challenge(gold_map())
    assert r.aggregate_accuracy.value == 1.0 and r.false_entailment_rate.value == 0.0
    assert r.gate.passed and r.gate.false_entailment_gate_passed and r.gate.accuracy_gate_passed
    assert r.case_set_sha256 == PINNED_SHA256


def test_always_entailment_fails_the_safety_gate():
    r = nn.run_nli_negation_challenge(predictor=nn.always_entailment)
    n_ent = sum(c.gold_label == "entailment" for c in CASES)
    assert r.aggregate_accuracy.value == pytest.approx(n_ent / len(CASES))       # 75/207
    assert r.false_entailment_rate.value == 1.0 and r.false_entailment_rate.trials == len(CASES) - n_ent
    assert not r.gate.false_entailment_gate_passed and not r.gate.passed


def test_always_abstain_fails_the_combined_gate_but_not_the_safety_gate():
    r = nn.run_nli_negation_challenge(predictor=nn.always_abstain)
    assert r.aggregate_accuracy.value == 0.0 and r.n_abstentions == len(CASES)
    assert r.false_entailment_rate.value == 0.0
    assert r.gate.false_entailment_gate_passed and not r.gate.accuracy_gate_passed and not r.gate.passed
    # switching the floor off (openmed's default) lets it pass: the reason the floor is on here
    off = nn.run_nli_negation_challenge(predictor=nn.always_abstain, minimum_aggregate_accuracy=None)
    assert off.gate.passed and off.gate.to_dict()["accuracy_gate_enabled"] is False


def test_default_floor_rejects_every_constant_predictor():
    assert nn.DEFAULT_MINIMUM_AGGREGATE_ACCURACY == 0.5
    largest_share = max(Counter(c.gold_label for c in CASES).values()) / len(CASES)
    assert largest_share == pytest.approx(75 / 207)
    for label in (*nn.LABELS, None):
        r = nn.run_nli_negation_challenge([label] * len(CASES))
        assert not r.gate.accuracy_gate_passed


def test_threshold_edges_and_bad_thresholds():
    preds = [c.gold_label for c in CASES]
    preds[0] = "entailment" if CASES[0].gold_label != "entailment" else preds[0]
    r = nn.run_nli_negation_challenge(preds, max_false_entailment_rate=1 / 132)
    assert r.false_entailment_rate.successes == 1 and r.gate.false_entailment_gate_passed
    assert not nn.run_nli_negation_challenge(preds).gate.false_entailment_gate_passed
    for kw in ({"max_false_entailment_rate": -0.1}, {"max_false_entailment_rate": None},
               {"minimum_aggregate_accuracy": 1.5}, {"minimum_aggregate_accuracy": float("nan")},
               {"max_false_entailment_rate": True}):
        with pytest.raises(NliNegationInputError, match="parameter"):
            nn.run_nli_negation_challenge(preds, **kw)


# --------------------------------------------------------------------------------------------- contract

def test_predictor_contract_forms_agree():
    gold = [c.gold_label for c in CASES]
    by_pair = {(c.premise, c.hypothesis): c.gold_label for c in CASES}

    class CaseCallable:
        def __call__(self, case):
            return case.gold_label

    class Batch:
        calls = 0

        def predict_batch(self, premises, hypotheses):
            Batch.calls += 1
            return [by_pair[(p, h)] for p, h in zip(premises, hypotheses)]

    reports = [
        nn.run_nli_negation_challenge(gold),                                  # list in case order
        nn.run_nli_negation_challenge(iter(gold)),                            # any iterable
        nn.run_nli_negation_challenge(tuple(g.upper() + " " for g in gold)),  # case/space-insensitive
        nn.run_nli_negation_challenge(gold_map()),                            # mapping by case id
        nn.run_nli_negation_challenge(predictor=lambda p, h: by_pair[(p, h)]),
        nn.run_nli_negation_challenge(predictor=lambda case: case.gold_label),
        nn.run_nli_negation_challenge(predictor=CaseCallable()),
        nn.run_nli_negation_challenge(predictor=Batch()),
    ]
    assert Batch.calls == 1
    assert len({r.to_json() for r in reports}) == 1
    assert nn.collect_predictions(CASES[:3], predictions=["abstention", None, " Neutral"]) == [None, None, "neutral"]


def test_digests_bind_predictions_to_cases():
    gold = [c.gold_label for c in CASES]
    r1 = nn.run_nli_negation_challenge(gold)
    flipped = list(gold)
    flipped[5] = "neutral" if gold[5] != "neutral" else "entailment"
    r2 = nn.run_nli_negation_challenge(flipped)
    assert r1.case_set_sha256 == r2.case_set_sha256 and r1.predictions_sha256 != r2.predictions_sha256
    expected = nn.predictions_sha256(gold, PINNED_SHA256)
    assert r1.predictions_sha256 == expected and re.fullmatch(r"[0-9a-f]{64}", expected)


SECRET_CASES = (nn.NliNegationCase("SECRET-ID-A", "simple", "SECRET-PREMISE-A", "SECRET-HYPO-A", "entailment", 0),
                nn.NliNegationCase("SECRET-ID-B", "nested", "SECRET-PREMISE-B", "SECRET-HYPO-B", "neutral", 2))


def assert_value_free(msg: str):
    assert "SECRET" not in msg, msg
    for lab in ("entailment", "neutral", "contradiction"):
        assert lab not in msg.replace("expected one of entailment, neutral, contradiction", ""), msg


@pytest.mark.parametrize("kwargs,expect", [
    ({"predictions": ["entailment", "SECRET-OUTPUT"]}, "prediction at position 2 is not a known label"),
    ({"predictions": ["entailment", 3]}, "prediction at position 2 is not a string"),
    ({"predictions": ["entailment"]}, "got 1 predictions for 2 cases"),
    ({"predictions": ["entailment", "neutral", "neutral"]}, "got 3 predictions for 2 cases"),
    ({"predictions": {"SECRET-ID-A": "entailment", "SECRET-KEY-X": "neutral"}},
     "1 case(s) without a prediction, 1 key(s) that are not case ids"),
    ({"predictions": "SECRET-STRING"}, "iterable in case order or a mapping"),
    ({"predictions": ["neutral", "neutral"], "predictor": nn.always_abstain}, "exactly one of"),
    ({}, "exactly one of"),
    ({"predictor": lambda p, h: "SECRET-OUTPUT"}, "prediction at position 1 is not a known label"),
    ({"predictor": "SECRET-NOT-CALLABLE"}, "predictor must be callable"),
])
def test_bad_predictions_raise_value_free(kwargs, expect):
    with pytest.raises(NliNegationInputError) as e:
        nn.run_nli_negation_challenge(cases=SECRET_CASES, **kwargs)
    assert expect in str(e.value)
    assert_value_free(str(e.value))


def test_duplicate_case_ids_raise_value_free():
    dup = (SECRET_CASES[0], SECRET_CASES[1], SECRET_CASES[0])
    with pytest.raises(NliNegationInputError, match="position 3 repeats the case id of the case at position 1") as e:
        nn.run_nli_negation_challenge(["neutral"] * 3, cases=dup)
    assert_value_free(str(e.value))
    with pytest.raises(NliNegationInputError, match="empty"):
        nn.run_nli_negation_challenge([], cases=[])
    with pytest.raises(NliNegationInputError, match="position 2 is not an NliNegationCase"):
        nn.run_nli_negation_challenge(["neutral"] * 2, cases=[SECRET_CASES[0], {"case_id": "x"}])


@pytest.mark.parametrize("batch", [False, True])
def test_predictor_exception_is_reraised_without_its_message(batch):
    def boom(premise, hypothesis):
        if premise.endswith("B"):
            raise KeyError(f"leaked {premise} / {hypothesis}")
        return "entailment"

    class Batch:
        def predict_batch(self, premises, hypotheses):
            raise ValueError("leaked " + " ".join(premises))

    with pytest.raises(NliNegationPredictorError) as e:
        nn.run_nli_negation_challenge(predictor=Batch() if batch else boom, cases=SECRET_CASES)
    msg = str(e.value)
    assert ("ValueError" if batch else "KeyError on the case at position 2") in msg
    assert e.value.__cause__ is None and e.value.__suppress_context__
    rendered = "".join(traceback.format_exception(e.value))
    assert "SECRET-" not in rendered and "leaked" not in rendered     # no chained original exception
    assert "During handling" not in rendered and "direct cause" not in rendered
    assert isinstance(e.value, NliNegationError)


# --------------------------------------------------------------------------------------------- reports

REPORT_KEYS = {"schema_version", "confidence_level", "interval_method", "n_cases", "n_abstentions",
               "aggregate_accuracy", "false_entailment_rate", "patterns", "gate", "case_set_sha256",
               "predictions_sha256"}
RATE_KEYS = {"successes", "trials", "value", "ci_low", "ci_high"}


def test_report_json_schema_is_closed():
    r = nn.run_nli_negation_challenge(predictor=nn.always_entailment)
    d = json.loads(r.to_json())
    assert set(d) == REPORT_KEYS
    assert d["schema_version"] == nn.REPORT_SCHEMA_VERSION and d["interval_method"] == "clopper-pearson"
    assert set(d["aggregate_accuracy"]) == RATE_KEYS == set(d["false_entailment_rate"])
    assert [p["pattern"] for p in d["patterns"]] == list(nn.PATTERNS)
    for p in d["patterns"]:
        assert set(p) == {"pattern", "n_cases", "n_abstentions", "aggregate_accuracy", "false_entailment_rate"}
    assert set(d["gate"]) == {"max_false_entailment_rate", "minimum_aggregate_accuracy", "accuracy_gate_enabled",
                              "false_entailment_gate_passed", "accuracy_gate_passed", "passed", "certify",
                              "false_entailment_upper_bound"}
    md = r.to_markdown()
    assert "| simple | 63 | 0 | 0.333 [0.220, 0.463] (21/63)" in md
    assert "| False-entailment ceiling | ≤ 0.000 | FAIL |" in md and PINNED_SHA256 in md


def leak_check(text: str, cases, raw_outputs):
    for c in cases:
        for s in (c.premise, c.hypothesis, c.case_id):
            assert s not in text
    # outputs: strip the fixed phrases that name the metric, then no label word may remain
    scrubbed = re.sub(r"false[_\- ]entailments?|n_abstentions|\| abstentions \|", "", text, flags=re.I)
    for out in set(raw_outputs) | {"entailment", "neutral", "contradiction", "abstention"}:
        if out:
            assert out.lower() not in scrubbed.lower(), out


def test_reports_of_trivial_and_custom_predictors_are_value_free():
    odd_outputs = {c.case_id: ["ENTAILMENT ", " Neutral", "contradiction", "Abstention", None][i % 5]
                   for i, c in enumerate(CASES)}
    runs = [(gold_map(), list(gold_map().values())), (odd_outputs, list(odd_outputs.values()))]
    for preds, raw in runs:
        r = nn.run_nli_negation_challenge(preds)
        leak_check(r.to_json() + r.to_markdown(), CASES, [o for o in raw if o])
    for fn in (nn.always_entailment, nn.always_abstain):
        r = nn.run_nli_negation_challenge(predictor=fn)
        leak_check(r.to_json() + r.to_markdown(), CASES, ["entailment"])
