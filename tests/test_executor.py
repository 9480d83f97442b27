"""The matrix executor: Dask LocalCluster parity with a serial run, cache hit/miss rules, bad input.

Real notebooks on real data (small runs: NegEx n100 majority and negspaCy, the NLI always-entailment
baseline; the serial run is the session's reference runs, shared with ``tests/test_faults.py``); Dask only on
127.0.0.1.
"""
import dataclasses
import json
import shutil

import pytest

from atlaslib import book, executor, runner
from atlaslib.runner import RunOutcome, RunRequest
from tests.books import REFERENCE_REQUESTS
from tests.cells import build_paths, cells

MAJORITY = RunRequest("negex", "atlas-n100-v1", "majority", "zero_shot")
NEGSPACY = RunRequest("negex", "atlas-n100-v1", "negspacy-negex-kit", "zero_shot")
ENTAIL = RunRequest("nli_negation", "builtin-v1", "always-entailment", "zero_shot")
REQS = [MAJORITY, NEGSPACY, ENTAIL]
assert REQS == REFERENCE_REQUESTS


pytestmark = pytest.mark.xdist_group("reference_runs")  # shares the session's reference runs with test_faults


@pytest.fixture(scope="module")
def frozen_source(source_digest_at_start):
    """Freeze atlaslib's source digest for this module's in-process runs at the session's (the reference runs'
    key), so that an edit to atlaslib made while the tests run does not turn the cache checks into misses."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(runner, "source_digest", lambda root=runner.ATLASLIB, part=None: source_digest_at_start[part])
        yield source_digest_at_start


@pytest.fixture(scope="module")
def serial(reference_runs, frozen_source):
    """The session's reference runs (``tests/books.py``): REQS run serially (never written into)."""
    paths, report, lines = reference_runs
    assert [o.request for o in report.outcomes] == REQS
    return paths, report, lines


def test_serial_run_writes_a_cell_and_notebook_per_request_and_prints_timing(serial):
    paths, report, lines = serial
    got = cells(paths)
    assert sorted(got) == ["negex/atlas-n100-v1/majority/zero_shot.json",
                           "negex/atlas-n100-v1/negspacy-negex-kit/zero_shot.json",
                           "nli_negation/builtin-v1/always-entailment/zero_shot.json"]
    assert len(list(paths.runs.rglob("*.ipynb"))) == 3
    # the majority baseline on n100 (21 negated, 79 affirmed) predicts 'affirmed' for all: macro F1 =
    # (0 + 2*79/(79+100)) / 2 by hand
    f1 = got["negex/atlas-n100-v1/majority/zero_shot.json"]["metrics"]["macro_f1_zero_shot"]
    assert f1["value"] == pytest.approx((2 * 79 / 179) / 2)
    table = "\n".join(lines)
    assert "matrix wall time" in table and all(r.label in table for r in REQS)
    assert report.outcomes[0].request == MAJORITY and report.seconds > 0


def test_dask_localcluster_gives_the_serial_cells(serial, tmp_path, data_dir, recwarn):
    """... and its scheduler serves HTTP on 127.0.0.1 only, on a free port: with port 8787 taken (as by another
    build's cluster) nothing warns."""
    import socket

    s_paths, s_report, _ = serial
    d_paths = build_paths(tmp_path)
    lines = []
    taken = socket.socket()
    try:
        taken.bind(("127.0.0.1", 8787))   # loopback only: nothing is opened to the network
        taken.listen()
    except OSError:
        pass  # already taken by another process: the same situation
    try:
        report = executor.run_requests(REQS, d_paths, data_dir=data_dir, executor="dask", n_workers=2,
                                       log=lines.append)
    finally:
        taken.close()
    assert not [str(w.message) for w in recwarn if "8787" in str(w.message)]
    assert [o.request for o in report.outcomes] == REQS  # request order, whatever the completion order
    assert [o.status for o in report.outcomes] == ["ran"] * 3 and not report.failures, lines
    workers = {o.extra["worker"] for o in report.outcomes}
    assert all(w.startswith("tcp://127.0.0.1:") for w in workers)
    assert any("LocalCluster at tcp://127.0.0.1:" in line for line in lines)
    serial_cells, dask_cells = cells(s_paths), cells(d_paths)
    assert dask_cells.keys() == serial_cells.keys()
    for name in serial_cells:
        assert dask_cells[name]["metrics"] == serial_cells[name]["metrics"], name  # values and CIs
        assert dask_cells[name]["predictions"] == serial_cells[name]["predictions"], name
        assert dask_cells[name] == serial_cells[name], name  # and everything else but timing/environment
    # nothing changed: every run is served from the cache without starting a cluster
    lines.clear()
    report = executor.run_requests(REQS, d_paths, data_dir=data_dir, executor="dask", n_workers=2,
                                   log=lines.append)
    assert [o.status for o in report.outcomes] == ["cached"] * 3
    assert "dask: all 3 run(s) are current; no cluster needed" in lines
    assert not any("LocalCluster" in line for line in lines)
    nb = d_paths.runs / "negex/atlas-n100-v1/negspacy-negex-kit/zero_shot.ipynb"
    assert json.loads(nb.read_text())["cells"]
    assert not [p for p in d_paths.runs.rglob("*") if p.name.startswith("atlas-run-")]  # no work dirs left


