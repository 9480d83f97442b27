"""Faults and bad inputs a careful user hits: each gets one clear answer, nothing is lost, nothing is silent.

One test per case of the fault list (hub ids outside the registry, slug clashes, relative paths, a failed
write, NLI predictions by id, ``atlas score tempeval`` input, cells validated on read, a missing data file,
leftovers, value-free errors), plus property tests over prediction inputs. Ctrl-C is tested, at fixed
moments instead of after a sleep, in ``test_faults_second_round.py`` (case 12).

Runs that cannot happen are decided before a kernel starts, so most tests here start none; the few that
need a real notebook run (a hub model from the local cache, relative paths) run the NegEx card on
atlas-n100-v1 with tiny models.
"""
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from atlaslib import cli, results, runner, sources
from atlaslib.runner import RunRequest
from tests import tiny_models

REPO = Path(__file__).resolve().parent.parent
ATLAS = [sys.executable, "-c", "import sys; from atlaslib.cli import main; sys.exit(main())"]
N100 = "atlas-n100-v1"


def _env(**extra) -> dict:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    env.update({k: str(v) for k, v in extra.items()})
    return env


def atlas(*args, cwd=REPO, env=None, timeout=600) -> subprocess.CompletedProcess:
    return subprocess.run([*ATLAS, *map(str, args)], cwd=cwd, env=env or _env(), capture_output=True, text=True,
                          timeout=timeout)


def one_line(stderr: str) -> str:
    """The whole of stderr must be one line and no traceback."""
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert "Traceback" not in stderr, stderr
    assert len(lines) == 1, stderr
    return lines[0]


def files_under(root: Path) -> dict:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def empty_dirs(root: Path) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_dir() and not any(p.iterdir())]


def hub_cache_with(tmp_path: Path, repo_id: str, model_dir: Path) -> Path:
    """A Hugging Face cache folder (``HF_HUB_CACHE`` layout) holding ``model_dir``'s files as ``repo_id`` at
    main."""
    hub = tmp_path / "hf" / "hub"
    org, name = repo_id.split("/")
    repo = hub / f"models--{org}--{name}"
    commit = "0123456789abcdef0123456789abcdef01234567"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    shutil.copytree(model_dir, repo / "snapshots" / commit)
    return hub


# ------------------------------------------------------------------------------------------------ 1


def test_case01_hub_id_outside_the_registry_runs_from_the_local_cache_and_absent_weights_say_so(tmp_path,
                                                                                                  data_dir):
    model = tiny_models.tiny_assertion_classifier(tmp_path / "build")
    hub = hub_cache_with(tmp_path, "tinyorg/tiny-assertion", model)
    env = _env(HF_HOME=hub.parent, HF_HUB_CACHE=hub, ATLAS_DATA_DIR=data_dir)
    out = tmp_path / "out"
    common = ["--protocol", "zero_shot", "--version", N100, "--results-dir", out / "results",
              "--runs-dir", out / "runs", "--build-dir", out / "_build"]

    done = atlas("run", "--card", "negex", "--model", "tinyorg/tiny-assertion", *common, env=env)
    assert done.returncode == 0, done.stderr
    cell = json.loads((out / "results/negex" / N100 / "tinyorg--tiny-assertion/zero_shot.json").read_text())
    assert cell["status"] == "ok", cell["reason"]
    assert cell["spec"]["capability"] == "predict.assertion"
    assert len(cell["predictions"]) == cell["split"]["n_test"] > 0

    done = atlas("run", "--card", "negex", "--model", "foo/bar", *common, env=env)
    assert done.returncode == 0, done.stderr
    cell = json.loads((out / "results/negex" / N100 / "foo--bar/zero_shot.json").read_text())
    assert cell["status"] == "not_run"
    assert cell["reason"].startswith("weights unavailable: foo/bar")
    assert all(m["reason"].startswith("not run: weights unavailable") for m in cell["metrics"].values())


