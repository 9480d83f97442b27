"""TempEval runs parse each Anafora file once: the reader and the official scorer share the parsed tree, and
the counts stay those of ``anafora.evaluate.score_dirs``."""
from __future__ import annotations

import collections
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import anafora.evaluate as official
import pytest

from atlaslib.cards.tempeval import runs, scoring
from atlaslib.cards.tempeval.anafora_io import parse_once, parse_root, write_corpus


@pytest.fixture
def parses(monkeypatch):
    """Every ``xml.etree.ElementTree.parse`` call (the reader's and anaforatools'), counted per file (a path,
    or a file object opened from one: its ``name``)."""
    counts = collections.Counter()
    real = ET.parse

    def counting(source, *a, **k):
        counts[str(Path(getattr(source, "name", source)).resolve())] += 1
        return real(source, *a, **k)

    monkeypatch.setattr(ET, "parse", counting)
    return counts


def test_a_synthetic_run_parses_each_file_once(tmp_path, parses):
    r = runs.run("synthetic-v1", "closest", "phase2", work_dir=tmp_path)
    files = {str(p.resolve()) for p in tmp_path.rglob("*.xml")}
    assert set(parses) == files  # the reference and the predictions are both read ...
    assert max(parses.values()) == 1  # ... each once
    assert r.table["n_documents"] == 12


def test_scores_equal_the_official_score_dirs_per_document(tmp_path):
    c = runs.load_corpus("synthetic-v1", work_dir=tmp_path / "w")
    docs, _ = runs.predict("closest", "phase2", c)
    write_corpus(docs, tmp_path / "pred")
    shutil.rmtree(tmp_path / "pred" / docs[0].doc_id)  # a document without predictions scores as empty
    table = scoring.score_directories(c.reference_dir, tmp_path / "pred", closure=True, per_document=True)
    for row, view, kind in (("contains", ("TLINK", "Type", "CONTAINS"), official.Scores),
                            ("contains_closure", ("TLINK", "Type", "CONTAINS"), official.TemporalClosureScores),
                            ("doctimerel", ("EVENT", "DocTimeRel"), official.Scores)):
        theirs = dict(official.score_dirs(str(c.reference_dir), str(tmp_path / "pred"), include={view},
                                          scores_type=kind))
        for doc, ours in zip(table["per_document"]["doc_ids"], table["per_document"][row]):
            s = theirs[doc].get(view, kind())
            correct = s.correct if isinstance(s.correct, tuple) else (s.correct, s.correct)
            assert ours == [s.reference, s.predicted, *correct], (row, doc)


def test_the_cache_lives_only_inside_the_block_and_sees_rewrites(tmp_path, parses):
    f = tmp_path / "a.xml"
    f.write_text("<data><annotations/></data>")
    with parse_once():
        assert parse_root(f) is parse_root(f)
        f.write_text("<data><annotations></annotations><x/></data>")  # another size: parsed again
        assert parse_root(f).find("x") is not None
    assert parses[str(f.resolve())] == 2
    parse_root(f)
    assert parses[str(f.resolve())] == 3


def test_the_memoised_selection_gives_the_scorers_own_table(tmp_path, monkeypatch):
    """The scorer's Select, memoised, answers as anaforatools' own: the whole table of a synthetic run with
    closure and per-document counts is the same with it and without it; and it is only in place while
    scoring."""
    import contextlib

    import anafora.select

    corpus = runs.load_corpus("synthetic-v1", work_dir=tmp_path / "ref")
    system, _ = runs.predict("memorize", "phase1", corpus)
    write_corpus(system, tmp_path / "sys")
    fast = scoring.score_directories(corpus.reference_dir, tmp_path / "sys", closure=True, per_document=True)
    assert anafora.select.Select is not scoring._MemoSelect
    monkeypatch.setattr(scoring, "_memo_select", contextlib.nullcontext)
    plain = scoring.score_directories(corpus.reference_dir, tmp_path / "sys", closure=True, per_document=True)
    assert fast == plain and fast["rows"]
