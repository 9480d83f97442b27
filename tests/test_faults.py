"""Faults: a matrix run killed with SIGKILL leaves no partial result and resumes; a Dask worker that dies
is retried once, then its run is reported by name; a notebook error is not retried.

Everything on 127.0.0.1; real notebooks on real data where the point is the result files. The uninterrupted
reference is the session's reference runs (``tests/books.py``, shared with ``tests/test_executor.py``). A kill
lands when the run's kernel is executing its notebook (papermill's output notebook shows a cell executed), a
condition waited for, never a fixed time.
"""
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import nbformat
import psutil
import pytest

from atlaslib import book, executor, runner
from atlaslib.runner import RunFailed, RunRequest
from tests.books import REFERENCE_REQUESTS
from tests.cells import build_paths, cells

pytestmark = pytest.mark.xdist_group("reference_runs")  # shares the session's reference runs with test_executor

MAJORITY = RunRequest("negex", "atlas-n100-v1", "majority", "zero_shot")
ENTAIL = RunRequest("nli_negation", "builtin-v1", "always-entailment", "zero_shot")
ABSTAIN = RunRequest("nli_negation", "builtin-v1", "always-abstain", "zero_shot")
NEGSPACY = RunRequest("negex", "atlas-n100-v1", "negspacy-negex-kit", "zero_shot")


def _kill_tree(pid: int) -> None:
    """SIGKILL a process we started and everything it started (kernels run in their own sessions)."""
    try:
        parent = psutil.Process(pid)
        procs = parent.children(recursive=True) + [parent]
    except psutil.NoSuchProcess:
        return
    for p in procs:
        try:
            p.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(procs[:-1], timeout=10)  # the parent is reaped by its Popen (keeps its return code)


def assert_no_partial_results(paths: book.BuildPaths) -> list[Path]:
    """Every file where the book reads results is complete; returns the cell files."""
    assert not list(paths.results.rglob("*.tmp")) and not list(paths.runs.rglob("*.tmp"))
    found = []
    for p in paths.results.rglob("*"):
        if p.is_file():
            assert p.suffix == ".json", p
            json.loads(p.read_text())  # parses
            found.append(p)
    for p in paths.runs.rglob("*.ipynb"):
        if any(part.startswith("atlas-run-") for part in p.relative_to(paths.runs).parts):
            continue  # the runner's private work dir of the killed run, never read as a result
        nbformat.validate(nbformat.read(p, as_version=4))  # complete and valid
    # a cell is only ever written together with its executed notebook (a run's variant cells, under
    # <model>/variants/, are written by that run's own notebook: they have none of their own)
    for cell in found:
        if "variants" in cell.relative_to(paths.results).parts:
            continue
        rel = cell.relative_to(paths.results).with_suffix(".ipynb")
        assert (paths.runs / rel).is_file(), f"{cell} has no executed notebook"
    return found


def kernel_executing(runs_dir, req: RunRequest) -> bool:
    """The kernel of ``req``'s run is executing its notebook: papermill's output notebook in the runner's work
    dir beside the run's notebook (written again at every cell's start and end) records a cell that ran to
    completion."""
    from atlaslib.results import slug

    for out in (Path(runs_dir) / req.card / req.version / slug(req.model)).glob("atlas-run-*/out.ipynb"):
        try:
            nb = json.loads(out.read_text())
        except (OSError, ValueError):   # being written at this moment: look again
            continue
        if any((c.get("metadata", {}).get("papermill") or {}).get("status") == "completed" for c in nb["cells"]
               if c.get("cell_type") == "code"):
            return True
    return False


def wait_until(condition, what: str, timeout: float, proc=None) -> None:
    """Poll ``condition()`` until true; fails naming ``what`` after ``timeout`` s (a hang, not a measurement), or
    at once when ``proc`` ended first."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert proc is None or proc.poll() is None, f"the process ended before {what}"
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(0.05)


REQS = [MAJORITY, ENTAIL, NEGSPACY]
assert sorted(REQS, key=str) == sorted(REFERENCE_REQUESTS, key=str)


def test_sigkill_mid_matrix_leaves_no_partial_file_and_resumes(tmp_path, data_dir, reference_runs):
    ref = reference_runs[0]     # the same three runs, uninterrupted

    killed = build_paths(tmp_path / "killed")
    script = textwrap.dedent(f"""
        from pathlib import Path
        from atlaslib import book, executor
        from atlaslib.runner import RunRequest
        reqs = {REQS!r}
        paths = book.BuildPaths(results=Path({str(killed.results)!r}), runs=Path({str(killed.runs)!r}),
                                build=Path({str(killed.build)!r}))
        executor.run_requests(reqs, paths, data_dir={str(data_dir)!r})
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=runner.REPO, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: list(killed.results.rglob("*.json")), "the first run's result cell", 600, proc)
        # the second run is now under way: kill in the middle of it, once its kernel executes the notebook
        wait_until(lambda: kernel_executing(killed.runs, REQS[1]), "the second run's kernel executing a cell", 600, proc)
    finally:
        _kill_tree(proc.pid)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL

    found = assert_no_partial_results(killed)
    assert [p.relative_to(killed.results).as_posix() for p in found] == \
        ["negex/atlas-n100-v1/majority/zero_shot.json"]  # only the finished run left a result

    lines = []
    report = executor.run_requests(REQS, killed, data_dir=data_dir, log=lines.append)
    assert [o.status for o in report.outcomes] == ["cached", "ran", "ran"], lines
    assert not report.failures
    assert_no_partial_results(killed)
    assert cells(killed) == cells(ref)  # metrics, CIs, predictions, provenance
    report = executor.run_requests(REQS, killed, data_dir=data_dir, log=lambda *a: None)
    assert [o.status for o in report.outcomes] == ["cached"] * 3