# ------------------------------------------------------------------------------------------------ 2


def test_case02_two_local_models_with_the_same_folder_name_keep_their_own_cells(tmp_path, data_dir):
    a = tiny_models.tiny_encoder(tmp_path / "a", name="m")
    b = tiny_models.tiny_encoder(tmp_path / "b", name="m")
    paths = dict(results_dir=tmp_path / "results", runs_dir=tmp_path / "runs", data_dir=data_dir)
    # an encoder has no zero-shot capability on NegEx: each run is a not-run cell of its own model
    out_a = runner.run(RunRequest("negex", N100, str(a), "zero_shot"), **paths)
    cell_a = Path(out_a.result).read_bytes()
    out_b = runner.run(RunRequest("negex", N100, str(b), "zero_shot"), **paths)
    assert out_a.result != out_b.result and out_a.notebook != out_b.notebook
    assert Path(out_a.result).read_bytes() == cell_a                    # not replaced
    assert json.loads(Path(out_a.result).read_text())["model"] == str(a)
    assert json.loads(Path(out_b.result).read_text())["model"] == str(b)
    assert results.slug(str(a)).startswith("local-m-") and results.slug(str(a)) != results.slug(str(b))

    # a cell already in the place of another model is never replaced
    clash = Path(out_b.result)
    cell = json.loads(clash.read_text())
    cell["model"] = "/somewhere/else/m"
    clash.write_text(json.dumps(cell))
    before = clash.read_bytes()
    with pytest.raises(runner.OutputError, match="holds the result of model '/somewhere/else/m'"):
        runner.run(RunRequest("negex", N100, str(b), "zero_shot"), force=True, **paths)
    assert clash.read_bytes() == before


# ------------------------------------------------------------------------------------------------ 3


def test_case03_relative_paths_resolve_against_the_callers_folder(tmp_path, data_dir):
    here = tmp_path / "elsewhere"
    tiny_models.tiny_encoder(here, name="my-model")
    (here / "shared").mkdir()
    os.symlink(data_dir, here / "shared" / "data")
    before = sorted(str(p) for p in REPO.rglob("atlas-run-*"))
    done = atlas("run", "--card", "negex", "--model", "./my-model", "--protocol", "probe", "--version", N100,
                 "--data-dir", "shared/data", "--results-dir", "out/results", "--runs-dir", "out/runs",
                 "--build-dir", "out/_build", cwd=here, env=_env(ATLAS_DATA_DIR=data_dir))
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert printed["result"] == "ok"
    cell = json.loads(Path(printed["result_cell"]).read_text())
    assert cell["model"] == str((here / "my-model").resolve())
    assert Path(printed["result_cell"]).is_relative_to(here / "out" / "results")
    assert Path(printed["notebook"]).is_relative_to(here / "out" / "runs")
    assert sorted(str(p) for p in REPO.rglob("atlas-run-*")) == before      # no stray work folder
    assert not (REPO / "out").exists()


# ------------------------------------------------------------------------------------------------ 4


def test_case04_a_failed_write_replaces_neither_notebook_nor_cell(tmp_path, data_dir, monkeypatch, capsys):
    args = ["run", "--card", "negex", "--model", "foo/bar", "--protocol", "zero_shot", "--version", N100,
            "--results-dir", str(tmp_path / "results"), "--runs-dir", str(tmp_path / "runs"),
            "--build-dir", str(tmp_path / "_build")]
    assert cli.main(args) == 0
    capsys.readouterr()
    before = files_under(tmp_path)

    real_replace = os.replace

    cell = tmp_path / "results/negex" / N100 / "foo--bar/zero_shot.json"

    def replace(src, dst, *a, **kw):  # the cell cannot be replaced (after the notebook was)
        if Path(dst) == cell:
            raise PermissionError(13, "Permission denied", str(dst))
        return real_replace(src, dst, *a, **kw)

    monkeypatch.setattr(os, "replace", replace)
    assert cli.main([*args, "--force"]) == 1
    line = one_line(capsys.readouterr().err)
    assert line.startswith("atlas run: ") and "zero_shot.json" in line and "Permission denied" in line
    assert files_under(tmp_path) == before       # the notebook and the cell are the old pair, nothing else


