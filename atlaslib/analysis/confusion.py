"""A run's confusion matrix, read from its result cell: gold label × predicted label.

What a unit is follows from the records, not from the card's name:

- a record whose ``gold`` and ``pred`` are labels (an item-level card: one answer per test item) is one unit; an
  item without an answer counts under :data:`NO_ANSWER`;
- a record that keeps its own counts (``confusion``: ``{"of": what a unit is, "counts": {gold: {predicted: n}}}``,
  e.g. a scorer-based card's per-document counts of gold items against the prediction's) adds those;
- a record whose ``gold`` and ``pred`` are tag sequences of one length (a span card's BIO tags, one per token) is
  one unit per token, by entity type: ``B-x`` and ``I-x`` both count as ``x``, ``O`` is outside any mention.
  A token-level matrix says which types are confused; the card's span metric (whole mentions) is the leaderboard's.

A row trained with several seeds (``extra.seed_runs``) counts every seed's model on every unit, summed, so a
matrix of 5 seeds holds 5 answers per unit; its caption says so. A cell whose records have no gold/predicted
pairs (a run that did not happen, a scorer-based card whose records keep counts per document) gets no matrix and
a reason.
"""
from __future__ import annotations

import pandas as pd

from . import seed_cells

#: the predicted column of an item the run gave no answer for
NO_ANSWER = "(no answer)"


def _entity_type(tag) -> str:
    tag = str(tag)
    return tag[2:] if tag[:2] in ("B-", "I-") else tag


def pairs(records) -> tuple[list[tuple[str, str]], str | None]:
    """((gold, predicted) per unit, the unit: ``"items"``, ``"tokens"`` or a record's own ``of``; None without
    any pair)."""
    out, unit = [], None
    for r in records or []:
        g, p = r.get("gold"), r.get("pred")
        kept = r.get("confusion")
        if isinstance(kept, dict) and isinstance(kept.get("counts"), dict):
            out += [(str(a), str(b)) for a, row in kept["counts"].items() for b, n in row.items() for _ in range(n)]
            unit = unit or str(kept.get("of") or "units")
        elif isinstance(g, list) and isinstance(p, list) and len(g) == len(p):
            out += [(_entity_type(a), _entity_type(b)) for a, b in zip(g, p)]
            unit = unit or "tokens"
        elif isinstance(g, str) and (isinstance(p, str) or p is None):
            out.append((g, NO_ANSWER if p is None else p))
            unit = unit or "items"
    return out, (unit if out else None)


def confusion(cell: dict, labels=()) -> tuple[pd.DataFrame | None, str]:
    """(the matrix: rows gold, columns predicted, counts; the caption saying what it counts) of a result cell, or
    (None, why there is none). ``labels`` (the card's label set) fixes the order; other labels follow, sorted."""
    if cell.get("status", "ok") != "ok" or not cell.get("predictions"):
        return None, "No confusion matrix: the run has no answers."
    seeds = seed_cells(cell)
    models = [c for _, c in seeds] or [cell]
    found, unit = [], None
    for c in models:
        p, u = pairs(c["predictions"])
        found += p
        unit = unit or u
    if not found:
        return None, "No confusion matrix: this run's records keep no gold and predicted label per unit."
    seen = {g for g, _ in found} | {p for _, p in found}
    # labels in parentheses (no answer, no item at those spans) after the labels themselves
    order = [lab for lab in labels if lab in seen] + sorted(seen - set(labels) - {NO_ANSWER},
                                                            key=lambda lab: (lab.startswith("("), lab))
    cols = order + ([NO_ANSWER] if NO_ANSWER in seen else [])
    frame = pd.crosstab(pd.Series([g for g, _ in found], name="gold"),
                        pd.Series([p for _, p in found], name="predicted"))
    frame = frame.reindex(index=[lab for lab in order if lab in {g for g, _ in found}], columns=cols,
                          fill_value=0).astype(int)
    n = len(found) // len(models)
    what = (f"{n:,} test items" if unit == "items" else
            f"{n:,} test tokens, by entity type (B- and I- tags of a type together; O outside any mention; the "
            f"leaderboard scores whole mentions)" if unit == "tokens" else f"{n:,} {unit}")
    caption = f"Gold (rows) against predicted (columns) on {what}"
    if seeds:
        caption += f", summed over the {len(seeds)} training seeds' models (each unit counted once per seed)"
    return frame, caption + "."


def confusion_markdown(cell: dict, labels=()) -> str:
    """:func:`confusion` as a markdown table under its caption (labels escaped), or the reason there is none."""
    from ..escape import md

    frame, caption = confusion(cell, labels)
    if frame is None:
        return caption
    head = ["gold \\ predicted"] + [md(c) for c in frame.columns]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" + "--:|" * len(frame.columns)]
    for g, row in frame.iterrows():
        lines.append("| " + " | ".join([f"**{md(g)}**"] + [f"{int(v):,}" for v in row]) + " |")
    return caption + "\n\n" + "\n".join(lines) + "\n"
