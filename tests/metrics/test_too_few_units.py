"""Equivalence and "best" need test units that can detect the card's margin: two rows that agree on all of
seven items have a paired interval of width 0, which is no evidence of equivalence within ±0.02 (a test at
5 % needs at least 6 units favouring one row, so 7 units detect nothing below 6/7)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from atlaslib.cards import get_card
from atlaslib.metrics import framing as F

sys.path.insert(0, str(Path(__file__).parent))
from test_compare import negex_cell  # noqa: E402


def test_resolution_is_the_exact_sign_test_bound():
    assert F.fewest_deciding_units(0.05) == 6          # 2·½⁶ = 0.031 < 0.05 ≤ 2·½⁵ = 0.0625
    assert F.resolution(7) == pytest.approx(6 / 7)
    assert np.isnan(F.resolution(5))                    # fewer units than a test needs: nothing detectable
    assert F.can_detect_margin(1432, 0.02) and not F.can_detect_margin(7, 0.02) and not F.can_detect_margin(5, None)


def _agreeing(n):
    y = np.array([1, 0] * n)[:n]
    return [negex_cell(name, y, y.copy()) for name in ("a", "b")]


def test_seven_agreeing_items_are_neither_equivalent_nor_a_best(tmp_path):
    from atlaslib.pages import comparisons, leaderboard

    card = get_card("negex")
    comp = comparisons.comparison_for(card, "v", _agreeing(7))
    band = next(b for b in comp.bands if b.name == F.REGIME_NONE).comparison
    framed = F.framed_pairs(band, card.equivalence_margin)
    r = framed.iloc[0]
    assert r["ci90_low"] == r["ci90_high"] == 0.0       # the interval alone would say "equivalent"
    assert r["equivalent"] is None and not r["margin_detectable"]
    assert r["mdd"] == pytest.approx(6 / 7)             # not 0.000: SD 0 is not a test that detects 0
    table = comparisons.pairs_markdown(band, card=card)
    assert "not claimed: too few units to detect the margin" in table and "] equivalent" not in table
    text = comparisons.mdd_markdown(band, card)
    assert "**0.000**" not in text and "no row best: 7 " in text and "no difference below 0.857" in text and "or 6/7 where that is more" in text
    best = comp.ranks.set_index("model").loc["a (zero_shot)"]
    assert best["decided_by"] == "best"
    assert leaderboard.tie_text(best, comp.mdd["n_units"], card.equivalence_margin) == leaderboard.TOO_FEW_TO_TELL
    frame = leaderboard.leaderboard_frame(card, "v", _agreeing(7), comp)
    assert leaderboard.TOO_FEW_TO_TELL in set(frame["tie_group"]) and "best" not in set(frame["tie_group"])


def test_enough_agreeing_items_still_are_equivalent():
    from atlaslib.pages import comparisons, leaderboard

    card = get_card("negex")
    comp = comparisons.comparison_for(card, "v", _agreeing(400))
    band = next(b for b in comp.bands if b.name == F.REGIME_NONE).comparison
    r = F.framed_pairs(band, card.equivalence_margin).iloc[0]
    assert r["equivalent"] and r["margin_detectable"] and r["mdd"] == pytest.approx(6 / 400)
    best = comp.ranks.set_index("model").loc["a (zero_shot)"]
    assert leaderboard.tie_text(best, comp.mdd["n_units"], card.equivalence_margin) == "best"
