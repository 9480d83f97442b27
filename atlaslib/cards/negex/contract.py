"""The card contract (see :mod:`atlaslib.cards`) for NegEx: :func:`load_items` (:mod:`.data`),
:func:`split` (:mod:`.splitting`), and thin entry points over :func:`.data.audit`,
:func:`.runs.run_protocol` and :func:`atlaslib.metrics.report.binary_metrics`, so they give the notebook's
numbers."""
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
            **options) -> list[dict]:
    """Contract entry point over :func:`run_protocol`: one record per test item (``gold`` / ``prediction``
    1 = negated, ``score`` = P(negated) or None, ``decision`` the gold word); :class:`NotRun` (a subclass
    of the contract's :class:`atlaslib.cards.NotRun`) when the run cannot happen."""
    from .. import record

    train, test = split_frames(items, manifest)
    out = run_protocol(model, protocol, train, test, data_dir=data_dir, **options)  # NotRun is the contract's
    scores = out.get("score")
    return [record(iid, int(g), int(p), None if scores is None else float(scores[i]), decision=d)
            for i, (iid, g, p, d) in enumerate(zip(test["item_id"], test["label"], out["pred"], test["decision"]))]


def score(records: list[dict], protocol: str, *, model: str | None = None, n_resamples: int = 1000) -> dict:
    """Contract entry point over :func:`atlaslib.metrics.report.binary_metrics` (as the notebook calls it):
    macro F1, sensitivity, specificity, precision and ROC-AUC with stratified percentile intervals."""
    from ...metrics.report import binary_metrics

    scores = [r["score"] for r in records]
    return binary_metrics([r["gold"] for r in records], [r["pred"] for r in records],
                          None if any(s is None for s in scores) else scores, protocol, n_resamples=n_resamples,
                          no_score_reason="a native assertion head gives labels without scores")
