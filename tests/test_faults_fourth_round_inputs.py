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
