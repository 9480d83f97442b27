"""Leaderboards in a real browser (headless chromium at 1,200 px) and in the rendered HTML.

Reuses the session's small book (``tests/books.py``: NegEx atlas-n100-v1: the majority baseline and a
not-run hub model) and its two-run book (two outside systems, neither constant). A copy of the card page gets a
script that measures every leaderboard table after layout; chromium's ``--dump-dom`` returns the measurements.
Checked: no leaderboard is wider than the 1,200 px window or its article column (it would slide under the page's
table of contents) or needs horizontal scrolling; no interval of zero width for a predictor that is not
constant lacks its exact interval (read on the two systems' rows, and on the leaderboard of a non-constant system
whose sensitivity interval is [1, 1]); no undefined metric is shown as a number; long reasons are footnotes.
"""
from __future__ import annotations

import json
import re
import shutil

import pytest

from tests.test_browser import CARD_PAGE, _chromium, chromium, read_dom

pytestmark = pytest.mark.xdist_group("books")  # shares the session's books (tests/conftest.py)

WIDTH = 1200
MEASURE = """<script>
window.addEventListener('load', () => {
  const boards = [...document.querySelectorAll('.atlas-leaderboard')].map(el => {
    const t = el.querySelector('table') || el; const r = t.getBoundingClientRect();
    const scrolling = [el, ...el.querySelectorAll('*')].filter(e => ['auto', 'scroll'].includes(
      getComputedStyle(e).overflowX) && e.scrollWidth > e.clientWidth + 1).length;
    return {width: Math.round(r.width), right: Math.round(r.right), scrolling: scrolling};
  });
  const art = document.querySelector('.bd-article') || document.querySelector('main') || document.body;
  const pre = document.createElement('pre'); pre.id = 'atlas-widths';
  pre.textContent = JSON.stringify({viewport: document.documentElement.clientWidth,
                                    article: Math.round(art.getBoundingClientRect().right),
                                    page: document.documentElement.scrollWidth, boards: boards});
  document.body.appendChild(pre);
});
</script>"""


