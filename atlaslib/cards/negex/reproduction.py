"""GenNegEx 1.2's published figures on the whole kit reproduced: an assertion system on all 2,376 kit rows
and on the 2,365 items (:func:`reproduction`), and the rows of the book's reproduction chapter."""
from __future__ import annotations

import pandas as pd

from ...phases import side
from .card import GENNEGEX, POSITIVE
from .data import mark

#: the split version whose run also reproduces the kit's whole-kit counts
REPRODUCTION_VERSION = "atlas-full-v1"


def reproduces(out: dict | None, version: str, model: str) -> bool:
    """Whether a run also runs on the whole kit beside GenNegEx's counts: an assertion system (not the
    constant majority baseline, which reproduces nothing) on :data:`REPRODUCTION_VERSION`."""
    return (out is not None and out.get("capability") == "predict.assertion" and version == REPRODUCTION_VERSION
            and model != "majority")


def rows_for_reproduction(rows: pd.DataFrame) -> pd.DataFrame:
    """All 2,376 kit rows for the reproduction table: found concepts marked as usual (``text``); the 11
    rows whose concept is missing from the sentence have ``text = None``: no system can be pointed at a
    target that is not there, and NegEx itself reports such a phrase as not negated, so they count as
    predicted affirmed."""
    out = rows.copy()
    out["text"] = [mark(s, c) if f else None
                   for s, c, f in zip(out["sentence"], out["concept"], out["concept_found"])]
    out["label"] = (out["decision"] == POSITIVE).astype(int)
    return out


@side
def reproduction(adapter, rows: pd.DataFrame, items: pd.DataFrame, known: dict | None = None) -> pd.DataFrame:
    """Confusion counts (the card's per-item counts, :meth:`~atlaslib.cards.families.BinaryItems.counts`, summed)
    and rates (the engine's formulas, :func:`atlaslib.metrics.classification.from_confusion`) of an assertion system
    (by the family's assertion step, as the run's own) on all 2,365 items
    and on all 2,376 rows, beside GenNegEx 1.2's published figures on the whole kit (negated = positive). Each
    marked item is predicted once: ``known`` (item_id -> 0/1, e.g. the run's own test predictions) is reused,
    the 2,365 items are the found rows of the 2,376, and a missing concept counts as affirmed."""
    from ...metrics.classification import from_confusion
    from .. import record
    from ..deciding import Loaded
    from .card import LABELS
    from .family import FAMILY, counts

    all_rows = rows_for_reproduction(rows)
    pred_by_id = dict(known or {})
    todo = all_rows[all_rows["text"].notna() & ~all_rows["item_id"].isin(list(pred_by_id))]
    # the family's assertion step, as the run's own: an unparseable answer counts as wrong
    answers = FAMILY.predictor(Loaded(adapter, "predict.assertion", None), None, "zero_shot")(todo)
    pred_by_id.update(zip(todo["item_id"], (int(p) for p in answers[2]["pred"])))
    table = {}
    for name, frame in (("2,365 items", items), ("2,376 rows", all_rows)):
        # the card's per-item counts (the engine's) summed, and the metric formulas the engine scores with
        recs = [record(i, LABELS[int(y)], LABELS[pred_by_id.get(i, 0)], None)
                for i, y in zip(frame["item_id"], frame["label"])]
        total = counts({"predictions": recs}).total()
        c = {k: int(total[k]) for k in ("tp", "fp", "tn", "fn")}
        rates = from_confusion(c["tp"], c["fp"], c["tn"], c["fn"])
        table[name] = {**c, **{k: round(float(rates[k]), 3) for k in ("sensitivity", "specificity", "precision")}}
    table["GenNegEx 1.2 (published, 2,376 rows)"] = dict(GENNEGEX)
    cols = ["tp", "tn", "fp", "fn", "sensitivity", "specificity", "precision"]
    return pd.DataFrame.from_dict(table, orient="index")[cols].rename_axis("system")


def reproduction_rows(repro: pd.DataFrame, system: str) -> list[dict]:
    """Rows for the book's reproduction chapter: GenNegEx's published whole-kit figures beside ``system``
    on all 2,376 rows, and the kit's own row counts."""
    from ...results import reproduction_row

    ours = repro.loc["2,376 rows"]
    src = "chapmanbe/negex TestSet.md (GenNegEx 1.2)"
    rows = [reproduction_row("kit rows / negated / affirmed", "2,376 / 491 / 1,885", "2,376 / 491 / 1,885",
                             "counted by the loader (tested)", "NegEx kit", system="loader")]
    note = ("GenNegEx on the whole kit vs each assertion system on all 2,376 rows; the card page explains "
            "the differences")
    for k in ("tp", "tn", "fp", "fn", "sensitivity", "specificity", "precision"):
        value = float(ours[k]) if k in ("sensitivity", "specificity", "precision") else int(ours[k])
        rows.append(reproduction_row(f"{k} (negated = positive)", GENNEGEX[k], value, note, src, system=system))
    return rows
