"""Where a MACCROBAT run errs: error mentions and their kinds (boundary, type, spurious, missed), the
MACCROBAT annotations under false positives, and guideline examples of what the three-type view keeps."""
from __future__ import annotations

from typing import Sequence

import pandas as pd

from ...metrics.spans import mentions as tag_mentions
from .card import SPEC_EXAMPLES
from .data import Corpus
from .runs import Outcome

def _by_position(m) -> tuple:
    """A mention ``(type, first word, last word)``'s place in a sentence: mentions are sets, whose order follows the
    process's string hashing; pages list them by position."""
    return m[1], m[2], m[0]


def error_table(out: Outcome, items: pd.DataFrame, limit: int = 30) -> pd.DataFrame:
    """Each error mention with its kind: ``boundary`` (same type, overlapping gold span),
    ``type`` (same span, other type), ``spurious`` (FP, no overlap), ``missed`` (FN, no overlap)."""
    idx = items.set_index("item_id")
    rows = []
    for iid, g, p in zip(out.item_ids, out.gold, out.pred):
        words = idx.loc[iid, "words"]
        gm, pm = set(tag_mentions(g)), set(tag_mentions(p))
        for side, errs, other in (("predicted", pm - gm, gm), ("gold", gm - pm, pm)):
            for t, a, b in sorted(errs, key=_by_position):
                ov = sorted((m for m in other if m[1] <= b and a <= m[2]), key=_by_position)
                if any(m[1:] == (a, b) for m in ov):
                    kind = "type"
                elif any(m[0] == t for m in ov):
                    kind = "boundary"
                elif ov:
                    kind = "type+boundary"
                else:
                    kind = "spurious" if side == "predicted" else "missed"
                rows.append({"item_id": iid, "side": side, "type": t, "mention": " ".join(words[a:b + 1]),
                             "kind": kind,
                             "overlaps": "; ".join(f"{m[0]}: {' '.join(words[m[1]:m[2] + 1])}" for m in ov)})
    f = pd.DataFrame(rows, columns=["item_id", "side", "type", "mention", "kind", "overlaps"])
    return f.head(limit) if limit else f


def error_kinds(out: Outcome, items: pd.DataFrame) -> pd.DataFrame:
    """Counts of error kinds (see :func:`error_table`) per side."""
    return error_table(out, items, limit=0).groupby(["side", "kind"]).size().rename("count").reset_index()


def false_positive_sources(out: Outcome, corpus: Corpus) -> pd.DataFrame:
    """For each predicted mention that is not in gold: the MACCROBAT annotations (kept by the overlap
    rule, all 41 types) under its words. Counts per (predicted type, MACCROBAT type underneath);
    ``(none)`` when no annotation overlaps. Shows, e.g., "tests" that are Lab_value results and
    "problems" that include Biological_structure words."""
    idx = corpus.items.set_index("item_id")
    kept = corpus.entities[corpus.entities.kept]
    by_doc = dict(list(kept.groupby("document")))
    rows = []
    for iid, g, p in zip(out.item_ids, out.gold, out.pred):
        r = idx.loc[iid]
        ents = by_doc.get(r["document"], kept.iloc[:0])
        for t, a, b in set(tag_mentions(p)) - set(tag_mentions(g)):
            lo, hi = r["offset"] + r["word_spans"][a][0], r["offset"] + r["word_spans"][b][1]
            under = ents[(ents.start < hi) & (ents.end > lo)]["type"].tolist()
            for u in under or ["(none)"]:
                rows.append({"predicted type": t, "MACCROBAT type underneath": u})
    f = pd.DataFrame(rows, columns=["predicted type", "MACCROBAT type underneath"])
    return (f.groupby(["predicted type", "MACCROBAT type underneath"]).size().rename("count")
            .reset_index().sort_values("count", ascending=False).reset_index(drop=True))


def guideline_examples(items: pd.DataFrame, entities: pd.DataFrame, item_ids: Sequence[str] = SPEC_EXAMPLES
                       ) -> pd.DataFrame:
    """For the given sentences: every kept MACCROBAT entity with its type and mapped group, showing
    what the three-type view keeps (e.g. anatomy and "pain" as separate entities)."""
    idx = items.set_index("item_id")
    rows = []
    for iid in item_ids:
        r = idx.loc[iid]
        ents = entities[(entities.document == r["document"]) & (entities.sentence == r["sent_index"]) & entities.kept]
        for e in ents.sort_values("start").itertuples():
            rows.append({"item_id": iid, "text": e.text, "MACCROBAT type": e.type, "card type": e.group})
    return pd.DataFrame(rows)
