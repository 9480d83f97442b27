"""Faults, third round (issue 36, first half): nothing deleted that the atlas did not make, nothing hung, nothing
wrong served from a damaged cache.

One test per case as reported (the case number in the name): a --build-dir holding someone else's folders and
two builds on one, a Dask scheduler that accepts but never answers (and one that freezes), a named pipe among
the files a scorer reads, OpenAI-compatible replies of any size and back-off without a ceiling, redirects and
bad Retry-After headers, damaged build caches, a full disk; then the smaller ones (a data story stopped by
SIGTERM, an empty model folder left by a killed run, empty and path-like model names, a lesson name that is a
path). Every test calls ``atlas`` in-process (``cli.main``) where the report used the command, and starts no
kernel. A test that would hang on the old code carries a timeout, so that it fails there instead.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import urllib.request
from pathlib import Path

import pytest

from atlaslib import cli
from atlaslib.models import calls
from tests.external.test_score import atlas  # atlas(capsys, *args) -> (exit code, stdout, stderr), in-process
from tests.test_faults_second_round import refused  # one line on stderr, no traceback, the exit code
from tests.test_faults_user import one_line

N100 = "atlas-n100-v1"
#: a guard for tests whose case hung on the old code: they fail there instead of waiting forever
HANG_GUARD = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def tempeval_export(tmp_path_factory) -> Path:
    """The TempEval synthetic-v1 test split exported as an Anafora folder (``<out>/anafora``)."""
    out = tmp_path_factory.mktemp("tempeval") / "export"
    assert cli.main(["export", "--card", "tempeval", "--version", "synthetic-v1", "-o", str(out)]) == 0
    return out / "anafora"


# ------------------------------------------------------------------------------------------------ 4


@HANG_GUARD
def test_case04_a_fifo_among_the_files_a_scorer_reads_is_refused_by_name(tmp_path, capsys, tempeval_export,
                                                                         data_dir, monkeypatch):
    capsys.readouterr()

    def with_fifo(name: str) -> tuple[Path, Path]:
        folder = shutil.copytree(tempeval_export, tmp_path / name)
        doc = sorted(p for p in folder.iterdir() if p.is_dir())[0]
        xml = next(doc.glob("*.Temporal-*.xml"))
        xml.unlink()
        os.mkfifo(xml)  # nobody writes: reading it would wait forever
        return folder, xml

    pred, fifo = with_fifo("pred")
    line = refused(capsys, "score", "--card", "tempeval", "--version", "synthetic-v1", "--protocol", "phase2",
                   "--predictions", pred, "--name", "x", "--results-dir", tmp_path / "r")
    assert f"{fifo}: a named pipe (FIFO), not a file" in line
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").rglob("*.json"))
    line = refused(capsys, "score", "tempeval", "-r", tempeval_export, "-p", pred)
    assert f"{fifo}: a named pipe (FIFO), not a file" in line and "predicted file" in line
    ref, fifo = with_fifo("ref")
    line = refused(capsys, "score", "tempeval", "-r", ref, "-p", tempeval_export)
    assert f"{fifo}: a named pipe (FIFO), not a file" in line and "reference file" in line

    answers = tmp_path / "answers.json"
    os.mkfifo(answers)
    line = refused(capsys, "course", "check", "intervals", answers)
    assert f"{answers}: a named pipe (FIFO), not a file" in line

    # a data file that is not a regular file is refused as such, never taken for a missing one and downloaded
    data = tmp_path / "data"
    shutil.copytree(data_dir / "negex", data / "negex")
    (data / "negex" / "Annotations-1-120-random.txt").unlink()
    os.mkfifo(data / "negex" / "Annotations-1-120-random.txt")
    monkeypatch.setenv("ATLAS_CACHE_DIR", str(tmp_path / "cache"))
    downloads = []
    monkeypatch.setattr(urllib.request, "urlopen", lambda *a, **k: downloads.append(a) or pytest.fail("downloaded"))
    code, _, err = atlas(capsys, "split", "--card", "negex", "--version", N100, "--data-dir", data)
    line = one_line(err)
    assert code != 0 and not downloads
    assert f"{data / 'negex' / 'Annotations-1-120-random.txt'} for negex/Annotations-1-120-random.txt is a named " \
           f"pipe (FIFO), not a file" in line


# ------------------------------------------------------------------------------------------------ 1


def test_case01_build_dir_folders_the_atlas_did_not_make_are_never_deleted(tmp_path, capsys, monkeypatch):
    from atlaslib import book

    monkeypatch.setattr(book, "render_site", lambda *a, **k: pytest.fail("built into folders it did not make"))
    w = tmp_path / "w" / "u"
    (w / "site" / "blog").mkdir(parents=True)
    (w / "site-src").mkdir(parents=True)
    (w / "site" / "blog" / "post.md").write_text("mine\n")
    (w / "site-src" / "notes.txt").write_text("mine too\n")
    args = ("book", "--no-run", "--card", "nli_negation", "--build-dir", w, "--results-dir", tmp_path / "r",
            "--runs-dir", tmp_path / "n")
    line = refused(capsys, *args)
    assert f"{w / 'site-src'} is not empty and was not made by the atlas" in line and "not deleted" in line
    (w / "site-src" / "notes.txt").unlink()           # an empty folder is used; the other is still someone's
    line = refused(capsys, *args)
    assert f"{w / 'site'} is not empty and was not made by the atlas" in line
    assert (w / "site" / "blog" / "post.md").read_text() == "mine\n"

    # what the atlas made carries its marker, and only that is made afresh
    from atlaslib import builddir

    made = builddir.fresh_folder(tmp_path / "made")
    (made / "page.md").write_text("old")
    assert builddir.fresh_folder(made) == made and sorted(os.listdir(made)) == [builddir.MARKER]


@HANG_GUARD
def test_case01_a_second_build_in_the_same_build_dir_says_another_build_holds_it(tmp_path, capsys, monkeypatch):
    import subprocess
    import sys

    from atlaslib import book

    w = tmp_path / "w"
    args = ["book", "--no-run", "--card", "nli_negation", "--build-dir", str(w), "--results-dir",
            str(tmp_path / "r"), "--runs-dir", str(tmp_path / "n")]
    # the first build, held while it renders (where the second one used to delete its tree)
    first = subprocess.Popen(
        [sys.executable, "-c", "import sys\nfrom atlaslib import book, cli\n"
         "def hold(*a, **k):\n    print('rendering', flush=True)\n    sys.stdin.readline()\n    raise SystemExit(0)\n"
         f"book.render_site = hold\nsys.exit(cli.main({args!r}))\n"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        assert first.stdout.readline().strip() == "rendering"
        monkeypatch.setattr(book, "render_site", lambda *a, **k: pytest.fail("a second build ran beside the first"))
        line = refused(capsys, *args)
        assert f"another atlas book (pid {first.pid} on " in line and f"is building in {w}" in line
    finally:
        first.stdin.close()
        first.wait()


# ------------------------------------------------------------------------------------------------ 3


def _matrix(tmp_path: Path) -> Path:
    m3 = tmp_path / "m3.yml"
    m3.write_text(f"- {{card: negex, version: {N100}, model: majority, protocol: zero_shot}}\n")
    return m3


@HANG_GUARD
def test_case03_a_scheduler_that_accepts_but_never_answers_stops_the_book_naming_it(tmp_path, capsys, monkeypatch):
    import socket

    from atlaslib import executor
    from atlaslib.pages import datastory

    monkeypatch.setattr(executor, "SCHEDULER_DEADLINE", 2.0, raising=False)  # the promised 30 s, shortened
    monkeypatch.setattr(datastory, "run_stories", lambda *a, **k: [])        # no kernel beside the matrix
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)                                                          # accepts, never answers
    address = f"tcp://127.0.0.1:{silent.getsockname()[1]}"
    try:
        line = refused(capsys, "book", "--matrix", _matrix(tmp_path), "--no-default", "--force", "--scheduler",
                       address, "--build-dir", tmp_path / "b", "--results-dir", tmp_path / "r", "--runs-dir",
                       tmp_path / "n")
    finally:
        silent.close()
    # one line naming the scheduler and saying no connection was made; which deadline ends the wait first, the
    # atlas's (2 s) or Dask's own handshake timeout (0.8 of it), depends on the machine's load: either line will do
    assert (f"the Dask scheduler at {address} (scheduler) did not complete the connection within 2 s" in line
            or re.search(rf"cannot reach the Dask scheduler at {re.escape(address)} \(scheduler\): "
                         rf"Timed out (during handshake while connecting|trying to connect) to ", line)), line


@HANG_GUARD
def test_case03_a_scheduler_that_freezes_mid_build_fails_the_unfinished_runs_naming_it(tmp_path, monkeypatch):
    import signal
    import subprocess
    import sys

    from atlaslib import executor
    from atlaslib.matrix import BuildPaths
    from atlaslib.runner import RunRequest

    scheduler = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                                  "--port", "0", "--no-dashboard"], stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        address = None
        for line in scheduler.stderr:  # the scheduler says where it listens, then waits
            if "Scheduler at:" in line:
                address = line.split("Scheduler at:")[1].strip()
                break
        assert address, "the scheduler did not start"
        opened = executor._open_client

        def open_then_freeze(*a, **k):
            client = opened(*a, **k)                 # a loaded machine may take long to connect: 120 s allowed
            scheduler.send_signal(signal.SIGSTOP)  # frozen after the connection: mid-build
            monkeypatch.setattr(executor, "SCHEDULER_DEADLINE", 2.0)   # a frozen scheduler never answers
            return client

        monkeypatch.setattr(executor, "_open_client", open_then_freeze)
        monkeypatch.setattr(executor, "HEARTBEAT", 0.5, raising=False)
        monkeypatch.setattr(executor, "SCHEDULER_DEADLINE", 120.0, raising=False)
        reqs = [RunRequest("negex", N100, m, "zero_shot") for m in ("majority", "medspacy-context")]
        lines = []
        report = executor.run_requests(reqs, BuildPaths(results=tmp_path / "r", runs=tmp_path / "n",
                                                        build=tmp_path / "b"),
                                       executor="dask", scheduler=address, log=lines.append, timing=False,
                                       task=lambda request, **kw: pytest.fail("no worker should run it"))
    finally:
        scheduler.send_signal(signal.SIGCONT)
        scheduler.kill()
        scheduler.wait()
    assert [f.request for f in report.failures] == reqs
    assert all(f"the Dask scheduler at {address} stopped answering" in str(f) for f in report.failures)
    assert any(f"dask: the Dask scheduler at {address} stopped answering" in ln for ln in lines), lines


# ------------------------------------------------------------------------------------------------ 5, 10


class Scripted:
    """An OpenAI-compatible server on a loopback port of its own that answers each POST with the next of
    ``replies``, ``(status, headers, body)`` (the last one repeats); ``body`` bytes, or an iterable of byte
    blocks sent without a length (the connection's end ends it). ``requests`` counts the POSTs."""

    def __init__(self, replies):
        import http.server
        import threading

        self.replies, self.requests = list(replies), 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers.get("content-length") or 0))
                status, headers, body = outer.replies[min(outer.requests, len(outer.replies) - 1)]
                outer.requests += 1
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                if isinstance(body, bytes):
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                self.close_connection = True
                self.end_headers()
                try:
                    for block in body:
                        self.wfile.write(block)
                except (BrokenPipeError, ConnectionResetError):  # the client stopped reading
                    pass

            def log_message(self, *a):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


