"""NegEx as a card of the binary-items family (:data:`FAMILY`), declared: the family's protocols (an assertion head
or scored answer options under zero_shot, the probe, the fine-tune whose weights are keyed by the kit's sha256),
counts (the sentence groups beside the stratified ones; labels without scores leave ROC-AUC unreported with the
card's reason), cell parts (scored by the run) and outside split."""
from __future__ import annotations

from ..families import BinaryItems
from .card import (ANNOTATIONS, ASSERTION_TO_DECISION, CARD, FINETUNE_RECIPE, LABELS, NO_SCORE_REASON, OPTION_PROMPT,
                   OPTIONS)
from .counting import SCORING
from .data import load_items
from .splitting import split

FAMILY = BinaryItems(CARD, SCORING, load_items=load_items, split=split, labels=LABELS, gold="decision",
                     fields=("sentence_key",), inputs=("concept", "sentence", "text"), recipe=FINETUNE_RECIPE,
                     groups={"sentence": "sentence_key"}, no_score=NO_SCORE_REASON, prompt=OPTION_PROMPT,
                     options=OPTIONS, assertion=ASSERTION_TO_DECISION, data=(ANNOTATIONS,),
                     answer="label (affirmed | negated) and optional score = P(negated)")
counts = FAMILY.counts
