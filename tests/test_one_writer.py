"""One writer of result cells: :meth:`atlaslib.cards.run.CardRun.finish`.

A run through a card's contract, a run the runner decides cannot happen (its stub, made without a kernel), a
notebook run (TempEval's, whose CardRun now carries the run key) and an outside system's scored predictions all
have their cell written by ``CardRun.finish``, never assembled or rewritten elsewhere; the cells are the ones the
earlier writers made (the old runner's stub formula; the outside file scored like the built-in baseline).
"""
from __future__ import annotations

import json
import sys

import pytest

from atlaslib import results, runner
from atlaslib.cards.run import CardRun


def _record_writers(monkeypatch) -> list:
    """Replace the low-level cell writer everywhere it is bound; each call records whether CardRun.finish is on
    the stack (and still writes)."""
    original, calls = results.write_cell, []
    finish = CardRun.finish.__code__

    def write_cell(cell, path):
        frame, inside = sys._getframe(1), False
        while frame is not None:
            inside = inside or frame.f_code is finish
            frame = frame.f_back
        calls.append((str(path), inside))
        return original(cell, path)

    for name, mod in list(sys.modules.items()):
        if name.startswith("atlaslib") and getattr(mod, "write_cell", None) is original:
            monkeypatch.setattr(mod, "write_cell", write_cell)
    return calls


def _outside_closest(tmp_path):
    """The built-in ``closest`` TempEval baseline run outside, on `atlas export`'s synthetic-v1 Anafora folder."""
    from atlaslib import cli
    from atlaslib.cards.tempeval import anafora_io, baselines

    out = tmp_path / "export"
    assert cli.main(["export", "--card", "tempeval", "--version", "synthetic-v1", "-o", str(out)]) == 0
    docs = anafora_io.read_corpus(out / "anafora", xml_name_regex=r"[.]xml$")
    system = [baselines.with_closest(d) for d in docs]
    for d in system:
        d.annotator = "system"
    anafora_io.write_corpus(system, tmp_path / "pred")
    return tmp_path / "pred"


def test_every_cell_is_written_by_cardrun_finish(monkeypatch, tmp_path, toy_registered, capsys):
    from atlaslib.cards.run import run
    from atlaslib.external.score import score

    calls = _record_writers(monkeypatch)
    run("toy", "toy-v1", "always-even", "zero_shot", result_path=tmp_path / "toy.json")
    stub = runner.run(runner.RunRequest("negex", "atlas-n100-v1", "medspacy-context", "probe"),
                      results_dir=tmp_path / "results", runs_dir=tmp_path / "runs")
    assert stub.cell_status == "not_run"
    scored = score("tempeval", "synthetic-v1", _outside_closest(tmp_path), "closest-outside", protocol="phase2",
                   results_dir=tmp_path / "results")
    capsys.readouterr()
    assert scored.status == "scored" and not results.edited_since_written(results.read_cell(scored.path))
    assert len(calls) == 3, calls
    assert [p for p, inside in calls if not inside] == []  # every cell through CardRun.finish


def test_a_stub_cell_is_the_old_runners_cell(tmp_path):
    """The stub cell CardRun writes is the one the runner assembled before (its formula, field by field and in
    order), but the environment's commit."""
    from atlaslib.cards import get_card

    request = runner.RunRequest("negex", "atlas-n100-v1", "bvanaken/clinical-assertion-negation-bert", "zero_shot")
    out = runner.run(request, results_dir=tmp_path / "results", runs_dir=tmp_path / "runs")
    written = json.loads(open(out.result).read())
    decision, card = runner.decide(request), get_card("negex")
    key = written["run_key"]
    profile = decision["profile"]
    spec = results.RunSpec(card="negex", version=request.version, model=request.model, protocol="zero_shot",
                           profile=profile, revision=profile["revision"], parameters={"run_key": key})
    old = results.not_run_cell(spec, decision["reason"], card.metric_names("zero_shot"),
                               overlap=card.overlap(profile["trained_on"]),
                               timing={"wall_seconds": 0.0, "peak_rss_mb": None},
                               extra={"decided_before_run": True}, env=written["environment"])
    old["run_key"] = key
    assert json.dumps(written) == json.dumps(results._jsonable(old))
    assert set(written["environment"]) == set(results.environment(torch_info=False))


