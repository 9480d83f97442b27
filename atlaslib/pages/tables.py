"""Tables on run pages that a reader can trust to be whole: a first few rows with "k of N" said plainly,
every row and every character available one click away (no silent cut, no "…" inside a cell).

In a notebook (Jupyter, or the executed .ipynb) a cut table carries every row in a collapsed list. In the
book, :func:`site_notebook` turns each such output into its first rows plus a CSV download of all rows,
written beside the page, so a run page does not carry hundreds of rows inline; the CSV is made from the
whole frame the kernel displayed (it travels in the output under :data:`MIME`).
"""
from __future__ import annotations

import html
import re
from pathlib import Path

from ..display import MIME, WholeFrame, WholeTable, whole_frame, whole_table  # noqa: F401  (notebooks import them here)


def site_html(payload: dict, csv_name: str) -> str:
    """The book's HTML for a whole table: "Showing k of N <what>", the first rows, and (when rows were left
    out) where the CSV of all N rows is: the download link set right under the output."""
    shown, total, what = payload["shown"], payload["total"], html.escape(payload["what"])
    if total == 0:
        return f"<p>No {what}.</p>"
    caption = f"Showing {shown:,} of {total:,} {what}"
    caption += "." if shown == total else f"; all {total:,} are in the CSV file <code>{html.escape(csv_name)}</code> linked below."
    return f"<p>{caption}</p>\n{payload['head_html']}"


_INDENT = re.compile(r"\n[ \t]+")
#: the style block pandas puts in every table output; the book's ``atlas.css`` carries its rules once
_PANDAS_STYLE = re.compile(r"<style scoped>\s*\.dataframe tbody tr th:only-of-type \{\s*vertical-align: middle;\s*\}"
                           r"\s*\.dataframe tbody tr th \{\s*vertical-align: top;\s*\}\s*\.dataframe thead th \{"
                           r"\s*text-align: right;\s*\}\s*</style>\s*")


def compact_html(text: str) -> str:
    """HTML without the indentation pandas writes on every line (a third of a table's bytes) and without
    pandas' per-table style block (its rules are in the site's ``atlas.css``); left as it is when it holds
    preformatted text (``<pre>``, ``<textarea>``), where white space is content."""
    if "<pre" in text or "<textarea" in text:
        return text
    return _INDENT.sub("\n", _PANDAS_STYLE.sub("", text))


def site_notebook(nb, stem: str, folder: Path, errors_note: str | None = None) -> int:
    """Rewrite a notebook's outputs for the book, in place: each cut whole table becomes its first rows and
    a CSV of all rows written to ``folder`` as ``<stem>-<table name>.csv``, linked by a download line in a
    Markdown cell right after the output's cell (the payload itself is dropped from the site copy); every
    HTML output is compacted (:func:`compact_html`). Returns the number of CSV files written. Tables shown
    whole keep their rows and get no file. A table of the run's errors gets ``errors_note`` (Markdown) too."""
    import nbformat

    written, out_cells = 0, []
    for cell in nb.cells:
        out_cells.append(cell)
        links = []
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            data = output.get("data", {})
            if isinstance(data.get("text/html"), (str, list)):
                html_text = data["text/html"]
                data["text/html"] = compact_html("".join(html_text) if isinstance(html_text, list) else html_text)
            payload = data.pop(MIME, None)
            if payload is None:
                continue
            name = f"{stem}-{payload['name']}.csv"
            output["data"]["text/html"] = compact_html(site_html(payload, name))
            if payload["shown"] < payload["total"]:
                folder.mkdir(parents=True, exist_ok=True)
                (folder / name).write_text(payload["csv"], encoding="utf-8")
                links.append(f"{{download}}`All {payload['total']:,} {payload['what']} (CSV) <{name}>`")
                written += 1
            if payload.get("errors") and errors_note and errors_note not in links:
                links.append(errors_note)
        if links:
            out_cells.append(nbformat.v4.new_markdown_cell("\n\n".join(links)))
    nb.cells = out_cells
    return written

