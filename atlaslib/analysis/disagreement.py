"""Disagreement between runs: which items the ``ok`` runs of one (card, version) answer differently, which
defeat every run, and, for span and relation cards, which gold mentions / relations all, some or none of
the runs find.

Runs that give the same answer to every item (constant baselines such as "majority" or "always
entailment") are left out: they agree with nothing and every item they miss is a class, not a hard case.
Their names are returned in ``excluded``.

What is compared is the unit of the card's task family (:func:`atlaslib.cards.families.family_of`). Item cards
(NegEx, NLI challenge): an item is *disputed* when the runs do not all give the same prediction,
and *hard* when every run's prediction differs from gold. Span cards (MACCROBAT): every gold mention
``(item, type, first word, last word)`` is found by a run when the run predicts exactly that mention
(the card's strict match). Relation card (TempEval): the records' ``found`` strings mark, per gold item of
each kind, whether the run's prediction holds it (the scorer's match); only runs that address the kind's
leaderboard metric (its value is not null) count.

A row trained with several seeds (``extra.seed_runs`` with each seed's predictions) answers an item with the
label more than half of its seeds' models give (else ``no majority``, counted wrong) and finds a gold mention
when more than half of its seeds find it: the card's paired comparisons and the item explorer count it so.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import pandas as pd

from ..cards.families import family_of
from . import addresses, analysis_of, majority, ok_cells, run_label, seed_runs_of



@dataclass
class Disagreement:
    """``items``: one row per item (item cards) or gold mention/relation (span cards) with one column per run
    (prediction, or 1/0 found) and ``n_correct``; ``summary``: the counts as a table; ``runs``: the runs
    compared; ``excluded``: constant runs left out."""

    unit: str
    runs: list[str]
    items: pd.DataFrame
    summary: pd.DataFrame
    excluded: list[str] = field(default_factory=list)

    @property
    def disputed(self) -> pd.DataFrame:
        return self.items[self.items["status"] == "disputed"] if self.unit == "item" else \
            self.items[self.items["status"] == "found by some"]

    @property
    def hard(self) -> pd.DataFrame:
        return self.items[self.items["status"] == "hard (every run wrong)"] if self.unit == "item" else \
            self.items[self.items["status"] == "found by none"]


def run_answers(cell: dict) -> dict:
    """``{item_id: pred}`` of a run: its records' ``pred``; a row over training seeds (:func:`seed_runs_of`):
    per item the answer of more than half of its seeds' models, else :data:`atlaslib.analysis.NO_MAJORITY` (never gold, so
    counted wrong: the card's paired comparisons count a seeded row's decisions so). Span and relation records
    keep their own ``pred`` here (see :func:`_mentions_found`)."""
    runs = seed_runs_of(cell)
    own = {p["item_id"]: p.get("pred") for p in cell["predictions"]}
    if not runs or not all(isinstance(v, str) for v in own.values()):
        return own
    by_seed = [{x["item_id"]: x.get("pred") for x in r["predictions"]} for r in runs]
    return {i: majority([s.get(i) for s in by_seed], len(by_seed)) for i in own}


def _is_constant(cell: dict) -> bool:
    """True when every record has the same ``pred`` (records without ``pred``, as TempEval's per-document
    ones, are never constant); a row over training seeds: its majority answers (:func:`run_answers`) are all the
    same on an item card, every seed's model is constant on a span card."""
    recs = cell["predictions"]
    if not all("pred" in p for p in recs):
        return False
    runs = seed_runs_of(cell)
    if runs and not all(isinstance(p["pred"], str) for p in recs):
        return all(len({repr(x.get("pred")) for x in r["predictions"]}) <= 1 for r in runs)
    return len({repr(p) for p in run_answers(cell).values()}) <= 1


def compared_runs(cells) -> tuple[list[dict], list[str]]:
    """``(runs compared, labels of the constant runs left out)`` among the ok cells."""
    ok = ok_cells(cells)
    kept = [c for c in ok if not _is_constant(c)]
    return kept, [run_label(c) for c in ok if _is_constant(c)]


def item_disagreement(cells) -> Disagreement:
    """Item cards: per item, each run's prediction, how many runs are right, and the status
    (``agreed, right`` / ``agreed, wrong`` = hard / ``disputed``)."""
    runs, excluded = compared_runs(cells)
    labels = [run_label(c) for c in runs]
    gold, preds = {}, {}
    for lab, c in zip(labels, runs):
        preds[lab] = run_answers(c)
        for p in c["predictions"]:
            gold.setdefault(p["item_id"], p["gold"])
    ids = [i for i in gold if all(i in preds[lab] for lab in labels)]
    frame = pd.DataFrame({"item_id": ids, "gold": [gold[i] for i in ids],
                          **{lab: [preds[lab][i] for i in ids] for lab in labels}})
    if labels:
        answers = frame[labels].to_numpy(dtype=object)
        frame["n_correct"] = (answers == frame["gold"].to_numpy(dtype=object)[:, None]).sum(axis=1).astype(int)
        same = pd.Series((answers == answers[:, :1]).all(axis=1), index=frame.index)
    else:
        frame["n_correct"] = 0
        same = pd.Series(True, index=frame.index)
    frame["status"] = "agreed, right"
    frame.loc[~same, "status"] = "disputed"
    frame.loc[frame["n_correct"] == 0, "status"] = "hard (every run wrong)"
    # a disputed item that every run still gets wrong (three-way tasks) is both; it counts as hard
    summary = pd.DataFrame([
        {"what": "items compared", "count": len(frame)},
        {"what": "disputed (the runs do not all give the same answer)", "count": int((~same).sum())},
        {"what": "hard (every run wrong)", "count": int((frame["n_correct"] == 0).sum())},
        {"what": "every run right", "count": int((frame["n_correct"] == len(labels)).sum()) if labels else 0},
    ])
    return Disagreement("item", labels, frame, summary, excluded)


