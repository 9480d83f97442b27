"""The gold word cuts' leakage: the card cuts words at gold mention boundaries (:func:`.data.words_of`), so a
boundary inside a run of letters is given away by the word list. Counted on the gold mentions
(:func:`gold_cut_mentions`) and measured on the word probe trained and tested without the cuts
(:func:`probe_without_gold_cuts`), both scored on exact character spans."""
from __future__ import annotations

from typing import Sequence

import pandas as pd

from ...metrics import engine
from ...metrics.engine import Metric, Scoring, UnitCounts
from ...metrics.spans import UNDEFINED_REASONS
from ...splits import SplitManifest
from ...phases import side
from ..families import Spans
from .counting import SCORING
from .words import char_mentions, natural_word_spans, uncut_tags  # noqa: F401  (re-exported)


def _pooled(name, num, den):
    return Metric(name, lambda t: engine.ratio(num(t), den(t)), undefined_reason=UNDEFINED_REASONS[name])


#: The gold-cut leakage's scoring (:func:`char_span_f1`): one unit per sentence, its ``tp``, ``fp``, ``fn``
#: mentions as exact character spans (type, first and last character), pooled over types; micro precision, recall
#: and F1 under the card's resampling (whole case reports). The leakage is a measure the run's page makes beside
#: the run (a second probe's predictions); its cell keeps both runs' unit counts, and its scores are made of them
#: on every finish of the cell, a re-score's included (:func:`leakage_of_cell`, the card's ``scored_extra``).
CHAR_SPANS = Scoring(
    columns=Spans.parts, primary="f1", resampling=SCORING.resampling,
    metrics=(_pooled("precision", lambda t: t["tp"], lambda t: t["tp"] + t["fp"]),
             _pooled("recall", lambda t: t["tp"], lambda t: t["tp"] + t["fn"]),
             _pooled("f1", lambda t: 2 * t["tp"], lambda t: 2 * t["tp"] + t["fp"] + t["fn"])))


def gold_cut_mentions(items: pd.DataFrame) -> dict:
    """How many gold mentions have a boundary that only the gold cuts create: a first character that is
    not the start of a natural word, or a last character that is not the end of one ("hepatosplenomegaly"
    annotated as "splenomegaly" inside one run of letters). Without the cuts such a mention cannot be
    matched exactly at all; with them its boundary is handed to the model in the word list. Returns
    ``{"mentions": all gold mentions, "cut_inside_word": those, "sentences": sentences holding one}``."""
    total = inside = sentences = 0
    for text, spans, ms in zip(items["text"], items["word_spans"], items["mentions"]):
        nat = natural_word_spans(text)
        starts, ends = {a for a, _ in nat}, {b for _, b in nat}
        hit = 0
        for _, first, last in ms:
            total += 1
            if spans[first][0] not in starts or spans[last][1] not in ends:
                hit += 1
        inside += hit
        sentences += bool(hit)
    return {"mentions": total, "cut_inside_word": inside, "sentences": sentences}


def char_span_f1(gold: Sequence[set], pred: Sequence[set], item_ids: Sequence | None = None,
                 documents: Sequence | None = None) -> dict:
    """Micro P/R/F1 over character-span mentions (``(type, start, end)``: a mention counts when all three
    match), scored by the one engine under the card's declared :data:`CHAR_SPANS` (P = TP / (TP + FP),
    R = TP / (TP + FN), F1 = 2·TP / (2·TP + FP + FN), NaN when a denominator is 0). One unit per sentence
    (``item_ids``, grouped by case report, ``documents``; default: their positions); returns the pooled
    ``tp``, ``fp``, ``fn``, the three values and the ``unit_counts`` they were scored from."""
    ids = list(range(len(gold))) if item_ids is None else list(item_ids)
    return _scored(UnitCounts(ids, CHAR_SPANS.columns,
                              [[len(g & p), len(p - g), len(g - p)] for g, p in zip(gold, pred)],
                              {"document": ids if documents is None else list(documents)}))


