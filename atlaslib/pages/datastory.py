"""A card's data story: the sections of its notebook that do not depend on the model (data audit, split
construction, caveats, a synthetic corpus preview), executed once per (card, split version) per build and
shown once, as the card's page "Data: <version>"; run pages hold the run and link to it.

The card notebook says which cells are which, by tags:

- ``data-story``: only in the data story (never executed by a run);
- ``shared``: needed by both (imports, loading the items, drawing the split): shown in the data story,
  executed but removed from run pages;
- ``version:<v>``: only in the data story of split version ``<v>`` (a THYME audit is no part of the
  synthetic version's story);
- untagged cells (and the ``parameters`` cell) are the run's.

:func:`story_notebook` and :func:`run_notebook` cut the two notebooks from the one source. :func:`run_story`
executes a story with papermill, cached like runs (key: notebook text, version, the card's data pins,
atlaslib's version and source digest): ``<runs>/<card>/<version>/data.ipynb`` and beside it ``data.json``
(the key, the wall time and the ``extra`` facts the story recorded through its ``story_path``, e.g. the THYME audit numbers that the card
page quotes; the book adds them to the version's result cells). A card without tagged cells has no story.
"""
from __future__ import annotations

import copy
import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import tables

from ..notebook import SHARED_TAG, STORY_TAG, VERSION_PREFIX, has_story, run_cell_indices, run_notebook  # noqa: F401
from ..notebook import tags as _tags

STORY_NAME = "data"  # data.ipynb / data.json under <runs>/<card>/<version>/


def story_notebook(nb, card, version: str):
    """The data story of ``version``: a title, the parameters cell, then the ``shared`` and ``data-story``
    cells meant for this version, in the source's order. None when the notebook tags no cell ``data-story``."""
    import nbformat

    from .. import notebook

    if not has_story(nb):
        return None
    out = copy.deepcopy(nb)
    out.cells = [nbformat.v4.new_markdown_cell(
        f"# {card.title.split(':')[0]} data: {version}\n\n"
        f"What every run of this card on split version `{version}` is evaluated on: the data, the split and "
        f"the caveats, computed once per build from the card's notebook and linked from each run page."),
        *notebook.story_cells(nb, version)]
    return out


def write_story(extra: dict, path) -> None:
    """Called by a story notebook's last cell with its ``story_path`` parameter (None outside a data story:
    nothing is written): the facts of the data story that pages quote, as JSON."""
    if path:
        from ..atomicio import atomic_write_text
        from ..results.schema import _jsonable

        atomic_write_text(path, json.dumps({"extra": _jsonable(extra)}, indent=1) + "\n")


# -- executing ------------------------------------------------------------------------------------------

@dataclass
class StoryOutcome:
    card: str
    version: str
    status: str  # "ran" | "cached" | "none" (the card tags no data story) | "failed"
    seconds: float = 0.0
    notebook: str | None = None
    extra: dict = field(default_factory=dict)
    error: str | None = None

    @property
    def label(self) -> str:
        return f"{self.card}/{self.version}"


def story_paths(runs_dir, card: str, version: str) -> tuple[Path, Path]:
    d = Path(runs_dir) / card / version
    return d / f"{STORY_NAME}.ipynb", d / f"{STORY_NAME}.json"


