"""The toy card's predictions: records from a baseline (``always-even``, ``parity-rule``) or from a fine-tuned
registry model (one set per training seed), and what its result cell holds (``cell_parts``)."""
from __future__ import annotations

import pandas as pd

from atlaslib.cards import NotRun, record
from atlaslib.splits import SplitManifest

from .card import CARD, FINETUNE, FINETUNE_RECIPE, LABELS


def predict(items: pd.DataFrame, manifest: SplitManifest, model: str, protocol: str, *, data_dir=None,
            **options) -> list[dict] | dict:
    """One record per test item (``gold`` / ``pred`` 1 for even, 0 for odd, ``score`` P(even) or None, ``n``).
    A baseline gives one list; a fine-tune gives ``{training seed: records}``, one model per seed of
    :data:`FINETUNE_RECIPE`. A run that cannot happen raises :class:`NotRun`."""
    test = items.set_index("item_id").loc[manifest.test]
    if protocol in CARD.baselines.get(model, ()):
        return [record(iid, int(row.gold), 1 if model == "always-even" else int(row.n % 2 == 0), None, n=int(row.n))
                for iid, row in test.iterrows()]
    if protocol != FINETUNE:
        raise NotRun(f"toy card runs only {', '.join(CARD.baselines)} under {protocol}")
    train = items.set_index("item_id").loc[manifest.train]
    return {seed: [record(iid, int(row.gold), int(pred[i]), float(p_even[i]), n=int(row.n))
                   for i, (iid, row) in enumerate(test.iterrows())]
            for seed, pred, p_even in _finetuned(model, train, test, data_dir)}


def _finetuned(model: str, train: pd.DataFrame, test: pd.DataFrame, data_dir=None) -> list[tuple]:
    """``[(seed, predicted class, P(even))]``: ``model``'s encoder fine-tuned on the train texts once per seed."""
    from atlaslib.models import CapabilityMissing, WeightsUnavailable, get_profile, load_adapter, with_capabilities
    from atlaslib.protocols import finetune

    try:
        adapter = load_adapter(with_capabilities(get_profile(model)), CARD.capabilities[FINETUNE][0],
                               data_dir=data_dir, max_length=FINETUNE_RECIPE["max_length"], embed_cache=False)
    except WeightsUnavailable as exc:
        raise NotRun(exc.short) from None
    except CapabilityMissing as exc:
        raise NotRun(str(exc)) from None
    res = finetune.finetune_sequence(adapter, train.index.tolist(), train["text"].tolist(),
                                     [LABELS[g] for g in train["gold"]], test["text"].tolist(), LABELS,
                                     FINETUNE_RECIPE, progress=False)
    return [(r["seed"], r["pred"], r["proba"][:, 1]) for r in res["seed_runs"]]


def cell_parts(card_run, records, manifest: SplitManifest) -> dict:
    """What the result cell holds (:meth:`atlaslib.cards.run.CardRun.finish`'s arguments): the split, and for a
    run that happened its records and metrics (a fine-tune: the row over its seeds), as
    :func:`atlaslib.cards.run.run` makes them."""
    from atlaslib.cards.run import contract_parts

    return contract_parts(card_run, records, manifest)
