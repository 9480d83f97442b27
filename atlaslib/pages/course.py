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

This module turns the lessons into site pages (execute or withhold, the take-home and student editions, the
learning path); a lesson is read by :mod:`atlaslib.pages.lessons`, executed (and cached) by
:mod:`atlaslib.pages.lesson_runs`, and described on the syllabus page by :mod:`atlaslib.pages.syllabus`; their
names used from here stay importable from here. The lessons' computations live in
:mod:`atlaslib.course`.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ..atomicio import atomic_write_text
from ..notebook import REPO
from .lesson_runs import (LessonFailed, _content, _strip_local_only, cache_key, cached_lesson, execute,
                          execute_all)
from .lessons import (LESSON_DIR, SOLUTION_TAG, Lesson, LessonError, _has_tag, _lesson_files, _tags, lessons,
                      read_lesson, student_text)
from .syllabus import (READING_WPM, SYLLABUS_MARK, _syllabus, reading_words,  # noqa: F401  (and re-exported)
                       solution_seconds)

DOWNLOAD_DIR = Path("book") / "downloads"
PATH_MARK = "<!-- learning-path -->"


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
