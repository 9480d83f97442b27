"""The memorize baseline: majority rule over occurrences, most frequent label, longest-first matching."""
from __future__ import annotations

import pytest

from atlaslib.models.memorize import PhraseMemorizer, at_word_boundaries, find_occurrences


def span(text, phrase, label, nth=0):
    k = -1
    for _ in range(nth + 1):
        k = text.index(phrase, k + 1)
    return (k, k + len(phrase), label)


def test_docstring_example():
    m = PhraseMemorizer().fit([("chest pain and fever", [(0, 10, "problem"), (15, 20, "problem")])])
    assert m.predict("fever, then chest pain") == [(0, 5, "problem"), (12, 22, "problem")]


def test_more_than_half_of_occurrences():
    t1 = "pain here. pain there."
    t2 = "no pain. pain. pain."
    # 'pain': 5 occurrences, annotated 3 -> 3/5 > 1/2 kept
    docs = [(t1, [span(t1, "pain", "P", 0), span(t1, "pain", "P", 1)]), (t2, [span(t2, "pain", "P", 2)])]
    m = PhraseMemorizer().fit(docs)
    assert m.stats["pain"] == {"annotated": 3, "occurrences": 5, "label": "P", "kept": True}
    # annotated exactly half (2 of 4) -> not kept
    t3 = "cough cough cough cough"
    m2 = PhraseMemorizer().fit([(t3, [span(t3, "cough", "P", 0), span(t3, "cough", "P", 1)])])
    assert m2.stats["cough"]["annotated"] == 2 and m2.stats["cough"]["occurrences"] == 4
    assert not m2.stats["cough"]["kept"]
    assert m2.predict("cough") == []


def test_occurrences_only_at_word_boundaries():
    t = "pain and painful pains"
    m = PhraseMemorizer().fit([(t, [span(t, "pain", "P")])])
    assert m.stats["pain"]["occurrences"] == 1      # 'painful' and 'pains' do not count
    assert m.predict("painful pain") == [(8, 12, "P")]
    assert not at_word_boundaries("painful", 0, 4)
    assert at_word_boundaries("(pain)", 1, 5)
    assert find_occurrences("a-b a-bc", "a-b") == [0]


def test_most_frequent_label_and_first_seen_tie_break():
    t = "ct ct ct"
    m = PhraseMemorizer().fit([(t, [(0, 2, "test"), (3, 5, "treatment"), (6, 8, "test")])])
    assert m.phrases == {"ct": "test"}
    # tie 1:1 -> the label seen first in training order
    t2 = "mri mri"
    m2 = PhraseMemorizer().fit([(t2, [(0, 3, "B"), (4, 7, "A")])])
    assert m2.phrases == {"mri": "B"}


def test_labels_may_be_any_hashable():
    t = "biopsy yesterday"
    lab = ("EVENT", "BEFORE", "ACTUAL")
    m = PhraseMemorizer().fit([(t, [(0, 6, lab)])])
    assert m.predict("a biopsy") == [(2, 8, lab)]


def test_longest_first_non_overlapping_and_start_tie_break():
    docs = [("chest pain radiating", [(0, 20, "Q")]), ("chest pain", [(0, 10, "P")]),
            ("chest pain", [(0, 10, "P")]), ("fever", [(0, 5, "F")])]
    m = PhraseMemorizer().fit(docs)
    # 'chest pain' occurs 3 times (once inside the longer mention), annotated twice: kept
    assert m.stats["chest pain"] == {"annotated": 2, "occurrences": 3, "label": "P", "kept": True}
    text = "chest pain radiating and chest pain fever"
    assert m.predict(text) == [(0, 20, "Q"), (25, 35, "P"), (36, 41, "F")]
    # two equally long overlapping phrases: the earlier start wins
    t2 = "a b c"
    m2 = PhraseMemorizer().fit([(t2, [(0, 3, "X"), (2, 5, "Y")])])
    assert m2.predict("a b c") == [(0, 3, "X")]


def test_case_handling():
    t = "Pain at rest. pain"
    docs = [(t, [(0, 4, "P"), (14, 18, "P")])]
    exact = PhraseMemorizer().fit(docs)
    assert exact.predict("PAIN and Pain") == [(9, 13, "P")]
    folded = PhraseMemorizer(casefold=True).fit(docs)
    assert folded.stats["pain"]["annotated"] == 2
    assert folded.predict("PAIN and Pain") == [(0, 4, "P"), (9, 13, "P")]


def test_bad_input():
    with pytest.raises(ValueError, match="training document 0, span 0: offsets"):
        PhraseMemorizer().fit([("abc", [(2, 9, "X")])])
    with pytest.raises(ValueError, match="training document 1: expected"):
        PhraseMemorizer().fit([("abc", []), "not a pair"])
    with pytest.raises(ValueError, match="expects a str"):
        PhraseMemorizer().fit([]).predict(["a"])