def measure(html_page, profile) -> dict:
    """Layout of every leaderboard on ``html_page`` at 1,200 px (a measuring copy beside the page)."""
    probe = html_page.with_name(html_page.stem + "-measure.html")
    probe.write_text(html_page.read_text(encoding="utf-8").replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    try:
        dom = _chromium(["--virtual-time-budget=5000", f"--window-size={WIDTH},1600", "--dump-dom",
                         probe.as_uri()], profile).stdout
    finally:
        probe.unlink(missing_ok=True)
    m = re.search(r'<pre id="atlas-widths"[^>]*>(.*?)</pre>', dom, flags=re.S)
    assert m, "the measuring script did not run"
    return json.loads(m.group(1).replace("&quot;", '"'))


def test_no_leaderboard_is_wider_than_1200_px(small_book, tmp_path):
    chromium()
    html_dir, _ = small_book
    site = tmp_path / "site"
    shutil.copytree(html_dir, site)
    got = measure(site / CARD_PAGE, tmp_path / "profile")
    assert got["boards"], "no leaderboard on the card page"
    for b in got["boards"]:
        assert b["width"] <= WIDTH and b["right"] <= min(got["viewport"], got["article"]) + 1, got
        assert b["scrolling"] == 0, f"a leaderboard scrolls horizontally: {got}"
    assert got["page"] <= got["viewport"] + 1, got


def _cells_text(html: str) -> list[list[str]]:
    r = read_dom(html)
    return [row for table in r.tables for row in table]


def test_rendered_leaderboard_shows_exact_intervals_and_no_undefined_number(small_book):
    html_dir, results_dir = small_book
    html = (html_dir / CARD_PAGE).read_text(encoding="utf-8")
    cell = json.loads((results_dir / "negex/atlas-n100-v1/majority/zero_shot.json").read_text())
    assert cell["metrics"]["precision_zero_shot"]["value"] is None          # nothing predicted negated
    rows = [row for row in _cells_text(html) if row and row[0].startswith("majority")]
    assert rows, "the majority row is missing"
    row = rows[0]
    texts = " ".join(row)
    # sensitivity 0 and specificity 1: zero-width percentile intervals, each with its exact interval
    for value in ("0.000", "1.000"):
        hit = [c for c in row if c.startswith(value) and "[" in c]
        assert hit and all("exact [" in c for c in hit), row
    # precision is undefined: a mark and a footnote, never a number
    assert re.search(r"n/a\s*\d", texts), row
    assert "undefined: nothing predicted positive" in html
    # not-run reason written once as a footnote, not in every cell
    assert html.count("weights unavailable") == 1


#: an interval cell of a leaderboard: ``value [low, high]``
INTERVAL = re.compile(r"(\d\.\d{3})\s*\[(\d\.\d{3}), (\d\.\d{3})\]")


def constant_models(results_dir) -> set:
    """The models of a build whose predictions are all one label."""
    constant = set()
    for path in results_dir.rglob("*.json"):
        c = json.loads(path.read_text())
        preds = c.get("predictions") or []
        if preds and len({str(p.get("pred")) for p in preds}) == 1:
            constant.add(c["model"])
    return constant


def zero_width_rule(rows, constant) -> tuple[int, list]:
    """(interval cells of non-constant models checked, rows breaking the rule): a ``[x, x]`` interval appears
    only for a constant predictor, or next to ``exact [...]``."""
    checked, broken = 0, []
    for row in rows:
        model = row[0].split(" ")[0] if row else ""
        for cell in row[1:]:
            m = INTERVAL.match(cell)
            if not m or model in constant:
                continue
            checked += 1
            if m.group(2) == m.group(3) and "exact [" not in cell:
                broken.append(row)
    return checked, broken


def test_no_zero_width_interval_without_exact_one_in_any_built_card(small_book, two_run_book):
    """Over every card page of the small book (the constant majority baseline) and the two-run book (two
    systems that are not constant): a ``[x, x]`` interval appears only for a constant predictor's
    non-proportion metric, or next to ``exact [...]``; the rule is read on the two systems' rows."""
    checked = 0
    for html_dir, results_dir in (small_book, two_run_book):
        constant = constant_models(results_dir)
        for page in (html_dir / "book" / "cards").glob("*.html"):
            n, broken = zero_width_rule(_cells_text(page.read_text(encoding="utf-8")), constant)
            assert not broken, (page.name, broken)
            checked += n
    assert checked >= 8, f"only {checked} interval cells of non-constant models were read"   # 2 runs x 4 metrics


def test_a_non_constant_predictor_at_one_shows_its_exact_interval(small_book, data_dir, tmp_path):
    """A system right on every negated item and wrong on every fourth affirmed one: not constant, yet its
    sensitivity's percentile interval is [1.000, 1.000]; its leaderboard row (beside the majority baseline's)
    shows the exact interval there, and the rule holds on it."""
    from atlaslib.cards import get_card, negex
    from atlaslib.external import evaluate
    from atlaslib.pages.card_pages import leaderboard_markdown
    from tests.books import SMALL_BOOK_VERSION

    items = negex.load_items(data_dir)
    _, test = negex.split_frames(items, negex.split(items, SMALL_BOOK_VERSION))
    flip, preds, affirmed = {"negated": "affirmed", "affirmed": "negated"}, {}, 0
    for iid, gold in zip(test["item_id"], test["decision"]):
        affirmed += gold == "affirmed"
        preds[iid] = flip[gold] if gold == "affirmed" and affirmed % 4 == 0 else gold
    cell = evaluate("negex", SMALL_BOOK_VERSION, predictions=preds, name="sure-of-negation",
                    results_dir=tmp_path / "results", data_dir=data_dir)
    sens = cell["metrics"]["sensitivity_zero_shot"]
    assert sens["value"] == sens["ci_low"] == sens["ci_high"] == 1.0 and 0 < affirmed
    majority = json.loads((small_book[1] / f"negex/{SMALL_BOOK_VERSION}/majority/zero_shot.json").read_text())
    md = leaderboard_markdown(get_card("negex"), SMALL_BOOK_VERSION, [majority, cell], tmp_path, tmp_path)
    board = md.split(":::")[1]                   # the metrics table
    rows = [[re.sub(r"<[^>]+>", "", c).replace("\u200b", "").strip() for c in line.strip("|").split("|")]
            for line in board.splitlines() if line.startswith("| ") and not line.startswith("| model")]
    mine = [r for r in rows if r[0].startswith("sure-of-negation")]
    assert len(rows) == 2 and len(mine) == 1, rows
    assert re.search(r"1\.000 \[1\.000, 1\.000\]\s+exact\s+\[0\.\d{3}, 1\.000\]", " ".join(mine[0])), mine
    checked, broken = zero_width_rule(rows, {"majority"})
    assert checked == 4 and not broken, (checked, broken)