def story_key(card: str, version: str, notebook_text: str) -> str:
    from ..version import __version__
    from ..cards import get_card
    from ..runner import source_digest   # code only, as a run's: a comment cannot change a story

    payload = {"notebook_sha256": hashlib.sha256(notebook_text.encode()).hexdigest(), "card": card,
               "version": version, "data": get_card(card).data_pins(), "atlaslib_version": __version__,
               "atlaslib_source": source_digest()}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def read_story(runs_dir, card: str, version: str) -> dict | None:
    nb_path, json_path = story_paths(runs_dir, card, version)
    if not (nb_path.is_file() and json_path.is_file()):
        return None
    try:
        return json.loads(json_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def run_story(card_name: str, version: str, *, runs_dir, data_dir=None, force: bool = False,
              kernel_name: str = "python3", timeout: int | None = 3600) -> StoryOutcome:
    """Execute the data story of (card, version) unless its cached notebook carries the same key."""
    import nbformat

    from .. import notebook
    from ..cards import get_card
    from ..atomicio import atomic_write_text

    card = get_card(card_name)
    src = notebook.REPO / card.notebook
    nb = notebook.read_text_notebook(src)
    story = story_notebook(nb, card, version)
    if story is None:
        return StoryOutcome(card_name, version, "none")
    key = story_key(card_name, version, src.read_text(encoding="utf-8"))
    nb_out, json_out = story_paths(Path(runs_dir).resolve(), card_name, version)
    old = read_story(Path(runs_dir).resolve(), card_name, version)
    if not force and old is not None and old.get("story_key") == key:
        return StoryOutcome(card_name, version, "cached", notebook=str(nb_out), extra=old.get("extra", {}))
    nb_out.parent.mkdir(parents=True, exist_ok=True)
    notebook.remove_stale_work_dirs(nb_out.parent, "atlas-story-*")  # left by a build that was killed
    work = notebook.make_work_dir(nb_out.parent, "atlas-story-")
    start = time.perf_counter()
    try:
        nbformat.write(story, work / "in.ipynb")
        params = {"version": version,
                  "data_dir": None if data_dir in (None, "") else str(Path(data_dir).expanduser().resolve())}
        declared = next(c.source for c in story.cells if "parameters" in _tags(c))
        if "story_path" in declared:  # only a story that records facts declares where they go
            params["story_path"] = str(work / "story.json")
        try:
            notebook.execute(work / "in.ipynb", work / "out.ipynb", params, kernel_name=kernel_name,
                             timeout=timeout)
        except Exception as exc:
            err = f"{type(exc).__name__}: {getattr(exc, 'evalue', exc)}"
            return StoryOutcome(card_name, version, "failed", round(time.perf_counter() - start, 2), error=err)
        seconds = round(time.perf_counter() - start, 2)
        written = json.loads((work / "story.json").read_text()) if (work / "story.json").is_file() else {}
        record = {"card": card_name, "version": version, "story_key": key, "seconds": seconds,
                  "extra": written.get("extra", {})}
        os.replace(work / "out.ipynb", nb_out)
        atomic_write_text(json_out, json.dumps(record, indent=1) + "\n")
        return StoryOutcome(card_name, version, "ran", seconds, str(nb_out), record["extra"])
    finally:
        notebook.remove_work_dir(work)


def run_stories(pairs, runs_dir, *, data_dir=None, force: bool = False, log=print) -> list[StoryOutcome]:
    """The data story of every (card, version) in ``pairs`` (in their order, each once)."""
    outcomes = []
    for card, version in dict.fromkeys(pairs):
        o = run_story(card, version, runs_dir=runs_dir, data_dir=data_dir, force=force)
        if o.status != "none":
            log(f"data story {o.label}: {o.status}" + (f" in {o.seconds:.1f} s" if o.status == "ran" else "")
                + (f" ({o.error})" if o.error else ""))
        outcomes.append(o)
    return outcomes


def audits_executed(outcomes) -> int:
    """How many THYME annotation audits this build executed (the THYME story records the audit's numbers)."""
    return sum(o.status == "ran" and "thyme_audit" in o.extra for o in outcomes)


# -- rendering ------------------------------------------------------------------------------------------

def site_doc(card: str, version: str) -> Path:
    return Path("book/runs") / card / version / STORY_NAME


def merge_extra(cells: list[dict], runs_dir, card: str) -> None:
    """Give each result cell the facts of its version's data story (``extra`` keys the cell lacks)."""
    stories = {}
    for cell in cells:
        v = cell["version"]
        if v not in stories:
            stories[v] = read_story(runs_dir, card, v) or {}
        for k, val in (stories[v].get("extra") or {}).items():
            cell.setdefault("extra", {}).setdefault(k, val)


def render(card, runs_dir, src: Path) -> list[str]:
    """Copy the card's data stories into the site tree; return their doc paths (for the toc)."""
    import nbformat

    docs = []
    for version in card.versions:
        nb_path, _ = story_paths(runs_dir, card.name, version)
        if read_story(runs_dir, card.name, version) is None:
            continue
        nb = nbformat.read(nb_path, as_version=4)
        for c in nb.cells:
            tags = c.get("metadata", {}).get("tags", [])
            if "parameters" in tags and "remove-cell" not in tags:
                tags.append("remove-cell")
            if "injected-parameters" in tags and "remove-cell" not in tags:
                tags.append("remove-cell")
        target = src / site_doc(card.name, version).with_suffix(".ipynb")
        target.parent.mkdir(parents=True, exist_ok=True)
        tables.site_notebook(nb, target.stem, target.parent)  # long tables: first rows here, all rows as CSV
        nbformat.write(nb, target)
        docs.append(str(site_doc(card.name, version)))
    return docs


def run_link_markdown(version: str) -> str:
    """The note a run page carries under its title, linking the version's data story (one folder up)."""
    return (f"The data, the split and the caveats of split version `{version}` are shown once for every run "
            f"on it: [Data: {version}](../{STORY_NAME}.ipynb). This page holds the run.")
