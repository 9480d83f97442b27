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


# ------------------------------------------------------------------------------------------------ 10

OPENAI = ("  source: openai-compatible\n  location: http://127.0.0.1:9/v1\n  revision: null\n"
          "  capabilities: [predict.assertion]\n  options:\n    model: m\n")
HUB = ("  source: hub\n  location: org/model\n  revision: " + "ab" * 20 + "\n  capabilities: [embed.text.pooled]\n"
       "  options:\n")


@pytest.mark.parametrize("head, option, value, got, expected", [pytest.param(*case, id=f"{case[1]}={case[2][:12]}")
                                                                for case in [
    (OPENAI, "backoff", ".nan", "the number nan", "a finite number from 0 to 3,600"),
    (OPENAI, "backoff", "-.inf", "the number -inf", "a finite number from 0 to 3,600"),
    (OPENAI, "timeout", "0", "the number 0", "a finite number above 0 to 86,400"),
    (OPENAI, "max_retries", "-1", "the number -1", "a whole number from 0 to 100"),
    (OPENAI, "max_retries", "2.5", "the number 2.5", "a whole number from 0 to 100"),
    (OPENAI, "max_tokens", "1e999999", "the text '1e999999'", "a whole number from 1 to 1,048,576"),
    (OPENAI, "max_tokens", "yes", "true", "a whole number from 1 to 1,048,576"),
    (HUB, "max_length", ".nan", "the number nan", "a whole number from 1 to 1,048,576"),
    (HUB, "max_length", "1.0e+999999", "the number inf", "a whole number from 1 to 1,048,576"),
    (HUB, "batch_size", "0", "the number 0", "a whole number from 1 to 65,536"),
    (HUB, "torch_threads", "1" + "0" * 40, "the integer 100000000000… (41 digits)", "a whole number from 1 to 1,024"),
]])
def test_item10_a_numeric_option_out_of_range_is_refused_naming_file_line_profile_and_option(
        tmp_path, capsys, monkeypatch, head, option, value, got, expected):
    monkeypatch.setenv("ATLAS_PROFILES", "")
    prof = tmp_path / "p.yml"
    prof.write_text(f"my-model:\n{head}    {option}: {value}\n  label_map: {{}}\n  trained_on: []\n"
                    f"  description: x\n")
    line = refused(capsys, "list", "--profiles", prof)
    n = prof.read_text().splitlines().index(f"    {option}: {value}") + 1
    assert line.startswith(f"atlas list: {prof}, line {n}: profile 'my-model' option {option!r} is {got}; "
                           f"expected {expected} (")


def test_item10_numeric_options_in_range_and_null_are_kept(tmp_path, capsys, monkeypatch):
    from atlaslib.models.registry import merge_profiles

    prof = tmp_path / "p.yml"
    prof.write_text(f"my-model:\n{OPENAI}    backoff: 0\n    timeout: 0.5\n    max_retries: 0\n    max_tokens: null\n"
                    "  label_map: {}\n  trained_on: []\n  description: x\n")
    opts = merge_profiles({}, [prof])["my-model"].options
    assert opts == {"model": "m", "backoff": 0, "timeout": 0.5, "max_retries": 0, "max_tokens": None}