def test_cache_rules(serial, tmp_path, data_dir):
    s_paths, _, _ = serial
    paths = build_paths(tmp_path)
    shutil.copytree(s_paths.results, paths.results)
    shutil.copytree(s_paths.runs, paths.runs)
    quiet = dict(data_dir=data_dir, log=lambda *a, **k: None)
    before = {p: p.stat().st_mtime_ns for p in paths.results.rglob("*.json")}

    # nothing changed: nothing executes, nothing is rewritten
    report = executor.run_requests(REQS, paths, **quiet)
    assert [o.status for o in report.outcomes] == ["cached"] * 3
    assert {p: p.stat().st_mtime_ns for p in paths.results.rglob("*.json")} == before

    # one request's parameter changes: only that run executes
    fewer = dataclasses.replace(MAJORITY, params=(("n_resamples", 200),))
    report = executor.run_requests([fewer, NEGSPACY, ENTAIL], paths, **quiet)
    assert [o.status for o in report.outcomes] == ["ran", "cached", "cached"]
    cell = json.loads((paths.results / "negex/atlas-n100-v1/majority/zero_shot.json").read_text())
    assert cell["spec"]["parameters"]["n_resamples"] == 200

    # a card's pinned data change: its runs re-key, the other card's do not
    pins = runner._card_data_pins
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(runner, "_card_data_pins",
                   lambda card: pins(card) + ([["negex/new-file.txt", "0" * 64]] if card == "negex" else []))
        keys_changed = {r: not _current(r, paths) for r in (fewer, NEGSPACY, ENTAIL)}
        assert keys_changed == {fewer: True, NEGSPACY: True, ENTAIL: False}
        report = executor.run_requests([fewer, ENTAIL], paths, **quiet)
        assert [o.status for o in report.outcomes] == ["ran", "cached"]

    # atlaslib's source changes: every run re-keys (majority's stored key still carries the changed pins)
    assert _current(NEGSPACY, paths) and _current(ENTAIL, paths) and not _current(fewer, paths)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(runner, "source_digest", lambda root=runner.ATLASLIB, part=None: "0" * 64)
        assert not _current(NEGSPACY, paths) and not _current(ENTAIL, paths)

    # force ignores the cache
    report = executor.run_requests([NEGSPACY, ENTAIL], paths, force=True, **quiet)
    assert [o.status for o in report.outcomes] == ["ran", "ran"]
    assert cells(paths)["nli_negation/builtin-v1/always-entailment/zero_shot.json"] == \
        cells(s_paths)["nli_negation/builtin-v1/always-entailment/zero_shot.json"]


def _current(req: RunRequest, paths: book.BuildPaths) -> bool:
    from atlaslib.cards import get_card

    text = (runner.REPO / get_card(req.card).notebook).read_text(encoding="utf-8")
    return runner.is_current(req, runner.run_key(req, text), paths.results, paths.runs)