# ------------------------------------------------------------------------------------------------ 5


def test_case05_nli_predictions_in_a_series_are_matched_by_case_id():
    import pandas as pd

    from atlaslib.cards import nli_negation as nn

    cases = nn.default_nli_negation_cases()
    gold = pd.Series({c.case_id: c.gold_label for c in cases}).sample(frac=1.0, random_state=3)
    assert list(gold.index) != [c.case_id for c in cases]            # really shuffled
    report = nn.run_nli_negation_challenge(gold)
    assert report.aggregate_accuracy.value == 1.0
    assert report.to_json() == nn.run_nli_negation_challenge([c.gold_label for c in cases]).to_json()
    # ambiguous inputs are refused, naming what to give instead
    for bad in (gold.to_frame("label"), set(gold), gold.to_numpy().reshape(-1, 1),
                pd.Series(list(gold), index=[0] * len(gold))):
        with pytest.raises(nn.NliNegationInputError):
            nn.run_nli_negation_challenge(bad)


# ------------------------------------------------------------------------------------------------ 6

ENTITY = ("<entity><id>{id}</id><span>{span}</span><type>EVENT</type><parentsType>TemporalEntities</parentsType>"
          "<properties><DocTimeRel>OVERLAP</DocTimeRel></properties></entity>")
TLINK = ("<relation><id>{id}</id><type>TLINK</type><parentsType>TemporalRelations</parentsType><properties>"
         "<Source>{src}</Source><Type>CONTAINS</Type><Target>{tgt}</Target></properties></relation>")


def _anafora(root: Path, doc: str, body: str, kind: str = "system") -> Path:
    f = root / doc / f"{doc}.Temporal-Relation.{kind}.completed.xml"
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(f"<?xml version='1.0' encoding='UTF-8'?>\n<data><annotations>{body}</annotations></data>\n")
    return f


def test_case06_score_tempeval_answers_bad_predictions_with_one_line(tmp_path, capsys):
    ref = tmp_path / "ref"
    _anafora(ref, "doc1", ENTITY.format(id="1@e", span="0,5") + ENTITY.format(id="2@e", span="6,9")
             + TLINK.format(id="3@r", src="1@e", tgt="2@e"), kind="gold")

    def score(pred: Path, *extra) -> tuple[int, str]:
        code = cli.main(["score", "tempeval", "-r", str(ref), "-p", str(pred), *extra])
        return code, capsys.readouterr().err

    empty = tmp_path / "empty"
    empty.mkdir()
    code, err = score(empty)
    assert code == 0 and "warning" in one_line(err) and "no files matching" in err
    code, err = score(empty, "--strict")
    assert code == 2 and "error" in one_line(err)

    foo = tmp_path / "foo"
    f = foo / "doc1" / "doc1.Temporal-Relation.system.completed.xml"
    f.parent.mkdir(parents=True)
    f.write_text("<foo/>")
    code, err = score(foo)
    assert code == 2 and str(f) in one_line(err) and "<data>" in err

    extra = tmp_path / "extra"
    _anafora(extra, "doc1", ENTITY.format(id="1@e", span="0,5"))
    _anafora(extra, "doc9", ENTITY.format(id="1@e", span="0,5"))
    code, err = score(extra)
    assert code == 0 and "doc9" in one_line(err) and "not in the reference" in err
    code, err = score(extra, "--strict")
    assert code == 2 and "doc9" in one_line(err)

    bad_span = tmp_path / "span"
    f = _anafora(bad_span, "doc1", ENTITY.format(id="7@e", span="abc,def"))
    code, err = score(bad_span)
    assert code == 2 and str(f) in one_line(err) and "7@e" in err and "abc,def" in err

    code, err = score(extra, "-x", "[")
    assert code == 2 and "--xml-name-regex '['" in one_line(err)

    dangling = tmp_path / "dangling"
    f = _anafora(dangling, "doc1", ENTITY.format(id="1@e", span="0,5") + TLINK.format(id="9@r", src="1@e",
                                                                                        tgt="404@e"))
    code, err = score(dangling, "--closure")
    assert code == 2 and str(f) in one_line(err) and "9@r" in err and "404@e" in err


