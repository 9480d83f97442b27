"""Every page of a built book in headless chromium at 1,280 px: layout a reader can use.

One measuring page (served with the book on 127.0.0.1) opens every HTML page of the site in a 1,280 px wide
frame, one after the other, and records after layout:

- how far the page scrolls horizontally (must be 0);
- every element inside the article that clips its content horizontally (a table, a code line or an output
  wider than its box, which would need scrolling to be read), but for the item explorer's data grid, which
  is an interactive table that scrolls by design;
- every table cell whose text ends in "…" (or pandas' "..."), and whether its whole text is reachable (a ``title`` holding it,
  or an expandable ``<details>`` in the cell);
- whether the sidebar navigation is there and shows links (run pages and data pages included);
- every comparison figure (``pairs-*.png``) as rendered: its width on screen and in the file, with the
  smallest tick-label font size the PNG records (:data:`atlaslib.plots.TICK_KEY`), so the size on screen
  is ``font px × rendered width / image width`` (at least 8 px).

The books: the session's two-run NegEx book (``tests/books.py``: a leaderboard with comparisons and their
figure, sub-pages, run pages without notebooks) and its small book (run and data pages from executed
notebooks). ``python -m tests.test_browser_layout HTML_DIR`` prints the same
report for any built book (e.g. the full default build).
"""
from __future__ import annotations

import json
import re
import struct
import sys
import zlib
from pathlib import Path

import pytest

from atlaslib import plots
from tests.test_browser import _chromium, chromium, serve

WIDTH = 1280
MIN_TICK_PX = 8.0
HARNESS = "atlas-layout-harness.html"


def png_size(path) -> tuple[int, int]:
    """(width, height) in pixels of a PNG file, from its header."""
    with open(path, "rb") as f:
        head = f.read(24)
    return struct.unpack(">II", head[16:24])


def png_text(path) -> dict[str, str]:
    """The tEXt and zTXt chunks of a PNG file (key -> text): where :mod:`atlaslib.plots` records a figure's
    smallest tick-label size (:data:`atlaslib.plots.TICK_KEY`)."""
    data, out, at = open(path, "rb").read(), {}, 8
    while at + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + length]
        if kind == b"tEXt":
            key, _, text = body.partition(b"\0")
            out[key.decode("latin-1")] = text.decode("latin-1")
        elif kind == b"zTXt":
            key, _, rest = body.partition(b"\0")
            out[key.decode("latin-1")] = zlib.decompress(rest[1:]).decode("latin-1")
        at += 12 + length
    return out