def _scored(uc: UnitCounts) -> dict:
    """The pooled ``tp``, ``fp``, ``fn`` of ``uc``, its :data:`CHAR_SPANS` scores and ``unit_counts``."""
    total = uc.total()
    return {**{k: int(total[k]) for k in CHAR_SPANS.columns},
            **{m.name: engine.point(CHAR_SPANS, uc, m.name) for m in CHAR_SPANS.metrics}, "unit_counts": uc.to_cell()}


def leakage_of_cell(cell: dict) -> dict | None:
    """The cell's ``extra.gold_cut_leakage`` scored anew from the unit counts it keeps (both runs' pooled counts,
    scores and unit counts by :data:`CHAR_SPANS`, the one engine; ``f1_difference`` of the two F1s; the rest as
    stored, in its order): made by :meth:`CardRun.finish <atlaslib.cards.run.CardRun.finish>` of every cell, a
    re-score's included (the card's ``scored_extra``). None for a cell without the measure (runs but the probe)."""
    leak = (cell.get("extra") or {}).get("gold_cut_leakage")
    if leak is None:
        return None
    made = {k: _scored(UnitCounts.from_cell(leak[k]["unit_counts"])) for k in ("with_gold_cuts", "without_gold_cuts")}
    made["f1_difference"] = made["with_gold_cuts"]["f1"] - made["without_gold_cuts"]["f1"]
    return {k: made.get(k, v) for k, v in leak.items()}


@side
def probe_without_gold_cuts(items: pd.DataFrame, manifest: SplitManifest, adapter, pred_with_cuts) -> dict:
    """The leakage of the gold cuts, measured on the word probe: the same probe trained and tested on the
    natural words (no cuts at gold boundaries), both runs scored against the exact gold character spans
    (:func:`char_span_f1`, the one engine, per-sentence unit counts kept). ``pred_with_cuts``: the run's own test tags on the cut words (its F1 in
    character spans equals its word-level F1). Returns both scores and their difference."""
    from ...protocols import tokens as tok

    idx = items.set_index("item_id")
    train, test = idx.loc[manifest.train], idx.loc[manifest.test]
    tr = [uncut_tags(t, s, g) for t, s, g in zip(train["text"], train["word_spans"], train["tags"])]
    te_words = [natural_word_spans(t) for t in test["text"]]
    res = tok.probe_ner(adapter, [w for w, _ in tr], [g for _, g in tr],
                        [[t[a:b] for a, b in sp] for t, sp in zip(test["text"], te_words)])
    gold = [char_mentions(g, s) for g, s in zip(test["tags"], test["word_spans"])]
    units = {"item_ids": list(manifest.test), "documents": test["document"].tolist()}
    with_cuts = char_span_f1(gold, [char_mentions(p, s) for p, s in zip(pred_with_cuts, test["word_spans"])], **units)
    without = char_span_f1(gold, [char_mentions(p, s) for p, s in zip(res["tags"], te_words)], **units)
    return {"with_gold_cuts": with_cuts, "without_gold_cuts": without,
            "f1_difference": with_cuts["f1"] - without["f1"], **{f"test_{k}": v for k, v in
                                                                 gold_cut_mentions(test.reset_index()).items()}}


def leakage_of_run(card_run, out, items: pd.DataFrame, manifest: SplitManifest) -> dict | None:
    """The gold cuts' leakage of a run, for its cell's ``extra.gold_cut_leakage``: measured on ok probe runs only
    (:func:`probe_without_gold_cuts` with the run's own adapter and test tags, the run's model named), None for
    any other run."""
    if out.status != "ok" or card_run.spec.protocol != "probe":
        return None
    return probe_without_gold_cuts(items, manifest, card_run.loaded.adapter, out.pred) | {"model": card_run.spec.model}
