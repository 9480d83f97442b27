"""The toy card's predictions: records from a baseline (``always-even``, ``parity-rule``) or from a fine-tuned
registry model (one set per training seed), and what its result cell holds (``cell_parts``)."""
from __future__ import annotations

import pandas as pd

from atlaslib.cards import NotRun, record
from atlaslib.splits import SplitManifest

from .card import CARD, FINETUNE, FINETUNE_RECIPE, LABELS


def predict(items: pd.DataFrame, manifest: SplitManifest, model: str, protocol: str, *, data_dir=None,
            load=None, **options) -> list[dict] | dict:
    """One record per test item (``gold`` / ``pred`` 1 for even, 0 for odd, ``score`` P(even) or None, ``n``).
    A baseline gives one list; a fine-tune gives ``{training seed: records}``, one model per seed of
    :data:`FINETUNE_RECIPE`, on the model ``load`` gives (the run's ``CardRun.load``: the model by the run's
    decision; None: decided and loaded here by the same rule). A run that cannot happen raises
    :class:`NotRun`."""
    from atlaslib.cards import deciding

    test = items.set_index("item_id").loc[manifest.test]
    if protocol in CARD.baselines.get(model, ()):
        return [record(iid, int(row.gold), 1 if model == "always-even" else int(row.n % 2 == 0), None, n=int(row.n))
                for iid, row in test.iterrows()]
    if protocol != FINETUNE:
        raise NotRun(f"toy card runs only {', '.join(CARD.baselines)} under {protocol}")
    loaded = deciding.load_for(CARD, manifest.version, model, protocol, load, data_dir=data_dir)
    train = items.set_index("item_id").loc[manifest.train]
    return {seed: [record(iid, int(row.gold), int(pred[i]), float(p_even[i]), n=int(row.n))
                   for i, (iid, row) in enumerate(test.iterrows())]
            for seed, pred, p_even in _finetuned(loaded.adapter, train, test)}


def _finetuned(adapter, train: pd.DataFrame, test: pd.DataFrame) -> list[tuple]:
    """``[(seed, predicted class, P(even))]``: the adapter's encoder fine-tuned on the train texts once per seed."""
    from atlaslib.protocols import finetune

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
