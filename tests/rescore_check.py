"""A real notebook's run re-scored without a kernel, the check every card's re-score test makes: the run executed by
:func:`atlaslib.runner.run` into a temporary results/runs folder, its stored scoring key made stale as an older
scoring code leaves it (on the cell, its variant cells, its run record and its page), run again with the kernel
forbidden: it reports ``re-scored``, and its cell, its variant cells and the page's ``from-cell`` outputs equal the
executed ones (but for timing and keys). ``benchmarks/check_negex_rescore.py`` uses the same pieces."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import nbformat

from atlaslib import notebook, rescore, runner
from atlaslib.results import record_path
from atlaslib.sources import sha256_file


def variant_paths(result) -> list[Path]:
    """The variant cells beside a run's result cell (``<protocol>.json``)."""
    return sorted((Path(result).parent / "variants" / Path(result).stem).glob("*.json"))


def tagged(path) -> list:
    """The outputs of a run page's cells tagged ``from-cell``."""
    return [c["outputs"] for c in rescore.tagged_cells(nbformat.read(path, as_version=4))]


def stale(out, edit=None) -> None:
    """The stored run as an older scoring code leaves it: another scoring key on the cell, its variant cells (their
    parent key), its run record and its page; ``edit``: a function changing the stored cell further (what the older
    scoring made that a re-score makes anew)."""
    cell = json.loads(Path(out.result).read_text())
    fresh = cell["run_key"]
    old = f"{rescore.split_key(fresh)[0]}.older-scoring"
    cell["run_key"] = cell["spec"]["parameters"]["run_key"] = old
    if edit is not None:
        edit(cell)
    Path(out.result).write_text(json.dumps(cell))
    for p in variant_paths(out.result):
        p.write_text(json.dumps(dict(json.loads(p.read_text()), parent_run_key=old)))
    record_path(out.notebook).write_text(sha256_file(out.result) + "\n")
    page = nbformat.read(out.notebook, as_version=4)
    page.metadata.papermill.parameters.run_key = old
    for c in page.cells:
        c.source = c.source.replace(fresh, old)
    nbformat.write(page, out.notebook)


def bare(c: dict) -> dict:
    """A cell but for what a re-score changes by design: timing and keys."""
    c = copy.deepcopy(c)
    for k in ("timing", "run_key", "parent_run_key"):
        c.pop(k, None)
    c["spec"]["parameters"].pop("run_key", None)
    return c


def rescored_as_executed(req, tmp_path, monkeypatch, *, edit=None):
    """Execute ``req`` (a :class:`atlaslib.runner.RunRequest`), make it stale (``edit``: see :func:`stale`), run it
    again with the kernel forbidden and assert it was re-scored to what it executed to. Returns the executed cell,
    its variant cells and its page's ``from-cell`` outputs (for a test's own checks of them)."""
    dirs = dict(results_dir=tmp_path / "results", runs_dir=tmp_path / "runs", failed_dir=tmp_path / "failed")
    executed = runner.run(req, **dirs)
    assert executed.status == "ran"
    cell = json.loads(Path(executed.result).read_text())
    variants = [json.loads(p.read_text()) for p in variant_paths(executed.result)]
    page = tagged(executed.notebook)
    stale(executed, edit)

    def refuse(*a, **k):
        raise AssertionError("a kernel was started")

    monkeypatch.setattr(runner, "execute_notebook", refuse)
    again = runner.run(req, **dirs)
    assert again.status == "re-scored"
    new = json.loads(Path(again.result).read_text())
    assert bare(new) == bare(cell)
    new_variants = [json.loads(p.read_text()) for p in variant_paths(again.result)]
    assert [bare(v) for v in new_variants] == [bare(v) for v in variants]
    assert all(v["parent_run_key"] == new["run_key"] for v in new_variants)
    assert tagged(again.notebook) == page
    return cell, variants, page
