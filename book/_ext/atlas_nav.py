"""The book's reading sequence: "previous" and "next" walk the pages a reader reads in order, not the run pages.

Sphinx links every page to its neighbours in table-of-contents order, so a card page's "next" would be the
first of its run notebooks and the next card's "previous" the last of them. Run pages, the runs list of a
split version and its data page (everything under ``book/runs/``, :data:`SIDE_PREFIX`) are in the table of
contents (the sidebar lists them under their card) but out of that sequence:

- on a reading page, "previous" and "next" are the nearest reading pages before and after it in toc order;
- on a side page, they are its neighbours among the side pages with the same parent in the toc (the other
  runs of the version; the data page and the runs list of the card), and "previous" of the first one is the
  parent itself.

Enabled by ``_config.yml`` (``sphinx.local_extensions``).
"""
from __future__ import annotations

SIDE_PREFIX = "book/runs/"


def is_side(doc: str) -> bool:
    return doc.startswith(SIDE_PREFIX)


def reading_order(relations: dict, root: str) -> list[str]:
    """Every document in toc order, following Sphinx's ``next`` relation from the root."""
    order, seen, doc = [], set(), root
    while doc and doc not in seen:
        order.append(doc)
        seen.add(doc)
        doc = (relations.get(doc) or [None, None, None])[2]
    return order


def neighbours(order: list[str], relations: dict, doc: str) -> tuple[str | None, str | None]:
    """(previous, next) of ``doc`` in the book's reading sequence (see the module docstring)."""
    if doc not in order:
        return None, None
    at = order.index(doc)
    if not is_side(doc):
        prev = next((d for d in reversed(order[:at]) if not is_side(d)), None)
        nxt = next((d for d in order[at + 1:] if not is_side(d)), None)
        return prev, nxt
    parent = (relations.get(doc) or [None])[0]
    siblings = [d for d in order if is_side(d) and (relations.get(d) or [None])[0] == parent]
    k = siblings.index(doc)
    prev = siblings[k - 1] if k > 0 else parent
    nxt = siblings[k + 1] if k + 1 < len(siblings) else None
    return prev, nxt


def _page_context(app, pagename, templatename, context, doctree):
    env, builder = app.builder.env, app.builder
    if not hasattr(env, "collect_relations") or pagename not in env.titles:
        return
    cache = getattr(app, "_atlas_reading", None)
    if cache is None:
        relations = env.collect_relations()
        cache = app._atlas_reading = (relations, reading_order(relations, app.config.root_doc))
    relations, order = cache
    prev, nxt = neighbours(order, relations, pagename)

    def link(doc):
        if doc is None or doc not in env.titles:
            return None
        return {"link": builder.get_relative_uri(pagename, doc),
                "title": builder.render_partial(env.titles[doc])["title"]}

    context["prev"], context["next"] = link(prev), link(nxt)


def setup(app):
    app.connect("html-page-context", _page_context)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
