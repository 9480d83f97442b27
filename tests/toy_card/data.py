"""The toy card's items (the numbers 0 to 19, generated), their audit and the one split version."""
from __future__ import annotations

import pandas as pd

from atlaslib.splits import SplitManifest

from .card import CARD


def load_items(data_dir=None) -> pd.DataFrame:
    """Twenty items ``toy-00`` … ``toy-19``: the number ``n``, its ``text`` (the digits) and ``gold`` (1: even)."""
    return pd.DataFrame({"item_id": [f"toy-{n:02d}" for n in range(20)], "n": range(20),
                         "text": [str(n) for n in range(20)], "gold": [int(n % 2 == 0) for n in range(20)]})


def audit_items(items: pd.DataFrame, data_dir=None) -> dict:
    """How many items, how many of them even."""
    return {"n_items": int(len(items)), "even": int(items["gold"].sum())}


def split(items: pd.DataFrame, version: str) -> SplitManifest:
    """The first twelve items train, the last eight test (fixed, no seed draws it)."""
    if version not in CARD.versions:
        raise ValueError(f"card toy has no version {version!r}; expected one of {', '.join(CARD.versions)}")
    ids = items["item_id"].tolist()
    return SplitManifest(card="toy", version=version, seed=0, train=ids[:12], test=ids[12:],
                         rules="the first twelve train, the last eight test")
