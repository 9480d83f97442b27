"""Clinical TempEval card: Anafora I/O, the official-scorer wrapper vs the anaforatools CLI, the closure
toy case of anaforatools' own tests, the real THYME counts, baseline rules, the synthetic corpus."""
from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest

from atlaslib.cards import get_card
from tests.metrics.reference import bootstrap_f1
from atlaslib.cards.tempeval import CARD, audit, baselines, runs, scoring, synthetic, thyme_dir
from atlaslib.cards.tempeval.anafora_io import (SCHEMA, AnaforaError, Document, Entity, Relation, check_document,
                                                 read_corpus, read_document, to_xml_string, write_corpus,
                                                 write_document)

FIXTURES = Path(__file__).parent / "fixtures" / "tempeval"


@pytest.fixture(scope="module")
def corpus():
    return synthetic.build_corpus()


@pytest.fixture(scope="module")
def real_dirs(data_dir):
    return {s: thyme_dir(s, data_dir) for s in ("Train", "Dev")}


@pytest.fixture(scope="module")
def real_docs(real_dirs):
    return {s: read_corpus(p) for s, p in real_dirs.items()}


# --- the stray venv/ folder of the anaforatools wheel -----------------------------------------------

def test_import_venv_is_the_stdlib_and_anafora_is_anaforatools():
    import sysconfig
    import venv

    stdlib = Path(sysconfig.get_paths()["stdlib"]).resolve()
    assert stdlib in Path(venv.__file__).resolve().parents
    assert hasattr(venv, "EnvBuilder")
    info = scoring.check_import_shadowing()
    assert info["anaforatools"] == "1.2.0" and info["anafora"].endswith("anafora/__init__.py")


def test_guard_refuses_a_namespace_venv(monkeypatch):
    import importlib.machinery
    import importlib.util

    fake = importlib.machinery.ModuleSpec("venv", None, is_package=True)
    fake.submodule_search_locations = ["/x/site-packages/venv"]
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: fake if name == "venv" else real(name, *a))
    with pytest.raises(ImportError, match="stray venv/ folder"):
        scoring.check_import_shadowing()


def test_guard_refuses_an_anaforatools_without_the_anafora_package(monkeypatch):
    """anaforatools' own file list must hold anafora/__init__.py (else 'anafora' is some other package's)."""
    from importlib import metadata

    real = metadata.distribution("anaforatools")

    class Without:
        files = [f for f in real.files if str(f) != "anafora/__init__.py"]
        locate_file = staticmethod(real.locate_file)

    monkeypatch.setattr(scoring.metadata, "distribution", lambda name: Without() if name == "anaforatools" else
                        metadata.distribution(name))
    with pytest.raises(ImportError, match="hold no anafora/__init__.py"):
        scoring.check_import_shadowing()


# --- Anafora XML ------------------------------------------------------------------------------------

def test_round_trip_real_and_synthetic(tmp_path, real_dirs, corpus):
    real = read_corpus(real_dirs["Dev"])[:5]
    write_corpus(real, tmp_path / "real")
    back = read_corpus(tmp_path / "real")
    assert back == real
    assert sum(len(d.entities) for d in back) > 100
    syn = corpus["Train"][:4]
    write_corpus(syn, tmp_path / "syn", write_text=True)
    back = read_corpus(tmp_path / "syn")
    assert back == syn and all(d.text for d in back)
    # the official library reads our XML the same way
    import anafora

    d = anafora.AnaforaData.from_file(str(tmp_path / "syn" / syn[0].doc_id / syn[0].file_name))
    assert sorted(a.id for a in d.annotations) == sorted(a.id for a in [*syn[0].entities, *syn[0].relations])


def test_documents_without_text_are_fine(real_dirs):
    docs = read_corpus(real_dirs["Dev"])
    assert len(docs) == 147 and all(d.text is None for d in docs)