# ------------------------------------------------------------------------------------------------ 7


def test_case07_book_no_run_names_the_cell_file_and_field_of_a_bad_value(tmp_path, capsys):
    cell = results.not_run_cell(results.RunSpec("negex", N100, "majority", "zero_shot"), "x", ["macro_f1_zero_shot"])
    cell["status"] = "ok"
    cell["metrics"]["macro_f1_zero_shot"] = {"value": "0.9", "ci_low": 0.8, "ci_high": 0.95}
    path = results.cell_path(tmp_path / "results", "negex", N100, "majority", "zero_shot")
    results.write_cell(cell, path)
    nb = tmp_path / "runs/negex" / N100 / "majority/zero_shot.ipynb"
    nb.parent.mkdir(parents=True)
    nb.write_text('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}')
    code = cli.main(["book", "--no-run", "--card", "negex", "--results-dir", str(tmp_path / "results"),
                     "--runs-dir", str(tmp_path / "runs"), "--build-dir", str(tmp_path / "_build")])
    line = one_line(capsys.readouterr().err)
    assert code == 2
    assert str(path) in line and "metrics.macro_f1_zero_shot.value" in line and "number" in line


# ------------------------------------------------------------------------------------------------ 8


def test_case08_missing_data_file_says_where_it_looked_before_the_download_failure(tmp_path, monkeypatch,
                                                                                      refused_url):
    monkeypatch.setenv("ATLAS_CACHE_DIR", str(tmp_path / "cache"))
    pf = sources.PinnedFile("negex/absent.txt", f"{refused_url}/absent.txt", "a" * 64)
    with pytest.raises(sources.DataSourceError) as info:
        sources.resolve(pf, tmp_path / "data")
    msg = str(info.value)
    looked = f"negex/absent.txt was not found in the data folder (looked for {tmp_path / 'data' / pf.name})"
    assert msg.startswith(looked)
    assert msg.index(looked) < msg.index(f"could not download negex/absent.txt from {refused_url}/absent.txt")


# ------------------------------------------------------------------------------------------------ 9


def test_case09_stale_work_folders_go_failed_runs_leave_no_empty_folders_and_cells_get_the_notebook_mode(
        tmp_path, data_dir, monkeypatch):
    paths = dict(results_dir=tmp_path / "results", runs_dir=tmp_path / "runs", data_dir=data_dir)
    req = RunRequest("negex", N100, "foo/bar", "zero_shot")
    # a run killed with SIGKILL left its work folder (process gone) ...
    folder = tmp_path / "runs/negex" / N100 / "foo--bar"
    killed = folder / "atlas-run-zero_shot-dead"
    killed.mkdir(parents=True)
    (killed / "out.ipynb").write_text("{}")
    (killed / "owner").write_text(f"{os.uname().nodename} 999999999\n")
    legacy = folder / "atlas-run-x1y2z3"                         # ... or one without an owner, long ago
    legacy.mkdir()
    os.utime(legacy, (time.time() - 3600, time.time() - 3600))
    out = runner.run(req, **paths)
    assert not killed.exists() and not legacy.exists()
    assert sorted(p.name for p in folder.iterdir()) == ["zero_shot.cell-sha256", "zero_shot.ipynb"]  # + cache record

    # result cells get the mode a notebook gets (umask honoured), not mkstemp's 0600
    nb_mode = stat.S_IMODE(os.stat(out.notebook).st_mode)
    assert stat.S_IMODE(os.stat(out.result).st_mode) == nb_mode == 0o666 & ~results.current_umask()

    # a run that fails writes nothing and leaves no empty folder behind
    import papermill

    def boom(*a, **kw):
        raise RuntimeError("kernel died")

    monkeypatch.setattr(papermill, "execute_notebook", boom)
    with pytest.raises(runner.RunFailed):
        runner.run(RunRequest("negex", N100, "majority", "zero_shot"), failed_dir=tmp_path / "failed", **paths)
    assert empty_dirs(tmp_path) == []
    assert not (tmp_path / "results/negex" / N100 / "majority").exists()


