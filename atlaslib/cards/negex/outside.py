"""Outside systems on the NegEx card (``atlas export``, ``atlas score``, :func:`atlaslib.evaluate`): the split
as an outside system sees it (the family's, :meth:`~atlaslib.cards.families.TaskFamily.outside_split`: item id,
concept, sentence and marked text; the train split also the gold decision), and its answers made into the card's
cell parts as a model run's are (:func:`.contract.cell_parts`: scored by a :class:`~atlaslib.cards.run.CardRun`, the
card's counts under its declared scoring, the one engine)."""
from __future__ import annotations

import numpy as np

from .contract import FAMILY, cell_parts

#: one line of a predictions file, as ``atlas export`` shows it in task.json
OUTSIDE_EXAMPLE = '{"item_id": "...", "label": "negated", "score": 0.93}'

outside_split = FAMILY.outside_split


def outside_cell_parts(s, preds, profile: dict, protocol: str, key: str, n_resamples: int, data_dir=None) -> dict:
    """The cell parts of checked predictions ``preds`` on split ``s`` (see :mod:`atlaslib.external.score`)."""
    from ...results import EXTERNAL
    from ..run import CardRun
    from .card import POSITIVE
    from .cells import predictions
    from .splitting import split_frames

    manifest = s.context["manifest"]
    _, test = split_frames(s.context["items"], manifest)
    by = {p.item_id: p for p in preds}
    ordered = [by[i] for i in test["item_id"]]
    out = {"pred": np.array([int(p.label == POSITIVE) for p in ordered], dtype=int),
           "score": None if ordered[0].score is None else np.array([float(p.score) for p in ordered]),
           "profile": profile, "capability": EXTERNAL,
           "details": {"source": EXTERNAL, "predictions_sha256": profile["revision"]}}
    run = CardRun("negex", s.version, profile["name"], protocol, parameters={"n_resamples": n_resamples})
    return dict(cell_parts(run, predictions(test, out, data_dir), manifest, out=out),
                parameters={"n_resamples": n_resamples})
