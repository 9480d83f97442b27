"""A row trained with several seeds: its slices and calibration are the mean over its seeds' models with the
leaderboard's two-level interval (hand-made predictions of three seeds, scikit-learn per seed, the two-level
bootstrap written out here); one "other" row per slice table."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import brier_score_loss, f1_score

from atlaslib.analysis import calibration as C
from atlaslib.analysis import slices as S
from atlaslib.metrics import bootstrap

from .cells import negex_cell

SEEDS = (11, 12, 13)
N, B = 90, 200


def _seeded(with_scores=(True, True, True)):
    """A NegEx probe row over three training seeds: the cell keeps the first seed's records (gold, slice fields),
    ``extra.seed_runs`` every seed's answers and scores."""
    rng = np.random.default_rng(5)
    gold = ["negated" if v else "affirmed" for v in rng.integers(0, 2, N)]
    section = ["HISTORY"] * 50 + ["PLAN"] * 30 + ["RARE"] * 10
    everything = ["all"] * N
    runs = []
    for k, sd in enumerate(SEEDS):
        right = rng.random(N) < (0.75, 0.85, 0.95)[k]
        pred = [g if r else ("affirmed" if g == "negated" else "negated") for g, r in zip(gold, right)]
        p_neg = np.clip(np.where(np.array(pred) == "negated", 0.7, 0.3) + rng.normal(0, 0.15, N), 0.01, 0.99)
        runs.append({"seed": sd, "predictions": [
            {"item_id": f"i{i:02d}", "pred": pred[i], "score": float(p_neg[i]) if with_scores[k] else None}
            for i in range(N)]})
    first = runs[0]["predictions"]
    c = negex_cell("enc", gold, [r["pred"] for r in first], score=[r["score"] for r in first],
                   section=section, everything=everything)
    c["spec"]["protocol"] = c["protocol"] = "finetune"
    c["spec"]["parameters"] = {"n_resamples": B}
    c["extra"] = {"seed_runs": runs}
    return c, gold, runs, np.array(section)


def _two_level(per_seed_resamples: np.ndarray) -> tuple[float, float]:
    """The leaderboard's two-level interval written out: the seeds drawn with replacement (numpy's generator with
    the atlas's default seed, ``S`` draws per resample), the mean of the drawn seeds' values on each item
    resample, its 2.5th–97.5th percentiles."""
    s = per_seed_resamples.shape[1]
    draws = np.random.default_rng(bootstrap.DEFAULT_SEED).integers(0, s, size=(per_seed_resamples.shape[0], s))
    t = np.take_along_axis(per_seed_resamples, draws, axis=1).mean(1)
    return tuple(np.quantile(t[np.isfinite(t)], [0.025, 0.975]))


def _y_p(gold, recs, mask):
    y = np.array([g == "negated" for g in gold], int)[mask]
    p = np.array([r["pred"] == "negated" for r in recs], int)[mask]
    return y, p


def test_a_seeded_rows_slice_is_the_mean_over_its_seeds_with_the_two_level_interval():
    c, gold, runs, section = _seeded()
    spec = {"section header": {"field": "section"}}
    t = S.slice_table([c], "negex", spec)
    rows = t[(t.metric == "macro_f1")].set_index("group")
    assert set(t["run"]) == {"enc (finetune, mean over 3 seeds)"}          # never "seed 11's model of 3"
    for group in ("HISTORY", "PLAN"):
        mask = section == group
        per = [f1_score(*_y_p(gold, r["predictions"], mask), average="macro") for r in runs]
        row = rows.loc[group]
        assert row["n"] == mask.sum()
        assert row["value"] == pytest.approx(np.mean(per))
        assert row["value"] != pytest.approx(per[0])                       # not the first seed's model
        y = np.array([g == "negated" for g in gold], int)[mask]
        idx = bootstrap.stratified_indices(y, B, 7)                        # the cell's bootstrap seed, the group's items
        res = np.stack([[f1_score(y[i], _y_p(gold, r["predictions"], mask)[1][i], average="macro") for i in idx]
                        for r in runs], axis=1)
        assert (row["ci_low"], row["ci_high"]) == pytest.approx(_two_level(res))
        for sd, v in zip(SEEDS, per):                                      # every seed's figure beside it
            assert f"{sd}: {v:.3f} [" in row["per_seed"]
    rare = rows.loc["RARE"]
    mask = section == "RARE"
    per = [f1_score(*_y_p(gold, r["predictions"], mask), average="macro", labels=[0, 1], zero_division=0)
           for r in runs]
    assert rare["value"] == pytest.approx(np.mean(per)) and pd.isna(rare["ci_low"])
    assert rare["note"].startswith("too few items (10 < 20)")