def test_malformed_xml_named_by_file_and_line(tmp_path):
    folder = tmp_path / "doc1"
    folder.mkdir()
    bad = folder / "doc1.Temporal-Relation.gold.completed.xml"
    bad.write_text('<?xml version="1.0"?>\n<data>\n<annotations>\n<entity><id>1</id>\n<span>0,3</spam>\n'
                   '</entity></annotations></data>\n')
    with pytest.raises(AnaforaError, match=re.escape(str(bad)) + r".*line 5"):
        read_document(bad)
    with pytest.raises(scoring.ScoringError, match=re.escape(str(bad)) + r".*line 5"):
        scoring.score_directories(tmp_path, tmp_path)


def test_tlink_to_missing_id_is_a_clear_error(tmp_path):
    doc = Document("d", [Entity("1@e", "EVENT", ((0, 4),), {})],
                   [Relation("1@r", "TLINK", {"Source": "1@e", "Type": "CONTAINS", "Target": "99@e"})])
    folder = tmp_path / "d"
    folder.mkdir()
    (folder / doc.file_name).write_text(to_xml_string(doc))
    with pytest.raises(AnaforaError, match=r"TLINK '1@r' has Target '99@e', but no annotation in this file"):
        read_document(folder / doc.file_name)
    with pytest.raises(AnaforaError, match="99@e"):
        write_document(doc, tmp_path / "out")


def test_schema_covers_every_real_value_and_rejects_others(real_docs):
    for docs in real_docs.values():
        for d in docs:
            check_document(d, schema=True)
    bad = Document("d", [Entity("1", "TIMEX3", ((0, 3),), {"Class": "WEEKDAY"})])
    with pytest.raises(AnaforaError, match="Class='WEEKDAY'"):
        check_document(bad, schema=True)
    assert "PREPOSTEXP" in SCHEMA["TIMEX3"]["Class"]


# --- the scorer wrapper equals the anaforatools CLI -------------------------------------------------

def _cli(ref, pred, *extra) -> dict:
    out = subprocess.run([sys.executable, "-m", "anafora.evaluate", "-r", str(ref), "-p", str(pred), *extra],
                         capture_output=True, text=True, check=True).stdout
    rows = {}
    for line in out.splitlines()[1:]:
        name, refn, predn, corr, p, r, f1 = [c.strip() for c in line.split("\t")]
        rows[name] = {"reference": int(refn), "predicted": int(predn), "correct": corr,
                      "P": float(p), "R": float(r), "F1": float(f1)}
    return rows


def _pairs(tmp_path, corpus):
    """Three reference/prediction pairs on the synthetic test split: memorize phase 1, closest phase 2 with a
    dropped and a moved annotation, majority DocTimeRel."""
    c = runs.load_corpus("synthetic-v1", work_dir=tmp_path / "w")
    pairs = []
    for k, (model, protocol) in enumerate([("memorize", "phase1"), ("closest", "phase2"),
                                           ("majority-doctimerel", "phase2")]):
        docs, _ = runs.predict(model, protocol, c)
        if k == 1:
            docs = copy.deepcopy(docs)
            docs[0].relations = docs[0].relations[1:]
            e = docs[1].of_type("EVENT")[0]
            e.spans = ((e.start, e.end + 1),)
        write_corpus(docs, tmp_path / f"pred{k}")
        pairs.append((c.reference_dir, tmp_path / f"pred{k}"))
    return pairs


def test_wrapper_equals_cli_on_three_pairs(tmp_path, corpus):
    for ref, pred in _pairs(tmp_path, corpus):
        table = scoring.score_directories(ref, pred, closure=True)
        cli = _cli(ref, pred)
        cli_closure = _cli(ref, pred, "--temporal-closure", "-i", "TLINK:Type:CONTAINS")
        assert table["n_documents"] == 12
        for row in table["rows"]:
            c = (cli_closure if row["row"] == "contains_closure" else cli).get(row["view"])
            if c is None:  # the CLI prints no line for a view with no items on either side
                assert row["reference"] == row["predicted"] == 0
                continue
            assert (row["reference"], row["predicted"]) == (c["reference"], c["predicted"]), row["view"]
            corr = (str(row["correct"]) if row["correct"] is not None
                    else f"({row['precision_correct']}, {row['recall_correct']})")
            assert corr == c["correct"], row["view"]
            for ours, theirs in (("precision", "P"), ("recall", "R"), ("f1", "F1")):
                assert round(row[ours], 3) == pytest.approx(c[theirs], abs=1e-9), (row["view"], ours)
        rows = {r["row"]: r for r in table["rows"]}
        if rows["event_span"]["f1"] > 0:
            assert rows["event_polarity"]["A"] == pytest.approx(rows["event_polarity"]["f1"] / rows["event_span"]["f1"])


