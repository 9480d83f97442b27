"""A card's pages: the card page and its sub-pages, rendered from result cells into the site tree.

:func:`render_card` copies a card's executed notebooks and result JSON files into the site tree, fills the card
page with its leaderboards (one per split version, never merged), forest plots and paired comparisons where the
line ``<!-- leaderboard -->`` stands, and writes the card's sub-pages (:data:`SUBPAGES`, more with
:func:`register_subpage`) and each version's runs page; an unlicensed card's pages get a "local evaluation only"
banner. :mod:`atlaslib.book` calls it while it renders the site; the site-wide pages are in
:mod:`atlaslib.pages.site`.
"""
from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import pandas as pd

from .. import plots, results
from ..escape import md, table_cell
from . import analysis as analysis_page
from . import datastory, departures, tables
from . import seeds as seeds_page
from ..cards import Card, card_page_source
from ..registries import Registry

if TYPE_CHECKING:
    from ..runner import RunRequest


LEADERBOARD_MARK = "<!-- leaderboard -->"
REPRODUCTION_MARK = "<!-- reproduction -->"


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


def leaderboard_markdown(card: Card, version: str, cells: list[dict], page_dir: Path, src: Path,
                         failed: list[RunRequest] = (), comparison=None, rule: bool = True) -> str:
    """The leaderboard of one (card, version): the card's metrics with their declared intervals (exact
    intervals beside degenerate ones, one footnote per reason), then per band (rows of one training regime;
    overlap-flagged rows not ranked) the rows not distinguishable from the best, rank interval and P(rank 1)
    of every ok run and the intervals that assume clusters (see :mod:`atlaslib.pages.leaderboard`)."""
    from . import leaderboard as lb
    from .comparisons import comparison_for

    if comparison is None:
        comparison = comparison_for(card, version, cells)
    comp = None if isinstance(comparison, str) else comparison
    return lb.leaderboard_tables(card, version, cells, page_dir, src, failed, comp, short_reason, rule=rule)


# -- a run's executed notebook in the site tree ----------------------------------------------------------

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


#: The sub-pages of every card, ``(slug, per_version)`` -> :class:`SubPage`, in sidebar order within each level
#: (the card-level ones are shown first, then each version's). More can be added with :func:`register_subpage`.
SUBPAGES: Registry[SubPage] = Registry("sub-page", show=lambda key: repr(key[0]))


def register_subpage(page: SubPage, before: str | None = None) -> None:
    """Add a sub-page to every card (at the end of its level, or before the page of its level whose slug is
    ``before``); a slug is registered once per level."""
    SUBPAGES.add((page.slug, page.per_version), page,
                 before=None if before is None else (before, page.per_version))


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


def explorer_errors_note(cell: dict, page_dir: Path, src: Path) -> str:
    """The line under a run page's error tables: the run's errors in its version's item explorer."""
    from . import explorer

    return explorer.errors_markdown(cell, page_dir, src)


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
        comp = comps[version] if comps and version in comps else comparisons.comparison_for(card, version, cells)
        parts.append(leaderboard_markdown(card, version, cells, page_dir, src, failed, comparison=comp,
                                          rule=not rule))
        parts.append(forest_markdown(card, version, vcells, page_dir, card.metrics[:1]))
        parts.append(comparisons.render(card, version, cells, page_dir, src, comp, rule=not rule))
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
    """Forest plots per metric of ``bases`` on ``version``, one per band (:func:`atlaslib.metrics.framing.bands`:
    rows of one training regime and condition; overlap-flagged rows in a "not ranked" band of their own), as the
    ranks are: a figure never sets rows of different bands side by side. A band with fewer than two intervals of a
    metric gets none (the table says it all). Figures are written under ``page_dir/_figures``; "" when none."""
    from ..metrics import framing as F

    parts = []
    fig_dir = page_dir / "_figures"
    ok = [c for c in vcells if c.get("status", "ok") == "ok"]
    bands = F.bands(card, ok)
    for base in bases:
        for k, (band, mine) in enumerate(bands):
            frame = forest_frame(card, mine, base)
            if len(frame.dropna(subset=["value", "ci_low", "ci_high"])) < 2:
                continue  # one run (or none with an interval, e.g. pass/fail gates): the table says it all
            fig_dir.mkdir(parents=True, exist_ok=True)
            name = f"forest-{card.name}-{version}-{base}" + (f"-{k}" if k else "") + ".png"
            fig = plots.forest(frame, "value", "ci_low", "ci_high", "label", title=f"{base} · {version} · {band}",
                               higher_is_better=card.higher_is_better.get(base, True),
                               xlabel=f"{base.replace('_', ' ')} (point estimate and 95 % interval)")
            plots.save(fig, fig_dir / name)
            why = (" Not ranked: † marks a model trained on data that overlap this card's test data."
                   if band == F.NOT_RANKED else "")
            parts.append(f"```{{figure}} _figures/{name}\n:alt: forest plot of {base} on {version}, {md(band)}\n\n"
                         f"`{base}` on `{version}`, {md(band)}, with the declared 95 % intervals, models ordered by "
                         f"the point estimate; the axis is zoomed to the intervals. One figure per band, as the rows "
                         f"are ranked.{why}\n```\n")
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
        note = table_cell(e["note"]) + (f" ({table_cell(e['source'])})" if e["source"] else "")
        note, prev_note = ("as above" if note == prev_note else note), note
        lines.append("| " + " | ".join([table_cell(fig), _fmt_num(e["published"])] + vals + [note]) + " |")
    return "\n".join(lines) + "\n"


def _fmt_num(x) -> str:
    if x is None:
        return "—"
    if isinstance(x, float):
        return f"{x:,.0f}" if x.is_integer() else f"{x:.3f}"
    if isinstance(x, int):
        return f"{x:,}"
    return table_cell(x)
