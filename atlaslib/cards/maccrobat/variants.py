"""The MACCROBAT card's variant runs (:mod:`atlaslib.variants`): a run, again under each of the card's
perturbations (``PERTURBATIONS``), with the model and whatever the run trained (the probe's classifier, the
fine-tuned encoder, the memorised phrases) as they are. A fine-tuned row runs every training seed's model under
each perturbation: its variant cell is a row over the same seeds, as its default run's cell is."""
from __future__ import annotations

import pandas as pd

from ... import results
from ...phases import side
from ...splits import SplitManifest
from ...variants import inputs_sha256
from .card import BOOTSTRAP_RESAMPLES, PERTURBATIONS
from .cells import report_positions, seed_run_records
from .perturbations import perturbed_items
from .runs import Outcome


@side
def run_variants(card_run, out: Outcome, items: pd.DataFrame, manifest: SplitManifest, *,
                 n_resamples: int = BOOTSTRAP_RESAMPLES) -> list[dict]:
    """The variant cells of the finished run ``card_run`` (its :class:`~atlaslib.cards.run.CardRun`, which makes
    them and writes them beside the run's cell) whose outcome is ``out``: one per perturbation that applies to
    some test sentence, its predictions and metrics (scored by ``card_run``) over those sentences. None for a run
    that did not happen."""
    if out.status != "ok" or out.predict_seeds is None or card_run.cell.get("status") != "ok":
        return []
    test = items.set_index("item_id").loc[manifest.test].reset_index()
    made = []
    for p in PERTURBATIONS:
        frame = perturbed_items(test, p, card_run.cell["version"])
        if not len(frame):
            continue
        with results.Timer() as timer:
            words = frame["words"].tolist()
            by_seed = out.predict_seeds(words)
            v = Outcome(model=out.model, protocol=out.protocol, version=out.version, status="ok",
                        item_ids=frame["item_id"].tolist(), documents=frame["document"].tolist(),
                        gold=[list(t) for t in frame["tags"]], pred=[list(t) for t in by_seed[0][1]],
                        n_resamples=n_resamples, seed_runs=[{"seed": s, "pred": [list(x) for x in t], "details": {}}
                                                            for s, t in by_seed] if out.seed_runs else [])
            metrics = v.metrics(card_run)   # through the run's CardRun (finished: its own numbers are written)
            recs = [dict(r, **pos) for r, pos in zip(v.records(), report_positions(items, v.item_ids))]
        made.append(card_run.variant(p.spec(), metrics=metrics, predictions=recs, inputs_digest=inputs_sha256(words),
                                     n_items=len(test), n_applicable=frame.attrs["n_applicable"], timing=timer.timing,
                                     extra={"seed_runs": seed_run_records(v)} if v.seed_runs else {}))
    card_run.write_variants()
    return made
