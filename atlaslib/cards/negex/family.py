"""NegEx as a card of the binary-items family (:data:`FAMILY`), declared: the family's protocols (an assertion head
or scored answer options under zero_shot, the probe, the fine-tune whose weights are keyed by the kit's sha256),
counts (the sentence groups beside the stratified ones; labels without scores leave ROC-AUC unreported with the
card's reason), cell parts (scored by the run) and outside split."""
from __future__ import annotations

import pandas as pd

from ..families import BinaryItems
from .card import (ANNOTATIONS, ASSERTION_TO_DECISION, CARD, FINETUNE_RECIPE, LABELS, NO_SCORE_REASON, OPTION_PROMPT,
                   OPTIONS, SLICES)
from .counting import SCORING
from .data import load_items
from .splitting import split

SLICE_FIELDS = tuple(s["field"] for s in SLICES.values())


def items_with_slices(data_dir=None) -> pd.DataFrame:
    """The kit's items with their slice fields (:func:`.cells.item_slices`; object columns, so a missing trigger
    stays None, not NaN), so that the family's records carry them as a run's do (an outside system's)."""
    from .cells import item_slices

    items = load_items(data_dir)
    rows = item_slices(items, data_dir=data_dir)
    return items.assign(**{f: pd.Series([r[f] for r in rows], index=items.index, dtype=object) for f in SLICE_FIELDS})


FAMILY = BinaryItems(CARD, SCORING, load_items=items_with_slices, split=split, labels=LABELS, gold="decision",
                     fields=("sentence_key", *SLICE_FIELDS), inputs=("concept", "sentence", "text"),
                     recipe=FINETUNE_RECIPE,
                     groups={"sentence": "sentence_key"}, no_score=NO_SCORE_REASON, prompt=OPTION_PROMPT,
                     options=OPTIONS, assertion=ASSERTION_TO_DECISION, data=(ANNOTATIONS,),
                     answer="label (affirmed | negated) and optional score = P(negated)")
counts = FAMILY.counts
