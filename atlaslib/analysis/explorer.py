"""The item explorer of one (card, split version): every test unit beside every ``ok`` run's answer.

:func:`explorer` takes result cells (one card and split version) and returns an :class:`Explorer` whose
``table`` has one row per unit:

- item cards (``kind`` binary or labels: NegEx, the NLI challenge): one row per test item;
- span cards (``spans``: MACCROBAT): one row per gold mention ``(item, type, first word, last word)``, found
  by a run when it predicts exactly that mention (the card's strict match), and a second table,
  ``predicted_only``, of the mentions some run predicted that are not gold;
- relation cards (``temporal``: TempEval): one row per gold item of each kind the records' ``found`` strings
  mark (the scorer's match); a run counts for a kind only when it addresses the kind's leaderboard metric.

Columns, in order: the unit's key (``item_id``; for mentions ``type``, ``first_word``, ``last_word``; for
relations ``kind``, ``index``), the item's input (the fields the card declares in
``CARD.analysis.inputs``, taken from what an outside system sees of the item, when ``inputs`` are given),
``gold``, then per run ``<model> · <protocol>`` (its prediction: the label; for a mention the run's tags on
its words; for a relation "found" / "missed"), ``… · score`` (runs that give scores), ``… · right``
(``right`` / ``wrong``; for mentions and relations ``found`` / ``missed``, and empty when the run does not
address the unit), ``… · trigger`` and ``… · category`` (rule evidence, for runs that record it), then one
column per declared slice (the slice's group, as :mod:`atlaslib.analysis.slices` groups it), and
``runs right`` (how many compared runs get the unit right), ``every run wrong`` and ``runs disagree``
(``yes`` / ``no``, over the compared runs: constant runs are left out, as in
:mod:`atlaslib.analysis.disagreement`, so the counts are that table's).

What a card contributes comes from its declaration (:class:`atlaslib.cards.Analysis`: ``kind``, ``slices``,
``rule_evidence``, ``inputs``), never from its name.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from . import analysis_of, ok_cells
from .disagreement import ITEM_KINDS, _is_constant
from .slices import _top_values, group_of, mention_value

SEP = " · "
YES, NO = "yes", "no"
#: what the right/wrong column of a run says, per unit
VERDICTS = {"item": ("right", "wrong"), "mention": ("found", "missed"), "relation": ("found", "missed")}


def explorer_run_label(cell: dict) -> str:
    """``<model> · <protocol>``: how a run is named in the explorer and its CSV."""
    return f"{cell['model']}{SEP}{cell['protocol']}"


@dataclass
class Explorer:
    """``table``: one row per unit (module docstring); ``runs``: the ok runs, in table order;
    ``compared``: the runs ``every run wrong`` and ``runs disagree`` are computed over (constant runs left
    out, named in ``excluded``); ``slices``: the slice columns; ``inputs``: the input columns;
    ``predicted_only``: span cards' predicted mentions that are not gold (None for other cards)."""

    card: str
    version: str
    unit: str
    runs: list[str]
    compared: list[str]
    table: pd.DataFrame
    slices: list[str] = field(default_factory=list)
    inputs: list[str] = field(default_factory=list)
    excluded: list[str] = field(default_factory=list)
    scores: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    predicted_only: pd.DataFrame | None = None

    @property
    def verdicts(self) -> tuple[str, str]:
        return VERDICTS[self.unit]

    @staticmethod
    def right_column(run: str) -> str:
        return f"{run}{SEP}right"

    def right_wrong(self, a: str, b: str) -> pd.DataFrame:
        """The units run ``a`` gets right and run ``b`` wrong (on item cards, McNemar's b of the pair)."""
        right, wrong = self.verdicts
        t = self.table
        return t[(t[self.right_column(a)] == right) & (t[self.right_column(b)] == wrong)]

    def csv_frame(self) -> pd.DataFrame:
        """The table as the CSV download holds it (every column, one row per unit)."""
        return self.table.copy()


def _inputs_for(card_analysis, inputs: dict | None) -> list[str]:
    if not inputs:
        return []
    return [f for f in card_analysis.inputs if any(f in v for v in inputs.values())]


