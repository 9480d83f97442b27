"""The card contract (see :mod:`atlaslib.cards`) for MACCROBAT: :func:`load_items` (:mod:`.data`),
:func:`split` (:mod:`.splitting`), :func:`audit_items`, ``predict`` and ``counts`` (:mod:`.counting`), as a card
of the spans family (``FAMILY``); the run scores through :class:`atlaslib.cards.run.CardRun`."""
from __future__ import annotations

import pandas as pd

from ...splits import SplitManifest
from ..families import Spans
from .card import CARD, TYPES
from .counting import SCORING, counts
from .data import load_items
from .runs import LAST_OUTCOMES, run_protocol
from .splitting import split


def audit_items(items: pd.DataFrame, data_dir=None) -> dict:
    """Sentences, reports and kept mentions per type, counted on the items (the full tables: :func:`audit`)."""
    found = [m[0] for ms in items["mentions"] for m in ms]
    return {"n_items": int(len(items)), "documents": int(items["document"].nunique()),
            "mentions": {t: found.count(t) for t in TYPES}}


def run_tokens(items: pd.DataFrame, manifest: SplitManifest, model: str, protocol: str, *, data_dir=None,
               load=None, **options) -> list[dict] | dict[int, list[dict]]:
    """Every protocol of the card (they tag words, which the family's sequence-level probe and fine-tune do not):
    :func:`run_protocol` with the run's ``load``, its outcome kept for the run's cell parts and variants (the last
    run's only: an outcome holds its model), its records returned (a fine-tuned row: ``{training seed:
    records}``); a not-run outcome raises :class:`atlaslib.cards.NotRun` with its reason."""
    from .. import NotRun

    out = run_protocol(items, manifest, model, protocol, load=load, **options)
    LAST_OUTCOMES.clear()
    LAST_OUTCOMES[(manifest.version, model, protocol)] = (out, items)
    if out.status != "ok":
        raise NotRun(out.reason)
    return out.scored_records()


#: the card as a card of the spans family: every protocol dispatched to :func:`run_tokens`, counted by the card's
#: counter (:func:`.counting.counts`)
FAMILY = Spans(CARD, SCORING, load_items=load_items, split=split, counter=counts,
               predictors=dict.fromkeys(CARD.protocols, run_tokens))
predict = FAMILY.predict
