"""Faults, fourth round, inputs: what users give the atlas is refused when it is ambiguous or out of range, in
one line naming the file (and row, option or entry) and what was expected, instead of being read silently.

One test per item as reported (the item number in the name): prediction files and JSON objects that give a
column or key twice (6), look-alike and case-only names (9), numeric profile options (10), and the smaller
ones of 13 (a NaN metric in a result cell, a licence text that says unconfirmed after its start, a profile name
YAML reads as true, a self-looping symlink as a data file, a model archive with an entry under a file entry).
Every test calls ``atlas`` in-process (``cli.main``) or the reader a command calls, and starts no kernel.
"""
from __future__ import annotations

import json

import pytest

from atlaslib import jsonio, predfiles
from tests.external.test_score import atlas  # atlas(capsys, *args) -> (exit code, stdout, stderr), in-process
from tests.test_faults_second_round import negex_ids, predictions, refused  # noqa: F401  (fixture)

N100 = "atlas-n100-v1"


# ------------------------------------------------------------------------------------------------ 6

def test_item06_a_csv_header_naming_a_column_twice_is_refused_naming_file_row_and_column(tmp_path, capsys,
                                                                                        negex_ids):
    f = tmp_path / "p.csv"
    f.write_text("item_id,label,label,score\n" + "".join(f"{i},affirmed,negated,0.5\n" for i in negex_ids))
    with pytest.raises(predfiles.PredictionsError) as exc:
        predfiles.read_predictions(f, "label")
    assert str(exc.value).startswith(f"{f}: row 1: the header names the column 'label' 2 times (columns 2, 3)")
    r = tmp_path / "results"
    line = refused(capsys, "score", "--card", "negex", "--version", N100, "--predictions", f, "--name", "sys",
                   "--results-dir", r)
    assert str(f) in line and "'label' 2 times" in line
    assert not r.exists() or not any(r.rglob("*.json"))


def test_item06_a_jsonl_row_giving_a_key_twice_is_refused_naming_file_row_and_key(tmp_path, capsys, negex_ids):
    f = predictions(tmp_path / "p.jsonl", negex_ids)
    rows = f.read_text().splitlines()
    rows[2] = rows[2][:-1] + ', "label": "negated"}'
    f.write_text("\n".join(rows) + "\n")
    r = tmp_path / "results"
    line = refused(capsys, "score", "--card", "negex", "--version", N100, "--predictions", f, "--name", "sys",
                   "--results-dir", r)
    assert f"{f}: row 3: an object gives the key 'label' twice" in line and "give each key once" in line
    assert not r.exists() or not any(r.rglob("*.json"))


def test_item06_any_json_file_giving_a_key_twice_is_refused_naming_the_file(tmp_path):
    from atlaslib.results import ResultCellError, read_cell

    cell = tmp_path / "cell.json"
    cell.write_text('{"card": "negex", "version": "v", "model": "a", "model": "b", "protocol": "zero_shot", '
                    '"status": "ok", "metrics": {}}')
    with pytest.raises(ResultCellError, match=r"cell\.json: an object gives the key 'model' twice"):
        read_cell(cell)
    assert jsonio.loads('{"a": {"b": 1}, "c": {"b": 2}}', "x") == {"a": {"b": 1}, "c": {"b": 2}}  # keys per object
    with pytest.raises(jsonio.JsonError, match=r"^x: an object gives the key 'b' twice"):
        jsonio.loads('[{"b": 1, "b": 1}]', "x")


# ------------------------------------------------------------------------------------------------ 9

def _score(f, name, r):
    return ("score", "--card", "negex", "--version", N100, "--predictions", f, "--name", name, "--results-dir", r)


def test_item09_multi_character_and_hyphen_look_alikes_of_built_in_names_are_refused(tmp_path, capsys, negex_ids,
                                                                                     monkeypatch):
    monkeypatch.setenv("ATLAS_PROFILES", "")
    r = tmp_path / "r"
    f = predictions(tmp_path / "p.jsonl", negex_ids)
    for name, other, said in (("rnedspacy-context", "medspacy-context", "'rn' at position 1 reads as 'm'"),
                              ("negspacy\u058anegex\u058akit", "negspacy-negex-kit", "U+058A (ARMENIAN HYPHEN) at "
                                                                                     "position 9 reads as '-'"),
                              ("negspacy\u2014negex\u2e3akit", "negspacy-negex-kit", "U+2014 (EM DASH)"),
                              ("\uff4dajority", "majority", "U+FF4D (FULLWIDTH LATIN SMALL LETTER M) at position 1 "
                                                            "reads as 'm'")):
        line = refused(capsys, *_score(f, name, r))
        assert f"--name {name!r} looks like {other!r}, a registry profile" in line and said in line, line
    assert not r.exists() or not any(r.rglob("*.json"))
    prof = tmp_path / "p.yml"
    prof.write_text("rnajority: {source: builtin, location: majority, revision: null, capabilities: "
                    "[predict.assertion], label_map: {}, trained_on: [], description: x}\n")
    line = refused(capsys, "list", "--profiles", prof)
    assert f"{prof}: profile name 'rnajority' looks like 'majority'" in line


def test_item09_names_differing_only_by_case_are_refused_naming_both(tmp_path, capsys, negex_ids, monkeypatch):
    monkeypatch.setenv("ATLAS_PROFILES", "")
    r = tmp_path / "r"
    f = predictions(tmp_path / "p.jsonl", negex_ids)
    code, out, err = atlas(capsys, *_score(f, "probe-sys", r))
    assert code == 0, err
    first = sorted(p.relative_to(r) for p in r.rglob("*") if p.is_file())
    for name in ("PROBE-SYS", "Probe-sys"):
        line = refused(capsys, *_score(f, name, r))
        assert f"--name {name!r} looks like 'probe-sys', a result already in {r}" in line, line
        assert "differ only by case" in line
    assert sorted(p.relative_to(r) for p in r.rglob("*") if p.is_file()) == first   # one folder, nothing added
    line = refused(capsys, *_score(f, "MAJORITY", r))                    # the atlas's own names too
    assert "--name 'MAJORITY' looks like 'majority', a registry profile" in line and "only by case" in line
    prof = tmp_path / "p.yml"
    prof.write_text("Majority: {source: builtin, location: majority, revision: null, capabilities: "
                    "[predict.assertion], label_map: {}, trained_on: [], description: x}\n")
    assert f"{prof}: profile name 'Majority' looks like 'majority'" in refused(capsys, "list", "--profiles", prof)
