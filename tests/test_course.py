"""The course: every lesson executes on the pinned environment, offline, and every exercise's solution runs and
asserts its answer; a failing lesson stops the build; a publish build executes and publishes every lesson whole
(none reads a card it withholds); atlaslib.course against independent references (scipy, sklearn, hand-computed
cases, atlaslib.metrics).

A small book is built once per session (:func:`build_course_book`, by the fixture ``course_book`` of
``tests/conftest.py``; ``tests/test_browser_course.py`` and ``tests/test_book_statements.py`` read it too):
the four offline NLI challenge runs and SmolLM2's (the language-model and calibration lessons' row, with its
label probabilities) are scored in-process into a results folder (no notebook, no kernel), negspacy's NegEx rows
feed the interval lesson's local-only section, MACCROBAT's memorising baseline the span lesson's row, and
``book.build`` renders and builds it. ``atlas course check`` is tested on every lesson's graded exercise
with a right and a wrong answer file, the right answers computed here with scipy, seqeval and plain loops.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import nbformat
import numpy as np
import pandas as pd
import pytest
from scipy.stats import binom, binomtest

from atlaslib import book, course, results
from atlaslib.cards import get_card
from atlaslib.analysis import calibration
from atlaslib.analysis.paired import compare_cells
from atlaslib.metrics import intervals
from atlaslib.pages import course as pages
from tests.books import BUILD_TIMEOUT
from tests.myst import myst_header

NLI_MODELS = ("medspacy-context-nli", "minilm-similarity", "always-entailment", "always-abstain")
# shares the session's course book (test_browser_course too)
pytestmark = [pytest.mark.xdist_group("course_book"), pytest.mark.timeout(BUILD_TIMEOUT)]


def write_nli_cells(results_dir: Path) -> None:
    """The NLI challenge's offline runs, scored in-process (the same cells the card notebook writes)."""
    from atlaslib.cards.run import run

    for model in NLI_MODELS:
        cell = run("nli_negation", "builtin-v1", model, "zero_shot")
        results.write_cell(cell, results.cell_path(results_dir, "nli_negation", "builtin-v1", model, "zero_shot"))


def write_negex_cells(results_dir: Path, data_dir) -> None:
    """negspacy (the kit's own triggers) on both NegEx split versions, run in-process the way the card notebook
    runs it (split, protocol, metrics, the whole-kit reproduction on atlas-full-v1, the card's cell), with 200
    resamples to keep it quick."""
    from atlaslib.cards import negex
    from atlaslib.cards.run import CardRun

    rows = negex.load_rows(data_dir)
    items = negex.items_from_rows(rows)
    model = "negspacy-negex-kit"
    for version in negex.VERSIONS:
        manifest = negex.split(items, version)
        train, test = negex.split_frames(items, manifest)
        out = negex.run_protocol(model, "zero_shot", train, test, data_dir=data_dir)
        repro = None
        if negex.reproduces(out, version, model):
            repro = negex.reproduction(out["adapter"], rows, items, known=dict(zip(test["item_id"], out["pred"])))
        run = CardRun("negex", version, model, "zero_shot", parameters={"n_resamples": 200},
                      result_path=results.cell_path(results_dir, "negex", version, model, "zero_shot"))
        run.finish(**negex.cell_parts(run, negex.scored_records(test, out, data_dir=data_dir), manifest, out=out,
                                      repro=repro))


def write_language_model_cell(results_dir: Path, smollm2) -> None:
    """SmolLM2-135M-Instruct on the NLI challenge (the default matrix's language-model row), from its local weights
    (the session's adapter, ``smollm2()``, as the card builds it); the cell records each case's label
    probabilities (the calibration lesson reads them)."""
    from atlaslib.cards import nli_negation as nli
    from atlaslib.cards.nli_negation.predictors import NliAdapterPredictor
    from atlaslib.cards.run import run

    model = "smollm2-135m-instruct"
    cell = run("nli_negation", "builtin-v1", model, "zero_shot",
               predictor=NliAdapterPredictor(smollm2(), name=model))
    assert cell["status"] == "ok", cell.get("reason")
    assert all(set(r["scores"]) == set(nli.LABELS) for r in cell["predictions"])
    results.write_cell(cell, results.cell_path(results_dir, "nli_negation", "builtin-v1", "smollm2-135m-instruct",
                                               "zero_shot"))


def write_maccrobat_cells(results_dir: Path, data_dir) -> None:
    """The card's memorising baseline on atlas-n100-v1 (no model: phrases seen in training), run in-process the
    way the card notebook runs it, with 200 resamples."""
    from atlaslib.cards import maccrobat
    from atlaslib.cards.run import CardRun

    items = maccrobat.load_items(data_dir)
    manifest = maccrobat.split(items, "atlas-n100-v1")
    out = maccrobat.run_protocol(items, manifest, "memorize", "train_lookup", n_resamples=200)
    path = results.cell_path(results_dir, "maccrobat", "atlas-n100-v1", "memorize", "train_lookup")
    CardRun("maccrobat", "atlas-n100-v1", "memorize", "train_lookup", parameters={"n_resamples": 200},
            result_path=path).finish(**maccrobat.outcome_parts(out, manifest, items))


COURSE_CARDS = ("nli_negation", "negex", "maccrobat")


def build_course_book(root: Path, data_dir, smollm2) -> dict:
    """A local book of the NLI, NegEx and MACCROBAT cards with every lesson executed, in ``root``; its paths, html
    directory and the build log. Built once per session by the fixture ``course_book`` (``tests/conftest.py``)."""
    paths = book.BuildPaths(results=root / "results", runs=root / "runs", build=root / "_build")
    write_nli_cells(paths.results)
    write_negex_cells(paths.results, data_dir)
    write_maccrobat_cells(paths.results, data_dir)
    write_language_model_cell(paths.results, smollm2)
    logs: list[str] = []
    code = book.build(paths=paths, cards=[get_card(c) for c in COURSE_CARDS], run_runs=False,
                      data_dir=data_dir, log=lambda *a, **k: logs.append(" ".join(map(str, a))))
    assert code == 0, "course book build failed:\n" + "\n".join(logs)
    return {"paths": paths, "html": paths.html_out(False) / "_build" / "html", "src": paths.src(False), "log": logs}


# -- every lesson, executed ------------------------------------------------------------------------------

