"""The comparison checks of ``tests/statements/compare.py`` on hand-made card pages: they report a "best" row and
an "equivalent" pair on seven test units (which detect nothing below 6/7, wider than the margin ±0.02), and
pass the same page worded as the rule says and a page whose 1,432 units can detect the margin."""
from __future__ import annotations

from pathlib import Path

from tests.statements.compare import check_claims_need_units_that_detect_the_margin as check


def _page(src: Path, n: int, verdict: str, equivalence: str) -> Path:
    page = src / "book/cards/nli_negation.md"
    page.parent.mkdir(parents=True)
    page.write_text(
        "# NLI\n\n## Leaderboard: `openmed-builtin-v1`\n\n"
        "| model | vs the band's best (Holm, 5 %) | rank [95 %] | P(rank 1) |\n|---|---|---|---|\n"
        f"| always-<wbr>entailment (zero_shot) | {verdict} | 1 [1–1] | 1.000 |\n\n"
        f"**What this test set can detect.** {n:,} resampling units (cases). The top pair ...\n\n"
        "| A − B | difference [95 % paired] | test | p | Holm p | 90 % paired; within ±0.02? |\n|---|---|---|---|---|---|\n"
        f"| a − m | +0.000 [0.000, 0.000] | exact McNemar | 1.000 | 1.000 | [0.000, 0.000] {equivalence} |\n",
        encoding="utf-8")
    return src


def test_the_check_catches_best_and_equivalent_on_seven_units(tmp_path):
    old = check(_page(tmp_path / "old", 7, "best", "equivalent"), [])
    assert any("7 units detect nothing below 6/7" in p and "a row is called best" in p for p in old), old
    assert any("a pair is called equivalent" in p for p in old), old
    assert check(_page(tmp_path / "new", 7, "highest point estimate (too few units to tell)",
                       "not claimed: too few units to detect the margin"), []) == []
    assert check(_page(tmp_path / "big", 1432, "best", "equivalent"), []) == []
    assert check(tmp_path / "empty", []) != []                # no page: it says so, never passes
