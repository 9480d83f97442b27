"""Offline link check: a hand-made site with one of each kind of link, and the session's small book with its
publish build (``tests/books.py``)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from atlaslib import linkcheck

INDEX = """<!DOCTYPE html><html><head>
<meta http-equiv="Refresh" content="0; url=book/intro.html" />
<link rel="stylesheet" href="_static/style.css?v=3c74b3bc">
<script src="_static/missing.js"></script>
</head><body>
<a id="top"></a>
<p><a href="book/intro.html">good</a>
<a href="book/intro.html#reading">good anchor</a>
<a href="/book/intro.html#legacy">root-relative, anchor given by name=</a>
<a href="book/">directory with index.html</a>
<a href="book/my%20notes.html">percent-escaped</a>
<a href="#top">same page</a> <a href="#">top of page</a>
<a href="book/gone.html">missing file</a>
<a href="book/intro.html#no-such-section">missing anchor</a>
<a href="#nowhere">missing anchor on this page</a>
<a href="../outside.html">outside</a>
<a href="https://example.org/paper">external</a>
<a href="mailto:atlas@example.org">mail</a>
<a href="data:text/plain,hi">data</a> <a href="javascript:void(0)">js</a>
<img src="_images/fig.png" srcset="_images/fig.png 1x, _images/fig2x.png 2x">
</p></body></html>
"""
INTRO = """<html><body><section id="reading"><h2>Reading</h2>
<a name="legacy"></a><a href="../index.html#top">back</a><a href="cards/negex.html">card</a>
<a href="//cdn.example.org/lib.js">protocol-relative</a></section></body></html>"""
TEMPLATE = '<link href="{{ pathto(\'_static/styles/theme.css\', 1) }}" rel="stylesheet" />'


@pytest.fixture
def hand_made(tmp_path) -> Path:
    site = tmp_path / "html"
    (site / "book").mkdir(parents=True)
    (site / "_static").mkdir()
    (site / "_images").mkdir()
    (site / "index.html").write_text(INDEX)
    (site / "book" / "intro.html").write_text(INTRO)
    (site / "book" / "index.html").write_text("<html><body>book</body></html>")
    (site / "book" / "my notes.html").write_text("<html><body>notes</body></html>")
    (site / "_static" / "style.css").write_text("body {}")
    (site / "_static" / "webpack-macros.html").write_text(TEMPLATE)  # theme template: not a page
    (site / "_images" / "fig.png").write_bytes(b"\x89PNG")
    return site


def test_hand_made_site_reports_exactly_the_broken_links(hand_made):
    report = linkcheck.scan(hand_made)
    got = sorted((p.page, p.url, p.kind) for p in report.problems)
    assert got == sorted([
        ("index.html", "_static/missing.js", "missing file"),
        ("index.html", "book/gone.html", "missing file"),
        ("index.html", "book/intro.html#no-such-section", "missing anchor"),
        ("index.html", "#nowhere", "missing anchor"),
        ("index.html", "../outside.html", "outside site"),
        ("index.html", "_images/fig2x.png", "missing file"),
        ("book/intro.html", "cards/negex.html", "missing file"),
    ])
    assert sorted(str(e.url) for e in report.external) == [
        "//cdn.example.org/lib.js", "https://example.org/paper", "mailto:atlas@example.org"]
    # 4 pages (the _static template is skipped); 17 internal links in index.html, 2 in intro.html
    assert report.pages == 4 and report.internal_links == 19
    assert report.problems == linkcheck.check(hand_made) and not report.ok
    gone = next(p for p in report.problems if p.url == "book/gone.html")
    assert gone.line == 13 and str(gone) == ("index.html:13: missing file: 'book/gone.html' "
                                             "(book/gone.html does not exist)")
    anchor = next(p for p in report.problems if p.url.endswith("#no-such-section"))
    assert "no id or name 'no-such-section' in book/intro.html" in anchor.detail


def test_fixing_the_links_empties_the_report(hand_made):
    (hand_made / "index.html").write_text("<a href='book/intro.html#reading'>x</a><a href='https://x.org'>y</a>"
                                          "<meta http-equiv='refresh' content='0; URL=\"book/\"'>")
    (hand_made / "book" / "intro.html").write_text("<h2 id='reading'>r</h2><a href='../index.html'>home</a>")
    report = linkcheck.scan(hand_made)
    assert linkcheck.check(hand_made) == [] and report.ok and report.internal_links == 3
    assert [e.url for e in report.external] == ["https://x.org"]


def test_meta_refresh_target_is_checked(tmp_path):
    (tmp_path / "index.html").write_text('<meta http-equiv="Refresh" content="0; url=book/intro.html" />')
    assert [(p.url, p.kind) for p in linkcheck.check(tmp_path)] == [("book/intro.html", "missing file")]


def test_bad_input_is_named(tmp_path):
    with pytest.raises(NotADirectoryError, match="html_dir .*nope.* is not a directory"):
        linkcheck.check(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no .html pages under .*empty"):
        linkcheck.check(tmp_path / "empty")


def test_command_line_exit_code(hand_made, capsys):
    assert linkcheck.main([str(hand_made)]) == 1
    out = capsys.readouterr().out
    assert "7 problem(s)" in out and "index.html:13: missing file: 'book/gone.html'" in out
    assert linkcheck.main([]) == 2


@pytest.mark.xdist_group("books")
def test_small_real_build_has_no_broken_links(small_book, tmp_path):
    html_dir, _ = small_book
    report = linkcheck.scan(html_dir)
    assert report.problems == [], report.summary()
    # the check really walked the book: card page, both run pages, their anchors and downloads
    assert report.pages >= 8 and report.internal_links > 300
    pages = {p.relative_to(html_dir).as_posix() for p in html_dir.rglob("*.html")}
    assert {"book/cards/negex.html", "book/runs/negex/atlas-n100-v1/majority/zero_shot.html"} <= pages
    # and it notices when the built site loses a page the leaderboard links to (in a copy: the book is shared)
    site = tmp_path / "html"
    shutil.copytree(html_dir, site)
    (site / "book/runs/negex/atlas-n100-v1/majority/zero_shot.html").unlink()
    broken = linkcheck.check(site)
    assert {p.page for p in broken} >= {"book/cards/negex.html"}
    assert all(p.kind == "missing file" and p.url.endswith("majority/zero_shot.html") for p in broken)


@pytest.mark.xdist_group("books")
def test_publish_build_of_the_small_book_has_no_broken_links(small_book_publish):
    """The publish build drops the NegEx card (licence unconfirmed): nothing may still link to its pages."""
    site, _ = small_book_publish
    assert (site / "book" / "withheld.html").is_file() and not (site / "book" / "cards" / "negex.html").exists()
    report = linkcheck.scan(site)
    assert report.problems == [], report.summary()
    assert report.pages >= 5
