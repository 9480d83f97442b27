"""What a MACCROBAT run's result cell holds (:func:`cell_parts`, handed to :class:`atlaslib.cards.run.CardRun`):
its run spec, the split and data it used, and per prediction the sentence's position in its case report (the
fields :data:`SLICES` reads)."""
from __future__ import annotations

from typing import Sequence

import pandas as pd

from ...splits import SplitManifest
from .card import BOOTSTRAP_RESAMPLES, FINETUNE_RECIPE, FINETUNE_ROW_MARK, SEED, SHA256SUMS_DIGEST, TYPES
from .data import reproduction_rows
from .runs import Outcome, last_outcome

POSITIONS = ("first third", "middle third", "last third")


def report_positions(items: pd.DataFrame, item_ids: Sequence[str]) -> list[dict]:
    """Per item: ``sent_index`` (0-based line of the report), ``report_sentences`` (its report's sentences)
    and ``report_position``: first / middle / last third, by ``3 * sent_index // report_sentences``."""
    per_doc, idx = items.groupby("document")["item_id"].size(), items.set_index("item_id")
    rows = [(int(idx.at[i, "sent_index"]), int(per_doc[idx.at[i, "document"]])) for i in item_ids]
    return [{"sent_index": s, "report_sentences": n, "report_position": POSITIONS[min(2, 3 * s // n)]}
            for s, n in rows]


def cell_parts(card_run, records, manifest: SplitManifest, *, audit: dict | None = None,
               leakage: dict | None = None) -> dict:
    """:meth:`CardRun.finish <atlaslib.cards.run.CardRun.finish>`'s arguments for what the contract's ``predict``
    gave (``records``, None: the run did not happen), the notebook's and :func:`atlaslib.cards.run.run`'s alike:
    the records scored by the run (:meth:`CardRun.score <atlaslib.cards.run.CardRun.score>`) and the rest of the
    run's cell from its outcome (:func:`outcome_parts`)."""
    out, items = last_outcome(card_run)
    return outcome_parts(out, manifest, items, metrics=None if records is None else card_run.score(records),
                         audit=audit, leakage=leakage)


def outcome_parts(out: Outcome, manifest: SplitManifest, items: pd.DataFrame, *, metrics: dict | None = None,
                  audit: dict | None = None, leakage: dict | None = None) -> dict:
    """What the run's result cell holds beyond its spec: the profile and capability the run used (its overlap
    mark: ``finish``'s, by the card's rule), the split, data and seeds; for a run that happened the metrics
    (``metrics``: the run's ``CardRun.score``; else :meth:`Outcome.metrics`, the same engine), per-item
    predictions (with their position in the case report). ``audit`` adds the reproduction
    rows of the corpus audit, ``leakage`` the gold-cut measure of a probe run. A run that did not happen carries
    its ``reason``."""
    test = items.set_index("item_id").loc[manifest.test]
    mentions = [m[0] for ms in test["mentions"] for m in ms]
    extra = dict(out.llm)   # a language model's contamination mark and memorisation probe
    if audit is not None:
        extra["reproduction_rows"] = reproduction_rows(audit)
    if leakage is not None:
        extra["gold_cut_leakage"] = leakage
    if out.protocol == "finetune":
        extra["row_marks"] = [FINETUNE_ROW_MARK]
    parts = dict(split=manifest.cell(test_label_counts={t: mentions.count(t) for t in TYPES},
                                     test_reports=int(test["document"].nunique())),
                 data_sha256={"maccrobat/SHA256SUMS (400 brat files)": SHA256SUMS_DIGEST},
                 seeds={"split": SEED, "bootstrap": SEED, "bootstrap_resamples": BOOTSTRAP_RESAMPLES,
                        **({"finetune": FINETUNE_RECIPE["seeds"]} if out.protocol == "finetune" else {})},
                 profile=out.profile, capability=out.capability, details=out.details, extra=extra)
    if out.status != "ok":
        return dict(parts, reason=out.reason)
    preds = out.records()   # the contract's record shape (item_id, gold, pred, score, document)
    for row, native in zip(preds, out.native):
        row["native"] = native
    for row, pos in zip(preds, report_positions(items, out.item_ids)):
        row.update(pos)
    metrics = out.metrics() if metrics is None else metrics   # (scores each seed when the CardRun did not)
    if out.seed_runs:
        extra["seed_runs"] = seed_run_records(out)
    return dict(parts, metrics=metrics, predictions=preds, extra=extra)


def per_type_table(cell: dict) -> pd.DataFrame:
    """The run page's per-type table, from the run's result cell alone (its ``extra.per_type``,
    :func:`.counting.per_type`): per entity type its gold support and precision / recall / F1 with their intervals;
    for a run that did not happen, why."""
    if cell["status"] != "ok":
        return pd.DataFrame({"status": [f"not run: {cell.get('reason')}"]})
    cols = [(f"{k}{end}", k, x) for k in ("precision", "recall", "f1")
            for end, x in (("", "value"), ("_low", "ci_low"), ("_high", "ci_high"))]
    return pd.DataFrame([{"type": t, "support": e["support"], **{c: e[k][x] for c, k, x in cols}}
                         for t, e in cell["extra"]["per_type"].items()]).set_index("type")


def seed_run_records(out: Outcome) -> list[dict]:
    """The cell's ``seed_runs``: per training seed its seed, its metrics and per-unit counts (as the run's CardRun
    scored them), its training record's weight-cache key, weights checksum and seconds, and its tags per test
    sentence."""
    rows = []
    for r in out.seed_runs:
        d = r["details"]
        cache = d.get("weight_cache") or {}
        rows.append({"seed": r["seed"], "metrics": r.get("metrics") or {}, "unit_counts": r.get("unit_counts"),
                     "trained_here": bool(d.get("trained_here")), "weights_key": cache.get("key"),
                     "weights_sha256": cache.get("weights_sha256"),
                     "training_seconds": (d.get("training") or {}).get("seconds"),
                     "predictions": [{"item_id": i, "pred": p} for i, p in zip(out.item_ids, r["pred"])]})
    return rows
