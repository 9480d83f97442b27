"""The book: result cells → card pages and leaderboards → Jupyter Book HTML.

``atlas book`` runs the default matrix (cached, see :mod:`atlaslib.runner`), then renders a site tree in
``_build/site-src`` from the sources in ``book/``, ``_config.yml`` and ``_toc.yml``:

- each card page ``book/cards/<card>.md`` gets its leaderboards (one per split version, never merged),
  forest plots and reproduction tables where the line ``<!-- leaderboard -->`` stands, all read from the
  result cells; unlicensed cards get a "local evaluation only" banner;
- executed notebooks are copied in as sub-pages of their card, result JSON files as downloads;
- a build-report page lists every run with wall time, peak memory and cache status.

Then Jupyter Book 1.x builds HTML with execution off (notebooks arrive executed), warnings as errors and
``--keep-going`` so every warning is reported. A failed run is never rendered as a result: its row says
"failed" and the command exits non-zero naming the notebook and the cell.

``--publish`` renders the same site without the cards whose licence is unconfirmed and without cells
whose data are gated, and writes a "withheld" page saying what was left out and why.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import matplotlib.pyplot as plt
import pandas as pd
import yaml

from . import builddir, linkcheck, plots, results
from .escape import md, md_code, public_location
from .background import in_background
from .pages import analysis as analysis_page
from .pages import datastory
from .pages import departures, facts, methods, tables
from .pages import seeds as seeds_page
from .pages.course import finish_course, start_course
from .cards import Card, available_cards, card_page_source
from .executor import run_requests
from .matrix import BuildPaths, MatrixReport, print_timing  # noqa: F401  (book.BuildPaths stays importable)
from .runner import REPO, RunRequest

LEADERBOARD_MARK = "<!-- leaderboard -->"
CARDS_MARK = "<!-- cards -->"
REPRODUCTION_MARK = "<!-- reproduction -->"


# -- running the matrix --------------------------------------------------------------------------------

def default_requests(cards: list[Card] | None = None) -> list[RunRequest]:
    cards = cards if cards is not None else available_cards()
    return [RunRequest(c.name, v, m, p) for c in cards for (v, m, p) in c.default_matrix]


def run_matrix(requests: list[RunRequest], paths: BuildPaths, *, data_dir=None, force: bool = False,
               executor: str = "serial", scheduler: str | None = None, n_workers: int | None = None,
               memory_limit=None, log=print) -> MatrixReport:
    """Run every request (cached), serially or on Dask (:mod:`atlaslib.executor`); failures are collected,
    never stop the matrix, and the per-run timing table is printed at the end."""
    return run_requests(requests, paths, data_dir=data_dir, force=force, executor=executor, scheduler=scheduler,
                        n_workers=n_workers, memory_limit=memory_limit, log=log)


# -- formatting ----------------------------------------------------------------------------------------

def fmt_metric(entry: dict | None) -> str:
    """``0.912 [0.880, 0.940]`` (three decimals); ``n/a (<reason>)`` when the metric has no value (an
    undefined metric reads ``n/a (undefined: …)``, never a number)."""
    if entry is None:
        return "n/a"
    if entry.get("value") is None:
        reason = entry.get("reason") or "not applicable"
        return "—" if reason.startswith("not run") else f"n/a ({reason})"
    v, lo, hi = entry["value"], entry.get("ci_low"), entry.get("ci_high")
    if lo is None or hi is None:
        return f"{v:.3f}"
    return f"{v:.3f} [{lo:.3f}, {hi:.3f}]"


def short_reason(reason: str | None) -> str:
    """The headline of a not-run reason ('weights unavailable', 'capability missing'); the full text is in
    the run's notebook and result cell."""
    return (reason or "unknown reason").split(":")[0].strip()


def _ci_html(text: str) -> str:
    """Put the interval of ``0.912 [0.880, 0.940]`` on its own line in the table (same text content)."""
    if " [" not in text or not text[0].isdigit():
        return text
    value, ci = text.split(" [", 1)
    return f'{value} <span class="atlas-ci">[{ci}</span>'


