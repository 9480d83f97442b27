"""Gated data: the notebook, pointed at note text through ``thyme_text_dir`` (here the synthetic corpus laid
out like THYME and treated as if it were DUA text), must leave no note text in any output: the executed
notebook, the result cell, the papermill log, the plots, and every other file the run wrote wherever it wrote
it: its temporary folder (a run's scratch), its caches, its configuration and state folders and its home folder
all point into the test's folder, and every file there is scanned."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jupytext

from atlaslib.cards.tempeval import synthetic
from atlaslib.cards.tempeval.anafora_io import write_corpus

WINDOW = 20


def _windows(text: str) -> set[str]:
    return {text[i:i + WINDOW] for i in range(len(text) - WINDOW + 1)}


#: where a process writes besides the paths it is given: each pointed at a folder of the run's own
WRITTEN_PLACES = ("TMPDIR", "HOME", "ATLAS_CACHE_DIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME",
                  "MPLCONFIGDIR", "IPYTHONDIR", "JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR")


def _leaks(folder: Path, skip: Path, secret: set[str]) -> dict[str, list[str]]:
    """Every file under ``folder`` (but under ``skip``, the text itself), whatever its name or kind, whose content
    holds a window of the note text: {file: the first windows found}."""
    found = {}
    for p in folder.rglob("*"):
        if p.is_file() and not p.is_symlink() and skip not in p.parents:
            leaked = _windows(p.read_bytes().decode("utf-8", errors="replace")) & secret
            if leaked:
                found[str(p)] = sorted(leaked)[:3]
    return found


def _write_synthetic(root):
    """The synthetic corpus with its note text, as a DUA holder's folders are: ``<root>/<split>/<doc>/<doc>``."""
    for split, docs in synthetic.build_corpus().items():
        write_corpus(docs, root / split, write_text=True)


def test_the_scan_finds_note_text_in_any_file_anywhere(tmp_path):
    """The scan can fail: note text planted in a file without a suffix in a run's temporary folder, or in a
    binary file among bytes that are not UTF-8, is found; the text's own folder is not scanned."""
    root = tmp_path / "dua_text"
    _write_synthetic(root)
    note = next(p for p in root.glob("*/*/*") if p.is_file() and not p.name.endswith(".xml")).read_text()
    secret = _windows(note)
    scratch = tmp_path / "w" / "tmp" / "tempeval-x" / "predicted" / "doc0"
    scratch.mkdir(parents=True)
    assert _leaks(tmp_path, root, secret) == {}
    (scratch / "doc0").write_text(note[:40])
    (tmp_path / "w" / "blob.bin").write_bytes(b"\xff\x00" + note[-30:].encode() + b"\xfe")
    assert set(_leaks(tmp_path, root, secret)) == {str(scratch / "doc0"), str(tmp_path / "w" / "blob.bin")}


def test_gated_run_leaves_no_note_text_anywhere(tmp_path, repo):
    root = tmp_path / "dua_text"
    _write_synthetic(root)
    notes = [p.read_text() for p in root.glob("*/*/*") if p.is_file() and not p.name.endswith(".xml")]
    assert len(notes) == 40
    secret = set().union(*(_windows(t) for t in notes))

    nb = jupytext.read(repo / "notebooks" / "tempeval.md")
    src = tmp_path / "tempeval.ipynb"
    jupytext.write(nb, src)
    out_nb, cell = tmp_path / "out.ipynb", tmp_path / "cell.json"
    places = {name: tmp_path / "w" / name.lower() for name in WRITTEN_PLACES}
    for folder in places.values():
        folder.mkdir(parents=True)
    env = {**os.environ, **{name: str(folder) for name, folder in places.items()}}
    proc = subprocess.run(
        [sys.executable, "-m", "papermill", str(src), str(out_nb), "--log-output", "--cwd", str(tmp_path),
         "-p", "version", "thyme-dev-2015", "-p", "model", "memorize", "-p", "protocol", "phase1",
         "-p", "thyme_text_dir", str(root), "-p", "annotation_dir", str(root), "-p", "result_path", str(cell)],
        capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]

    result = json.loads(cell.read_text())
    assert result["status"] == "ok" and result["extra"]["gated_text"] is True
    assert result["metrics"]["event_span_f1_phase1"]["value"] > 0.5    # the run really used the text
    assert result["spec"]["parameters"]["thyme_text_dir"] == "<set>"

    outputs = {"executed notebook": out_nb.read_text(), "result cell": cell.read_text(),
               "papermill log": proc.stdout + proc.stderr}
    executed = json.loads(outputs["executed notebook"])
    assert "12 test documents scored" in outputs["executed notebook"]
    plots = [o["data"][k] for c in executed["cells"] for o in c.get("outputs", []) if "data" in o
             for k in o["data"] if k.startswith("image/")]
    assert len(plots) >= 2                                               # attribute and distance plots
    outputs["plots"] = "\n".join(plots)
    for where, content in outputs.items():
        leaked = _windows(content) & secret
        assert not leaked, f"{where} holds note text: {sorted(leaked)[:3]}"
    # every file the run wrote, wherever: beside the notebook, its scratch, caches, configuration and home
    assert not _leaks(tmp_path, root, secret)
    assert any(places["IPYTHONDIR"].iterdir()) and any(places["MPLCONFIGDIR"].iterdir())   # the run wrote there
    assert not list(places["TMPDIR"].iterdir())          # and the run's temporary folder is gone
    # the scan itself can fail: the same scan finds the text in a file that does hold it
    assert _windows(json.dumps({"x": notes[0]})) & secret