ANSWER = json.dumps({"choices": [{"message": {"role": "assistant", "content": "no"}}]}).encode()


@pytest.fixture
def llm(tmp_path, monkeypatch):
    """``llm(base_url, **options)``: the predict.assertion adapter of an openai-compatible profile for
    ``base_url`` (request cache under tmp_path; waits recorded in ``llm.waits``, never slept)."""
    import yaml

    from atlaslib.models import load_adapter
    from atlaslib.models import openai_compat

    monkeypatch.setenv("ATLAS_CACHE_DIR", str(tmp_path / "cache"))
    waits = []
    monkeypatch.setattr(openai_compat.time, "sleep", waits.append)

    def make(base_url, **options):
        entry = {"source": "openai-compatible", "location": base_url, "revision": None,
                 "capabilities": ["predict.assertion"], "label_map": {}, "trained_on": [],
                 "description": "A scripted server.", "options": {"model": "m", "timeout": 60, **options}}
        (tmp_path / "p.yml").write_text(yaml.safe_dump({"scripted": entry}))
        monkeypatch.setenv("ATLAS_PROFILES", str(tmp_path / "p.yml"))
        return load_adapter("scripted", "predict.assertion")

    make.waits = waits
    return make


def test_case05_a_reply_past_the_size_limit_is_refused_naming_the_url_and_not_read_further(llm):
    from atlaslib.models import openai_compat
    from atlaslib.models.openai_compat import EndpointError

    cap = getattr(openai_compat, "MAX_REPLY_BYTES", 16 * 2 ** 20)
    big = ANSWER[:-1] + b', "padding": "' + b"x" * (cap + 2 ** 20) + b'"}'    # valid JSON, past the limit
    assert json.loads(big)["choices"][0]["message"]["content"] == "no"
    blocks = [big[i:i + 2 ** 20] for i in range(0, len(big), 2 ** 20)]
    for body in (big, blocks):                                              # with and without Content-Length
        with Scripted([(200, {"Content-Type": "application/json"}, body)]) as server:
            adapter = llm(server.base_url, max_retries=2)
            with pytest.raises(EndpointError) as caught:
                adapter.predict_assertion(["No [entity] fever [entity]."])
        line = str(caught.value)
        assert f"{server.base_url}/chat/completions answered with a body of" in line and f"{cap:,}" in line
        assert server.requests == 1 and not list(calls.entries())  # not retried, nothing stored