SCRIPT = r"""<!doctype html><html><body>
<iframe id="f" style="width:%(width)dpx;height:1600px;border:0"></iframe>
<pre id="atlas-layout"></pre>
<script>
const pages = %(pages)s;
const out = [];
const frame = document.getElementById('f');
function measure(rel) {
  const d = frame.contentDocument, w = frame.contentWindow;
  const root = d.documentElement;
  const art = d.querySelector('.bd-article') || d.querySelector('main') || d.body;
  const clipped = [];
  for (const el of art.querySelectorAll('*')) {
    if (el.closest('.atlas-explorer')) continue;  // the item explorer's grid scrolls by design (a data tool)
    const ox = w.getComputedStyle(el).overflowX;
    if (!['auto', 'scroll', 'hidden', 'clip'].includes(ox)) continue;
    if (el.scrollWidth > el.clientWidth + 1 && el.clientWidth > 0) {
      clipped.push({tag: el.tagName.toLowerCase(), cls: el.className && el.className.baseVal === undefined ?
                    String(el.className).slice(0, 80) : '', by: el.scrollWidth - el.clientWidth,
                    text: (el.textContent || '').trim().replace(/\s+/g, ' ').slice(0, 100)});
    }
  }
  const cut = [];
  for (const c of art.querySelectorAll('td, th')) {
    const t = (c.textContent || '').trim();
    if (!(t.endsWith('\u2026') || t.endsWith('...'))) continue;  // pandas cuts with "...", the atlas with "…"
    const inner = c.querySelector('[title]');
    const title = c.getAttribute('title') || (inner ? inner.getAttribute('title') : '') || '';
    const whole = (title.length > t.length - 1 && title.startsWith(t.slice(0, -1).trim().slice(0, 20))) ||
                  !!c.querySelector('details');
    cut.push({text: t.slice(0, 100), whole: whole});
  }
  const nav = d.querySelector('nav.bd-docs-nav');
  const navLinks = nav ? [...nav.querySelectorAll('a')].filter(a => a.offsetWidth > 0).length : 0;
  const figures = [...art.querySelectorAll('img')].filter(i => /pairs-[^/]*\.png$/.test(i.getAttribute('src') || ''))
    .map(i => ({src: i.getAttribute('src'), shown: i.getBoundingClientRect().width, natural: i.naturalWidth}));
  const overflow = root.scrollWidth - root.clientWidth;
  let widest = '';
  if (overflow > 1) {  // the innermost element reaching furthest right names the culprit
    let best = null;
    for (const el of d.body.querySelectorAll('*')) {
      const r = el.getBoundingClientRect();
      if (r.right > root.clientWidth + 1 && (!best || r.right >= best.r.right)) best = {el: el, r: r};
    }
    if (best) widest = best.el.tagName.toLowerCase() + '.' + String(best.el.className).slice(0, 60) + ': ' +
                       (best.el.textContent || '').trim().slice(0, 80);
  }
  return {page: rel, overflow: overflow, widest: widest, clipped: clipped, cut: cut,
          nav_links: navLinks, figures: figures};
}
function next(k) {
  if (k >= pages.length) { document.getElementById('atlas-layout').textContent = JSON.stringify(out); return; }
  frame.onload = () => setTimeout(() => { try { out.push(measure(pages[k])); }
                                          catch (e) { out.push({page: pages[k], error: String(e)}); }
                                          next(k + 1); }, 300);
  frame.src = '/' + pages[k];
}
next(0);
</script></body></html>"""


def site_pages(html_dir: Path) -> list[str]:
    """Every page of the site (site-relative), without the theme's own files and search/index pages."""
    out = []
    for p in sorted(html_dir.rglob("*.html")):
        rel = p.relative_to(html_dir).as_posix()
        if rel.startswith(("_", "genindex", "search")) or rel == HARNESS or "/_" in rel:
            continue
        out.append(rel)
    return out


def measure_site(html_dir: Path, profile: Path, pages: list[str] | None = None) -> list[dict]:
    """The layout of ``pages`` (default: every page) at 1,280 px, one dict per page (see the module docstring)."""
    pages = site_pages(html_dir) if pages is None else pages
    harness = (SCRIPT % {"width": WIDTH, "pages": json.dumps(pages)}).encode("utf-8")
    with serve(html_dir, extra={HARNESS: harness}) as (base, _):   # served beside the site, not written into it
        dom = _chromium([f"--virtual-time-budget={max(20000, 1500 * len(pages))}",
                         f"--window-size={WIDTH + 40},1700", "--dump-dom", f"{base}/{HARNESS}"], profile).stdout
    m = re.search(r'<pre id="atlas-layout">(.*?)</pre>', dom, flags=re.S)
    assert m and m.group(1).strip(), "the measuring page did not finish"
    return json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">"))


def is_side_page(rel: str) -> bool:
    """Run pages, runs lists and data pages: everything under book/runs/."""
    return rel.startswith("book/runs/")


def tick_px(html_dir: Path, page: str, fig: dict) -> float | None:
    """The smallest tick-label font size of a comparison figure as rendered, in CSS pixels."""
    path = (html_dir / page).parent / fig["src"]
    text = png_text(path.resolve()).get(plots.TICK_KEY)
    if text is None or not fig["natural"]:
        return None
    return float(text) * fig["shown"] / fig["natural"]


