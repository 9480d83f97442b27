"""Tables a reader can trust to be whole, as a notebook displays them: :class:`WholeTable` (the first rows with
"k of N" said plainly and every row one click away) and :class:`WholeFrame` (every character of every cell).
Display objects only, one floor below the cards and the pages: a card shows its caveats with them, the book
(:mod:`atlaslib.pages.tables`) turns a whole table's output into its first rows and a CSV download.
"""
from __future__ import annotations

import html
import re

import pandas as pd

#: the output mimetype holding a whole table (its CSV text, caption parts and first rows' HTML)
MIME = "application/vnd.atlas.whole-table+json"


class WholeTable:
    """Display object: the first ``n`` rows of ``frame`` under a caption "Showing k of N <what>.", then,
    when rows were left out, a collapsed ``<details>`` block holding all ``N`` rows. Cell text is never
    truncated (pandas' ``max_colwidth`` is lifted for the rendering)."""

    def __init__(self, frame: pd.DataFrame, n: int = 10, what: str = "rows", errors: bool = False):
        if n < 1:
            raise ValueError(f"WholeTable: n must be at least 1, got {n}")
        self.frame, self.n, self.what = frame, n, what
        self.errors = errors   # the table lists the run's errors: the book links the item explorer under it

    @property
    def name(self) -> str:
        """The table's file-name stem (``false negatives`` -> ``false-negatives``)."""
        return re.sub(r"[^a-z0-9]+", "-", self.what.lower()).strip("-") or "rows"

    @property
    def caption(self) -> str:
        total, shown = len(self.frame), min(self.n, len(self.frame))
        if total == 0:
            return f"No {self.what}."
        return f"Showing {shown:,} of {total:,} {self.what}" + ("." if shown == total else
                                                                  "; all of them are in the list below the table.")

    def _html(self, frame: pd.DataFrame) -> str:
        with pd.option_context("display.max_colwidth", None):
            return frame.to_html(escape=True, border=0, index=False, classes="atlas-whole-table")

    def _repr_html_(self) -> str:
        parts = [f"<p>{html.escape(self.caption)}</p>"]
        if len(self.frame):
            parts.append(self._html(self.frame.head(self.n)))
        if len(self.frame) > self.n:
            parts.append(f"<details><summary>All {len(self.frame):,} {html.escape(self.what)}</summary>"
                         f"{self._html(self.frame)}</details>")
        return "\n".join(parts)

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        """HTML and text as above, plus :data:`MIME`: every row as CSV and the first rows' HTML, from which
        the book makes the first rows and a download (see :func:`site_notebook`)."""
        with pd.option_context("display.max_colwidth", None):
            csv = self.frame.to_csv(index=False)
        return {"text/html": self._repr_html_(), "text/plain": repr(self),
                MIME: {"what": self.what, "name": self.name, "shown": min(self.n, len(self.frame)),
                       "total": len(self.frame), "head_html": self._html(self.frame.head(self.n)) if len(self.frame)
                       else "", "csv": csv, "errors": self.errors}}

    def __repr__(self) -> str:
        with pd.option_context("display.max_colwidth", None, "display.max_rows", None):
            return self.caption + ("\n" + self.frame.to_string(index=False) if len(self.frame) else "")


class WholeFrame(pd.DataFrame):
    """A DataFrame that always displays every character of its cells (pandas' ``display.max_colwidth``, which a
    notebook may set, is lifted for its own rendering); otherwise an ordinary frame."""

    @property
    def _constructor(self):
        return WholeFrame

    def _repr_html_(self):
        with pd.option_context("display.max_colwidth", None):
            return super()._repr_html_()

    def __repr__(self) -> str:
        with pd.option_context("display.max_colwidth", None):
            return super().__repr__()


def whole_frame(frame: pd.DataFrame) -> WholeFrame:
    """``frame`` as a :class:`WholeFrame` (e.g. a card's caveats: sentences, never cut with "...")."""
    return WholeFrame(frame)


def whole_table(frame: pd.DataFrame, n: int = 10, what: str = "rows", errors: bool = False) -> WholeTable:
    """See :class:`WholeTable` (``errors``: the table lists the run's errors)."""
    return WholeTable(frame.reset_index(drop=True), n, what, errors)
