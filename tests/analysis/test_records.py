"""The slice fields the cards write into their prediction records."""
from __future__ import annotations

import numpy as np
import pandas as pd

from atlaslib.cards import negex


def test_negex_item_slices_on_hand_made_items():
    sentences = ["HISTORY: Patient denies CHEST PAIN today.", "FEVER was not seen by the team at all.",
                 "Cough and FEVER noted.", "Cough and fever NOTED."]
    concepts = ["chest pain", "fever", "fever", "noted"]
    test = pd.DataFrame({"sentence": sentences, "concept": concepts,
                         "sentence_key": [negex.sentence_key(s) for s in sentences]})
    rows = negex.item_slices(test, triggers=["denies", "not", "not seen"])
    assert [r["section"] for r in rows] == ["HISTORY", None, None, None]
    assert [r["sentence_words"] for r in rows] == [6, 9, 4, 4]
    # "denies" right before the target; "not seen" after FEVER with one word ("was") between
    assert [(r["trigger_side"], r["trigger_gap"]) for r in rows] == [("before", 0), ("after", 1), (None, None),
                                                                      (None, None)]
    # rows 3 and 4 are one sentence (same key) with two concepts
    assert [r["n_concepts"] for r in rows] == [1, 1, 2, 2]
    assert rows[2]["sentence_key"] == rows[3]["sentence_key"] != rows[0]["sentence_key"]


def test_negex_declared_slices_name_record_fields(data_dir):
    items = negex.load_items(data_dir)
    rows = negex.item_slices(items.head(50), data_dir=data_dir)
    for spec in negex.SLICES.values():
        assert spec["field"] in rows[0]
    # n_concepts counts the kit's items sharing the sentence
    counts = items.groupby("sentence_key")["item_id"].size()
    assert (items["n_concepts"] == items["sentence_key"].map(counts)).all()


def test_nli_templates_fill_back_to_each_case():
    from atlaslib.cards.nli_negation.card import SLICES, case_templates
    from atlaslib.cards.nli_negation.corpus import FINDINGS, SECTIONS, default_nli_negation_cases

    cases = default_nli_negation_cases()
    templates = [case_templates(c) for c in cases]
    assert len({t["template"] for t in templates}) == 19       # 7 simple + 4 nested + 6 double + 2 section premises
    for c, t in zip(cases, templates):
        xs = [f for f in FINDINGS if f in c.premise.casefold() or f in c.hypothesis.casefold()]
        secs = [s for s in SECTIONS if s in c.premise]
        filled = None
        for x in xs:                                          # some (x, y, s1, s2) fills the template back
            for y in xs:
                for s1 in secs or [None]:
                    for s2 in secs or [None]:
                        f = dict(x=x, X=x[0].upper() + x[1:], y=y, s1=s1, s2=s2)
                        if t["template"].format(**f) == c.premise and t["hypothesis_template"].format(**f) == c.hypothesis:
                            filled = f
        assert filled is not None, c.case_id
        assert "{x}" in t["template"] or "{X}" in t["template"]
    assert {s["field"] for s in SLICES.values()} == {"pattern", "template", "hypothesis_template"}


def test_maccrobat_report_positions():
    from atlaslib.cards.maccrobat import report_positions

    items = pd.DataFrame({"item_id": [f"d0-s{i}" for i in range(6)] + ["d1-s0"],
                          "document": ["A"] * 6 + ["B"], "sent_index": [0, 1, 2, 3, 4, 5, 0]})
    pos = report_positions(items, ["d0-s0", "d0-s2", "d0-s3", "d0-s5", "d1-s0"])
    assert [p["report_position"] for p in pos] == ["first third", "middle third", "middle third", "last third",
                                                   "first third"]
    assert [p["report_sentences"] for p in pos] == [6, 6, 6, 6, 1]


def test_tempeval_outcome_counts_sum_to_the_scorers_rows():
    from atlaslib.cards.tempeval import runs

    r = runs.run("synthetic-v1", "closest", "phase1")
    rows = {x["row"]: x for x in r.table["rows"]}
    for field_, row in (("doctimerel", "doctimerel"), ("polarity", "event_polarity"),
                        ("timex3_class", "timex3_class"), ("contains_gap", "contains")):
        tot = np.zeros(4, int)
        for rec in r.predictions:
            for counts in rec["slices"][field_].values():
                tot += counts
        want = rows[row]
        assert tot.tolist() == [want["reference"], want["predicted"], want["correct"], want["correct"]], field_
    for kind, row in (("event_span", "event_span"), ("timex3_span", "timex3_span"), ("contains", "contains")):
        found = sum(rec["found"][kind].count("1") for rec in r.predictions)
        n = sum(len(rec["found"][kind]) for rec in r.predictions)
        assert (found, n) == (rows[row]["correct"], rows[row]["reference"]), kind


def test_tempeval_found_counts_what_the_scorer_counts_when_annotations_repeat(tmp_path):
    """An EVENT repeated exactly and a CONTAINS pair annotated twice are one item each for the official
    scorer (its reference is a set); the records' ``found`` strings, and so the disagreement table, count
    the same items: reference and correct equal the scorer's row."""
    from atlaslib.cards.tempeval import runs
    from atlaslib.cards.tempeval.anafora_io import Document, Entity, Relation, write_document
    from atlaslib.cards.tempeval.scoring import score_directories

    def ev(i, a, b, dtr="OVERLAP"):
        return Entity(f"{i}@e@d@gold", "EVENT", ((a, b),), {"DocTimeRel": dtr, "Type": "N/A", "Degree": "N/A",
                                                             "Polarity": "POS", "ContextualModality": "ACTUAL"})

    def tx(i, a, b):
        return Entity(f"{i}@e@d@gold", "TIMEX3", ((a, b),), {"Class": "DATE"})

    def tl(i, s, t):
        return Relation(f"{i}@r@d@gold", "TLINK", {"Source": f"{s}@e@d@gold", "Type": "CONTAINS",
                                                    "Target": f"{t}@e@d@gold"})

    gold = Document("d", [tx(1, 0, 5), ev(2, 10, 15), ev(3, 10, 15), ev(4, 20, 25), ev(5, 30, 35, "BEFORE")],
                    [tl(6, 1, 2), tl(7, 1, 3), tl(8, 1, 4), tl(9, 1, 5)])
    pred = Document("d", [tx(1, 0, 5), ev(2, 10, 15), ev(5, 30, 35, "AFTER")], [tl(6, 1, 2)],
                    annotator="system")
    write_document(gold, tmp_path / "ref")
    write_document(pred, tmp_path / "pred")
    rows = {r["row"]: r for r in score_directories(tmp_path / "ref", tmp_path / "pred")["rows"]}
    rec = runs.outcome_record(gold, pred)
    for kind, row in (("event_span", "event_span"), ("timex3_span", "timex3_span"), ("contains", "contains"),
                      ("doctimerel", "doctimerel")):
        bits = rec["found"][kind]
        assert (bits.count("1"), len(bits)) == (rows[row]["correct"], rows[row]["reference"]), (kind, bits, rows[row])
    assert rows["contains"]["reference"] == 3 and rows["event_span"]["reference"] == 3  # the repeats collapse
    # the explorer's slice values follow the same (deduplicated) items, one per bit
    for kind, values in rec["found_slices"].items():
        assert all(len(v) == len(rec["found"][kind]) for v in values.values()), kind
