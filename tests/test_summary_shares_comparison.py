"""A card page computes each version's paired comparisons once: the leaderboard and the summary above it read the
same :func:`atlaslib.pages.comparisons.comparison_for` of each version with runs (hand-made NegEx cells of tests/test_card_summary.py)."""
from __future__ import annotations

from collections import Counter

import numpy as np

from .test_card_summary import _cell, _data, render_negex_page


def _count_comparisons(monkeypatch) -> Counter:
    """Every call of ``comparisons.comparison_for`` (and the summary's name for it), counted by version."""
    from atlaslib.pages import comparisons, summary

    calls = Counter()
    real = comparisons.comparison_for

    def counted(card, version, cells):
        calls[version] += 1
        return real(card, version, cells)

    monkeypatch.setattr(comparisons, "comparison_for", counted)
    monkeypatch.setattr(summary, "comparison_for", counted, raising=False)
    return calls


def test_the_card_page_computes_each_versions_comparison_once(tmp_path, monkeypatch):
    calls = _count_comparisons(monkeypatch)
    y, a, b, _ = _data()
    y30, a30, b30, _ = _data(30)
    text = render_negex_page(tmp_path, [_cell("a", y, a), _cell("b", y, b), _cell("majority", y, np.zeros_like(y)),
                                        _cell("a", y30, a30, version="atlas-n100-v1"),
                                        _cell("b", y30, b30, version="atlas-n100-v1")])
    assert "## In brief" in text and "**a (zero_shot)**" in text         # the summary read the comparison
    assert calls == {"atlas-full-v1": 1, "atlas-n100-v1": 1}, calls     # the leaderboard's, read by the summary


def test_the_metrics_chapters_worked_example_reads_the_pages_comparison(tmp_path, monkeypatch):
    """The metrics chapter's worked paired example (filled as the NegEx page renders) reads the comparison the
    page computed, not a second one of its own."""
    from atlaslib.pages import comparisons

    calls = _count_comparisons(monkeypatch)
    (tmp_path / "book/methods").mkdir(parents=True)
    chapter = tmp_path / "book/methods/metrics.md"
    chapter.write_text(f"# Metrics\n\n{comparisons.METRICS_MARK}\n", encoding="utf-8")
    y, a, b, _ = _data()
    render_negex_page(tmp_path, [_cell("a", y, a), _cell("b", y, b)])
    text = chapter.read_text(encoding="utf-8")
    assert comparisons.METRICS_MARK not in text and "McNemar looks only at" in text   # the example was written
    assert calls["atlas-full-v1"] == 1, calls    # the version with runs: the page's one comparison
