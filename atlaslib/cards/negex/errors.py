"""Where a NegEx run errs: false negatives and false positives, and the test items holding a phrase
(a known weak spot)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from .card import LABELS

def error_table(test: pd.DataFrame, out: dict, kind: str = "fn", n: int = 10) -> pd.DataFrame:
    """Up to ``n`` false negatives (``fn``: negated called affirmed) or false positives (``fp``)."""
    pred = np.asarray(out["pred"])
    gold = test["label"].to_numpy()
    mask = (gold == 1) & (pred == 0) if kind == "fn" else (gold == 0) & (pred == 1)
    cols = ["item_id", "concept", "text"]
    return test.loc[mask, cols].head(n).reset_index(drop=True)


def phrase_cases(test: pd.DataFrame, out: dict, phrase: str = "negative for", n: int = 10) -> pd.DataFrame:
    """Test items whose sentence contains ``phrase`` (case-insensitive), with gold and predicted decisions:
    for looking at a known weak spot (medspaCy's default rules do not negate "is negative for X")."""
    mask = test["sentence"].str.contains(phrase, case=False, regex=False).to_numpy()
    pred = np.asarray(out["pred"])[mask]
    frame = test.loc[mask, ["item_id", "text", "decision"]].copy()
    frame["predicted"] = [LABELS[int(p)] for p in pred]
    return frame.head(n).reset_index(drop=True)
