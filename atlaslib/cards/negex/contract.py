"""The card contract (see :mod:`atlaslib.cards`) for NegEx, a card of the binary-items family (:data:`FAMILY`):
:func:`load_items` (:mod:`.data`), :func:`split` (:mod:`.splitting`), :func:`counts` (:mod:`.counting`), and thin
entry points over :func:`.data.audit` and the notebook's own calls (:func:`predict`; the cell parts:
:func:`.cells.cell_parts`), so :func:`atlaslib.cards.run.run` and the notebook run one path; the records are scored
by :meth:`CardRun.score <atlaslib.cards.run.CardRun.score>` (the card has no ``score``)."""
from __future__ import annotations

import pandas as pd

from ... import splits as _splits
from .cells import scored_records
from .counting import FAMILY, counts  # noqa: F401  (the card contract: the family, per-unit counts)
from .data import audit, load_items, load_rows  # noqa: F401  (load_items: the card contract)
from .runs import run_protocol
from .splitting import split, split_frames  # noqa: F401  (split: the card contract)


def audit_items(items: pd.DataFrame, data_dir=None) -> dict:
    """Contract entry point over :func:`audit` (which also needs the kit's raw rows): the counts of its
    tables as plain data (rows and items per decision, rows dropped, sentences over 300 characters)."""
    full = audit(load_rows(data_dir), items)
    n = full["counts"]
    return {"n_items": int(len(items)), "n_rows": int(n["rows"].sum()),
            "items_by_decision": {k: int(v) for k, v in n["items"].items()},
            "dropped_rows": int(len(full["dropped"])), "long_sentences": full["long_sentences"]}


def predict(items: pd.DataFrame, manifest: _splits.SplitManifest, model: str, protocol: str, *, data_dir=None,
            load=None, **options) -> list[dict] | dict[int, list[dict]]:
    """The notebook's calls on ``manifest``'s split: :func:`.runs.run_protocol`, then the run's records
    (:func:`.cells.predictions` at full precision: ``gold`` / ``pred`` the decision words, ``score`` = P(negated)
    or None, ``sentence_key`` and the slice fields) as :func:`.cells.scored_records` gives them to
    :meth:`CardRun.score <atlaslib.cards.run.CardRun.score>`: for a fine-tune ``{training seed: records}`` in the
    recipe's order. :class:`atlaslib.cards.NotRun` when the run cannot happen; ``load``: the run's
    :meth:`CardRun.load <atlaslib.cards.run.CardRun.load>`."""
    train, test = split_frames(items, manifest)
    out = run_protocol(model, protocol, train, test, data_dir=data_dir, load=load, **options)
    return scored_records(test, out, data_dir=data_dir)