LESSONS = pages.lessons()


def test_the_course_has_a_syllabus_and_ten_lessons_in_the_toc():
    import yaml

    toc = yaml.safe_load((pages.REPO / "_toc.yml").read_text())
    course_part = next(p for p in toc["parts"] if p["caption"] == "Course")
    assert [c["file"] for c in course_part["chapters"]] == ["book/course/syllabus"] + [lsn.doc for lsn in LESSONS]
    assert len(LESSONS) == 10
    running = next(p for p in toc["parts"] if p["caption"] == "Running the atlas")
    assert running["chapters"] == [{"file": "book/methods/scale_out"}]
    assert not any(c.get("file") == "book/methods/scale_out"
                   for p in toc["parts"] if p["caption"] != "Running the atlas" for c in p["chapters"])
    config = yaml.safe_load((pages.REPO / "_config.yml").read_text())["sphinx"]
    assert "sphinx_exercise" in config["extra_extensions"] and config["config"]["hide_solutions"] is False


EXERCISE = re.compile(r"^```\{exercise\}[^\n]*\n:label: (\S+)", flags=re.M)


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lsn: lsn.name)
def test_lesson_executed_and_every_solution_asserted(course_book, lesson):
    """The executed lesson is in the site; no cell errored; ≥ 3 sphinx-exercise exercises, each followed by its
    gated solution (solution-start LABEL, :class: dropdown, … solution-end) whose code cells executed and assert
    the answer they print; the two editions and the source are downloads linked under the title."""
    nb = nbformat.read(course_book["src"] / "book" / "course" / f"{lesson.name}.ipynb", as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    errors = [o for c in code for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, errors
    assert all(c.get("execution_count") is not None for c in code), "a code cell did not run"
    exercises, solutions, open_label = [], {}, None
    marks = re.compile(r"^```\{(exercise|solution-start|solution-end)\}[ ]?([^\n]*)\n(:label: (\S+)|:class: (\S+))?",
                       flags=re.M)
    for c in nb.cells:
        if c.cell_type == "markdown":
            for m in marks.finditer(c.source):
                kind = m.group(1)
                if kind == "exercise":
                    assert open_label is None and m.group(4), c.source[:80]
                    exercises.append(m.group(4))
                elif kind == "solution-start":  # the solution of the exercise just stated, behind a toggle
                    assert open_label is None and m.group(2) == exercises[-1] and m.group(5) == "dropdown"
                    open_label = m.group(2)
                else:
                    assert open_label is not None
                    open_label = None
        elif "solution" in c.metadata.get("tags", []):
            assert open_label is not None, c.source[:80]  # every solution cell sits in a gated solution
            solutions.setdefault(open_label, []).append(c)
    assert open_label is None and len(exercises) >= 3 and len(set(exercises)) == len(exercises), exercises
    for label in exercises:  # each solution executed (timed for the syllabus) and asserts what it prints
        assert any("assert " in c.source for c in solutions[label]), label
        assert all(c.metadata["papermill"]["duration"] is not None for c in solutions[label])
    # the take-home box sits right under the title and the downloads exist
    box = next(c for c in nb.cells if c.cell_type == "markdown" and "Take this lesson home" in c.source)
    assert f"atlaslib.pages.course {lesson.name}" in box.source
    downloads = course_book["src"] / "book" / "downloads"
    for name in (f"lesson-{lesson.name}.md", f"{lesson.name}-student.ipynb", f"{lesson.name}-instructor.ipynb"):
        assert (downloads / name).is_file() and name in box.source, name


def test_student_notebooks_hold_no_solution_and_instructor_notebooks_every_one(course_book):
    """Every downloadable student notebook: the exercises, and not one solution (no cell tagged solution, no
    gated block, none of a solution's code); the instructor notebook: every solution of the lesson."""
    downloads = course_book["src"] / "book" / "downloads"
    students = sorted(downloads.glob("*-student.ipynb"))
    assert [p.name for p in students] == sorted(f"{lsn.name}-student.ipynb" for lsn in LESSONS)
    for path in students:
        name = path.name[:-len("-student.ipynb")]
        student = nbformat.read(path, as_version=4)
        teacher = nbformat.read(downloads / f"{name}-instructor.ipynb", as_version=4)
        nbformat.validate(student)
        solutions = [c.source for c in teacher.cells if "solution" in c.metadata.get("tags", [])]
        assert len(solutions) >= 3, name
        assert not any("solution" in c.metadata.get("tags", []) for c in student.cells), name
        assert not any("solution-start" in c.source or "solution-end" in c.source for c in student.cells), name
        sources = {c.source for c in student.cells}
        assert not any(s in sources for s in solutions), name
        assert len(EXERCISE.findall("\n".join(c.source for c in student.cells))) == \
            len(EXERCISE.findall("\n".join(c.source for c in teacher.cells))) >= 3
        assert not any(c.get("outputs") for c in student.cells + teacher.cells if c.cell_type == "code")


def test_student_edition_of_a_lesson_source():
    text = (pages.REPO / "book" / "course" / "gates.md").read_text()
    student = pages.student_text(text)
    assert text.count("```{solution-start}") == 4 and "solution-start" not in student
    assert student.count("```{exercise}") == 4 and "clopper_pearson_upper(0, n_nonent)" in student
    assert "assert relaxed.gate.passed" in text and "assert relaxed.gate.passed" not in student


def test_reading_a_lesson_leaves_its_cells_as_they_are():
    """Reading a lesson (its parameters, solutions, local-only cells) and counting an executed one's solution time
    and words only look at the cells' tags: a cell without tags keeps none (its metadata, and so the lesson's cache
    key and downloads, are what the file says)."""
    import copy

    import jupytext

    path = pages.REPO / "book" / "course" / "gates.md"
    _, nb = pages.read_lesson(path)
    fresh = jupytext.read(path)
    assert [c.get("metadata", {}) for c in nb.cells] == [c.get("metadata", {}) for c in fresh.cells]
    assert any(c.cell_type == "code" and "tags" not in c.get("metadata", {}) for c in nb.cells)
    before = copy.deepcopy(fresh)
    pages.solution_seconds(fresh), pages.reading_words(path.read_text(), fresh)
    assert fresh == before


def test_syllabus_from_the_lessons_and_the_build(course_book):
    """Objectives, prerequisites, cards, agreement, reading time (words at the stated rate, counted here) and
    the solutions' run time (summed here from the executed notebooks' papermill durations)."""
    import math

    text = (course_book["src"] / "book" / "course" / "syllabus.md").read_text()
    assert pages.SYLLABUS_MARK not in text and f"at {pages.READING_WPM} words a minute" in text
    for lesson in LESSONS:
        src = lesson.path.read_text()
        nb = nbformat.read(course_book["src"] / "book" / "course" / f"{lesson.name}.ipynb", as_version=4)
        words = pages.reading_words(src, nb)
        assert pages.reading_words(src) + 50 < words < 3000, (lesson.name, words)  # the numbers' sentences count
        secs = sum(c.metadata["papermill"]["duration"] for c in nb.cells
                   if c.cell_type == "code" and "solution" in c.metadata.get("tags", []))
        row = next(line for line in text.splitlines() if line.startswith("| ") and f"<{lesson.name}>`" in line)
        assert f"| {math.ceil(words / pages.READING_WPM)} min ({words:,} words) | {src.count('```{exercise}')} | " \
               f"{secs:.1f} s | none |" in row, row
        for objective in lesson.meta["objectives"]:
            assert objective.split()[0] in text
    assert text.count("**Agreement needed:** none.") == len(LESSONS)
    assert "[NLI negation challenge](../cards/nli_negation.md)" in text


def test_reading_words_counts_prose_only():
    text = "---\njupytext: {}\n---\n\n# Title here\n\nOne two three.\n\n```{code-cell} python\nx = 1\n```\n\n" \
           "```{exercise}\n:label: a\n\nFour five.\n```\n\n```{solution-start} a\n:class: dropdown\n```\n\n" \
           "Hidden words here.\n\n```{solution-end}\n```\n"
    assert pages.reading_words(text) == 2 + 3 + 2
    executed = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x", outputs=[nbformat.v4.new_output(
        "display_data", data={"text/markdown": "Six seven **eight**.", "text/plain": "<Markdown>"})])])
    assert pages.reading_words(text, executed) == 7 + 3


