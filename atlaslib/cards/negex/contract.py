"""The card contract (see :mod:`atlaslib.cards`) for NegEx: :func:`load_items` (:mod:`.data`),
:func:`split` (:mod:`.splitting`), and thin entry points over :func:`.data.audit`,
:func:`.runs.run_protocol` and the scoring engine (:func:`atlaslib.metrics.engine.evaluate` under the card's
:data:`.counting.SCORING`), so they give the notebook's numbers."""
from __future__ import annotations

import pandas as pd

from ... import splits as _splits
from .data import audit, load_items, load_rows  # noqa: F401  (load_items: the card contract)
from .runs import run_protocol
from .splitting import split, split_frames  # noqa: F401  (split: the card contract)

# --------------------------------------------------------------------------------------- the card contract
# Thin entry points with the same names and shapes on every card (see atlaslib.cards); the notebook still
# calls the functions above, so both paths give the same numbers (tests/cards/test_contract.py).

def audit_items(items: pd.DataFrame, data_dir=None) -> dict:
    """Contract entry point over :func:`audit` (which also needs the kit's raw rows): the counts of its
    tables as plain data (rows and items per decision, rows dropped, sentences over 300 characters)."""
    full = audit(load_rows(data_dir), items)
    counts = full["counts"]
    return {"n_items": int(len(items)), "n_rows": int(counts["rows"].sum()),
            "items_by_decision": {k: int(v) for k, v in counts["items"].items()},
            "dropped_rows": int(len(full["dropped"])), "long_sentences": full["long_sentences"]}


def predict(items: pd.DataFrame, manifest: _splits.SplitManifest, model: str, protocol: str, *, data_dir=None,
            load=None, **options) -> list[dict] | dict[int, list[dict]]:
    """Contract entry point over :func:`run_protocol`: one record per test item in the result cell's shape
    (``gold`` / ``pred`` the decision words ``negated`` / ``affirmed``, ``score`` = P(negated) or None, the
    item's ``sentence_key``); for a fine-tune, ``{training seed: records}`` over the recipe's seeds in its order (the run's
    ``seed_runs``), so :func:`atlaslib.cards.run.run` gives the book's row over seeds (as
    :func:`.cells.seeded_metrics`), not the first seed's alone. :class:`atlaslib.cards.NotRun` when the run
    cannot happen. ``load``: the run's :meth:`CardRun.load <atlaslib.cards.run.CardRun.load>` (the model by
    the run's decision)."""
    train, test = split_frames(items, manifest)
    out = run_protocol(model, protocol, train, test, data_dir=data_dir, load=load, **options)  # NotRun is the contract's
    if out.get("seed_runs"):
        return {int(r["seed"]): _records(test, r["pred"], r["score"]) for r in out["seed_runs"]}
    return _records(test, out["pred"], out.get("score"))


def _records(test: pd.DataFrame, pred, scores) -> list[dict]:
    """One contract record per test item: 0/1 predictions as decision words, scores at full precision, and the
    item's ``sentence_key`` (the counts' sentence groups, which the sentence-cluster interval resamples)."""
    from .. import record
    from .card import LABELS

    return [record(iid, d, LABELS[int(p)], None if scores is None else float(scores[i]), sentence_key=k)
            for i, (iid, p, d, k) in enumerate(zip(test["item_id"], pred, test["decision"], test["sentence_key"]))]


def score(records: list[dict], protocol: str, *, model: str | None = None, n_resamples: int = 1000,
          no_score_reason: str | None = None) -> dict:
    """Contract entry point: macro F1, sensitivity, specificity, precision and ROC-AUC with stratified
    percentile intervals, from the records' per-item counts (:func:`.counting.counts`) through the scoring
    engine (:func:`atlaslib.metrics.engine.evaluate`), as :meth:`atlaslib.cards.run.CardRun.score` scores a
    notebook's run; also how outside systems and variant runs are scored. Records without scores get
    ROC-AUC null with ``no_score_reason`` (default :data:`.card.NO_SCORE_REASON`). Checked against an index-by-index bootstrap
    (``tests/metrics/reference.py``): the same numbers to the bit."""
    from ...metrics import engine
    from .counting import SCORING

    from .card import NO_SCORE_REASON

    uc = counts({"predictions": records})
    return engine.evaluate(SCORING, uc, protocol, n_resamples=n_resamples,
                           reasons={"roc_auc": no_score_reason or NO_SCORE_REASON})

from .counting import counts  # noqa: E402  (the card contract: per-unit counts, see .counting)
