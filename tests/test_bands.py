"""How a card page frames its rows, band by band: verdicts on the declared unit with the tests beside them that
disagree marked, a forest plot per band, rows of different conditions ranked apart, a row whose recipe saw a test
score never "best", stars that agree with the p they stand beside, McNemar named only where it is shown, and the
decision rule written once per card page."""
from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from atlaslib.cards import get_card
from tests.metrics import reference as C
from atlaslib.metrics import framing as F
from atlaslib.metrics.compare import run_label

sys.path.insert(0, str(Path(__file__).parent / "metrics"))
from test_compare import negex_cell  # noqa: E402


def _cell(name, protocol, y, pred, sentences, version="v"):
    c = negex_cell(name, y, pred, version=version)
    c["protocol"] = protocol
    c["metrics"] = {f"macro_f1_{protocol}": {"value": float(C.macro_f1(y, pred)), "ci_low": 0.0, "ci_high": 1.0}}
    for r, s in zip(c["predictions"], sentences):
        r["sentence_key"] = s
    return c


def _clustered(version="v"):
    """600 items in 30 sentences of 20; A is always right, B wrong on every item of two sentences: 40 items favour
    A (the declared item test rejects), but only 2 of 30 sentences (the sentence-cluster interval reaches 0)."""
    rng = np.random.default_rng(5)
    y = (rng.random(600) < 0.3).astype(int)
    sentences = [f"s{i // 20}" for i in range(600)]
    b = y.copy()
    b[:40] = 1 - b[:40]
    return [_cell("a", "zero_shot", y, y.copy(), sentences, version),
            _cell("b", "zero_shot", y, b, sentences, version)]


def test_a_verdict_on_the_declared_unit_that_a_test_beside_it_does_not_share_is_marked():
    from atlaslib.pages import comparisons

    card = get_card("negex")
    comp = comparisons.comparison_for(card, "v", _clustered())
    band = next(b for b in comp.bands if b.name == F.REGIME_NONE)
    r = band.comparison.pairs[band.comparison.pairs["metric"] == "macro_f1"].iloc[0]
    assert r["significant"] and r["test"] == "paired bootstrap"     # the declared test decides, and rejects
    table = comparisons.pairs_markdown(band.comparison, card=card, band_cells=band.cells)
    row = next(x for x in table.splitlines() if x.startswith("| a "))
    assert " * ‡ |" in row
    assert ("‡ the verdict follows the card's declared unit (test items stratified by gold decision), as every "
            "verdict here does, but a test shown beside it, which assumes something else, does not reject this pair "
            "(the macro F1, sentence-cluster paired interval includes 0)") in table
    assert "(p < 0.001)" in row                         # McNemar rejects too: the sentence-cluster interval does not
    crossing: dict = {}
    comparisons.cluster_columns(card, band.comparison, band.cells, crossing=crossing)
    assert list(crossing.values()) == [["the macro F1, sentence-cluster paired interval"]]


def test_forest_plots_are_drawn_per_band(tmp_path):
    from atlaslib.pages import card_pages

    card = get_card("negex")
    cells = _clustered()
    rng = np.random.default_rng(2)
    y = np.array([r["gold"] == "negated" for r in cells[0]["predictions"]], int)
    s = [r["sentence_key"] for r in cells[0]["predictions"]]
    for name, proto in (("enc", "probe"), ("tuned", "finetune"), ("kit", "zero_shot")):
        cells.append(_cell(name, proto, y, np.where(rng.random(600) < 0.9, y, 1 - y), s))
    cells[-1]["overlap"] = ["negex-kit-triggers"]
    out = card_pages.forest_markdown(card, "v", cells, tmp_path, ["macro_f1"])
    figures = re.findall(r"```\{figure\} _figures/(\S+)", out)
    # two bands of two rows each; the not-ranked row is alone in its band: no figure of one interval
    assert figures == ["forest-negex-v-macro_f1.png", "forest-negex-v-macro_f1-1.png"]
    assert F.REGIME_NONE in out and F.REGIME_TRAINED in out and "kit" not in out
    assert all((tmp_path / "_figures" / f).is_file() for f in figures)


def test_rows_of_different_declared_conditions_are_ranked_apart():
    tempeval = get_card("tempeval")
    assert set(tempeval.ranking_conditions) == {"phase1", "phase2"}
    cells = [{"model": m, "protocol": p, "spec": {"profile": {"source": "rules"}}}
             for m, p in (("closest", "phase1"), ("closest", "phase2"), ("memorize", "phase1"))]
    got = [(name, [(c["model"], c["protocol"]) for c in mine]) for name, mine in F.bands(tempeval, cells)]
    assert got == [(f"{F.REGIME_NONE}, phase 1 (from raw text)", [("closest", "phase1")]),
                   (f"{F.REGIME_NONE}, phase 2 (gold events and times given)", [("closest", "phase2")]),
                   (f"{F.REGIME_TRAINED}, phase 1 (from raw text)", [("memorize", "phase1")])]
    # a card that declares none keeps one band per regime
    negex = get_card("negex")
    assert [n for n, _ in F.bands(negex, [{**c, "protocol": "zero_shot"} for c in cells])] == [F.REGIME_NONE]