# ------------------------------------------------------------------------------------------------ 10


def test_case10_predictor_errors_keep_no_case_text_and_a_bom_is_accepted(tmp_path):
    from atlaslib.cards import nli_negation as nn

    cases = nn.default_nli_negation_cases()

    def leaky(premise, hypothesis):
        raise ValueError(f"cannot read {premise!r}")

    class LeakyBatch:
        def predict_batch(self, premises, hypotheses):
            raise KeyError(premises[0])

    for predictor in (leaky, LeakyBatch()):
        with pytest.raises(nn.NliNegationPredictorError) as info:
            nn.run_nli_negation_challenge(predictor=predictor)
        err = info.value
        assert err.__cause__ is None and err.__context__ is None
        assert cases[0].premise not in str(err)

    rows = [{"case_id": c.case_id, "pattern": c.pattern, "premise": c.premise, "hypothesis": c.hypothesis,
             "gold_label": c.gold_label, "negation_depth": c.negation_depth, "section": c.section,
             "synthetic": True, "contains_real_phi": False} for c in cases[:3]]
    f = tmp_path / "cases.jsonl"
    f.write_bytes(b"\xef\xbb\xbf" + "\n".join(json.dumps(r) for r in rows).encode("utf-8"))
    assert [c.case_id for c in nn.load_nli_negation_cases(f)] == [c.case_id for c in cases[:3]]
    g = tmp_path / "cases.json"
    g.write_bytes(b"\xef\xbb\xbf" + json.dumps(rows).encode("utf-8"))
    assert nn.load_nli_negation_cases(g) == nn.load_nli_negation_cases(f)


# ------------------------------------------------------------------------------------------------ properties
# Any prediction input either scores correctly (against an independent reference) or raises one of the
# library's own errors; no error message and no exception in its chain quotes case or item text.

import random  # noqa: E402

from hypothesis import HealthCheck, Phase, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

# no shrinking: a failing input is reported as drawn (shrinking 100-row inputs takes minutes)
PROPERTY = settings(max_examples=15, deadline=None, phases=[Phase.explicit, Phase.generate],
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                           HealthCheck.data_too_large])
JUNK = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True),
                 st.text(max_size=12), st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3),
                                                                                             st.integers(), max_size=1))


def _chain(exc: BaseException):
    seen = []
    while exc is not None and exc not in seen:
        seen.append(exc)
        exc = exc.__cause__ or exc.__context__
    return seen


def assert_no_item_text(exc: BaseException, texts, window: int = 24) -> None:
    """Neither the error nor any exception in its chain holds a ``window``-character run of any text."""
    for e in _chain(exc):
        msg = " ".join(str(a) for a in getattr(e, "args", ())) + " " + str(e)
        pieces = {msg[i:i + window] for i in range(max(0, len(msg) - window + 1))}
        for t in texts:
            assert not any(t[i:i + window] in pieces for i in range(max(0, len(t) - window + 1))), (type(e), msg)


#: what _mutate does to valid rows; the first two are inputs the scorer accepts (asserted, and each an @example)
KINDS = st.sampled_from(["valid", "dict", "valid", "drop", "repeat", "unknown", "junk_answer", "junk_score",
                         "junk_id", "junk_row", "not_a_list"])
ACCEPTED_KINDS = {"valid", "dict"}


