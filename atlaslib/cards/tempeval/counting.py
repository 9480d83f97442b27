"""How a TempEval run's scorer output becomes numbers (the card's :class:`~atlaslib.metrics.engine.Scoring`,
as data) and :func:`counts`: one unit per test document, per leaderboard metric the official scorer's four
counts ``reference, predicted, precision_correct, recall_correct`` (anaforatools, per document), resampled
by document (1,000 resamples, seed 20150605: the card's intervals). A metric a run does not address stays
undefined for it (its reason is the cell's, or before there are metrics :func:`.card.not_addressed`).
:func:`slice_counts` gives the per-document counts of each slice group the scorer wrote into the records."""
from __future__ import annotations

import numpy as np

from ...metrics.engine import Metric, Resampling, Scoring, SliceRule, UnitCounts
from .card import BOOTSTRAP, METRIC_ROWS, not_addressed
from .scoring import f1_from_counts

PARTS = ("reference", "predicted", "precision_correct", "recall_correct")
BASES = tuple(METRIC_ROWS)


def _f1(prefix):
    return lambda t: f1_from_counts(*(t[f"{prefix}{p}"] for p in PARTS))[2]


SCORING = Scoring(
    columns=tuple(f"{b}:{p}" for b in BASES for p in PARTS),
    metrics=tuple(Metric(b, _f1(f"{b}:")) for b in BASES),
    primary="contains_closure_f1",
    resampling=Resampling("rows", "documents", BOOTSTRAP["seed"], n_resamples=BOOTSTRAP["n_resamples"]),
    slices=SliceRule({"f1": Metric("f1", _f1(""))}, support=lambda t: t["reference"], min_units=20, unit="gold items"),
    units_are_clusters=True,
)


def counts(cell: dict) -> UnitCounts:
    """The per-document scorer counts of a TempEval cell, in the scorer's document order (the resamples draw
    documents by position): the scorer's table the cell keeps (``extra.scorer_table.per_document``). The
    metrics the run does not report: the cell's null metrics, or, for records not yet scored (no ``metrics``),
    the card's rule for the cell's model and protocol (:func:`.card.not_addressed`)."""
    per = ((cell.get("extra") or {}).get("scorer_table") or {}).get("per_document")
    if per is None:
        raise ValueError(f"{cell.get('model')} ({cell.get('protocol')}): the cell has no per-document scorer counts")
    docs = list(per["doc_ids"])
    c = np.concatenate([_ints(per[METRIC_ROWS[b]], len(docs), METRIC_ROWS[b]) for b in BASES], axis=1)
    metrics = cell.get("metrics")
    if metrics is None:
        undefined = not_addressed(cell.get("model"), cell.get("protocol"))
    else:
        undefined = {b: (e.get("reason") or "not reported") for b in BASES
                     for e in [metrics.get(f"{b}_{cell.get('protocol')}") or {}] if e.get("value") is None}
    return UnitCounts(docs, SCORING.columns, c, {}, None, undefined)


def _ints(rows, n, row: str = "slice") -> np.ndarray:
    """``rows`` as ``(n, 4)`` whole counts; anything else is one error naming the scorer row."""
    try:
        a = np.asarray(rows, dtype=float).reshape(n, 4)
    except (TypeError, ValueError):
        raise ValueError(f"tempeval: scorer row {row!r}: expected {n} documents' [reference, predicted, "
                         f"precision_correct, recall_correct] counts") from None
    if not np.array_equal(a, np.rint(a)):
        raise ValueError(f"tempeval: scorer row {row!r}: counts must be whole numbers")
    return a.astype(np.int64)


def slice_counts(cell: dict, spec: dict, group_of, group_order):
    """``[(group, UnitCounts)]``: per document, the scorer's counts of the slice's group (records'
    ``slices``), in the records' order; [] when the run does not address the slice's metric or a record
    lacks the slice."""
    recs = cell.get("predictions") or []
    f = spec["field"]
    names = (spec["metric"],) if isinstance(spec["metric"], str) else tuple(spec["metric"])
    addressed = any(((cell.get("metrics") or {}).get(f"{m}_{cell['protocol']}") or {}).get("value") is not None
                    for m in names)
    if not addressed or not all("slices" in r and f in r["slices"] for r in recs):
        return []
    values = sorted({v for r in recs for v in r["slices"][f]})
    out = []
    for g in group_order(spec, values):
        rows = [r["slices"][f].get(g, [0, 0, 0, 0]) for r in recs]
        out.append((g, UnitCounts([r["item_id"] for r in recs], PARTS, _ints(rows, len(recs)))))
    return out

