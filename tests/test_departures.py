"""Each card's departures from its specification are data (``Card.departures``) and become one table on its
page; the facts they quote are computed from the card's own split."""
from __future__ import annotations

import pytest

from atlaslib.cards import Card, Departure, available_cards, negex
from atlaslib.pages import departures, facts


def test_every_card_declares_its_departures_as_data():
    for card in available_cards():
        assert card.departures, f"{card.name} declares no departure"
        for d in card.departures:
            assert isinstance(d, Departure) and d.topic and d.card and d.atlas, (card.name, d)
            assert not facts.typed_numbers(d.atlas), (card.name, d.atlas)  # numbers in it are computed


def test_the_table_has_one_row_per_departure_and_escapes_pipes():
    card = Card(name="toy", title="Toy", notebook="", versions=("v1",), protocols=("p",), metrics=("m",),
                default_matrix=(), departures=(Departure("a | b", "says x", "does y", "because"),
                                               Departure("c", "d", "e")))
    md = departures.departures_markdown(card)
    rows = [ln for ln in md.splitlines() if ln.startswith("| ") and not ln.startswith("| topic")]
    assert md.startswith(f"## {departures.HEADING}") and len(rows) == 2
    assert rows[0] == "| a \\| b | says x | does y | because |" and rows[1].endswith("| — |")
    plain = Card(name="toy", title="Toy", notebook="", versions=("v1",), protocols=("p",), metrics=("m",),
                 default_matrix=())
    assert "declares no departure" in departures.departures_markdown(plain)


def test_example_items_are_placed_by_the_cards_split(data_dir):
    items = negex.load_items(data_dir)
    ctx = facts.FactContext(data_dir=data_dir)
    for version in negex.CARD.versions:
        m = negex.split(items, version)
        test, train = set(m.test), set(m.train)
        text = ctx.get(f"departures.negex.examples.{version}").text()
        for iid in negex.CARD.spec_examples:
            side = "in test" if iid in test else "in train" if iid in train else "in neither train nor test"
            clause = next(part for part in text.split("; ") if f"`{iid}`" in part)
            assert clause.endswith(side), (version, iid, text)
        assert ctx.get(f"departures.negex.test_items.{version}").value == len(m.test)


@pytest.mark.parametrize("key", ["negex.full_test.n", "negex.full_test.negated", "negex.full_excluded"])
def test_negex_split_departure_quotes_computed_counts(key):
    atlas = negex.CARD.departures[0].atlas
    assert f"{{{{fact:{key}}}}}" in atlas


def test_a_model_page_shows_what_the_model_learnt_from_as_the_rows_notes_read_it(tmp_path):
    """The model page shows the profile's declared training data (what the contamination note reads) beside its
    training on a card's data: SmolLM2's page said 'trained on —' while each of its rows named web and code crawls."""
    from atlaslib.cards import available_cards
    from atlaslib.models import get_profile
    from atlaslib.pages.site import render_models

    render_models(tmp_path, available_cards(), [])
    page = (tmp_path / "book" / "models" / "smollm2-135m-instruct.md").read_text(encoding="utf-8")
    declared = get_profile("smollm2-135m-instruct").training_data
    assert "web-crawl" in declared
    assert f"| training data (declared by its maker) | {', '.join(declared)} |" in page
    assert "| trained or tuned on (the datasets the cards check for overlap) | none declared |" in page
    assert "| overlaps a card's data | none of the cards |" in page


def test_a_model_page_names_what_it_was_trained_on_apart_from_whether_that_overlaps_a_card(tmp_path):
    """MiniLM's page called 'sentence-pairs-1b' "a card's data" (gpt2's 'webtext', the cross-encoder's 'snli,
    multi_nli' the same): the field is what the model was trained or tuned on, and the overlap with a card is a row
    of its own, by each card's own overlap rule; negspacy's NegEx-kit triggers do overlap the NegEx card."""
    from atlaslib.cards import available_cards
    from atlaslib.models import get_profile
    from atlaslib.pages.site import render_models

    render_models(tmp_path, available_cards(), [])
    page = (tmp_path / "book" / "models" / "all-minilm-l6-v2.md").read_text(encoding="utf-8")
    assert get_profile("all-minilm-l6-v2").trained_on == ["sentence-pairs-1b"]
    assert "| trained or tuned on (the datasets the cards check for overlap) | sentence-pairs-1b |" in page
    assert "| overlaps a card's data | none of the cards |" in page and "a card's data | sentence" not in page
    rules = (tmp_path / "book" / "models" / "negspacy-negex-kit.md").read_text(encoding="utf-8")
    assert "| overlaps a card's data | negex (negex-kit-triggers) |" in rules
