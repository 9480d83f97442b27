"""The item explorer page of one (card, split version): the table of :mod:`atlaslib.analysis.explorer`,
interactive in the static page, and as a CSV download.

The table is an `itables <https://mwouts.github.io/itables/>`_ DataTable in its offline mode (no
network): the DataTables bundle that ships inside the pinned itables package is written once into the
site's ``_static/itables/`` as a classic script (:func:`write_assets`) and loaded from there by every
explorer page, so the pages share one cached copy and open from a web server or straight from disk.
``book/_static/atlas-explorer.js`` is the glue: the one-click filters (one run right and another wrong, a
run's errors, every run wrong, runs disagree, one slice) and the filters a link carries in its query string
(:func:`explorer_link`), applied as DataTables fixed column searches beside the table's own search box,
sorting and column filters.

A run trained with several seeds is shown as its seeds' majority, the rule of :mod:`atlaslib.analysis.explorer`
that the page states in prose (:func:`_seeds_prose`); its per-seed columns are shown only, never offered to the
filters.

A publish build (and any gated cell) shows item ids only: no input text, no rule trigger phrase.
"""
from __future__ import annotations

import html
import json
import os
import re
from pathlib import Path
from urllib.parse import urlencode

import pandas as pd

from ..analysis import explorer as EX
from ..escape import md_code

#: the page of (card, version), beside the version's data page and its run pages
PAGE_NAME = "explorer"
GLUE_JS = "atlas-explorer.js"
ASSET_DIR = "itables"
PAGE_LENGTH = 25


def explorer_doc(card: str, version: str) -> Path:
    """The explorer's doc path in the site tree (no suffix), as the table of contents lists it."""
    return Path("book/runs") / card / version / PAGE_NAME


def explorer_link(card: str, version: str, page_dir: Path, src: Path, *, right=(), wrong=(), hard: bool = False,
                  disputed: bool = False, slice: tuple | None = None, search: str | None = None) -> str:
    """The URL, relative to the page in ``page_dir`` (a folder of the site tree ``src``), of the explorer of
    (card, version) filtered to: the units every run in ``right`` gets right and every run in ``wrong``
    gets wrong (runs named ``<model> · <protocol>``, :func:`atlaslib.analysis.explorer.explorer_run_label`),
    the units every run gets wrong (``hard``), those the runs disagree on (``disputed``), one slice group
    (``slice=(slice name, group)``) and a search text."""
    params: list[tuple[str, str]] = [("right", r) for r in _runs(right)] + [("wrong", r) for r in _runs(wrong)]
    if hard:
        params.append(("hard", "1"))
    if disputed:
        params.append(("disputed", "1"))
    if slice is not None:
        params += [("slice", str(slice[0])), ("group", str(slice[1]))]
    if search:
        params.append(("q", str(search)))
    target = Path(src) / explorer_doc(card, version).with_suffix(".html")
    url = os.path.relpath(target, Path(page_dir)).replace(os.sep, "/")
    return url + ("?" + urlencode(params) if params else "")


def _runs(x) -> list[str]:
    return [x] if isinstance(x, str) else list(x)


def link_html(text: str, url: str) -> str:
    """An HTML link (the text and address escaped here): what a Markdown table cell or paragraph can carry; a
    :class:`~atlaslib.escape.Markup`, so a table that escapes its text cells leaves it a link."""
    from ..escape import Markup

    return Markup(f'<a class="atlas-explorer-link" href="{html.escape(url, quote=True)}">{html.escape(text)}</a>')


def pair_linker(card: str, version: str, cells: list[dict], page_dir: Path, src: Path):
    """``link(a, b, text)``: ``text`` linked to the explorer's units that run ``a`` gets right and run ``b``
    wrong, ``a`` and ``b`` named as the comparison table names runs (:func:`atlaslib.metrics.compare.run_label`)."""
    from ..metrics.compare import run_label

    names = {run_label(c): EX.explorer_run_label(c) for c in cells}

    def link(a: str, b: str, text: str) -> str:
        if a not in names or b not in names:
            return html.escape(text)
        return link_html(text, explorer_link(card, version, page_dir, src, right=names[a], wrong=names[b]))
    return link


