"""A minimal card of the labelled-items family (CONTRIBUTING.md, "Add a card"): is a number even? ``card.py``
declares it and writes its items and split, ``pages.py`` the facts its page quotes, ``toy_card.md`` is its notebook.
``tests/test_toy_card.py`` installs the folder as a package outside the atlas; other tests register it as
``tests.toy_card``."""
from .card import (CARD, FAMILY, FINETUNE, FINETUNE_RECIPE, PROTOCOL, SCORING, VERSION, audit_items,  # noqa: F401
                   cell_parts, counts, load_items, predict, split)
