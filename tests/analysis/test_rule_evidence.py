"""The rule adapters' evidence: every recorded trigger lies inside the sentence the rules saw and its text is
the span's text; ABSENT/POSSIBLE always have one, PRESENT never. On the NegEx n100 items with both rule
systems, and over a NegEx result cell written by the card's notebook (negspacy's run among the session's
reference runs, ``tests/books.py``)."""
from __future__ import annotations

import json

import pytest

from atlaslib.analysis.triggers import trigger_tables
from atlaslib.cards import negex
from atlaslib.models import load_adapter
from atlaslib.models.rules import split_marked

from .cells import negex_cell


def check_evidence(cell: dict, sentences: dict) -> list[str]:
    """Problems with a cell's evidence: for every record with a trigger, its span must lie inside the item's
    sentence (``sentences``: item_id -> the unmarked sentence the rules saw, the card's ``sentence``) and
    ``sentence[start:end]`` must equal the trigger text. Returns one line per problem (empty = all good)."""
    out = []
    for r in cell.get("predictions") or []:
        e = r.get("evidence")
        if not e:
            continue
        text = sentences.get(r["item_id"])
        if text is None:
            out.append(f"{r['item_id']}: no sentence for this item")
            continue
        a, b = e["span"]
        if not (0 <= a < b <= len(text)):
            out.append(f"{r['item_id']}: span {a}-{b} outside the sentence (length {len(text)})")
        elif text[a:b] != e["trigger"]:
            out.append(f"{r['item_id']}: sentence[{a}:{b}] = {text[a:b]!r}, trigger {e['trigger']!r}")
    return out


@pytest.fixture(scope="module")
def n100(data_dir):
    items = negex.load_items(data_dir)
    _, test = negex.split_frames(items, negex.split(items, "atlas-n100-v1"))
    return test


@pytest.mark.parametrize("profile", ["negspacy-negex-kit", "medspacy-context"])
def test_every_trigger_span_is_its_text_in_the_sentence(profile, n100, data_dir):
    opts = {"data_dir": data_dir} if profile.startswith("negspacy") else {}
    adapter = load_adapter(profile, "predict.assertion", progress=False, **opts)
    labels = adapter.predict_assertion(n100["text"].tolist())
    evidence = adapter.last_evidence
    assert len(evidence) == len(labels) == len(n100)
    with_trigger = 0
    for text, sentence, label, e in zip(n100["text"], n100["sentence"], labels, evidence):
        assert split_marked(text)[0] == sentence             # the text the rules saw = the card's sentence
        assert (e is None) == (label == "PRESENT")
        if e is not None:
            a, b = e["span"]
            assert 0 <= a < b <= len(sentence) and sentence[a:b] == e["trigger"]
            with_trigger += 1
    assert with_trigger >= 20                                   # n100 holds 30 negated items
    # the card's records carry the same evidence, and the checker agrees
    out = {"pred": [int(x == "ABSENT") for x in labels], "adapter": adapter}
    recs = negex.predictions(n100, out, data_dir)
    assert [r["evidence"] for r in recs] == evidence
    assert check_evidence({"predictions": recs}, dict(zip(n100["item_id"], n100["sentence"]))) == []


def test_checker_reports_a_wrong_span():
    recs = [{"item_id": "a", "evidence": {"trigger": "no", "category": "[PREN]", "span": [0, 2]}},
            {"item_id": "b", "evidence": {"trigger": "no", "category": "[PREN]", "span": [1, 3]}},
            {"item_id": "c", "evidence": {"trigger": "no", "category": "[PREN]", "span": [5, 9]}}]
    problems = check_evidence({"predictions": recs}, {"a": "no pain", "b": "no pain", "c": "no pain"})
    assert len(problems) == 2 and problems[0].startswith("b: sentence[1:3] = 'o '") and "outside" in problems[1]


@pytest.mark.xdist_group("reference_runs")
def test_a_notebook_written_negex_cell_holds_valid_evidence(data_dir, reference_runs):
    paths = reference_runs[0]
    cell = json.loads((paths.results / "negex/atlas-n100-v1/negspacy-negex-kit/zero_shot.json").read_text())
    assert cell["status"] == "ok"
    with_evidence = [r for r in cell["predictions"] if r.get("evidence")]
    assert len(with_evidence) >= 20                           # the rules fired on most of n100's negated items
    items = negex.load_items(data_dir)
    sentences = dict(zip(items["item_id"], items["sentence"]))
    assert check_evidence(cell, sentences) == []
    # and the checker reads this cell: one span moved by a character is reported
    r = with_evidence[0]
    moved = {**cell, "predictions": [{**r, "evidence": {**r["evidence"], "span": [s + 1 for s in r["evidence"]["span"]]}}]}
    assert len(check_evidence(moved, sentences)) == 1


def test_trigger_tables_count_false_positives_and_misses():
    gold = ["affirmed", "affirmed", "affirmed", "negated", "negated", "negated"]
    pred = ["negated", "negated", "negated", "affirmed", "affirmed", "negated"]
    ev = [{"trigger": "No", "category": "[PREN]", "span": [0, 2]}, {"trigger": "no", "category": "[PREN]", "span": [0, 2]},
          {"trigger": "denies", "category": "[PREN]", "span": [0, 6]}, None,
          {"trigger": "possible", "category": "[PREP]", "span": [0, 8]}, {"trigger": "no", "category": "[PREN]", "span": [0, 2]}]
    cells = [negex_cell("negspacy", gold, pred, evidence=ev, trigger_side=[None, None, None, "after", None, None]),
             negex_cell("probe", gold, gold)]                  # no evidence: left out
    t = trigger_tables(cells)
    fp = t["false_positives"].set_index("trigger")["count"].to_dict()
    assert fp == {"no": 2, "denies": 1}                         # case-folded, most frequent first
    fn = t["false_negatives"]
    assert fn["trigger"].tolist() == ["no trigger in scope", "possible"]
    assert fn.iloc[0]["category"] == "a kit negation trigger elsewhere in the sentence"
    assert set(t["false_positives"]["run"]) == {"negspacy (zero_shot)"}