def _input_text(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return " ".join(map(str, value))
    return str(value)


def _record_slices(recs: list[dict], slices: dict) -> dict:
    """``{slice name: {item_id: group}}`` of the item-level slices whose field every record holds."""
    out = {}
    for name, spec in slices.items():
        if spec.get("unit") == "mention" or "field" not in spec:
            continue
        f = spec["field"]
        if not recs or not all(f in r for r in recs):
            continue
        top = _top_values([r[f] for r in recs], spec)
        out[name] = {r["item_id"]: group_of(r[f], spec, top) for r in recs}
    return out


def _evidence_columns(row: dict, run: str, rec: dict) -> None:
    e = rec.get("evidence") or {}
    row[f"{run}{SEP}trigger"] = e.get("trigger", "")
    row[f"{run}{SEP}category"] = e.get("category", "")


def _verdict_columns(frame: pd.DataFrame, unit: str, runs: list[str], compared: list[str]) -> pd.DataFrame:
    right, wrong = VERDICTS[unit]
    cols = [f"{r}{SEP}right" for r in compared]
    if cols:
        got = frame[cols].to_numpy(dtype=object)
        addressed = got != ""
        n_right = (got == right).sum(axis=1)
        n_addr = addressed.sum(axis=1)
        frame["runs right"] = n_right.astype(int)
        frame["every run wrong"] = [YES if a > 0 and k == 0 else NO for k, a in zip(n_right, n_addr)]
        if unit == "item":
            preds = frame[compared].astype(str).to_numpy()
            same = (preds == preds[:, :1]).all(axis=1)
        else:
            same = (n_right == 0) | (n_right == n_addr)
        frame["runs disagree"] = [NO if s else YES for s in same]
    else:
        frame["runs right"] = 0
        frame["every run wrong"] = NO
        frame["runs disagree"] = NO
    return frame


def _aligned(cells, labels, analysis, inputs, slices):
    """Each run's records by item id, the item ids every run holds (in the first run's order), the input
    columns and the item-level slice groups."""
    by_run = {lab: {r["item_id"]: r for r in c["predictions"]} for lab, c in zip(labels, cells)}
    first = cells[0]["predictions"]
    ids = [r["item_id"] for r in first if all(r["item_id"] in by_run[lab] for lab in labels)]
    return by_run, ids, _inputs_for(analysis, inputs), _record_slices(first, slices)


def _items(cells, labels, analysis, inputs, slices, evidence_runs):
    right, wrong = VERDICTS["item"]
    by_run, ids, in_cols, rec_slices = _aligned(cells, labels, analysis, inputs, slices)
    scored = [lab for lab, c in zip(labels, cells) if any(r.get("score") is not None for r in c["predictions"])]
    rows = []
    for i in ids:
        row = {"item_id": i}
        for f in in_cols:
            row[f] = _input_text((inputs.get(i) or {}).get(f))
        row["gold"] = by_run[labels[0]][i]["gold"]
        for lab in labels:
            rec = by_run[lab][i]
            row[lab] = rec["pred"]
            if lab in scored:
                row[f"{lab}{SEP}score"] = rec.get("score")
            row[f"{lab}{SEP}right"] = right if rec["pred"] == rec["gold"] else wrong
            if lab in evidence_runs:
                _evidence_columns(row, lab, rec)
        for name, groups in rec_slices.items():
            row[name] = groups[i]
        rows.append(row)
    return pd.DataFrame(rows), in_cols, list(rec_slices), scored


def _mentions(cells, labels, analysis, inputs, slices):
    from ..metrics.spans import mentions

    right, wrong = VERDICTS["mention"]
    recs, ids, in_cols, rec_slices = _aligned(cells, labels, analysis, inputs, slices)
    mention_slices = {n: s for n, s in slices.items() if s.get("unit") == "mention"}
    pred_m = {lab: {i: set(mentions(recs[lab][i]["pred"])) for i in ids} for lab in labels}
    rows, extra = [], {}
    for i in ids:
        gold_tags = recs[labels[0]][i]["gold"]
        text = {f: (inputs.get(i) or {}).get(f) for f in in_cols} if in_cols else {}
        gold_m = sorted(mentions(gold_tags), key=lambda m: (m[1], m[2], m[0]))
        for t, a, b in gold_m:
            row = {"item_id": i, "type": t, "first_word": a, "last_word": b}
            _mention_inputs(row, text, a, b)
            row["gold"] = " ".join(gold_tags[a:b + 1])
            for lab in labels:
                row[lab] = " ".join(recs[lab][i]["pred"][a:b + 1])
                row[f"{lab}{SEP}right"] = right if (t, a, b) in pred_m[lab][i] else wrong
            for name, spec in mention_slices.items():
                row[name] = group_of(mention_value((t, a, b), spec), spec)
            for name, groups in rec_slices.items():
                row[name] = groups[i]
            rows.append(row)
        gold_set = set(gold_m)
        for lab in labels:
            for m in pred_m[lab][i] - gold_set:
                extra.setdefault((i, *m), set()).add(lab)
    only = []
    for (i, t, a, b), who in sorted(extra.items(), key=lambda kv: (ids.index(kv[0][0]), kv[0][2], kv[0][3], kv[0][1])):
        row = {"item_id": i, "type": t, "first_word": a, "last_word": b}
        text = {f: (inputs.get(i) or {}).get(f) for f in in_cols} if in_cols else {}
        _mention_inputs(row, text, a, b)
        row["gold"] = " ".join(recs[labels[0]][i]["gold"][a:b + 1])
        for lab in labels:
            row[lab] = YES if lab in who else NO
        row["runs predicting it"] = len(who)
        only.append(row)
    cols = ["item_id", "type", "first_word", "last_word", *_mention_input_names(in_cols), "gold", *labels,
            "runs predicting it"]
    mention_cols = [*mention_slices, *rec_slices]
    return pd.DataFrame(rows), _mention_input_names(in_cols), mention_cols, pd.DataFrame(only, columns=cols)


def _mention_input_names(in_cols) -> list[str]:
    """A word-list input gives the mention's words and the whole sentence."""
    return [c for f in in_cols for c in (("mention", f) if f == "words" else (f,))]


def _mention_inputs(row: dict, text: dict, a: int, b: int) -> None:
    for f, v in text.items():
        if isinstance(v, (list, tuple)):
            row["mention"] = " ".join(map(str, v[a:b + 1]))
        row[f] = _input_text(v)


def _relation_slices(cells, frame: pd.DataFrame, slices: dict) -> list[str]:
    """Add to ``frame`` one column per declared slice whose field the records' ``found_slices`` give for a
    kind (each gold item's value, grouped as the slice table groups it; empty for kinds without the field)."""
    values: dict = {}
    for c in cells:
        for p in c["predictions"]:
            for kind, fields in (p.get("found_slices") or {}).items():
                for f, vals in fields.items():
                    for k, v in enumerate(vals):
                        values.setdefault((kind, p["item_id"], k), {})[f] = v
    added = []
    keys = list(zip(frame["kind"], frame["item_id"], frame["index"]))
    for name, spec in slices.items():
        f = spec.get("field")
        if not any(f in v for v in values.values()):
            continue
        frame[name] = [group_of(values[k][f], spec) if f in values.get(k, {}) else "" for k in keys]
        added.append(name)
    return added


def _relations(cells, labels, analysis) -> pd.DataFrame:
    """Gold items of each kind the records mark (``found``, the kinds the card's ``analysis.found`` names):
    found / missed per run addressing the kind (:func:`atlaslib.analysis.disagreement` reads the same bits)."""
    from .disagreement import _found_bits

    right, wrong = VERDICTS["relation"]
    bits = _found_bits(cells, labels, analysis.found)
    frame = bits[["item_id", "kind", "index"]].copy()
    for lab in labels:
        col = bits[lab] if lab in bits else pd.Series([None] * len(bits))
        frame[lab] = [("" if v is None or v != v else ("found" if int(v) else "missed")) for v in col]
        frame[f"{lab}{SEP}right"] = frame[lab].map({"found": right, "missed": wrong, "": ""})
    return frame


def explorer(cells, card: str | None = None, *, inputs: dict | None = None) -> Explorer:
    """Library entry point: the explorer of the ok runs among ``cells`` (one card and split version).

    ``inputs``: ``{item_id: {field: value}}``, the items' input as an outside system sees it (see
    :func:`card_inputs`); without it the table holds ids only. ``card`` defaults to the cells' own."""
    cells = list(cells)
    card = card or (cells[0]["card"] if cells else None)
    analysis = analysis_of(card) if card else analysis_of("")
    ok = ok_cells(cells)
    version = ok[0]["version"] if ok else (cells[0]["version"] if cells else "")
    labels = [explorer_run_label(c) for c in ok]
    constant = [lab for lab, c in zip(labels, ok) if _is_constant(c)]
    compared = [lab for lab in labels if lab not in constant]
    slices = dict(analysis.slices)
    evidence_runs = [lab for lab, c in zip(labels, ok)
                     if analysis.rule_evidence and c["predictions"] and all("evidence" in r for r in c["predictions"])]
    if not ok:
        return Explorer(card or "", version, "item" if analysis.kind in ITEM_KINDS else
                        ("mention" if analysis.kind == "spans" else "relation"), [], [], pd.DataFrame())
    scores, predicted_only = [], None
    if analysis.kind in ITEM_KINDS:
        unit = "item"
        table, in_cols, slice_cols, scores = _items(ok, labels, analysis, inputs or {}, slices, evidence_runs)
    elif analysis.kind == "spans":
        unit = "mention"
        table, in_cols, slice_cols, predicted_only = _mentions(ok, labels, analysis, inputs or {}, slices)
        evidence_runs = []
    else:
        unit = "relation"
        table, in_cols = _relations(ok, labels, analysis), []
        slice_cols = _relation_slices(ok, table, slices)
        evidence_runs = []
        compared = [lab for lab in compared if (table[f"{lab}{SEP}right"] != "").any()]
    table = _verdict_columns(table, unit, labels, compared)
    return Explorer(card, version, unit, labels, compared, table.reset_index(drop=True), slice_cols, in_cols,
                    constant, [f"{lab}{SEP}score" for lab in scores], evidence_runs, predicted_only)


def card_inputs(card: str, version: str, data_dir=None) -> dict:
    """``{item_id: {field: value}}`` of the test items of (card, version): the fields the card declares in
    ``CARD.analysis.inputs``, from its outside split (what ``atlas export`` gives an outside system). Empty
    when the card declares none."""
    from ..cards import card_module

    fields = tuple(analysis_of(card).inputs)
    if not fields:
        return {}
    s = card_module(card).outside_split(version, "test", data_dir)
    return {r["item_id"]: {f: r.get(f) for f in fields if f in r} for r in s.records}
