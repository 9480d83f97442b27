"""Strict span metrics for token-level entity recognition (IOB2 tags over words).

A *mention* is ``(type, first word, last word)`` (inclusive word indices) inside one item (sentence).
Mentions are read from tag sequences with seqeval's chunker (:func:`seqeval.metrics.sequence_labeling.
get_entities`), which follows conlleval: a ``B-X`` starts a mention, an ``I-X`` continues the current
``X`` mention, and an ``I-X`` after ``O`` or after a mention of another type *starts* a new mention
(the "repair" of ill-formed IOB2, see :func:`repair_iob2`).

Counts, per item ``i`` and type ``t``:

- ``TP[i,t]`` = gold mentions of type ``t`` also predicted with the same type, first and last word;
- ``FP[i,t]`` = predicted mentions of type ``t`` not in gold;
- ``FN[i,t]`` = gold mentions of type ``t`` not predicted.

Pooled over the items of a sample (all test sentences, or one bootstrap resample):

- precision ``P = ΣTP / (ΣTP + ΣFP)``;
- recall ``R = ΣTP / (ΣTP + ΣFN)``;
- micro F1 ``= 2·ΣTP / (2·ΣTP + ΣFP + ΣFN)`` (= 2PR/(P+R) where both are defined);
- per type ``t``: the same three on ``t``'s counts alone;
- macro F1 = unweighted mean of the per-type F1 over the types scored (``types``: the card's declared
  types, or by default the types seen in gold or predictions).

Zero division follows the atlas's one rule (:func:`atlaslib.metrics.engine.ratio`, the methods chapter's
"When a metric is undefined"): a ratio whose denominator is 0 is undefined, NaN, never 0. Precision is
undefined when no mention is predicted, recall when there is no gold mention, an F1 when there is no mention
in gold or predictions; a ratio with a non-zero denominator is defined even when its numerator is 0
(nothing predicted against gold mentions: F1 = 0, recall = 0, precision undefined). Macro F1 follows the
rule of the binary cards' macro F1 (:func:`atlaslib.metrics.classification.from_confusion`): a scored type whose
F1 is undefined (no mention of it in gold or predictions) makes the macro F1 undefined, instead of a mean
over fewer types than the card declares. :data:`UNDEFINED_REASONS` says why, and
:func:`span_metrics_with_ci` puts the reason beside every undefined value. A bootstrap interval leaves out
the resamples where its metric is undefined.

These equal seqeval's ``precision_score``, ``recall_score``, ``f1_score`` and per-type
``classification_report`` (default, non-strict mode, which is the conlleval chunking above) on the same tag
sequences wherever they are defined (tested); seqeval writes 0 (``zero_division``) where the atlas writes
NaN. Macro F1 equals seqeval's ``average="macro"`` when every scored type occurs (always so with the default
``types``). scikit-learn's ``zero_division=np.nan`` gives the same per-type values; its macro average would
instead drop the undefined types from the mean.

Counts are computed once per item (``span_counts``) and summed once per group (case report); a cluster
bootstrap resample is then a vector of group multiplicities (how often each report was drawn), and
the counts of all resamples are one integer matrix product ``multiplicities @ group_counts``: 1,000
cluster resamples cost about a millisecond (:func:`span_metrics_with_ci`). The sums are exact
integers, so the intervals equal those of summing the items of each resample one by one.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .bootstrap import DEFAULT_RESAMPLES, DEFAULT_SEED, cluster_multiplicities, percentile_ci
from .engine import ratio

_PREFIXES = ("B", "I")


def _check_tag(tag: str, where: str) -> None:
    if tag == "O":
        return
    if not isinstance(tag, str) or len(tag) < 3 or tag[1] != "-" or tag[0] not in _PREFIXES:
        raise ValueError(f"{where}: tag {tag!r} is not IOB2 (expected 'O', 'B-<type>' or 'I-<type>')")


def validate_tags(tags: Sequence[str], where: str = "tags") -> None:
    """Raise ``ValueError`` naming the position when a tag is not ``O``, ``B-X`` or ``I-X``."""
    for k, t in enumerate(tags):
        _check_tag(t, f"{where}[{k}]")


def mentions(tags: Sequence[str]) -> list[tuple[str, int, int]]:
    """Mentions ``(type, first, last)`` of one tag sequence, conlleval chunking (via seqeval)."""
    validate_tags(tags)
    from seqeval.metrics.sequence_labeling import get_entities  # imported on first use: seqeval loads sklearn

    return [(t, int(s), int(e)) for t, s, e in get_entities(list(tags))]


def repair_iob2(tags: Sequence[str]) -> list[str]:
    """Well-formed IOB2 with the same mentions: an ``I-X`` that follows ``O`` or a tag of another
    type becomes ``B-X`` (conlleval: it starts a mention). ``mentions(repair_iob2(t)) == mentions(t)``."""
    validate_tags(tags)
    out, prev = [], "O"
    for t in tags:
        if t.startswith("I-") and (prev == "O" or prev[2:] != t[2:]):
            t = "B-" + t[2:]
        out.append(t)
        prev = t
    return out


def tags_from_mentions(n_words: int, spans: Sequence[tuple[str, int, int]]) -> list[str]:
    """IOB2 tags of ``n_words`` words from non-overlapping mentions ``(type, first, last)``."""
    tags = ["O"] * n_words
    for typ, first, last in spans:
        if not (0 <= first <= last < n_words):
            raise ValueError(f"mention {(typ, first, last)} outside 0..{n_words - 1}")
        if any(tags[k] != "O" for k in range(first, last + 1)):
            raise ValueError(f"mention {(typ, first, last)} overlaps another mention")
        tags[first] = f"B-{typ}"
        for k in range(first + 1, last + 1):
            tags[k] = f"I-{typ}"
    return tags


def span_counts(gold: Sequence[Sequence[str]], pred: Sequence[Sequence[str]],
                types: Sequence[str] | None = None) -> tuple[np.ndarray, list[str]]:
    """Per-item, per-type counts: an int array ``(n_items, n_types, 3)`` holding TP, FP, FN, and the
    type order. ``types`` defaults to the sorted types seen in gold or predictions."""
    if len(gold) != len(pred):
        raise ValueError(f"gold has {len(gold)} items, predictions {len(pred)}")
    gm, pm = [], []
    for i, (g, p) in enumerate(zip(gold, pred)):
        if len(g) != len(p):
            raise ValueError(f"item {i}: gold has {len(g)} tags, prediction {len(p)}")
        validate_tags(g, f"gold item {i}")
        validate_tags(p, f"predicted item {i}")
        gm.append(set(mentions(g)))
        pm.append(set(mentions(p)))
    seen = sorted({m[0] for s in gm + pm for m in s})
    types = list(types) if types is not None else seen
    missing = set(seen) - set(types)
    if missing:
        raise ValueError(f"types {sorted(missing)} occur in the tags but not in types={types}")
    index = {t: k for k, t in enumerate(types)}
    counts = np.zeros((len(gold), len(types), 3), dtype=np.int64)
    for i, (g, p) in enumerate(zip(gm, pm)):
        for m in g & p:
            counts[i, index[m[0]], 0] += 1
        for m in p - g:
            counts[i, index[m[0]], 1] += 1
        for m in g - p:
            counts[i, index[m[0]], 2] += 1
    return counts, types


#: Why each span metric can be undefined on a sample (its denominator is 0): the text after "n/a".
#: Per type, ``{type}`` names the type.
UNDEFINED_REASONS = {
    "precision": "undefined: no mention predicted",
    "recall": "undefined: no gold mention",
    "f1": "undefined: no mention in gold or predictions",
    "macro_f1": "undefined: an entity type has no mention in gold or predictions",
    "type_precision": "undefined: no {type} mention predicted",
    "type_recall": "undefined: no gold {type} mention",
    "type_f1": "undefined: no {type} mention in gold or predictions",
}


def scores_from_totals(totals: np.ndarray) -> dict:
    """Metrics from summed counts ``(..., n_types, 3)`` (any leading batch axes), NaN where undefined.

    Returns ``precision``, ``recall``, ``f1`` (micro, pooled over types), ``macro_f1`` (mean of the per-type
    F1; NaN when one is NaN or there is no type), and per type ``type_precision``, ``type_recall``,
    ``type_f1``, ``type_support`` (gold mentions), ``type_present`` (in gold or predictions; last axis =
    types)."""
    totals = np.asarray(totals)
    tp, fp, fn = totals[..., 0], totals[..., 1], totals[..., 2]
    TP, FP, FN = tp.sum(-1), fp.sum(-1), fn.sum(-1)
    type_f1 = np.asarray(ratio(2 * tp, 2 * tp + fp + fn), dtype=float)
    n_types = type_f1.shape[-1]
    macro = type_f1.sum(-1) / n_types if n_types else np.full(type_f1.shape[:-1], np.nan)
    return {
        "precision": ratio(TP, TP + FP),
        "recall": ratio(TP, TP + FN),
        "f1": ratio(2 * TP, 2 * TP + FP + FN),
        "macro_f1": macro,
        "type_precision": ratio(tp, tp + fp),
        "type_recall": ratio(tp, tp + fn),
        "type_f1": type_f1,
        "type_support": tp + fn,
        "type_present": (tp + fp + fn) > 0,
    }


def undefined_reasons(totals: np.ndarray, types: Sequence[str]) -> dict:
    """Why each metric of one sample's summed counts ``(n_types, 3)`` is undefined: ``{name: reason}`` for
    ``precision``, ``recall``, ``f1``, ``macro_f1`` and ``{type: {name: reason}}`` under ``per_type``; a
    defined metric is not listed. Macro F1's reason names the types without a mention."""
    s = scores_from_totals(totals)
    out = {k: UNDEFINED_REASONS[k] for k in ("precision", "recall", "f1") if np.isnan(s[k])}
    absent = [t for k, t in enumerate(types) if not s["type_present"][k]]
    if absent or not len(types):
        out["macro_f1"] = (UNDEFINED_REASONS["macro_f1"] + f" ({', '.join(absent)})" if absent
                           else UNDEFINED_REASONS["f1"])
    out["per_type"] = {t: {k: UNDEFINED_REASONS[f"type_{k}"].format(type=t) for k in ("precision", "recall", "f1")
                           if np.isnan(s[f"type_{k}"][i])} for i, t in enumerate(types)}
    return out


