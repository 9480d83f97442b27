"""The course: lessons executed at build time, the learning path, and the take-home downloads.

A lesson is a MyST text notebook ``book/course/<name>.md`` (jupytext header, like the card notebooks) whose
first code cell is tagged ``parameters`` and defines ``results_dir`` and ``data_dir``. Its front matter
says what it reads::

    atlas:
      uses: [nli_negation]                        # cards whose data the lesson reads (licence, gating)
      requires: [nli_negation/builtin-v1/always-abstain/zero_shot]   # result cells it reads
      requires_local: [negex/atlas-full-v1/majority/zero_shot]       # cells read by its local-only cells

:func:`start_course` then :func:`finish_course` (called by :func:`atlaslib.book.render_site`) render every lesson into
the site tree:

- the lesson is executed with papermill (kernel ``python3`` of this environment, offline, working
  directory the repository) against the build's results folder; the executed notebook replaces the
  ``.md`` in the site tree. A lesson that raises stops the build with :class:`LessonFailed`, naming the
  lesson and the cell; the failed notebook is kept in ``<build>/failed/course/`` and nothing is rendered
  as if it had run;
- a lesson whose card is not in this build, or whose result cells are absent from it, becomes a short page
  saying so (which cells it needs and the command that makes them); never a half-run lesson;
- in a publish build a lesson that uses a card whose licence is unconfirmed or whose data are gated
  becomes a "withheld" page (and is listed on the build's withheld page); the atlas's own lessons use only
  cards a publish build shows, so it executes and publishes all of them. Cells tagged ``local-only``
  (sections that read such a card inside an otherwise open lesson, e.g. the interval lesson's NegEx
  section) are removed before execution, as they are in a local build that lacks the cells they read; a
  note says what was left out and why;
- every executed lesson gets a "take it home" box: the lesson as MyST ``.md`` and as a fresh ``.ipynb``
  (no outputs), both as downloads, and the one command that runs it from a clone
  (``python -m atlaslib.pages.course <lesson>``);
- every card page shown gets the same for its card notebook (``notebooks/<card>.md``);
- ``book/start_here.md``'s ``<!-- learning-path -->`` line becomes the table of cards and lessons, with
  links only to pages this build has.

Executed lessons are cached in ``<build>/course-cache/`` on the notebook as executed, the cells it reads and
the atlaslib source digest, so a rebuild with nothing changed executes nothing. Lessons that must run execute
in parallel worker processes (``$ATLAS_COURSE_WORKERS``, default up to 3), each with its own kernel. The book
starts them (:func:`start_course`) before it renders the card pages and collects them (:func:`finish_course`)
after, so the lessons and the rest of the site render at the same time.

Why one module of this size: it has one job, turning the lessons into site pages (execute or withhold,
the learning path, the take-home and student editions), and its parts share the lesson reading and the
build's folders; the lessons' computations live in :mod:`atlaslib.course`.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..notebook import REPO
from ..results import atomic_write_text, read_cache_json

LESSON_DIR = Path("book") / "course"
DOWNLOAD_DIR = Path("book") / "downloads"
PATH_MARK = "<!-- learning-path -->"
SYLLABUS = "syllabus"                    # book/course/syllabus.md: a page of the Course part, not a lesson
SYLLABUS_MARK = "<!-- syllabus -->"
READING_WPM = 200                        # the reading rate the syllabus states its reading times at
SOLUTION_TAG = "solution"
#: a sphinx-exercise gated solution: ```{solution-start} LABEL ... ``` then its cells, then ```{solution-end}```
GATED_SOLUTION = re.compile(r"```\{solution-start\}.*?```\{solution-end\}[ \t]*\n```[ \t]*\n?", flags=re.S)
LOCAL_ONLY_TAG = "local-only"
KERNEL = "python3"
CELL_TIMEOUT = 900


class LessonError(ValueError):
    """A lesson file is not a valid lesson (no parameters cell, bad front matter)."""


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


@dataclass(frozen=True)
class CellRef:
    """``card/version/model-slug/protocol`` of a result cell a lesson reads."""
    card: str
    version: str
    model: str
    protocol: str

    @classmethod
    def parse(cls, text: str, where: str) -> "CellRef":
        parts = str(text).split("/")
        if len(parts) < 4:
            raise LessonError(f"{where}: {text!r} is not card/version/model/protocol")
        return cls(parts[0], parts[1], "/".join(parts[2:-1]), parts[-1])

    def path(self, results_dir: Path) -> Path:
        from ..results import cell_path

        return cell_path(results_dir, self.card, self.version, self.model, self.protocol)

    @property
    def label(self) -> str:
        return f"{self.card}/{self.version}/{self.model}/{self.protocol}"

    def command(self) -> str:
        return (f"atlas run --card {self.card} --model {self.model} --protocol {self.protocol} "
                f"--version {self.version}")


@dataclass
class Lesson:
    name: str
    path: Path
    title: str
    uses: tuple[str, ...] = ()
    requires: tuple[CellRef, ...] = ()
    requires_local: tuple[CellRef, ...] = ()
    solutions: int = 0
    #: cells tagged local-only (:data:`LOCAL_ONLY_TAG`): a section a build without its data leaves out
    local_only: int = 0
    meta: dict = field(default_factory=dict)

    @property
    def doc(self) -> str:
        return (LESSON_DIR / self.name).as_posix()

    def missing(self, results_dir: Path, local: bool = False) -> list[CellRef]:
        """Required cells (or the local-only ones) absent from ``results_dir`` or not ``ok``."""
        out = []
        for ref in (self.requires_local if local else self.requires):
            p = ref.path(results_dir)
            try:
                ok = p.is_file() and json.loads(p.read_text(encoding="utf-8")).get("status") == "ok"
            except (OSError, json.JSONDecodeError):
                ok = False
            if not ok:
                out.append(ref)
        return out


def _tags(cell) -> list:
    """The cell's tags, a list kept in its metadata (created empty when it has none): for :func:`_tidy`, which adds
    to them; every reader asks :func:`_has_tag`, which leaves the cell as it is."""
    return cell.get("metadata", {}).setdefault("tags", [])


def _has_tag(cell, tag: str) -> bool:
    """Whether the cell carries ``tag``, leaving the cell as it is (a lesson's cache key reads its cells)."""
    return tag in (cell.get("metadata", {}).get("tags") or ())


def read_lesson(path: Path):
    """(Lesson, notebook) of a lesson file; :class:`LessonError` names the file and what is wrong."""
    import jupytext

    path = Path(path)
    nb = jupytext.read(path)
    params = [c for c in nb.cells if c.cell_type == "code" and _has_tag(c, "parameters")]
    if not params:
        raise LessonError(f"{path}: no code cell is tagged 'parameters' (expected one defining results_dir "
                          f"and data_dir)")
    for name in ("results_dir", "data_dir"):
        if not re.search(rf"^{name}\s*=", params[0].source, flags=re.M):
            raise LessonError(f"{path}: the parameters cell does not define {name}")
    text = path.read_text(encoding="utf-8")
    starts, ends = text.count("```{solution-start}"), text.count("```{solution-end}")
    if starts != ends:
        raise LessonError(f"{path}: {starts} solution-start but {ends} solution-end directives (each solution of "
                          f"an exercise is a sphinx-exercise gated block)")
    outside = [c for c in jupytext.reads(GATED_SOLUTION.sub("", text), fmt="md:myst").cells
               if c.cell_type == "code" and _has_tag(c, SOLUTION_TAG)]
    if outside:
        raise LessonError(f"{path}: a code cell tagged 'solution' sits outside a solution-start/solution-end block: "
                          f"{outside[0].source.splitlines()[0][:60]!r}")
    meta = dict(nb.metadata.get("atlas") or {})
    title = next((c.source.lstrip()[2:].split("\n")[0].strip() for c in nb.cells
                  if c.cell_type == "markdown" and c.source.lstrip().startswith("# ")), None)
    if not title:
        raise LessonError(f"{path}: no '# title' heading")
    where = f"{path}: front matter atlas"
    lesson = Lesson(
        name=path.stem, path=path, title=title, meta=meta,
        uses=tuple(meta.get("uses") or ()),
        requires=tuple(CellRef.parse(r, where + ".requires") for r in meta.get("requires") or ()),
        requires_local=tuple(CellRef.parse(r, where + ".requires_local") for r in meta.get("requires_local") or ()),
        solutions=sum(1 for c in nb.cells if c.cell_type == "code" and _has_tag(c, SOLUTION_TAG)),
        local_only=sum(1 for c in nb.cells if _has_tag(c, LOCAL_ONLY_TAG)),
    )
    return lesson, nb


def _lesson_files(root: Path) -> list[Path]:
    """Lesson files under ``root/book/course`` in the order of the learning path (front matter
    ``atlas.order``, then name)."""
    import jupytext

    def order(p: Path):
        return ((jupytext.read(p).metadata.get("atlas") or {}).get("order", 99), p.stem)

    return sorted((p for p in (Path(root) / LESSON_DIR).glob("*.md") if p.stem not in ("index", SYLLABUS)),
                  key=order)


def lessons(root: Path = REPO) -> list[Lesson]:
    """Every lesson under ``root/book/course``, in the order of the learning path."""
    return [read_lesson(p)[0] for p in _lesson_files(root)]


def _withheld_reason(lesson: Lesson, cards: dict) -> str | None:
    for name in lesson.uses:
        card = cards.get(name)
        if card is None:
            continue
        if not card.licence_confirmed:
            return f"it works on the {card.title.split(':')[0]} data, whose licence is unconfirmed ({card.licence_note})"
        if card.gated:
            return f"it works on gated data ({card.title.split(':')[0]}, data use agreement)"
    return None


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


def _tidy(nb) -> None:
    """Hide the parameters (the build's own folders are not the reader's business)."""
    for cell in nb.cells:
        tags = _tags(cell)
        if ("parameters" in tags or "injected-parameters" in tags) and "remove-cell" not in tags:
            tags.append("remove-cell")


def _myst_text(nb) -> str:
    import jupytext

    return jupytext.writes(nb, fmt="md:myst")


def _write_downloads(src: Path, md_text: str, stem: str) -> tuple[Path, Path]:
    """The MyST text and a fresh .ipynb (no outputs) of a notebook, under book/downloads/ in the site."""
    import jupytext

    out = src / DOWNLOAD_DIR
    out.mkdir(parents=True, exist_ok=True)
    md, ipynb = out / f"{stem}.md", out / f"{stem}.ipynb"
    md.write_text(md_text, encoding="utf-8")
    jupytext.write(jupytext.reads(md_text, fmt="md:myst"), ipynb, fmt="ipynb")
    return md, ipynb


def student_text(md_text: str) -> str:
    """The student edition of a lesson's MyST source: every sphinx-exercise gated solution (``solution-start``
    to ``solution-end``, the code cells between included) left out; the exercises stay. The same blocks the
    book's ``hide_solutions`` option leaves out of a page."""
    return GATED_SOLUTION.sub("", md_text)


def _write_editions(src: Path, md_text: str, name: str) -> dict:
    """A lesson's downloads: its MyST source (``lesson-<name>.md``) and two fresh notebooks (no outputs),
    ``<name>-instructor.ipynb`` with the solutions and ``<name>-student.ipynb`` without."""
    import jupytext

    out = src / DOWNLOAD_DIR
    out.mkdir(parents=True, exist_ok=True)
    files = {"md": out / f"lesson-{name}.md", "instructor": out / f"{name}-instructor.ipynb",
             "student": out / f"{name}-student.ipynb"}
    files["md"].write_text(md_text, encoding="utf-8")
    for edition, text in (("instructor", md_text), ("student", student_text(md_text))):
        nb = jupytext.reads(text, fmt="md:myst")
        if edition == "student":
            left = [c for c in nb.cells if _has_tag(c, SOLUTION_TAG) or "solution-start" in c.source]
            if left:
                raise LessonError(f"lesson {name}: the student edition still holds a solution cell")
        jupytext.write(nb, files[edition], fmt="ipynb")
    return files


def take_home_block(page_dir: Path, md: Path, ipynb: Path, command: str, what: str) -> str:
    rel = lambda p: os.path.relpath(p, page_dir)  # noqa: E731
    return (f":::{{admonition}} Take {what} home\n:class: tip atlas-take-home\n"
            f"Download {what} as a {{download}}`MyST notebook (.md) <{rel(md)}>` or a "
            f"{{download}}`Jupyter notebook (.ipynb) <{rel(ipynb)}>`. From a clone of the atlas, after the "
            f"set-up (`make env`), one command runs it:\n\n```bash\n{command}\n```\n:::\n")


def lesson_take_home_block(page_dir: Path, files: dict, command: str) -> str:
    rel = lambda p: os.path.relpath(p, page_dir)  # noqa: E731
    return (":::{admonition} Take this lesson home\n:class: tip atlas-take-home\n"
            f"Two editions of this lesson, as Jupyter notebooks: the {{download}}`student edition "
            f"<{rel(files['student'])}>` (the exercises without their solutions) and the {{download}}`instructor "
            f"edition <{rel(files['instructor'])}>` (with them); the source is the {{download}}`MyST notebook (.md) "
            f"<{rel(files['md'])}>`. From a clone of the atlas, after the set-up (`make env`), one command runs "
            f"it:\n\n```bash\n{command}\n```\n:::\n")


def lesson_command(name: str) -> str:
    return f".venv/bin/python -m atlaslib.pages.course {name}"


def _stub(title: str, body: str) -> str:
    return f"# {title}\n\n```{{note}}\n{body}\n```\n"


@dataclass
class CoursePlan:
    """What :func:`start_course` decided for each lesson, and the lessons executing in the background."""
    src: Path
    shown: dict
    jobs: list
    done: dict
    docs: list
    withheld: list
    texts: dict = field(default_factory=dict)  # each lesson's MyST source as read, for the syllabus
    executed: object = None  # Future of {name: executed notebook} (:func:`atlaslib.background.in_background`)


def start_course(src: Path, paths, publish: bool, cards=None) -> CoursePlan:
    """Decide every lesson (executed, stub or withheld: stubs are written at once) and start executing the
    lessons that must run, in the background (:func:`execute_all` in a thread; each lesson is its own
    process and kernel), so the rest of the site renders meanwhile. :func:`finish_course` waits for them and
    writes the lesson pages. A lesson reads only result cells and data, which are final once the run matrix
    is done, so starting it before the card pages are rendered changes nothing it computes."""
    import nbformat

    from ..background import in_background

    from ..cards import available_cards

    src = Path(src)
    all_cards = {c.name: c for c in available_cards()}
    if cards is None:
        cards = [c for c in all_cards.values() if not (publish and not c.licence_confirmed)]
    shown = {c.name: c for c in cards}
    results_dir = Path(paths.results)
    cache_dir = Path(paths.build) / "course-cache"
    docs, done, jobs, held, texts = [], {}, [], [], {}
    for path in _lesson_files(src):
        lesson, nb = read_lesson(path)
        texts[lesson.name] = path.read_text(encoding="utf-8")
        reason = _withheld_reason(lesson, all_cards) if publish else None
        if reason:
            path.write_text(_stub(lesson.title, f"This lesson is left out of the published book: {reason} "
                                  f"A local build (`atlas book`) shows it."), encoding="utf-8")
            held.append((f"lesson `{lesson.name}`", reason))
            done[lesson.name] = ("withheld", lesson)
            docs.append(lesson.doc)
            continue
        absent = [c for c in lesson.uses if c not in shown]
        if absent:
            names = ", ".join(all_cards[c].title.split(":")[0] if c in all_cards else c for c in absent)
            path.write_text(_stub(lesson.title, f"This lesson was not run in this build: it works on the {names} "
                                  f"card, which this build does not include."), encoding="utf-8")
            done[lesson.name] = ("not run", lesson)
            docs.append(lesson.doc)
            continue
        missing = lesson.missing(results_dir)
        if missing:
            cmds = "\n".join(f"    {r.command()}" for r in missing)
            path.write_text(_stub(lesson.title, "This lesson was not run in this build: it reads result cells "
                                  "this build does not have (" + ", ".join(f"`{r.label}`" for r in missing) +
                                  "). Make them, then build the book again:\n\n" + cmds + "\n"), encoding="utf-8")
            done[lesson.name] = ("not run", lesson)
            docs.append(lesson.doc)
            continue
        local_missing = lesson.missing(results_dir, local=True)
        local_reason = None
        if publish:
            local_reason = ("it reads data the published book leaves out (a licence not yet confirmed); "
                            "a local build shows it.")
        elif local_missing:
            local_reason = ("it reads result cells this build does not have ("
                            + ", ".join(f"`{r.label}`" for r in local_missing) + ").")
        text = path.read_text(encoding="utf-8")
        if local_reason and _strip_local_only(nb, local_reason) and publish:
            text = _myst_text(nb)  # the take-home copy leaves the withheld section out too
        refs = lesson.requires + (() if local_reason else lesson.requires_local)
        key = cache_key(_content(nb), refs, results_dir)
        cached = cache_dir / f"{lesson.name}.ipynb"
        executed = cached_lesson(cached, key)
        jobs.append((lesson, path, text, nb, key, cached, executed))
        done[lesson.name] = ("ran", lesson)
        docs.append(lesson.doc)
    todo = [(j[0].name, j[3]) for j in jobs if j[6] is None]
    plan = CoursePlan(src, shown, jobs, done, docs, held, texts)
    plan.executed = in_background(lambda: execute_all(todo, results_dir=results_dir,
                                                      failed_dir=Path(paths.build) / "failed"), "atlas-lessons")
    return plan


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


def finish_course(plan: CoursePlan, withheld: list | None = None) -> list[str]:
    """Wait for the lessons :func:`start_course` started; write every executed lesson (with its take-home
    box), the card notebooks' take-home boxes and the learning path; add the withheld lessons to
    ``withheld``; return the lessons' doc paths. A lesson that failed raises :class:`LessonFailed` here."""
    import nbformat

    fresh = plan.executed.result()  # a lesson's LessonFailed is raised here
    if withheld is not None:
        withheld.extend(plan.withheld)
    src, shown, done = plan.src, plan.shown, plan.done
    timings: dict[str, float] = {}
    executed_nbs: dict = {}
    for lesson, path, text, nb, key, cached, executed in plan.jobs:
        if executed is None:
            executed = fresh[lesson.name]
            executed.metadata["atlas_course_key"] = key
            atomic_write_text(cached, nbformat.writes(executed))  # a killed build leaves the old entry or none
        _tidy(executed)
        files = _write_editions(src, text, lesson.name)
        box = lesson_take_home_block(path.parent, files, lesson_command(lesson.name))
        timings[lesson.name] = solution_seconds(executed)
        executed_nbs[lesson.name] = executed
        title_at = next(i for i, c in enumerate(executed.cells)
                        if c.cell_type == "markdown" and c.source.lstrip().startswith("# "))
        executed.cells.insert(title_at + 1, nbformat.v4.new_markdown_cell(box))
        executed.metadata.pop("atlas_course_key", None)
        nbformat.write(executed, path.with_suffix(".ipynb"))
        path.unlink()
    _card_take_home(src, shown)
    _learning_path(src, shown, done)
    _syllabus(src, done, plan.texts, timings, executed_nbs, shown)
    return plan.docs


def card_command(card) -> str:
    version, model, protocol = card.default_matrix[0]
    return (f".venv/bin/atlas run --card {card.name} --model {model} --protocol {protocol} "
            f"--version {version}")


def _card_take_home(src: Path, shown: dict) -> None:
    """A 'take this notebook home' section at the end of every shown card page."""
    for name, card in shown.items():
        page = src / card.page
        nb_src = REPO / card.notebook
        if not page.is_file() or not nb_src.is_file():
            continue
        md, ipynb = _write_downloads(src, nb_src.read_text(encoding="utf-8"), f"card-{name}")
        block = take_home_block(page.parent, md, ipynb, card_command(card), "this card's notebook")
        page.write_text(page.read_text(encoding="utf-8").rstrip() + "\n\n## Run this card yourself\n\n"
                        "The card's notebook runs one model under one protocol on one split version; "
                        "the parameters at its top say which.\n\n" + block, encoding="utf-8")


def _learning_path(src: Path, shown: dict, done: dict) -> None:
    page = src / "book" / "start_here.md"
    if not page.is_file():
        return
    text = page.read_text(encoding="utf-8")
    if PATH_MARK not in text:
        return
    lines = ["| step | lesson | what it teaches | reads | status in this build |", "|---|---|---|---|---|"]
    for i, (name, (status, lesson)) in enumerate(done.items(), 1):
        teaches = str(lesson.meta.get("teaches", "")).strip().replace("|", "\\|")
        reads = []
        for c in lesson.uses:
            card = shown.get(c)
            label = (card.title.split(":")[0] if card else c)
            reads.append(f"[{label}](cards/{c}.md)" if card else label)
        status_text = {"ran": "executed", "not run": "not run in this build",
                       "withheld": "withheld from the published book"}[status]
        lines.append(f"| {i} | {{doc}}`{lesson.title} <course/{name}>` | {teaches} | {', '.join(reads) or '—'} | "
                     f"{status_text} |")
    page.write_text(text.replace(PATH_MARK, "\n".join(lines)), encoding="utf-8")


def solution_seconds(executed) -> float:
    """How long an executed lesson's solution cells took to run (papermill's per-cell ``duration``), in seconds."""
    total = 0.0
    for c in executed.cells:
        if c.cell_type == "code" and _has_tag(c, SOLUTION_TAG):
            total += float((c.get("metadata", {}).get("papermill") or {}).get("duration") or 0.0)
    return total


def _prose_words(text: str) -> int:
    words = 0
    for line in text.splitlines():
        if line.startswith("```") or line.startswith(":::") or re.match(r"^:[a-z-]+:", line):
            continue
        words += len(re.findall(r"[\w’'-]+", line))
    return words


def reading_words(md_text: str, executed=None) -> int:
    """Words of a lesson's prose, as a student reads it: the markdown of the student edition (without front
    matter, code cells, directive fences and their options) and, given the executed notebook, the Markdown its
    other cells print (the sentences a lesson writes from its numbers)."""
    import jupytext

    nb = jupytext.reads(student_text(md_text), fmt="md:myst")
    words = sum(_prose_words(c.source) for c in nb.cells if c.cell_type == "markdown")
    for c in (executed.cells if executed is not None else ()):
        if c.cell_type == "code" and not _has_tag(c, SOLUTION_TAG):
            for out in c.get("outputs", []):
                words += _prose_words(str((out.get("data") or {}).get("text/markdown", "")))
    return words


def exercise_count(md_text: str) -> int:
    return md_text.count("```{exercise}")


def syllabus_rows(done: dict, texts: dict, timings: dict, executed: dict | None = None) -> list[dict]:
    """One row per lesson for the syllabus: title, objectives, prerequisites, cards and cells, agreement,
    words, reading minutes at :data:`READING_WPM`, exercises and their solutions' measured run time."""
    import math

    from ..cards import available_cards

    cards = {c.name: c for c in available_cards()}
    executed = executed or {}
    rows = []
    for name, (status, lesson) in done.items():
        text = texts.get(name, "")
        words = reading_words(text, executed.get(name))
        gated = [cards[c].title.split(":")[0] for c in lesson.uses if c in cards and cards[c].gated]
        rows.append({"name": name, "title": lesson.title, "status": status,
                     "objectives": list(lesson.meta.get("objectives") or []),
                     "prerequisites": list(lesson.meta.get("prerequisites") or []),
                     "cards": [(c, cards[c].title.split(":")[0] if c in cards else c) for c in lesson.uses],
                     "cells": [r.label for r in lesson.requires + lesson.requires_local],
                     "agreement": gated, "words": words, "reading_minutes": max(1, math.ceil(words / READING_WPM)),
                     "exercises": exercise_count(text), "solution_seconds": timings.get(name)})
    return rows


def syllabus_markdown(rows: list[dict], shown=None) -> str:
    """The syllabus from :func:`syllabus_rows`; a card is a link to its page when the build shows it
    (``shown``: card name -> card; None: every card is linked), else its name as text."""
    from ..escape import md as md_text

    lines = [f"Reading times are the words of each lesson's prose and of the sentences it writes from its numbers (code and solutions "
             f"not counted) at {READING_WPM} words a minute. Exercise times are measured: how long the lesson's solutions took to "
             f"execute when this book was built, on the build machine; a student writing them will take longer.",
             "", "| lesson | reading | exercises | solutions run in | agreement needed |", "|---|---|---|---|---|"]
    for i, r in enumerate(rows, 1):
        secs = "not run in this build" if r["solution_seconds"] is None else f"{r['solution_seconds']:.1f} s"
        title = r["title"].replace("`", "").replace("<", "").replace(">", "")
        lines.append(f"| {i}. {{doc}}`{title} <{r['name']}>` | {r['reading_minutes']} min "
                     f"({r['words']:,} words) | {r['exercises']} | {secs} | "
                     f"{', '.join(r['agreement']) or 'none'} |")
    for i, r in enumerate(rows, 1):
        lines += ["", f"## {i}. {md_text(r['title'])}", ""]
        lines.append("**After this lesson a student can:**")
        lines += [f"- {md_text(o)}" for o in r["objectives"]] or ["- (not stated)"]
        lines += ["", "**Prerequisites:** " + ("; ".join(md_text(p) for p in r["prerequisites"]) or "none"), ""]
        cards = ", ".join(f"[{md_text(t)}](../cards/{c}.md)" if shown is None or c in shown else md_text(t)
                          for c, t in r["cards"]) or "none"
        lines.append(f"**Cards and data:** {cards}; result cells read: "
                     + (", ".join(f"`{c}`" for c in r["cells"]) or "none") + ".")
        lines += ["", "**Agreement needed:** " + (", ".join(r["agreement"]) + " (data use agreement)"
                                                 if r["agreement"] else "none") + ".", ""]
        secs = ("not measured in this build (the lesson was not run)" if r["solution_seconds"] is None
                else f"the solutions ran in {r['solution_seconds']:.1f} s")
        lines.append(f"**Time:** reading about {r['reading_minutes']} min ({r['words']:,} words at {READING_WPM} a "
                     f"minute); {r['exercises']} exercises, {secs}.")
    return "\n".join(lines) + "\n"


def _syllabus(src: Path, done: dict, texts: dict, timings: dict, executed: dict, shown=None) -> None:
    page = src / LESSON_DIR / f"{SYLLABUS}.md"
    if not page.is_file():
        return
    text = page.read_text(encoding="utf-8")
    if SYLLABUS_MARK in text:
        page.write_text(text.replace(SYLLABUS_MARK, syllabus_markdown(syllabus_rows(done, texts, timings, executed),
                                                                      shown)), encoding="utf-8")


# -- running a lesson from a clone -------------------------------------------------------------------------

def run_local(name: str, *, results_dir: Path | None = None, out: Path | None = None, data_dir=None,
              log=print) -> Path:
    """Make the result cells a lesson reads (cached runs), execute it, write the executed notebook; return
    its path. ``python -m atlaslib.pages.course <lesson>`` calls this."""
    import nbformat

    from .. import runner

    path = REPO / LESSON_DIR / f"{name}.md"
    if not path.is_file():
        known = ", ".join(lsn.name for lsn in lessons())
        raise LessonError(f"no lesson {name!r}; expected one of {known}")
    lesson, nb = read_lesson(path)
    results_dir = Path(results_dir or REPO / "results")
    for ref in lesson.requires + lesson.requires_local:
        if ref in lesson.missing(results_dir) + lesson.missing(results_dir, local=True):
            log(f"running {ref.label} (the lesson reads its result cell)")
            runner.run(runner.RunRequest(ref.card, ref.version, ref.model, ref.protocol), results_dir=results_dir,
                       data_dir=data_dir)
    out = Path(out or REPO / "_build" / "course" / f"{name}.ipynb")
    executed = execute(nb, results_dir=results_dir, data_dir=data_dir, name=name, failed_dir=out.parent / "failed")
    out.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(executed, out)
    log(f"lesson {name} executed: {out}")
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or argv[0].startswith("-"):
        print("usage: python -m atlaslib.pages.course LESSON   (one of: "
              + ", ".join(lsn.name for lsn in lessons()) + ")", file=sys.stderr)
        return 2
    try:
        run_local(argv[0])
    except (LessonError, LessonFailed) as exc:
        print(f"lesson: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
