"""Why a rule system decided: the triggers behind the NegEx card's false positives and false negatives.

The rule adapters (:mod:`atlaslib.models.rules`) record per item ``evidence``: the trigger that made an
ABSENT or POSSIBLE decision (``{"trigger", "category", "span"}``, the span in characters of the unmarked
sentence the rules saw) or None, no trigger in scope. From the prediction records of each ok run that has
evidence:

- false positives (gold affirmed, predicted negated): counted by trigger phrase (case-folded) and
  category: which triggers fire wrongly most often;
- false negatives (gold negated, predicted affirmed): counted by what the rules had: "no trigger in
  scope" (split by whether a kit negation trigger occurs elsewhere in the sentence, the ``trigger_side``
  slice field: out of scope vs. none at all), or the trigger that made a POSSIBLE decision instead.
"""
from __future__ import annotations

import pandas as pd

from . import ok_cells, run_label

NO_TRIGGER = "no trigger in scope"


def has_evidence(cell: dict) -> bool:
    recs = cell.get("predictions") or []
    return bool(recs) and all("evidence" in r for r in recs)


def _fn_reason(r: dict) -> tuple[str, str]:
    e = r.get("evidence")
    if e:
        return e["trigger"].casefold(), e["category"]
    side = r.get("trigger_side")
    if "trigger_side" not in r:
        return NO_TRIGGER, ""
    where = "a kit negation trigger elsewhere in the sentence" if side else "no kit negation trigger in the sentence"
    return NO_TRIGGER, where


def trigger_tables(cells) -> dict[str, pd.DataFrame]:
    """Library entry point: ``{"false_positives": ..., "false_negatives": ...}``, one row per (run, trigger,
    category) with ``count`` and an example ``item_id``, most frequent first within each run. Runs without
    evidence (not rule systems) are left out."""
    fp_rows, fn_rows = [], []
    for cell in ok_cells(cells):
        if not has_evidence(cell):
            continue
        run = run_label(cell)
        for r in cell["predictions"]:
            if r["gold"] == "affirmed" and r["pred"] == "negated":
                e = r["evidence"] or {}
                fp_rows.append({"run": run, "trigger": (e.get("trigger") or NO_TRIGGER).casefold(),
                                "category": e.get("category", ""), "item_id": r["item_id"]})
            elif r["gold"] == "negated" and r["pred"] == "affirmed":
                trig, cat = _fn_reason(r)
                fn_rows.append({"run": run, "trigger": trig, "category": cat, "item_id": r["item_id"]})

    def count(rows, what):
        cols = ["run", "trigger", "category", "count", "example"]
        if not rows:
            return pd.DataFrame(columns=cols)
        f = pd.DataFrame(rows)
        g = (f.groupby(["run", "trigger", "category"], sort=False)
             .agg(count=("item_id", "size"), example=("item_id", "first")).reset_index())
        return g.sort_values(["run", "count", "trigger"], ascending=[True, False, True]).reset_index(drop=True)[cols]

    return {"false_positives": count(fp_rows, "fp"), "false_negatives": count(fn_rows, "fn")}