def b_c(row, link=None) -> str:
    """``b / c`` of a comparison row, each linked (``link``, see :func:`pair_linker`) to its discordant items:
    b to those A gets right and B wrong, c to the reverse."""
    b, c = str(int(row["b"])), str(int(row["c"]))
    if link is None:
        return f"{b} / {c}"
    from ..escape import Markup

    return Markup(f"{link(row['model_a'], row['model_b'], b)} / {link(row['model_b'], row['model_a'], c)}")


def count_link(card: str, version: str, page_dir: Path, src: Path, count: int, *, hard: bool = False,
               disputed: bool = False) -> str:
    """A count of the analysis page linked to the explorer's filter that shows those units."""
    return link_html(f"{int(count):,}", explorer_link(card, version, page_dir, src, hard=hard, disputed=disputed))


def linked_summary(d, card: str, version: str, page_dir: Path, src: Path) -> pd.DataFrame:
    """The disagreement summary (:class:`atlaslib.analysis.disagreement.Disagreement`) with its disputed and
    hard counts linked to the explorer's filters (item cards: the rows; span and relation cards: the "found by
    some" and "found by none" columns)."""
    t = d.summary.copy()

    def link(n, **kw):
        return count_link(card, version, page_dir, src, n, **kw)
    if d.unit == "item":
        t["count"] = [link(n, disputed=True) if w.startswith("disputed") else link(n, hard=True)
                      if w.startswith("hard") else f"{int(n):,}" for w, n in zip(t["what"], t["count"])]
        return t
    key = t.columns[0]
    for col, kw in (("found by some", {"disputed": True}), ("found by none", {"hard": True})):
        t[col] = [link(n, **kw) if k == "all" else f"{int(n):,}" for k, n in zip(t[key], t[col])]
    return t


def errors_markdown(cell: dict, page_dir: Path, src: Path) -> str:
    """The line under a run page's error table: the run's errors in the item explorer, beside every other run."""
    url = explorer_link(cell["card"], cell["version"], page_dir, src, wrong=EX.explorer_run_label(cell))
    text = ("These errors beside every other run's answer on the same items: "
            + link_html("the item explorer, filtered to this run's errors", url) + ".")
    if EX.seed_runs_of(cell):
        text += (" This row was trained with several seeds: the explorer counts a unit as its error when the "
                 "majority of its seeds' models (more than half) gets it wrong, as the card page's paired "
                 "comparisons do, and shows each seed's answer in a column of its own; the row's own records are "
                 "its first seed's, whose errors may differ.")
    return text


# -- the static assets ---------------------------------------------------------------------------------------

def _itables_names() -> tuple[str, str]:
    """The global that itables' offline tables wait for and the event that announces it (version-named)."""
    from itables import javascript as J

    return J._itables_underscore_version(), J._itables_ready_event()


def classic_bundle(module_js: str) -> str:
    """itables' DataTables bundle (an ES module) as a classic script: the same code in a function, its one
    ``export{...}`` statement turned into the module object that itables' offline tables wait for. A module
    script cannot be loaded from a page opened from disk (``file:``); a classic script can."""
    exports = re.findall(r"export\{([^}]*)\};?", module_js)
    if len(exports) != 1:
        raise ValueError(f"the itables bundle has {len(exports)} export statements, expected one")
    names = []
    for part in exports[0].split(","):
        local, _, public = part.strip().partition(" as ")
        names.append(f"{json.dumps(public or local)}: {local}")
    glob, event = _itables_names()
    body = re.sub(r"export\{[^}]*\};?", "", module_js)
    return ("(function () {\n\"use strict\";\n" + body +
            f"\nvar m = {{{', '.join(names)}}};\nwindow[{json.dumps(glob)}] = Promise.resolve(m);\n"
            f"window.dispatchEvent(new Event({json.dumps(event)}));\n}})();\n")


def write_assets(src: Path) -> Path:
    """Write the DataTables bundle of the installed itables into the site tree's ``_static/itables/`` (once
    per build); returns that folder."""
    from itables import options

    bundle = Path(options.dt_bundle)
    out = Path(src) / "book" / "_static" / ASSET_DIR
    js = out / "dt_bundle.js"
    if not js.is_file():
        out.mkdir(parents=True, exist_ok=True)
        js.write_text(classic_bundle(bundle.read_text(encoding="utf-8")), encoding="utf-8")
        (out / "dt_bundle.css").write_text(bundle.with_suffix(".css").read_text(encoding="utf-8"), encoding="utf-8")
    return out


