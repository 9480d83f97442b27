"""How a MACCROBAT run's predictions become numbers: the spans family's strict entity scoring over the card's
three types with whole case reports resampled (``SCORING``), :func:`counts` (one unit per test sentence, per type
the exact-span counts, grouped by case report) and :func:`slice_counts` (per-mention slices: type, length), all
:class:`~atlaslib.cards.families.Spans`'; :meth:`atlaslib.cards.run.CardRun.score` scores them.
:data:`CHAR_SPANS` is the gold-cut leakage's scoring (:mod:`.gold_cuts`: mentions as character spans)."""
from __future__ import annotations

from ...metrics import engine
from ...metrics.engine import Metric, Scoring, UnitCounts
from ...metrics.spans import UNDEFINED_REASONS
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


def _pooled(name, num, den):
    return Metric(name, lambda t: engine.ratio(num(t), den(t)), undefined_reason=UNDEFINED_REASONS[name])


#: The gold-cut leakage's scoring (:func:`.gold_cuts.char_span_f1`): one unit per sentence, its ``tp``, ``fp``,
#: ``fn`` mentions as exact character spans (type, first and last character), pooled over types; micro
#: precision, recall and F1 under the card's resampling (whole case reports).
CHAR_SPANS = Scoring(
    columns=Spans.parts, primary="f1", resampling=SCORING.resampling,
    metrics=(_pooled("precision", lambda t: t["tp"], lambda t: t["tp"] + t["fp"]),
             _pooled("recall", lambda t: t["tp"], lambda t: t["tp"] + t["fn"]),
             _pooled("f1", lambda t: 2 * t["tp"], lambda t: 2 * t["tp"] + t["fp"] + t["fn"])))