def test_local_only_section_runs_in_a_local_build_and_is_left_out_without_its_cells(course_book, tmp_path):
    """The interval lesson's NegEx section runs in a local build that has negspacy's NegEx cells; without them it
    is left out with a note naming them (and nothing else is)."""
    nb = nbformat.read(course_book["src"] / "book" / "course" / "intervals.ipynb", as_version=4)
    local = [c for c in nb.cells if "local-only" in c.metadata.get("tags", [])]
    assert len(local) == 2 and all(c.get("execution_count") for c in local if c.cell_type == "code")
    assert "atlas-full-v1" in json.dumps(local[1]["outputs"])
    stripped = pages.read_lesson(pages.REPO / "book" / "course" / "intervals.md")[1]
    n_cells = len(stripped.cells)
    assert pages._strip_local_only(stripped, "it reads result cells this build does not have.") == 2
    assert len(stripped.cells) == n_cells - 1
    assert sum("left out of this build" in c.source for c in stripped.cells) == 1


def test_learning_path_lists_every_lesson_with_its_status(course_book):
    text = (course_book["src"] / "book" / "start_here.md").read_text()
    assert pages.PATH_MARK not in text
    for lesson in LESSONS:
        assert f"{{doc}}`{lesson.title} <course/{lesson.name}>`" in text
    assert text.count("| executed |") == len(LESSONS)
    assert "quarter of an hour" not in text and "{doc}`syllabus <course/syllabus>`" in text


def test_card_pages_offer_their_notebook(course_book):
    for card in ("nli_negation", "negex"):
        page = (course_book["src"] / "book" / "cards" / f"{card}.md").read_text()
        assert "Run this card yourself" in page and f"--card {card}" in page
        md = course_book["src"] / "book" / "downloads" / f"card-{card}.md"
        text = md.read_text()
        assert text.startswith("---\njupytext:") and ":tags: [parameters]" in text  # the card notebook's source
        fresh = nbformat.read(md.with_suffix(".ipynb"), as_version=4)
        assert fresh.cells and not any(c.get("outputs") for c in fresh.cells if c.cell_type == "code")


def test_rebuild_reuses_executed_lessons(course_book):
    """Nothing changed: every lesson comes from the course cache (no kernel is started)."""
    paths = course_book["paths"]
    src = paths.src(False)
    before = {p.name: p.stat().st_mtime_ns for p in (paths.build / "course-cache").glob("*.ipynb")}
    book.render_site(paths, cards=[get_card(c) for c in COURSE_CARDS])
    after = {p.name: p.stat().st_mtime_ns for p in (paths.build / "course-cache").glob("*.ipynb")}
    assert before == after and len(before) == len(LESSONS)
    assert all((src / "book" / "course" / f"{lsn.name}.ipynb").is_file() for lsn in LESSONS)


def test_cache_key_ignores_cell_ids(tmp_path):
    """jupytext gives every cell a random id on each read: the key must not see them."""
    path = pages.REPO / "book" / "course" / "gates.md"
    a, b = pages.read_lesson(path)[1], pages.read_lesson(path)[1]
    assert [c.id for c in a.cells] != [c.id for c in b.cells]
    assert pages.cache_key(pages._content(a), (), tmp_path) == pages.cache_key(pages._content(b), (), tmp_path)
    b.cells[-1].source += "\n"
    assert pages.cache_key(pages._content(a), (), tmp_path) != pages.cache_key(pages._content(b), (), tmp_path)


def test_the_take_home_command_runs_a_lesson(course_book, tmp_path):
    """``python -m atlaslib.pages.course edges`` from a clone: the cells it reads exist, so it only executes."""
    out = pages.run_local("edges", results_dir=course_book["paths"].results, out=tmp_path / "edges.ipynb",
                          log=lambda *a: None)
    nb = nbformat.read(out, as_version=4)
    assert all(c.get("execution_count") for c in nb.cells if c.cell_type == "code")
    with pytest.raises(pages.LessonError, match="no lesson 'nope'; expected one of intervals, edges"):
        pages.run_local("nope")


