"""An outside system's NegEx answers are made into records by the family (its items carry the card's slice fields)
and into cell parts by the card's own ``cell_parts``: the records a run's cell holds for the same answers
(:func:`negex.predictions`: item id, gold, pred, score, sentence key, slice fields; a sentence without a trigger
keeps ``trigger_gap`` None, never NaN) and the card's split, data hash and seeds."""
import numpy as np

from atlaslib.cards import negex
from atlaslib.cards.run import CardRun
from atlaslib.predfiles import Pred

VERSION = "atlas-n100-v1"


def test_outside_answers_give_a_runs_records_and_parts(data_dir):
    s = negex.outside_split(VERSION, "test", data_dir)
    manifest = s.context["manifest"]
    _, test = negex.split_frames(negex.items_from_rows(negex.load_rows(data_dir)), manifest)
    scores = np.random.default_rng(0).uniform(0, 1, len(test))
    preds = [Pred(k + 1, i, negex.LABELS[int(x > 0.5)], float(x)) for k, (i, x) in enumerate(zip(test["item_id"], scores))]
    profile = {"name": "outside", "revision": "sha256:0", "trained_on": []}
    parts = negex.outside_cell_parts(s, preds[::-1], profile, "zero_shot", "k", 100, data_dir)

    run = CardRun("negex", VERSION, "outside", "zero_shot", parameters={"n_resamples": 100})
    own = negex.cell_parts(run, negex.predictions(test, {"pred": (scores > 0.5).astype(int), "score": scores},
                                                  data_dir), manifest)
    assert parts["predictions"] == own["predictions"]
    assert any(r["trigger_gap"] is None for r in parts["predictions"])
    assert all(type(r["trigger_gap"]) is int for r in parts["predictions"] if r["trigger_gap"] is not None)
    assert {k: parts[k] for k in ("split", "data_sha256", "seeds")} == {k: own[k] for k in ("split", "data_sha256", "seeds")}
    assert parts["metrics"] == own["metrics"]
