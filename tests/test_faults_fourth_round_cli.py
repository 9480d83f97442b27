"""Faults, fourth round, of the command's edges: output closed early or full (4), a location's credentials that
hold characters a URL pattern stops at (7), a build lock that is a symbolic link (12).

One test per fault, each reproducing it as reported: through ``atlas`` in-process (``cli.main``) where no real
pipe is needed, in a subprocess where the fault is the pipe itself.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from tests.external.test_score import atlas  # atlas(capsys, *args) -> (exit code, stdout, stderr), in-process
from tests.test_faults_second_round import one_line

N100 = "atlas-n100-v1"
REPO = Path(__file__).resolve().parent.parent


# ------------------------------------------------------------------------------------------------ 4


def atlas_closed(*args, cwd: Path, stderr_closed: bool = False) -> tuple[int, str]:
    """``atlas ARGS`` in a subprocess whose standard output (and error, with ``stderr_closed``) is a pipe closed
    before it writes a byte, as ``| head -1`` leaves it once head has its line: (exit code, standard error)."""
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "atlaslib.cli", *map(str, args)], cwd=cwd,
                            env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.close()
    if stderr_closed:
        proc.stderr.close()
        return proc.wait(timeout=240), ""
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    return proc.wait(timeout=240), err


def test_fault04_output_closed_early_never_ends_a_build_and_a_full_device_is_one_line(tmp_path):
    import subprocess
    import sys

    # atlas list | head -1: a quiet exit, with its output closed and with both closed
    assert atlas_closed("list", cwd=tmp_path) == (0, "")
    assert atlas_closed("list", cwd=tmp_path, stderr_closed=True)[0] == 0

    # atlas list > /dev/full: one line naming where, exit 1
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "atlaslib.cli", "list"], cwd=tmp_path, stdout=full,
                              stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)},
                              timeout=240)
    assert done.returncode == 1
    line = one_line(done.stderr)
    assert line.startswith("atlas list: standard output (/dev/full) could not be written: No space left on device")

    # atlas book ... | head -1: the build goes on and finishes its site; nothing of its work is left about
    b, r, n = tmp_path / "b", tmp_path / "r", tmp_path / "n"
    code, err = atlas_closed("book", "--no-run", "--card", "negex", "--build-dir", b, "--results-dir", r,
                             "--runs-dir", n, cwd=tmp_path)
    assert (code, err) == (0, "")
    assert (b / "site" / "_build" / "html" / "index.html").is_file()
    assert not list(tmp_path.rglob("atlas-story-*")) and not list(tmp_path.rglob("atlas-run-*"))


def test_fault04_a_command_that_fails_unexpectedly_leaves_no_work_folder_of_a_thread_beside_it(tmp_path,
                                                                                              monkeypatch):
    """The data stories' thread is a daemon: it dies with the process and its finally never runs, so a command
    that ends on an unexpected exception removes the work folders still live."""
    from atlaslib import cli, notebook

    def boom(args):
        notebook.make_work_dir(tmp_path, "atlas-story-")    # what a data story holds while it runs
        raise RuntimeError("not expected")

    monkeypatch.setattr(cli, "cmd_list", boom)
    with pytest.raises(RuntimeError, match="not expected"):
        cli.main(["list"])
    assert not list(tmp_path.glob("atlas-story-*"))


def test_fault04_a_guarded_stream_keeps_writing_after_its_reader_is_gone():
    """The output layer on its own: a pipe closed under a stream (written from two threads) costs no exception,
    is quiet, and leaves the descriptor writable (pointed at /dev/null)."""
    import threading

    from atlaslib.streams import GuardedStream

    read, write = os.pipe()
    stream = os.fdopen(write, "w", buffering=1)
    guard = GuardedStream(stream, "output")
    guard.write("first\n")
    os.close(read)
    threads = [threading.Thread(target=lambda: [guard.write("more\n") for _ in range(1000)]) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    guard.flush()
    assert guard.closed_early and guard.lost_line("list") is None
    stream.write("after\n")
    stream.flush()                        # the descriptor now writes nowhere, without an error
    stream.close()


# ------------------------------------------------------------------------------------------------ 7


def strings(node):
    """Every string in a JSON value."""
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for v in node.values():
            yield from strings(v)
    elif isinstance(node, list):
        for v in node:
            yield from strings(v)

#: user info holding what a URL pattern stops at (space, quotes, < and >) and what a parser must not trip on
#: (an unencoded @, a %-escape, a colon in the password)
USER = "al ice\"o'<x>"
PASSWORD = "open sesame@\"q\"<b>%41:9"
SECRETS = ("al ice", "sesame", "<x>", "<b>", "%41", '"q"')


def test_fault07_credentials_with_spaces_quotes_and_brackets_never_reach_stderr_the_failed_notebook_or_a_cell(
        tmp_path, capsys, monkeypatch, refused_url):
    host = refused_url.removeprefix("http://")
    location = f"http://{USER}:{PASSWORD}@{host}/v1?api_key=sk live<key>"
    prof = tmp_path / "p.yml"
    prof.write_text(yaml.safe_dump({"leaky": {
        "source": "openai-compatible", "location": location, "capabilities": ["predict.assertion"],
        "options": {"model": "m", "max_retries": 0, "timeout": 5}, "revision": None, "label_map": {},
        "trained_on": [], "description": "mine"}}), encoding="utf-8")
    monkeypatch.setenv("ATLAS_PROFILES", str(prof))
    code, out, err = atlas(capsys, "run", "--card", "negex", "--version", N100, "--model", "leaky", "--protocol",
                           "zero_shot", "--results-dir", tmp_path / "r", "--runs-dir", tmp_path / "n",
                           "--build-dir", tmp_path / "b")
    assert code == 1, err
    line = one_line(err)
    assert f"http://{host}/v1/chat/completions" in line, line            # the address it tried, named
    secrets = SECRETS + ("sk live", "<key>", "api_key")
    assert not [s for s in secrets if s in out + err], err
    failed = list((tmp_path / "b" / "failed").rglob("*.ipynb"))
    assert failed                                                        # the execution report is kept
    text = failed[0].read_text(encoding="utf-8")
    text += "\n".join(strings(json.loads(text)))                          # its outputs' text, unescaped
    assert f"http://{host}/v1" in text and not [s for s in secrets if s in text]
    for cell in (tmp_path / "r").rglob("*.json"):                        # a cell, where one is written
        assert not [s for s in secrets if s in cell.read_text(encoding="utf-8")]


def test_fault07_public_location_parses_the_user_info_whatever_it_holds(tmp_path, capsys, monkeypatch):
    from atlaslib.escape import public_location

    for user, pw in ((USER, PASSWORD), ("a", "b c"), ("a b", ""), ("<a>", "\"x\"@y"), ("a%20b", "p/q:r"),
                     ("al?ice", "se#same"), ("alice", "ses?ame")):
        assert public_location(f"https://{user}:{pw}@example.org:8443/v1?k=v#f") == "https://example.org:8443/v1"
    # a '?', '#' or '/' in the user info would send the request elsewhere: the profile is refused, unshown
    monkeypatch.setenv("ATLAS_PROFILES", "")
    for location in ("http://alice:zq?xw@127.0.0.1:9/v1", "http://alice:zq/xw@127.0.0.1:9/v1",
                     "http://alice:zq#xw@127.0.0.1:9/v1"):
        prof = tmp_path / "p.yml"
        prof.write_text(yaml.safe_dump({"leaky": {
            "source": "openai-compatible", "location": location, "capabilities": ["predict.assertion"],
            "options": {"model": "m"}, "revision": None, "label_map": {}, "trained_on": [], "description": "x"}}))
        code, out, err = atlas(capsys, "list", "--profiles", prof)
        assert code == 2, err
        line = one_line(err)
        assert line.startswith(f"atlas list: {prof}: profile 'leaky' key 'location'"), line
        assert "the location is not shown" in line and "alice" not in line and "zq" not in line and "xw" not in line, line


# ------------------------------------------------------------------------------------------------ 12


def test_fault12_the_build_lock_is_never_opened_through_a_link(tmp_path, capsys):
    import os

    from atlaslib import builddir

    b = tmp_path / "b"
    b.mkdir()
    mine = b / "n"
    mine.write_text("the user's own notes\n", encoding="utf-8")
    (b / ".atlas-build.lock").symlink_to("n")
    code, out, err = atlas(capsys, "book", "--no-run", "--card", "negex", "--build-dir", b,
                           "--results-dir", tmp_path / "r", "--runs-dir", tmp_path / "n")
    assert code == 2, err
    line = one_line(err)
    assert line.startswith(f"atlas book: {b / '.atlas-build.lock'} is a symbolic link"), line
    assert mine.read_text(encoding="utf-8") == "the user's own notes\n"      # not truncated, nothing written
    assert sorted(p.name for p in b.iterdir()) == [".atlas-build.lock", "n"]  # nothing built beside it

    (b / ".atlas-build.lock").unlink()                                    # a hard link: the same file by two names
    os.link(mine, b / ".atlas-build.lock")
    with pytest.raises(builddir.BuildDirError, match=r"is a file with 2 names \(a hard link\), not the build lock"):
        with builddir.build_lock(b):
            pass
    assert mine.read_text(encoding="utf-8") == "the user's own notes\n"
    (b / ".atlas-build.lock").unlink()
    os.mkfifo(b / ".atlas-build.lock")                                    # a FIFO: refused at once, no wait
    with pytest.raises(builddir.BuildDirError, match=r"is a named pipe, not the build lock"):
        with builddir.build_lock(b):
            pass
    (b / ".atlas-build.lock").unlink()
    with builddir.build_lock(b) as lock:                                  # none there: made, exclusively
        assert lock.read_text().split()[1] == str(os.getpid())
    with builddir.build_lock(b) as lock:                                  # its own, from the last build: reused
        assert lock.is_file() and not lock.is_symlink()