def test_publish_executes_every_lesson_and_withholds_none(course_book, monkeypatch):
    """A publish build: every lesson is executed and published whole (none uses a card the build withholds: no
    stub, no withheld entry, no section left out but the interval lesson's local-only NegEx section), the NegEx
    card's notebook is not offered, and no course page or download mentions NegEx kit data. After the local
    build, only the lessons with a local-only section execute again: the others are the same notebooks on the
    same cells, served from the lessons' cache."""
    from atlaslib.pages import course

    paths = course_book["paths"]
    executed, execute_all = [], course.execute_all

    def recording(todo, **kwargs):
        executed.extend(name for name, _ in todo)
        return execute_all(todo, **kwargs)

    monkeypatch.setattr(course, "execute_all", recording)
    src, withheld = book.render_site(paths, publish=True, cards=[get_card(c) for c in COURSE_CARDS])
    local_only = sorted(lsn.name for lsn in LESSONS if lsn.local_only)
    assert sorted(executed) == local_only == ["intervals"]
    assert not any(w.startswith("lesson `") for w, _ in withheld), withheld
    for lesson in LESSONS:
        assert "negex" not in lesson.uses, lesson.name
        assert not any(ref.card == "negex" for ref in lesson.requires), lesson.name
        nb = nbformat.read(src / "book" / "course" / f"{lesson.name}.ipynb", as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert code and all(c.get("execution_count") is not None for c in code), lesson.name
        assert not any(o.get("output_type") == "error" for c in code for o in c.get("outputs", [])), lesson.name
        source = "\n".join(c.source for c in code)
        assert '"negex"' not in source and "import negex" not in source, lesson.name  # reads no NegEx cell or data
        assert not any("left out of this build" in c.source for c in nb.cells if lesson.name != "intervals")
        assert not any("left out of the published book" in c.source for c in nb.cells), lesson.name
        outputs = json.dumps([c.get("outputs", []) for c in code])
        assert "negspacy-negex-kit" not in outputs and "negex-" not in outputs, lesson.name
    downloads = sorted(p.name for p in (src / "book" / "downloads").iterdir())
    assert not any("negex" in d for d in downloads), downloads
    assert len([d for d in downloads if d.endswith("-student.ipynb")]) == len(LESSONS)
    for name in downloads:
        if name.startswith("lesson-"):
            assert "negspacy-negex-kit" not in (src / "book" / "downloads" / name).read_text(), name
    path = (src / "book" / "start_here.md").read_text()
    assert "withheld from the published book" not in path and "cards/negex.md" not in path
    assert path.count("| executed |") == len(LESSONS)
    import yaml

    toc = yaml.safe_load((src / "_toc.yml").read_text())
    part = next(p for p in toc["parts"] if p["caption"] == "Course")
    assert [c["file"] for c in part["chapters"]] == ["book/course/syllabus"] + [lsn.doc for lsn in LESSONS]


# -- the machinery on tiny lessons (one kernel each) --------------------------------------------------------

TINY = myst_header("atlas:\n  uses: [nli_negation]\n  requires: {requires}\n") + """
# A tiny lesson

```{{code-cell}} python
:tags: [parameters]
results_dir = "results"
data_dir = None
```

```{{exercise}}
:label: tiny-ex1

Two and two.
```

```{{solution-start}} tiny-ex1
:class: dropdown
```

```{{code-cell}} python
:tags: [solution]
answer = 2 + 2
assert answer == {expected}
```

```{{solution-end}}
```
"""


def _render_course(src: Path, paths, cards) -> list[str]:
    """The lessons rendered as the book's build renders them (:func:`atlaslib.book.render_site`): the course
    started, then finished."""
    return pages.finish_course(pages.start_course(src, paths, False, cards), None)


def _tiny_site(tmp_path, requires="[]", expected=4) -> tuple[Path, book.BuildPaths]:
    src = tmp_path / "src"
    (src / "book" / "course").mkdir(parents=True)
    (src / "book" / "course" / "tiny.md").write_text(TINY.format(requires=requires, expected=expected))
    paths = book.BuildPaths(results=tmp_path / "results", runs=tmp_path / "runs", build=tmp_path / "_build")
    return src, paths


def test_a_wrong_answer_stops_the_build_and_nothing_renders(tmp_path):
    src, paths = _tiny_site(tmp_path, expected=5)
    with pytest.raises(pages.LessonFailed, match=r"lesson tiny failed in cell 4: AssertionError") as err:
        _render_course(src, paths, [get_card("nli_negation")])
    assert not (src / "book" / "course" / "tiny.ipynb").exists()
    assert Path(err.value.kept).is_file()  # the failed notebook is kept for reading
    assert not (paths.build / "course-cache" / "tiny.ipynb").exists()


def test_a_lesson_without_its_cells_is_a_page_saying_so(tmp_path):
    src, paths = _tiny_site(tmp_path, requires="[nli_negation/builtin-v1/always-abstain/zero_shot]")
    docs = _render_course(src, paths, [get_card("nli_negation")])
    text = (src / "book" / "course" / "tiny.md").read_text()
    assert docs == ["book/course/tiny"]
    assert "not run in this build" in text and "`nli_negation/builtin-v1/always-abstain/zero_shot`" in text
    assert "atlas run --card nli_negation --model always-abstain --protocol zero_shot --version builtin-v1" in text
    assert "code-cell" not in text


def test_a_lesson_whose_card_is_not_in_the_build_is_not_run(tmp_path):
    src, paths = _tiny_site(tmp_path)
    _render_course(src, paths, [get_card("negex")])
    text = (src / "book" / "course" / "tiny.md").read_text()
    assert "works on the NLI negation challenge card, which this build does not include" in text


def test_lesson_files_are_checked(tmp_path):
    bad = tmp_path / "bad.md"
    bad.write_text(TINY.format(requires="[]", expected=4).replace(":tags: [parameters]\n", ""))
    with pytest.raises(pages.LessonError, match="bad.md: no code cell is tagged 'parameters'"):
        pages.read_lesson(bad)
    bad.write_text(TINY.format(requires="[x/y]", expected=4))
    with pytest.raises(pages.LessonError, match="'x/y' is not card/version/model/protocol"):
        pages.read_lesson(bad)
    bad.write_text(TINY.format(requires="[]", expected=4).replace("```{solution-end}\n```\n", ""))
    with pytest.raises(pages.LessonError, match="bad.md: 1 solution-start but 0 solution-end"):
        pages.read_lesson(bad)
    bad.write_text(TINY.format(requires="[]", expected=4).replace("```{solution-end}\n```\n", "")
                   .replace("```{solution-start} tiny-ex1\n:class: dropdown\n```\n", ""))
    with pytest.raises(pages.LessonError, match="tagged 'solution' sits outside a solution-start"):
        pages.read_lesson(bad)
    assert pages.main([]) == 2


# -- atlaslib.course against independent references -------------------------------------------------------

def test_bootstrap_by_hand_equals_the_library_bit_for_bit():
    x = (np.arange(57) % 3 == 0).astype(float)
    a, b = course.bootstrap_by_hand(x, 300, seed=7), course.library_bootstrap(x, 300, seed=7)
    assert np.array_equal(a["resamples"], b["resamples"]) and a["value"] == pytest.approx(x.mean())
    assert (a["ci_low"], a["ci_high"]) == (b["ci_low"], b["ci_high"])
    assert (a["ci_low"], a["ci_high"]) == tuple(np.quantile(a["resamples"], [0.025, 0.975]))


def test_normal_width_and_nested_subsets():
    assert course.normal_width(0.5, 100) == pytest.approx(2 * 1.959964 * 0.05, rel=1e-6)
    ids = [f"i{k}" for k in range(40)]
    subsets = course.nested_subsets(ids, [5, 20, 40])
    assert set(subsets[5]) <= set(subsets[20]) <= set(subsets[40]) == set(ids)
    with pytest.raises(ValueError, match="size 41 exceeds the 40 items"):
        course.nested_subsets(ids, [41])


def test_cell_widths_and_their_figure():
    cells = [{"version": v, "model": "m", "split": {"n_test": n},
              "metrics": {"f1": {"value": 0.9, "ci_low": 0.9 - w / 2, "ci_high": 0.9 + w / 2}}}
             for v, n, w in (("atlas-n100-v1", 100, 0.2), ("atlas-full-v1", 1600, 0.05))]
    table = course.cell_interval_widths(cells, "f1")
    assert table["width"].tolist() == pytest.approx([0.2, 0.05]) and table["n"].tolist() == [100, 1600]
    fig = course.plot_cell_widths(table)
    points, curve = fig.axes[0].lines[:2]
    assert list(points.get_xdata()) == [100, 1600]
    assert curve.get_ydata()[-1] == pytest.approx(0.05)  # 0.2 · √(100/1600): exactly the 1/√n law here
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_ideal_bootstrap_and_exact_coverage_hand_cases():
    assert course.ideal_bootstrap_interval(21, 21) == (1.0, 1.0)
    assert course.ideal_bootstrap_interval(0, 30) == (0.0, 0.0)
    # one item: Clopper–Pearson gives [0, 0.975] for k=0 and [0.025, 1] for k=1, so p = 0.5 is always covered;
    # the bootstrap gives [0, 0] and [1, 1], so it never is
    assert course.coverage("clopper-pearson", 0.5, 1) == pytest.approx(1.0)
    assert course.coverage("bootstrap", 0.5, 1) == 0.0
    # n = 2, p = 0.3: Clopper–Pearson misses p only for k = 2 (lower bound 0.158 < 0.3: covered too) -> 1
    lo2 = intervals.clopper_pearson(2, 2)[0]
    assert lo2 == pytest.approx(math.sqrt(0.025)) and course.coverage("clopper-pearson", 0.3, 2) == pytest.approx(1.0)
    # bootstrap at n = 2: k=1 gives Binomial(2, ½) quantiles [0, 1] -> covers; k=0, k=2 collapse -> P(K=1)
    assert course.coverage("bootstrap", 0.3, 2) == pytest.approx(binom.pmf(1, 2, 0.3))
    with pytest.raises(ValueError, match="method must be"):
        course.coverage("wald", 0.3, 2)


def test_closed_form_sample_sizes():
    assert course.smallest_n_all_correct(0.95) == 72  # ln(0.025)/ln(0.95) = 71.92
    assert intervals.clopper_pearson(72, 72)[0] >= 0.95 > intervals.clopper_pearson(71, 71)[0]
    # the card's bound is one-sided: ln(0.05)/ln(0.99) = 298.07 (the two-sided bound would need 368)
    assert course.cases_for_zero_upper_bound(0.01) == 299
    assert intervals.clopper_pearson_upper(0, 299) <= 0.01 < intervals.clopper_pearson_upper(0, 298)
    assert intervals.clopper_pearson(0, 299)[1] > 0.01  # the two-sided upper end is another, larger bound
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        course.smallest_n_all_correct(1.0)


def _cell(model, preds):
    return {"card": "nli_negation", "version": "builtin-v1", "model": model, "protocol": "zero_shot",
            "status": "ok", "metrics": {}, "predictions": preds}


def test_paired_interval_and_mcnemar_match_the_comparison_library():
    rng = np.random.default_rng(3)
    gold = rng.choice(["entailment", "neutral", "contradiction"], size=80)
    pa = np.where(rng.random(80) < 0.7, gold, "neutral")
    pb = np.where(rng.random(80) < 0.5, gold, "entailment")
    cells = [_cell(m, [{"item_id": f"c{i}", "gold": g, "pred": p} for i, (g, p) in enumerate(zip(gold, pr))])
             for m, pr in (("a", pa), ("b", pb))]
    pairs = course.paired_frame(*cells)
    table = course.agreement_table(pairs, ("a", "b"))
    b, c = int(table.loc["right", "wrong"]), int(table.loc["wrong", "right"])
    assert b == int(np.sum((pa == gold) & (pb != gold))) and c == int(np.sum((pa != gold) & (pb == gold)))
    row = compare_cells(cells).query("metric == 'aggregate_accuracy'").iloc[0]
    assert (row["b"], row["c"]) == (b, c)
    assert row["p_mcnemar"] == pytest.approx(binomtest(b, b + c, 0.5).pvalue)
    assert course.paired_difference_ci(pairs) == pytest.approx((row["ci_low"], row["ci_high"]))
    with pytest.raises(ValueError, match="not scored on the same items"):
        course.paired_frame(cells[0], _cell("c", cells[1]["predictions"][1:]))


def test_cluster_loop_matches_the_cluster_interval():
    groups = np.repeat(np.arange(12), 5)
    x = (np.random.default_rng(1).random(60) < np.repeat(np.linspace(0.1, 0.9, 12), 5)).astype(int)
    lib = intervals.cluster_proportion_ci(x, groups, n_resamples=200, seed=5)
    assert course.cluster_draws_by_hand(x, groups, 200, seed=5) == pytest.approx((lib["ci_low"], lib["ci_high"]))
    frame = pd.DataFrame({"g": [1, 1, 2, 2, 3, 3], "correct": [True, True, True, False, False, False]})
    assert course.pure_cluster_share(frame, "g") == pytest.approx(4 / 6)


def test_leak_flags_and_folds_on_a_hand_built_kit():
    import hashlib

    assert course.fold_of("nlineg-simple-001", 5, 11) == \
        int(hashlib.sha256(b"11:nlineg-simple-001").hexdigest(), 16) % 5
    items = pd.DataFrame({"template": ["s1", "s1", "s2", "s3", "s3"]})
    assert course.leaked(items, [0, 1, 2, 3, 3], "template").tolist() == [True, True, False, False, False]


def test_leakage_experiment_on_a_templated_toy_corpus():
    """Two schemes on the same items: out-of-fold predictions checked against a loop over sklearn fits, the group
    folds group-disjoint, the leak flags by hand, and the pivot's gain equal to the difference of the scores."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.metrics import accuracy_score
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.pipeline import make_pipeline

    templates = {"t1": ("no {x} seen", "yes"), "t2": ("{x} is present", "no"), "t3": ("{x} was ruled out", "yes"),
                 "t4": ("signs of {x}", "no"), "t5": ("denies {x}", "yes"), "t6": ("reports {x}", "no")}
    findings = ("fever", "cough", "rash", "nausea", "headache")
    rows = [{"item_id": f"{t}-{x}", "template": t, "text": pat.format(x=x), "label": lab}
            for t, (pat, lab) in templates.items() for x in findings]
    items = pd.DataFrame(rows)
    exp = course.leakage_experiment(items, "template", group_name="templates", k=3, seed=5)
    per_item, per_group = exp["schemes"]
    assert (per_item, per_group) == ("items (templates leak)", "templates (group-disjoint)")
    folds = exp["folds"][per_group]
    by_template = pd.Series(folds).groupby(items["template"]).nunique()
    assert (by_template == 1).all()  # one fold per template
    item_folds = np.asarray(exp["folds"][per_item])
    ref = np.empty(len(items), dtype=object)
    for f in np.unique(item_folds):  # the nearest-neighbour's out-of-fold answers, fitted here
        m = item_folds == f
        model = make_pipeline(TfidfVectorizer(ngram_range=(1, 2), use_idf=False),
                              KNeighborsClassifier(n_neighbors=1, metric="cosine")).fit(items["text"][~m],
                                                                                        items["label"][~m])
        ref[m] = model.predict(items["text"][m])
    assert list(exp["predictions"][("1-nearest neighbour", per_item)]) == list(ref)
    mates = [any(item_folds[j] != item_folds[i] for j in np.flatnonzero(items["template"] == t))
             for i, t in enumerate(items["template"])]
    assert exp["leaked"].tolist() == mates
    scores = exp["scores"].set_index(["learner", "folds drawn per"])
    for (name, scheme), p in exp["predictions"].items():
        assert scores.loc[(name, scheme), "accuracy"] == pytest.approx(accuracy_score(items["label"], p))
    pivot = course.leakage_pivot(exp, "accuracy")
    assert list(pivot.columns) == [per_item, per_group, "gain from leakage"]
    assert (pivot["gain from leakage"] == pivot[per_item] - pivot[per_group]).all()
    # per value of a column: each scheme's share right among that value's items, by hand
    by = course.leakage_by(exp, items["label"], "1-nearest neighbour", items["template"])
    assert list(by.index) == list(dict.fromkeys(items["template"]))
    for t in by.index:
        m = (items["template"] == t).to_numpy()
        for scheme in (per_item, per_group):
            right = exp["predictions"][("1-nearest neighbour", scheme)][m] == items["label"].to_numpy()[m]
            assert by.loc[t, scheme] == pytest.approx(right.mean())
        assert by.loc[t, "gain from leakage"] == pytest.approx(by.loc[t, per_item] - by.loc[t, per_group])


def test_paired_gain_interval():
    y = np.array([1, 0, 1, 0, 1, 0, 0, 0])
    same = course.paired_gain_ci(y, y, y, n_resamples=50)
    assert same == {"value": 0.0, "ci_low": 0.0, "ci_high": 0.0}
    worse = np.array([0, 0, 1, 0, 1, 0, 0, 1])
    from sklearn.metrics import f1_score

    g = course.paired_gain_ci(y, y, worse, strata=y, n_resamples=200)
    assert g["value"] == pytest.approx(1 - f1_score(y, worse, average="macro"))
    assert 0 <= g["ci_low"] <= g["value"] <= g["ci_high"]
    # labels as text, accuracy, cases resampled (no strata): the interval is the paired bootstrap's by hand
    gold = np.array(["entailment", "neutral", "contradiction"] * 10)
    a = gold.copy()
    b = np.where(np.arange(30) % 4 == 0, "neutral", gold)
    acc = course.paired_gain_ci(gold, a, b, metric=course.accuracy, n_resamples=300, seed=9)
    assert acc["value"] == pytest.approx(np.mean(a == gold) - np.mean(b == gold))
    idx = np.random.default_rng(9).integers(0, 30, size=(300, 30))
    diffs = (a[idx] == gold[idx]).mean(1) - (b[idx] == gold[idx]).mean(1)
    assert (acc["ci_low"], acc["ci_high"]) == pytest.approx(tuple(np.quantile(diffs, [0.025, 0.975])))


def test_confidence_frame_and_its_calibration_by_hand():
    """Top-label calibration from a cell's label probabilities: p is the answered label's probability, y whether
    the answer is right; Brier and ECE checked against sklearn and a loop; a cell without probabilities is
    refused by name."""
    from sklearn.metrics import brier_score_loss

    preds = [{"item_id": "c1", "pattern": "simple", "gold": "entailment", "pred": "entailment",
              "scores": {"entailment": 0.7, "neutral": 0.2, "contradiction": 0.1}},
             {"item_id": "c2", "pattern": "simple", "gold": "neutral", "pred": "contradiction",
              "scores": {"entailment": 0.1, "neutral": 0.35, "contradiction": 0.55}},
             {"item_id": "c3", "pattern": "double", "gold": "contradiction", "pred": "contradiction",
              "scores": {"entailment": 0.05, "neutral": 0.05, "contradiction": 0.9}},
             {"item_id": "c4", "pattern": "double", "gold": "entailment", "pred": "neutral",
              "scores": {"entailment": 0.3, "neutral": 0.4, "contradiction": 0.3}}]
    f = course.confidence_frame(_cell("lm", preds))
    assert f["p"].tolist() == [0.7, 0.55, 0.9, 0.4] and f["y"].tolist() == [1, 0, 1, 0]
    assert calibration.brier(f["y"], f["p"]) == pytest.approx(brier_score_loss(f["y"], f["p"]))
    # bins 0.3–0.4 (0.4), 0.5–0.6 (0.55), 0.6–0.7 (0.7), 0.8–0.9 (0.9): one item each, |y − p| averaged
    assert calibration.ece(f["y"], f["p"], binning=course.BINNING) == pytest.approx((0.3 + 0.55 + 0.4 + 0.1) / 4)
    by = course.confidence_by_group(f, "pattern")
    assert by.loc["simple", "accuracy"] == 0.5 and by.loc["double", "mean_confidence"] == pytest.approx(0.65)
    assert by.loc["double", "gap"] == pytest.approx(0.15)
    with pytest.raises(ValueError, match="rules \\(zero_shot\\): the cell holds no label probabilities"):
        course.confidence_frame(_cell("rules", [dict(preds[0], scores=None)]))


def test_constant_predictors_stay_below_the_floor():
    from atlaslib.cards import nli_negation as nli

    acc = course.constant_predictor_accuracy(nli.default_nli_negation_cases())
    assert max(acc.values()) == pytest.approx(75 / 207)
    assert max(acc.values()) < nli.DEFAULT_MINIMUM_AGGREGATE_ACCURACY
    assert acc["always abstain"] == 0.0


def test_load_cell_names_the_missing_file_and_command(tmp_path):
    with pytest.raises(FileNotFoundError, match="atlas run --card nli_negation --model m --protocol zero_shot"):
        course.load_cell(tmp_path, "nli_negation", "builtin-v1", "m", "zero_shot")
    path = results.cell_path(tmp_path, "nli_negation", "builtin-v1", "m", "zero_shot")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"card": "nli_negation", "version": "builtin-v1", "model": "m", "protocol": "zero_shot",
                                "metrics": {}, "status": "not_run", "reason": "weights unavailable"}))
    with pytest.raises(ValueError, match="did not happen \\(weights unavailable\\)"):
        course.load_cell(tmp_path, "nli_negation", "builtin-v1", "m", "zero_shot")


def test_gate_rows_show_the_cards_one_sided_bound():
    """The lesson's bound is the one the card certifies with: one-sided 95 % Clopper–Pearson, Beta(0.95; k+1,
    n−k), computed here with scipy; never the two-sided interval's upper end."""
    from scipy.stats import beta

    def cell(model, k, n):   # k false entailments among n neutral cases, one entailing case answered right
        preds = [{"item_id": f"c{i}", "pattern": "simple", "gold": "neutral",
                  "pred": "entailment" if i < k else "neutral"} for i in range(n)]
        preds.append({"item_id": "e", "pattern": "simple", "gold": "entailment", "pred": "entailment"})
        return {"model": model, "predictions": preds, "split": {"hash": "0" * 64}}

    rows = course.gate_rows([cell("a", 39, 132), cell("b", 0, 132)])
    bound = rows["FER upper bound (one-sided 95 %)"]
    assert bound["a"] == pytest.approx(beta.ppf(0.95, 40, 93))
    assert bound["b"] == pytest.approx(1 - 0.05 ** (1 / 132)) and bound["b"] < 1 - 0.025 ** (1 / 132)


