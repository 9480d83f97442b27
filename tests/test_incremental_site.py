"""The site tree between builds: a file whose bytes did not change gets its old time back (Sphinx then reads it
no more), a changed file keeps its new time; a notebook whose only change is the random ids nbformat gives new
cells counts as unchanged. And ``atlas cache``: what the model-call store holds, its size, clearing it."""
from __future__ import annotations

import json
import os

import numpy as np

from atlaslib import builddir, cli
from atlaslib.models import calls


def _nb(cell_id: str, text: str) -> str:
    return json.dumps({"cells": [{"cell_type": "markdown", "id": cell_id, "metadata": {}, "source": text}],
                       "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def test_unchanged_files_keep_their_time_and_changed_ones_do_not(tmp_path):
    site = tmp_path / "site-src"
    (site / "book").mkdir(parents=True)
    files = {"book/same.md": "same", "book/changed.md": "old", "book/ids.ipynb": _nb("aaaa1111", "x"),
             "book/nb.ipynb": _nb("bbbb2222", "old")}
    for rel, text in files.items():
        (site / rel).write_text(text, encoding="utf-8")
        os.utime(site / rel, ns=(1_000_000_000, 1_000_000_000))
    before = builddir.snapshot(site)
    assert set(before) == set(files)
    # the next build renders everything again: new times on every file
    for rel, text in {"book/same.md": "same", "book/changed.md": "new", "book/ids.ipynb": _nb("cccc3333", "x"),
                      "book/nb.ipynb": _nb("bbbb2222", "new")}.items():
        (site / rel).write_text(text, encoding="utf-8")
    assert builddir.keep_unchanged(site, before) == 2
    times = {rel: (site / rel).stat().st_mtime_ns for rel in files}
    assert times["book/same.md"] == times["book/ids.ipynb"] == 1_000_000_000
    assert times["book/changed.md"] > 1_000_000_000 and times["book/nb.ipynb"] > 1_000_000_000


def test_atlas_cache_lists_sizes_and_clears_the_store(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ATLAS_CACHE_DIR", str(tmp_path / "cache"))
    space = calls.CallSpace({"repo": "org/tiny", "revision": "0123456789abcdef"}, "embed.text.pooled", {"p": 1})
    out = space.answer([[1, 2], [3, 4], [1, 2]], lambda pos: [{"v": np.full(3, p, np.float32)} for p in pos])
    assert [float(o["v"][0]) for o in out] == [0.0, 1.0, 0.0]  # the repeated input computed once
    (tmp_path / "cache" / "models").mkdir()
    (tmp_path / "cache" / "models" / "w.bin").write_bytes(b"x" * 2048)
    size = sum(f.stat().st_size for f in calls.entries())
    assert cli.main(["cache", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith(f"calls: 2 entries, {size:,} bytes")
    assert lines[1].split()[:4] == ["org/tiny@0123456789ab", "embed.text.pooled", "2", "entries"]
    assert lines[2].split()[:3] == ["models/", "2.0", "KiB"]
    assert cli.main(["cache", "clear"]) == 0
    assert "2 entries removed" in capsys.readouterr().out
    assert list(calls.entries()) == [] and (tmp_path / "cache" / "models" / "w.bin").exists()
    assert cli.main(["cache"]) == 0 and "0 entries, 0 bytes" in capsys.readouterr().out


def test_a_build_with_nothing_run_and_the_same_pages_keeps_the_last_good_site_and_nothing_else_does(tmp_path,
                                                                                                   monkeypatch):
    """The no-op build's shortcut: no run or story executed, the render key equal to the one of the site tree and
    of the last build that passed its checks -> nothing rendered, Jupyter Book not started. A run executed, a
    changed key, or a last build that failed -> rendered (or its build report) and built as before."""
    from atlaslib import book, linkcheck
    from atlaslib.matrix import MatrixReport
    from atlaslib.runner import RunOutcome, RunRequest

    paths = book.BuildPaths(results=tmp_path / "results", runs=tmp_path / "runs", build=tmp_path / "_build")
    did, key, jb_code = [], ["K1"], [0]

    def render_site(paths, publish, report, cards):
        did.append("render")
        src = paths.src(publish)
        (src / "book").mkdir(parents=True, exist_ok=True)
        (src / "book" / "intro.md").write_text("# intro\n")
        return src, []

    def jupyter_book_build(src, out, log, incremental=False):
        did.append("jupyter-book")
        (out / "_build" / "html").mkdir(parents=True, exist_ok=True)
        (out / "_build" / "html" / "index.html").write_text("<html></html>")
        return jb_code[0], []

    report = [None]
    monkeypatch.setattr(book, "render_key", lambda paths, cards, rep: key[0])
    monkeypatch.setattr(book, "render_site", render_site)
    monkeypatch.setattr(book, "render_build_report", lambda src, rep: did.append("report"))
    monkeypatch.setattr(book, "jupyter_book_build", jupyter_book_build)
    monkeypatch.setattr(book, "_with_stories", lambda reqs, paths, data_dir, force, log, run: report[0])
    monkeypatch.setattr(linkcheck, "check", lambda html: [])

    def build():
        did.clear()
        lines = []
        code = book._build(paths, False, False, True, None, [], [], "serial", None, None, None, lines.append)
        return code, list(did), lines

    req = RunRequest("negex", "atlas-n100-v1", "majority", "zero_shot")
    served = MatrixReport(outcomes=[RunOutcome(req, "cached")])
    report[0] = served
    assert build()[:2] == (0, ["render", "jupyter-book"])                 # first build
    code, done, lines = build()                                             # nothing changed
    assert (code, done) == (0, []) and any("kept as it was" in ln for ln in lines)
    report[0] = MatrixReport(outcomes=[RunOutcome(req, "ran", seconds=3.0)])
    assert build()[:2] == (0, ["report", "jupyter-book"])                  # a run executed: its report is built
    report[0], key[0] = served, "K2"
    assert build()[:2] == (0, ["render", "jupyter-book"])                  # a page would change
    key[0], jb_code[0] = "K3", 1
    assert build()[:2] == (1, ["render", "jupyter-book"])                  # the site build fails ...
    jb_code[0] = 0
    assert build()[:2] == (0, ["report", "jupyter-book"])                  # ... so the next one is not skipped
    assert build()[:2] == (0, [])
