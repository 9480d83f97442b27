"""Gated data: the notebook, pointed at note text through ``thyme_text_dir`` (here the synthetic corpus laid
out like THYME and treated as if it were DUA text), must leave no note text in any output: the executed
notebook, the result cell, the papermill log, the plots."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jupytext

from atlaslib.cards.tempeval import synthetic

WINDOW = 20


def _windows(text: str) -> set[str]:
    return {text[i:i + WINDOW] for i in range(len(text) - WINDOW + 1)}


def test_gated_run_leaves_no_note_text_anywhere(tmp_path, repo):
    root = tmp_path / "dua_text"
    synthetic.write(root)
    notes = [p.read_text() for p in root.glob("*/*/*") if p.is_file() and not p.name.endswith(".xml")]
    assert len(notes) == 40
    secret = set().union(*(_windows(t) for t in notes))

    nb = jupytext.read(repo / "notebooks" / "tempeval.md")
    src = tmp_path / "tempeval.ipynb"
    jupytext.write(nb, src)
    out_nb, cell = tmp_path / "out.ipynb", tmp_path / "cell.json"
    proc = subprocess.run(
        [sys.executable, "-m", "papermill", str(src), str(out_nb), "--log-output", "--cwd", str(tmp_path),
         "-p", "version", "thyme-dev-2015", "-p", "model", "memorize", "-p", "protocol", "phase1",
         "-p", "thyme_text_dir", str(root), "-p", "annotation_dir", str(root), "-p", "result_path", str(cell)],
        capture_output=True, text=True, timeout=300)
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
    files = [p for p in tmp_path.rglob("*") if p.is_file() and root not in p.parents and p.suffix in (".png", ".svg", ".log")]
    for p in files:
        outputs[str(p)] = p.read_text(errors="replace")
    for where, content in outputs.items():
        leaked = _windows(content) & secret
        assert not leaked, f"{where} holds note text: {sorted(leaked)[:3]}"
    # the scan itself can fail: the same scan finds the text in a file that does hold it
    assert _windows(json.dumps({"x": notes[0]})) & secret
