"""A card's runs in the site tree: each run's executed notebook copied in (its first heading renamed after the run,
its parameters and code hidden, long tables cut to their first rows), its result JSON beside it, and each split
version's page listing its runs. :func:`atlaslib.pages.card_pages.render_card` calls :func:`copy_runs` first and
:func:`render_runs_index` for each version.
"""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from ..cards import Card
from ..escape import md
from ..results import store
from . import datastory, tables
from .card_results import short_reason, short_title


def copy_runs(card: Card, cells: list[dict], src: Path) -> None:
    """Copy every run's executed notebook (when it has one) and result JSON into the site tree under
    ``book/runs/`` and ``book/results/``; each cell learns where (``_notebook_rel``, ``_json_rel``)."""
    for cell in cells:
        rel = Path("book/runs") / card.name / cell["version"] / store.slug(cell["model"])
        (src / rel).mkdir(parents=True, exist_ok=True)
        nb_rel = rel / f"{cell['protocol']}.ipynb" if cell["_notebook_src"] is not None else None
        if nb_rel is not None:
            story = (src / datastory.site_doc(card.name, cell["version"]).with_suffix(".ipynb")).is_file()
            note = ((datastory.run_link_markdown(cell["version"]) + " ") if story else "") + (
                f"The code is the card's notebook, the same for every run: take it as `.md` or `.ipynb` from the "
                f"[card page](../../../../cards/{card.name}.md); every run on `{cell['version']}`: "
                f"[runs](../index.md).")
            title = f"{short_title(card)} run: {md(cell['model'])} · {cell['protocol']} · {cell['version']}"
            _copy_run_notebook(cell["_notebook_src"], src / nb_rel, title, note, explorer_errors_note(cell, src / rel, src))
        json_rel = Path("book/results") / card.name / cell["version"] / store.slug(cell["model"]) / f"{cell['protocol']}.json"
        (src / json_rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(cell["_path"], src / json_rel)
        cell["_notebook_rel"], cell["_json_rel"] = (str(nb_rel) if nb_rel else None), str(json_rel)


def _copy_run_notebook(source: Path, target: Path, title: str, note: str | None = None,
                       errors_note: str | None = None) -> None:
    """Copy an executed notebook into the site, its first heading renamed after the run (every run of a
    card would otherwise carry the card's title in the navigation), with ``note`` (Markdown, e.g. the link
    to the version's data story) under the heading."""
    import nbformat

    nb = nbformat.read(source, as_version=4)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown" and cell.source.lstrip().startswith("# "):
            lines = cell.source.lstrip().split("\n")
            cell.source = "\n".join([f"# {title}"] + lines[1:])
            if note:
                nb.cells.insert(i + 1, nbformat.v4.new_markdown_cell(note))
            break
    for cell in nb.cells:
        tags = cell.setdefault("metadata", {}).setdefault("tags", [])
        if "parameters" in tags and "remove-cell" not in tags:
            tags.append("remove-cell")  # the notebook's defaults; the run's values follow in the next cell
        if "injected-parameters" in tags:
            kept = [ln for ln in cell.source.split("\n")
                    if not re.match(r"(result_path|run_key|data_dir|decision) = ", ln)]
            cell.source = ("\n".join(kept).rstrip()
                           + "\n# data_dir, result_path, run_key and decision were set by `atlas run`")
        elif cell.cell_type == "code" and "remove-input" not in tags:
            # a run page shows what was run (the parameters above) and what came out; the code is the card's
            # notebook, the same for every run, offered once on the card page (.md and .ipynb downloads)
            tags.append("remove-input")
    tables.site_notebook(nb, target.stem, target.parent, errors_note)  # long tables: first rows here, all as CSV
    nbformat.write(nb, target)


def run_title(cell: dict) -> str:
    """A run's name in the sidebar and the runs list: ``model · protocol``."""
    return f"{cell['model']} · {cell['protocol']}"


def runs_doc(card: Card, version: str) -> str:
    """The page listing every run of (card, version); it sits with the runs, outside the reading sequence."""
    return f"book/runs/{card.name}/{version}/index"


def render_runs_index(card: Card, version: str, cells: list[dict], src: Path) -> str | None:
    vcells = [c for c in cells if c["version"] == version and c.get("_notebook_rel")]
    if not vcells:
        return None
    doc = runs_doc(card, version)
    page = src / f"{doc}.md"
    rows = ["| run | protocol | status |", "|---|---|---|"]
    for c in sorted(vcells, key=lambda c: (c["model"], c["protocol"])):
        rel = os.path.relpath(src / c["_notebook_rel"], page.parent)
        status = c["status"] if c["status"] == "ok" else f"{c['status']}: {md(short_reason(c.get('reason')))}"
        rows.append(f"| [{md(c['model'])}]({rel}) | {c['protocol']} | {status} |")  # user names: text
    card_rel = os.path.relpath(src / card.page, page.parent)
    text = (f"# {short_title(card)} runs: `{version}`\n\n"
            f"Every run of this build on split version `{version}`: one executed notebook each, with its "
            f"parameters, metrics, plots and errors. The leaderboard and the comparisons of these runs are on the "
            f"[card page]({card_rel}).\n\n" + "\n".join(rows) + "\n")
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(text, encoding="utf-8")
    return doc


def explorer_errors_note(cell: dict, page_dir: Path, src: Path) -> str:
    """The line under a run page's error tables: the run's errors in its version's item explorer."""
    from . import explorer

    return explorer.errors_markdown(cell, page_dir, src)
