"""Outside systems on the NegEx card (``atlas export``, ``atlas score``, :func:`atlaslib.evaluate`): the split
as an outside system sees it, and its answers made into the card's cell parts, scored as a model run is: the
records' per-item counts under the card's declared scoring through the one engine (:func:`.contract.score`:
stratified bootstrap), the cell parts by :func:`.cells.cell_parts`."""
from __future__ import annotations

import numpy as np

#: one line of a predictions file, as ``atlas export`` shows it in task.json
OUTSIDE_EXAMPLE = '{"item_id": "...", "label": "negated", "score": 0.93}'


def outside_split(version: str, split: str, data_dir=None, protocol: str | None = None):
    """The test (or train) items of ``version``: item id, concept, sentence and marked text (the train
    split also the gold decision)."""
    from ...splits import Split
    from .card import LABELS
    from .data import load_items
    from .splitting import split as split_items, split_frames

    items = load_items(data_dir)
    manifest = split_items(items, version)
    train, test = split_frames(items, manifest)
    frame = test if split == "test" else train
    records = []
    for r in frame.itertuples():
        rec = {"item_id": r.item_id, "concept": r.concept, "sentence": r.sentence, "text": r.text}
        if split == "train":
            rec["label"] = r.decision
        records.append(rec)
    return Split("negex", version, split, frame["item_id"].tolist(), records, list(LABELS), manifest.hash,
                 answer="label (affirmed | negated) and optional score = P(negated)",
                 context={"items": items, "manifest": manifest, "test": test})


def outside_cell_parts(s, preds, profile: dict, protocol: str, key: str, n_resamples: int, data_dir=None) -> dict:
    """The cell parts of checked predictions ``preds`` on split ``s`` (see :mod:`atlaslib.external.score`)."""
    from ...results import EXTERNAL
    from .card import POSITIVE
    from .cells import cell_parts, predictions
    from .contract import score as score_records
    from .splitting import split_summary

    test = s.context["test"]
    by = {p.item_id: p for p in preds}
    ordered = [by[i] for i in test["item_id"]]
    pred = np.array([int(p.label == POSITIVE) for p in ordered], dtype=int)
    score = None if ordered[0].score is None else np.array([float(p.score) for p in ordered])
    out = {"pred": pred, "score": score, "profile": profile, "capability": EXTERNAL,
           "details": {"source": EXTERNAL, "predictions_sha256": profile["revision"]}}
    metrics = score_records(predictions(test, out, data_dir, digits=None), protocol, n_resamples=n_resamples,
                            no_score_reason="the predictions give labels without scores")
    summary = split_summary(s.context["items"], s.context["manifest"])
    return dict(cell_parts(protocol, profile["name"], out=out, metrics=metrics, test=test,
                           split_cell=summary["cell"], data_dir=data_dir), parameters={"n_resamples": n_resamples})