def problems(html_dir: Path, report: list[dict]) -> list[str]:
    """Everything the reader must not meet, one line each (empty: the site passes)."""
    out = []
    for r in report:
        page = r["page"]
        if "error" in r:
            out.append(f"{page}: not measured ({r['error']})")
            continue
        if r["overflow"] > 1:
            out.append(f"{page}: the page scrolls horizontally by {r['overflow']} px ({r.get('widest', '')})")
        for c in r["clipped"]:
            out.append(f"{page}: a {c['tag']} clips its content by {c['by']} px: {c['text']!r}")
        for c in r["cut"]:
            if not c["whole"]:
                out.append(f"{page}: a table cell is cut with '…' and its whole text is not reachable: {c['text']!r}")
        if r["nav_links"] == 0:
            out.append(f"{page}: no sidebar navigation")
        for fig in r["figures"]:
            px = tick_px(html_dir, page, fig)
            if px is None:
                out.append(f"{page}: comparison figure {fig['src']} records no tick-label size")
            elif px < MIN_TICK_PX:
                out.append(f"{page}: comparison figure {fig['src']}: tick labels {px:.1f} px high on screen "
                           f"(at least {MIN_TICK_PX:g})")
    return out


# -- the checks catch what they are meant to catch -----------------------------------------------------------

def test_the_measuring_page_sees_overflow_clipping_cut_cells_and_a_missing_sidebar(tmp_path):
    chromium()
    site = tmp_path / "site"
    (site / "book").mkdir(parents=True)
    wide = "<table><tr><td>" + "x" * 600 + "</td></tr></table>"
    head = '<head><meta charset="utf-8"></head>'
    (site / "book/wide.html").write_text(f"<html>{head}<body><main>{wide}</main></body></html>", encoding="utf-8")
    clip = ('<div style="width:300px;overflow-x:auto"><pre>' + "y " * 400 + "</pre></div>"
            "<table><tr><td>cut here…</td><td title='the whole text, cut here and more'>the whole…</td></tr></table>")
    nav = '<nav class="bd-docs-nav"><a href="wide.html">wide</a></nav>'
    (site / "book/clip.html").write_text(f"<html>{head}<body>{nav}<main class='bd-article'>{clip}</main></body></html>",
                                         encoding="utf-8")
    report = {r["page"]: r for r in measure_site(site, tmp_path / "profile", ["book/wide.html", "book/clip.html"])}
    assert report["book/wide.html"]["overflow"] > 100 and report["book/wide.html"]["nav_links"] == 0
    got = report["book/clip.html"]
    assert got["overflow"] <= 1 and got["nav_links"] == 1
    assert [c["tag"] for c in got["clipped"]] == ["div"]
    assert [(c["text"], c["whole"]) for c in got["cut"]] == [("cut here…", False), ("the whole…", True)]
    lines = problems(site, list(report.values()))
    assert any("scrolls horizontally" in ln for ln in lines) and any("no sidebar" in ln for ln in lines)
    assert any("cut with '…'" in ln and "cut here" in ln for ln in lines)


def test_tick_size_on_screen_comes_from_the_png_and_the_rendered_width(tmp_path):
    import pandas as pd

    pairs = pd.DataFrame({"model_a": ["a", "a", "b"], "model_b": ["b", "c", "c"], "difference": [0.1, 0.2, 0.1],
                          "ci_low": [0.0, 0.1, 0.0], "ci_high": [0.2, 0.3, 0.2], "significant": [False, True, False]})
    fig = plots.pairwise_differences(pairs, fontsize=9)
    path = tmp_path / "pairs-x.png"
    plots.save(fig, path)
    recorded = float(png_text(path)[plots.TICK_KEY])
    assert recorded == pytest.approx(9 * plots.DPI / 72, abs=0.01)
    natural = png_size(path)[0]
    assert tick_px(tmp_path, "page.html", {"src": "pairs-x.png", "shown": natural / 2, "natural": natural}) == \
        pytest.approx(recorded / 2)


# -- the books ------------------------------------------------------------------------------------------------