# -- graded exercises: atlas course check against independent references ------------------------------------

def _reference_answers(kind: str, items: pd.DataFrame, seed: int) -> dict:
    """The graded answers computed without atlaslib: scipy's distributions and tests, hashlib and plain loops."""
    import hashlib

    from scipy.stats import beta

    y = [any(t.startswith("B-") for t in tags) for tags in items["tags"]]
    k, n = sum(y), len(y)
    if kind == "interval":  # the percentile bootstrap with infinitely many resamples: binomial quantiles
        return {"q1": k / n, "q2": binom.ppf(0.025, n, k / n) / n, "q3": binom.ppf(0.975, n, k / n) / n}
    if kind == "edge":
        lo = beta.ppf(0.025, k, n - k + 1) if k else 0.0
        hi = beta.ppf(0.975, k + 1, n - k) if k < n else 1.0
        return {"q1": k, "q2": lo, "q3": hi}
    docs: dict = {}
    for d, v in zip(items["document"], y):
        docs.setdefault(d, []).append(v)
    if kind == "cluster":
        pure = sum(len(v) for v in docs.values() if all(v) or not any(v))
        return {"q1": len(docs), "q2": pure / n, "q3": sum(len(v) for v in docs.values() if len(v) > 1) / n}
    digit = [any(ch.isdigit() for w in words for ch in w) for words in items["words"]]
    if kind == "paired":
        long_ = [len(words) >= 12 for words in items["words"]]
        b = sum(a == g and d != g for a, d, g in zip(long_, digit, y))
        c = sum(a != g and d == g for a, d, g in zip(long_, digit, y))
        return {"q1": b, "q2": c, "q3": binomtest(b, b + c, 0.5).pvalue if b + c else 1.0}
    if kind == "leakage":
        fold = [int(hashlib.sha256(f"{seed}:{i}".encode()).hexdigest(), 16) % 5 for i in items["item_id"]]
        folds: dict = {}
        for d, f in zip(items["document"], fold):
            folds.setdefault(d, set()).add(f)
        return {"q1": sum(len(folds[d]) > 1 for d in items["document"]) / n,
                "q2": sum(len(f) > 1 for f in folds.values())}
    if kind == "spans":  # seqeval on the gold tags and the first-word-only tagger
        from seqeval.metrics import f1_score
        from seqeval.scheme import IOB2

        gold = [list(t) for t in items["tags"]]
        first = [["O" if t.startswith("I-") else t for t in tags] for tags in gold]
        return {"q1": sum(t.startswith("B-") for tags in gold for t in tags),
                "q2": f1_score(gold, first, mode="strict", scheme=IOB2),
                "q3": f1_score(gold, first, mode="strict", scheme=IOB2, average="macro")}
    if kind == "holm":
        n_words = [len(words) for words in items["words"]]
        rules = {"A": [k >= 12 for k in n_words], "B": digit, "C": [k >= 20 for k in n_words]}
        right = {r: [v == g for v, g in zip(pred, y)] for r, pred in rules.items()}
        ps = []
        for i, j in (("A", "B"), ("A", "C"), ("B", "C")):
            b = sum(x and not z for x, z in zip(right[i], right[j]))
            c = sum(z and not x for x, z in zip(right[i], right[j]))
            ps.append(binomtest(b, b + c, 0.5).pvalue if b + c else 1.0)
        order = sorted(range(3), key=lambda k: ps[k])  # Holm by hand: (3 − rank)·p, running maximum
        adjusted, running = [0.0] * 3, 0.0
        for rank, k in enumerate(order):
            running = max(running, min(1.0, (3 - rank) * ps[k]))
            adjusted[k] = running
        return dict(zip(("q1", "q2", "q3"), adjusted))
    if kind == "gate":
        no_test = ["B-test" not in tags for tags in items["tags"]]
        fp = sum(d and nt for d, nt in zip(digit, no_test))
        return {"q1": fp, "q2": sum(no_test), "q3": beta.ppf(0.95, fp + 1, sum(no_test) - fp)}
    raise AssertionError(kind)