def _mutate(draw, rows: list[dict], key: str, kind: str) -> object:
    """Valid rows (``kind`` "valid"), or a mapping of them by item id ("dict"), or valid rows with one fault: a
    dropped row, a repeated row, an unknown id, a junk answer or score, a junk id or row; or not a list at all.
    ``draw`` (Hypothesis's) draws the fault's details; an accepted kind draws nothing."""
    rows = [dict(r) for r in rows]
    if kind in ACCEPTED_KINDS:
        return rows if kind == "valid" else {r["item_id"]: r[key] for r in rows}
    i = draw(st.integers(0, len(rows) - 1))
    if kind == "drop":
        del rows[i]
    elif kind == "repeat":
        rows.append(dict(rows[i]))
    elif kind == "unknown":
        rows[i]["item_id"] = draw(st.text(min_size=1, max_size=8)) + "-x"
    elif kind == "junk_answer":
        rows[i][key] = draw(JUNK)
    elif kind == "junk_score":
        for r in rows:
            r["score"] = 0.5
        rows[i]["score"] = draw(JUNK)
    elif kind == "junk_id":
        rows[i]["item_id"] = draw(st.one_of(st.none(), st.integers(), st.lists(st.integers(), max_size=1)))
    elif kind == "junk_row":
        rows[i] = draw(JUNK)
    elif kind == "not_a_list":
        return draw(st.one_of(st.none(), st.integers(), st.floats()))
    return rows


@pytest.fixture(scope="module")
def negex_split(data_dir):
    from atlaslib.external.tasks import load_split

    return load_split("negex", N100, "test", data_dir)


@pytest.fixture(scope="module")
def maccrobat_split(data_dir):
    from atlaslib.external.tasks import load_split

    return load_split("maccrobat", N100, "test", data_dir)


@PROPERTY
@given(seed=st.integers(0, 2 ** 16), kind=KINDS, data=st.data())
@example(seed=0, kind="valid", data=None)
@example(seed=1, kind="dict", data=None)
def test_property_negex_prediction_records(negex_split, data_dir, seed, kind, data):
    from sklearn.metrics import f1_score

    from atlaslib.external.score import evaluate
    from atlaslib.external.tasks import PredictionsError

    s = negex_split
    rng = random.Random(seed)
    labels = [rng.choice(["affirmed", "negated"]) for _ in s.ids]
    rows = [{"item_id": i, "label": lab} for i, lab in zip(s.ids, labels)]
    preds = _mutate(data and data.draw, rows, "label", kind)
    try:
        cell = evaluate("negex", N100, predictions=preds, data_dir=data_dir, n_resamples=20)
    except PredictionsError as exc:
        assert kind not in ACCEPTED_KINDS, f"{kind} predictions refused: {exc}"
        assert_no_item_text(exc, [r["sentence"] for r in s.records])
        return
    got = {r["item_id"]: r["label"] for r in (preds if isinstance(preds, list) else
                                              [{"item_id": k, "label": v} for k, v in preds.items()])}
    from atlaslib.cards.negex import split_frames

    gold = split_frames(s.context["items"], s.context["manifest"])[1].set_index("item_id")["decision"]
    ref = f1_score(gold.to_list(), [got[i] for i in gold.index], average="macro", labels=["affirmed", "negated"])
    value = cell["metrics"]["macro_f1_zero_shot"]["value"]
    assert value == pytest.approx(ref) if value is not None else len(set(gold) | set(got.values())) < 2


