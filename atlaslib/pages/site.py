"""The site-wide pages, rendered from the cards and the result cells: the home page's cards table
(:func:`render_intro`), a page per model (:func:`render_models`), the reproduction chapter
(:func:`render_reproduction`), the build report (:func:`render_build_report`), a publish build's withheld page
(:func:`render_withheld`) and the site's ``_toc.yml`` (:func:`render_toc`). :mod:`atlaslib.book` calls these while
it renders the site; a card's own pages are :mod:`atlaslib.pages.card_pages`.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from .. import results
from ..escape import md, md_code, public_location, table_cell
from . import datastory, departures
from ..cards import Card
from .card_pages import REPRODUCTION_MARK
from .card_results import fmt_metric, reproduction_table, short_reason

if TYPE_CHECKING:
    from ..matrix import MatrixReport


CARDS_MARK = "<!-- cards -->"


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
        lines.append(f"| [{table_cell(c.title)}](cards/{c.name}.md) | {table_cell(c.task)} | {table_cell(c.data)} "
                     f"| {lic} | {versions} |")
    text = page.read_text(encoding="utf-8").replace(CARDS_MARK, "\n".join(lines))
    page.write_text(text, encoding="utf-8")


def render_models(src: Path, cards: list[Card], cells: list[dict]) -> list[str]:
    """One page per model: its profile (source, revision, capabilities, training data) and every cell it has
    in this build. Card-level baselines (not registry profiles) get a page too. Returns the doc paths."""
    from ..models import load_profiles

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
                      f"| trained or tuned on (the datasets the cards check for overlap) | "
                      f"{', '.join(md(t) for t in prof.trained_on) or 'none declared'} |",
                      f"| overlaps a card's data | {card_overlaps(prof.trained_on)} |",
                      f"| label map | {md(', '.join(f'{k} → {v}' for k, v in prof.label_map.items())) or '—'} |",
                      ""]
            source, caps = prof.source, ", ".join(prof.capabilities)
        elif mine and all(results.is_external(c) for c in mine):
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
            from . import rowinfo

            lines += ["## Result cells", "", "The first leaderboard metric of the card that the run has a value for "
                      "(a baseline that addresses only some sub-tasks shows the first of those). Prediction items per second: "
                      + rowinfo.speed_note(mine), "",
                      "| card | version | protocol | headline metric | prediction items/s | status |",
                      "|---|---|---|---|---|---|"]
            for c in sorted(mine, key=lambda c: (c["card"], c["version"], c["protocol"])):
                card = by_card.get(c["card"])
                base = headline_metric(card, c) if card else ""
                val = fmt_metric(c["metrics"].get(f"{base}_{c['protocol']}")) if c["status"] == "ok" else \
                    f"not run: {md(short_reason(c.get('reason')))}"
                mark = rowinfo.contamination_mark(c)
                status = c["status"] + (f" · ◊ {md(mark)}" if mark else "")
                lines.append(f"| [{c['card']}](../cards/{c['card']}.md) | `{c['version']}` | {c['protocol']} | "
                             f"{base}: {val} | {rowinfo.speed_cell(c)} | {status} |")
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
        rescored = sum(o.status == "re-scored" for o in report.outcomes)  # stored predictions, scored again
        lines += ["", f"{len(report.outcomes)} runs: {ran} executed, {cached} from the cache, "
                      + (f"{rescored} re-scored from their stored predictions, " if rescored else "")
                      + f"{len(report.failures)} failed; matrix wall time {report.seconds:.1f} s."]
        from ..matrix import dominant_runs

        top = dominant_runs(report)
        if top:
            lines += ["", f"Where the time went: these executed runs hold {sum(t[2] for t in top):.0%} of the executed "
                          f"runs' summed seconds (longest first).", "", "| run | wall time (s) | share |", "|---|---|---|"]
            lines += [f"| {md_code(label)} | {s:,.1f} | {sh:.1%} |" for label, s, sh in top]
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
        lines += ["| withheld | why |", "|---|---|"] + [f"| {w} | {md(why)} |" for w, why in withheld]
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


def card_overlaps(trained_on) -> str:
    """Which cards a model's declared training data overlaps, by each card's own overlap rule
    (:meth:`atlaslib.cards.Card.overlap`): ``negex (negex-kit-triggers)``, or "none of the cards" when none does."""
    from ..cards import available_cards

    found = [(card, card.overlap(trained_on)) for card in available_cards()]
    hits = [f"{md(card.name)} ({', '.join(md(t) for t in marks)})" for card, marks in found if marks]
    return "; ".join(hits) or "none of the cards"