GRADED_SEED = 2024


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lsn: lsn.name)
def test_course_check_says_right_and_wrong(lesson, tmp_path, data_dir, capsys):
    """A right answer file (the references above) passes every question; a wrong one (each answer moved past its
    tolerance) fails every one; the items are train-pool sentences no lesson shows."""
    from atlaslib import cli
    from atlaslib.external.tasks import load_split

    spec = course.graded_spec(lesson.name)
    items = course.graded_items(spec["card"], spec["version"], GRADED_SEED, spec["n"], data_dir)
    pool = load_split(spec["card"], spec["version"], "train", data_dir)
    test = load_split(spec["card"], spec["version"], "test", data_dir)
    assert len(items) == spec["n"] and set(items["item_id"]) <= set(pool.ids) and not set(items["item_id"]) & set(test.ids)
    ref = _reference_answers(spec["kind"], items, GRADED_SEED)
    tolerance = {q: tol for q, _, tol in course.GRADED_QUESTIONS[spec["kind"]]}
    right, wrong = tmp_path / "right.json", tmp_path / "wrong.json"
    right.write_text(json.dumps({"seed": GRADED_SEED, "answers": {q: float(v) for q, v in ref.items()}}))
    wrong.write_text(json.dumps({"seed": GRADED_SEED,
                                 "answers": {q: float(v) + 2 * tolerance[q] + 0.01 + (tolerance[q] == 0)
                                             for q, v in ref.items()}}))
    args = ["--data-dir", str(data_dir)] if data_dir else []
    assert cli.main(["course", "check", lesson.name, str(right), *args]) == 0
    out = capsys.readouterr().out
    assert out.count(": right (") == len(ref) and f"{len(ref)} of {len(ref)} right" in out, out
    assert cli.main(["course", "check", lesson.name, str(wrong), *args]) == 1
    out = capsys.readouterr().out
    assert out.count(": wrong (") == len(ref) and f"0 of {len(ref)} right" in out, out


