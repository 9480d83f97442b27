"""How a MACCROBAT run's predictions become numbers: the spans family's strict entity scoring over the card's
three types with whole case reports resampled (``SCORING``), :func:`counts` (one unit per test sentence, per type
the exact-span counts, grouped by case report) and :func:`slice_counts` (per-mention slices: type, length), all
:class:`~atlaslib.cards.families.Spans`'; :meth:`atlaslib.cards.run.CardRun.score` scores them."""
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