def test_a_row_whose_recipe_saw_a_test_score_is_never_best():
    from atlaslib.pages import comparisons, leaderboard

    assert "finetune" in get_card("maccrobat").chosen_after_test
    why = "chosen after a test score"
    card = dataclasses.replace(get_card("negex"), chosen_after_test={"zero_shot": why})
    cells = _clustered()
    comp = comparisons.comparison_for(card, "v", cells)
    best = comp.ranks.set_index("model").loc["a (zero_shot)"]
    assert best["decided_by"] == "best"                 # ranked first, on 600 units that can detect the margin
    assert F.can_detect_margin(comp.mdd["n_units"], card.equivalence_margin)
    verdict = leaderboard.tie_text(best, comp.mdd["n_units"], card.equivalence_margin)
    assert verdict == f"highest point estimate (not a held-out result: {why})"
    frame = leaderboard.leaderboard_frame(card, "v", cells, comp)
    assert "best" not in set(frame["tie_group"]) and verdict in set(frame["tie_group"])
    plain = comparisons.comparison_for(get_card("negex"), "v", cells).ranks.set_index("model").loc["a (zero_shot)"]
    assert leaderboard.tie_text(plain, comp.mdd["n_units"], card.equivalence_margin) == "best"


@pytest.mark.parametrize("p, shown", [(0.04995, "0.04995"), (0.0499, "0.0499"), (0.0502, "0.050"),
                                      (0.05, "0.050"), (0.034, "0.034"), (0.0004, "< 0.001")])
def test_a_p_value_reads_on_its_own_side_of_five_percent(p, shown):
    from atlaslib.pages import comparisons

    assert comparisons.p_text(p) == shown
    if shown[0].isdigit():
        assert (float(shown) < 0.05) == (p < 0.05)


def test_mcnemar_is_named_only_where_its_column_is_shown():
    from atlaslib.pages import comparisons

    comp = comparisons.comparison_for(get_card("negex"), "v", _clustered())
    band = comp.bands[0].comparison
    band.data.seeded = {"a (zero_shot)": {}}      # a row over training seeds, as the note names it
    with_b = comparisons.pairs_markdown(band)
    assert "b / c (McNemar p)" in with_b and "McNemar decision per item is the majority" in with_b
    band.pairs["b"] = None                        # a metric without a binary decision per item: no McNemar column
    without = comparisons.pairs_markdown(band)
    assert "McNemar" not in without and "the mean over seeds and their paired interval draws seeds" in without


def test_the_decision_rule_is_written_once_per_card_page(tmp_path):
    from atlaslib.pages import card_pages, leaderboard

    card = dataclasses.replace(get_card("negex"), perturbations=(), versions=("v", "w"), leaderboard_version="v")
    cells = _clustered("v") + _clustered("w")
    (tmp_path / "book" / "cards").mkdir(parents=True)
    text = card_pages.card_results_markdown(card, cells, tmp_path / "book" / "cards", tmp_path, [])
    assert text.count("A row is ranked only against rows of the same training regime") == 1
    assert text.count("can sum above 1") == 1                 # how ties count in P(rank 1), once
    assert text.count("Every pair of runs of one band on the same test items") == 1
    assert text.count(f"<{leaderboard.rule_label(card)}>`") == 4   # each version's ranks and comparisons refer to it
    assert text.index(f"({leaderboard.rule_label(card)})=") < text.index("## Leaderboard: `v`")


def _site(tmp_path, body: str) -> Path:
    page = tmp_path / "book" / "cards" / "negex.md"
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text("# NegEx\n\n## Leaderboard: `v`\n\n" + body, encoding="utf-8")
    return tmp_path


PAIRS = ("| A − B | difference [95 % paired] | test | p | Holm p | b / c (McNemar p) | macro F1, sentence-cluster, paired [95 %] |\n"
         "|---|---|---|---|---|---|---|\n"
         "| a (probe) − b (probe) | +0.024 [0.002, 0.047] *{mark} | paired bootstrap | 0.034 | {holm} | 63 / 45 (p 0.081) | +0.024 [-0.005, 0.052] |\n"
         "\n\\* significant at 5 % after Holm over the 1 pair of this band.{note}\n")
RANKS = ("**Trained on the card's train items** (2 runs)\n\n"
         "| model | vs the band's best (Holm, 5 %) | rank [95 %] | P(rank 1) |\n|---|---|---|---|\n"
         "| a (probe) | best | 1 [1–2] | 0.714 |\n| b (probe) | not distinguishable (paired bootstrap) | 2 [1–2] | 0.364 |\n")


def test_the_statements_check_reports_the_old_statements_and_passes_the_new(tmp_path):
    from tests.statements import bands as S

    old = _site(tmp_path / "old", PAIRS.format(mark="", holm="0.050", note=" McNemar decision per item") + RANKS
                + "A row is ranked only against rows of the same training regime. A row is ranked only against rows "
                  "of the same training regime.")
    assert S.check_stars_agree_with_the_holm_p_shown(old, []) and S.check_declared_only_verdicts_are_marked(old, [])
    assert S.check_p_rank1_sums_say_how_ties_count(old, []) and S.check_the_rule_is_written_once_per_card(old, [])
    assert "speaks of McNemar" not in " ".join(S.check_mcnemar_named_only_with_its_column(old, []))  # it has the column
    new = _site(tmp_path / "new", PAIRS.format(mark=" ‡", holm="0.0499", note=" ‡ the verdict follows the card's "
                                               "declared unit") + RANKS + "A row is ranked only against rows of the "
                                               "same training regime; P(rank 1) can sum above 1.")
    for check in (S.check_stars_agree_with_the_holm_p_shown, S.check_declared_only_verdicts_are_marked,
                  S.check_p_rank1_sums_say_how_ties_count, S.check_the_rule_is_written_once_per_card,
                  S.check_mcnemar_named_only_with_its_column):
        assert check(new, []) == [], check.__name__
    bare = _site(tmp_path / "bare", PAIRS.replace(" b / c (McNemar p) |", "").replace(" 63 / 45 (p 0.081) |", "")
                 .replace("|---|---|---|---|---|---|---|", "|---|---|---|---|---|---|")
                 .format(mark="", holm="0.0499", note=" their McNemar decision per item"))
    assert S.check_mcnemar_named_only_with_its_column(bare, [])