def _mentions_found(runs, labels) -> pd.DataFrame:
    """Span cards: per gold mention (item, type, first and last word), whether each run found it exactly."""
    from ..metrics.spans import mentions

    gold, found = {}, {lab: set() for lab in labels}
    for lab, c in zip(labels, runs):
        seeds = seed_runs_of(c)        # a row over training seeds finds a mention more than half of its seeds find
        by_seed = [{x["item_id"]: x.get("pred") for x in r["predictions"]} for r in seeds]
        for p in c["predictions"]:
            g = set(mentions(p["gold"]))
            for m in g:
                gold[(p["item_id"], *m)] = None
            if seeds:
                k = Counter(m for s in by_seed if s.get(p["item_id"]) is not None
                            for m in g & set(mentions(s[p["item_id"]])))
                hit = {m for m, n in k.items() if 2 * n > len(seeds)}
            else:
                hit = g & set(mentions(p["pred"]))
            for m in hit:
                found[lab].add((p["item_id"], *m))
    keys = sorted(gold)
    return pd.DataFrame({"item_id": [k[0] for k in keys], "type": [k[1] for k in keys],
                         "first_word": [k[2] for k in keys], "last_word": [k[3] for k in keys],
                         **{lab: [int(k in found[lab]) for k in keys] for lab in labels}})


def _found_bits(runs, labels, found: dict) -> pd.DataFrame:
    """Relation cards: per gold item of each kind, each run's ``found`` bit (the card's ``Analysis.found``:
    kind -> the metric a run must address to be compared on it)."""
    frames = []
    for kind, metric in found.items():
        use = [(lab, c) for lab, c in zip(labels, runs)
               if addresses(c, metric) and all("found" in p for p in c["predictions"])]
        if not use:
            continue
        rows = {}
        for lab, c in use:
            for p in c["predictions"]:
                for k, bit in enumerate(p["found"].get(kind, "")):
                    rows.setdefault((p["item_id"], k), {})[lab] = int(bit)
        keys = sorted(rows)
        frames.append(pd.DataFrame({"kind": kind, "item_id": [k[0] for k in keys], "index": [k[1] for k in keys],
                                    **{lab: [rows[k].get(lab) for k in keys] for lab in labels}}))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["kind", "item_id", "index"])


def mention_disagreement(cells, card: str) -> Disagreement:
    """Span and relation cards: per gold mention / relation, which runs find it, and ``found by all`` /
    ``found by some`` / ``found by none`` (over the runs that address it)."""
    runs, excluded = compared_runs(cells)
    labels = [run_label(c) for c in runs]
    analysis = analysis_of(card)
    spans = family_of(analysis).unit == "mention"
    frame = _mentions_found(runs, labels) if spans else _found_bits(runs, labels, analysis.found)
    present = [lab for lab in labels if lab in frame]
    if present:
        got = frame[present].astype(float)
        n_runs = got.notna().sum(axis=1)
        frame["n_found"] = got.sum(axis=1).astype(int)
        frame["n_runs"] = n_runs.astype(int)
    else:
        frame["n_found"], frame["n_runs"] = 0, 0
    frame["status"] = "found by some"
    frame.loc[frame["n_found"] == frame["n_runs"], "status"] = "found by all"
    frame.loc[frame["n_found"] == 0, "status"] = "found by none"
    frame = frame[frame["n_runs"] > 0] if present else frame
    group = ["type"] if spans else ["kind"]
    summary = (frame.groupby(group + ["status"]).size().unstack("status", fill_value=0)
               .reindex(columns=["found by all", "found by some", "found by none"], fill_value=0))
    summary.loc["all"] = summary.sum()
    summary["gold"] = summary.sum(axis=1)
    if not spans:
        runs_per = frame.groupby("kind")["n_runs"].max()
        summary.insert(0, "runs", [int(runs_per.get(k, 0)) if k != "all" else "" for k in summary.index])
    summary = summary.reset_index()
    return Disagreement("mention" if spans else "relation", labels, frame, summary, excluded)


def disagreement(cells, card: str | None = None) -> Disagreement:
    """Library entry point: the disagreement of the ok runs among ``cells`` (one card and split version).
    ``card`` defaults to the cells' own."""
    cells = list(cells)
    card = card or (cells[0]["card"] if cells else None)
    if card is None or family_of(analysis_of(card)).unit == "item":  # no cells and no card: nothing disagrees
        return item_disagreement(cells)
    return mention_disagreement(cells, card)