def _static_url(page_dir: Path, src: Path, name: str) -> str:
    """URL of a file of ``book/_static`` from a page (Sphinx puts that folder at the site root's ``_static``)."""
    return os.path.relpath(Path(src) / "_static" / name, page_dir).replace(os.sep, "/")


# -- the page ------------------------------------------------------------------------------------------------

def _json_for_html(obj) -> str:
    return json.dumps(obj, ensure_ascii=False).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _config(ex: EX.Explorer, frame: pd.DataFrame, table_id: str) -> dict:
    cols = list(frame.columns)
    idx = {c: i for i, c in enumerate(cols)}
    right, wrong = ex.verdicts
    return {
        "table": table_id, "module": _itables_names()[0], "verdicts": [right, wrong],
        "right": {r: idx[ex.right_column(r)] for r in ex.runs},
        "hard": idx["every run wrong"], "disputed": idx["runs disagree"],
        "slices": {s: idx[s] for s in ex.slices if s in idx},
    }


def _filter_bar(ex: EX.Explorer, frame: pd.DataFrame, table_id: str) -> str:
    e = html.escape
    right, wrong = ex.verdicts
    options = "".join(f'<option value="{e(r, quote=True)}">{e(r)}</option>' for r in ex.runs)
    groups = []
    from ..analysis.slices import card_slices, group_order

    specs = card_slices(ex.card)
    for s in ex.slices:
        counts = frame[s].value_counts()
        order = group_order(specs.get(s, {}), list(frame[s]))
        opts = "".join(f'<option value="{e(s, quote=True)}\u241f{e(str(g), quote=True)}">{e(str(g))} '
                       f'({counts[g]:,})</option>' for g in order)
        groups.append(f'<optgroup label="{e(s, quote=True)}">{opts}</optgroup>')
    n_hard = int((frame["every run wrong"] == EX.YES).sum())
    n_disp = int((frame["runs disagree"] == EX.YES).sum())
    parts = [f'<form class="atlas-explorer-filters" data-table="{table_id}" onsubmit="return false">']
    if len(ex.runs) >= 1:
        parts.append(f'<span class="atlas-filter-group"><select name="a" aria-label="run A">{options}</select> '
                     f'{right}, <select name="b" aria-label="run B">{options}</select> {wrong} '
                     f'<button type="button" data-filter="pair">show</button> '
                     f'<button type="button" data-filter="errors">{"errors of A" if ex.unit == "item" else "missed by A"}'
                     f'</button></span>')
    parts.append(f'<button type="button" data-filter="hard">{wrong} for every run ({n_hard:,})</button>')
    parts.append(f'<button type="button" data-filter="disputed">runs disagree ({n_disp:,})</button>')
    if groups:
        parts.append('<span class="atlas-filter-group"><select name="slice" aria-label="slice">'
                     '<option value="">one slice…</option>' + "".join(groups) + '</select></span>')
    parts.append('<button type="button" data-filter="clear">clear filters</button>')
    parts.append('<output class="atlas-explorer-status" aria-live="polite"></output></form>')
    return "\n".join(parts)