def test_existing_scheduler_from_the_environment(tmp_path, monkeypatch):
    from distributed import LocalCluster

    def fake(req, **kw):  # stands in for runner.run: the point is where it runs
        return RunOutcome(req, "ran", seconds=0.0, cell_status="ok")

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp", host="127.0.0.1",
                      dashboard_address=None, scheduler_kwargs={"dashboard_address": "127.0.0.1:0"}) as cluster:
        monkeypatch.setenv(executor.SCHEDULER_ENV, cluster.scheduler_address)
        lines = []
        # executor=None: Dask because a scheduler is named in the environment
        report = executor.run_requests(REQS, build_paths(tmp_path), executor=None, task=fake, log=lines.append)
        workers = set(cluster.scheduler_info["workers"])
    assert [o.status for o in report.outcomes] == ["ran"] * 3
    assert {o.extra["worker"] for o in report.outcomes} <= workers
    assert f"dask: submitting to the scheduler at {cluster.scheduler_address}" in lines


@pytest.mark.parametrize("kwargs, message", [
    ({"executor": "spark"}, "executor is 'spark'; expected one of serial, dask"),
    ({"scheduler": "tcp://127.0.0.1:8786"}, "needs executor='dask'"),
    ({"executor": "dask", "scheduler": "127.0.0.1:8786"}, "scheduler is '127.0.0.1:8786'; expected a Dask"),
    ({"retries": -1}, "retries is -1"),
    ({"executor": "dask", "n_workers": 0}, "n_workers is 0"),
    ({"executor": "dask", "memory_limit": "lots"}, "memory_limit is 'lots'; expected a size such as '4GiB'"),
    ({"scheduler": "tcp://127.0.0.1:8786", "n_workers": 2, "executor": None},
     "n_workers/memory_limit size a LocalCluster; the cluster at tcp://127.0.0.1:8786 sizes its own"),
])
def test_bad_options_are_refused_before_anything_runs(tmp_path, kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        executor.run_requests(REQS, build_paths(tmp_path), log=lambda *a: None, **kwargs)
    assert not (tmp_path / "results").exists()


def test_bad_scheduler_in_the_environment_is_named(monkeypatch):
    monkeypatch.setenv(executor.SCHEDULER_ENV, "localhost")
    with pytest.raises(ValueError, match=r"\$ATLAS_DASK_SCHEDULER is 'localhost'; expected"):
        executor.resolve_scheduler(None)
    monkeypatch.setenv(executor.SCHEDULER_ENV, "tcp://10.0.0.5:8786")
    assert executor.resolve_scheduler(None) == "tcp://10.0.0.5:8786"
    assert executor.resolve_scheduler("tls://sched.lab:8786") == "tls://sched.lab:8786"
    monkeypatch.delenv(executor.SCHEDULER_ENV)
    assert executor.resolve_scheduler(None) is None


def test_unreachable_scheduler_is_named(tmp_path, refused_url):
    address = "tcp://" + refused_url.removeprefix("http://")   # a loopback port held, nobody listening
    with pytest.raises(executor.ExecutorError, match=f"cannot reach the Dask scheduler at {address}"):
        executor.run_requests(REQS, build_paths(tmp_path), executor="dask", scheduler=address,
                              log=lambda *a: None, connect_timeout="2s")


@pytest.mark.parametrize("reqs, message", [
    ([MAJORITY, RunRequest("negex", "atlas-n999", "majority", "zero_shot")],
     r"requests\[1\] \(negex/atlas-n999/majority/zero_shot\): card negex has no split version 'atlas-n999'"),
    ([RunRequest("negex", "atlas-n100-v1", "majority", "few_shot")], r"requests\[0\].*no protocol 'few_shot'"),
    ([RunRequest("nope", "v", "m", "p")], r"requests\[0\] \(nope/v/m/p\): unknown card 'nope'"),
    ([MAJORITY, ENTAIL, MAJORITY], r"requests\[2\] \(negex/atlas-n100-v1/majority/zero_shot\) repeats requests\[0\]"),
])
def test_bad_requests_are_refused_by_index(tmp_path, reqs, message):
    with pytest.raises(ValueError, match=message):
        executor.run_requests(reqs, build_paths(tmp_path), executor="dask", log=lambda *a: None)


def test_a_non_request_is_refused(tmp_path):
    with pytest.raises(TypeError, match=r"requests\[0\] is a tuple; expected an atlaslib.runner.RunRequest"):
        executor.run_requests([("negex", "atlas-n100-v1", "majority", "zero_shot")], build_paths(tmp_path))


def test_an_unexpected_error_is_a_named_failure_not_a_missing_cell(tmp_path):
    def broken(req, **kw):
        raise OSError(f"disk full while writing {req.label}")

    lines = []
    report = executor.run_requests([ENTAIL], build_paths(tmp_path), task=broken, log=lines.append)
    assert [o.status for o in report.outcomes] == ["failed"]
    assert isinstance(report.failures[0], runner.RunFailed)
    assert str(report.failures[0]) == ("nli_negation/builtin-v1/always-entailment/zero_shot: the run raised "
                                       "outside its notebook: OSError: disk full while writing "
                                       "nli_negation/builtin-v1/always-entailment/zero_shot")
    assert any("1 of 1 run(s) failed" in line for line in lines)


# -- where the build's time goes ---------------------------------------------------------------------------

def test_the_longest_kinds_of_run_are_handed_out_first_a_cards_second_after_every_first():
    reqs = [RunRequest("negex", "n100", "m", "finetune"), RunRequest("negex", "full", "m", "finetune"),
            RunRequest("maccrobat", "n100", "m", "finetune"), RunRequest("negex", "n100", "m", "probe"),
            RunRequest("tempeval", "dev", "closest", "phase2"), RunRequest("maccrobat", "n100", "m", "probe"),
            RunRequest("negex", "full", "m", "probe"), RunRequest("negex", "n100", "majority", "zero_shot")]
    # no record: fine-tuning (negex, maccrobat, then negex's second), probes likewise, a model's other run (the
    # 300 s estimate), then a card's own baseline (TempEval's closest: 30 s)
    assert executor.longest_first(reqs) == [0, 2, 1, 3, 5, 6, 7, 4]
    expected = executor.expected_seconds(reqs, {})
    assert [expected[r.label] for r in reqs] == [1500, 1500, 1500, 600, 30, 600, 600, 300]
    # the last build's record wins over the estimate: a recorded long zero-shot goes first, a fast fine-tune last
    record = {reqs[7].label: 4000.0, reqs[1].label: 5.0}
    assert executor.longest_first(reqs, executor.expected_seconds(reqs, record)) == [7, 0, 2, 3, 5, 6, 4, 1]


def test_a_first_build_orders_the_default_matrix_by_the_reference_build_so_the_longest_starts_first():
    reqs = book.default_requests()
    reference = json.loads(executor.REFERENCE_TIMES.read_text(encoding="utf-8"))
    assert set(reference) == {r.label for r in reqs}  # every default run has a reference time
    order = [reqs[i].label for i in executor.longest_first(reqs, executor.expected_seconds(reqs, {}))]
    times = [reference[label] for label in order]
    assert times == sorted(times, reverse=True)
    # SmolLM2 on all 1,432 NegEx items starts among the first, not last beside an idle worker
    assert order.index("negex/atlas-full-v1/smollm2-135m-instruct/zero_shot") < 3


def test_a_build_records_its_runs_times_for_the_next_and_a_damaged_record_costs_only_the_order(tmp_path):
    reqs = [RunRequest("negex", "n100", "m", "finetune"), RunRequest("negex", "n100", "majority", "zero_shot")]
    outs = [runner.RunOutcome(reqs[0], "ran", seconds=812.34), runner.RunOutcome(reqs[1], "cached", seconds=0.2)]
    executor.save_run_times(tmp_path, outs)
    assert executor.load_run_times(tmp_path) == {reqs[0].label: 812.3}  # a cached run keeps its earlier record
    executor.save_run_times(tmp_path, [runner.RunOutcome(reqs[1], "ran", seconds=3.0)])
    assert executor.load_run_times(tmp_path) == {reqs[0].label: 812.3, reqs[1].label: 3.0}
    (tmp_path / executor.RUN_TIMES).write_text("{not json", encoding="utf-8")
    assert executor.load_run_times(tmp_path) == {}
    lines = []
    executor.save_run_times(tmp_path / executor.RUN_TIMES / "x", outs, log=lines.append)  # a file in the way
    assert len(lines) == 1 and "could not be recorded" in lines[0]


def test_a_local_cluster_has_no_more_workers_than_runs_so_one_run_gets_every_core(monkeypatch):
    monkeypatch.setattr(executor.os, "cpu_count", lambda: 2)
    monkeypatch.delenv(executor.THREADS_ENV, raising=False)
    assert [executor.cluster_size(None, n) for n in (1, 2, 38)] == [1, 2, 2]
    assert executor.cluster_size(3, 1) == 3                       # asked for: given
    assert [executor.worker_threads(executor.cluster_size(None, n)) for n in (1, 38)] == [2, 1]


def test_a_lost_worker_is_waited_for_as_long_as_the_matrix_waits_for_any(monkeypatch, tmp_path):
    """distributed's LocalCluster closes a lost worker's nanny for good after lost-worker-timeout (15 s by
    default); a worker restarting on a loaded machine took longer and the build was left with no worker. While
    the atlas's cluster exists the timeout is the executor's own wait for a worker, and afterwards what it was."""
    import dask
    import distributed  # noqa: F401  (its configuration defaults)

    before = dask.config.get("distributed.deploy.lost-worker-timeout")
    seen = []

    def no_cluster(*args, **kwargs):
        seen.append(dask.config.get("distributed.deploy.lost-worker-timeout"))
        raise executor.ExecutorError("stop here")

    monkeypatch.setattr(executor, "_open_client", no_cluster)
    with pytest.raises(executor.ExecutorError, match="stop here"):
        executor._run_dask([REFERENCE_REQUESTS[0]], {}, None, print, address=None, from_env=False, n_workers=1,
                           memory_limit=None, retries=1, no_worker_timeout=600.0)
    assert seen == ["600s"] and dask.config.get("distributed.deploy.lost-worker-timeout") == before


def test_an_interrupted_build_keeps_the_times_of_the_runs_it_finished(tmp_path):
    def first_then_interrupt(req, **kw):
        if req == MAJORITY:
            return RunOutcome(req, "ran", seconds=41.5, cell_status="ok")
        raise KeyboardInterrupt  # the user stops the build while the second run is going

    paths = build_paths(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        executor.run_requests([MAJORITY, NEGSPACY], paths, task=first_then_interrupt, log=lambda *a: None)
    assert executor.load_run_times(paths.build) == {MAJORITY.label: 41.5}


def test_data_stories_run_beside_the_matrix_not_before_it(tmp_path, monkeypatch):
    """The matrix waits for a signal the stories give when they start: run one after the other, it would time
    out; a failing story is raised in the caller."""
    import threading

    from atlaslib.matrix import MatrixReport

    started = threading.Event()

    def stories(pairs, runs_dir, **kw):
        started.set()
        return [f"story {c}/{v}" for c, v in pairs]

    def matrix():
        assert started.wait(30), "the data stories did not start while the matrix ran"
        return MatrixReport()

    monkeypatch.setattr(book.datastory, "run_stories", stories)
    paths = book.BuildPaths(results=tmp_path / "r", runs=tmp_path / "n", build=tmp_path / "b")
    reqs = [RunRequest("negex", "atlas-n100-v1", "majority", "zero_shot")]
    report = book._with_stories(reqs, paths, None, False, print, matrix)
    assert report.stories == ["story negex/atlas-n100-v1"]

    def broken(pairs, runs_dir, **kw):
        raise RuntimeError("story kernel died")

    monkeypatch.setattr(book.datastory, "run_stories", broken)
    with pytest.raises(RuntimeError, match="story kernel died"):
        book._with_stories(reqs, paths, None, False, print, MatrixReport)


def test_a_cell_records_torch_threads_only_for_a_run_that_used_torch():
    """Recording the environment never imports torch (seconds per run of a rule system or a scorer)."""
    import subprocess
    import sys

    code = ("import sys; {pre}from atlaslib import results; e = results.environment(); "
            "print('torch' in sys.modules, 'torch_threads' in e)")
    without = subprocess.run([sys.executable, "-c", code.format(pre="")], capture_output=True, text=True, check=True)
    assert without.stdout.split() == ["False", "False"]
    used = subprocess.run([sys.executable, "-c", code.format(pre="import torch; ")], capture_output=True, text=True,
                          check=True)
    assert used.stdout.split() == ["True", "True"]


def test_an_exclusive_protocol_runs_one_at_a_time_and_fine_tuning_is_not_one(monkeypatch):
    """Fine-tuning trains with one torch thread per worker (the recipes' ``torch_threads``), so two fine-tunes
    run side by side; a protocol declared exclusive would wait while another of its runs is in flight."""
    from atlaslib.cards import maccrobat, negex

    assert negex.FINETUNE_RECIPE["torch_threads"] == maccrobat.FINETUNE_RECIPE["torch_threads"] == 1
    reqs = [RunRequest("negex", "n100", "m", "finetune"), RunRequest("maccrobat", "n100", "m", "finetune"),
            RunRequest("negex", "n100", "m", "probe")]
    queue = [(1, 0), (2, 0)]
    assert executor.next_run(queue, reqs, running=[0]) == 0          # the second fine-tune starts beside the first
    monkeypatch.setattr(executor, "EXCLUSIVE_PROTOCOLS", ("finetune",))
    assert executor.next_run(queue, reqs, running=[]) == 0           # nothing running: the first queued
    assert executor.next_run(queue, reqs, running=[0]) == 1          # one runs: the probe goes first
    assert executor.next_run([(1, 0)], reqs, running=[0]) is None    # only exclusive runs left: it waits
    assert executor.next_run(queue, reqs, running=[2]) == 0
    assert executor.next_run(queue, reqs, running=[0], exclusive=False) == 0   # a cluster that schedules itself


def test_work_in_background_gives_its_result_or_raises_in_the_caller():
    """The helper behind the stories beside the matrix and the lessons beside the render: the value comes
    back, an exception (KeyboardInterrupt too) is raised where the result is asked for, and the thread is a
    daemon, so Ctrl-C never waits for it."""
    import threading

    from atlaslib.background import in_background

    seen = {}

    def work():
        seen["daemon"] = threading.current_thread().daemon
        return 42

    assert in_background(work, "t").result(timeout=30) == 42 and seen["daemon"] is True
    for exc in (ValueError("story failed"), KeyboardInterrupt()):
        def boom(exc=exc):
            raise exc
        with pytest.raises(type(exc)):
            in_background(boom, "t").result(timeout=30)


def test_the_status_says_what_runs_for_how_long_and_when_the_matrix_should_end(monkeypatch):
    """Not a terminal: one line per change, each with the expected end; the arithmetic by hand."""
    from atlaslib.progress import MatrixStatus

    monkeypatch.setenv("ATLAS_PROGRESS", "auto")
    now = [100.0]
    lines: list[str] = []

    class Pipe:  # a log file: no terminal
        def isatty(self):
            return False

    status = MatrixStatus(["a", "b", "c"], {"a": 600.0, "b": 300.0, "c": 60.0}, workers=2, log=lines.append,
                          stream=Pipe(), clock=lambda: now[0])
    assert not status.in_place
    status.started("a")
    now[0] = 160.0
    status.started("b")
    now[0] = 400.0  # a: 300 s in, 300 left; b: 240 s in, 60 left; c queued 60 -> 420 s of work on 2 workers
    assert status.remaining() == 210.0
    assert status.line().startswith("runs 0/3 done | a 5m00s of ~10m00s | b 4m00s of ~5m00s | expected end ")
    assert status.line().endswith("(in ~3m30s)")
    status.finished("b", "[1/3] b: ran")
    assert lines[-1].startswith("[1/3] b: ran | expected end ") and len(lines) == 3  # one line per change
    now[0] = 1000.0  # a overran its record: nothing left of it counts, c's 60 s on min(2 workers, 2 runs left)
    assert status.remaining() == 30.0
    status.finished("a", "[2/3] a: ran")
    status.started("c")
    status.finished("c", "[3/3] c: ran")
    assert lines[-1] == "[3/3] c: ran"  # the last line has no end to expect
    status.close()


def test_times_not_measured_here_are_scaled_by_the_runs_done_here_and_the_line_says_so(monkeypatch):
    """a, b and e carry the reference build's times, c this machine's own record. a, expected 1,000 s, takes
    100 s here (a warm store): b's 2,000 s count as 200 s, c's own 100 s as they are, and e's 50 s as 5 s (a's
    100 s are no floor for a run expected shorter than a). By hand, one worker: 3,150 s before, 305 s after; a
    run served from the cache or failed says nothing of the machine's speed."""
    from atlaslib.progress import Expected, MatrixStatus

    monkeypatch.setenv("ATLAS_PROGRESS", "plain")
    now, lines = [0.0], []
    expected = Expected({"a": 1000.0, "b": 2000.0, "c": 100.0, "d": 0.0, "e": 50.0}, measured_here={"c"})
    status = MatrixStatus(["a", "b", "c", "d", "e"], expected,
                          workers=1, log=lines.append, clock=lambda: now[0], heartbeat=0)
    status.started("a")
    assert status.remaining() == 3150.0
    assert status.end().endswith("(in ~52m30s by the reference build's times)")
    now[0] = 100.0
    status.finished("a", "[1/5] a: ran")
    assert status.scale() == pytest.approx(0.1) and status.remaining() == pytest.approx(305.0)
    assert lines[-1].endswith("(in ~5m05s by the reference build's times × 0.1, as 1 run here took)")
    status.started("d")
    status.finished("d", "[2/5] d: cached", ran=False)                  # served: not a measure of this machine
    status.started("b")
    now[0] = 150.0
    assert status.line().startswith("runs 2/5 done | b 0m50s of ~3m20s |")
    now[0] = 2100.0
    status.finished("b", "[3/5] b: failed", ran=False)                  # failed: not one either
    assert status.scale() == pytest.approx(0.1)
    status.started("e")
    now[0] = 2180.0
    status.finished("e", "[4/5] e: ran")                                # 80 s for 50 expected: the scale moves
    assert status.scale() == pytest.approx(180 / 1050)
    assert lines[-1].endswith("(in ~1m40s)")                            # only c is left: its own record, unscaled
    status.close()


def test_no_short_run_is_expected_to_take_as_long_as_a_long_run_done_here(monkeypatch):
    """The longest runs go first. Two warm long runs done (1,000 s and 800 s expected, 500 s and 450 s here:
    scale 950/1,800) leave the short runs their scaled times (60 s → 31.7 s, 10 s → 5.3 s), never the long runs'
    450 s; once the 60 s run took 40 s here, the 70 s run is expected at no less than that (70 × scale = 37.5 s
    < 40 s), and the 10 s run still at its scaled time. By hand, one worker."""
    from atlaslib.progress import Expected, MatrixStatus

    monkeypatch.setenv("ATLAS_PROGRESS", "plain")
    now, lines = [0.0], []
    status = MatrixStatus(["a", "b", "s60", "s70", "s10"],
                          Expected({"a": 1000.0, "b": 800.0, "s60": 60.0, "s70": 70.0, "s10": 10.0}, measured_here=()),
                          workers=1, log=lines.append, clock=lambda: now[0], heartbeat=0)
    for label, taken in (("a", 500.0), ("b", 450.0)):
        status.started(label)
        now[0] += taken
        status.finished(label, f"{label}: ran")
    scale = 950 / 1800
    assert status.expect("s60") == pytest.approx(60 * scale) and status.expect("s10") == pytest.approx(10 * scale)
    assert status.remaining() == pytest.approx(140 * scale)
    status.started("s60")
    now[0] += 40.0
    status.finished("s60", "s60: ran")
    scale = 990 / 1860
    assert status.expect("s70") == pytest.approx(40.0) and 70 * scale < 40.0
    assert status.expect("s10") == pytest.approx(10 * scale)
    status.close()


def test_each_model_is_scaled_by_its_own_runs_done_here(monkeypatch):
    """A warm store served the encoder's fine-tune (1,000 s expected, 30 s here): that says nothing of the LM's
    runs, which must be computed. The LM's runs keep the reference's times (800 s and 500 s, not × 0.03) until one
    of its own runs is done; the LM's 800 s run taking 1,600 s scales its other run × 2; the encoder's second
    run (100 s) × 0.03, floored at no run done here (30 s was expected of a longer run). By hand, one worker."""
    from atlaslib.progress import Expected, MatrixStatus

    monkeypatch.setenv("ATLAS_PROGRESS", "plain")
    now, lines = [0.0], []
    labels = ["enc-ft", "lm-a", "lm-b", "enc-probe"]
    status = MatrixStatus(labels, Expected({"enc-ft": 1000.0, "lm-a": 800.0, "lm-b": 500.0, "enc-probe": 100.0},
                                           measured_here=()),
                          workers=1, log=lines.append, clock=lambda: now[0], heartbeat=0,
                          groups={"enc-ft": "enc", "enc-probe": "enc", "lm-a": "lm", "lm-b": "lm"})
    status.started("enc-ft")
    now[0] += 30.0
    status.finished("enc-ft", "enc-ft: ran")
    assert status.expect("lm-a") == 800.0 and status.expect("lm-b") == 500.0
    assert status.expect("enc-probe") == pytest.approx(3.0)
    assert status.remaining() == pytest.approx(1303.0)
    assert lines[-1].endswith("each model's scaled by its own runs done here (1 run here so far))")
    status.started("lm-a")
    now[0] += 1600.0
    status.finished("lm-a", "lm-a: ran")
    assert status.expect("lm-b") == pytest.approx(1000.0) and status.expect("enc-probe") == pytest.approx(3.0)
    status.close()


def test_a_build_expects_its_recorded_runs_as_recorded_and_the_others_by_the_reference(tmp_path):
    """What the build's log says: with no record, the reference build's times; a run recorded here is expected
    as recorded."""
    paths, lines = build_paths(tmp_path), []
    ran = lambda req, **kw: RunOutcome(req, "ran", seconds=1.0, cell_status="ok")  # noqa: E731
    executor.run_requests([MAJORITY, NEGSPACY], paths, task=ran, log=lines.append, timing=False)
    assert "by the reference build's times" in "\n".join(lines[:2]), lines
    lines.clear()
    executor.run_requests([MAJORITY, NEGSPACY], paths, task=ran, log=lines.append, timing=False)
    assert lines and not any("reference build" in line for line in lines), lines


def test_in_a_log_a_long_run_shows_its_elapsed_time_every_heartbeat(monkeypatch):
    """Not a terminal: while a run goes on and nothing changes, the status line is logged again once the heartbeat
    has passed since the last line (never sooner, never with nothing running)."""
    from atlaslib.progress import MatrixStatus

    monkeypatch.setenv("ATLAS_PROGRESS", "plain")
    now, lines = [0.0], []
    status = MatrixStatus(["a", "b"], {"a": 1800.0, "b": 60.0}, workers=1, log=lines.append, clock=lambda: now[0],
                          heartbeat=300.0)
    assert not status.beat()                        # nothing running
    status.started("a")
    now[0] = 299.0
    assert not status.beat() and len(lines) == 1    # not yet 300 s since the started line
    now[0] = 300.0
    assert status.beat() and lines[-1].startswith("runs 0/2 done | a 5m00s of ~30m00s")
    now[0] = 450.0
    assert not status.beat()                        # 150 s since the heartbeat line
    status.finished("a", "[1/2] a: ran")
    now[0] = 1000.0
    assert not status.beat() and lines[-1].startswith("[1/2] a: ran")   # nothing running: no line
    status.close()


def test_in_a_terminal_the_status_is_one_line_redrawn_in_place_with_the_logs_above_it(monkeypatch):
    import io

    from atlaslib.progress import MatrixStatus

    monkeypatch.setenv("ATLAS_PROGRESS", "auto")

    class Tty(io.StringIO):
        def isatty(self):
            return True

    tty, lines = Tty(), []
    status = MatrixStatus(["a"], {"a": 10.0}, workers=2, log=lines.append, stream=tty, clock=lambda: 0.0)
    status.started("a")
    assert lines == [] and tty.getvalue().startswith("\r\x1b[Kruns 0/1 done | a 0m00s of ~0m10s")
    status.finished("a", "[1/1] a: ran")
    assert lines == ["[1/1] a: ran"]  # the run's line is logged (the status line cleared before it)
    status.close()
    assert tty.getvalue().endswith("\r\x1b[K")  # nothing of the status is left on the terminal