def _count(marks: Path, req: RunRequest) -> int:
    f = marks / f"{req.model}.attempts"
    return len(f.read_text().split()) if f.exists() else 0


def test_dead_worker_is_retried_once_then_named_and_notebook_errors_are_not_retried(tmp_path, data_dir):
    marks = tmp_path / "marks"
    marks.mkdir()

    def task(req, **kwargs):
        """Runs on a Dask worker in place of runner.run."""
        with open(marks / f"{req.model}.attempts", "a") as fh:
            fh.write(f"{os.getpid()}\n")

        def die():  # the node goes down: the worker and the notebook kernel it started
            me = psutil.Process()
            for child in me.children(recursive=True):
                child.send_signal(signal.SIGKILL)
            me.send_signal(signal.SIGKILL)

        if req == ABSTAIN:  # dies every time
            die()
        if req == MAJORITY:  # a notebook error: deterministic, reported as is
            raise RunFailed(req, "notebooks/negex.md", 7, "ValueError: no such column", None)
        first = not (marks / "entail-died").exists()
        if first:  # die in the middle of the real notebook run, once its kernel is executing cells
            (marks / "entail-died").touch()

            def watch():
                deadline = time.monotonic() + 600
                while time.monotonic() < deadline:
                    if kernel_executing(kwargs["runs_dir"], ENTAIL):
                        die()
                    time.sleep(0.05)

            threading.Thread(target=watch, daemon=True).start()
        return runner.run(req, **kwargs)

    paths = build_paths(tmp_path / "dask")
    lines = []
    report = executor.run_requests([ENTAIL, ABSTAIN, MAJORITY], paths, data_dir=data_dir, executor="dask",
                                   n_workers=2, task=task, log=lines.append)
    status = {o.request: o.status for o in report.outcomes}
    assert status == {ENTAIL: "ran", ABSTAIN: "failed", MAJORITY: "failed"}, lines
    # killed once mid-notebook, then run again to completion
    assert _count(marks, ENTAIL) == 2
    assert report.outcomes[0].extra["attempts"] == 2
    assert report.outcomes[0].extra["worker"].startswith("tcp://127.0.0.1:")
    assert any(line.startswith(f"{ENTAIL.label}: worker lost (KilledWorker") and "retrying (1/1)" in line
               for line in lines)
    entail = json.loads((paths.results / "nli_negation/builtin-v1/always-entailment/zero_shot.json").read_text())
    assert entail["status"] == "ok" and entail["predictions"]
    assert_no_partial_results(paths)
    # dies every time: two attempts, then reported by name
    assert _count(marks, ABSTAIN) == 2
    lost = [f for f in report.failures if f.request == ABSTAIN]
    assert len(lost) == 1 and isinstance(lost[0], executor.WorkerLost) and lost[0].attempts == 2
    assert str(lost[0]).startswith("nli_negation/builtin-v1/always-abstain/zero_shot: the Dask worker running "
                                   "it died on all 2 attempt(s)")
    assert not (paths.results / "nli_negation/builtin-v1/always-abstain").exists()
    # a notebook error comes back once, as the runner reported it
    assert _count(marks, MAJORITY) == 1
    failed = [f for f in report.failures if f.request == MAJORITY]
    assert len(failed) == 1 and not isinstance(failed[0], executor.WorkerLost)
    assert "notebooks/negex.md failed in cell 7: ValueError: no such column" in str(failed[0])
    # the build log names both failures
    assert "2 of 3 run(s) failed:" in lines
    listed = lines[lines.index("2 of 3 run(s) failed:") + 1:]
    assert sum(ABSTAIN.label in line or MAJORITY.label in line for line in listed) == 2


def test_worker_lost_failures_are_rendered_as_failed_rows(tmp_path):
    """A run reported lost is a failure the book shows (and that fails the build), not a missing row."""
    from atlaslib.cards import get_card
    from atlaslib.pages.card_pages import leaderboard_markdown

    lost = executor.WorkerLost(ENTAIL, 2, "KilledWorker: ...")
    card = get_card("nli_negation")
    md = leaderboard_markdown(card, "builtin-v1", [], tmp_path, tmp_path, failed=[lost.request])
    text = md.replace("<wbr>", "")  # model names carry line-break hints in the table
    assert "| always-entailment | zero_shot | **failed**" in text
    assert isinstance(lost, RunFailed)  # book.build counts it with the other failures and exits non-zero
