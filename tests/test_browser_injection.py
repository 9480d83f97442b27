"""User text on the published site runs no script, in a real browser (headless chromium over the DevTools
protocol, as ``tests/test_browser_explorer.py``).

A publish build of the NLI card (its smallest: ``builtin-v1``, a scored predictions file, no kernel) where every
user string is an image whose ``onerror`` sets ``document.body.dataset.pw`` to a number naming the string: a
system's name, description and ``trained_on`` (``atlas score``), a profile file's name, location, revision, label
map, ``trained_on`` and description, and a local model folder's name (its not-run stub). Every page the build
writes one of them on is opened (card page with its leaderboard, explorer, version and run pages, model pages, the
models index), and the home page and the search page with the system's name as the query; after each page has
loaded (the explorer: after its table is drawn; the search: after its results are listed) ``dataset.pw`` is
unset, and the system's name is shown as the text it is: the model page's heading, the explorer's column filter,
a search result.
"""
from __future__ import annotations

import json
from urllib.parse import quote

import pytest
import yaml

from atlaslib import book, runner
from atlaslib.runner import RunRequest
from tests import tiny_models

from .test_browser import serve
from .test_browser_explorer import browser  # noqa: F401  (the fixture: a headless chromium per test)


def xss(k: int, src: str = "data:,") -> str:
    """An image that fails to load (an empty data URL, or a page: not an image) and then sets
    ``document.body.dataset.pw = k``."""
    return f"<img src={src} onerror=document.body.dataset.pw={k}>"


SYSTEM = "X" + xss(1, "index.html")   # as the outside tester named it (a page beside the model page: no broken link)
PAGE_LOADED = "document.readyState === 'complete'"
EXPLORER = "document.querySelector('#atlas-explorer-main-explorer')"


@pytest.fixture(scope="module")
def hostile_publish(tmp_path_factory, data_dir):
    """The publish build's HTML folder."""
    from atlaslib.cards import get_card
    from atlaslib.external import score as score_file
    from atlaslib.external.tasks import load_split

    tmp = tmp_path_factory.mktemp("injection")
    paths = book.BuildPaths(results=tmp / "results", runs=tmp / "runs", build=tmp / "_build")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ATLAS_DATA_DIR", str(data_dir))
        preds = tmp / "p.jsonl"
        preds.write_text("".join(json.dumps({"item_id": i, "label": "neutral"}) + "\n"
                                 for i in load_split("nli_negation", "builtin-v1").ids))
        score_file("nli_negation", "builtin-v1", preds, SYSTEM, description="D" + xss(2), trained_on=["T" + xss(3)],
                   results_dir=paths.results)
        profiles = tmp / "mine.yml"
        profiles.write_text(yaml.safe_dump({"P" + xss(4): {
            "source": "path", "location": "/models/L" + xss(5), "revision": "R" + xss(6),
            "capabilities": ["embed.text.pooled"], "label_map": {"M" + xss(7): "PRESENT"},
            "trained_on": ["T" + xss(8)], "description": "D" + xss(9)}}))
        mp.setenv("ATLAS_PROFILES", str(profiles))
        folder = tiny_models.tiny_encoder(tmp / "models", name="F" + xss(10))  # no NLI head
        stub = runner.run(RunRequest("nli_negation", "builtin-v1", str(folder), "zero_shot"),
                          results_dir=paths.results, runs_dir=paths.runs, data_dir=data_dir)
        assert stub.cell_status == "not_run"
        logs: list[str] = []
        code = book.build(paths=paths, cards=[get_card("nli_negation")], publish=True, run_runs=False,
                          log=lambda *a, **k: logs.append(" ".join(map(str, a))))
    assert code == 0, "\n".join(logs)
    return paths.html_out(True) / "_build" / "html"


def _ran(browser) -> str | None:
    return browser.js("document.body.dataset.pw ?? null")


def test_no_user_string_runs_a_script_on_any_page_kind(hostile_publish, browser):
    html_dir = hostile_publish
    # every page the build wrote a user string on (escaped in the file, if it is escaped)
    pages = sorted(str(p.relative_to(html_dir)) for p in html_dir.rglob("*.html")
                   if "onerror=document.body.dataset.pw=" in p.read_text(encoding="utf-8"))
    system_page = next(p for p in pages if p.startswith("book/models/X-img"))
    explorer = "book/runs/nli_negation/builtin-v1/explorer.html"
    kinds = {"book/cards/nli_negation.html", explorer, "book/models/index.html", system_page,
             "book/runs/nli_negation/builtin-v1/index.html"}
    assert kinds <= set(pages), pages
    assert any(p.startswith("book/runs/nli_negation/builtin-v1/local-F-img") for p in pages), pages  # the stub

    ran, shown = {}, {}
    with serve(html_dir) as (base, _):
        for page in ["book/intro.html", *pages]:
            browser.open(f"{base}/{page}", PAGE_LOADED + (f" && {EXPLORER}.dataset.ready" if page == explorer else ""))
            ran[page] = _ran(browser)
            if page == system_page:   # the name heads its page
                shown[page] = [browser.js("document.querySelector('article h1').textContent")]
            if page == explorer:      # the run's column filter (the table's footer) names it
                shown[page] = browser.js("Array.from(document.querySelectorAll('tfoot input')).map(i => i.placeholder)")
        # the search page, asked for the system's name: the results list shows the page titled with it
        browser.open(f"{base}/search.html?q={quote(SYSTEM)}",
                     "/Search finished|did not match/.test(document.querySelector('.search-summary')?.innerText)")
        ran["search.html"] = _ran(browser)
        shown["search.html"] = browser.js("Array.from(document.querySelectorAll('#search-results li a'))"
                                          ".map(a => a.textContent)")
    scripts = [f"{page}: the script of xss({pw}) ran" for page, pw in ran.items() if pw is not None]
    assert not scripts, "\n".join(scripts)
    # and the name is there, as the text it is
    assert shown[system_page][0].startswith(SYSTEM), shown
    assert f"{SYSTEM} · zero_shot" in shown[explorer], shown
    assert any(t.startswith(SYSTEM) for t in shown["search.html"]), shown
