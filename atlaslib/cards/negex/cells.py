"""A NegEx run's records, as its result cell holds them (:func:`.contract.cell_parts`): per-item predictions with
their slice fields (:data:`SLICES`, :func:`item_slices`) and rule evidence, and each training seed's."""
from __future__ import annotations

import re

import pandas as pd

from ...sources import resolve
from .card import LABELS, TRIGGERS
from .data import HEADER_RE, clean, find_target

_WORD_RE = re.compile(r"\w+")


def negation_triggers(data_dir=None) -> list[str]:
    """The kit's negation trigger phrases ([PREN] and [POST] lines of the pinned ``negex_triggers.txt``)."""
    from ...models.rules import parse_negex_triggers

    path = resolve(TRIGGERS, data_dir)
    with open(path, encoding="utf-8", newline="") as fh:
        tags = parse_negex_triggers(fh.read(), str(path))
    return tags["[PREN]"] + tags["[POST]"]


def _trigger_regex(triggers) -> re.Pattern:
    alts = sorted({t.casefold() for t in triggers if t.strip()}, key=len, reverse=True)
    return re.compile(r"(?<!\w)(?:" + "|".join(re.escape(t) for t in alts) + r")(?!\w)", re.IGNORECASE)


def item_slices(test: pd.DataFrame, triggers=None, data_dir=None) -> list[dict]:
    """Slice fields per test item, read off the cleaned sentence and its target (:func:`find_target`):

    - ``section``: the last report header (:data:`HEADER_RE`, as the audit finds them) that ends before the
      target, else None;
    - ``sentence_words``: words (``\\w+`` runs) in the sentence;
    - ``n_concepts``: items of the kit sharing the sentence (its ``sentence_key``);
    - ``trigger_side`` / ``trigger_gap``: where the nearest kit negation trigger (:func:`negation_triggers`,
      whole-word, case-insensitive, not overlapping the target; nearest by words between) lies relative to
      the target (``before`` / ``after``) and how many words lie between them; None when the sentence has
      none. This is position only, with no scope rules: which trigger a rule system used is in ``evidence``.
    """
    pattern = _trigger_regex(negation_triggers(data_dir) if triggers is None else triggers)
    n_concepts = (test["n_concepts"] if "n_concepts" in test
                  else test.groupby("sentence_key")["sentence_key"].transform("size"))
    rows = []
    for sentence, concept, key, nc in zip(test["sentence"], test["concept"], test["sentence_key"], n_concepts):
        s = clean(sentence)
        a, b = find_target(s, concept) or (0, 0)
        headers = [m for m in HEADER_RE.finditer(s) if m.end() <= a]
        best = None
        for m in pattern.finditer(s):
            if m.start() < b and m.end() > a:
                continue
            side, gap_text = ("before", s[m.end():a]) if m.end() <= a else ("after", s[b:m.start()])
            gap = len(_WORD_RE.findall(gap_text))
            if best is None or gap < best[1]:
                best = (side, gap)
        rows.append({"sentence_key": key, "section": headers[-1].group(1) if headers else None,
                     "sentence_words": len(_WORD_RE.findall(s)), "n_concepts": int(nc),
                     "trigger_side": best[0] if best else None, "trigger_gap": best[1] if best else None})
    return rows


def predictions(test: pd.DataFrame, out: dict, data_dir=None) -> list[dict]:
    """Per-item records of a run (labels as words, score = P(negated) at full precision, as the metrics read it,
    or None), with the item's ``sentence_key`` and slice fields (:func:`item_slices`, :data:`SLICES`) and, for
    rule systems whose adapter records it, ``evidence``: the trigger behind the decision (text, category,
    character span in the unmarked sentence the rule system saw) or None for no trigger in scope. The cell
    stores them :func:`rounded`."""
    scores = out.get("score")
    native = out.get("native")
    by_text = getattr(out.get("adapter"), "evidence_by_text", None) or {}
    evidence = [by_text[t] for t in test["text"]] if all(t in by_text for t in test["text"]) else None
    slices = item_slices(test, data_dir=data_dir)
    rows = []
    for i, (iid, gold, pred) in enumerate(zip(test["item_id"], test["decision"], out["pred"])):
        row = {"item_id": iid, "gold": gold, "pred": LABELS[int(pred)],
               "score": None if scores is None else float(scores[i])}
        if native is not None:
            row["native"] = native[i]
        row.update(slices[i])
        if evidence is not None:
            row["evidence"] = evidence[i]
        rows.append(row)
    return rows


def rounded(records: list[dict], digits: int = 6) -> list[dict]:
    """``records`` (:func:`predictions`) with their scores rounded as the cell stores them."""
    return [dict(r, score=round(r["score"], digits)) if r.get("score") is not None else r for r in records]


def scored_records(test: pd.DataFrame, out: dict, full: list[dict] | None = None, data_dir=None):
    """What the run's :meth:`~atlaslib.cards.run.CardRun.score` scores (the contract's ``predict`` and the notebook
    alike): ``full`` (the run's :func:`predictions`; built here when None) or, for a fine-tuned row over training
    seeds (``out["seed_runs"]``), ``{seed: records}`` in the recipe's order, each seed's prediction and score in
    place."""
    full = predictions(test, out, data_dir) if full is None else full
    if not out.get("seed_runs"):
        return full
    return {r["seed"]: [dict(row, pred=LABELS[int(p)], score=float(sc))
                        for row, p, sc in zip(full, r["pred"], r["score"])] for r in out["seed_runs"]}


def seed_run_records(ids, out: dict) -> list[dict]:
    """The cell's ``seed_runs``: per training seed its seed, its metrics with their item intervals and its per-unit
    counts (filled by :meth:`CardRun.finish <atlaslib.cards.run.CardRun.finish>` from the run's score), its
    predictions and scores (P(negated)) on the test items ``ids``, and its weight-cache key and weights checksum."""
    rows = []
    for r in out["seed_runs"]:
        cache = r["details"].get("weight_cache") or {}
        rows.append({"seed": r["seed"], "metrics": r.get("metrics") or {}, "unit_counts": r.get("unit_counts"),
                     "trained_here": bool(r["details"].get("trained_here")),
                     "weights_key": cache.get("key"), "weights_sha256": cache.get("weights_sha256"),
                     "training_seconds": (r["details"].get("training") or {}).get("seconds"),
                     "predictions": [{"item_id": i, "pred": LABELS[int(p)], "score": round(float(s), 6)}
                                     for i, p, s in zip(ids, r["pred"], r["score"])]})
    return rows