def _as_html_text(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its column names and text cells escaped as HTML text (``&``, ``<``, ``>``, as itables escapes
    cells), for itables told that the table is HTML (``allow_html=True``). Column names are user text (a run's
    name) and itables escapes them in the header but not in the footer row of its column filters, which the
    browser would read as markup; escaped here, every name and cell reaches the page once escaped."""
    def esc(v):
        return html.escape(v, quote=False) if isinstance(v, str) else v

    out = frame.rename(columns=lambda c: esc(str(c)))
    return out.apply(lambda col: col.map(esc)) if len(out.columns) else out


def _datatable_html(frame: pd.DataFrame, table_id: str, text_cols: list[str]) -> str:
    from itables import to_html_datatable

    targets = [i for i, c in enumerate(frame.columns) if c in text_cols]
    return to_html_datatable(
        _as_html_text(frame), table_id=table_id, connected=False, maxBytes=0, showIndex=False, column_filters="footer",
        display_logo_when_loading=False, classes="display compact nowrap", pageLength=PAGE_LENGTH,
        lengthMenu=[10, 25, 100, 500], deferRender=True, scrollX=True, autoWidth=False, order=[], allow_html=True,
        columnDefs=[{"targets": targets, "className": "atlas-text"}] if targets else [],
        warn_on_undocumented_option=False)


def _table_block(ex: EX.Explorer, frame: pd.DataFrame, table_id: str, filters: bool) -> str:
    text_cols = [*ex.inputs, "mention"]
    parts = [f'<div class="atlas-explorer" id="{table_id}-explorer">']
    if filters:
        parts.append(_filter_bar(ex, frame, table_id))
        parts.append(f'<script type="application/json" class="atlas-explorer-config">'
                     f'{_json_for_html(_config(ex, frame, table_id))}</script>')
    parts.append(_datatable_html(frame, table_id, text_cols))
    parts.append("</div>")
    return "\n".join(parts)


def _display(frame: pd.DataFrame) -> pd.DataFrame:
    """The table as shown: scores rounded, missing values empty."""
    out = frame.copy()
    for c in out.columns:
        if c.endswith(f"{EX.SEP}score") or c.endswith(f"{EX.SEP}{EX.MEAN_SCORE}"):
            out[c] = out[c].map(lambda v: "" if v is None or v != v else f"{float(v):.3f}")
    return out.astype(object).where(out.notna(), "")


def page_markdown(card, version: str, ex: EX.Explorer, page_dir: Path, src: Path, csv_names: dict,
                  ids_only: bool) -> str:
    e = html.escape
    short = card.title.split(":")[0]
    unit = {"item": "test item", "mention": "gold mention", "relation": "gold item"}[ex.unit]
    right, wrong = ex.verdicts
    runs = ", ".join(md_code(r) for r in ex.runs) or "none"  # run names are user text: never a {{fact:}}
    lines = [f"# {short} item explorer: {version}", "",
             f"Every {unit} of split version `{version}` beside every run's answer: one row per {unit}, one column "
             f"per run (its answer), with whether it is {right} or {wrong}" +
             (" and, for runs that give one, the score" if ex.scores else "") +
             (" and the rule behind each decision (trigger, category)" if ex.evidence else "") +
             (", the slices the card page scores," if ex.slices else "") + " and whether the runs agree.", "",
             f"Runs: {runs}."]
    if ex.excluded:
        lines[-1] += (" *Wrong for every run* and *runs disagree* leave out runs that give the same answer to "
                      "every item (" + ", ".join(md_code(r) for r in ex.excluded) +
                      "), as the disagreement table of the card page does.")
    if ex.unit == "mention":
        lines += ["", f"A run has found a gold mention when it predicts exactly that mention (type, first and last "
                      f"word); its column shows the run's tags on the mention's words. Mentions a run predicted that "
                      f"are not gold are in the second table."]
    elif ex.unit == "relation":
        lines += ["", "A run has found a gold item when the official scorer counts the run's prediction of it as "
                      "correct; a run that does not address a kind of item leaves its cells empty."]
    if ex.seeds:
        lines += ["", _seeds_prose(ex)]
    lines += ["", "Sort by any column, search every column at once, filter one column in the boxes under the table, "
                  "or use the buttons: one run right and another wrong (on item cards the count is McNemar's *b* "
                  "of the card page's paired comparison), every run wrong, runs disagree, one slice. The filters "
                  "are kept in the page's address, so a filtered view can be linked."]
    if ids_only:
        lines += ["", "```{note}\nThis build shows item ids only: the items' text is not published with this "
                      "build.\n```"]
    lines += ["", *_raw(_table_block(ex, _display(ex.table), "atlas-explorer-main", True)), "",
              "Download: " + " · ".join(f"{{download}}`{what} (CSV) <{name}>`" for what, name in csv_names.items())]
    if ex.predicted_only is not None:
        only = _display(ex.predicted_only)
        lines += ["", "## Predicted mentions that are not gold", "",
                  f"{len(only):,} mentions some run predicted that are not gold mentions (one row each; a column per "
                  f"run says whether it predicted it; `gold` shows the gold tags on those words).", "",
                  *_raw(_table_block(ex, only, "atlas-explorer-predicted-only", False))]
    glue = _static_url(page_dir, src, GLUE_JS)
    bundle = _static_url(page_dir, src, f"{ASSET_DIR}/dt_bundle.js")
    css = _static_url(page_dir, src, f"{ASSET_DIR}/dt_bundle.css")
    head = ["```{raw} html", f'<link rel="stylesheet" href="{css}">', f'<script src="{bundle}"></script>',
            f'<script src="{glue}"></script>', "```", ""]
    return "\n".join(lines[:2] + head + lines[2:]) + "\n"


def _seeds_prose(ex: EX.Explorer) -> str:
    """How a run trained with several seeds is shown (the rule of :mod:`atlaslib.analysis.explorer`)."""
    runs = ", ".join(md_code(r) for r in ex.seeds)   # run names are user text
    many = len(ex.seeds) > 1
    nm = f"*{EX.NO_MAJORITY}*"
    if ex.unit == "item":
        text = (f"A row trained with several seeds ({runs}) shows the answer of the majority of its seeds' models "
                f"(the label more than half of them predict; otherwise {nm}, counted {ex.verdicts[1]}), as the "
                f"card page's paired comparisons count it: it is {ex.verdicts[0]} exactly when more than half of "
                f"its seeds' models are.")
        mean = [c for c in ex.scores if c.endswith(f"{EX.SEP}{EX.MEAN_SCORE}")]
        if mean:
            one = len(mean) == 1
            text += (f" {'Its score column' if one else 'Their score columns'} ({', '.join(md_code(c) for c in mean)}) "
                     f"{'holds' if one else 'hold'} the mean of the seeds' scores, not one model's.")
    else:
        text = (f"A row trained with several seeds ({runs}) has found a gold mention when more than half of its "
                f"seeds' models predict exactly that mention; its column shows the tags more than half of them put "
                f"on the mention's words (otherwise {nm}), and in the second table it predicts a mention when more "
                f"than half of its seeds' models do.")
    return text + (f" Each seed's answer is in its own column (`… · seed <s>`), which no count and no filter "
                   f"reads: *runs right*, *{ex.verdicts[1]} for every run*, *runs disagree* and the pair filter read "
                   f"{'each such row' if many else 'the row'}'s majority answer.")


def _raw(block: str) -> list[str]:
    """A raw HTML block for MyST, fenced with more backticks than any run of them in the block."""
    fence = "`" * max(3, 1 + max((len(m) for m in re.findall(r"`+", block)), default=0))
    return [f"{fence}{{raw}} html", block, fence]


def ids_only_frame(ex: EX.Explorer) -> EX.Explorer:
    """The explorer without input text or rule trigger phrases (a trigger is a span of the item's text)."""
    drop = [*ex.inputs, *(["mention"] if "mention" in ex.table else []),
            *[f"{r}{EX.SEP}trigger" for r in ex.evidence]]
    ex.table = ex.table.drop(columns=[c for c in drop if c in ex.table])
    if ex.predicted_only is not None:
        ex.predicted_only = ex.predicted_only.drop(columns=[c for c in drop if c in ex.predicted_only])
    ex.inputs = []
    return ex


def render(card, version: str, cells: list[dict], src: Path, *, publish: bool = False, data_dir=None) -> str | None:
    """Write the explorer page of (card, version) and its CSV files into the site tree ``src``; return its doc
    path, or None when the version has no ok run with predictions. Input text is shown only in a local build,
    for a card whose data carry no use agreement and cells none gated."""
    from ..analysis import ok_cells
    from ..results.schema import is_gated

    vcells = [c for c in cells if c["card"] == card.name and c["version"] == version]
    if not ok_cells(vcells):
        return None
    ids_only = publish or card.gated or any(is_gated(c) for c in vcells)
    inputs = None if ids_only else EX.card_inputs(card.name, version, data_dir)
    ex = EX.explorer(vcells, card.name, inputs=inputs)
    if ids_only:
        ex = ids_only_frame(ex)
    doc = explorer_doc(card.name, version)
    page = Path(src) / doc.with_suffix(".md")
    page.parent.mkdir(parents=True, exist_ok=True)
    write_assets(src)
    stem = f"explorer-{card.name}-{version}"
    csv_names = {"every row": f"{stem}.csv"}
    ex.csv_frame().to_csv(page.parent / f"{stem}.csv", index=False)
    if ex.predicted_only is not None:
        csv_names["predicted mentions that are not gold"] = f"{stem}-predicted-only.csv"
        ex.predicted_only.to_csv(page.parent / csv_names["predicted mentions that are not gold"], index=False)
    page.write_text(page_markdown(card, version, ex, page.parent, src, csv_names, ids_only), encoding="utf-8")
    return str(doc)