def test_course_check_names_bad_input(tmp_path, capsys):
    from atlaslib import cli

    bad = tmp_path / "answers.json"
    bad.write_text("{not json")
    assert cli.main(["course", "check", "edges", str(bad)]) == 2
    assert f"{bad}: not valid JSON (line 1" in capsys.readouterr().err
    bad.write_text(json.dumps({"seed": 1, "answers": {"q9": 1}}))
    assert cli.main(["course", "check", "edges", str(bad)]) == 2
    assert "unknown question(s) q9; lesson edges asks q1, q2, q3" in capsys.readouterr().err
    bad.write_text(json.dumps({"answers": {"q1": 1}}))
    assert cli.main(["course", "check", "edges", str(bad)]) == 2
    assert '"seed" must be the integer your instructor gave' in capsys.readouterr().err
    assert cli.main(["course", "check", "nope", str(bad)]) == 2
    assert "no lesson 'nope' with a graded exercise; expected one of calibration, clusters, comparing" in capsys.readouterr().err


def test_span_lesson_scores_say_undefined_not_zero():
    """The span lesson's strict and lenient scores follow the atlas's zero-division rule: NaN where a denominator
    is 0 (seqeval warns there and writes 0), 0 where it is not; strict equals seqeval wherever defined."""
    from seqeval.metrics import f1_score, precision_score, recall_score
    from sklearn.exceptions import UndefinedMetricWarning

    gold, nothing = [["B-problem", "I-problem", "O", "B-test"]], [["O", "O", "O", "O"]]
    s, lenient = course.strict_prf(gold, nothing), course.lenient_prf(gold, nothing)
    for d in (s, lenient):   # no mention predicted: precision undefined; recall 0/2 and F1 defined, 0
        assert math.isnan(d["precision"]) and (d["recall"], d["f1"]) == (0.0, 0.0)
    with pytest.warns(UndefinedMetricWarning):
        assert precision_score(gold, nothing) == 0.0
    assert (recall_score(gold, nothing), f1_score(gold, nothing)) == (0.0, 0.0)
    empty = [["O", "O"]]
    for d in (course.strict_prf(empty, empty), course.lenient_prf(empty, empty)):
        assert all(math.isnan(d[k]) for k in ("precision", "recall", "f1"))
    only_pred = course.lenient_prf(empty, [["B-test", "O"]])      # nothing in gold: recall undefined, F1 0
    assert only_pred["precision"] == 0.0 and math.isnan(only_pred["recall"]) and only_pred["f1"] == 0.0
    g, p = [["B-problem", "I-problem", "O", "B-test"]], [["O", "B-problem", "O", "B-test"]]
    s = course.strict_prf(g, p)           # 1 of 2 predicted right, 1 of 2 found
    assert (s["precision"], s["recall"], s["f1"]) == (0.5, 0.5, f1_score(g, p))
