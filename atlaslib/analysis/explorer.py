"""The item explorer of one (card, split version): every test unit beside every ``ok`` run's answer.

:func:`explorer` takes result cells (one card and split version) and returns an :class:`Explorer` whose
``table`` has one row per unit, the unit the card's task family compares (its ``unit``,
:func:`atlaslib.cards.families.family_of`):

- ``item`` (binary and labelled items: NegEx, the NLI challenge): one row per test item;
- ``mention`` (spans: MACCROBAT): one row per gold mention ``(item, type, first word, last word)``, found
  by a run when it predicts exactly that mention (the card's strict match), and a second table,
  ``predicted_only``, of the mentions some run predicted that are not gold;
- ``relation`` (scorer-based relations: TempEval): one row per gold item of each kind the records' ``found`` strings
  mark (the scorer's match); a run counts for a kind only when it addresses the kind's leaderboard metric.

Columns, in order: the unit's key (``item_id``; for mentions ``type``, ``first_word``, ``last_word``; for
relations ``kind``, ``index``), the item's input (the fields the card declares in
``CARD.analysis.inputs``, taken from what an outside system sees of the item, when ``inputs`` are given),
``gold``, then per run ``<model> · <protocol>`` (its prediction: the label; for a mention the run's tags on
its words; for a relation "found" / "missed"; for a run trained with several seeds its seeds' majority,
below), ``… · score`` (runs that give scores; ``… · mean score`` for a seeded run), ``… · right``
(``right`` / ``wrong``; for mentions and relations ``found`` / ``missed``, and empty when the run does not
address the unit), ``… · seed <s>`` (a seeded run's seeds, one column each), ``… · trigger`` and
``… · category`` (rule evidence, for runs that record it), then one column per declared slice (the slice's
group, as :mod:`atlaslib.analysis.slices` groups it), and ``runs right`` (how many compared runs get the unit
right), ``every run wrong`` and ``runs disagree`` (``yes`` / ``no``, over the compared runs: constant runs are
left out, as in :mod:`atlaslib.analysis.disagreement`, so the counts are that table's when no compared run is
seeded).

What a card contributes comes from its declaration (:class:`atlaslib.cards.Analysis`: ``kind``, ``slices``,
``rule_evidence``, ``inputs``), never from its name.

**Rows trained with several seeds.** A cell whose ``extra.seed_runs`` holds two or more seeds, each with its
``predictions`` (a fine-tuned row: one trained model per seed; the cell's own ``predictions`` are the first
seed's), is one run of the explorer whose answer is its seeds' *majority*, the rule the card page's paired
comparisons count it by (:func:`atlaslib.metrics.compare.with_seed_runs`: a unit is right for the row when
more than half of its seeds' models are right, ties wrong):

- item cards: the run's column shows the label more than half of the seeds' models predict; when no label has
  more than half (an even number of seeds split evenly, or more than two labels) it shows ``no majority``
  (:data:`NO_MAJORITY`), which is never the gold label, so ``… · right`` is ``right`` exactly when more than
  half of the seeds are right: the comparison's McNemar decision, and :meth:`Explorer.right_wrong` of two runs
  is the comparison's *b*. The run's score column is ``… · mean score``: per item the mean of its seeds'
  scores (empty when a seed gives none), not one model's score, and not what decides the majority answer. A
  seeded run shows no rule evidence (its cell's evidence would be the first seed's alone).
- span cards: the run has found a gold mention when more than half of its seeds' models predict exactly that
  mention; its column shows the tags more than half of the seeds put on the mention's words, else
  ``no majority``; in ``predicted_only`` a seeded run predicts a non-gold mention when more than half of its
  seeds' models do (the rows are the mentions some run predicts, as for other runs).

Each seed's own answer is in one more column per seed, ``<model> · <protocol> · seed <s>`` (item cards: its
label; span cards: its tags on the mention's words, and in ``predicted_only`` ``yes`` / ``no``), after the
run's own columns; :attr:`Explorer.seeds` names them. They are shown only: ``runs right``, ``every run
wrong``, ``runs disagree`` and the pair filters read the runs' majority answers (``no majority`` is one
answer there: two runs both showing it agree). A seeded run is a constant run (left out of those counts) when
its majority answers are all the same (item cards) or every seed's model is constant (span cards). When a seed
of a cell gives no ``predictions`` the explorer shows the cell's own (first-seed) answers for that run, as for
a run of one model (those are then not the comparisons' decisions). Span cards declare no McNemar decision, so
their majority rule is the item cards' rule carried over, not a comparison's count. Relation cards are
unchanged (their records carry no per-seed answers). :mod:`atlaslib.analysis.disagreement` reads a seeded row
by the same rule, so its counts equal ``every run wrong`` / ``runs disagree`` here.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import pandas as pd

from . import NO_MAJORITY, analysis_of, majority, ok_cells, seed_runs_of
from ..cards.families import family_of
from .disagreement import _is_constant
from .slices import _top_values, group_of, mention_value

SEP = " · "
YES, NO = "yes", "no"
#: what the right/wrong column of a run says, per unit
VERDICTS = {"item": ("right", "wrong"), "mention": ("found", "missed"), "relation": ("found", "missed")}
#: a seeded run's score column: the mean of its seeds' scores
MEAN_SCORE = "mean score"


def explorer_run_label(cell: dict) -> str:
    """``<model> · <protocol>``: how a run is named in the explorer and its CSV."""
    return f"{cell['model']}{SEP}{cell['protocol']}"


def seed_column(run: str, seed) -> str:
    """``<model> · <protocol> · seed <s>``: the column of one seed's answer of a seeded run."""
    return f"{run}{SEP}seed {seed}"


