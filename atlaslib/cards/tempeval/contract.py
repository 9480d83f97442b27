"""The card contract (see :mod:`atlaslib.cards`) for Clinical TempEval: :func:`load_items` and :func:`split`
(the pinned THYME documents and the synthetic corpus, the 2015 Train -> Dev split), and the entry points
the notebook and :func:`atlaslib.cards.run.run` both call, the card's :data:`FAMILY`'s (scorer-based relations):
``predict`` (:func:`.runs.run`: load, predict, official scorer) and ``cell_parts`` (scored by the run's
``CardRun``). The item is a document; the official
scorer's per-document counts are summed and resampled by document (:mod:`.counting`)."""
from __future__ import annotations

from collections import Counter

from ..families import ScoredRelations
from .card import CARD, THYME_FILES
from .counting import SCORING, counts as scorer_counts
from .runs import run


def load_items(data_dir=None):
    """The documents of every version as an items table (``item_id`` = document id, ``version``, ``side``
    Train / Dev). THYME documents come from the pinned file list (no file is read); synthetic-v1 documents
    from the generated corpus."""
    import pandas as pd

    from . import synthetic

    rows = []
    for pf in THYME_FILES:
        parts = pf.name.split("/")  # thyme/coloncancer/<split>/<doc>/<file>
        rows.append({"item_id": parts[3], "version": "thyme-dev-2015", "side": parts[2]})
    for side, docs in synthetic.build_corpus().items():
        rows += [{"item_id": d.doc_id, "version": synthetic.VERSION, "side": side} for d in docs]
    return pd.DataFrame(rows).drop_duplicates().reset_index(drop=True)


def split(items, version: str):
    """The version's manifest: Train documents train, Dev documents test (the Clinical TempEval 2015 split;
    no draw)."""
    from ...splits import SplitManifest

    if version not in CARD.versions:
        raise ValueError(f"card {CARD.name} has no version {version!r}; expected one of {', '.join(CARD.versions)}")
    mine = items[items["version"] == version]
    return SplitManifest(card=CARD.name, version=version, seed=0,
                         train=mine.loc[mine["side"] == "Train", "item_id"].tolist(),
                         test=mine.loc[mine["side"] == "Dev", "item_id"].tolist(),
                         rules="Clinical TempEval 2015: Train documents train, Dev documents test; no draw")


def audit_items(items, data_dir=None) -> dict:
    """Documents per version and side (Train / Dev); the annotation audit proper is :mod:`.audit`."""
    return {"n_items": int(len(items)),
            "documents": {f"{v}/{side}": n
                          for (v, side), n in sorted(Counter(zip(items["version"], items["side"])).items())}}


#: the card as one of the scorer-based relations family: the family dispatches each protocol to the card's run
#: (:func:`.runs.run` on the manifest's version: a :class:`.runs.RunResult`, or :class:`atlaslib.cards.NotRun`
#: where the run's ``load`` refuses it: the card's gate on the note text), counts (the scorer's per-document
#: counts, :func:`.counting.counts`) and makes the cell (the run's result scored by its CardRun)
def _run(items, manifest, model: str, protocol: str, **options):
    """Every protocol's predictor: the card's run on the manifest's version (:func:`.runs.run`)."""
    return run(manifest.version, model, protocol, **options)


FAMILY = ScoredRelations(CARD, SCORING, load_items=load_items, split=split, counter=scorer_counts,
                         predictors=dict.fromkeys(CARD.protocols, _run))
predict, counts, cell_parts = FAMILY.predict, FAMILY.counts, FAMILY.cell_parts