def test_a_slice_of_every_item_is_the_leaderboard_row():
    """One group holding every item is the row itself: the figure and interval are the leaderboard's, from the
    same engine that writes the cell's metrics (:func:`atlaslib.metrics.seeds.score_seeds`)."""
    import atlaslib.cards.negex as negex
    from atlaslib.metrics.seeds import score_seeds

    c, gold, runs, _ = _seeded()
    t = S.slice_table([c], "negex", {"all items": {"field": "everything"}})
    row = t[t.metric == "macro_f1"].iloc[0]
    own = {r["item_id"]: r for r in c["predictions"]}
    records = [[{**own[x["item_id"]], **x} for x in r["predictions"]] for r in runs]
    metrics, _ = score_seeds(negex, records, list(SEEDS), "finetune", seed=7, n_resamples=B)
    board = metrics["macro_f1_finetune"]
    assert (row["value"], row["ci_low"], row["ci_high"]) == pytest.approx(
        (board["value"], board["ci_low"], board["ci_high"]))


def test_a_row_of_one_model_is_unchanged_beside_a_seeded_one():
    c, gold, runs, section = _seeded()
    other = negex_cell("rules", gold, [r["pred"] for r in runs[2]["predictions"]], section=list(section))
    spec = {"section header": {"field": "section"}}
    alone = S.slice_table([other], "negex", spec)
    both = S.slice_table([other, c], "negex", spec)
    mine = both[both.run == "rules (zero_shot)"][list(alone.columns)].reset_index(drop=True)
    pd.testing.assert_frame_equal(mine, alone)
    assert "per_seed" not in alone.columns


def _ece(y, s, bins=10):
    """Equal-mass ECE by hand: items sorted by score, ten consecutive bins (numpy's array_split)."""
    o = np.argsort(s, kind="stable")
    return sum(abs(y[o][b].sum() - s[o][b].sum()) for b in np.array_split(np.arange(len(y)), bins)) / len(y)


def test_a_seeded_rows_calibration_is_the_mean_over_its_seeds():
    c, gold, runs, _ = _seeded()
    row = C.calibration_table([c]).iloc[0]
    assert row["run"] == "enc (finetune, mean over 3 seeds)" and row["note"] == ""
    y = np.array([g == "negated" for g in gold], float)
    scores = [np.array([x["score"] for x in r["predictions"]]) for r in runs]
    briers = [brier_score_loss(y, s) for s in scores]
    eces = [_ece(y, s) for s in scores]
    assert row["brier"] == pytest.approx(np.mean(briers)) and row["ece"] == pytest.approx(np.mean(eces))
    idx = bootstrap.stratified_indices(y.astype(int), B, 7)
    b_res = np.stack([[brier_score_loss(y[i], s[i]) for i in idx] for s in scores], axis=1)
    e_res = np.stack([[_ece(y[i], s[i]) for i in idx] for s in scores], axis=1)
    assert (row["brier_low"], row["brier_high"]) == pytest.approx(_two_level(b_res))
    assert (row["ece_low"], row["ece_high"]) == pytest.approx(_two_level(e_res))
    assert row["ece_debiased"] == pytest.approx(row["ece"] - row["ece_if_calibrated"])
    for sd, v in zip(SEEDS, briers):
        assert f"{sd}: {v:.3f} [" in row["brier_seeds"]
    diagram = C.seeded_reliability(c)
    assert diagram["observed_rate"].tolist() == pytest.approx(
        np.mean([C.reliability(y, s)["observed_rate"] for s in scores], axis=0))


