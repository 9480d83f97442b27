"""A minimal card, in the idiom every new card follows (CONTRIBUTING.md, "Add a card"): is a number even?

Five small files and a notebook: :mod:`.card` (``CARD``, ``SCORING`` and the fine-tune recipe, as data),
:mod:`.data` (``load_items``, ``audit_items``, ``split``: twenty generated numbers, the last eight test),
:mod:`.predict` (``predict``: records from a baseline or, one set per training seed, from a fine-tuned model;
``cell_parts``), :mod:`.counting` (``counts`` per item and ``score``: accuracy with its exact interval, through
the one engine), :mod:`.pages` (``FACTS`` its page quotes) and ``toy_card.md`` (its notebook). This file only
re-exports, so ``<card>.X`` works for every name.

``tests/test_toy_card.py`` copies the folder into a package of a temporary distribution outside the atlas,
declared by an entry point, and nothing else is edited; other tests register it as ``tests.toy_card`` for
their duration.
"""
from .card import CARD, FINETUNE, FINETUNE_RECIPE, LABELS, PROTOCOL, SCORING, VERSION  # noqa: F401
from .counting import counts, score  # noqa: F401
from .data import audit_items, load_items, split  # noqa: F401
from .predict import cell_parts, predict  # noqa: F401
