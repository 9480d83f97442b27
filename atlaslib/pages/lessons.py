"""A lesson as the course reads it: a MyST text notebook ``book/course/<name>.md`` whose first code cell is tagged
``parameters`` (defining ``results_dir`` and ``data_dir``) and whose front matter says which cards it uses and
which result cells it reads (:class:`Lesson`, :class:`CellRef`); :func:`read_lesson` checks it and names the file
and what is wrong (:class:`LessonError`). :mod:`atlaslib.pages.lesson_runs` executes lessons and
:mod:`atlaslib.pages.course` turns them into site pages.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..notebook import REPO

LESSON_DIR = Path("book") / "course"
SYLLABUS = "syllabus"                    # book/course/syllabus.md: a page of the Course part, not a lesson
SOLUTION_TAG = "solution"
#: a sphinx-exercise gated solution: ```{solution-start} LABEL ... ``` then its cells, then ```{solution-end}```
GATED_SOLUTION = re.compile(r"```\{solution-start\}.*?```\{solution-end\}[ \t]*\n```[ \t]*\n?", flags=re.S)
LOCAL_ONLY_TAG = "local-only"


class LessonError(ValueError):
    """A lesson file is not a valid lesson (no parameters cell, bad front matter)."""


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
        from ..results.store import cell_path

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


def student_text(md_text: str) -> str:
    """The student edition of a lesson's MyST source: every sphinx-exercise gated solution (``solution-start``
    to ``solution-end``, the code cells between included) left out; the exercises stay. The same blocks the
    book's ``hide_solutions`` option leaves out of a page."""
    return GATED_SOLUTION.sub("", md_text)
