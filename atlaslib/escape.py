"""User text on the atlas's pages, shown as text: never HTML, a link, a role, math, a table cell break or a
``{{fact:...}}`` placeholder.

Names of systems and models, descriptions, ``trained_on`` entries and every other profile field come from
users (``atlas score --name/--description``, matrix files, profile files). Pages are MyST Markdown, which
passes raw HTML through, so each render point writes such text with :func:`md` (Markdown text: a heading, a
paragraph, a table cell, a link text) or :func:`html_text` (inside HTML the page writes itself).
"""
from __future__ import annotations

import html
import re

# Markdown punctuation that opens something in MyST: code and roles (` { }), links and images ([ ]),
# math ($), table cells (|), emphasis (*), the escape itself (\)
_PUNCT = re.compile(r"([\\`{}\[\]$|*])")
# '_' opens emphasis only at a word edge (CommonMark: never inside a word like bert_base)
_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
# what starts a block when it starts a line: a heading, a list item, a quote, a thematic break, a fence
_BLOCK_START = re.compile(r"^(\s*)(\d*)([#>+=~:.)-])")


class Markup(str):
    """Page markup the atlas built itself from escaped parts (e.g. a link whose text and address were escaped when it
    was made): :func:`md` passes it through as it is, so a table that escapes its text cells keeps it a link."""


def md(text) -> str:
    """``text`` as literal MyST Markdown text on one line: HTML special characters as entities, Markdown
    punctuation backslash-escaped, line breaks as spaces. :class:`Markup` (already safe) is returned as it is."""
    if isinstance(text, Markup):
        return text
    s = " ".join(str(text).split())
    s = _PUNCT.sub(r"\\\1", s)
    s = _UNDERSCORE.sub(r"\\_", s)
    m = _BLOCK_START.match(s)
    if m and (not m.group(2) or m.group(3) in ".)"):
        s = m.group(1) + m.group(2) + "\\" + s[m.end(2):]
    return html.escape(s, quote=False)


def table_cell(text) -> str:
    """The atlas's own text (a card's title, task and data, a published figure's note) in a Markdown table cell:
    only what would break the table (a ``|``, a line break) is escaped, so its markup and its ``{{fact:...}}``
    placeholders stay live. Never for user text (:func:`md`)."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def html_text(text) -> str:
    """``text`` for HTML the page writes itself (attribute values too)."""
    return html.escape(str(text), quote=True)


def md_code(text) -> str:
    """``text`` as inline code when it can be (no backtick, no ``{{`` a page substitution would read), else
    as :func:`md` text: code spans show HTML literally, but a backtick would end the span early."""
    s = " ".join(str(text).split())
    if s and not any(t in s for t in ("`", "|", "{{", "}}")):
        return f"`{s}`"
    return md(s)


def public_location(location) -> str:
    """A location (a profile's base URL, a path) as it may be shown or recorded: a URL without its user name
    and password and without its query string and fragment (``http://alice:pw@host:8/v1?api_key=k`` ->
    ``http://host:8/v1``), where credentials and keys travel; anything else as it is. Parsed, not searched:
    the user info is everything between ``://`` and the last ``@`` before the query string, whatever it holds
    (spaces, quotes, ``<``, ``>``, ``%``, ``/``, ``:``, ``@``). The one redaction of a location: every message,
    page and record that names one composes it from this function's result, never from the location itself."""
    s = str(location)
    m = re.match(r"([A-Za-z][A-Za-z0-9+.-]*://)([^?#]*)", s)
    if m is None:
        return s
    rest = m.group(2)
    if "@" in rest:  # user info ends at its last '@' (a password may hold an unencoded '/', ':' or '@')
        rest = rest[rest.rindex("@") + 1:]
    else:  # a '?' or '#' in the user info: an '@' after it with no '/' before it ends the user info
        whole = s[m.end(1):]
        at = whole.rfind("@")
        if at >= 0 and "/" not in whole[:at]:
            rest = re.match(r"[^?#]*", whole[at + 1:]).group(0)
    return m.group(1) + rest