def _entry(value, resamples, level: float, reason: str | None) -> dict:
    """``{value, ci_low, ci_high}`` of one metric; an undefined value (NaN) has no interval and says why."""
    if reason:
        return {"value": float("nan"), "ci_low": float("nan"), "ci_high": float("nan"), "reason": reason}
    lo, hi = percentile_ci(resamples, level)
    return {"value": float(value), "ci_low": lo, "ci_high": hi}


def cluster_totals(counts: np.ndarray, groups: Sequence, n_resamples: int = DEFAULT_RESAMPLES,
                   seed: int = DEFAULT_SEED) -> np.ndarray:
    """Summed counts ``(n_resamples, n_types, 3)`` of every cluster resample: per-group sums of the
    item counts, weighted by the draw multiplicities (:func:`cluster_multiplicities`). Equal to
    ``np.stack([counts[idx].sum(0) for idx in cluster_indices(groups, n_resamples, seed)])``."""
    counts = np.asarray(counts, dtype=np.int64)
    if len(groups) != len(counts):
        raise ValueError(f"groups has {len(groups)} entries, counts {len(counts)} items")
    if n_resamples == 0:
        return np.zeros((0,) + counts.shape[1:], dtype=np.int64)
    mult, inverse = cluster_multiplicities(groups, n_resamples, seed)
    per_group = np.zeros((mult.shape[1],) + counts.shape[1:], dtype=np.int64)
    np.add.at(per_group, inverse, counts)
    return (mult @ per_group.reshape(mult.shape[1], -1)).reshape((n_resamples,) + counts.shape[1:])


