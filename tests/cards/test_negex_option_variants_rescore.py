"""A language model's NegEx zero-shot run scores answer options: each of its variant cells keeps the options it
scored and their token ids (its tokenizer's) in ``extra``, as SmolLM2's published cells do. The model made them,
so the card declares them (``Card.prediction_extra``): the run and its variant cells pass the re-score guard and
re-score to the cells as made (metrics, unit counts, predictions, extra)."""
import dataclasses
import json

import numpy as np

from atlaslib import rescore
from atlaslib.cards import negex
from atlaslib.cards.run import CardRun
from tests.rescore_check import bare

VERSION = "atlas-n100-v1"


def test_an_options_run_and_its_prompt_variant_rescore(data_dir):
    items = negex.items_from_rows(negex.load_rows(data_dir))
    manifest = negex.split(items, VERSION)
    _, test = negex.split_frames(items, manifest)
    scores = np.random.default_rng(0).uniform(0, 1, len(test))
    records = negex.predictions(test, {"pred": (scores > 0.5).astype(int), "score": scores}, data_dir)
    run = CardRun("negex", VERSION, "smollm2-135m-instruct", "zero_shot",
                  parameters={"n_resamples": 200, "run_key": "p.s"})
    parts = negex.cell_parts(run, records, manifest)
    parts["extra"] = {**(parts.get("extra") or {}), "contamination": {"may_have_seen": True}}
    cell = run.finish(**parts)
    half = records[:50]
    metrics = CardRun("negex", VERSION, "smollm2-135m-instruct", "zero_shot",
                      parameters=run.spec.parameters).score(half, n_resamples=200)
    options = {"options": [" yes", " no"], "option_token_ids": [[9805], [787]]}   # the shape SmolLM2's cells hold
    run.variant({"kind": "prompt", "name": "note-prompts", "version": "v1", "key": "note-prompts-v1"},
                metrics=metrics, predictions=negex.rounded(half), inputs_digest="0" * 64, n_items=len(test),
                n_applicable=len(test), extra=options, scored=half)
    cell, variants = json.loads(json.dumps([cell, run.variant_cells]))
    assert variants[0]["extra"] == options

    assert rescore.refusal(negex.CARD, cell, variants) is None
    again = rescore.rescored_cell(cell, "p.t")
    again_variants = json.loads(json.dumps(rescore.rescored_variants(again, variants)))
    assert bare(json.loads(json.dumps(again))) == bare(cell)
    assert [bare(v) for v in again_variants] == [bare(v) for v in variants]
    assert again_variants[0]["parent_run_key"] == "p.t"

    # what the card does not declare (a table its scoring code made) still sends the run to execute; what its
    # scoring makes of a finished cell (scored_extra) is made anew for the run's cell, not a variant's: refused there
    scoring = dataclasses.replace(negex.CARD, scored_extra={"report": lambda c: {}})
    assert rescore.refusal(scoring, {**cell, "extra": {**cell["extra"], "report": {}}}, variants) is None
    variants[0]["extra"]["report"] = {}
    assert "report" in rescore.refusal(scoring, cell, variants)
    variants[0]["extra"]["reproduction_rows"] = []
    assert "reproduction_rows" in rescore.refusal(negex.CARD, cell, variants)
