"""A long fine-tune's training seeds as tasks of their own: planned only where the run would bound the schedule,
handed out before the other runs, their run after them (and failing by name when one fails), and the same cell
as the run made whole."""
from __future__ import annotations

import json

import pytest

from atlaslib import executor
from atlaslib.cards import negex
from atlaslib.runner import RunOutcome, RunRequest
from tests.cells import build_paths

FT = RunRequest("negex", "atlas-n100-v1", "all-minilm-l6-v2", "finetune")
FT_FULL = RunRequest("negex", "atlas-full-v1", "all-minilm-l6-v2", "finetune")
SHORT = [RunRequest("negex", "atlas-n100-v1", "majority", "zero_shot"),
         RunRequest("negex", "atlas-n100-v1", "negspacy-negex-kit", "zero_shot")]
SEEDS = list(negex.FINETUNE_RECIPE["seeds"])


def test_only_a_fine_tune_that_would_bound_the_schedule_is_split_into_its_seeds():
    reqs = [FT, FT_FULL, *SHORT, RunRequest("negex", "atlas-n100-v1", "all-minilm-l6-v2", "probe")]
    expected = {FT.label: 1200.0, FT_FULL.label: 900.0, SHORT[0].label: 10.0, SHORT[1].label: 20.0,
                reqs[4].label: 500.0}                                  # total 2,630 s
    assert len(SEEDS) > 1
    assert executor.plan_preparation(reqs, expected, 2) == []          # bound 1,315 s: no run exceeds it
    # 3 workers: bound 876.7 s, under both fine-tunes: each is split into its seeds, the longest first
    assert executor.plan_preparation(reqs, expected, 3) == [(0, ("seed", s)) for s in SEEDS] + [(1, ("seed", s)) for s in SEEDS]
    assert executor.plan_preparation(reqs, expected, 4) == [(0, ("seed", s)) for s in SEEDS] + [(1, ("seed", s)) for s in SEEDS]
    expected[FT_FULL.label] = 100.0                                     # bound on 4 workers 457 s: only n100
    assert executor.plan_preparation(reqs, expected, 4) == [(0, ("seed", s)) for s in SEEDS]
    # the probe (one task, no seeds) is never split; one worker or an unbounded cluster: nothing to gain
    assert all(reqs[i].protocol == "finetune" for i, _ in executor.plan_preparation(reqs, expected, 64))
    assert executor.plan_preparation(reqs, expected, 1) == [] == executor.plan_preparation(reqs, expected,
                                                                                           float("inf"))


def _log(kwargs, line: str) -> None:
    kwargs["results_dir"].parent.mkdir(parents=True, exist_ok=True)
    with open(kwargs["results_dir"].parent / "order.log", "a", encoding="utf-8") as fh:
        fh.write(line + "\n")


def fake_run(req, **kwargs):
    """The run itself (a stand-in for the notebook): logs that it started."""
    _log(kwargs, f"run {req.label}")
    return RunOutcome(req, "ran", seconds=0.1, cell_status="ok")


def fake_prepare(req, part, **kwargs):
    """A seed's preparation (a stand-in for :func:`atlaslib.executor.prepare_part`); seed 3 of a request whose
    model is 'breaks' fails."""
    import time

    time.sleep(0.3)
    seed = part[1]
    if req.model == "breaks" and seed == SEEDS[1]:
        raise RuntimeError(f"{req.label}: training seed {seed} could not be prepared (not_run: out of memory)")
    _log(kwargs, f"seed {req.label} {seed}")
    return 0.3


def _record(paths, times: dict) -> None:
    paths.build.mkdir(parents=True, exist_ok=True)
    (paths.build / executor.RUN_TIMES).write_text(json.dumps(times))


