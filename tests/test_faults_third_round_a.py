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
import shutil
import urllib.request
from pathlib import Path

import pytest

from atlaslib import cli
from tests.external.test_score import atlas  # atlas(capsys, *args) -> (exit code, stdout, stderr), in-process
from tests.test_faults_user import one_line

N100 = "atlas-n100-v1"
#: a guard for tests whose case hung on the old code: they fail there instead of waiting forever
HANG_GUARD = pytest.mark.timeout(300)


def refused(capsys, *args, code: int = 2) -> str:
    """``atlas ARGS`` answers with one line on stderr (no traceback) and exit ``code``; returns the line."""
    got, _, err = atlas(capsys, *args)
    line = one_line(err)
    assert got == code, err
    return line


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
    assert f"the Dask scheduler at {address} (scheduler) did not complete the connection within 2 s" in line


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
            client = opened(*a, **k)
            scheduler.send_signal(signal.SIGSTOP)  # frozen after the connection: mid-build
            return client

        monkeypatch.setattr(executor, "_open_client", open_then_freeze)
        monkeypatch.setattr(executor, "HEARTBEAT", 0.5, raising=False)
        monkeypatch.setattr(executor, "SCHEDULER_DEADLINE", 2.0, raising=False)
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