def test_case05_back_off_waits_are_capped_each_and_in_all(llm):
    from atlaslib.models import openai_compat
    from atlaslib.models.openai_compat import EndpointError

    with Scripted([(503, {}, b'{"error": {"message": "overloaded"}}')]) as server:
        adapter = llm(server.base_url, max_retries=20, backoff=1.0)        # 2**20 s on the old code: 12 days
        with pytest.raises(EndpointError) as caught:
            adapter.predict_assertion(["No [entity] fever [entity]."])
    each, total = getattr(openai_compat, "MAX_WAIT", 60.0), getattr(openai_compat, "MAX_TOTAL_WAIT", 300.0)
    assert llm.waits and max(llm.waits) <= each and sum(llm.waits) <= total, llm.waits
    line = str(caught.value)
    assert f"{server.base_url}/chat/completions could not be reached after" in line and "MAX_TOTAL_WAIT" in line
    assert "HTTP 503 (overloaded)" in line


def test_case10_a_redirect_is_refused_naming_url_and_location_and_nothing_is_cached(llm):
    from atlaslib.models.openai_compat import EndpointError

    elsewhere = "http://other-host.example:8080/v1/chat/completions"
    with Scripted([(302, {"Location": elsewhere, "Content-Type": "application/json"}, ANSWER)]) as server:
        adapter = llm(server.base_url)
        with pytest.raises(EndpointError) as caught:
            adapter.predict_assertion(["No [entity] fever [entity]."])
        line = str(caught.value)
        assert f"{server.base_url}/chat/completions answered HTTP 302, a redirect to {elsewhere}" in line
        assert server.requests == 1 and not list(calls.entries())
    with Scripted([(200, {"Content-Type": "application/json"}, ANSWER)]) as healthy:
        assert llm(healthy.base_url).predict_assertion(["No [entity] fever [entity]."]) == ["PRESENT"]


