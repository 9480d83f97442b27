"""The card contract (see :mod:`atlaslib.cards`) for the NLI negation challenge: :func:`load_items` and
:func:`split` (the cases of every split version, every case a test case), and the run's calls, the
notebook's: :func:`predict` (the card's labelled-items :data:`FAMILY`, dispatching to
:func:`.card.predict_cases`) and :func:`.card.cell_parts` (scored by the run, :meth:`CardRun.score
<atlaslib.cards.run.CardRun.score>`: the card's :mod:`.counting` through the one engine)."""
from __future__ import annotations

from collections import Counter

from ..families import LabelledItems
from .card import CARD, PROTOCOL, cell_parts, predict_cases, version_cases  # noqa: F401
from .corpus import ABSTENTION, LABELS, VERSION
from .counting import SCORING, counts as count_cases


def load_items(data_dir=None):
    """The cases of every split version as one items table (``item_id`` = case id, ``version``, ``pattern``,
    ``gold``, ``depth``); ``data_dir`` is accepted for the card contract and unused (the cases are generated
    or shipped with the package, not read from the data folder)."""
    import pandas as pd

    return pd.DataFrame([{"item_id": c.case_id, "version": v, "pattern": c.pattern, "gold": c.gold_label,
                          "depth": c.negation_depth} for v in CARD.versions for c in version_cases(v)])


def split(items, version: str = VERSION):
    """The version's manifest: every case of the version is a test case (a challenge set has no training
    side)."""
    from ...splits import SplitManifest

    if version not in CARD.versions:
        raise ValueError(f"card {CARD.name} has no version {version!r}; expected one of {', '.join(CARD.versions)}")
    test = list(items.loc[items["version"] == version, "item_id"]) if "version" in items else list(items["item_id"])
    what = "built-in case" if version == VERSION else "case"
    return SplitManifest(card=CARD.name, version=version, seed=0, train=[], test=test,
                         rules=f"challenge set: every {what} is a test case; no draw, no training side")


def audit_items(items, data_dir=None) -> dict:
    """Cases per pattern and per gold label (``data_dir`` unused: the corpus is generated)."""
    return {"n_items": int(len(items)), "patterns": dict(Counter(items["pattern"])),
            "gold": dict(Counter(items["gold"]))}


#: the card as one of the labelled-items family (:mod:`atlaslib.cards.families`): the family dispatches the protocol
#: (to :func:`.card.predict_cases`) and counts the cases (by the card's counter: false entailments beside accuracy)
FAMILY = LabelledItems(CARD, SCORING, load_items=load_items, split=split, labels=LABELS, abstain=ABSTENTION,
                       counter=count_cases, predictors={PROTOCOL: predict_cases})
predict, counts = FAMILY.predict, FAMILY.counts   # the card contract, the notebook's calls
