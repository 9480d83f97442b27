"""Offline link check over a built HTML site (the book's quality gate).

Every ``.html`` page under the site directory is parsed with the standard library's HTML parser. Each
``href`` / ``src`` / ``srcset`` / ``poster`` attribute and each ``<meta http-equiv="refresh">`` target is
classified:

- *internal* (relative like ``../cards/negex.html`` or root-relative like ``/book/intro.html``, the root
  being the site directory): the target file must exist inside the site (a directory needs an
  ``index.html``), and a ``#fragment`` must be an ``id`` (or an ``<a name=...>``) in the target page;
  a bare ``#`` or an empty fragment means the top of the page and is always fine. Query strings
  (``?v=3c74b3bc``) are ignored; percent-escapes are decoded.
- *external* (``http:``, ``https:``, ``mailto:``, ``ftp:``, protocol-relative ``//host``): listed in the
  report, never fetched (the check runs offline).
- ``data:``, ``javascript:``, ``tel:``, ``blob:``, ``about:`` URLs are neither checked nor listed.

Pages under ``_static/`` and ``_sources/`` are not checked as pages (the themes ship Jinja templates
there, e.g. ``_static/webpack-macros.html`` with ``{{ pathto(...) }}`` placeholders), but links *into*
them are. Links that leave the site directory are reported as problems.

``check(html_dir)`` returns the problems (empty when every link resolves); ``scan(html_dir)`` returns the
whole :class:`LinkReport` with the external links; ``python -m atlaslib.linkcheck DIR`` prints the
report and exits 1 when there are problems.
"""
from __future__ import annotations

import posixpath
import re
import sys
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

EXTERNAL_SCHEMES = {"http", "https", "mailto", "ftp", "ftps"}
IGNORED_SCHEMES = {"data", "javascript", "tel", "blob", "about"}
SKIP_PAGE_DIRS = ("_static", "_sources")
URL_ATTRS = {"href", "src", "poster"}


@dataclass(frozen=True)
class Problem:
    """One broken internal link: ``page`` (site-relative), source ``line``, the ``url`` as written and
    what is wrong with it (``kind`` is "missing file", "missing anchor" or "outside site")."""
    page: str
    line: int
    url: str
    kind: str
    detail: str

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: {self.kind}: {self.url!r} ({self.detail})"


@dataclass(frozen=True)
class ExternalLink:
    page: str
    line: int
    url: str

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: {self.url}"


@dataclass
class LinkReport:
    site: Path
    pages: int = 0
    internal_links: int = 0
    problems: list[Problem] = field(default_factory=list)
    external: list[ExternalLink] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        lines = [f"link check of {self.site}: {self.pages} pages, {self.internal_links} internal links, "
                 f"{len(self.problems)} problem(s), {len(self.external)} external link(s) listed (not fetched)"]
        lines += [f"  {p}" for p in self.problems]
        return "\n".join(lines)


class _PageParser(HTMLParser):
    """Collects (line, url) of every link-like attribute and the page's anchor targets."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[tuple[int, str]] = []
        self.anchors: set[str] = set()

    def handle_starttag(self, tag, attrs):
        line = self.getpos()[0]
        d = {k.lower(): (v or "") for k, v in attrs}
        if d.get("id"):
            self.anchors.add(d["id"])
        if tag == "a" and d.get("name"):
            self.anchors.add(d["name"])
        for k in URL_ATTRS:
            if k in d and d[k].strip():
                self.links.append((line, d[k].strip()))
        if d.get("srcset"):
            for part in d["srcset"].split(","):
                url = part.strip().split(" ")[0]
                if url:
                    self.links.append((line, url))
        if tag == "meta" and d.get("http-equiv", "").lower() == "refresh":
            m = re.search(r"url\s*=\s*['\"]?([^'\";]+)", d.get("content", ""), flags=re.I)
            if m:
                self.links.append((line, m.group(1).strip()))

    handle_startendtag = handle_starttag


def _parse(path: Path) -> _PageParser:
    parser = _PageParser()
    parser.feed(path.read_text(encoding="utf-8", errors="replace"))
    parser.close()
    return parser


def _is_page(rel: Path) -> bool:
    return rel.suffix.lower() in (".html", ".htm") and not (rel.parts and rel.parts[0] in SKIP_PAGE_DIRS)


def scan(html_dir) -> LinkReport:
    """Check every internal link and anchor of every page under ``html_dir``; list external links."""
    site = Path(html_dir)
    if not site.is_dir():
        raise NotADirectoryError(f"link check: html_dir {str(site)!r} is not a directory; expected the built "
                                 f"HTML site (e.g. <build>/site/_build/html)")
    site = site.resolve()
    pages = sorted(p for p in site.rglob("*") if p.is_file() and _is_page(p.relative_to(site)))
    if not pages:
        raise FileNotFoundError(f"link check: no .html pages under {str(site)!r}; expected a built HTML site")
    report = LinkReport(site=site, pages=len(pages))
    anchors_cache: dict[Path, set[str]] = {}

    def anchors_of(target: Path) -> set[str]:
        if target not in anchors_cache:
            anchors_cache[target] = _parse(target).anchors
        return anchors_cache[target]

    for page in pages:
        rel_page = page.relative_to(site).as_posix()
        parsed = _parse(page)
        anchors_cache[page] = parsed.anchors
        for line, url in parsed.links:
            parts = urlsplit(url)
            scheme = parts.scheme.lower()
            if scheme in IGNORED_SCHEMES:
                continue
            if scheme or parts.netloc:  # http:, mailto:, //host/...: listed, not fetched
                report.external.append(ExternalLink(rel_page, line, url))
                continue
            report.internal_links += 1
            path_part, fragment = unquote(parts.path), unquote(parts.fragment)
            if not path_part:
                target = page
            else:
                base = "" if path_part.startswith("/") else posixpath.dirname(rel_page)
                joined = posixpath.normpath(posixpath.join(base, path_part.lstrip("/")))
                if joined == ".." or joined.startswith("../"):
                    report.problems.append(Problem(rel_page, line, url, "outside site",
                                                   f"resolves to {joined!r}, outside {site}"))
                    continue
                target = site / joined
                if target.is_dir():
                    target = target / "index.html"
                if not target.is_file():
                    report.problems.append(Problem(rel_page, line, url, "missing file",
                                                   f"{target.relative_to(site).as_posix()} does not exist"))
                    continue
            if fragment and target.suffix.lower() in (".html", ".htm") and fragment not in anchors_of(target):
                report.problems.append(Problem(rel_page, line, url, "missing anchor",
                                               f"no id or name {fragment!r} in "
                                               f"{target.relative_to(site).as_posix()}"))
    return report


def check(html_dir) -> list[Problem]:
    """The broken internal links and anchors of the site under ``html_dir`` (empty list: all good)."""
    return scan(html_dir).problems


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m atlaslib.linkcheck HTML_DIR", file=sys.stderr)
        return 2
    report = scan(argv[0])
    print(report.summary())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
