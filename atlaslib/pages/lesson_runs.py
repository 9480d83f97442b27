"""Lessons executed: each with papermill in its own kernel (:func:`execute`; several at a time in worker processes,
:func:`execute_all`), a failure raised as :class:`LessonFailed` naming the lesson and the cell, and the executed
notebooks cached on what they read (:func:`cache_key`, :func:`cached_lesson`). Cells tagged local-only are
removed before a build that lacks what they read executes the lesson (:func:`_strip_local_only`).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from ..atomicio import read_cache_json
from .lessons import LOCAL_ONLY_TAG, _has_tag

KERNEL = "python3"
CELL_TIMEOUT = 900


class LessonFailed(ValueError):
    """A lesson raised while executing; names the lesson and the cell. (A ValueError so that ``atlas book``
    reports it in one line like any other input it cannot render.)"""

    def __init__(self, lesson: str, cell: int | None, error: str, kept: str | None):
        self.lesson, self.cell, self.error, self.kept = lesson, cell, error, kept
        where = f"cell {cell}" if cell is not None else "an unknown cell"
        super().__init__(f"lesson {lesson} failed in {where}: {error}"
                         + (f" (executed notebook kept at {kept})" if kept else ""))

    def __reduce__(self):  # lessons run in worker processes; the failure travels back whole
        return (LessonFailed, (self.lesson, self.cell, self.error, self.kept))


def _strip_local_only(nb, why: str) -> int:
    """Remove cells tagged local-only; put one note where the first was. Returns how many went."""
    import nbformat

    idx = [i for i, c in enumerate(nb.cells) if _has_tag(c, LOCAL_ONLY_TAG)]
    if not idx:
        return 0
    note = nbformat.v4.new_markdown_cell(f"```{{note}}\nA section of this lesson is left out of this build: {why}\n```")
    first = idx[0]
    nb.cells = [c for i, c in enumerate(nb.cells) if i not in set(idx)]
    nb.cells.insert(first, note)
    return len(idx)


def _content(nb) -> str:
    """The notebook's cells (type, source, metadata) and metadata as JSON, without the random cell ids jupytext
    gives a text notebook on every read."""
    cells = [[c.cell_type, c.source, c.get("metadata", {})] for c in nb.cells]
    return json.dumps({"cells": cells, "metadata": nb.metadata}, sort_keys=True, default=str)


def cache_key(notebook_text: str, refs, results_dir: Path) -> str:
    """sha256 over the notebook as it will be executed (after local-only cells are removed), the result cells
    it reads and atlaslib's source digest."""
    from ..notebook import source_digest

    h = hashlib.sha256()
    h.update(notebook_text.encode())
    h.update(source_digest().encode())
    for ref in refs:
        p = ref.path(results_dir)
        h.update(ref.label.encode())
        h.update(p.read_bytes() if p.is_file() else b"-")
    return h.hexdigest()


def execute(nb, *, results_dir: Path, data_dir=None, name: str = "lesson", failed_dir: Path | None = None,
            kernel_name: str = KERNEL, timeout: int = CELL_TIMEOUT):
    """Execute a lesson notebook with papermill (parameters ``results_dir`` and ``data_dir``); returns the
    executed notebook or raises :class:`LessonFailed` naming the lesson and the (source) cell."""
    import nbformat
    from papermill.exceptions import PapermillExecutionError

    from .. import notebook

    work = Path(tempfile.mkdtemp(prefix="atlas-lesson-"))
    src_nb, out_nb = work / "in.ipynb", work / "out.ipynb"
    try:
        nbformat.write(nb, src_nb)
        params = {"results_dir": str(results_dir), "data_dir": str(data_dir) if data_dir else None}
        try:
            notebook.execute(src_nb, out_nb, params, kernel_name=kernel_name, timeout=timeout)
        except PapermillExecutionError as exc:
            kept = _keep(out_nb, failed_dir, name)
            cell = notebook.source_cell_number(nb, exc.cell_index)
            raise LessonFailed(name, cell, f"{exc.ename}: {exc.evalue}", kept) from None
        except Exception as exc:
            kept = _keep(out_nb, failed_dir, name)
            raise LessonFailed(name, None, f"{type(exc).__name__}: {exc}", kept) from None
        return nbformat.read(out_nb, as_version=4)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _execute_json(name: str, nb_json: str, results_dir: str, failed_dir: str | None) -> str:
    """Worker-process entry: execute one lesson given as JSON, return the executed notebook as JSON."""
    import nbformat

    nb = nbformat.reads(nb_json, as_version=4)
    out = execute(nb, results_dir=Path(results_dir), name=name, failed_dir=Path(failed_dir) if failed_dir else None)
    return nbformat.writes(out)


def execute_all(todo: list, *, results_dir: Path, failed_dir: Path | None = None, workers: int | None = None) -> dict:
    """Execute several lessons ``[(name, notebook)]``, up to ``workers`` at a time (default
    ``$ATLAS_COURSE_WORKERS``, else min(3, CPU count)), each in its own process and kernel. Returns
    ``{name: executed notebook}``; the first failure (in lesson order) is raised as :class:`LessonFailed`
    after every lesson has finished."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    import nbformat

    if not todo:
        return {}
    workers = workers or int(os.environ.get("ATLAS_COURSE_WORKERS") or min(3, os.cpu_count() or 1))
    if workers <= 1 or len(todo) == 1:
        return {name: execute(nb, results_dir=results_dir, name=name, failed_dir=failed_dir) for name, nb in todo}
    with ProcessPoolExecutor(max_workers=min(workers, len(todo)),
                             mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [(name, pool.submit(_execute_json, name, nbformat.writes(nb), str(results_dir),
                                      str(failed_dir) if failed_dir else None)) for name, nb in todo]
        out, errors = {}, []
        for name, fut in futures:
            try:
                out[name] = nbformat.reads(fut.result(), as_version=4)
            except LessonFailed as exc:
                errors.append(exc)
    if errors:
        raise errors[0]
    return out


def _keep(executed: Path, failed_dir: Path | None, name: str) -> str | None:
    if failed_dir is None or not executed.is_file():
        return None
    target = Path(failed_dir) / "course" / f"{name}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(executed, target)
    return str(target)


def cached_lesson(path: Path, key: str, log=print):
    """The executed lesson cached at ``path`` when it carries ``key``; None otherwise. A damaged entry (cut short,
    not a notebook) is a miss: the lesson is executed again, and the build's log says so, naming the file."""
    import nbformat

    if read_cache_json(path, lambda nb: isinstance(nb, dict)) is None:  # says so when damaged
        return None
    try:
        nb = nbformat.read(path, as_version=4)
        current = nb.metadata.get("atlas_course_key") == key
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        log(f"build cache {path} is damaged (not a notebook: {type(exc).__name__}); computing it again")
        return None
    return nb if current else None
