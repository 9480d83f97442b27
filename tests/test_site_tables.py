"""Long tables on the book's pages: the first rows inline, every row in a CSV beside the page.

The kernel displays a whole table (every row travels in the output); the book's copy of the notebook keeps
the first rows and writes the CSV, read back here with pandas and compared with the frame displayed.
"""
from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pandas as pd

from atlaslib.pages.tables import MIME, compact_html, site_notebook, whole_table


def _notebook(*tables) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell("display(...)")
    cell.outputs = [nbformat.v4.new_output("display_data", data=t._repr_mimebundle_()) for t in tables]
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# A run"), cell,
                                           nbformat.v4.new_markdown_cell("## Next")])


def test_a_cut_table_keeps_its_first_rows_and_writes_every_row_as_csv(tmp_path):
    long = "x" * 300 + ', "quoted", END'
    frame = pd.DataFrame({"item_id": [f"i{k:02d}" for k in range(12)], "sentence": [long] * 12,
                          "gold": ["negated", "affirmed"] * 6})
    short = pd.DataFrame({"item_id": ["a", "b"]})
    nb = _notebook(whole_table(frame, 10, "false negatives"), whole_table(short, 10, "false positives"))
    nbformat.validate(nb)  # the payload is a valid notebook output (executed .ipynb downloads keep it)

    assert site_notebook(nb, "zero_shot", tmp_path) == 1
    written = tmp_path / "zero_shot-false-negatives.csv"
    assert sorted(p.name for p in tmp_path.iterdir()) == [written.name]  # the whole short table: no file
    pd.testing.assert_frame_equal(pd.read_csv(written), frame)

    cut, whole = (o["data"] for o in nb.cells[1].outputs)
    assert MIME not in cut and MIME not in whole
    assert "Showing 10 of 12 false negatives; all 12 are in the CSV file" in cut["text/html"]
    assert cut["text/html"].count(" END") == 10 and "<details>" not in cut["text/html"]
    assert "Showing 2 of 2 false positives." in whole["text/html"]
    # the download line sits right after the table's cell, before the page goes on
    assert [c.cell_type for c in nb.cells] == ["markdown", "code", "markdown", "markdown"]
    assert nb.cells[2].source == "{download}`All 12 false negatives (CSV) <zero_shot-false-negatives.csv>`"


def test_in_jupyter_the_table_still_holds_every_row():
    frame = pd.DataFrame({"n": range(30)})
    html = whole_table(frame, 5, "rows")._repr_mimebundle_()["text/html"]
    first, rest = html.split("<details>")
    assert first.count("<td>") == 5 and rest.count("<td>") == 30 and "All 30 rows" in rest


def test_compact_html_drops_indentation_but_not_preformatted_text():
    table = pd.DataFrame({"a": [1, 2]}).to_html()
    small = compact_html(table)
    assert len(small) < len(table) * 0.8
    assert re.sub(r"\s+", "", small) == re.sub(r"\s+", "", table)  # only white space went
    shown = pd.DataFrame({"a": [1, 2]})._repr_html_()   # what a notebook output holds: pandas' style block too
    assert "<style scoped>" in shown and "<style" not in compact_html(shown)
    assert re.sub(r"\s+", "", compact_html(shown)) == re.sub(r"\s+", "", re.sub(r"<style.*?</style>", "", shown, flags=re.S))
    css = (Path(__file__).resolve().parent.parent / "book/_static/atlas.css").read_text()
    assert ".dataframe thead th { text-align: right; }" in css
    pre = "<pre>\n    indented code\n</pre>"
    assert compact_html(pre) == pre


def test_a_cards_caveats_display_whole_even_when_the_notebook_cuts_columns():
    from atlaslib.cards import negex

    with pd.option_context("display.max_colwidth", 40):
        table = negex.CARD.caveats_table(("a computed caveat", "x" * 200 + " END"))
        html, text = table._repr_html_(), repr(table)
        cut = pd.DataFrame(table)._repr_html_()
    longest = max(negex.CARD.caveats, key=lambda c: len(c[1]))[1]
    assert "..." in cut                                       # an ordinary frame would be cut here
    assert longest in html and "x" * 200 + " END" in html and "..." not in html
    assert "END" in text and table.shape == (len(negex.CARD.caveats) + 1, 2)