@pytest.mark.filterwarnings("ignore:.*I- tag that continues no mention")  # random tags: said, and accepted
@PROPERTY
@given(seed=st.integers(0, 2 ** 16), kind=KINDS, data=st.data())
@example(seed=0, kind="valid", data=None)
@example(seed=1, kind="dict", data=None)
def test_property_maccrobat_prediction_records(maccrobat_split, data_dir, seed, kind, data):
    from seqeval.metrics import f1_score

    from atlaslib.external.score import evaluate
    from atlaslib.external.tasks import PredictionsError

    s = maccrobat_split
    rng = random.Random(seed)
    rows = [{"item_id": r["item_id"], "tags": [rng.choice(s.labels) for _ in r["words"]]} for r in s.records]
    preds = _mutate(data and data.draw, rows, "tags", kind)
    try:
        cell = evaluate("maccrobat", N100, predictions=preds, data_dir=data_dir, n_resamples=20)
    except PredictionsError as exc:
        assert kind not in ACCEPTED_KINDS, f"{kind} predictions refused: {exc}"
        assert_no_item_text(exc, [" ".join(r["words"]) for r in s.records])
        return
    got = {r["item_id"]: r["tags"] for r in (preds if isinstance(preds, list) else
                                             [{"item_id": k, "tags": v} for k, v in preds.items()])}
    gold = s.context["items"].set_index("item_id").loc[s.ids, "tags"]
    ref = f1_score([list(t) for t in gold], [list(got[i]) for i in s.ids])
    assert cell["metrics"]["entity_f1_zero_shot"]["value"] == pytest.approx(ref)


#: the forms of NLI predictions the challenge accepts (asserted; each an @example): by case order or by case id
NLI_ACCEPTED = ("list", "tuple", "dict", "series", "shuffled_series", "array", "iterator")


@PROPERTY
@given(seed=st.integers(0, 2 ** 16),
       form=st.sampled_from([*NLI_ACCEPTED, "frame", "set", "short", "junk_label", "dict_missing", "dict_extra",
                             "duplicate_index", "scalar"]), data=st.data())
@example(seed=0, form="list", data=None)
@example(seed=1, form="tuple", data=None)
@example(seed=2, form="dict", data=None)
@example(seed=3, form="series", data=None)
@example(seed=4, form="array", data=None)
@example(seed=5, form="iterator", data=None)
def test_property_nli_prediction_inputs(seed, form, data):
    import numpy as np
    import pandas as pd

    from atlaslib.cards import nli_negation as nn

    cases = nn.default_nli_negation_cases()
    ids = [c.case_id for c in cases]
    rng = random.Random(seed)
    labels = [rng.choice(["entailment", "neutral", "contradiction", None, "abstention", " Neutral "]) for _ in ids]
    by_id = dict(zip(ids, labels))
    preds = {
        "list": lambda: list(labels), "tuple": lambda: tuple(labels), "dict": lambda: dict(by_id),
        "series": lambda: pd.Series(by_id), "array": lambda: np.array(labels, dtype=object),
        "shuffled_series": lambda: pd.Series(by_id).sample(frac=1.0, random_state=data.draw(st.integers(0, 9))),
        "iterator": lambda: iter(labels), "frame": lambda: pd.DataFrame({"label": labels}, index=ids),
        "set": lambda: set(lab for lab in labels if lab), "short": lambda: labels[:-1],
        "junk_label": lambda: labels[:-1] + [data.draw(JUNK)],
        "dict_missing": lambda: dict(list(by_id.items())[1:]),
        "dict_extra": lambda: {**by_id, data.draw(st.text(max_size=6)) + "?": "neutral"},
        "duplicate_index": lambda: pd.Series(labels, index=[ids[0]] * len(ids)),
        "scalar": lambda: data.draw(st.one_of(st.none(), st.integers(), st.text(max_size=5))),
    }[form]()
    try:
        report = nn.run_nli_negation_challenge(preds)
    except nn.NliNegationError as exc:
        assert form not in NLI_ACCEPTED, f"{form} predictions refused: {exc}"
        assert_no_item_text(exc, [t for c in cases for t in (c.premise, c.hypothesis)])
        return
    norm = [None if v is None or v.strip().lower() == "abstention" else v.strip().lower()
            for v in (by_id[i] for i in ids)]
    correct = sum(p == c.gold_label for p, c in zip(norm, cases))
    assert report.aggregate_accuracy.value == pytest.approx(correct / len(cases))