@pytest.mark.xdist_group("books")
@pytest.mark.parametrize("which", ["two_run_book", "small_book"])
def test_every_page_reads_at_1280_px(which, request, tmp_path):
    chromium()
    html_dir, _ = request.getfixturevalue(which)
    report = measure_site(html_dir, tmp_path / "profile")
    pages = {r["page"] for r in report}
    side = {p for p in pages if is_side_page(p)}
    assert "book/cards/negex.html" in pages and side, sorted(pages)
    assert problems(html_dir, report) == []
    if which == "two_run_book":  # the comparison figure is there and was measured
        assert any(r["figures"] for r in report if r["page"] == "book/cards/negex.html"), report


if __name__ == "__main__":
    import tempfile

    site_dir = Path(sys.argv[1])
    with tempfile.TemporaryDirectory() as tmp:
        rep = measure_site(site_dir, Path(tmp) / "profile")
    found = problems(site_dir, rep)
    print("\n".join(found) or f"{len(rep)} pages: no problem")
    sys.exit(1 if found else 0)


def _prev_next(html: str) -> dict:
    out = {}
    for kind, cls in (("prev", "left-prev"), ("next", "right-next")):
        m = re.search(rf'<a class="{cls}"\s+href="([^"]+)"', html)
        out[kind] = m.group(1) if m else None
    return out


@pytest.mark.xdist_group("books")
@pytest.mark.parametrize("which", ["two_run_book", "small_book"])
def test_previous_and_next_walk_the_reading_pages_and_keep_runs_to_themselves(which, request):
    """A reading page's previous and next are reading pages (never a run, runs list or data page); a run page's
    lead to its neighbours among the runs of its version, or up to its runs list."""
    import posixpath

    html_dir, _ = request.getfixturevalue(which)
    seen_side = 0
    for rel in site_pages(html_dir):
        links = _prev_next((html_dir / rel).read_text(encoding="utf-8"))
        for kind, href in links.items():
            if href is None:
                continue
            target = posixpath.normpath(posixpath.join(posixpath.dirname(rel), href.split("#")[0]))
            if not is_side_page(rel):
                assert not is_side_page(target), f"{rel}: its {kind} page is {target}, a run or data page"
            else:  # within the card's own side pages, or up to the card page
                seen_side += 1
                card = rel.split("/")[2]
                assert target.startswith(f"book/runs/{card}/") or target == f"book/cards/{card}.html", \
                    (rel, kind, target)
    assert seen_side, "no run page has a previous or next link"
    card = _prev_next((html_dir / "book/cards/negex.html").read_text(encoding="utf-8"))
    assert card["next"] and "runs/" not in card["next"], card


def test_the_reading_sequence_by_hand():
    import importlib.util

    ext = Path(__file__).resolve().parent.parent / "book/_ext/atlas_nav.py"
    spec = importlib.util.spec_from_file_location("atlas_nav", ext)
    nav = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(nav)
    docs = ["intro", "book/cards/a", "book/runs/a/v/data", "book/runs/a/v/index", "book/runs/a/v/m1/p",
            "book/runs/a/v/m2/p", "book/cards/a/v/failures", "book/cards/b"]
    parent = {"book/cards/a": "intro", "book/runs/a/v/data": "book/cards/a", "book/runs/a/v/index": "book/cards/a",
              "book/runs/a/v/m1/p": "book/runs/a/v/index", "book/runs/a/v/m2/p": "book/runs/a/v/index",
              "book/cards/a/v/failures": "book/cards/a", "book/cards/b": "intro"}
    rel = {d: [parent.get(d), docs[i - 1] if i else None, docs[i + 1] if i + 1 < len(docs) else None]
           for i, d in enumerate(docs)}
    order = nav.reading_order(rel, "intro")
    assert order == docs
    assert nav.neighbours(order, rel, "book/cards/a") == ("intro", "book/cards/a/v/failures")
    assert nav.neighbours(order, rel, "book/cards/a/v/failures") == ("book/cards/a", "book/cards/b")
    assert nav.neighbours(order, rel, "book/runs/a/v/m1/p") == ("book/runs/a/v/index", "book/runs/a/v/m2/p")
    assert nav.neighbours(order, rel, "book/runs/a/v/m2/p") == ("book/runs/a/v/m1/p", None)
    assert nav.neighbours(order, rel, "book/runs/a/v/data") == ("book/cards/a", "book/runs/a/v/index")
