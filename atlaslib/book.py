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
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import yaml

from . import linkcheck, plots, results
from .background import in_background
from .pages import analysis as analysis_page
from .pages import datastory
from .pages import departures, facts, tables  # noqa: F401  (departures: its facts provider)
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
    intervals beside degenerate ones, one footnote per reason), then the tie group, rank interval and
    P(rank 1) of every ok run and the intervals that assume clusters (see :mod:`atlaslib.pages.leaderboard`)."""
    from .pages import leaderboard as lb
    from .pages.comparisons import comparison_for

    if comparison is None:
        comparison = comparison_for(card, version, cells)
    comp = None if isinstance(comparison, str) else comparison
    return lb.leaderboard_tables(card, version, cells, page_dir, src, failed, comp, short_reason)


# -- rendering the site tree -----------------------------------------------------------------------------

def _copy_sources(paths: BuildPaths, src: Path) -> None:
    if src.exists():
        shutil.rmtree(src)
    src.mkdir(parents=True)
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


def render_card(card: Card, cells: list[dict], src: Path, failed: list[RunRequest]) -> list[str]:
    """Copy the card's executed notebooks and JSON into the site tree and fill its page; return the
    notebooks' doc paths (for the toc)."""
    docs = []
    for cell in cells:
        rel = Path("book/runs") / card.name / cell["version"] / results.slug(cell["model"])
        (src / rel).mkdir(parents=True, exist_ok=True)
        nb_rel = rel / f"{cell['protocol']}.ipynb" if cell["_notebook_src"] is not None else None
        if nb_rel is not None:
            story = (src / datastory.site_doc(card.name, cell["version"]).with_suffix(".ipynb")).is_file()
            note = ((datastory.run_link_markdown(cell["version"]) + " ") if story else "") + (
                f"The code is the card's notebook, the same for every run: take it as `.md` or `.ipynb` from the "
                f"[card page](../../../../cards/{card.name}.md).")
            _copy_run_notebook(cell["_notebook_src"], src / nb_rel,
                               f"{card.title.split(':')[0]} run: {cell['model']} · {cell['protocol']} · {cell['version']}",
                               note, explorer_errors_note(cell, src / rel, src))
        json_rel = Path("book/results") / card.name / cell["version"] / results.slug(cell["model"]) / f"{cell['protocol']}.json"
        (src / json_rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(cell["_path"], src / json_rel)
        cell["_notebook_rel"], cell["_json_rel"] = (str(nb_rel) if nb_rel else None), str(json_rel)
        if nb_rel is not None:
            docs.append(str(nb_rel.with_suffix("")))
    page = src / card.page
    if not page.is_file():  # a card without a page in book/cards/: its package's page.md, else its title
        page.parent.mkdir(parents=True, exist_ok=True)
        own = card_page_source(card)
        page.write_text(own.read_text(encoding="utf-8") if own else f"# {card.title}\n\n{LEADERBOARD_MARK}\n",
                        encoding="utf-8")
    text = page.read_text(encoding="utf-8")
    block = card_results_markdown(card, cells, page.parent, src, failed)
    if LEADERBOARD_MARK in text:
        text = text.replace(LEADERBOARD_MARK, block)
    else:
        text = text.rstrip() + "\n\n" + block
    if departures.MARK in text:  # the card's declared departures (Card.departures), where its page asks for them
        text = text.replace(departures.MARK, departures.departures_markdown(card))
    if not card.licence_confirmed:
        text = _insert_after_title(text, (
            "```{warning}\n**Local evaluation only.** " + card.licence_note +
            " The numbers on this page may not be cited or republished until the licence is confirmed.\n```\n"))
    page.write_text(text, encoding="utf-8")
    return sorted(docs)


# -- item explorers: one sub-page per card version ---------------------------------------------------------

def render_explorers(card: Card, cells: list[dict], src: Path, publish: bool) -> list[str]:
    """The item explorer of each split version with ok runs (:mod:`atlaslib.pages.explorer`): its doc paths,
    one more sub-page of the card."""
    from .pages import explorer

    docs = [explorer.render(card, v, cells, src, publish=publish) for v in card.versions]
    return [d for d in docs if d]


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
                          failed: list[RunRequest]) -> str:
    parts = ["```{seealso}\nHow splits are drawn, what each protocol asks of a model, and how every metric "
             "and interval is computed: [splits](../methods/splits.md), [protocols](../methods/protocols.md), "
             "[metrics and intervals](../methods/metrics.md).\n```\n"]
    fig_dir = page_dir / "_figures"
    from .pages import comparisons
    for version in card.versions:
        parts.append(f"## Leaderboard: `{version}`\n")
        vcells = [c for c in cells if c["version"] == version]
        if vcells and vcells[0].get("split"):
            s = vcells[0]["split"]
            parts.append(f"Split `{version}`: {s.get('n_test', '?')} test items, {s.get('n_train', '?')} train "
                         f"items; manifest sha256 `{str(s.get('hash', ''))[:12]}…`.\n")
        parts.append(datastory.card_link(card, version, src))
        comp = comparisons.comparison_for(card, version, cells)
        parts.append(leaderboard_markdown(card, version, cells, page_dir, src, failed, comparison=comp))
        for base in card.metrics:
            frame = forest_frame(card, vcells, base)
            if len(frame.dropna(subset=["value", "ci_low", "ci_high"])) < 2:
                continue  # one run (or none with an interval, e.g. pass/fail gates): the table says it all
            fig_dir.mkdir(parents=True, exist_ok=True)
            name = f"forest-{card.name}-{version}-{base}.png"
            fig = plots.forest(frame, "value", "ci_low", "ci_high", "label", title=f"{base} · {version}",
                               higher_is_better=card.higher_is_better.get(base, True),
                               xlabel=f"{base.replace('_', ' ')} (point estimate and 95 % interval)")
            fig.savefig(fig_dir / name, dpi=110)
            plt.close(fig)
            dagger = " † marks a model trained on data that overlaps this card." if frame["label"].str.endswith(
                "†").any() else ""
            parts.append(f"```{{figure}} _figures/{name}\n:alt: forest plot of {base} on {version}\n\n"
                         f"`{base}` on `{version}` with the declared 95 % intervals, models ordered by the point "
                         f"estimate; the axis is zoomed to the intervals.{dagger}\n```\n")
        parts.append(comparisons.render(card, version, cells, page_dir, src, comp))
        parts.append(analysis_page.render(card, version, cells, page_dir, src))
    comparisons.fill_metrics_chapter(src, card, cells)
    repro = reproduction_markdown(cells)
    if repro:
        parts.append(repro)
    return "\n".join(parts)


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
        blocks.append(f"### {c['model']} on the whole kit\n\n" + frame.to_markdown(index=False) + "\n")
    if not blocks:
        return ""
    return "## Reproduction\n\n" + "\n".join(blocks)


