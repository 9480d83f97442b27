"""How a MACCROBAT run's predictions become numbers (the card's :class:`~atlaslib.metrics.engine.Scoring`, as
data) and :func:`counts`: one unit per test sentence, per entity type the exact-span counts ``<type>:tp``,
``<type>:fp``, ``<type>:fn`` (:func:`atlaslib.metrics.spans.span_counts`: strict IOB2 mentions), grouped by
case report (the declared resampling draws whole reports); :meth:`atlaslib.cards.run.CardRun.score` scores them.
:data:`CHAR_SPANS` is the gold-cut leakage's scoring (:mod:`.gold_cuts`: mentions as character spans).
:func:`slice_counts` gives the per-mention slices (type, length): the same counts with each mention's type
relabelled by its group."""
from __future__ import annotations

from ...metrics import engine
from ...metrics.engine import Metric, Resampling, Scoring, SliceRule, UnitCounts
from ...metrics.spans import (UNDEFINED_REASONS, mention_value, mentions, scores_from_totals, span_counts,
                              tags_from_mentions)
from .card import SEED, TYPES

PARTS = ("tp", "fp", "fn")


def _columns(types) -> tuple:
    return tuple(f"{t}:{x}" for t in types for x in PARTS)


COLUMNS = _columns(TYPES)


def _scores(t):
    a = t.array
    return scores_from_totals(a.reshape(a.shape[:-1] + (-1, 3)))


def _sum(t, part):
    a = t.array
    return a.reshape(a.shape[:-1] + (-1, 3))[..., PARTS.index(part)].sum(-1)


def _metric(name, key, proportion=None):
    # NaN where the denominator is 0 (metrics.spans): the cell says why, in the words of UNDEFINED_REASONS
    return Metric(name, lambda t: _scores(t)[key], proportion=proportion, undefined_reason=UNDEFINED_REASONS[key])


F1 = _metric("entity_f1", "f1")
PRECISION = _metric("entity_precision", "precision", lambda t: (_sum(t, "tp"), _sum(t, "tp") + _sum(t, "fp")))
RECALL = _metric("entity_recall", "recall", lambda t: (_sum(t, "tp"), _sum(t, "tp") + _sum(t, "fn")))
MACRO_F1 = _metric("entity_macro_f1", "macro_f1")

SCORING = Scoring(
    columns=COLUMNS,
    metrics=(F1, PRECISION, RECALL, MACRO_F1),
    primary="entity_f1",
    resampling=Resampling("clusters", "case reports", SEED, by="document"),
    slices=SliceRule({"entity_f1": F1, "entity_precision": PRECISION, "entity_recall": RECALL},
                     support=lambda t: _sum(t, "tp") + _sum(t, "fn"), min_units=20, unit="gold mentions"),
)


def _type_metric(k: int, t: str, key: str) -> Metric:
    return Metric(f"{t}:{key}", lambda tot: _scores(tot)[f"type_{key}"][..., k],
                  undefined_reason=UNDEFINED_REASONS[f"type_{key}"].format(type=t))


#: the per-type table's scoring: precision, recall and F1 of each entity type under the card's resampling (the
#: same case-report resamples as the cell's metrics); a resample where a type's metric is undefined (no mention of
#: it predicted, or in gold) leaves that interval
PER_TYPE = Scoring(columns=COLUMNS, primary=f"{TYPES[0]}:f1", resampling=SCORING.resampling,
                   metrics=tuple(_type_metric(k, t, key) for k, t in enumerate(TYPES)
                                 for key in ("precision", "recall", "f1")))


def per_type_scores(uc: UnitCounts, *, n_resamples: int | None = None, seed: int | None = None) -> dict:
    """Per entity type ``{support, precision, recall, f1}`` of a run's unit counts, each ``{value, ci_low,
    ci_high}`` (null with its reason where undefined): :data:`PER_TYPE` through the one engine."""
    m = engine.evaluate(PER_TYPE, uc, "type", seed=seed, n_resamples=n_resamples)
    support = _scores(uc.total())["type_support"]
    return {t: {"support": int(support[k]), **{key: m[f"{t}:{key}_type"] for key in ("precision", "recall", "f1")}}
            for k, t in enumerate(TYPES)}


def _uc(recs, per_item, types) -> UnitCounts:
    return UnitCounts([r["item_id"] for r in recs], _columns(types), per_item.reshape(len(recs), -1),
                      {"document": [r["document"] for r in recs]})


def counts(cell: dict) -> UnitCounts:
    """The per-sentence span counts of a MACCROBAT cell's predictions (tags checked by ``span_counts``)."""
    recs = cell.get("predictions") or []
    per_item, types = span_counts([r["gold"] for r in recs], [r["pred"] for r in recs], TYPES)
    return _uc(recs, per_item, types)


def _pooled(name, num, den):
    return Metric(name, lambda t: engine.ratio(num(t), den(t)), undefined_reason=UNDEFINED_REASONS[name])


#: The gold-cut leakage's scoring (:func:`.gold_cuts.char_span_f1`): one unit per sentence, its ``tp``, ``fp``,
#: ``fn`` mentions as exact character spans (type, first and last character), pooled over types; micro
#: precision, recall and F1 under the card's resampling (whole case reports).
CHAR_SPANS = Scoring(
    columns=PARTS, primary="f1", resampling=SCORING.resampling,
    metrics=(_pooled("precision", lambda t: t["tp"], lambda t: t["tp"] + t["fp"]),
             _pooled("recall", lambda t: t["tp"], lambda t: t["tp"] + t["fn"]),
             _pooled("f1", lambda t: 2 * t["tp"], lambda t: 2 * t["tp"] + t["fp"] + t["fn"])))


def slice_counts(cell: dict, spec: dict, group_of, group_order):
    """Per-mention slices (``spec["unit"] == "mention"``): ``[(group, UnitCounts)]`` with the counts of the
    mentions in each group (every sentence a unit); None for a slice over sentence fields."""
    if spec.get("unit") != "mention":
        return None
    recs = cell.get("predictions") or []
    gm = [mentions(r["gold"]) for r in recs]
    pm = [mentions(r["pred"]) for r in recs]
    labels = [group_of(mention_value(m, spec), spec) for ms in gm + pm for m in ms]
    order = group_order(spec, labels)
    code = {g: k for k, g in enumerate(order)}

    def relabel(ms, n):
        return tags_from_mentions(n, [(f"{t}__{code[group_of(mention_value((t, a, b), spec), spec)]}", a, b)
                                      for t, a, b in ms])
    gold = [relabel(ms, len(r["gold"])) for ms, r in zip(gm, recs)]
    pred = [relabel(ms, len(r["pred"])) for ms, r in zip(pm, recs)]
    per_item, types = span_counts(gold, pred)
    out = []
    for g in order:
        cols = [k for k, t in enumerate(types) if t.endswith(f"__{code[g]}")]
        out.append((g, _uc(recs, per_item[:, cols, :], [types[k] for k in cols])))
    return out
