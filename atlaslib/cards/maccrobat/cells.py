"""What a MACCROBAT run's result cell holds (:func:`cell_parts`, handed to :class:`atlaslib.cards.run.CardRun`): its run spec, the split and data it used, and per
prediction the sentence's position in its case report (the fields :data:`SLICES` reads)."""
from __future__ import annotations

from typing import Sequence

import pandas as pd

from ...splits import SplitManifest
from .card import BOOTSTRAP_RESAMPLES, FINETUNE_RECIPE, FINETUNE_ROW_MARK, SEED, SHA256SUMS_DIGEST, TYPES
from .data import reproduction_rows
from .runs import Outcome

def report_positions(items: pd.DataFrame, item_ids: Sequence[str]) -> list[dict]:
    """Per item: ``sent_index`` (0-based line of the report), ``report_sentences`` (its report's sentences)
    and ``report_position``: first / middle / last third, by ``3 * sent_index // report_sentences``."""
    per_doc = items.groupby("document")["item_id"].size()
    idx = items.set_index("item_id")
    out = []
    for i in item_ids:
        doc, s = idx.at[i, "document"], int(idx.at[i, "sent_index"])
        n = int(per_doc[doc])
        out.append({"sent_index": s, "report_sentences": n,
                    "report_position": ("first third", "middle third", "last third")[min(2, 3 * s // n)]})
    return out


def cell_parts(card_run, records, manifest: SplitManifest, *, audit: dict | None = None,
               leakage: dict | None = None) -> dict:
    """:meth:`CardRun.finish <atlaslib.cards.run.CardRun.finish>`'s arguments for what the contract's ``predict``
    gave (``records``, None: the run did not happen), the notebook's and :func:`atlaslib.cards.run.run`'s alike:
    the records scored by the run (:meth:`CardRun.score <atlaslib.cards.run.CardRun.score>`) and the rest of the
    run's cell from its outcome (:func:`outcome_parts`)."""
    from .runs import last_outcome

    out, items = last_outcome(card_run)
    metrics = None if records is None else card_run.score(records)
    return outcome_parts(out, manifest, items, metrics=metrics, audit=audit, leakage=leakage)


def outcome_parts(out: Outcome, manifest: SplitManifest, items: pd.DataFrame, *, metrics: dict | None = None,
                  audit: dict | None = None, leakage: dict | None = None) -> dict:
    """What the run's result cell holds beyond its spec (:meth:`atlaslib.cards.run.CardRun.finish`'s
    arguments): the profile and capability the run used (its overlap mark: ``finish``'s, by the card's rule), the
    split and data and seeds;
    for a run that happened the metrics (``metrics``: the notebook's, from ``CardRun.score``; else
    :meth:`Outcome.metrics`, the same engine), per-item predictions (with their position in the case report)
    and per-type scores. ``audit`` adds the reproduction rows of the corpus audit, ``leakage`` the gold-cut
    measure of a probe run. A run that did not happen carries its ``reason`` (recorded by ``finish`` as the
    run's not-run reason)."""
    test = items.set_index("item_id").loc[manifest.test]
    split_info = manifest.cell(test_label_counts={t: int(sum(1 for ms in test["mentions"] for m in ms if m[0] == t))
                                                  for t in TYPES},
                               test_reports=int(test["document"].nunique()))
    extra = dict(out.llm)   # a language model's contamination mark and memorisation probe
    if audit is not None:
        extra["reproduction_rows"] = reproduction_rows(audit)
    if leakage is not None:
        extra["gold_cut_leakage"] = leakage
    if out.protocol == "finetune":
        extra["row_marks"] = [FINETUNE_ROW_MARK]
    parts = dict(split=split_info, data_sha256={"maccrobat/SHA256SUMS (400 brat files)": SHA256SUMS_DIGEST},
                 seeds={"split": SEED, "bootstrap": SEED, "bootstrap_resamples": BOOTSTRAP_RESAMPLES,
                        **({"finetune": FINETUNE_RECIPE["seeds"]} if out.protocol == "finetune" else {})},
                 profile=out.profile, capability=out.capability, details=out.details,
                 extra=extra)
    if out.status != "ok":
        return dict(parts, reason=out.reason)
    per_type = {t: {k: e[k] for k in ("precision", "recall", "f1")} | {"support": e["support"]}
                for t, e in out.per_type_scores().items()}
    preds = out.records()   # the contract's record shape (item_id, gold, pred, score, document)
    for row, native in zip(preds, out.native):
        row["native"] = native
    for row, pos in zip(preds, report_positions(items, out.item_ids)):
        row.update(pos)
    extra = {"per_type": per_type, "bootstrap": "cluster by document (case report)", **extra}
    metrics = out.metrics() if metrics is None else metrics   # (scores each seed when the CardRun did not)
    if out.seed_runs:
        extra["seed_runs"] = seed_run_records(out)
    return dict(parts, metrics=metrics, predictions=preds, extra=extra)


def seed_run_records(out: Outcome) -> list[dict]:
    """The cell's ``seed_runs``: per training seed its seed, its metrics with their item intervals (whole case
    reports resampled) and its per-unit counts (as they were scored: by the run's CardRun, which fills them in
    when it writes the cell, or by :meth:`Outcome.metrics`), its tags per test sentence and its weight-cache key
    and weights checksum."""
    rows = []
    for r in out.seed_runs:
        cache = r["details"].get("weight_cache") or {}
        rows.append({"seed": r["seed"], "metrics": r.get("metrics") or {}, "unit_counts": r.get("unit_counts"),
                     "trained_here": bool(r["details"].get("trained_here")),
                     "weights_key": cache.get("key"), "weights_sha256": cache.get("weights_sha256"),
                     "training_seconds": (r["details"].get("training") or {}).get("seconds"),
                     "predictions": [{"item_id": i, "pred": p} for i, p in zip(out.item_ids, r["pred"])]})
    return rows
