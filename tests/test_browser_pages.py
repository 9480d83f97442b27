"""Pages read well in a real browser: a card version with two runs (two systems' predictions files scored
with ``atlaslib.evaluate``, so no kernel is needed) and the small book's pages.

Checked in the DOM headless chromium renders: a leaderboard with two or more runs has its forest plots
(delivered by the server); no page shows a Markdown table that failed to render (``|—|`` or ``|---|``
text); no table cell ends in "…" unless the page gives the whole text (an expandable block or a CSV).
"""
from __future__ import annotations

import re

import pytest

from atlaslib import book
from atlaslib.cards import get_card, negex
from atlaslib.external import evaluate
from tests.test_browser import _QuietHandler, chromium, dump_dom, read_dom, small_book  # noqa: F401 (fixture)

VERSION = "atlas-n100-v1"


@pytest.fixture(scope="module")
def two_run_book(tmp_path_factory, data_dir):
    root = tmp_path_factory.mktemp("two-run-book")
    paths = book.BuildPaths(results=root / "results", runs=root / "runs", build=root / "_build")
    items = negex.load_items(data_dir)
    _, test = negex.split_frames(items, negex.split(items, VERSION))
    gold = dict(zip(test["item_id"], test["decision"]))
    flip = {"negated": "affirmed", "affirmed": "negated"}
    # two systems that err on different items (every 7th and every 11th item flipped)
    for name, step in (("system-a", 7), ("system-b", 11)):
        preds = {iid: (flip[g] if k % step == 0 else g) for k, (iid, g) in enumerate(gold.items())}
        evaluate("negex", VERSION, predictions=preds, name=name, results_dir=paths.results, data_dir=data_dir)
    logs: list[str] = []
    code = book.build(paths=paths, cards=[get_card("negex")], run_runs=False,
                      log=lambda *a, **k: logs.append(" ".join(map(str, a))))
    assert code == 0, "\n".join(logs)
    return paths.html_out(False) / "_build" / "html"


def _serve_and_dump(html_dir, pages, profile):
    import functools
    import threading
    from http.server import ThreadingHTTPServer

    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(html_dir)))
    server.served = []
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
    thread.start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        return {p: dump_dom(f"{base}/{p}", profile) for p in pages}, list(server.served)
    finally:
        server.shutdown()
        server.server_close()


def test_a_leaderboard_with_two_runs_has_its_forest_plots(two_run_book, tmp_path):
    chromium()
    doms, served = _serve_and_dump(two_run_book, ["book/cards/negex.html"], tmp_path / "profile")
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
    built = request.getfixturevalue(which)
    html_dir = built[0] if isinstance(built, tuple) else built
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