def _md_escape(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _primary_value(cell: dict, card: Card) -> float:
    base = card.metrics[0]
    e = cell["metrics"].get(f"{base}_{cell['protocol']}") or {}
    v = e.get("value")
    return -1.0 if v is None else (v if card.higher_is_better.get(base, True) else -v)


def leaderboard_markdown(card: Card, version: str, cells: list[dict], page_dir: Path, src: Path,
                         failed: list[RunRequest] = (), comparison=None) -> str:
    """The leaderboard of one (card, version): the card's metrics with their declared intervals (exact
    intervals beside degenerate ones, one footnote per reason), then per band (rows of one training regime;
    overlap-flagged rows not ranked) the rows not distinguishable from the best, rank interval and P(rank 1)
    of every ok run and the intervals that assume clusters (see :mod:`atlaslib.pages.leaderboard`)."""
    from .pages import leaderboard as lb
    from .pages.comparisons import comparison_for

    if comparison is None:
        comparison = comparison_for(card, version, cells)
    comp = None if isinstance(comparison, str) else comparison
    return lb.leaderboard_tables(card, version, cells, page_dir, src, failed, comp, short_reason)


# -- rendering the site tree -----------------------------------------------------------------------------

def _copy_sources(paths: BuildPaths, src: Path) -> None:
    builddir.fresh_folder(src)  # only a folder the atlas made is deleted
    for name in ("_config.yml", "_toc.yml"):
        shutil.copyfile(paths.repo / name, src / name)
    shutil.copytree(paths.repo / "book", src / "book", ignore=shutil.ignore_patterns("runs", "_generated"))


is_gated = results.is_gated  # a cell computed on data under a use agreement: never published


def _is_external(cell: dict) -> bool:
    return results.is_external(cell)


def collect_cells(paths: BuildPaths, card: Card, publish: bool, failed: list[RunRequest]) -> list[dict]:
    """Result cells of a card that have an executed notebook, minus failed runs (and gated ones when
    publishing)."""
    failed_keys = {(r.card, r.version, results.slug(r.model), r.protocol) for r in failed}
    cells = []
    for cell in results.read_cells(paths.results, card.name):
        key = (cell["card"], cell["version"], results.slug(cell["model"]), cell["protocol"])
        if key in failed_keys:
            continue
        if publish and is_gated(cell):
            continue
        nb = paths.runs / card.name / cell["version"] / results.slug(cell["model"]) / f"{cell['protocol']}.ipynb"
        if not nb.is_file():
            if not _is_external(cell):  # scored predictions files have no notebook; their row links the JSON
                continue
            nb = None
        cell["_notebook_src"] = nb
        cells.append(cell)
    return cells


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


# -- a card's pages: the short card page and its sub-pages ------------------------------------------------

@dataclass
class PageContext:
    """What a sub-page renders from: the card, the split version (None for a card-level page), the card's
    cells shown in this build (all versions), the site tree, the page's folder and the failed runs."""
    card: Card
    version: str | None
    cells: list[dict]
    src: Path
    page_dir: Path
    failed: list
    publish: bool = False

    @property
    def version_cells(self) -> list[dict]:
        return [c for c in self.cells if self.version is None or c["version"] == self.version]


@dataclass(frozen=True)
class SubPage:
    """A page under a card's page: in the sidebar, in the reading sequence, and linked from the card page.

    A card-level page is ``book/cards/<card>/<slug>.md``, a per-version page
    ``book/cards/<card>/<version>/<slug>.md``. A page whose source exists at that path in ``book/`` starts
    from the source (its own ``# title``; ``mark`` in it is replaced by the rendered body); otherwise it is
    ``# <title>`` and the body. ``title`` may name ``{card}`` (the card's short title) and ``{version}``.
    ``render(ctx)`` returns the body in Markdown, or None / "" when the card (version) has nothing for it; a
    page with neither a source nor a body is not made. ``link`` is the page's name in the card page's lists.
    A page that writes itself (its own path and files) gives ``write(ctx)`` instead, which returns its doc path
    or None."""
    slug: str
    title: str
    render: Callable[[PageContext], str | None] | None = None
    per_version: bool = True
    link: str = ""
    mark: str = ""
    write: Callable[[PageContext], str | None] | None = None

    def doc(self, card: Card, version: str | None) -> str:
        parts = ["book/cards", card.name] + ([version] if self.per_version else []) + [self.slug]
        return "/".join(parts)


#: The sub-pages of every card, in sidebar order (card-level ones first, then each version's). More can be
#: added with :func:`register_subpage`.
SUBPAGES: list[SubPage] = []


def register_subpage(page: SubPage, before: str | None = None) -> None:
    """Add a sub-page to every card (at the end of its level, or before the page whose slug is ``before``);
    a slug is registered once per level."""
    if any(p.slug == page.slug and p.per_version == page.per_version for p in SUBPAGES):
        raise ValueError(f"sub-page {page.slug!r} is already registered")
    at = next((i for i, p in enumerate(SUBPAGES) if p.slug == before and p.per_version == page.per_version),
              len(SUBPAGES))
    SUBPAGES.insert(at, page)


def short_title(card: Card) -> str:
    """``NegEx test kit`` from ``NegEx test kit: is the concept negated?``."""
    return card.title.split(":")[0].strip()


def _reproduction_body(ctx: PageContext) -> str | None:
    table = reproduction_table(ctx.card, ctx.cells, "## Published figures beside ours")
    return "\n".join(p for p in (table, reproduction_markdown(ctx.cells)) if p) or None


def _failures_body(ctx: PageContext) -> str | None:
    body = analysis_page.render(ctx.card, ctx.version, ctx.cells, ctx.page_dir, ctx.src, heading=False)
    # the section's sub-headings are this page's sections: one level up
    return re.sub(r"^### ", "## ", body, flags=re.M) or None


register_subpage(SubPage("about", "{card}: data, splits and protocols", per_version=False,
                         link="data, splits and protocols"))
register_subpage(SubPage("reproduction", "{card}: reproduction", _reproduction_body, per_version=False,
                         link="reproduction", mark=REPRODUCTION_MARK))
register_subpage(SubPage("failures", "Where models fail: `{version}`", _failures_body, link="where models fail"))
register_subpage(SubPage("explorer", "Item explorer: `{version}`", link="item explorer",
                         write=lambda ctx: _explorer_page(ctx)))
register_subpage(SubPage("intervals", "Every metric with its interval: `{version}`",
                         lambda ctx: _intervals_body(ctx), link="every metric plotted"))
register_subpage(SubPage("robustness", "Robustness to perturbed inputs and prompts: `{version}`",
                         lambda ctx: _robustness_body(ctx), link="robustness"))


def _robustness_body(ctx: PageContext) -> str | None:
    from .pages import robustness

    return robustness.render(ctx.card, ctx.version, ctx.version_cells, ctx.page_dir, ctx.src, ctx.publish)


register_subpage(SubPage("seeds", "Training seeds: `{version}`",
                         lambda ctx: seeds_page.render(ctx.card, ctx.version, ctx.version_cells, ctx.cells),
                         link="training seeds"))


def _render_subpage(page: SubPage, card: Card, version: str | None, cells: list[dict], src: Path,
                    failed: list, publish: bool = False) -> str | None:
    """Write one sub-page into the site tree; its doc path, or None when it has nothing to show."""
    doc = page.doc(card, version)
    target = src / f"{doc}.md"
    ctx = PageContext(card, version, cells, src, target.parent, list(failed), publish)
    if page.write is not None:
        return page.write(ctx)
    source = target.read_text(encoding="utf-8") if target.is_file() else None
    body = page.render(ctx) if page.render is not None else None
    if source is None and not body:
        return None
    title = page.title.format(card=short_title(card), version=version or "")
    if source is None:
        text = f"# {title}\n\n{body}\n"
    elif page.mark and page.mark in source:
        text = source.replace(page.mark, body or "")
    else:
        text = source.rstrip() + ("\n\n" + body if body else "") + "\n"
    if not card.licence_confirmed:
        text = _insert_after_title(text, _licence_banner(card))
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    return doc


def _licence_banner(card: Card) -> str:
    return ("```{warning}\n**Local evaluation only.** " + card.licence_note +
            " The numbers on this page may not be cited or republished until the licence is confirmed.\n```\n")


def run_title(cell: dict) -> str:
    """A run's name in the sidebar and the runs list: ``model · protocol``."""
    return f"{cell['model']} · {cell['protocol']}"


def runs_doc(card: Card, version: str) -> str:
    """The page listing every run of (card, version); it sits with the runs, outside the reading sequence."""
    return f"book/runs/{card.name}/{version}/index"


def _render_runs_index(card: Card, version: str, cells: list[dict], src: Path) -> str | None:
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


def render_card(card: Card, cells: list[dict], src: Path, failed: list[RunRequest],
                story_docs: list[str] = (), publish: bool = False) -> list[dict]:
    """Copy the card's executed notebooks and JSON into the site tree, fill its page and write its sub-pages;
    return the toc sections under the card page: card-level sub-pages, then per version (the card's
    leaderboard version first) its sub-pages, its data story and its runs page with the run notebooks."""
    for cell in cells:
        rel = Path("book/runs") / card.name / cell["version"] / results.slug(cell["model"])
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
        json_rel = Path("book/results") / card.name / cell["version"] / results.slug(cell["model"]) / f"{cell['protocol']}.json"
        (src / json_rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(cell["_path"], src / json_rel)
        cell["_notebook_rel"], cell["_json_rel"] = (str(nb_rel) if nb_rel else None), str(json_rel)
    sections: list[dict] = []
    card_level = [p for p in SUBPAGES if not p.per_version]
    made: dict[tuple, str] = {}
    for p in card_level:
        doc = _render_subpage(p, card, None, cells, src, failed, publish)
        if doc:
            made[(p.slug, None)] = doc
            sections.append({"file": doc})
    for version in card.page_versions:
        for p in (p for p in SUBPAGES if p.per_version):
            doc = _render_subpage(p, card, version, cells, src, failed, publish)
            if doc:
                made[(p.slug, version)] = doc
                sections.append({"file": doc})
        story = str(datastory.site_doc(card.name, version))
        if story in story_docs:
            made[("data", version)] = story
            sections.append({"file": story, "title": f"Data: {version}"})
        runs = _render_runs_index(card, version, cells, src)
        if runs:
            made[("runs", version)] = runs
            vruns = sorted((c for c in cells if c["version"] == version and c.get("_notebook_rel")),
                           key=lambda c: (c["model"], c["protocol"]))
            sections.append({"file": runs, "title": f"Runs: {version}", "sections": [
                {"file": str(Path(c["_notebook_rel"]).with_suffix("")), "title": run_title(c)} for c in vruns]})
    page = src / card.page
    if not page.is_file():  # a card without a page in book/cards/: its package's page.md, else its title
        page.parent.mkdir(parents=True, exist_ok=True)
        own = card_page_source(card)
        page.write_text(own.read_text(encoding="utf-8") if own else f"# {card.title}\n\n{LEADERBOARD_MARK}\n",
                        encoding="utf-8")
    text = page.read_text(encoding="utf-8")
    block = card_results_markdown(card, cells, page.parent, src, failed, made)
    if LEADERBOARD_MARK in text:
        text = text.replace(LEADERBOARD_MARK, block)
    else:
        text = text.rstrip() + "\n\n" + block
    table = departures.departures_markdown(card)
    text = text.replace(departures.MARK, table) if departures.MARK in text else text.rstrip() + "\n\n" + table
    more = _more_markdown(card, made, page.parent, src, card_level)
    text = text.replace(SUBPAGES_MARK, more) if SUBPAGES_MARK in text else _insert_after_title(text, more)
    if not card.licence_confirmed:
        text = _insert_after_title(text, _licence_banner(card))
    page.write_text(text, encoding="utf-8")
    return sections


SUBPAGES_MARK = "<!-- subpages -->"


def _link(src: Path, page_dir: Path, doc: str, text: str) -> str:
    ext = ".ipynb" if (src / f"{doc}.ipynb").is_file() else ".md"
    return f"[{text}]({os.path.relpath(src / (doc + ext), page_dir)})"


def _more_markdown(card: Card, made: dict, page_dir: Path, src: Path, card_level: list[SubPage]) -> str:
    """The card page's pointer to its sub-pages: the card-level ones, then per version what it has."""
    parts = [_link(src, page_dir, made[(p.slug, None)], p.link or p.slug) for p in card_level
             if (p.slug, None) in made]
    lines = []
    if parts:
        lines.append("On pages of their own: " + " · ".join(parts) + ".")
    return ("```{tip}\n" + " ".join(lines) + " Each split version's leaderboard below links where models fail on "
            "it, its data and its runs.\n```\n") if lines else ""


def _version_links(card: Card, version: str, made: dict, page_dir: Path, src: Path) -> str:
    parts = [_link(src, page_dir, made[(p.slug, version)], p.link or p.slug) for p in SUBPAGES
             if p.per_version and (p.slug, version) in made]
    if ("data", version) in made:
        parts.append(_link(src, page_dir, made[("data", version)], "data, split and caveats"))
    if ("runs", version) in made:
        parts.append(_link(src, page_dir, made[("runs", version)], "every run"))
    return f"More on `{version}`: " + " · ".join(parts) + ".\n" if parts else ""


# -- item explorers: one sub-page per card version ---------------------------------------------------------

def _explorer_page(ctx: PageContext) -> str | None:
    """The item explorer of the version (:mod:`atlaslib.pages.explorer`, which writes its own page, under
    ``book/runs/``: a tool beside the reading sequence), or None without ok runs."""
    from .pages import explorer

    doc = explorer.render(ctx.card, ctx.version, ctx.cells, ctx.src, publish=ctx.publish)
    if doc and not ctx.card.licence_confirmed:   # the card's other pages carry the same banner
        page = ctx.src / f"{doc}.md"
        page.write_text(_insert_after_title(page.read_text(encoding="utf-8"), _licence_banner(ctx.card)),
                        encoding="utf-8")
    return doc or None


def explorer_errors_note(cell: dict, page_dir: Path, src: Path) -> str:
    """The line under a run page's error tables: the run's errors in its version's item explorer."""
    from .pages import explorer

    return explorer.errors_markdown(cell, page_dir, src)


def _insert_after_title(text: str, block: str) -> str:
    m = re.search(r"^# .*\n", text, flags=re.M)
    if not m:
        return block + "\n" + text
    return text[:m.end()] + "\n" + block + "\n" + text[m.end():]


def card_results_markdown(card: Card, cells: list[dict], page_dir: Path, src: Path,
                          failed: list[RunRequest], made: dict | None = None) -> str:
    """Per split version, the card's leaderboard version first: the leaderboard, its forest plots and the
    paired comparisons, with links to the version's sub-pages."""
    made = made or {}
    parts = ["```{seealso}\nHow splits are drawn, what each protocol asks of a model, and how every metric "
             "and interval is computed: [splits](../methods/splits.md), [protocols](../methods/protocols.md), "
             "[metrics and intervals](../methods/metrics.md).\n```\n"]
    from .pages import comparisons
    for version in card.page_versions:
        parts.append(f"## Leaderboard: `{version}`\n")
        vcells = [c for c in cells if c["version"] == version]
        if vcells and vcells[0].get("split"):
            s = vcells[0]["split"]
            parts.append(f"Split `{version}`: {s.get('n_test', '?')} test items, {s.get('n_train', '?')} train "
                         f"items; manifest sha256 `{str(s.get('hash', ''))[:12]}…`.\n")
        parts.append(_version_links(card, version, made, page_dir, src))
        comp = comparisons.comparison_for(card, version, cells)
        parts.append(leaderboard_markdown(card, version, cells, page_dir, src, failed, comparison=comp))
        parts.append(forest_markdown(card, version, vcells, page_dir, card.metrics[:1]))
        parts.append(comparisons.render(card, version, cells, page_dir, src, comp))
        parts.append(ties_markdown(card, comp))
    comparisons.fill_metrics_chapter(src, card, cells)
    return "\n".join(parts)


#: a pair whose resamples tie this often has a paired interval that can end on 0 by the ties alone
TIE_SHARE = 0.025


def tied_resamples(comp, a: str, b: str, base: str) -> tuple[int, int]:
    """(resamples whose difference ``a − b`` of ``base`` is exactly 0, resamples with a difference), from the
    comparison's own resamples."""
    import numpy as np

    d = comp.data.resampled(a, base) - comp.data.resampled(b, base)
    d = d[np.isfinite(d)]
    return int(np.sum(np.abs(d) < 1e-12)), int(d.size)


def ties_markdown(card: Card, comp) -> str:
    """Why a paired interval of the primary metric can end exactly on 0 while its test finds no difference:
    the share of resamples in which the two runs tie, computed from the comparison's resamples (one sentence
    per such pair); "" when no pair has an interval ending on 0 with ties behind it."""
    if comp is None or isinstance(comp, str) or comp.pairs.empty:
        return ""
    base = card.metrics[0]
    t = comp.pairs[comp.pairs["metric"] == base]
    notes = []
    for _, r in t.iterrows():
        lo, hi = float(r["ci_low"]), float(r["ci_high"])
        if not (abs(lo) < 5e-7 or abs(hi) < 5e-7):
            continue
        ties, n = tied_resamples(comp, r["model_a"], r["model_b"], base)
        if n == 0 or ties / n < TIE_SHARE:
            continue
        end = "lower" if abs(lo) < 5e-7 else "upper"
        why = ""
        if r.get("b") is not None and not pd.isna(r.get("b")):
            b, c = int(r["b"]), int(r["c"])
            how = ("does not draw it" if b + c == 1 else "draws none of them") if min(b, c) == 0 else \
                "draws none of them (or draws them so that both runs' counts come out the same)"
            items = "item" if b + c == 1 else "items"
            why = (f" The two runs disagree about being right on only {b + c} {items} (b = {b}, c = {c}); a resample "
                   f"that {how} scores both runs alike.")
        decided = f"{r['test']}, p {r['p']:.3f}" if not pd.isna(r.get("p")) else str(r["test"])
        note = (f"- `{r['model_a']}` − `{r['model_b']}`: {ties:,} of the {n:,} resamples ({100 * ties / n:.1f} %) "
                f"give a difference of exactly 0, so the percentile interval [{lo:.3f}, {hi:.3f}] has 0 as its "
                f"{end} end.{why}")
        if not bool(r["significant"]):
            note += (f" An interval that touches 0 does not exclude it; the test that decides the pair ({decided}, "
                     f"Holm {r['p_holm']:.3f}) finds no difference at 5 %.")
        notes.append(note)
    if not notes:
        return ""
    return (f"**Intervals that end on 0.** A paired difference of `{base}` is exactly 0 on every resample in which "
            "the two runs are right and wrong on the same drawn items. When that happens often, the percentile "
            "interval stops at 0 instead of crossing it:\n\n" + "\n".join(notes) + "\n")


def forest_markdown(card: Card, version: str, vcells: list[dict], page_dir: Path, bases) -> str:
    """A forest plot per metric of ``bases`` with two or more intervals on ``version`` (figures written under
    ``page_dir/_figures``); "" when no metric has two."""
    parts = []
    fig_dir = page_dir / "_figures"
    for base in bases:
        frame = forest_frame(card, vcells, base)
        if len(frame.dropna(subset=["value", "ci_low", "ci_high"])) < 2:
            continue  # one run (or none with an interval, e.g. pass/fail gates): the table says it all
        fig_dir.mkdir(parents=True, exist_ok=True)
        name = f"forest-{card.name}-{version}-{base}.png"
        fig = plots.forest(frame, "value", "ci_low", "ci_high", "label", title=f"{base} · {version}",
                           higher_is_better=card.higher_is_better.get(base, True),
                           xlabel=f"{base.replace('_', ' ')} (point estimate and 95 % interval)")
        plots.save(fig, fig_dir / name)
        dagger = " † marks a model trained on data that overlaps this card." if frame["label"].str.endswith(
            "†").any() else ""
        parts.append(f"```{{figure}} _figures/{name}\n:alt: forest plot of {base} on {version}\n\n"
                     f"`{base}` on `{version}` with the declared 95 % intervals, models ordered by the point "
                     f"estimate; the axis is zoomed to the intervals.{dagger}\n```\n")
    return "\n".join(parts)


def _intervals_body(ctx: PageContext) -> str | None:
    body = forest_markdown(ctx.card, ctx.version, ctx.version_cells, ctx.page_dir, ctx.card.metrics[1:])
    if not body:
        return None
    return ("The leaderboard's other metrics on this split version, each with its declared 95 % interval per run "
            "(the card page plots the primary metric). Overlapping intervals do not show that two runs are alike: "
            "the paired comparisons on the card page answer that.\n\n" + body)


def forest_frame(card: Card, cells: list[dict], base: str | None = None) -> pd.DataFrame:
    """One row per ok run with a value of ``base``: label (``model (protocol)``, ``†`` when the model's
    training data overlap the card), value and the declared interval."""
    base = base or card.metrics[0]
    rows = []
    for c in cells:
        if c.get("status", "ok") != "ok":
            continue
        e = c["metrics"].get(f"{base}_{c['protocol']}") or {}
        label = f"{c['model']} ({c['protocol']})" + (" †" if c.get("overlap") else "")
        rows.append({"label": label, "value": e.get("value"), "ci_low": e.get("ci_low"), "ci_high": e.get("ci_high")})
    return pd.DataFrame(rows, columns=["label", "value", "ci_low", "ci_high"])


def reproduction_markdown(cells: list[dict]) -> str:
    blocks = []
    for c in cells:
        rep = c.get("extra", {}).get("reproduction")
        if not rep:
            continue
        frame = pd.DataFrame(rep)
        blocks.append(f"## {md(c['model'])} on the whole kit\n\n" + frame.to_markdown(index=False) + "\n")
    return "\n".join(blocks)


def render_intro(src: Path, cards: list[Card], cells: list[dict] = ()) -> None:
    """The home page's 'cards at a glance' table, from the card registry and the test sizes the result
    cells record per split version."""
    page = src / "book" / "intro.md"
    lines = ["| card | task | data | licence (as the card declares it) | versions (test items) |",
             "|---|---|---|---|---|"]
    for c in cards:
        lic = f"{c.licence or 'not declared'}; {departures.publication(c)}"
        sizes = {}
        for cell in cells:
            n = (cell.get("split") or {}).get("n_test")
            if cell["card"] == c.name and n is not None:
                sizes.setdefault(cell["version"], n)
        versions = ", ".join(f"`{v}`" + (f" ({sizes[v]:,})" if v in sizes else "") for v in c.page_versions)
        lines.append(f"| [{_md_escape(c.title)}](cards/{c.name}.md) | {_md_escape(c.task)} | {_md_escape(c.data)} "
                     f"| {lic} | {versions} |")
    text = page.read_text(encoding="utf-8").replace(CARDS_MARK, "\n".join(lines))
    page.write_text(text, encoding="utf-8")


def render_models(src: Path, cards: list[Card], cells: list[dict]) -> list[str]:
    """One page per model: its profile (source, revision, capabilities, training data) and every cell it has
    in this build. Card-level baselines (not registry profiles) get a page too. Returns the doc paths."""
    from .models import load_profiles

    profiles = load_profiles()
    names = list(profiles) + sorted({c["model"] for c in cells} - set(profiles))
    out_dir = src / "book" / "models"
    out_dir.mkdir(parents=True, exist_ok=True)
    by_card = {c.name: c for c in cards}
    docs, index = [], ["# All models", "",
                       "Every model the atlas knows by name, and the card-level baselines. A model page lists its "
                       "profile and every result cell it has in this build.", "",
                       "| model | source | capabilities | cells |", "|---|---|---|---|"]
    for name in names:
        mine = [c for c in cells if c["model"] == name]
        prof = profiles.get(name)
        slug_ = results.slug(name)
        lines = [f"# {md(name)}", ""]  # every field below is user text (profile files, atlas score): escaped
        if prof is not None:
            lines += [md(prof.description.strip()), "",
                      "| field | value |", "|---|---|",
                      f"| source | {md(prof.source)} ({md_code(public_location(prof.location))}) |",
                      f"| revision | {md_code(prof.revision)} |" if prof.revision else "| revision | — |",
                      f"| capabilities | {', '.join(md_code(c) for c in prof.capabilities)} |",
                      f"| training data (declared by its maker) | "
                      f"{', '.join(md(t) for t in prof.training_data) or 'not declared'} |",
                      f"| trained on a card's data | {', '.join(md(t) for t in prof.trained_on) or 'none declared'} |",
                      f"| label map | {md(', '.join(f'{k} → {v}' for k, v in prof.label_map.items())) or '—'} |",
                      ""]
            source, caps = prof.source, ", ".join(prof.capabilities)
        elif mine and all(_is_external(c) for c in mine):
            ext = mine[0]["spec"]["profile"]
            lines += [md(ext.get("description") or ""), "",
                      "Predictions made outside the atlas and scored by `atlas score` with each card's own metrics "
                      "and intervals (no notebook); each result cell records the predictions' sha256.", ""]
            source, caps = "external predictions", "—"
        else:
            owners = sorted({c["card"] for c in mine})
            lines += [f"A baseline or predictor defined by the card{'s' if len(owners) > 1 else ''} "
                      f"{', '.join(owners)} (in `atlaslib/cards/`), not a registry profile.", ""]
            source, caps = "card baseline", "—"
        if mine:
            from .pages import rowinfo

            lines += ["## Result cells", "", "The first leaderboard metric of the card that the run has a value for "
                      "(a baseline that addresses only some sub-tasks shows the first of those). Prediction items per second: "
                      + rowinfo.speed_note(mine), "",
                      "| card | version | protocol | headline metric | prediction items/s | status |",
                      "|---|---|---|---|---|---|"]
            for c in sorted(mine, key=lambda c: (c["card"], c["version"], c["protocol"])):
                card = by_card.get(c["card"])
                base = headline_metric(card, c) if card else ""
                val = fmt_metric(c["metrics"].get(f"{base}_{c['protocol']}")) if c["status"] == "ok" else \
                    f"not run: {_md_escape(short_reason(c.get('reason')))}"
                sp = rowinfo.speed(c)
                mark = rowinfo.contamination_mark(c)
                status = c["status"] + (f" · ◊ {_md_escape(mark)}" if mark else "")
                lines.append(f"| [{c['card']}](../cards/{c['card']}.md) | `{c['version']}` | {c['protocol']} | "
                             f"{base}: {_md_escape(val)} | {rowinfo.speed_text(sp) if sp else '—'} | {status} |")
        else:
            lines.append("*No result cells in this build.*")
        (out_dir / f"{slug_}.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
        docs.append(f"book/models/{slug_}")
        index.append(f"| [{md(name)}]({slug_}.md) | {md(source)} | {md(caps)} | {len(mine)} |")
    (out_dir / "index.md").write_text("\n".join(index) + "\n", encoding="utf-8")
    return docs


def headline_metric(card: Card, cell: dict) -> str:
    """The metric a model page shows for a cell: the card's first leaderboard metric with a value in the cell
    (TempEval's memorize has no CONTAINS score, so its span F1 is shown), else the card's primary metric."""
    for base in card.metrics:
        if (cell.get("metrics", {}).get(f"{base}_{cell['protocol']}") or {}).get("value") is not None:
            return base
    return card.metrics[0]


def reproduction_table(card: Card, cells: list[dict], heading: str = "") -> str:
    """Every published figure the card's cells reproduce, beside ours (rows from
    ``extra["reproduction_rows"]``, deduplicated per figure; one column per system of ours); "" without any."""
    figures: dict[str, dict] = {}
    systems: list[str] = []
    for c in cells:
        if c["card"] != card.name:
            continue
        for r in c.get("extra", {}).get("reproduction_rows") or []:
            system = r.get("system") or "atlas"
            entry = figures.setdefault(r["figure"], {"published": r["published"], "ours": {},
                                                     "note": r.get("note", ""), "source": r.get("source", "")})
            entry["ours"].setdefault(system, r["ours"])
            if system not in systems and system != "loader":
                systems.append(system)
    if not figures:
        return ""
    cols = ["figure", "published"] + (systems or ["ours"]) + ["note"]
    prev_note = None
    lines = ([heading, ""] if heading else []) + ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for fig, e in figures.items():
        vals = [_fmt_num(e["ours"].get(sys_)) if sys_ in e["ours"] else
                (_fmt_num(e["ours"].get("loader")) if "loader" in e["ours"] else "—") for sys_ in (systems or ["ours"])]
        if not systems:
            vals = [_fmt_num(next(iter(e["ours"].values())))]
        note = _md_escape(e["note"]) + (f" ({_md_escape(e['source'])})" if e["source"] else "")
        note, prev_note = ("as above" if note == prev_note else note), note
        lines.append("| " + " | ".join([_md_escape(fig), _fmt_num(e["published"])] + vals + [note]) + " |")
    return "\n".join(lines) + "\n"


def render_reproduction(src: Path, cards: list[Card], cells: list[dict]) -> None:
    """Fill the reproduction chapter: every published figure a card's cells reproduce, beside ours
    (:func:`reproduction_table`, one section per card)."""
    page = src / "book" / "reproduction.md"
    if not page.is_file():
        return
    blocks = [b for b in (reproduction_table(card, cells, f"## {card.title}") for card in cards) if b]
    body = "\n".join(blocks) if blocks else "*No card in this build reproduces a published figure.*\n"
    text = page.read_text(encoding="utf-8")
    page.write_text(text.replace(REPRODUCTION_MARK, body) if REPRODUCTION_MARK in text else text + "\n" + body,
                    encoding="utf-8")


def _fmt_num(x) -> str:
    if x is None:
        return "—"
    if isinstance(x, float):
        return f"{x:,.0f}" if x.is_integer() else f"{x:.3f}"
    if isinstance(x, int):
        return f"{x:,}"
    return _md_escape(x)


def render_build_report(src: Path, report: MatrixReport | None) -> None:
    page = src / "book" / "build_report.md"
    lines = ["# Build report", "",
             "Every run of the last `atlas book`: whether it executed or came from the run cache, its wall "
             "time, the seconds of it spent loading the model, training, answering the test items and on side "
             "measurements (perturbations, memorisation; the rest is data, scoring and plots), and the peak memory "
             "of the notebook's kernel.", ""]
    if report is None or not report.outcomes:
        lines.append("*This build rendered existing result cells without running the matrix.*")
    else:
        lines += ["| run | status | result | wall time (s) | loading / training / prediction / side (s) | "
                  "peak memory (MiB) |", "|---|---|---|---|---|---|"]
        for o in report.outcomes:
            ph = (o.extra or {}).get("phases") or {}
            split = " / ".join(f"{ph[k]:.1f}" for k in ("loading", "training", "prediction", "side")) if ph else "—"
            lines.append(f"| {md_code(o.request.label)} | {o.status} | {o.cell_status or '—'} | "
                         f"{o.seconds:.1f} | {split} | {o.peak_rss_mb if o.peak_rss_mb is not None else '—'} |")
        ran = sum(o.status == "ran" for o in report.outcomes)
        cached = sum(o.status == "cached" for o in report.outcomes)
        lines += ["", f"{len(report.outcomes)} runs: {ran} executed, {cached} from the cache, "
                      f"{len(report.failures)} failed; matrix wall time {report.seconds:.1f} s."]
    stories = [o for o in (report.stories if report else []) if o.status != "none"]
    if stories:
        lines += ["", "## Data stories", "",
                  "The data, split and caveats of each card's split version, executed once per build (or taken "
                  "from the cache) and shown on the version's data page.", "",
                  "| data story | status | wall time (s) |", "|---|---|---|"]
        lines += [f"| `{o.label}` | {o.status} | {o.seconds:.1f} |" for o in stories]
        lines += ["", f"THYME annotation audit executed {datastory.audits_executed(stories)} time(s) in this build."]
    page.write_text("\n".join(lines) + "\n", encoding="utf-8")


def render_withheld(src: Path, withheld: list[tuple[str, str]]) -> None:
    lines = ["# Withheld from this publication", "",
             "This published build leaves out what may not be published yet. A local build "
             "(`atlas book`) shows everything.", ""]
    if withheld:
        lines += ["| withheld | why |", "|---|---|"] + [f"| {w} | {_md_escape(why)} |" for w, why in withheld]
    else:
        lines.append("Nothing was withheld.")
    (src / "book" / "withheld.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


def render_toc(src: Path, card_docs: dict[str, list[dict]], dropped: set[str], extra_docs: list[str],
               model_docs: list[str] = ()) -> None:
    """Rewrite the site's _toc.yml: drop withheld/missing card pages, put each card's sub-pages, data stories
    and runs (toc entries from :func:`render_card`) under its card page."""
    toc = yaml.safe_load((src / "_toc.yml").read_text())

    def walk(entries):
        keep = []
        for e in entries:
            f = e.get("file")
            if f and (f in dropped or not _doc_exists(src, f)):
                continue
            card = Path(f).name if f and f.startswith("book/cards/") else None
            if card in card_docs and card_docs[card]:
                e = dict(e)
                e["sections"] = card_docs[card]
            for k in ("chapters", "sections"):
                if k in e and not (card in card_docs and k == "sections"):
                    e[k] = walk(e[k])
            keep.append(e)
        return keep

    _add_unlisted_cards(toc, src, card_docs, dropped)
    toc["parts"] = [dict(p, chapters=walk(p.get("chapters", []))) for p in toc.get("parts", [])]
    toc["parts"] = [p for p in toc["parts"] if p["chapters"]]
    if model_docs:
        toc["parts"].append({"caption": "Models", "chapters": [
            {"file": "book/models/index", "sections": [{"file": d} for d in model_docs]}]})
    if extra_docs:
        toc["parts"].append({"caption": "About this build", "chapters": [{"file": d} for d in extra_docs]})
    (src / "_toc.yml").write_text(yaml.safe_dump(toc, sort_keys=False), encoding="utf-8")


def _add_unlisted_cards(toc: dict, src: Path, card_docs: dict, dropped: set[str]) -> None:
    """A card page this build renders that ``_toc.yml`` does not list (a card outside the atlas, found by
    discovery) goes at the end of the part that lists the cards (a part "Cards" when none does)."""
    def listed(entries):
        return {e.get("file") for e in entries} | {f for e in entries for k in ("chapters", "sections")
                                                  for f in listed(e.get(k, []))}

    parts = toc.setdefault("parts", [])
    every = set().union(*(listed(p.get("chapters", [])) for p in parts)) if parts else set()
    new = [f"book/cards/{name}" for name in card_docs
           if f"book/cards/{name}" not in every and f"book/cards/{name}" not in dropped
           and _doc_exists(src, f"book/cards/{name}")]
    if not new:
        return
    part = next((p for p in parts if any(str(c.get("file", "")).startswith("book/cards/")
                                         for c in p.get("chapters", []))), None)
    if part is None:
        part = {"caption": "Cards", "chapters": []}
        parts.append(part)
    part["chapters"].extend({"file": f} for f in new)


def _doc_exists(src: Path, doc: str) -> bool:
    return any((src / f"{doc}{ext}").is_file() for ext in (".md", ".ipynb", ".rst"))


def render_site(paths: BuildPaths, *, publish: bool = False, report: MatrixReport | None = None,
                cards: list[Card] | None = None) -> tuple[Path, list[tuple[str, str]]]:
    src = paths.src(publish)
    before = builddir.snapshot(src)  # what the last build rendered: unchanged files keep their times below
    _copy_sources(paths, src)
    cards = cards if cards is not None else available_cards()
    # the cards this build shows (a publish build leaves out those whose licence is unconfirmed)
    shown_cards = [c for c in cards if not (publish and not c.licence_confirmed)]
    # lessons read only result cells and data: they execute in the background while the pages render
    course = start_course(src, paths, publish, shown_cards)
    failed = [f.request for f in (report.failures if report else [])]
    card_docs, dropped, withheld, shown_cells = {}, set(), [], []
    known = {c.name for c in cards}
    for page in (src / "book" / "cards").glob("*.md"):
        if page.stem not in known:
            dropped.add(f"book/cards/{page.stem}")
    for card in cards:
        if publish and not card.licence_confirmed:
            dropped.add(f"book/cards/{card.name}")
            withheld.append((f"card `{card.name}`: page, runs and result cells",
                             f"licence unconfirmed. {card.licence_note}"))
            continue
        cells = collect_cells(paths, card, publish, failed)
        if publish:
            gated = [c for c in results.read_cells(paths.results, card.name)
                     if is_gated(c)]
            for c in gated:
                label = f"{card.name}/{c['version']}/{c['model']}/{c['protocol']}"
                withheld.append((f"run {md_code(label)}",
                                 "computed on gated data (data use agreement): outputs stay local"))
        datastory.merge_extra(cells, paths.runs, card.name)  # facts of each version's data story
        story_docs = datastory.render(card, paths.runs, src)
        card_docs[card.name] = render_card(card, cells, src, failed, story_docs, publish)
        shown_cells.extend(cells)
    for doc in dropped:  # pages this build leaves out are not built: no fact of theirs is computed either
        (src / f"{doc}.md").unlink(missing_ok=True)
    render_intro(src, shown_cards, shown_cells)
    render_reproduction(src, shown_cards, shown_cells)
    methods.render_methods(src, shown_cards, shown_cells)
    model_docs = render_models(src, shown_cards, shown_cells)
    render_build_report(src, report)
    finish_course(course, withheld)  # the lessons' pages and take-home boxes, the learning path
    extra = ["book/build_report"]
    if publish:
        render_withheld(src, withheld)
        extra.append("book/withheld")
    facts.substitute_site(src, shown_cells, cache_dir=paths.build)  # {{fact:KEY}} placeholders, every page
    render_toc(src, card_docs, dropped, extra, model_docs)
    if publish:  # executed notebooks and result cells name this machine's folders: not in what is uploaded
        redact_local_paths(src, local_roots(paths, shown_cells))
    builddir.keep_unchanged(src, before)
    return src, withheld


#: files of the site tree whose text may carry local paths (executed notebooks, result cells, pages, tables)
REDACTED_SUFFIXES = (".ipynb", ".json", ".md", ".csv", ".txt")


def local_roots(paths: BuildPaths, cells=()) -> dict[str, str]:
    """This machine's folders a build may have written into notebooks and cells -> what the publish build
    says instead (paths in the checkout become relative to it). The folders of local models are private too:
    a ``source: path`` (or GGUF file) profile's location, and the folder of every local model a cell of
    ``cells`` ran become ``LOCAL_MODEL``."""
    import tempfile

    from . import sources
    from .models import load_profiles

    roots = {str(paths.results): "RESULTS_DIR", str(paths.runs): "RUNS_DIR", str(paths.build): "BUILD_DIR",
             str(sources.cache_dir()): "CACHE_DIR", sys.prefix: "PYTHON_ENV", sys.base_prefix: "PYTHON",
             tempfile.gettempdir(): "TMP", str(Path.home()): "~", str(paths.repo): "."}
    data = sources.data_dir()
    if data is not None:
        roots[str(data)] = "DATA_DIR"
    models = [p.location for p in load_profiles().values() if p.source in ("path", "gguf")]
    models += [str((c.get("spec") or {}).get("profile", {}).get("location") or "") for c in cells
               if (c.get("spec") or {}).get("profile", {}).get("source") == "path"]
    models += [c["model"] for c in cells if results.is_local_model(c.get("model", ""))]
    for m in models:
        if os.path.isabs(m):
            roots[m] = "LOCAL_MODEL"
    out = {}
    for root, name in roots.items():
        for r in {root, os.path.realpath(root)}:
            if r not in ("", os.sep) and os.path.isabs(r):
                out.setdefault(r, name)
    return out


def redact_local_paths(src: Path, roots: dict[str, str]) -> int:
    """Replace every absolute path under one of ``roots`` (folder -> name) in the site tree's text files by the
    name (the longest root first, whole path components only); returns how many files changed."""
    if not roots:
        return 0
    ordered = sorted(roots, key=len, reverse=True)
    end = r"""(?=[/\\\s"'<>),;:`|\]&]|$)"""  # a whole path component: what may follow a folder name
    pattern = re.compile("|".join(re.escape(r) + end for r in ordered))
    changed = 0
    for f in src.rglob("*"):
        if not f.is_file() or f.suffix not in REDACTED_SUFFIXES:
            continue
        try:
            text = f.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        new = pattern.sub(lambda m: roots[m.group(0)], text)
        if new != text:
            f.write_text(new, encoding="utf-8")
            changed += 1
    return changed


# -- building ---------------------------------------------------------------------------------------------

#: the file in the site tree that records what its pages were rendered from (:func:`render_key`)
RENDER_KEY = ".atlas-render-key"


def render_key(paths: BuildPaths, cards, report: MatrixReport | None) -> str:
    """sha256 over everything a site build's pages are rendered from: atlaslib's source, the book's own pages
    and configuration, every result cell and executed notebook (runs, data stories), the cards shown, the runs
    that failed in this build, the data folder and a user's profiles file. Equal keys render equal pages (the
    build report apart), so a build whose key is the last one's keeps the pages it has."""
    import hashlib
    import json

    from . import sources
    from .notebook import source_digest

    h = hashlib.sha256(json.dumps({
        "atlaslib": source_digest(), "cards": None if cards is None else sorted(c.name for c in cards),
        "failed": sorted(f.request.label for f in report.failures) if report else [],
        "data": str(sources.data_dir()), "profiles": os.environ.get("ATLAS_PROFILES"),
    }, sort_keys=True).encode())
    roots = [paths.repo / "_config.yml", paths.repo / "_toc.yml", paths.repo / "book", Path(paths.results),
             Path(paths.runs)]
    profiles = os.environ.get("ATLAS_PROFILES")
    if profiles:
        roots += [Path(p) for p in profiles.split(os.pathsep) if p]
    for root in roots:
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else []
        for f in files:
            try:
                h.update(f"{f}\0".encode() + hashlib.sha256(f.read_bytes()).digest())
            except OSError:
                h.update(f"{f}\0unreadable".encode())
    return h.hexdigest()


def rendered_with(src: Path) -> str | None:
    """The render key recorded in the site tree ``src`` by its last complete render; None when there is none."""
    try:
        return (Path(src) / RENDER_KEY).read_text(encoding="utf-8").strip() or None
    except OSError:
        return None

def jupyter_book_build(src: Path, out: Path, log=print, incremental: bool = False) -> tuple[int, list[str]]:
    """``jupyter-book build`` with warnings as errors and --keep-going; returns (exit code, warnings).
    ``incremental``: keep the last build's output and Sphinx environment, so that Sphinx reads again only the
    pages whose files changed (:func:`atlaslib.builddir.keep_unchanged` keeps the others' times); otherwise
    (or when the last build left no output or failed) the output folder is made afresh and every page read."""
    last_ok = (out / "_build" / "html" / "index.html").is_file() and (out / builddir.MARKER).is_file() and \
        (out / "_build" / ".doctrees" / "environment.pickle").is_file()
    if not (incremental and last_ok):
        builddir.fresh_folder(out)  # only a folder the atlas made is deleted
        incremental = False
    exe = Path(sys.executable).with_name("jupyter-book")
    cmd = [str(exe) if exe.exists() else "jupyter-book", "build", str(src), "--path-output", str(out),
           "-W", "-n", "--keep-going"] + ([] if incremental else ["--all"])
    proc = subprocess.run(cmd, capture_output=True, text=True)
    text = proc.stdout + proc.stderr
    warnings = [ln for ln in text.splitlines() if re.search(r"WARNING|ERROR", ln)]
    if proc.returncode != 0 and not warnings:  # an exception (e.g. a toc naming a page twice): its last line
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        cause = next((ln for ln in reversed(lines) if re.search(r"error|exception|multiple", ln, re.I)),
                     lines[-1] if lines else f"jupyter-book exited with {proc.returncode}")
        warnings = [f"jupyter-book failed: {cause}"]
    (out.parent / f"{out.name}-build.log").write_text(text, encoding="utf-8")
    return proc.returncode, warnings


def _with_stories(reqs, paths: BuildPaths, data_dir, force: bool, log, matrix) -> MatrixReport:
    """Run ``matrix()`` (the run matrix) while the data stories of its (card, version) pairs run beside it
    (:func:`atlaslib.background.in_background`): a story is one kernel (mostly one core), and no run needs a
    story, so the stories fill the cores the matrix leaves idle instead of running alone before it. The report
    carries the stories' outcomes (the build report counts them); a story's failure is raised here."""
    stories = in_background(lambda: datastory.run_stories([(r.card, r.version) for r in reqs], paths.runs,
                                                          data_dir=data_dir, force=force, log=log),
                            "atlas-data-stories")
    report = matrix()
    report.stories = stories.result()
    return report


def build(*, paths: BuildPaths | None = None, publish: bool = False, force: bool = False, run_runs: bool = True,
          data_dir=None, requests: list[RunRequest] | None = None, cards: list[Card] | None = None,
          executor: str = "serial", scheduler: str | None = None, n_workers: int | None = None,
          memory_limit=None, log=print) -> int:
    """Run the matrix, render, build. Returns the process exit code (0 only when everything succeeded).
    ``executor``: "serial" or "dask" (a LocalCluster, or the scheduler named by ``scheduler`` /
    ``$ATLAS_DASK_SCHEDULER``); the `atlas book` command uses Dask by default."""
    paths = paths or BuildPaths()
    with builddir.build_lock(paths.build):  # one build at a time in a build folder
        for folder in (paths.src(publish), paths.html_out(publish)):  # refused before anything runs
            builddir.check_replaceable(folder)
        return _build(paths, publish, force, run_runs, data_dir, requests, cards, executor, scheduler, n_workers,
                      memory_limit, log)


def _build(paths: BuildPaths, publish: bool, force: bool, run_runs: bool, data_dir, requests, cards, executor,
           scheduler, n_workers, memory_limit, log) -> int:
    report = None
    if run_runs:
        reqs = requests if requests is not None else default_requests(cards)
        report = _with_stories(reqs, paths, data_dir, force, log, lambda: run_matrix(
            reqs, paths, data_dir=data_dir, force=force, executor=executor, scheduler=scheduler,
            n_workers=n_workers, memory_limit=memory_limit, log=log))
    pages_before = builddir.snapshot(paths.src(publish))
    key = None if publish else render_key(paths, cards, report)  # a publish build always renders afresh
    out = paths.html_out(publish)
    if key is not None and nothing_ran(report) and site_built_with(out) == key == rendered_with(paths.src(publish)):
        log("site: nothing changed since the last build (no run or data story executed, every page the same); "
            "kept as it was (its build report describes the build that made it)")
        log(f"book built: {out / '_build' / 'html' / 'index.html'}")
        return 0
    if key is not None and rendered_with(paths.src(publish)) == key:
        src, withheld = paths.src(publish), []
        render_build_report(src, report)  # the one page that tells this build apart
        log("pages: nothing they read has changed since the last build; only the build report is written again")
    else:
        src, withheld = render_site(paths, publish=publish, report=report, cards=cards)
        if key is not None:
            results.atomic_write_text(src / RENDER_KEY, key + "\n")
    mark_site_built(out, None)  # until this build succeeds, the site it leaves is not one to keep as is
    # Sphinx reads again only what changed when the site has the same files as last time; a publish build, a
    # page added or removed (its old HTML would stay), or a failed last build is built afresh
    same_files = bool(pages_before) and set(pages_before) == set(builddir.snapshot(src))
    code, warnings = jupyter_book_build(src, out, log, incremental=not publish and same_files)
    html_dir = out / "_build" / "html"
    for w in warnings:
        log(w)
    status = 0
    broken = linkcheck.check(html_dir) if html_dir.is_dir() else []
    for problem in broken:
        log(f"broken link: {problem}")
    if broken:
        status = 1
    if code != 0 or warnings:
        log(f"Jupyter Book build failed ({len(warnings)} warnings/errors; warnings are errors); "
            f"log: {out.parent / (out.name + '-build.log')}")
        status = 1
    for o in (report.stories if report else []):
        if o.status == "failed":
            log(f"data story {o.label} failed: {o.error}")
            status = 1
    if report and report.failures:
        log(f"{len(report.failures)} run(s) failed and are not rendered as results:")
        for f in report.failures:
            log(f"  {f}")
        status = 1
    if publish:
        log(f"publish build: withheld {len(withheld)} item(s): " + "; ".join(w for w, _ in withheld))
    if status == 0:
        if key is not None:
            mark_site_built(out, key)
        log(f"book built: {html_dir / 'index.html'}")
    return status


#: the file beside a site's HTML that holds the render key of the last build that made that HTML without a problem
SITE_OK = ".atlas-site-ok"


def nothing_ran(report: MatrixReport | None) -> bool:
    """True when this build executed no run and no data story (everything was served from the cache)."""
    if report is None:
        return True
    return all(o.status == "cached" for o in report.outcomes) and not report.failures and \
        all(o.status in ("cached", "none") for o in (report.stories or []))


def site_built_with(out: Path) -> str | None:
    """The render key of the last build that made the HTML under ``out`` and passed every check; None when there
    is none (or its HTML is gone)."""
    try:
        if (Path(out) / "_build" / "html" / "index.html").is_file():
            return (Path(out) / SITE_OK).read_text(encoding="utf-8").strip()
    except OSError:
        pass
    return None


def mark_site_built(out: Path, key: str | None) -> None:
    """Record ``key`` as the render key of the HTML under ``out`` (None: forget it, before a build that may fail).
    A marker that cannot be written costs the next build its shortcut, never this build."""
    marker = Path(out) / SITE_OK
    try:
        if key is None:
            marker.unlink(missing_ok=True)
        else:
            results.atomic_write_text(marker, key + "\n")
    except OSError:
        pass
