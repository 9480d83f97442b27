"""An outside system's labels on the NLI challenge (``atlas score``) are scored by the card's own run path: the
contract's ``predict`` with the labels as the predictor and the card's ``cell_parts``. Reference: the challenge's
library call on the same labels."""
import json

from atlaslib.cards import nli_negation as nn
from atlaslib.external.score import score


def test_an_outside_systems_cell_is_the_cards_run_of_its_labels(tmp_path):
    cases = nn.version_cases("openmed-builtin-v1")
    labels = (["entailment", "neutral", None, "contradiction"] * 2)[:len(cases)]
    f = tmp_path / "p.jsonl"
    f.write_text("".join(json.dumps({"item_id": c.case_id, "label": lab or "abstention"}) + "\n"
                         for c, lab in zip(cases, labels)))
    cell = score("nli_negation", "openmed-builtin-v1", f, "mysys").cell
    assert cell["extra"]["report"] == json.loads(nn.run_nli_negation_challenge(labels, cases=cases).to_json())
    assert [r["pred"] for r in cell["predictions"]] == [lab or "abstention" for lab in labels]
    params, profile = cell["spec"]["parameters"], cell["spec"]["profile"]
    assert params["predictions_sha256"] == profile["revision"] and profile["name"] == "mysys"
    assert (params["max_false_entailment_rate"], params["minimum_aggregate_accuracy"]) == (0.0, 0.5)
    assert cell["spec"]["capability"] == "external predictions" and cell["split"]["n_test"] == len(cases)