@pytest.mark.parametrize("retry_after", ["-1", "nan", "inf", "Wed, 21 Oct 2015 07:28:00 GMT"])
def test_case10_a_bad_or_past_retry_after_falls_back_to_the_back_off(llm, retry_after):
    import math

    script = [(503, {"Retry-After": retry_after}, b"busy"), (200, {"Content-Type": "application/json"}, ANSWER)]
    with Scripted(script) as server:
        adapter = llm(server.base_url, max_retries=3, backoff=0.5)
        assert adapter.predict_assertion(["No [entity] fever [entity]."]) == ["PRESENT"]
        assert server.requests == 2
    assert len(llm.waits) == 1 and math.isfinite(llm.waits[0]) and llm.waits[0] >= 0
    assert llm.waits[0] == (0.0 if "GMT" in retry_after else 0.5)        # a date in the past: no wait


# ------------------------------------------------------------------------------------------------ 12


def test_case12_damaged_build_caches_are_computed_again_and_named_in_the_log(tmp_path, capsys, monkeypatch,
                                                                             data_dir):
    import nbformat

    from atlaslib.cards.maccrobat import pages as maccrobat_pages
    from atlaslib.metrics import intervals
    from atlaslib.pages import comparisons, course
    from atlaslib.pages.facts import FactContext

    build = tmp_path / "_build"
    # the MACCROBAT data facts: written once, then cut short as a killed build leaves them
    ctx = FactContext(cells=[], data_dir=data_dir, cache_dir=build)
    first = {k: f.value for k, f in maccrobat_pages._maccrobat(ctx).items()}
    cache = build / "facts-maccrobat.json"
    cache.write_bytes(cache.read_bytes()[:40])
    capsys.readouterr()
    again = {k: f.value for k, f in maccrobat_pages._maccrobat(ctx).items()}
    assert again == first and json.loads(cache.read_text())["numbers"]            # computed again, rewritten whole
    assert f"build cache {cache} is damaged" in capsys.readouterr().out

    # the coverage simulation's entry holding [] (the simulation itself stood in for: the point is the cache)
    monkeypatch.setattr(intervals, "simulate_coverage", lambda n, icc, n_resamples: {
        "cluster": 0.95, "item": 0.9 - icc, "cluster_width": 0.1, "item_width": 0.05, "n_sims": n, "icc": icc})
    src = build / "site-src"
    (src / "book" / "methods").mkdir(parents=True)
    entry = build / "_atlas_cache" / f"coverage-{'-'.join(map(str, comparisons.COVERAGE_ICC))}-" \
                                     f"{comparisons.COVERAGE_SIMS}.json"
    entry.parent.mkdir(parents=True)
    entry.write_text("[]")
    block = comparisons._coverage_block(src)
    assert "the item interval in 40.0%" in block and len(json.loads(entry.read_text())) == len(comparisons.COVERAGE_ICC)
    assert f"build cache {entry} is damaged" in capsys.readouterr().out

    # an executed lesson in the course cache, cut short
    lesson = build / "course-cache" / "intervals.ipynb"
    lesson.parent.mkdir()
    nb = nbformat.v4.new_notebook(metadata={"atlas_course_key": "k"})
    lesson.write_text(nbformat.writes(nb)[:30])
    assert getattr(course, "cached_lesson", None) is not None, "the course cache is read without a check"
    assert course.cached_lesson(lesson, "k") is None                              # a miss: executed again
    assert f"build cache {lesson} is damaged" in capsys.readouterr().out
    lesson.write_text(nbformat.writes(nb))
    assert course.cached_lesson(lesson, "k") is not None and course.cached_lesson(lesson, "other") is None


