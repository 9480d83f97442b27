"""The card contract (see :mod:`atlaslib.cards`) for MACCROBAT: :func:`load_items` (:mod:`.data`),
:func:`split` (:mod:`.splitting`), :func:`audit_items`, :func:`predict` (the notebook's calls) and ``counts``;
the run scores through :class:`atlaslib.cards.run.CardRun` (no card-level scorer)."""
from __future__ import annotations

import pandas as pd

from ...splits import SplitManifest
from ..families import Spans
from .card import CARD, TYPES
from .counting import SCORING, counts  # noqa: F401  (the card contract: per-unit counts, see .counting)
from .data import load_items  # noqa: F401  (the card contract)
from .runs import LAST_OUTCOMES, run_protocol
from .splitting import split  # noqa: F401  (the card contract)

# --------------------------------------------------------------------------------------- the card contract
# Entry points with the same names and shapes on every card (see atlaslib.cards); the notebook makes the same
# calls (run_protocol with the run's load, then CardRun.score of the outcome's scored_records).

def audit_items(items: pd.DataFrame, data_dir=None) -> dict:
    """Contract entry point: sentences, reports and kept mentions per type, counted on the items (the full
    tables are :func:`audit` on the corpus)."""
    per_type = {t: 0 for t in TYPES}
    for ms in items["mentions"]:
        for m in ms:
            per_type[m[0]] += 1
    return {"n_items": int(len(items)), "documents": int(items["document"].nunique()), "mentions": per_type}


def run_tokens(items: pd.DataFrame, manifest: SplitManifest, model: str, protocol: str, *, data_dir=None,
               load=None, **options) -> list[dict] | dict[int, list[dict]]:
    """The card's protocols (the family dispatches every one of them here: they tag words, which the family's
    sequence-level probe and fine-tune do not): :func:`run_protocol` with the run's ``load`` (its
    :meth:`CardRun.load <atlaslib.cards.run.CardRun.load>`: the model by the run's decision), kept for the run's
    :func:`.cells.cell_parts` (:func:`.runs.last_outcome`), then the records its
    :meth:`~atlaslib.cards.run.CardRun.score` scores (:meth:`.runs.Outcome.scored_records`; a fine-tuned row over
    several training seeds ``{training seed: records}``); a not-run outcome raises
    :class:`atlaslib.cards.NotRun` with its reason."""
    from .. import NotRun

    out = run_protocol(items, manifest, model, protocol, load=load, **options)
    LAST_OUTCOMES.clear()   # the last run's only: an outcome holds its model, never kept past the next run
    LAST_OUTCOMES[(manifest.version, model, protocol)] = (out, items)
    if out.status != "ok":
        raise NotRun(out.reason)
    return out.scored_records()


#: the card as a card of the spans family: its dispatch (every protocol the card's own, :func:`run_tokens`) and
#: counting (:func:`.counting.counts`, the card's counter)
FAMILY = Spans(CARD, SCORING, load_items=load_items, split=split, counter=counts,
               predictors=dict.fromkeys(CARD.protocols, run_tokens))
predict = FAMILY.predict