def test_a_notebook_cell_without_the_run_key_fails_the_run_and_is_not_rewritten(monkeypatch, tmp_path):
    """The runner moves the notebook's cell into place as written; a cell not carrying the run's key (a notebook
    whose CardRun was not handed it) fails the run, naming the cure, and nothing is put in place."""
    def fake_execute(src, out, params, **kw):
        import nbformat

        cell = CardRun("tempeval", "synthetic-v1", "closest", "phase2").finish(reason="no key handed")
        results.write_cell(cell, params["result_path"])
        nbformat.write(nbformat.read(src, as_version=4), out)

    monkeypatch.setattr(runner, "execute_notebook", fake_execute)
    with pytest.raises(runner.RunFailed, match="run_key"):
        runner.run(runner.RunRequest("tempeval", "synthetic-v1", "closest", "phase2"), results_dir=tmp_path / "r",
                   runs_dir=tmp_path / "n", failed_dir=tmp_path / "failed")
    assert not list((tmp_path / "r").rglob("*.json"))


def test_the_tempeval_notebook_hands_its_cardrun_the_run_key(tmp_path):
    """The real notebook, run by the runner: its CardRun carries the run key into the cell it writes, and the cell
    scores the same as the contract's run (the numbers the runner's rewrite kept)."""
    from atlaslib.cards.run import run

    request = runner.RunRequest("tempeval", "synthetic-v1", "closest", "phase2")
    out = runner.run(request, results_dir=tmp_path / "results", runs_dir=tmp_path / "runs",
                     failed_dir=tmp_path / "failed")
    cell = results.read_cell(out.result)
    assert cell["run_key"] == cell["spec"]["parameters"]["run_key"]
    assert runner.is_current(request, cell["run_key"], tmp_path / "results", tmp_path / "runs")
    contract = run("tempeval", "synthetic-v1", "closest", "phase2")
    assert cell["metrics"] == contract["metrics"] and cell["unit_counts"] == contract["unit_counts"]


def test_an_outside_cell_is_the_one_finish_made_before_it_was_written(monkeypatch, tmp_path, capsys):
    """`atlas score`'s cell (sealed, with its run key) is CardRun.finish's cell of the scorer's parts: the cell
    the old code made (finish, then the key, then the seal) but its timing."""
    import importlib

    S = importlib.import_module("atlaslib.external.score")
    pred = _outside_closest(tmp_path)
    capsys.readouterr()
    made = []
    finish = CardRun.finish
    monkeypatch.setattr(CardRun, "finish", lambda self, **parts: made.append(parts) or finish(self, **parts))
    out = S.score("tempeval", "synthetic-v1", pred, "closest-outside", protocol="phase2",
                  results_dir=tmp_path / "results")
    written = results.read_cell(out.path)
    assert len(made) == 1
    old = CardRun("tempeval", "synthetic-v1", "closest-outside", "phase2").finish(**made[0])
    old["run_key"] = old["spec"]["parameters"]["run_key"]
    old = results.sealed({**old, "timing": written["timing"], "environment": written["environment"]})
    assert {k: v for k, v in written.items() if k != "_path"} == old


@pytest.mark.parametrize("how", ["frames", "keyword"])
def test_negex_decides_for_the_runs_version_not_the_first(monkeypatch, data_dir, how):
    """A NegEx run decided in its own code (no load of a CardRun) decides for its split's version."""
    from atlaslib.cards import NotRun, deciding, negex

    items = negex.load_items(data_dir)
    train, test = negex.split_frames(items, negex.split(items, "atlas-full-v1"))
    seen = []
    monkeypatch.setattr(deciding, "decide", lambda card, version, *a, **k: seen.append(version) or {
        "run": False, "reason": "stopped here", "profile": None, "capability": None, "baseline": False})
    if how == "keyword":
        test.attrs.clear()
    with pytest.raises(NotRun, match="stopped here"):
        negex.run_protocol("majority", "zero_shot", train, test, data_dir=data_dir,
                           **({"version": "atlas-full-v1"} if how == "keyword" else {}))
    assert seen == ["atlas-full-v1"]
