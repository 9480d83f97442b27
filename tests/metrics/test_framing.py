"""Framing of a leaderboard: TOST by hand and against scipy's one-sided t-tests, each pair's own MDD against
the power equation solved directly and McNemar's, the paired cluster interval against a loop over the
cluster resamples, regime bands on hand-built cells, and overlap-flagged rows kept out of every rank."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from scipy.optimize import brentq

from atlaslib.cards import get_card
from atlaslib.metrics import bootstrap as B
from tests.metrics import reference as C
from atlaslib.analysis.paired import paired_from_cells
from atlaslib.metrics import compare as K
from atlaslib.metrics import framing as F

sys.path.insert(0, str(Path(__file__).parent))
from test_compare import negex_cell  # noqa: E402


# -- TOST -----------------------------------------------------------------------------------------------------

def test_tost_by_hand():
    d = np.arange(-10, 11) / 1000                       # 21 resamples: -0.010, ..., 0.010
    r = F.tost(d, 0.01)
    # 90 %: the 5th and 95th percentiles, positions 1 and 19 of the sorted 21 (linear interpolation)
    assert (r["ci_low"], r["ci_high"]) == (-0.009, 0.009)
    assert r["equivalent"] is True
    assert r["p_lower"] == r["p_upper"] == r["p_tost"] == 2 / 22     # (1 + one resample at ∓0.010) / (21 + 1)
    assert F.tost(d, 0.009)["equivalent"] is False                   # the interval touches the margin
    shifted = F.tost(d + 0.005, 0.01)                                # [-0.004, 0.014]: above the margin
    assert shifted["equivalent"] is False and shifted["p_upper"] == 7 / 22
    assert F.tost([np.nan, np.nan], 0.02)["equivalent"] is None
    with pytest.raises(ValueError, match="margin"):
        F.tost(d, 0)


@pytest.mark.parametrize("shift,margin", [(0.0, 0.3), (0.05, 0.2), (0.0, 0.05), (0.25, 0.2)])
def test_tost_agrees_with_two_one_sided_t_tests(shift, margin):
    """Paired item differences (iid): the bootstrap 90 % interval and one-sided p-values of the mean difference
    are close to the t-based TOST (scipy: two one-sided one-sample t-tests, as statsmodels' ttost_paired), and
    the verdicts agree away from the boundary."""
    rng = np.random.default_rng(7)
    x = rng.normal(shift, 1.0, 600)
    idx = rng.integers(0, x.size, size=(4000, x.size))
    r = F.tost(x[idx].mean(1), margin)
    se = x.std(ddof=1) / np.sqrt(x.size)
    lo, hi = stats.t.interval(0.90, x.size - 1, loc=x.mean(), scale=se)
    assert abs(r["ci_low"] - lo) < 0.1 * se and abs(r["ci_high"] - hi) < 0.1 * se
    p_lo = stats.ttest_1samp(x, -margin, alternative="greater").pvalue
    p_hi = stats.ttest_1samp(x, margin, alternative="less").pvalue
    assert abs(r["p_tost"] - max(p_lo, p_hi)) < 0.02
    assert r["equivalent"] == (max(p_lo, p_hi) < 0.05)


# -- minimum detectable difference of one pair ------------------------------------------------------------------

def test_pair_mdd_solves_the_power_equation():
    sd = 0.0123
    mdd = F.pair_mdd(sd)

    def power(delta):   # two-sided z test at 5 %, SE = sd
        z = stats.norm.ppf(0.975)
        return stats.norm.cdf(delta / sd - z) + stats.norm.cdf(-delta / sd - z)

    direct = brentq(lambda dlt: power(dlt) - 0.80, 1e-9, 1.0)
    assert mdd == pytest.approx(direct, rel=1e-5)       # the far tail's share (< 1e-5) is all that differs
    assert mdd == pytest.approx(2.8015852 * sd, rel=1e-7)


def _cells(n=240, seed=3, version="v"):
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < 0.3).astype(int)
    out = {}
    for name, proto, acc in (("a", "zero_shot", 0.9), ("b", "zero_shot", 0.87), ("const", "zero_shot", None),
                             ("enc", "probe", 0.92), ("tuned", "finetune", 0.91), ("flagged", "zero_shot", 0.99)):
        pred = np.zeros(n, int) if acc is None else np.where(rng.random(n) < acc, y, 1 - y)
        c = negex_cell(name, y, pred, version=version)
        c["protocol"] = proto
        c["metrics"] = {f"macro_f1_{proto}": {"value": float(C.macro_f1(y, pred))}}
        for k, r in enumerate(c["predictions"]):
            r["sentence_key"] = f"s{k // 3}"
        if name == "flagged":
            c["overlap"] = ["negex"]
            c["spec"] = {"profile": {"trained_on": ["negex-kit-triggers"]}}
        out[name] = c
    return y, out


def test_each_pair_has_its_own_mdd_and_the_top_pair_is_the_bands_best_two():
    from atlaslib.pages import comparisons

    card = get_card("negex")
    y, cells = _cells()
    comp = comparisons.comparison_for(card, "v", list(cells.values()))
    band = next(b for b in comp.bands if b.name == F.REGIME_NONE)
    c = band.comparison
    framed = F.framed_pairs(c, card.equivalence_margin)
    assert F.top_pair(c) == ("a (zero_shot)", "b (zero_shot)")
    for _, r in framed.iterrows():
        d = c.data.resampled(r["model_a"], "macro_f1") - c.data.resampled(r["model_b"], "macro_f1")
        assert r["mdd"] == pytest.approx(2.8015852 * np.std(d), rel=1e-7)
        assert r["mdd_mcnemar"] == K.mcnemar_mdd(len(y), (r["b"] + r["c"]) / len(y))
        assert r["ci90_low"] == B.percentile_ci(d, 0.90)[0]
    # the baseline pairs have other SDs: a median over pairs is not the top pair's MDD
    top = F.pair_row(framed, "a (zero_shot)", "b (zero_shot)")
    assert top["mdd"] != pytest.approx(float(framed["mdd"].median()), rel=1e-3)


def test_cluster_paired_equals_a_loop_over_the_cluster_resamples():
    card = get_card("negex")
    y, cells = _cells(n=90)
    p = paired_from_cells([cells["a"], cells["b"]], n_resamples=300)
    clusters = next(rs for rs in p.scoring.extra if rs.rule == "clusters")   # the card's sentence-cluster one
    groups = list(p.counts["a (zero_shot)"].groups[clusters.by])
    assert groups == [r["sentence_key"] for r in cells["a"]["predictions"]]
    got = F.cluster_paired(p, "a (zero_shot)", "b (zero_shot)", "macro_f1", clusters, seed=11)
    pa = np.array([r["pred"] == "negated" for r in cells["a"]["predictions"]], int)
    pb = np.array([r["pred"] == "negated" for r in cells["b"]["predictions"]], int)
    loop = [C.macro_f1(y[i], pa[i]) - C.macro_f1(y[i], pb[i]) for i in B.cluster_indices(groups, 300, 11)]
    lo, hi = B.percentile_ci(loop)
    assert got["ci_low"] == pytest.approx(lo, abs=1e-12) and got["ci_high"] == pytest.approx(hi, abs=1e-12)
    assert got["n_clusters"] == 30
    # a list of cluster labels gives the same draws as the declared resampling on the same labels
    same = F.cluster_paired(p, "a (zero_shot)", "b (zero_shot)", "macro_f1", groups, seed=11)
    assert (same["ci_low"], same["ci_high"]) == (got["ci_low"], got["ci_high"])
    assert card.name == "negex"


# -- bands --------------------------------------------------------------------------------------------------------

def test_regimes_come_from_the_cards_declarations():
    negex, tempeval, maccrobat = get_card("negex"), get_card("tempeval"), get_card("maccrobat")
    cell = {"model": "m", "protocol": "zero_shot", "spec": {"profile": {"source": "hf"}}}
    assert F.regime(negex, cell) == F.REGIME_NONE
    assert F.regime(negex, {**cell, "protocol": "probe"}) == F.REGIME_TRAINED
    assert F.regime(negex, {**cell, "protocol": "finetune"}) == F.REGIME_TRAINED
    assert F.regime(maccrobat, {**cell, "model": "memorize", "protocol": "train_lookup"}) == F.REGIME_TRAINED
    assert F.regime(tempeval, {**cell, "model": "memorize", "protocol": "phase2"}) == F.REGIME_TRAINED
    assert F.regime(tempeval, {**cell, "model": "majority-doctimerel", "protocol": "phase2"}) == F.REGIME_TRAINED
    assert F.regime(tempeval, {**cell, "model": "closest", "protocol": "phase2"}) == F.REGIME_NONE
    from atlaslib.results import EXTERNAL

    ext = {**cell, "spec": {"profile": {"source": EXTERNAL}}}
    assert F.regime(negex, ext) == F.REGIME_OUTSIDE
    flagged = {**cell, "protocol": "probe", "overlap": ["negex"]}
    assert F.band_of(negex, flagged) == F.NOT_RANKED and "overlap" in F.overlap_reason(flagged)


def test_ranks_tie_groups_and_holm_families_stay_within_a_band():
    from atlaslib.pages import comparisons

    card = get_card("negex")
    _, cells = _cells()
    comp = comparisons.comparison_for(card, "v", list(cells.values()))
    names = {b.name: sorted(K.run_label(c) for c in b.cells) for b in comp.bands}
    assert names == {F.REGIME_NONE: ["a (zero_shot)", "b (zero_shot)", "const (zero_shot)"],
                     F.REGIME_TRAINED: ["enc (probe)", "tuned (finetune)"], F.NOT_RANKED: ["flagged (zero_shot)"]}
    ranks = comp.ranks
    assert "flagged (zero_shot)" not in set(ranks["model"])
    for band, r in ranks.groupby("band"):
        assert sorted(r["rank"]) == list(range(1, len(r) + 1))          # ranks 1..k within the band
    # P(rank 1) among the band's rows only: no row of the band strictly better on the resample
    res = {lab: comp.data.resampled(lab, "macro_f1") for lab in names[F.REGIME_TRAINED]}
    tr = ranks.set_index("model")
    assert tr.loc["enc (probe)", "p_rank1"] == np.mean(res["enc (probe)"] >= res["tuned (finetune)"])
    pairs = comp.pairs[comp.pairs["metric"] == "macro_f1"]
    assert len(pairs) == 3 + 1                                          # C(3,2) + C(2,2): no pair crosses a band
    assert not (pairs["model_a"].str.startswith("flagged") | pairs["model_b"].str.startswith("flagged")).any()
    # Holm over the band's own pairs: the largest adjusted p-value of a band of one pair is its raw p
    trained = pairs[pairs["band"] == F.REGIME_TRAINED].iloc[0]
    assert trained["p_holm"] == trained["p"]
    assert comp.not_ranked == [("flagged (zero_shot)", F.overlap_reason(cells["flagged"]))]


def test_an_overlap_flagged_row_has_no_rank_anywhere(tmp_path):
    """The flagged row is the best by far; on the page, in the CSV and in the JSON it carries no rank, tie group
    or P(rank 1), and the worked example of the metrics chapter is not about it."""
    import pandas as pd

    from atlaslib.pages.card_pages import leaderboard_markdown
    from atlaslib.pages import comparisons

    card = get_card("negex")
    _, cells = _cells(version="atlas-full-v1")
    cells = list(cells.values())
    comp = comparisons.comparison_for(card, "atlas-full-v1", cells)
    md = leaderboard_markdown(card, "atlas-full-v1", cells, tmp_path, tmp_path, comparison=comp)
    flagged_rows = [ln for ln in md.splitlines() if ln.startswith("| flagged")]
    assert len(flagged_rows) == 2                                  # the metrics table and the not-ranked band
    assert "not ranked" in flagged_rows[0] and "overlap this card's test data" in flagged_rows[1]
    assert not any(("best" in ln or "[1–" in ln or "distinguishable" in ln) for ln in flagged_rows)
    section = comparisons.render(card, "atlas-full-v1", cells, tmp_path, tmp_path, comp)
    # the page says which test decides, and shows the sentence-cluster paired interval beside it
    assert "decided by the paired bootstrap on the card's declared resampling" in section
    assert "sentence-cluster, paired [95 %]" in section and "treats the items as independent" in section
    assert "equivalence margin for macro f1 is ±0.02" in section
    stem = tmp_path / "_downloads" / "leaderboard-negex-atlas-full-v1"
    frame = pd.read_csv(f"{stem}.csv")
    kit = frame[frame["model"] == "flagged"].iloc[0]
    assert kit["band"] == F.NOT_RANKED and kit["regime"] == F.REGIME_NONE
    assert all(pd.isna(kit[f]) for f in F.RANK_FIELDS)
    assert frame.loc[frame["model"] == "a", "rank"].iloc[0] == 1
    records = json.loads(Path(f"{stem}.json").read_text())
    kit_json = next(r for r in records if r["model"] == "flagged")
    assert not set(F.RANK_FIELDS) & set(kit_json) and kit_json["not_ranked_reason"]
    # 240 items detect no difference below 6/240 = 0.025, wider than the margin ±0.02: no "best" is claimed
    assert next(r for r in records if r["model"] == "a")["tie_group"] == "highest point estimate (too few units to tell)"
    example = comparisons.worked_example(cells, "negex")
    assert example and "flagged" not in example
    pairs = json.loads((tmp_path / "_downloads" / "comparisons-negex-atlas-full-v1.json").read_text())
    assert not any("flagged" in (r["model_a"] + r["model_b"]) for r in pairs)
    f1 = [r for r in pairs if r["metric"] == "macro_f1"]
    assert all("ci90_low" in r and "mdd" in r and r["band"] for r in f1)


def test_speed_machine_contamination_and_memorisation_on_the_board(tmp_path):
    """Items per second = the test answers / the seconds of the run's prediction phase (answers served from the
    model-call store at their recorded time; loading, training and side measurements left out), on the machine
    the cell names; "—" where an answer's time is unknown or the run recorded no phases; a language-model
    row carries the contamination mark with its reason, the memorisation probe and its calls' tokens per
    item (from the adapter's info["cost"] in the run's details or profile); all of it in the CSV/JSON too."""
    import pandas as pd

    from atlaslib.pages.card_pages import leaderboard_markdown
    from atlaslib.pages import comparisons, rowinfo

    card = get_card("negex")
    _, cells = _cells()
    a, b = cells["a"], cells["b"]
    def phases(prediction, loading=0.0, training=0.0, side=0.0):
        zero = {"seconds": 0.0, "items": 0, "served_seconds": 0.0, "served_untimed": 0}
        return {"loading": {**zero, "seconds": loading}, "training": {**zero, "seconds": training},
                "prediction": {**zero, **prediction}, "side": {**zero, "seconds": side}}

    # a: trained here (100 s) and loaded (30 s); its 240 answers took 4.8 s of its 200 s
    a["timing"] = {"wall_seconds": 200.0, "phases": phases({"seconds": 4.8, "items": 240}, 30.0, 100.0)}
    # b: 40 answers computed in 20 s, 200 served from the store that took 100 s when computed; a 900 s side probe
    b["timing"] = {"wall_seconds": 1000.0, "phases": phases({"seconds": 20.0, "items": 240, "served_seconds": 100.0},
                                                            side=900.0)}
    for c in (a, b):
        c["split"] = {"n_test": 240}
        c["environment"] = {"cpu": "Test CPU 9000", "cpu_count": 2, "platform": "Linux"}
    reason = "may have seen this public test set: its training data are undisclosed"
    b["extra"] = {"contamination": {"may_have_seen": True, "reason": reason},
                  "memorisation": {"test": {"exact_match_rate": 0.25, "token_overlap": 0.5, "n_probed": 8},
                                   "reference": {"exact_match_rate": 0.0, "token_overlap": 0.125, "n_probed": 16},
                                   "reference_card": "nli_negation"}}
    b["spec"] = {"profile": {"source": "gguf", "cost": {"items": 240, "wall_seconds": 60.0, "prompt_tokens": 12000,
                                                        "completion_tokens": 480, "tokens_of": "every item"}}}
    assert rowinfo.speed(a)["items_per_second"] == 240 / 4.8 and rowinfo.speed(b)["items_per_second"] == 2.0
    from atlaslib.phases import seconds as phase_seconds

    assert phase_seconds(a["timing"]) == {"loading": 30.0, "training": 100.0, "prediction": 4.8, "side": 0.0,
                                        "other": 200.0 - 134.8}
    untimed = {**a, "timing": {"wall_seconds": 9.0, "phases": phases({"seconds": 1.0, "items": 240,
                                                                       "served_untimed": 3})}}
    old = {**a, "timing": {"wall_seconds": 4.8}}
    assert rowinfo.speed(untimed) is None and "3 answers served" in rowinfo.speed_reason(untimed)
    assert rowinfo.speed(old) is None and "no phases" in rowinfo.speed_reason(old)
    assert rowinfo.machine(a) == "Test CPU 9000, 2 cores" and rowinfo.machine({"environment": {"platform": "X"}}) == "X"
    cost = rowinfo.model_cost(b)
    assert (cost["items_per_second"], cost["prompt_tokens_per_item"], cost["completion_tokens_per_item"]) == (4, 50, 2)
    two = [a, b]
    comp = comparisons.comparison_for(card, "v", two)
    md = leaderboard_markdown(card, "v", two, tmp_path, tmp_path, comparison=comp)
    assert md.count(reason) == 2                       # the mark's footnote and the language-model table
    assert "on Test CPU 9000, 2 cores" in md
    b_row = next(ln for ln in md.splitlines() if ln.startswith("| b (zero_shot) |"))
    assert b_row.rstrip(" |").endswith("| 2.0")        # 240 items in 120 s
    llm = next(ln for ln in md.splitlines() if ln.startswith("| b (zero_shot) | ◊"))
    assert "0.250 / 0.500 (8 sentences)" in llm and "0.000 / 0.125 (16 sentences)" in llm and "| 50.0 / 2.0 |" in llm
    # its items/s is the leaderboard's (2.0: the prediction phase), not the adapter's call timer (4.0: 240 in 60 s)
    assert "| 2.0 | 50.0 / 2.0 |" in llm and "| 4.0 |" not in llm
    assert "◊ may have seen this public test set" in llm and "◊: may have" not in llm   # the answer said once
    comparisons.render(card, "v", two, tmp_path, tmp_path, comp)
    frame = pd.read_csv(tmp_path / "_downloads" / "leaderboard-negex-v.csv").set_index("model")
    assert frame.loc["a", "items_per_second"] == 50 and frame.loc["a", "machine"] == "Test CPU 9000, 2 cores"
    assert (frame.loc["a", "training_seconds"], frame.loc["a", "loading_seconds"], frame.loc["b", "side_seconds"],
            frame.loc["b", "answers_timed"]) == (100.0, 30.0, 900.0, 240)
    assert bool(frame.loc["b", "may_have_seen_test_set"]) and frame.loc["b", "memorisation_exact_match_test"] == 0.25
    assert pd.isna(frame.loc["a", "may_have_seen_test_set"]) and frame.loc["b", "prompt_tokens"] == 12000


def test_a_run_alone_in_its_band_is_not_given_a_rank_against_nobody(tmp_path):
    from atlaslib.pages.card_pages import leaderboard_markdown

    card = get_card("negex")
    _, cells = _cells()
    two = [cells["a"], cells["enc"]]                    # one zero-shot row, one probe row: two bands of one
    md = leaderboard_markdown(card, "v", two, tmp_path, tmp_path)
    assert md.count("the band's only run") == 2 and "| 1.000 |" not in md


def test_a_contamination_reason_that_gives_its_answer_is_not_given_a_second_one():
    """The NLI card's language-model table read "no: no: the test set is synthetic …"."""
    from atlaslib.cards import get_card as card_of
    from atlaslib.models.contamination import may_have_seen
    from atlaslib.pages.rowinfo import seen_text

    con = may_have_seen({"source": "gguf", "training_data": ["web-crawl"]}, card_of("nli_negation"))
    assert con["may_have_seen"] is False and con["reason"].startswith("no: the test set is synthetic")
    assert not seen_text("no", con["reason"]).startswith("no: no:")
    assert seen_text("unknown", "the card says nothing") == "unknown: the card says nothing"
