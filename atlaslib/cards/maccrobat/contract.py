"""The card contract (see :mod:`atlaslib.cards`) for MACCROBAT: :func:`load_items` (:mod:`.data`),
:func:`split` (:mod:`.splitting`), and thin entry points over :func:`.runs.run_protocol` and the card's
scoring (:func:`.counting.metrics_of`, the one engine), so they give the notebook's numbers."""
from __future__ import annotations

import pandas as pd

from ...splits import SplitManifest
from .card import BOOTSTRAP_RESAMPLES, SEED, TYPES
from .counting import metrics_of
from .data import load_items  # noqa: F401  (the card contract)
from .runs import run_protocol
from .splitting import split  # noqa: F401  (the card contract)

# --------------------------------------------------------------------------------------- the card contract
# Thin entry points with the same names and shapes on every card (see atlaslib.cards); the notebook still
# calls run_protocol / cell_parts, so both paths give the same numbers (tests/cards/test_contract.py).

def audit_items(items: pd.DataFrame, data_dir=None) -> dict:
    """Contract entry point: sentences, reports and kept mentions per type, counted on the items (the full
    tables are :func:`audit` on the corpus)."""
    per_type = {t: 0 for t in TYPES}
    for ms in items["mentions"]:
        for m in ms:
            per_type[m[0]] += 1
    return {"n_items": int(len(items)), "documents": int(items["document"].nunique()), "mentions": per_type}


def predict(items: pd.DataFrame, manifest: SplitManifest, model: str, protocol: str, *, data_dir=None,
            load=None, **options) -> list[dict] | dict[int, list[dict]]:
    """Contract entry point over :func:`run_protocol`: one record per test sentence (``gold`` / ``pred`` IOB2
    tags over its words, ``score`` None, ``document`` the case report); a fine-tuned row over several training
    seeds: ``{training seed: records}`` in the recipe's order (the book's row, :func:`atlaslib.cards.run.
    contract_parts`); a not-run outcome raises :class:`atlaslib.cards.NotRun` with its reason. ``load``: the
    run's :meth:`CardRun.load <atlaslib.cards.run.CardRun.load>` (the model by the run's decision)."""
    from .. import NotRun, record

    out = run_protocol(items, manifest, model, protocol, load=load, **options)
    if out.status != "ok":
        raise NotRun(out.reason)

    def records(pred) -> list[dict]:
        return [record(iid, list(g), list(p), None, document=d)
                for iid, g, p, d in zip(out.item_ids, out.gold, pred, out.documents)]

    if out.seed_runs:
        return {r["seed"]: records(r["pred"]) for r in out.seed_runs}
    return records(out.pred)


def score(records: list[dict], protocol: str, *, model: str | None = None,
          n_resamples: int = BOOTSTRAP_RESAMPLES, seed: int = SEED) -> dict:
    """Contract entry point over :func:`.counting.metrics_of` (the card's counts and scoring, the one engine):
    exact-span entity F1 / precision / recall / macro F1 with intervals from a bootstrap over whole case
    reports (``document``). ``model`` is not read: every card's ``score`` takes it."""
    return metrics_of(records, protocol, n_resamples=n_resamples, seed=seed)

from .counting import counts  # noqa: E402,F401  (the card contract: per-unit counts, see .counting)