def span_metrics_with_ci(gold: Sequence[Sequence[str]], pred: Sequence[Sequence[str]],
                         groups: Sequence, types: Sequence[str] | None = None,
                         n_resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
                         level: float = 0.95) -> dict:
    """Point estimates and percentile CIs from a cluster bootstrap over ``groups`` (case reports).

    Each resample (:func:`atlaslib.metrics.bootstrap.cluster_indices`) draws whole groups with
    replacement; its counts are the sums of the drawn items' rows. Returns
    ``{"f1"|"precision"|"recall"|"macro_f1": {value, ci_low, ci_high}, "per_type": {t: {...}},
    "resamples": {name: array of n_resamples values}, "types": [...]}``. A metric undefined on the whole
    sample is ``{value: NaN, ci_low: NaN, ci_high: NaN, reason}`` (a result cell stores NaN as null); an
    interval leaves out the resamples where its metric is undefined."""
    if len(groups) != len(gold):
        raise ValueError(f"groups has {len(groups)} entries, gold {len(gold)} items")
    counts, types = span_counts(gold, pred, types)
    total = counts.sum(0)
    point = scores_from_totals(total)
    why = undefined_reasons(total, types)
    totals = cluster_totals(counts, groups, n_resamples=n_resamples, seed=seed)
    boot = scores_from_totals(totals)
    out = {"types": list(types), "resamples": {}}
    for name in ("f1", "precision", "recall", "macro_f1"):
        out[name] = _entry(point[name], boot[name], level, why.get(name))
        out["resamples"][name] = np.asarray(boot[name], dtype=float)
    per_type = {}
    for k, t in enumerate(types):
        entry = {"support": int(point["type_support"][k])}
        for name in ("precision", "recall", "f1"):
            entry[name] = _entry(point[f"type_{name}"][k], boot[f"type_{name}"][..., k], level,
                                 why["per_type"][t].get(name))
        per_type[t] = entry
    out["per_type"] = per_type
    return out


def mention_value(mention, spec):
    """A mention ``(type, first, last)``'s slice value: its ``type`` or its ``length`` in words."""
    t, a, b = mention
    return {"type": t, "length": b - a + 1}[spec["field"]]
