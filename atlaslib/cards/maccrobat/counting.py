"""How a MACCROBAT run's predictions become numbers: the spans family's strict entity scoring over the card's
three types with whole case reports resampled (``SCORING``), :func:`counts` (one unit per test sentence, per type
the exact-span counts, grouped by case report), :func:`slice_counts` (per-mention slices: type, length) and
:func:`per_type` (the cell's per-type table), all :class:`~atlaslib.cards.families.Spans`';
:meth:`atlaslib.cards.run.CardRun.score` scores them."""
from __future__ import annotations

from ...metrics.engine import UnitCounts
from ..families import Spans
from .card import SEED, TYPES

GROUPS = {"document": "document"}   # the case report of each sentence: the resampling's clusters
SCORING = Spans.strict_f1(TYPES, SEED, unit="case reports")


def counts(cell: dict) -> UnitCounts:
    """The per-sentence span counts of a MACCROBAT cell's predictions (:meth:`Spans.count_spans`)."""
    return Spans.count_spans(cell, TYPES, GROUPS)


def slice_counts(cell: dict, spec: dict, group_of, group_order):
    """Per-mention slices of a cell (:meth:`Spans.mention_slices`); None for a slice over sentence fields."""
    return Spans.mention_slices(cell, spec, group_of, group_order, GROUPS)


def per_type(cell: dict) -> dict:
    """The cell's ``extra.per_type`` (made of every finished ok cell, a re-score's included: the card's
    ``scored_extra``): per entity type its precision, recall and F1 with their intervals and its gold support, the
    spans family's per-type scoring (:meth:`Spans.per_type_scores`) of the counts of the cell's predictions on the
    case-report resamples of its metrics (the run's ``n_resamples``)."""
    n = ((cell.get("spec") or {}).get("parameters") or {}).get("n_resamples")
    return {t: {k: e[k] for k in ("precision", "recall", "f1")} | {"support": e["support"]}
            for t, e in Spans.per_type_scores(counts(cell), SCORING, TYPES, n_resamples=n).items()}
