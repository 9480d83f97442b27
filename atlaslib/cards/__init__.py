"""The card registry: one module per card, each exposing ``CARD`` (a :class:`Card`).

A card is one dataset + task + protocols + metrics, as its issue specifies. The runner and the book
read everything they need about a card from its ``CARD``: the notebook to execute, its split versions,
the default (version, model, protocol) matrix, the leaderboard metrics, and the publication flags.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field

CARD_MODULES = {
    "negex": "atlaslib.cards.negex",
    "maccrobat": "atlaslib.cards.maccrobat",
    "nli_negation": "atlaslib.cards.nli_negation",
    "tempeval": "atlaslib.cards.tempeval",
}


@dataclass(frozen=True)
class Card:
    name: str
    title: str
    notebook: str                                   # MyST text notebook, relative to the repo root
    versions: tuple[str, ...]                       # frozen split versions; rankings never mix them
    protocols: tuple[str, ...]
    metrics: tuple[str, ...]                        # leaderboard metric base names, primary first
    default_matrix: tuple[tuple[str, str, str], ...]  # (version, model, protocol) for the default book
    higher_is_better: dict = field(default_factory=dict)  # base metric -> bool (default True)
    licence_confirmed: bool = True                  # False: left out of `atlas book --publish`
    licence_note: str = ""
    gated: bool = False                             # data under a DUA: outputs must hold no text
    task: str = ""
    data: str = ""

    @property
    def page(self) -> str:
        return f"book/cards/{self.name}.md"

    def metric_name(self, base: str, protocol: str) -> str:
        """Cell metric names carry the protocol: ``macro_f1`` + ``probe`` → ``macro_f1_probe``."""
        return f"{base}_{protocol}"


def get_card(name: str) -> Card:
    if name not in CARD_MODULES:
        raise KeyError(f"unknown card {name!r}; known cards: {', '.join(sorted(CARD_MODULES))}")
    return importlib.import_module(CARD_MODULES[name]).CARD


def available_cards() -> list[Card]:
    """Cards whose module exists and imports (cards land one issue at a time)."""
    out = []
    for name, mod in CARD_MODULES.items():
        try:
            out.append(importlib.import_module(mod).CARD)
        except ModuleNotFoundError as exc:
            if exc.name != mod:
                raise
    return out
