"""The card contract (see :mod:`atlaslib.cards`) for NegEx, a card of the binary-items family (:mod:`.family`):
:func:`load_items` (:mod:`.data`), :func:`split` (:mod:`.splitting`), :func:`counts` (the family's), and thin
entry points over :func:`.data.audit` and the notebook's own calls (:func:`predict`, :func:`cell_parts`), so
:func:`atlaslib.cards.run.run` and the notebook run one path; the records are scored by :meth:`CardRun.score
<atlaslib.cards.run.CardRun.score>` (the card has no ``score``)."""
from __future__ import annotations

import pandas as pd

from ... import splits as _splits
from .card import ANNOTATIONS, FINETUNE_RECIPE, LABELS, POSITIVE, SEED
from .cells import rounded, scored_records, seed_run_records
from .counting import SCORING
from .data import audit, load_items, load_rows  # noqa: F401  (load_items: the card contract)
from .family import FAMILY, counts  # noqa: F401  (counts: the card contract)
from .runs import run_protocol
from .splitting import split, split_frames  # noqa: F401  (split: the card contract)


def audit_items(items: pd.DataFrame, data_dir=None) -> dict:
    """Contract entry point over :func:`audit` (which also needs the kit's raw rows): the counts of its
    tables as plain data (rows and items per decision, rows dropped, sentences over 300 characters)."""
    full = audit(load_rows(data_dir), items)
    n = full["counts"]
    return {"n_items": int(len(items)), "n_rows": int(n["rows"].sum()),
            "items_by_decision": {k: int(v) for k, v in n["items"].items()},
            "dropped_rows": int(len(full["dropped"])), "long_sentences": full["long_sentences"]}


def predict(items: pd.DataFrame, manifest: _splits.SplitManifest, model: str, protocol: str, *, data_dir=None,
            load=None, **options) -> list[dict] | dict[int, list[dict]]:
    """The notebook's calls on ``manifest``'s split: :func:`.runs.run_protocol`, then the run's records
    (:func:`.cells.predictions` at full precision: ``gold`` / ``pred`` the decision words, ``score`` = P(negated)
    or None, ``sentence_key`` and the slice fields) as :func:`.cells.scored_records` gives them to
    :meth:`CardRun.score <atlaslib.cards.run.CardRun.score>`: for a fine-tune ``{training seed: records}`` in the
    recipe's order. :class:`atlaslib.cards.NotRun` when the run cannot happen; ``load``: the run's
    :meth:`CardRun.load <atlaslib.cards.run.CardRun.load>`."""
    train, test = split_frames(items, manifest)
    out = run_protocol(model, protocol, train, test, data_dir=data_dir, load=load, **options)
    return scored_records(test, out, data_dir=data_dir)


def cell_parts(card_run, records, manifest, *, out: dict | None = None, repro: pd.DataFrame | None = None) -> dict:
    """:meth:`CardRun.finish <atlaslib.cards.run.CardRun.finish>`'s arguments, one call on both paths:
    :func:`atlaslib.cards.run.run` hands the contract's records (:func:`.contract.predict`) and the split's
    manifest, the notebook the same records and also its run's outcome ``out`` (:func:`.runs.run_protocol`) and
    reproduction table. The family's parts (:meth:`~atlaslib.cards.families.TaskFamily.cell_parts`: the metrics
    scored by ``card_run``, the records; ``records`` None: the run did not happen) with the cell's predictions at
    six digits (the unit counts keep the scores the metrics read), the split with its exclusions and test label
    counts, the pinned kit's sha256 (verified when the items were loaded) and the seeds; with ``out`` also what
    only the run holds: the adapter's profile, capability and details, a language model's facts, each training
    seed's weights and answers, and the reproduction table (assertion systems on atlas-full-v1). The overlap
    marker and the unit counts are :meth:`~atlaslib.cards.run.CardRun.finish`'s; the confusion matrix is read
    from the cell (:mod:`atlaslib.analysis.confusion`)."""
    from .reproduction import reproduction_rows

    parts = FAMILY.cell_parts(card_run, records, manifest)
    first = (next(iter(records.values())) if isinstance(records, dict) else records) or []
    gold = [r["gold"] for r in first]
    parts["split"] = manifest.cell(n_excluded=len(manifest.excluded), **(
        {"test_label_counts": {k: gold.count(k) for k in (POSITIVE, *(x for x in LABELS if x != POSITIVE))}}
        if first else {}))
    parts["data_sha256"] = {ANNOTATIONS.name: ANNOTATIONS.sha256}
    parts.setdefault("seeds", {"split": SEED, "bootstrap": SCORING.resampling.seed, **(
        {"finetune": FINETUNE_RECIPE["seeds"]} if card_run.spec.protocol == "finetune" else {})})
    if first:
        parts["predictions"] = rounded(first)
    if out is None:
        return parts
    extra = dict(out.get("llm") or {})
    if out.get("seed_runs") and first:
        extra["seed_runs"] = seed_run_records([r["item_id"] for r in first], out)
    if repro is not None:
        extra["reproduction"] = repro.reset_index().to_dict(orient="records")
        extra["reproduction_rows"] = reproduction_rows(repro, card_run.spec.model)
    return dict(parts, profile=out["profile"], capability=out["capability"], details=out["details"], extra=extra)
