"""Checks of the comparisons' claims: an "equivalent" pair or a "best" row needs test units that can detect the
card's equivalence margin (a paired test at 5 % rejects only when at least k units favour one row, k the
fewest with an exact sign-test p below 5 %, from scipy; so n units detect nothing below k/n)."""
from __future__ import annotations

import re
from pathlib import Path

from scipy.stats import binomtest

from atlaslib.cards import available_cards
from tests.statements import missing


def _fewest_units(alpha: float = 0.05) -> int:
    k = 1
    while binomtest(k, k, 0.5).pvalue >= alpha:
        k += 1
    return k


def _versions(text: str):
    """(version, its section's text) of each ``## Leaderboard: `V``` section of a card page."""
    parts = re.split(r"^## Leaderboard: `([^`]+)`", text, flags=re.M)
    return list(zip(parts[1::2], parts[2::2]))


def check_claims_need_units_that_detect_the_margin(src: Path, cells) -> list[str]:
    problems, seen = [], 0
    k = _fewest_units()
    for card in available_cards():
        name = card.name
        page = Path(src) / f"book/cards/{name}.md"
        margin = getattr(card, "equivalence_margin", None)
        if not page.is_file() or margin is None:
            continue
        for version, text in _versions(page.read_text(encoding="utf-8")):
            for m in re.finditer(r"\*\*What this test set can detect\.\*\* ([\d,]+) resampling units", text):
                seen += 1
                n = int(m.group(1).replace(",", ""))
                if n >= k and k / n <= margin:
                    continue
                what = f"{name} {version}: {n} units detect nothing below {k}/{n}, wider than the margin ±{margin:g}"
                if re.search(r"\| best \|", text):
                    problems.append(f"{what}, yet a row is called best")
                if re.search(r"\] equivalent \|", text):
                    problems.append(f"{what}, yet a pair is called equivalent")
                break                                   # one version's test units: its bands share them
    return problems if seen else missing("a card page's 'What this test set can detect'")


CHECKS = (check_claims_need_units_that_detect_the_margin,)
SITES: dict = {}
WHOLE_BOOK_ONLY = (check_claims_need_units_that_detect_the_margin,)
