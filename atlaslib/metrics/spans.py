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

- precision ``P = ΣTP / (ΣTP + ΣFP)``, 0 when nothing is predicted;
- recall ``R = ΣTP / (ΣTP + ΣFN)``, 0 when there is no gold mention;
- micro F1 ``= 2·ΣTP / (2·ΣTP + ΣFP + ΣFN)``, 0 when both are empty (= 2PR/(P+R));
- per type ``t``: the same three on ``t``'s counts alone;
- macro F1 = unweighted mean of the per-type F1 over the types *present* in the gold or the predicted
  mentions of that sample (seqeval ``average="macro"`` semantics); 0 when no type is present.

These equal seqeval's ``precision_score``, ``recall_score``, ``f1_score`` (default, non-strict mode,
which is the conlleval chunking above) on the same tag sequences (tested).

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


def _ratio(num, den):
    num = np.asarray(num, dtype=float)
    den = np.asarray(den, dtype=float)
    return np.where(den > 0, num / np.where(den > 0, den, 1), 0.0)


def scores_from_totals(totals: np.ndarray) -> dict:
    """Metrics from summed counts ``(..., n_types, 3)`` (any leading batch axes).

    Returns ``precision``, ``recall``, ``f1`` (micro, pooled over types), ``macro_f1``, and per type
    ``type_precision``, ``type_recall``, ``type_f1`` (last axis = types)."""
    totals = np.asarray(totals)
    tp, fp, fn = totals[..., 0], totals[..., 1], totals[..., 2]
    TP, FP, FN = tp.sum(-1), fp.sum(-1), fn.sum(-1)
    type_f1 = _ratio(2 * tp, 2 * tp + fp + fn)
    present = (tp + fp + fn) > 0
    n_present = present.sum(-1)
    macro = np.where(n_present > 0, (type_f1 * present).sum(-1) / np.maximum(n_present, 1), 0.0)
    return {
        "precision": _ratio(TP, TP + FP),
        "recall": _ratio(TP, TP + FN),
        "f1": _ratio(2 * TP, 2 * TP + FP + FN),
        "macro_f1": macro,
        "type_precision": _ratio(tp, tp + fp),
        "type_recall": _ratio(tp, tp + fn),
        "type_f1": type_f1,
        "type_support": tp + fn,
        "type_present": present,
    }


def span_scores(gold: Sequence[Sequence[str]], pred: Sequence[Sequence[str]],
                types: Sequence[str] | None = None) -> dict:
    """Point estimates: ``{precision, recall, f1, macro_f1, per_type: {t: {precision, recall, f1,
    support}}}`` pooled over all items."""
    counts, types = span_counts(gold, pred, types)
    s = scores_from_totals(counts.sum(0))
    per_type = {t: {"precision": float(s["type_precision"][k]), "recall": float(s["type_recall"][k]),
                    "f1": float(s["type_f1"][k]), "support": int(s["type_support"][k])}
                for k, t in enumerate(types)}
    return {"precision": float(s["precision"]), "recall": float(s["recall"]), "f1": float(s["f1"]),
            "macro_f1": float(s["macro_f1"]), "per_type": per_type}


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
    "resamples": {name: array of n_resamples values}, "types": [...]}``."""
    if len(groups) != len(gold):
        raise ValueError(f"groups has {len(groups)} entries, gold {len(gold)} items")
    counts, types = span_counts(gold, pred, types)
    point = scores_from_totals(counts.sum(0))
    totals = cluster_totals(counts, groups, n_resamples=n_resamples, seed=seed)
    boot = scores_from_totals(totals)
    out = {"types": list(types), "resamples": {}}
    for name in ("f1", "precision", "recall", "macro_f1"):
        lo, hi = percentile_ci(boot[name], level)
        out[name] = {"value": float(point[name]), "ci_low": lo, "ci_high": hi}
        out["resamples"][name] = np.asarray(boot[name], dtype=float)
    per_type = {}
    for k, t in enumerate(types):
        entry = {"support": int(point["type_support"][k])}
        for name in ("precision", "recall", "f1"):
            vals = boot[f"type_{name}"][..., k]
            # a type absent from a resample has no F1 there: leave it out of that type's interval
            vals = np.where(boot["type_present"][..., k], vals, np.nan)
            lo, hi = percentile_ci(vals, level)
            entry[name] = {"value": float(point[f"type_{name}"][k]), "ci_low": lo, "ci_high": hi}
        per_type[t] = entry
    out["per_type"] = per_type
    return out


def mention_value(mention, spec):
    """A mention ``(type, first, last)``'s slice value: its ``type`` or its ``length`` in words."""
    t, a, b = mention
    return {"type": t, "length": b - a + 1}[spec["field"]]