@dataclass
class Explorer:
    """``table``: one row per unit (module docstring); ``runs``: the ok runs, in table order;
    ``compared``: the runs ``every run wrong`` and ``runs disagree`` are computed over (constant runs left
    out, named in ``excluded``); ``slices``: the slice columns; ``inputs``: the input columns;
    ``predicted_only``: span cards' predicted mentions that are not gold (None for other cards); ``scores``: the
    score columns; ``seeds``: per seeded run its seed columns (shown only, never counted)."""

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
    #: ``{run: [its seed columns]}`` of the runs trained with several seeds (module docstring)
    seeds: dict = field(default_factory=dict)

    @property
    def verdicts(self) -> tuple[str, str]:
        return VERDICTS[self.unit]

    @staticmethod
    def right_column(run: str) -> str:
        return f"{run}{SEP}right"

    def right_wrong(self, a: str, b: str) -> pd.DataFrame:
        """The units run ``a`` gets right and run ``b`` wrong (on item cards, McNemar's b of the pair; a seeded
        run is right when more than half of its seeds' models are, as the comparison counts it)."""
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


def _seed_records(seeded: dict) -> dict:
    """``{run: [(seed column, {item_id: that seed's record}), ...]}`` of the seeded runs."""
    return {lab: [(seed_column(lab, r["seed"]), {x["item_id"]: x for x in r["predictions"]}) for r in runs]
            for lab, runs in seeded.items()}


def _mean_score(recs: list) -> float | None:
    """The mean of the seeds' scores of one item; None when a seed gives none."""
    s = [None if r is None else r.get("score") for r in recs]
    if not s or any(v is None for v in s):
        return None
    return float(sum(float(v) for v in s) / len(s))


def _items(cells, labels, analysis, inputs, slices, evidence_runs, seeded):
    right, wrong = VERDICTS["item"]
    by_run, ids, in_cols, rec_slices = _aligned(cells, labels, analysis, inputs, slices)
    by_seed = _seed_records(seeded)
    score_col = {}
    for lab, c in zip(labels, cells):
        if lab in seeded:
            if all(any(x.get("score") is not None for x in r["predictions"]) for r in seeded[lab]):
                score_col[lab] = f"{lab}{SEP}{MEAN_SCORE}"
        elif any(r.get("score") is not None for r in c["predictions"]):
            score_col[lab] = f"{lab}{SEP}score"
    rows = []
    for i in ids:
        row = {"item_id": i}
        for f in in_cols:
            row[f] = _input_text((inputs.get(i) or {}).get(f))
        row["gold"] = by_run[labels[0]][i]["gold"]
        for lab in labels:
            rec = by_run[lab][i]
            if lab in seeded:
                seeds = [recs.get(i) for _, recs in by_seed[lab]]
                pred = majority([None if r is None else r.get("pred") for r in seeds], len(seeds))
                score = _mean_score(seeds)
            else:
                pred, score = rec["pred"], rec.get("score")
            row[lab] = pred
            if lab in score_col:
                row[score_col[lab]] = score
            row[f"{lab}{SEP}right"] = right if pred != NO_MAJORITY and pred == rec["gold"] else wrong
            for col, recs in by_seed.get(lab, []):
                row[col] = (recs.get(i) or {}).get("pred", "")
            if lab in evidence_runs:
                _evidence_columns(row, lab, rec)
        for name, groups in rec_slices.items():
            row[name] = groups[i]
        rows.append(row)
    return pd.DataFrame(rows), in_cols, list(rec_slices), list(score_col.values())


