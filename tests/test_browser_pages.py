"""Pages read well in a real browser: a card version with two runs (the session's two-run book: two systems'
predictions files scored with ``atlaslib.evaluate``, so no kernel is needed) and the small book's pages.

Checked in the DOM headless chromium renders: a leaderboard with two or more runs has its forest plots
(delivered by the server); no page shows a Markdown table that failed to render (``|—|`` or ``|---|``
text); no table cell ends in "…" unless the page gives the whole text (an expandable block or a CSV).
"""
from __future__ import annotations

import re

import pytest

from tests.books import TWO_RUN_VERSION as VERSION
from tests.test_browser import chromium, dump_dom, read_dom, serve

pytestmark = pytest.mark.xdist_group("books")  # shares the session's books (tests/conftest.py)


def _serve_and_dump(html_dir, pages, profile):
    with serve(html_dir) as (base, served):
        return {p: dump_dom(f"{base}/{p}", profile) for p in pages}, list(served)


def test_a_leaderboard_with_two_runs_has_its_forest_plots(two_run_book, tmp_path):
    chromium()
    doms, served = _serve_and_dump(two_run_book[0], ["book/cards/negex.html"], tmp_path / "profile")
    r = read_dom(doms["book/cards/negex.html"])
    forests = [s for s in r.images if f"forest-negex-{VERSION}" in s]
    assert forests, r.images
    for img in forests:
        assert any(p.endswith(img.rsplit("/", 1)[-1]) and code == 200 for p, code in served), (img, served)
    # both systems are rows of the leaderboard
    text = doms["book/cards/negex.html"].replace("<wbr>", "")
    assert "system-a" in text and "system-b" in text


def _html_pages(html_dir):
    return [p for p in html_dir.rglob("*.html")
            if not any(part.startswith("_") for part in p.relative_to(html_dir).parts[:-1])]


@pytest.mark.parametrize("which", ["two_run_book", "small_book"])
def test_no_raw_markdown_table_and_no_cut_cell_without_the_whole_text(which, request):
    html_dir, _ = request.getfixturevalue(which)
    pages = _html_pages(html_dir)
    assert pages
    for page in pages:
        html = page.read_text(encoding="utf-8")
        body = re.sub(r"<(script|style)\b.*?</\1>", "", html, flags=re.S)
        text = re.sub(r"<[^>]+>", "", body)
        assert not re.search(r"\|\s*[—-]{1,3}:?\s*\|", text), f"{page}: a Markdown table did not render"
        r = read_dom(html)
        cut = [c for t in r.tables for row in t for c in row if c.rstrip().endswith("…")]
        if cut:
            whole = "<details" in html or ".csv" in html
            assert whole, f"{page}: cells cut with '…' and no way to see the whole text: {cut[:3]}"