@pytest.mark.timeout(300)
def test_on_dask_a_split_run_starts_after_its_own_seeds_and_fails_by_name_when_one_fails(tmp_path):
    broken = RunRequest("negex", "atlas-full-v1", "breaks", "finetune")
    reqs = [FT, broken, *SHORT]
    paths = build_paths(tmp_path)
    _record(paths, {FT.label: 1000.0, broken.label: 900.0, SHORT[0].label: 5.0, SHORT[1].label: 5.0})
    lines = []
    # on 3 workers the bound is 1,910 / 3 = 637 s: both fine-tunes would bound it, so both are split
    report = executor.run_requests(reqs, paths, executor="dask", n_workers=3, task=fake_run, prepare=fake_prepare,
                                   log=lines.append, timing=False)
    order = (tmp_path / "order.log").read_text().splitlines()
    assert any(f"2 run(s) split into {2 * len(SEEDS)} task(s)" in line for line in lines), lines
    # every seed of FT prepared before FT ran; the short runs were not held back by it
    assert sorted(line for line in order if line.startswith(f"seed {FT.label}")) == sorted(
        f"seed {FT.label} {s}" for s in SEEDS)
    assert order.index(f"run {FT.label}") > max(order.index(f"seed {FT.label} {s}") for s in SEEDS)
    assert f"run {broken.label}" not in order                                    # its seed failed: never ran
    assert [o.status for o in report.outcomes] == ["ran", "failed", "ran", "ran"]
    [failure] = report.failures
    assert failure.request == broken and f"{broken.label} · seed {SEEDS[1]} failed" in str(failure)
    assert "out of memory" in str(failure)
    # forced (every fine-tune retrains in its own run: parts would be trained twice), it splits nothing
    forced = tmp_path / "forced"
    _record(build_paths(forced), {FT.label: 1000.0, broken.label: 900.0, SHORT[0].label: 5.0, SHORT[1].label: 5.0})
    executor.run_requests(reqs, build_paths(forced), executor="dask", n_workers=3, task=fake_run, prepare=fake_prepare,
                          log=lambda *a: None, timing=False, force=True)
    assert not any(line.startswith("seed") for line in (forced / "order.log").read_text().splitlines())
    # the same build serially (one worker: nothing to gain) splits nothing
    executor.run_requests([FT, *SHORT], build_paths(tmp_path / "serial"), task=fake_run, prepare=fake_prepare,
                          log=lambda *a: None, timing=False)
    serial = (tmp_path / "serial" / "order.log").read_text().splitlines()
    assert f"run {FT.label}" in serial and not any(line.startswith("seed") for line in serial)


def _comparable(cell: dict) -> dict:
    """A cell without what says when, where and how long it ran, and whether a seed's weights and predictions
    were made in the run or found in the caches (the provenance a split run changes, and only that)."""
    drop = {"timing", "env", "seconds", "predict_seconds", "trained_here", "hit", "created", "wall_seconds",
            "model_calls", "calls", "served", "computed"}

    def clean(x):
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items() if k not in drop}
        if isinstance(x, list):
            return [clean(v) for v in x]
        return x

    return clean(cell)


@pytest.mark.timeout(600)
def test_a_run_whose_seeds_were_prepared_as_tasks_makes_the_cell_of_the_run_made_whole(tmp_path, data_dir,
                                                                                    monkeypatch):
    """The NegEx n100 fine-tune of a tiny encoder (recipe shrunk: two seeds, one epoch) made whole, and made after
    each seed was prepared by :func:`atlaslib.executor.prepare_part` with empty caches of its own: every seed is
    found in the caches (nothing trained or predicted in the run) and the cell is the same, metrics, intervals,
    every seed's answers and weights."""
    from atlaslib.cards.run import run as contract_run
    from atlaslib.protocols import finetune_cache
    from tests.protocols.test_finetune import RECIPE
    from tests.tiny_models import tiny_encoder

    encoder = str(tiny_encoder(tmp_path))
    monkeypatch.setenv("ATLAS_PROGRESS", "off")
    monkeypatch.setitem(negex.CARD.adapter_options, "finetune", {"max_length": 64, "embed_cache": False})
    monkeypatch.setattr(negex.FAMILY, "recipe", {**RECIPE, "max_length": 64, "epochs": 1, "seeds": [7, 8]})
    req = RunRequest("negex", "atlas-n100-v1", encoder, "finetune")

    def caches(name):
        monkeypatch.setenv("ATLAS_CACHE_DIR", str(tmp_path / name / "cache"))
        monkeypatch.setenv(finetune_cache.CACHE_ENV, str(tmp_path / name / "finetune"))

    caches("whole")
    whole = contract_run("negex", "atlas-n100-v1", encoder, "finetune", data_dir=data_dir)
    caches("split")
    for seed in (8, 7):   # in any order, as the workers finish them
        assert executor.prepare_part(req, ("seed", seed), data_dir=data_dir, results_dir=tmp_path / "unused") > 0
    assert not (tmp_path / "unused").exists()                        # a preparation writes no cell
    from atlaslib.protocols import finetune as ft

    with monkeypatch.context() as m:   # the run itself neither trains nor computes a logit: the caches serve both
        m.setattr(ft, "train_loop", lambda *a, **k: pytest.fail("a prepared seed was trained again"))
        m.setattr(ft, "_collate", lambda *a, **k: pytest.fail("a prepared seed's predictions were computed again"))
        split = contract_run("negex", "atlas-n100-v1", encoder, "finetune", data_dir=data_dir)
    assert whole["status"] == split["status"] == "ok"
    runs = split["extra"]["seed_runs"]
    assert [r["seed"] for r in runs] == [7, 8]
    assert _comparable(split) == _comparable(whole)
    # with a seed the recipe does not have, the preparation names it
    monkeypatch.setenv("ATLAS_FINETUNE_SEEDS", "")
    with pytest.raises(Exception, match=r"ATLAS_FINETUNE_SEEDS='9': seeds \[9\] are not the recipe's"):
        executor.prepare_part(req, ("seed", 9), data_dir=data_dir)