def test_per_document_counts_sum_to_the_table_and_feed_the_bootstrap(tmp_path, corpus):
    import numpy as np

    ref, pred = _pairs(tmp_path, corpus)[0]
    table = scoring.score_directories(ref, pred, closure=True, per_document=True)
    per = table["per_document"]
    assert len(per["doc_ids"]) == table["n_documents"] == 12
    for row in table["rows"]:
        sums = np.asarray(per[row["row"]]).sum(axis=0)
        pc = row["correct"] if row["correct"] is not None else row["precision_correct"]
        rc = row["correct"] if row["correct"] is not None else row["recall_correct"]
        assert list(sums) == [row["reference"], row["predicted"], pc, rc], row["row"]
        b = bootstrap_f1(per[row["row"]], n_resamples=200)
        assert b["value"] == pytest.approx(row["f1"]) and b["ci_low"] <= b["value"] + 1e-12 <= b["ci_high"] + 2e-12
    # identical documents: every resample has the same ratio, the interval collapses to the value
    same = bootstrap_f1([[4, 5, 3, 3]] * 6, n_resamples=50)
    assert same["ci_low"] == same["ci_high"] == same["value"] == pytest.approx(2 * 0.6 * 0.75 / 1.35)
    # the scorer's conventions: nothing predicted -> P = 1, F1 = 0 when nothing correct
    assert [float(x) for x in scoring.f1_from_counts(3, 0, 0, 0)] == [1.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="one \\[reference, predicted"):
        bootstrap_f1([[1, 2, 3]])