def _mentions(cells, labels, analysis, inputs, slices, seeded):
    from ..metrics.spans import mentions

    right, wrong = VERDICTS["mention"]
    recs, ids, in_cols, rec_slices = _aligned(cells, labels, analysis, inputs, slices)
    mention_slices = {n: s for n, s in slices.items() if s.get("unit") == "mention"}
    by_seed = _seed_records(seeded)
    # each seed's tags per item (None: the seed has no record of the item) and its predicted mentions
    seed_tags = {lab: [(col, {i: (r[i].get("pred") if i in r else None) for i in ids}) for col, r in by_seed[lab]]
                 for lab in by_seed}
    seed_m = {lab: [(col, {i: set(mentions(t[i])) if t[i] is not None else set() for i in ids})
                    for col, t in seed_tags[lab]] for lab in seed_tags}

    def run_mentions(lab, i):
        if lab not in seed_m:
            return set(mentions(recs[lab][i]["pred"]))
        n = Counter(m for _, ms in seed_m[lab] for m in ms[i])
        return {m for m, k in n.items() if 2 * k > len(seed_m[lab])}

    def words(tags, a, b):
        return None if tags is None else " ".join(tags[a:b + 1])

    pred_m = {lab: {i: run_mentions(lab, i) for i in ids} for lab in labels}
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
                if lab in seed_tags:
                    got = [words(tags[i], a, b) for _, tags in seed_tags[lab]]
                    row[lab] = majority(got, len(got))
                else:
                    row[lab] = " ".join(recs[lab][i]["pred"][a:b + 1])
                row[f"{lab}{SEP}right"] = right if (t, a, b) in pred_m[lab][i] else wrong
                for col, tags in seed_tags.get(lab, []):
                    row[col] = words(tags[i], a, b) or ""
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
            for col, ms in seed_m.get(lab, []):
                row[col] = YES if (t, a, b) in ms[i] else NO
        row["runs predicting it"] = len(who)
        only.append(row)
    run_cols = [c for lab in labels for c in (lab, *(col for col, _ in seed_m.get(lab, [])))]
    cols = ["item_id", "type", "first_word", "last_word", *_mention_input_names(in_cols), "gold", *run_cols,
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
    seeded = {lab: seed_runs_of(c) for lab, c in zip(labels, ok)}
    seeded = {lab: runs for lab, runs in seeded.items() if runs}
    slices = dict(analysis.slices)
    evidence_runs = [lab for lab, c in zip(labels, ok) if lab not in seeded and
                     analysis.rule_evidence and c["predictions"] and all("evidence" in r for r in c["predictions"])]
    unit = family_of(analysis).unit   # what the card's family compares: item, mention or relation
    if not ok:
        return Explorer(card or "", version, unit, [], [], pd.DataFrame())
    scores, predicted_only = [], None
    if unit == "item":
        table, in_cols, slice_cols, scores = _items(ok, labels, analysis, inputs or {}, slices, evidence_runs,
                                                    seeded)
    elif unit == "mention":
        table, in_cols, slice_cols, predicted_only = _mentions(ok, labels, analysis, inputs or {}, slices, seeded)
        evidence_runs = []
    else:
        seeded = {}
        table, in_cols = _relations(ok, labels, analysis), []
        slice_cols = _relation_slices(ok, table, slices)
        evidence_runs = []
    constant = [lab for lab, c in zip(labels, ok) if _constant(c, lab, seeded, table, unit)]
    compared = [lab for lab in labels if lab not in constant]
    if unit == "relation":
        compared = [lab for lab in compared if (table[f"{lab}{SEP}right"] != "").any()]
    table = _verdict_columns(table, unit, labels, compared)
    seed_cols = {lab: [seed_column(lab, r["seed"]) for r in runs] for lab, runs in seeded.items()}
    return Explorer(card, version, unit, labels, compared, table.reset_index(drop=True), slice_cols, in_cols,
                    constant, scores, evidence_runs, predicted_only, seed_cols)


def _constant(cell: dict, lab: str, seeded: dict, table: pd.DataFrame, unit: str) -> bool:
    """A run that gives the same answer to every unit (left out of the counts over runs, as
    :mod:`atlaslib.analysis.disagreement` leaves it out). A seeded run: on item cards its majority answers are
    all the same; on span cards every seed's model is constant."""
    if lab not in seeded:
        return _is_constant(cell)
    if unit == "item":
        return len(table) > 0 and table[lab].nunique(dropna=False) <= 1
    return all(_is_constant({"predictions": r["predictions"]}) for r in seeded[lab])


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
