"""Inspect logs made by ``inspect eval`` (inspect-ai 0.3.285 from ``.venv/harness``; its mock model, answers set by
a solver) on the NegEx card exported as an Inspect task, read back by ``atlas import``: the values equal what
Inspect's own reader gives; epochs reduced by the declared rule or kept as clusters; a truncated ``.eval`` archive
and a log that did not finish are one line each."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from atlaslib.cli import main
from atlaslib.harness.export import export
from atlaslib.harness.logs import doc_hash

from .test_real_lm_eval import HARNESS_ENV, REPO

pytestmark = pytest.mark.skipif(not (HARNESS_ENV / "inspect_ai").is_dir(),
                                reason="inspect-ai is not installed in .venv/harness (see requirements-harness.txt)")



@pytest.fixture(autouse=True)
def _path_kept(monkeypatch):
    """``atlas import`` of an .eval log appends .venv/harness to sys.path (for inspect-ai): later tests in this
    process get the path they had."""
    monkeypatch.setattr(sys, "path", list(sys.path))


MOCK_TASK = '''
from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset
from inspect_ai.model import ModelOutput
from inspect_ai.scorer import match
from inspect_ai.solver import solver

import {module} as exported


@solver
def answer(letter):
    async def solve(state, generate):
        state.output = ModelOutput.from_content("mockllm/model", letter)
        return state
    return solve


@task
def mock_{module}(letter="A"):
    return Task(dataset=MemoryDataset(list(exported.samples())), solver=answer(letter), scorer=match(location="exact"))
'''


def inspect_eval(task_dir: Path, module: str, logs: Path, home: Path, *args) -> Path:
    (task_dir / "mock_task.py").write_text(MOCK_TASK.format(module=module), encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HARNESS_ENV), str(task_dir), str(REPO)]), HOME=str(home),
               XDG_DATA_HOME=str(home / "data"), XDG_CONFIG_HOME=str(home / "config"), INSPECT_LOG_DIR=str(logs))
    proc = subprocess.run([sys.executable, "-m", "inspect_ai", "eval", "mock_task.py", "--model", "mockllm/model",
                           "--log-dir", str(logs), "--display", "none", *args], cwd=task_dir, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (log,) = sorted(logs.glob("*.eval"))
    return log


@pytest.fixture(scope="module")
def inspect_logs(tmp_path_factory, data_dir):
    base = tmp_path_factory.mktemp("inspect")
    task = export("inspect", "negex", "atlas-n100-v1", base / "task", data_dir=data_dir)
    module = Path(task["files"][1]).stem
    log = inspect_eval(base / "task", module, base / "logs", base / "home", "--limit", "30", "--epochs", "2",
                       "-T", "letter=A")
    return base, log


def _own_reading(log: Path) -> dict:
    code = ("import json, sys; from inspect_ai.log import read_eval_log; l = read_eval_log(sys.argv[1]); "
            "print(json.dumps([[s.id, s.epoch, s.scores['match'].value, s.metadata['doc']] for s in l.samples]))")
    out = subprocess.run([sys.executable, "-c", code, str(log)], env=dict(os.environ, PYTHONPATH=str(HARNESS_ENV)),
                         capture_output=True, text=True, timeout=120, check=True).stdout
    return json.loads(out)


def test_an_inspect_log_is_read_back_with_inspects_own_values(inspect_logs, tmp_path, capsys):
    base, log = inspect_logs
    own = _own_reading(log)
    assert len(own) == 60                                              # 30 samples x 2 epochs
    code = main(["import", "inspect", str(log), "-o", str(tmp_path / "rep"), "--resamples", "200"])
    err = capsys.readouterr().err
    assert code == 0, err
    rep = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert rep["n_units"] == 30 and rep["runs"][0]["harness"] == "inspect"
    assert rep["runs"][0]["settings"]["epochs"] == 2
    right = {}
    for sid, epoch, value, doc in own:
        right.setdefault(doc_hash(doc), []).append(1.0 if value == "C" else 0.0)
    acc = next(r for r in rep["leaderboard"] if r["metric"] == "match")
    assert acc["value"] == pytest.approx(np.mean([np.mean(v) for v in right.values()]))
    assert {i["unit"] for i in rep["items"]} == set(right)          # paired on the document's content hash

    code = main(["import", "inspect", str(log), "-o", str(tmp_path / "rep2"), "--epochs", "cluster",
                 "--resamples", "200"])
    capsys.readouterr()
    assert code == 0
    rep2 = json.loads((tmp_path / "rep2" / "report.json").read_text())
    assert rep2["n_units"] == 60 and rep2["unit"] == "sample (its epochs drawn together)"


def test_two_inspect_runs_pair_and_a_truncated_archive_is_one_line(inspect_logs, tmp_path, capsys):
    base, log = inspect_logs
    module = next(p.stem for p in (base / "task").glob("atlas_*.py"))
    other = inspect_eval(base / "task", module, tmp_path / "logs", tmp_path / "home", "--limit", "30", "--epochs", "2",
                         "-T", "letter=B")
    code = main(["import", str(log), str(other), "--name", "says A", "--name", "says B", "-o", str(tmp_path / "rep"),
                 "--resamples", "200"])
    err = capsys.readouterr().err
    assert code == 0, err
    rep = json.loads((tmp_path / "rep" / "report.json").read_text())
    (pair,) = rep["comparisons"]
    assert pair["test"] == "exact McNemar" and pair["b"] + pair["c"] == 30   # every item answered differently

    cut = tmp_path / "cut.eval"
    cut.write_bytes(log.read_bytes()[: log.stat().st_size // 2])
    code = main(["import", "inspect", str(cut), "-o", str(tmp_path / "bad")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert f"{cut}: Inspect cannot read this log" in err and "expected a complete .eval archive" in err
    assert not (tmp_path / "bad").exists()
    with zipfile.ZipFile(log) as z:
        assert any(n.startswith("samples/") for n in z.namelist())


def test_logs_of_the_two_harnesses_pair_on_the_documents_content(inspect_logs, tmp_path, capsys):
    from atlaslib.harness.export import prompt_of

    from .logs import sample, write_run

    base, log = inspect_logs
    data = next((base / "task").glob("atlas_*.jsonl"))
    docs = [json.loads(line) for line in data.read_text().splitlines()][:30]
    spec = {"template": 'Sentence: {sentence}\nQuestion: In this sentence, is "{concept}" negated (stated as absent)?'
                        '\nAnswer:', "fields": ["sentence", "concept"]}
    rows = [sample(k, d, [-1.0, -2.0], d["gold"], prompt=prompt_of(d, spec)) for k, d in enumerate(docs)]
    for r in rows:                                    # the Inspect task's scorer is named "match"
        r["metrics"], r["match"] = ["match"], r.pop("acc")
        del r["loglik_gold"]
    lm = write_run(tmp_path / "lm", "lm/model", rows, task="atlas_negex_atlas_n100_v1")
    code = main(["import", str(lm), str(log), "-o", str(tmp_path / "rep"), "--resamples", "200"])
    err = capsys.readouterr().err
    assert code == 0, err
    rep = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert rep["n_units"] == 30 and rep["prompt_drift"] == [] and "prompt differs" not in err
    assert [r["harness"] for r in rep["runs"]] == ["lm-eval", "inspect"]