# ------------------------------------------------------------------------------------------------ 13


def test_case13_a_full_disk_is_said_as_such_and_keeps_no_truncated_notebook(tmp_path, capsys, monkeypatch):
    import errno

    from papermill.exceptions import PapermillExecutionError

    from atlaslib import runner

    def too_large(src, out, params, **kw):  # papermill's write of the executed notebook hits RLIMIT_FSIZE
        Path(out).write_text('{"cells": [{"cell_type": "code", "sou')
        raise OSError(errno.EFBIG, "File too large")

    def kernel_full(src, out, params, **kw):  # the kernel's own write finds the disk full
        Path(out).write_text(json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
        raise PapermillExecutionError(4, 1, "write", "OSError", "[Errno 28] No space left on device: '/data/x.json'",
                                      [])

    out = {d: tmp_path / d for d in ("r", "n", "b")}
    args = ("run", "--card", "negex", "--model", "majority", "--protocol", "zero_shot", "--version", N100,
            "--results-dir", out["r"], "--runs-dir", out["n"], "--build-dir", out["b"])
    work = str(out["n"] / "negex" / N100 / "majority" / "atlas-run-zero_shot-")
    for fake, said in ((too_large, "/out.ipynb (File too large)"),
                       (kernel_full, "/data/x.json (No space left on device)")):
        monkeypatch.setattr(runner, "execute_notebook", fake)
        line = refused(capsys, *args, code=1)
        assert "disk full / file too large while writing " in line and said in line and "failed in" not in line
        assert fake is kernel_full or f"while writing {work}" in line
        assert not [p for p in tmp_path.rglob("*") if p.is_file()], "a file was left behind"


# ------------------------------------------------------------------------------------------------ smaller


def _dead_pid() -> int:
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


@HANG_GUARD
def test_minor_sigterm_during_a_data_story_leaves_no_story_work_folder(tmp_path, capsys, monkeypatch):
    import signal
    import socket
    import threading

    from atlaslib import book, notebook

    runs = tmp_path / "n"
    story_dir = runs / "negex" / N100
    story_dir.mkdir(parents=True)
    killed = story_dir / "atlas-story-killed"                   # left by a build stopped before this change
    killed.mkdir()
    (killed / "owner").write_text(f"{socket.gethostname()} {_dead_pid()}\n")
    started, release = threading.Event(), threading.Event()

    def story_kernel(src, out, params, **kw):                   # the story's kernel, stopped by SIGTERM mid-way
        started.set()
        signal.pthread_kill(threading.main_thread().ident, signal.SIGTERM)
        release.wait()
        raise RuntimeError("the kernel went with its command")

    def matrix(*a, **k):                                        # the run matrix, busy beside the story
        threading.Event().wait()

    def not_handled(signum, frame):
        raise AssertionError("SIGTERM was not handled by atlas: the default action ends the process as it is")

    monkeypatch.setattr(notebook, "execute", story_kernel)
    monkeypatch.setattr(book, "run_matrix", matrix)
    previous = signal.signal(signal.SIGTERM, not_handled)
    try:
        code, _, err = atlas(capsys, "book", "--matrix", _matrix(tmp_path), "--no-default", "--executor", "serial",
                             "--build-dir", tmp_path / "b", "--results-dir", tmp_path / "r", "--runs-dir", runs)
        left = sorted(p.name for p in story_dir.glob("atlas-story-*"))
    finally:
        signal.signal(signal.SIGTERM, previous)
        release.set()
    assert started.is_set() and code == 128 + signal.SIGTERM
    assert one_line(err) == "atlas book: stopped by SIGTERM; no partial output was kept"
    assert left == [], left                                     # neither this build's story folder nor the old one


def test_minor_a_run_killed_before_writing_leaves_no_empty_model_folder(tmp_path, capsys, monkeypatch):
    import socket

    from papermill.exceptions import PapermillExecutionError

    from atlaslib import runner

    results, runs = tmp_path / "r", tmp_path / "n"
    left = results / "negex" / N100 / "majority"               # what a run killed with SIGKILL leaves
    left.mkdir(parents=True)
    work = runs / "negex" / N100 / "majority" / "atlas-run-zero_shot-killed"
    work.mkdir(parents=True)
    (work / "owner").write_text(f"{socket.gethostname()} {_dead_pid()}\n")

    def raises(src, out, params, **kw):
        Path(out).write_text(json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
        raise PapermillExecutionError(3, 1, "x", "ValueError", "no", [])

    monkeypatch.setattr(runner, "execute_notebook", raises)
    refused(capsys, "run", "--card", "negex", "--model", "majority", "--protocol", "zero_shot", "--version", N100,
            "--results-dir", results, "--runs-dir", runs, "--build-dir", tmp_path / "b", code=1)
    assert not left.exists() and not work.parent.exists()      # the failed run wrote nothing: no empty folder


def _run_args(tmp_path: Path, model: str) -> tuple:
    return ("run", "--card", "negex", "--protocol", "zero_shot", "--version", N100, "--model", model,
            "--results-dir", tmp_path / "r", "--runs-dir", tmp_path / "n", "--build-dir", tmp_path / "b")


def test_minor_an_empty_model_name_is_refused_not_taken_for_the_current_folder(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = refused(capsys, *_run_args(tmp_path, ""))
    assert "the model name is empty ('')" in line and str(tmp_path) not in line
    assert not (tmp_path / "r").exists()


def test_minor_a_path_that_leaves_its_folder_is_no_hub_id(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("a/..", "org/."):
        line = refused(capsys, *_run_args(tmp_path, name))
        assert f"model {name!r} is not a hub id: a hub id is 'org/name' with no '.' or '..' part" in line
    assert not (tmp_path / "r").exists()


def test_minor_a_lesson_name_that_is_a_path_is_refused_naming_the_lessons(tmp_path, capsys):
    answers = tmp_path / "A.json"
    answers.write_text('{"seed": 1, "answers": {}}')
    line = refused(capsys, "course", "check", "../../../etc/passwd", answers)
    assert "lesson '../../../etc/passwd' is not a lesson name" in line
    known = line.split("expected one of ", 1)[1].split(", ")
    assert "intervals" in known, line
