"""A card's pages: the card page and its sub-pages, rendered from result cells into the site tree.

:func:`render_card` copies a card's executed notebooks and result JSON files into the site tree, fills the card
page with its leaderboards (one per split version, never merged), forest plots and paired comparisons where the
line ``<!-- leaderboard -->`` stands, and writes the card's sub-pages (:data:`SUBPAGES`, more with
:func:`register_subpage`) and each version's runs page; an unlicensed card's pages get a "local evaluation only"
banner. :mod:`atlaslib.book` calls it while it renders the site; the site-wide pages are in
:mod:`atlaslib.pages.site`.

This module puts a card's pages together and writes them; the Markdown blocks they hold from the cells
(leaderboards, forest plots, ties, reproduced figures) are :mod:`atlaslib.pages.card_results`, and the runs'
notebooks and JSON copied into the site tree with each version's runs page are :mod:`atlaslib.pages.run_notebooks`.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from . import analysis as analysis_page
from . import datastory, departures
from . import seeds as seeds_page
from .card_results import (TIE_SHARE, fmt_metric, forest_markdown, leaderboard_markdown,  # noqa: F401  (TIE_SHARE,
                           reproduction_markdown, reproduction_table, short_title,       # fmt_metric and tied_resamples
                           tied_resamples, ties_markdown)                                 # re-exported for callers)
from .run_notebooks import copy_runs, render_runs_index, run_title
from ..cards import Card, card_page_source
from ..registries import Registry

if TYPE_CHECKING:
    from ..runner import RunRequest


LEADERBOARD_MARK = "<!-- leaderboard -->"
REPRODUCTION_MARK = "<!-- reproduction -->"


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


#: The sub-pages of every card, ``(slug, per_version)`` -> :class:`SubPage`, in sidebar order within each level
#: (the card-level ones are shown first, then each version's). More can be added with :func:`register_subpage`.
SUBPAGES: Registry[SubPage] = Registry("sub-page", show=lambda key: repr(key[0]))


def register_subpage(page: SubPage, before: str | None = None) -> None:
    """Add a sub-page to every card (at the end of its level, or before the page of its level whose slug is
    ``before``); a slug is registered once per level."""
    SUBPAGES.add((page.slug, page.per_version), page,
                 before=None if before is None else (before, page.per_version))


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
    from . import robustness

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


def render_card(card: Card, cells: list[dict], src: Path, failed: list[RunRequest],
                story_docs: list[str] = (), publish: bool = False) -> list[dict]:
    """Copy the card's executed notebooks and JSON into the site tree, fill its page and write its sub-pages;
    return the toc sections under the card page: card-level sub-pages, then per version (the card's
    leaderboard version first) its sub-pages, its data story and its runs page with the run notebooks."""
    copy_runs(card, cells, src)
    sections: list[dict] = []
    card_level = [p for p in SUBPAGES.values() if not p.per_version]
    made: dict[tuple, str] = {}
    for p in card_level:
        doc = _render_subpage(p, card, None, cells, src, failed, publish)
        if doc:
            made[(p.slug, None)] = doc
            sections.append({"file": doc})
    for version in card.page_versions:
        for p in (p for p in SUBPAGES.values() if p.per_version):
            doc = _render_subpage(p, card, version, cells, src, failed, publish)
            if doc:
                made[(p.slug, version)] = doc
                sections.append({"file": doc})
        story = str(datastory.site_doc(card.name, version))
        if story in story_docs:
            made[("data", version)] = story
            sections.append({"file": story, "title": f"Data: {version}"})
        runs = render_runs_index(card, version, cells, src)
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
    from .comparisons import comparison_for
    comps = {version: comparison_for(card, version, cells) for version in card.page_versions}  # once per version
    block = card_results_markdown(card, cells, page.parent, src, failed, made, comps)
    if LEADERBOARD_MARK in text:
        text = text.replace(LEADERBOARD_MARK, block)
    else:
        text = text.rstrip() + "\n\n" + block
    table = departures.departures_markdown(card)
    text = text.replace(departures.MARK, table) if departures.MARK in text else text.rstrip() + "\n\n" + table
    more = _more_markdown(card, made, page.parent, src, card_level)
    text = text.replace(SUBPAGES_MARK, more) if SUBPAGES_MARK in text else _insert_after_title(text, more)
    from .summary import card_summary   # first on the page, right after the title (and the licence banner)
    text = _insert_after_title(text, card_summary(card, cells, comps))
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
    parts = [_link(src, page_dir, made[(p.slug, version)], p.link or p.slug) for p in SUBPAGES.values()
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
    from . import explorer

    doc = explorer.render(ctx.card, ctx.version, ctx.cells, ctx.src, publish=ctx.publish)
    if doc and not ctx.card.licence_confirmed:   # the card's other pages carry the same banner
        page = ctx.src / f"{doc}.md"
        page.write_text(_insert_after_title(page.read_text(encoding="utf-8"), _licence_banner(ctx.card)),
                        encoding="utf-8")
    return doc or None


def _insert_after_title(text: str, block: str) -> str:
    m = re.search(r"^# .*\n", text, flags=re.M)
    if not m:
        return block + "\n" + text
    return text[:m.end()] + "\n" + block + "\n" + text[m.end():]


def card_results_markdown(card: Card, cells: list[dict], page_dir: Path, src: Path,
                          failed: list[RunRequest], made: dict | None = None, comps: dict | None = None) -> str:
    """Per split version, the card's leaderboard version first: the leaderboard, its forest plots and the
    paired comparisons, with links to the version's sub-pages. ``comps``: version ->
    :func:`atlaslib.pages.comparisons.comparison_for` where the caller computed it (the card page shares it with
    its summary); a version not in it is computed here."""
    made = made or {}
    parts = ["```{seealso}\nHow splits are drawn, what each protocol asks of a model, and how every metric "
             "and interval is computed: [splits](../methods/splits.md), [protocols](../methods/protocols.md), "
             "[metrics and intervals](../methods/metrics.md).\n```\n"]
    from . import comparisons
    from . import leaderboard as lb
    rule = lb.rule_markdown(card, cells)     # the decision rule, once per card: each version's ranks refer to it
    if rule:
        parts.append(rule + "\n" + comparisons.pairs_rule(card))
    for version in card.page_versions:
        parts.append(f"## Leaderboard: `{version}`\n")
        vcells = [c for c in cells if c["version"] == version]
        if vcells and vcells[0].get("split"):
            s = vcells[0]["split"]
            parts.append(f"Split `{version}`: {s.get('n_test', '?')} test items, {s.get('n_train', '?')} train "
                         f"items; manifest sha256 `{str(s.get('hash', ''))[:12]}…`.\n")
        parts.append(_version_links(card, version, made, page_dir, src))
        comp = comparisons.comparison_of(card, version, cells, comps)
        parts.append(leaderboard_markdown(card, version, cells, page_dir, src, failed, comparison=comp,
                                          rule=not rule))
        parts.append(forest_markdown(card, version, vcells, page_dir, card.metrics[:1]))
        parts.append(comparisons.render(card, version, cells, page_dir, src, comp, rule=not rule))
        parts.append(ties_markdown(card, comp))
    comparisons.fill_metrics_chapter(src, card, cells, comps)
    return "\n".join(parts)


def _intervals_body(ctx: PageContext) -> str | None:
    body = forest_markdown(ctx.card, ctx.version, ctx.version_cells, ctx.page_dir, ctx.card.metrics[1:])
    if not body:
        return None
    return ("The leaderboard's other metrics on this split version, each with its declared 95 % interval per run "
            "(the card page plots the primary metric). Overlapping intervals do not show that two runs are alike: "
            "the paired comparisons on the card page answer that.\n\n" + body)
