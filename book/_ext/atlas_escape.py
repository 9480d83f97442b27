"""Page titles reach the site's HTML as text, wherever the theme or Sphinx's search puts them.

A page title can hold user text: a model page is titled with a system's name (``atlas score --name``), a profile's
name or a model folder's path, and the pages write it as escaped Markdown text (:func:`atlaslib.escape.md`), so
the doctree's title is the plain text ``X<img src=...>``. Sphinx's own HTML writes that title escaped, but two
consumers take the title's plain text (``astext()``) and put it into HTML as it is:

- sphinx-book-theme's print header: ``add_metadata_to_page`` sets ``pagetitle`` to the title's text and
  ``layout.html`` writes ``<h1>{{ pagetitle }}</h1>`` unescaped. :func:`_page_context` runs after the theme and
  sets ``pagetitle`` to the same text, HTML-escaped;
- Sphinx's search index: ``alltitles`` holds each section title's text, and ``searchtools.js`` puts a matching
  title into the results list with ``innerHTML``. :func:`_doctree_resolved` makes the indexer store every title
  HTML-escaped (as the index's document ``titles`` already are), so the index holds text that shows as itself.
  It runs in the main process, where the indexer is fed (``write_doc_serialized``), serial or parallel build.

Enabled by ``_config.yml`` (``sphinx.local_extensions``).
"""
from __future__ import annotations

import html


def escaped_titles(titles):
    """``[(title, anchor)]`` of a page's section titles with each title HTML-escaped (shown as itself by
    ``innerHTML``)."""
    return [(html.escape(title, quote=False), anchor) for title, anchor in titles]


def _escape_indexer(indexer) -> None:
    """Make ``indexer`` (Sphinx's ``IndexBuilder``) store each page's section titles escaped, once."""
    if indexer is None or getattr(indexer, "_atlas_escaped", False):
        return
    collect = indexer._word_collector

    def collect_escaped(doctree):
        store = collect(doctree)
        store.titles = escaped_titles(store.titles)
        return store

    indexer._word_collector = collect_escaped
    indexer._atlas_escaped = True


def _doctree_resolved(app, doctree, docname):
    # the html builder made its indexer in prepare_writing, before any doctree of the write phase is resolved,
    # and feeds it right after (write_doc_serialized)
    _escape_indexer(getattr(app.builder, "indexer", None))


def _page_context(app, pagename, templatename, context, doctree):
    if "pagetitle" in context and pagename in app.builder.env.titles:
        context["pagetitle"] = html.escape(app.builder.env.titles[pagename].astext(), quote=False)


def setup(app):
    app.connect("doctree-resolved", _doctree_resolved)
    app.connect("html-page-context", _page_context, priority=900)  # after the theme's (500, 501)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