def test_a_long_zero_shot_run_is_cut_into_fixed_slices_of_its_test_items():
    from atlaslib.cards.run import shard_of
    from atlaslib.splits import SplitManifest

    llm = RunRequest("negex", "atlas-full-v1", "smollm2-135m-instruct", "zero_shot")
    reqs = [llm, *SHORT]
    expected = {llm.label: 900.0, SHORT[0].label: 30.0, SHORT[1].label: 30.0}   # total 960 s
    assert executor.plan_preparation(reqs, expected, 2) == [(0, ("shard", k, 2)) for k in range(2)]   # bound 480
    assert executor.plan_preparation(reqs, expected, 8) == [(0, ("shard", k, 8)) for k in range(8)]   # 120: 8 > 7.5
    expected[llm.label] = 20.0                    # short: not split; a card's baseline never is
    assert executor.plan_preparation(reqs, expected, 2) == []
    expected = {llm.label: 0.0, SHORT[0].label: 900.0, SHORT[1].label: 30.0}   # built-in systems: never
    assert executor.plan_preparation(reqs, expected, 2) == []
    # the slices: contiguous, in the manifest's order, sizes differing by at most one, every item once
    m = SplitManifest("negex", "v", 1, ["a"], [f"t{i:02d}" for i in range(10)])
    parts = [shard_of(m, k, 4).test for k in range(4)]
    assert [len(p) for p in parts] == [3, 3, 2, 2] and sum(parts, []) == m.test
    assert shard_of(m, 0, 4).train == ["a"]
    with pytest.raises(ValueError, match="test shard 4 of 4: expected 0 <= shard < n_shards"):
        shard_of(m, 4, 4)


@pytest.mark.timeout(600)
def test_a_run_whose_item_slices_were_prepared_as_tasks_makes_the_cell_of_the_run_made_whole(tmp_path, data_dir,
                                                                                          monkeypatch):
    """NegEx n100 zero-shot with a tiny causal language model (option scoring through the model-call store): made
    whole, and made after each of three slices of its test items was prepared (:func:`atlaslib.executor.prepare_part`)
    with an empty store of its own: the run computes no model call and its cell is the same."""
    from atlaslib.cards.run import run as contract_run
    from atlaslib.models import calls
    from tests.tiny_models import tiny_causal_lm

    model = str(tiny_causal_lm(tmp_path, max_positions=1024))
    monkeypatch.setenv("ATLAS_PROGRESS", "off")
    req = RunRequest("negex", "atlas-n100-v1", model, "zero_shot")
    monkeypatch.setenv("ATLAS_CACHE_DIR", str(tmp_path / "whole"))
    whole = contract_run("negex", "atlas-n100-v1", model, "zero_shot", data_dir=data_dir)
    monkeypatch.setenv("ATLAS_CACHE_DIR", str(tmp_path / "split"))
    for k in (2, 0, 1):
        assert executor.prepare_part(req, ("shard", k, 3), data_dir=data_dir) > 0
    asked = []
    with monkeypatch.context() as m:   # every answer is in the store: the run asks the model nothing
        m.setattr(calls.CallSpace, "answer", _served_only(calls.CallSpace.answer, asked))
        split = contract_run("negex", "atlas-n100-v1", model, "zero_shot", data_dir=data_dir)
    assert sum(asked) >= 100                                          # its answers did come through the store
    assert whole["status"] == split["status"] == "ok" and len(split["predictions"]) == 100
    assert _comparable(split) == _comparable(whole)


def _served_only(answer, asked: list):
    def wrapped(self, rows, compute, *a, **k):
        asked.append(len(rows))
        return answer(self, rows, lambda positions: pytest.fail(f"{len(positions)} model call(s) computed again"),
                      *a, **k)
    return wrapped
