"""The card contract (see :mod:`atlaslib.cards`) for Clinical TempEval: :func:`load_items` and :func:`split`
(the pinned THYME documents and the synthetic corpus, the 2015 Train -> Dev split), and thin entry points
over :func:`.runs.run` (load, predict, official scorer) and the card's scoring (:mod:`.counting`), so they
give the notebook's numbers. The item is a document; its record carries the official scorer's per-document
counts, which :func:`score` sums and resamples by document."""
from __future__ import annotations

from collections import Counter

from .. import NotRun, record
from .card import CARD, THYME_FILES


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


def predict(items, manifest, model: str, protocol: str, *, data_dir=None, load=None, **options) -> list[dict]:
    """One record per test document: ``gold`` / ``prediction`` = the number of gold / predicted EVENT,
    TIMEX3 and CONTAINS items, ``score`` None, ``counts`` = per scorer row the document's
    ``[reference, predicted, precision_correct, recall_correct]``. The note text under a DUA is never read
    without ``thyme_text_dir``: such a run raises :class:`atlaslib.cards.NotRun`. ``load`` (the run's
    ``CardRun.load``) is not called: the card runs only its own baselines."""
    from .runs import TextUnavailable, run

    try:
        res = run(manifest.version, model, protocol, data_dir=data_dir, **options)
    except TextUnavailable as exc:
        raise NotRun(str(exc)) from None
    per = res.table["per_document"]
    rows = [r["row"] for r in res.table["rows"]]
    gold = {d.doc_id: d for d in res.corpus.test}
    by_doc = {rec["item_id"]: rec for rec in res.predictions}
    out = []
    # in the scorer's document order: the bootstrap draws documents by position, so the order is part of
    # the interval (score() must see the documents as the scorer listed them)
    for position, doc in enumerate(per["doc_ids"]):
        rec, g = by_doc[doc], gold[doc]
        out.append(record(doc, {"EVENT": len(g.of_type("EVENT")), "TIMEX3": len(g.of_type("TIMEX3")),
                                "CONTAINS": len(g.tlinks("CONTAINS"))},
                          {"EVENT": rec["n_event"], "TIMEX3": rec["n_timex3"], "CONTAINS": rec["n_contains"]},
                          None, counts={row: list(per[row][position]) for row in rows}))
    return out


def score(records: list[dict], protocol: str, *, model: str | None = None) -> dict:
    """The records' per-document scorer counts (:func:`.counting.counts`) under the card's declared scoring
    through the one engine (:func:`atlaslib.metrics.engine.evaluate`): official-scorer F1 with a 95 %
    interval from 1,000 document-level bootstrap resamples. The records must keep :func:`predict`'s order
    (the scorer's document order) for the interval to be the run's. ``model`` is required: a baseline
    addresses only some of the metrics (:func:`.card.not_addressed`)."""
    from .counting import metrics_of

    if model is None:
        raise ValueError("tempeval score: model is required (a baseline addresses only some metrics)")
    return metrics_of({"predictions": records}, model, protocol)


from .counting import counts  # noqa: E402,F401  (the card contract: per-unit counts, see .counting)
