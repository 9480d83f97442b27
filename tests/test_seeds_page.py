"""The training-seeds sub-page and the leaderboard marks of seeded rows, on hand-built cells: the seeded table's
numbers come from the cell, two versions with the same weight-cache keys are said to share their trained
models, a card's row mark (card data) and the seeded-row note are footnotes on the row."""
from __future__ import annotations

import re

import numpy as np
from sklearn.metrics import f1_score

from atlaslib.cards import get_card
from atlaslib.metrics import seeds as S
from tests.metrics.reference import binary_metrics, binary_resampled
from atlaslib.pages import seeds as seed_page


def seeded_cell(version, preds, y, keys, marks=()):
    per_m = [binary_metrics(y, p, None, "finetune", n_resamples=100) for p in preds]
    per_r = [binary_resampled(y, p, None, "finetune", n_resamples=100) for p in preds]
    metrics = S.seeded_metrics([1, 2, 3], per_m, per_r)
    metrics["roc_auc_finetune"] = {"value": None, "ci_low": None, "ci_high": None, "reason": "labels only"}
    runs = [{"seed": s, "metrics": m, "trained_here": version == "atlas-n100-v1", "weights_key": k,
             "predictions": [{"item_id": f"i{j}", "pred": "negated" if v else "affirmed"} for j, v in enumerate(p)]}
            for s, m, k, p in zip([1, 2, 3], per_m, keys, preds)]
    recs = [{"item_id": f"i{j}", "gold": "negated" if t else "affirmed", "pred": "negated" if v else "affirmed",
             "score": None} for j, (t, v) in enumerate(zip(y, preds[0]))]
    return {"card": "negex", "version": version, "model": "enc", "protocol": "finetune", "status": "ok",
            "metrics": metrics, "seeds": {"bootstrap": 11}, "predictions": recs,
            "extra": {"seed_runs": runs, "row_marks": list(marks)}}


def test_seeds_page_and_leaderboard_marks(tmp_path):
    from atlaslib.pages.card_pages import leaderboard_markdown

    card = get_card("negex")
    rng = np.random.default_rng(1)
    y = (rng.random(80) < 0.3).astype(int)
    preds = [np.where(rng.random(80) < 0.8, y, 1 - y) for _ in range(3)]
    a = seeded_cell("atlas-n100-v1", preds, y, ["k1", "k2", "k3"], marks=["a recipe mark from card data"])
    b = seeded_cell("atlas-full-v1", preds, y, ["k1", "k2", "k3"])
    c = seeded_cell("atlas-full-v1", preds, y, ["k1", "k2", "other"])
    body = seed_page.render(card, "atlas-n100-v1", [a], [a, b])
    assert "the same trained models as that row's" in body and "`atlas-full-v1`" in body
    assert "3 training seeds (1, 2, 3); the weights of 3 of them were trained" in body
    # the row's macro F1 is the mean over the three seeds' models, its range theirs (sklearn on each seed's labels)
    per_seed = [f1_score(y, p, average="macro") for p in preds]
    assert f"{np.mean(per_seed):.3f}" in body and f"{min(per_seed):.3f} – {max(per_seed):.3f}" in body
    assert "this version has 1, so there is no pair to order" in body
    assert "same trained models" not in seed_page.render(card, "atlas-n100-v1", [a], [a, c])
    assert seed_page.render(card, "atlas-full-v1", [a], [a]) is None
    md = leaderboard_markdown(card, "atlas-n100-v1", [a], tmp_path, tmp_path)
    row = next(line for line in md.splitlines() if line.startswith("| enc"))
    assert row.count("<sup>") >= 2 and "a recipe mark from card data" in md
    assert "the mean over 3 trained models" in md


def test_maccrobat_recipe_mark_is_card_data_on_the_finetune_cell(data_dir):
    """The mark is on a fine-tuned row's cell (and no other protocol's), in the card's words."""
    from atlaslib.cards import maccrobat as mc
    from atlaslib.cards.maccrobat.runs import Outcome

    items = mc.load_items(data_dir)
    manifest = mc.split(items, "atlas-n100-v1")
    marks = {protocol: mc.outcome_parts(Outcome("enc", protocol, "atlas-n100-v1", "not_run", reason="test"), manifest,
                                     items)["extra"].get("row_marks")
             for protocol in ("finetune", "probe", "zero_shot")}
    assert marks == {"finetune": ["recipe chosen after a test score; see the protocols chapter"], "probe": None,
                     "zero_shot": None}
    assert "after a first recipe at 5e-05 had already been scored on the test items" in \
        mc.FINETUNE_RECIPE["validation"]


def test_seeds_page_keeps_three_decimals_and_explains_a_zero_width_single_seed_interval():
    """A value of 0.960 prints as 0.960 on the page (the table's cells were re-parsed as numbers and lost the
    zero); a single seed's interval of zero width says why."""
    rng = np.random.default_rng(2)
    y = (rng.random(40) < 0.3).astype(int)
    a = seeded_cell("atlas-n100-v1", [y, y, y], y, ["k1", "k2", "k3"])
    m = a["metrics"]["sensitivity_finetune"]
    m["value"], m["seeds"]["seed_min"] = 0.96, 0.92
    m["seeds"]["single_seed"].update(ci_low=1.0, ci_high=1.0)
    body = seed_page.render(get_card("negex"), "atlas-n100-v1", [a], [a])
    row = next(line for line in body.splitlines() if line.startswith("| sensitivity_finetune"))
    assert "| 0.960 " in row and "0.920 – " in row and "[1.000, 1.000] (seed 1)" in row
    assert "zero width" in row
    assert re.search(r"\| 0\.\d\d ", body) is None           # no value with two decimals anywhere on the page
