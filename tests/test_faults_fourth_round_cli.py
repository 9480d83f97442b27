"""Faults, fourth round, of the command's edges: output closed early or full (4), a location's credentials that
hold characters a URL pattern stops at (7), a build lock that is a symbolic link (12).

One test per fault, each reproducing it as reported: through ``atlas`` in-process (``cli.main``) where no real
pipe is needed, in a subprocess where the fault is the pipe itself.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.external.test_score import atlas  # atlas(capsys, *args) -> (exit code, stdout, stderr), in-process
from tests.test_faults_second_round import one_line

N100 = "atlas-n100-v1"


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


def test_fault07_public_location_parses_the_user_info_whatever_it_holds():
    from atlaslib.escape import public_location

    for user, pw in ((USER, PASSWORD), ("a", "b c"), ("a b", ""), ("<a>", "\"x\"@y"), ("a%20b", "p/q:r")):
        assert public_location(f"https://{user}:{pw}@example.org:8443/v1?k=v#f") == "https://example.org:8443/v1"


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
