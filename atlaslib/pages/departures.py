"""The card page's table "Where this page departs from the card", from the card's declaration.

Each card declares its departures from its specification as data (``Card.departures``, a tuple of
:class:`atlaslib.cards.Departure`): what the card says, what the atlas does instead, and why. The text of
a departure may hold ``{{fact:KEY}}`` placeholders, so that every number in it is computed when the page
renders (:mod:`atlaslib.pages.facts`). This module lays the table out and provides the facts every card
can use without code of its own:

- ``departures.<card>.examples.<version>``: on which side of split version ``<version>`` the items the
  specification shows as its own examples (``Card.spec_examples``) land: test, train or neither;
- ``departures.<card>.test_items.<version>``: the test size of the version's split as the card's split
  function draws it.

The split is the card's own (``load_items`` then ``split``), computed once per build and card.

It also provides the card's licence as declared, so that the home page and the card page tell one story:

- ``card.<card>.licence``: ``Card.licence``, the data's licence as its source states it;
- ``card.<card>.publication``: what the atlas does with the card's results because of it (shown in the
  published book, or local evaluation only).
"""
from __future__ import annotations

from ..cards import Card
from . import facts

MARK = "<!-- departures -->"
HEADING = "Where this page departs from the card"


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ").strip() or "—"


def departures_markdown(card: Card, heading_level: int = 2) -> str:
    """The departures table of ``card`` (placeholders left for the site's fact pass); a card that declares
    none gets one line saying so, so the table's place on the page is never silently empty."""
    head = f"{'#' * heading_level} {HEADING}\n\n"
    if not card.departures:
        return head + "This page follows the card's specification; it declares no departure.\n"
    lines = [head + "What the card's specification says, what this atlas does instead, and why. Counts are "
             "computed from the data and the splits when the page is built.\n",
             ":::{container} atlas-departures",
             "| topic | the card says | this atlas | why |", "|---|---|---|---|"]
    for d in card.departures:
        lines.append(f"| {_cell(d.topic)} | {_cell(d.card)} | {_cell(d.atlas)} | {_cell(d.why)} |")
    lines.append(":::\n")
    return "\n".join(lines)


def _side(manifest, item_id: str) -> str:
    if item_id in set(manifest.test):
        return "test"
    if item_id in set(manifest.train):
        return "train"
    return "neither"


def examples_text(card: Card, manifest) -> str:
    """``negex-0003 and negex-1663 in test; negex-0002 in neither train nor test`` for one split."""
    sides: dict[str, list[str]] = {}
    for iid in card.spec_examples:
        sides.setdefault(_side(manifest, iid), []).append(f"`{iid}`")
    words = {"test": "in test", "train": "in train", "neither": "in neither train nor test"}
    parts = [f"{facts.join_and(ids)} {words[s]}" for s, ids in
             sorted(sides.items(), key=lambda kv: ("test", "train", "neither").index(kv[0]))]
    return "; ".join(parts) if parts else "no example items declared"


def _departure_facts(ctx: facts.FactContext) -> dict[str, facts.Fact]:
    import importlib

    from ..cards import CARD_MODULES, available_cards

    out: dict[str, facts.Fact] = {}
    for card in available_cards():
        if not card.spec_examples:
            continue
        mod = importlib.import_module(CARD_MODULES[card.name])
        src = f"{card.name}: load_items and split (the card's contract), Card.spec_examples"
        items = mod.load_items(ctx.data_dir)
        for version in card.versions:
            manifest = mod.split(items, version)
            out[f"departures.{card.name}.examples.{version}"] = facts.Fact(examples_text(card, manifest), "text", src)
            out[f"departures.{card.name}.test_items.{version}"] = facts.Fact(len(manifest.test), "count", src)
    return out


facts.register_provider("departures", _departure_facts)


def publication(card: Card) -> str:
    """What the atlas does with the card's results, from its declaration."""
    if not card.licence_confirmed:
        return "local evaluation only: left out of the published book until the licence is confirmed"
    return "shown in the published book" + ("; computations on the gated data stay local" if card.gated else "")


def _card_facts(ctx: facts.FactContext) -> dict[str, facts.Fact]:
    from ..cards import available_cards

    out = {}
    for card in available_cards():
        src = f"atlaslib.cards.{card.name}: CARD.licence, licence_confirmed, gated"
        out[f"card.{card.name}.licence"] = facts.Fact(card.licence or "not declared", "text", src)
        out[f"card.{card.name}.publication"] = facts.Fact(publication(card), "text", src)
        out[f"card.{card.name}.licence_note"] = facts.Fact(card.licence_note or "", "text",
                                                           f"atlaslib.cards.{card.name}: CARD.licence_note")
    return out


facts.register_provider("card", _card_facts)