def render_intro(src: Path, cards: list[Card], cells: list[dict] = ()) -> None:
    """The home page's 'cards at a glance' table, from the card registry and the test sizes the result
    cells record per split version."""
    page = src / "book" / "intro.md"
    lines = ["| card | task | data | licence | versions (test items) |", "|---|---|---|---|---|"]
    for c in cards:
        lic = "cleared for publication" if c.licence_confirmed else "unconfirmed: local evaluation only"
        if c.gated:
            lic += "; data gated"
        sizes = {}
        for cell in cells:
            n = (cell.get("split") or {}).get("n_test")
            if cell["card"] == c.name and n is not None:
                sizes.setdefault(cell["version"], n)
        versions = ", ".join(f"`{v}`" + (f" ({sizes[v]:,})" if v in sizes else "") for v in c.versions)
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
        lines = [f"# {name}", ""]
        if prof is not None:
            lines += [prof.description.strip(), "",
                      "| field | value |", "|---|---|",
                      f"| source | {prof.source} (`{prof.location}`) |",
                      f"| revision | `{prof.revision}` |" if prof.revision else "| revision | — |",
                      f"| capabilities | {', '.join(f'`{c}`' for c in prof.capabilities)} |",
                      f"| trained on | {', '.join(prof.trained_on) or '—'} |",
                      f"| label map | {_md_escape(', '.join(f'{k} → {v}' for k, v in prof.label_map.items())) or '—'} |",
                      ""]
            source, caps = prof.source, ", ".join(prof.capabilities)
        elif mine and all(_is_external(c) for c in mine):
            ext = mine[0]["spec"]["profile"]
            lines += [_md_escape(ext.get("description") or ""), "",
                      "Predictions made outside the atlas and scored by `atlas score` with each card's own metrics "
                      "and intervals (no notebook); each result cell records the predictions' sha256.", ""]
            source, caps = "external predictions", "—"
        else:
            owners = sorted({c["card"] for c in mine})
            lines += [f"A baseline or predictor defined by the card{'s' if len(owners) > 1 else ''} "
                      f"{', '.join(owners)} (in `atlaslib/cards/`), not a registry profile.", ""]
            source, caps = "card baseline", "—"
        if mine:
            lines += ["## Result cells", "", "The first leaderboard metric of the card that the run has a value for "
                      "(a baseline that addresses only some sub-tasks shows the first of those).", "",
                      "| card | version | protocol | headline metric | status |",
                      "|---|---|---|---|---|"]
            for c in sorted(mine, key=lambda c: (c["card"], c["version"], c["protocol"])):
                card = by_card.get(c["card"])
                base = headline_metric(card, c) if card else ""
                val = fmt_metric(c["metrics"].get(f"{base}_{c['protocol']}")) if c["status"] == "ok" else \
                    f"not run: {_md_escape(short_reason(c.get('reason')))}"
                lines.append(f"| [{c['card']}](../cards/{c['card']}.md) | `{c['version']}` | {c['protocol']} | "
                             f"{base}: {_md_escape(val)} | {c['status']} |")
        else:
            lines.append("*No result cells in this build.*")
        (out_dir / f"{slug_}.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
        docs.append(f"book/models/{slug_}")
        index.append(f"| [{_md_escape(name)}]({slug_}.md) | {source} | {caps} | {len(mine)} |")
    (out_dir / "index.md").write_text("\n".join(index) + "\n", encoding="utf-8")
    return docs


def headline_metric(card: Card, cell: dict) -> str:
    """The metric a model page shows for a cell: the card's first leaderboard metric with a value in the cell
    (TempEval's memorize has no CONTAINS score, so its span F1 is shown), else the card's primary metric."""
    for base in card.metrics:
        if (cell.get("metrics", {}).get(f"{base}_{cell['protocol']}") or {}).get("value") is not None:
            return base
    return card.metrics[0]


def render_reproduction(src: Path, cards: list[Card], cells: list[dict]) -> None:
    """Fill the reproduction chapter: every published figure a card's cells reproduce, beside ours
    (rows from ``extra["reproduction_rows"]``, deduplicated per card and figure)."""
    page = src / "book" / "reproduction.md"
    if not page.is_file():
        return
    blocks = []
    for card in cards:
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
            continue
        cols = ["figure", "published"] + (systems or ["ours"]) + ["note"]
        prev_note = None
        lines = [f"## {card.title}", "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        for fig, e in figures.items():
            vals = [_fmt_num(e["ours"].get(sys_)) if sys_ in e["ours"] else
                    (_fmt_num(e["ours"].get("loader")) if "loader" in e["ours"] else "—") for sys_ in (systems or ["ours"])]
            if not systems:
                vals = [_fmt_num(next(iter(e["ours"].values())))]
            note = _md_escape(e["note"]) + (f" ({_md_escape(e['source'])})" if e["source"] else "")
            note, prev_note = ("as above" if note == prev_note else note), note
            lines.append("| " + " | ".join([_md_escape(fig), _fmt_num(e["published"])] + vals + [note]) + " |")
        blocks.append("\n".join(lines) + "\n")
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
             "time and the peak memory of the notebook's kernel.", ""]
    if report is None or not report.outcomes:
        lines.append("*This build rendered existing result cells without running the matrix.*")
    else:
        lines += ["| run | status | result | wall time (s) | peak memory (MiB) |", "|---|---|---|---|---|"]
        for o in report.outcomes:
            lines.append(f"| `{o.request.label}` | {o.status} | {o.cell_status or '—'} | "
                         f"{o.seconds:.1f} | {o.peak_rss_mb if o.peak_rss_mb is not None else '—'} |")
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


def render_toc(src: Path, card_docs: dict[str, list[str]], dropped: set[str], extra_docs: list[str],
               model_docs: list[str] = ()) -> None:
    """Rewrite the site's _toc.yml: drop withheld/missing card pages, add run notebooks under their card."""
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
                e["sections"] = [{"file": d} for d in card_docs[card]]
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
                withheld.append((f"run `{card.name}/{c['version']}/{c['model']}/{c['protocol']}`",
                                 "computed on gated data (data use agreement): outputs stay local"))
        datastory.merge_extra(cells, paths.runs, card.name)  # facts of each version's data story
        story_docs = datastory.render(card, paths.runs, src)
        card_docs[card.name] = story_docs + render_card(card, cells, src, failed) + render_explorers(
            card, cells, src, publish)
        shown_cells.extend(cells)
    for doc in dropped:  # pages this build leaves out are not built: no fact of theirs is computed either
        (src / f"{doc}.md").unlink(missing_ok=True)
    render_intro(src, shown_cards, shown_cells)
    render_reproduction(src, shown_cards, shown_cells)
    model_docs = render_models(src, shown_cards, shown_cells)
    render_build_report(src, report)
    finish_course(course, withheld)  # the lessons' pages and take-home boxes, the learning path
    extra = ["book/build_report"]
    if publish:
        render_withheld(src, withheld)
        extra.append("book/withheld")
    facts.substitute_site(src, shown_cells, cache_dir=paths.build)  # {{fact:KEY}} placeholders, every page
    render_toc(src, card_docs, dropped, extra, model_docs)
    return src, withheld


# -- building ---------------------------------------------------------------------------------------------

def jupyter_book_build(src: Path, out: Path, log=print) -> tuple[int, list[str]]:
    """``jupyter-book build`` with warnings as errors and --keep-going; returns (exit code, warnings)."""
    if out.exists():
        shutil.rmtree(out)
    exe = Path(sys.executable).with_name("jupyter-book")
    cmd = [str(exe) if exe.exists() else "jupyter-book", "build", str(src), "--path-output", str(out),
           "-W", "-n", "--keep-going", "--all"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    text = proc.stdout + proc.stderr
    warnings = [ln for ln in text.splitlines() if re.search(r"WARNING|ERROR", ln)]
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
    report = None
    if run_runs:
        reqs = requests if requests is not None else default_requests(cards)
        report = _with_stories(reqs, paths, data_dir, force, log, lambda: run_matrix(
            reqs, paths, data_dir=data_dir, force=force, executor=executor, scheduler=scheduler,
            n_workers=n_workers, memory_limit=memory_limit, log=log))
    src, withheld = render_site(paths, publish=publish, report=report, cards=cards)
    out = paths.html_out(publish)
    code, warnings = jupyter_book_build(src, out, log)
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
        log(f"book built: {html_dir / 'index.html'}")
    return status