def test_a_seed_without_scores_is_named_not_left_out():
    c, *_ = _seeded(with_scores=(True, False, True))
    row = C.calibration_table([c]).iloc[0]
    assert row["brier"] is None or np.isnan(row["brier"])
    assert row["note"] == "n/a (the records of seed 12 of 3 carry no scores)"


def test_one_other_row_when_the_top_rule_and_small_groups_both_pool():
    """NegEx's section header keeps its 8 most frequent headers ("other" the rest) and the page pools groups under
    20 items: the rarer headers and the small groups are one "other" row, never two."""
    from atlaslib.cards import get_card
    from atlaslib.pages.analysis import pool_small_slices

    section = (["A"] * 30 + ["B"] * 25 + ["C"] * 22 + ["D"] * 21 + ["E"] * 4 + ["F"] * 4 + ["G"] * 3 + ["H"] * 3
               + [f"R{k}" for k in range(11) for _ in range(2)] + [None] * 10)
    n = len(section)
    gold = ["negated" if i % 3 == 0 else "affirmed" for i in range(n)]
    cells = [negex_cell(m, gold, gold if m == "a" else gold[::-1], section=section, sentence_words=[5] * n,
                        n_concepts=[1] * n, trigger_side=[None] * n, trigger_gap=[None] * n) for m in ("a", "b")]
    pooled, specs = pool_small_slices(get_card("negex"), cells, 20)
    t = S.slice_table(pooled, "negex", {"section header": specs["section header"]})
    groups = list(dict.fromkeys(t.loc[t.run == "a (zero_shot)", "group"]))
    others = [g for g in groups if g.startswith("other")]
    assert others == ["other (16 slices, 46 items)"]                     # 11 rare headers, E–H, no header: 16 values
    assert groups == ["A", "B", "C", "D", "other (16 slices, 46 items)"]
    assert int(t[(t.run == "a (zero_shot)") & (t.group == others[0])]["n"].iloc[0]) == 22 + 14 + 10


def _page(tmp_path, label: str, figure: str, brier: str) -> "Path":
    page = tmp_path / "book" / "cards" / "negex" / "v1" / "failures.md"
    page.parent.mkdir(parents=True)
    page.write_text("## Slices\n\n**section header**\n\n"
                    f"| section header | n | {label} |\n|:--|--:|:--|\n| HISTORY | 50 | {figure} |\n\n"
                    "## Calibration\n\n"
                    f"| run | of | n | Brier |\n|:--|:--|--:|:--|\n| {label} | P(positive label) | 90 | {brier} |\n",
                    encoding="utf-8")
    return tmp_path


def test_the_statements_check_reads_a_seeded_row_over_its_seeds(tmp_path):
    from tests.statements.seeded import check_seeded_slices_and_calibration_are_over_the_seeds as check

    c, gold, runs, section = _seeded()
    mask = section == "HISTORY"
    mean = np.mean([f1_score(*_y_p(gold, r["predictions"], mask), average="macro") for r in runs])
    first = f1_score(*_y_p(gold, runs[0]["predictions"], mask), average="macro")
    y = np.array([g == "negated" for g in gold], float)
    brier = np.mean([brier_score_loss(y, [x["score"] for x in r["predictions"]]) for r in runs])
    right = _page(tmp_path / "right", "enc (finetune, mean over 3 seeds)", f"{mean:.3f} [0.1, 0.9]", f"{brier:.3f}")
    assert check(right, [c]) == []
    old = _page(tmp_path / "old", "enc (finetune, seed 11's model of 3)", f"{first:.3f} [0.1, 0.9]", f"{brier:.3f}")
    found = check(old, [c])
    assert len(found) == 2 and all("one seed's model" in p for p in found)
    wrong = _page(tmp_path / "wrong", "enc (finetune, mean over 3 seeds)", f"{first:.3f} [0.1, 0.9]", "0.999")
    found = check(wrong, [c])
    assert len(found) == 2 and "the mean over its seeds' models is" in found[0] and "Brier" in found[1]