def test_cli_main_prints_the_table_as_json(tmp_path, corpus, capsys):
    ref, pred = _pairs(tmp_path, corpus)[0]
    assert scoring.main(["-r", str(ref), "-p", str(pred), "--closure"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads(json.dumps(scoring.score_directories(ref, pred, closure=True)))
    assert scoring.main(["-r", str(tmp_path / "nope"), "-p", str(pred)]) == 2


def test_the_table_frame_carries_the_table_numbers(tmp_path, corpus):
    ref, pred = _pairs(tmp_path, corpus)[0]
    table = scoring.score_directories(ref, pred, closure=True)
    rows = {r["row"]: r for r in table["rows"]}
    t = scoring.table_frame(table)
    assert t.loc["EVENT span + polarity", "A"] == rows["event_polarity"]["A"]
    assert t.loc["TIMEX3 span", "R"] == rows["timex3_span"]["recall"]
    assert t.loc["CONTAINS (closure)", "F1"] == rows["contains_closure"]["f1"]


def test_closure_toy_case_of_anaforatools():
    ref, pred = scoring.closure_toy_dirs()
    got = scoring.closure_toy_scores()
    assert Fraction(got["precision_correct"], got["predicted"]) == Fraction(6, 7)
    assert Fraction(got["recall_correct"], got["reference"]) == Fraction(4, 9)
    cli = _cli(ref, pred, "--temporal-closure", "-i", "TLINK:Type")["TLINK:Type"]
    assert (cli["P"], cli["R"], cli["correct"]) == (0.857, 0.444, "(6, 4)")


# --- the real annotations ---------------------------------------------------------------------------

def test_real_counts_scorer_and_elements(real_dirs, real_docs):
    # THYME's Table 1 (Bethard et al. 2016, Clinical TempEval), as the scorer counts them
    table1 = {"Train": {"documents": 293, "EVENT": 38890, "TIMEX3": 3833, "CONTAINS": 11176},
              "Dev": {"documents": 147, "EVENT": 20974, "TIMEX3": 2078, "CONTAINS": 6173}}
    for split, expected in table1.items():
        got = audit.scorer_counts(real_dirs[split], closure=(split == "Dev"))
        assert {k: got[k] for k in expected} == expected
    raw = {s: audit.raw_counts(d) for s, d in real_docs.items()}
    in_file = {s: audit.file_element_counts(d) for s, d in real_docs.items()}
    assert in_file["Train"]["EVENT"] == 39002 and raw["Train"]["EVENT"] == 38937
    assert raw["Train"]["CONTAINS"] == in_file["Train"]["CONTAINS"] == 11248
    assert raw["Dev"]["EVENT"] == 20974 and raw["Dev"]["CONTAINS"] == 6226
    dup = audit.duplicates(real_docs["Train"])
    # 39,002 - 65 (adjudication block) - 47 exact duplicates = 38,890; 11,248 - 72 = 11,176
    assert in_file["Train"]["EVENT"] - raw["Train"]["EVENT"] == 65
    assert raw["Train"]["EVENT"] - dup["EVENT_exact_duplicates"] == 38890
    assert raw["Train"]["CONTAINS"] - dup["CONTAINS_duplicate_pairs"] == 11176
    assert got["CONTAINS_after_closure"] > got["CONTAINS"]


def test_per_document_element_counts_match_the_provenance_table(real_docs, data_dir):
    import pandas as pd

    tsv = pd.read_csv(data_dir / "thyme" / "derived_counts_per_doc.tsv", sep="\t")
    for split, docs in real_docs.items():
        ours = audit.element_counts_per_document(docs).set_index("doc_id")
        theirs = tsv[tsv["split"] == split].set_index("doc_id")
        assert sorted(ours.index) == sorted(theirs.index)
        for col, their_col in (("EVENT", "EVENT"), ("TIMEX3", "TIMEX3"), ("CONTAINS", "TLINK_CONTAINS"),
                               ("TLINK", "TLINK"), ("ALINK", "ALINK"), ("DOCTIME", "DOCTIME")):
            assert (ours[col] == theirs.loc[ours.index, their_col]).all(), (split, col)


def test_contains_distances_match_hand_computation(real_docs):
    d = real_docs["Dev"][0]
    dist = audit.contains_distances({"Dev": [d]})
    ids = d.by_id()
    r = d.tlinks("CONTAINS")[0]
    s, t = ids[r.source], ids[r.target]
    hand = max(0, max(s.start, t.start) - min(s.end, t.end))
    assert dist.iloc[0]["gap"] == hand and len(dist) == len(d.tlinks("CONTAINS"))


# --- baselines ---------------------------------------------------------------------------------------

def _ev(i, s, e, **p):
    return Entity(i, "EVENT", ((s, e),), p)


def test_closest_distance_and_tie_rules():
    t = Entity("t", "TIMEX3", ((20, 30),), {"Class": "DATE"})
    left, right = _ev("left", 10, 15), _ev("right", 35, 40)    # both 5 characters away: the earlier wins
    far = _ev("far", 60, 70)

    def nearest(events):
        return [r.target for r in baselines.closest_relations(Document("d", [t, *events]))]
    assert nearest([far, right, left]) == ["left"]
    touching = _ev("touch", 30, 33)                            # gap 0
    assert nearest([left, touching]) == ["touch"]
    assert nearest([]) == []
    doc = Document("d", [t, Entity("t2", "TIMEX3", ((100, 104),), {}), left, right, far])
    rels = baselines.closest_relations(doc)
    assert [(r.source, r.target, r.properties["Type"]) for r in rels] == [("t", "left", "CONTAINS"),
                                                                          ("t2", "far", "CONTAINS")]


def test_majority_doctimerel_and_phase2_input():
    docs = [Document("a", [_ev("1", 0, 1, DocTimeRel="BEFORE"), _ev("2", 2, 3, DocTimeRel="AFTER")]),
            Document("b", [_ev("3", 0, 1, DocTimeRel="BEFORE"), _ev("4", 2, 3, DocTimeRel="AFTER")])]
    assert baselines.majority_doctimerel(docs)[0] == "AFTER"    # tie -> alphabetical
    docs[1].entities.append(_ev("5", 4, 5, DocTimeRel="BEFORE"))
    assert baselines.majority_doctimerel(docs) == ("BEFORE", {"BEFORE": 3, "AFTER": 2})
    gold = Document("g", [_ev("1", 0, 4, DocTimeRel="AFTER", Polarity="NEG")],
                    [Relation("r", "TLINK", {"Source": "1", "Type": "CONTAINS", "Target": "1"})])
    p2 = baselines.phase2_input(gold)
    assert p2.relations == [] and p2.entities[0].properties == {"Polarity": "NEG"}


def test_memorize_phase2_uses_memorized_label_else_majority():
    train = Document("tr", [_ev("1", 0, 6, ContextualModality="ACTUAL", Degree="N/A", Polarity="POS", Type="N/A",
                                DocTimeRel="AFTER"),
                            _ev("2", 12, 16, DocTimeRel="BEFORE"), _ev("3", 17, 21, DocTimeRel="BEFORE")],
                     text="biopsy then scan scan")
    m = baselines.Memorize().fit([train])
    test = Document("te", [_ev("a", 0, 6), _ev("b", 7, 12)], text="biopsy later")
    out = m.predict_phase2(test)
    assert [e.properties["DocTimeRel"] for e in out.entities] == ["AFTER", "BEFORE"]   # memorized / majority
    p1 = m.predict_phase1(Document("x", text="a biopsy, a scan"))
    assert [(e.start, e.end, e.type) for e in p1.entities] == [(2, 8, "EVENT"), (12, 16, "EVENT")]


def _metrics(version, model, protocol, work_dir=None):
    """The run's metrics as its cell holds them (scored by its CardRun), and the scorer's rows."""
    from atlaslib.cards.run import CardRun

    card_run = CardRun("tempeval", version, model, protocol)
    r = runs.run(version, model, protocol, work_dir=work_dir, load=card_run.load)
    return r.cell_parts(card_run)["metrics"], {x["row"]: x for x in r.table["rows"]}


def test_metrics_leave_out_what_a_model_does_not_predict(tmp_path):
    m, rows = _metrics("synthetic-v1", "closest", "phase2", tmp_path)
    assert m["contains_f1_phase2"]["value"] == pytest.approx(rows["contains"]["f1"])
    assert m["contains_f1_phase2"]["ci_low"] < m["contains_f1_phase2"]["value"] < m["contains_f1_phase2"]["ci_high"]
    assert m["doctimerel_f1_phase2"]["value"] is None and "not applicable" in m["doctimerel_f1_phase2"]["reason"]
    assert m["doctimerel_accuracy_phase2"]["value"] is None   # closest predicts no DocTimeRel
    m, rows = _metrics("synthetic-v1", "majority-doctimerel", "phase2")
    assert m["doctimerel_accuracy_phase2"]["value"] == pytest.approx(rows["doctimerel"]["f1"])  # the scorer's F1
    assert m["doctimerel_f1_phase2"]["value"] is None and "doctimerel_accuracy" in m["doctimerel_f1_phase2"]["reason"]


# --- one run path: the cell's metrics through CardRun.score ------------------------------------------

@pytest.mark.parametrize("model,protocol", [("memorize", "phase1"), ("closest", "phase2")])
def test_card_run_scores_as_the_index_by_index_document_bootstrap(tmp_path, model, protocol):
    """The notebook's metrics (CardRun.score on the scorer's per-document counts) against an independent
    reference: each addressed row's F1 with documents drawn index by index (scoring.bootstrap_f1, same seed,
    1,000 resamples): equal values and intervals; the metrics the baseline does not address are null with
    the card's reason, before any cell exists."""
    from atlaslib.cards.run import CardRun

    r = runs.run("synthetic-v1", model, protocol, work_dir=tmp_path)
    card_run = CardRun("tempeval", "synthetic-v1", model, protocol)
    parts = r.cell_parts(card_run)
    metrics = parts["metrics"]
    skipped = runs.not_addressed(model, protocol)
    per = r.table["per_document"]
    for base, row in runs.METRIC_ROWS.items():
        got = metrics[f"{base}_{protocol}"]
        if base in skipped:
            assert got["value"] is None and got["reason"] == skipped[base], base
            continue
        ref = bootstrap_f1(per[row], 1000, runs.BOOTSTRAP["seed"])
        assert [got["value"], got["ci_low"], got["ci_high"]] == [ref["value"], ref["ci_low"], ref["ci_high"]], base
    assert sum(m["value"] is not None for m in metrics.values()) == len(runs.ADDRESSES[(model, protocol)])
    cell = card_run.finish(**parts)
    assert cell["metrics"] == metrics and cell["unit_counts"]["undefined"] == skipped


def test_outside_systems_report_every_metric_but_the_given_spans():
    assert runs.not_addressed("system-x", "phase1") == {}
    assert set(runs.not_addressed("system-x", "phase2")) == {"event_span_f1", "timex_span_f1"}
    assert set(runs.not_addressed("closest", "phase2")) == set(runs.METRIC_ROWS) - {"contains_f1",
                                                                                  "contains_closure_f1"}


# --- synthetic corpus ---------------------------------------------------------------------------------

def test_synthetic_corpus_is_deterministic_valid_and_complete(corpus):
    again = synthetic.build_corpus()
    assert again == corpus
    assert synthetic.build_corpus(seed=1) != corpus
    docs = corpus["Train"] + corpus["Dev"]
    assert len(docs) >= 30 and len(corpus["Dev"]) >= 10
    assert not {d.doc_id for d in corpus["Train"]} & {d.doc_id for d in corpus["Dev"]}
    for d in docs:
        check_document(d, schema=True)
        for e in d.entities:
            assert d.text[e.start:e.end].strip() == d.text[e.start:e.end] != ""
    values = {(e.type, k, v) for d in docs for e in d.entities for k, v in e.properties.items()}
    for needed in [("TIMEX3", "Class", "PREPOSTEXP"), ("TIMEX3", "Class", "SET"), ("TIMEX3", "Class", "DURATION"),
                   ("EVENT", "ContextualModality", "HYPOTHETICAL"), ("EVENT", "ContextualModality", "HEDGED"),
                   ("EVENT", "ContextualModality", "GENERIC"), ("EVENT", "Degree", "LITTLE"), ("EVENT", "Degree", "MOST"),
                   ("EVENT", "Polarity", "NEG"), ("EVENT", "Type", "ASPECTUAL"), ("EVENT", "Type", "EVIDENTIAL"),
                   ("EVENT", "DocTimeRel", "AFTER"), ("EVENT", "DocTimeRel", "BEFORE/OVERLAP")]:
        assert needed in values, needed
    assert sum(len(d.tlinks()) for d in docs) > 50


def test_card_registry():
    card = get_card("tempeval")
    assert card is CARD and card.gated and card.notebook == "notebooks/tempeval.md"
    assert ("thyme-dev-2015", "closest", "phase2") in card.default_matrix
    assert len(card.default_matrix) == 6 and set(card.protocols) == {"phase1", "phase2"}


def test_thyme_audit_rows_for_the_reproduction_chapter(data_dir):
    rows = {r["figure"]: r for r in audit.thyme_audit(data_dir)["reproduction_rows"]}
    train = [rows[f"THYME Train {k} (Table 1)"] for k in ("documents", "EVENT", "TIMEX3", "CONTAINS")]
    assert [(r["published"], r["ours"], r["match"]) for r in train] == [
        (293, 293, True), (38890, 38890, True), (3833, 3833, True), (11176, 11176, True)]
    dev = [rows[f"THYME Dev {k} (Table 1)"] for k in ("documents", "EVENT", "TIMEX3", "CONTAINS")]
    assert [r["ours"] for r in dev] == [147, 20974, 2078, 6173]
    assert all(r["published"] is None and r["match"] is None for r in dev)  # unverified: not compared
    toy = rows["anaforatools closure toy case: precision"]
    assert toy["match"] and toy["ours"] == pytest.approx(6 / 7)
