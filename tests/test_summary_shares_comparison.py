"""A card page computes each version's paired comparisons once: the leaderboard and the summary above it read the
same :func:`atlaslib.pages.comparisons.comparison_for` of each version with runs (hand-made NegEx cells of tests/test_card_summary.py)."""
from __future__ import annotations

import json
from collections import Counter

import numpy as np

from atlaslib.cards import get_card

from .test_card_summary import _cell, _data


def test_the_card_page_computes_each_versions_comparison_once(tmp_path, monkeypatch):
    from atlaslib.pages import comparisons, summary
    from atlaslib.pages.card_pages import render_card

    calls = Counter()
    real = comparisons.comparison_for

    def counted(card, version, cells):
        calls[version] += 1
        return real(card, version, cells)

    monkeypatch.setattr(comparisons, "comparison_for", counted)
    monkeypatch.setattr(summary, "comparison_for", counted, raising=False)
    y, a, b, _ = _data()
    y30, a30, b30, _ = _data(30)
    cells = []
    for c in (_cell("a", y, a), _cell("b", y, b), _cell("majority", y, np.zeros_like(y)),
              _cell("a", y30, a30, version="atlas-n100-v1"), _cell("b", y30, b30, version="atlas-n100-v1")):
        (tmp_path / f"{c['model']}-{c['version']}.json").write_text(json.dumps(c), encoding="utf-8")
        c["_path"] = tmp_path / f"{c['model']}-{c['version']}.json"
        c["_notebook_src"] = None
        cells.append(c)
    card = get_card("negex")
    (tmp_path / "book/cards").mkdir(parents=True)
    (tmp_path / card.page).write_text("# NegEx\n\n<!-- leaderboard -->\n", encoding="utf-8")
    render_card(card, cells, tmp_path, [])
    text = (tmp_path / card.page).read_text(encoding="utf-8")
    assert "## In brief" in text and "**a (zero_shot)**" in text         # the summary read the comparison
    assert calls == {"atlas-full-v1": 1, "atlas-n100-v1": 1}, calls     # the leaderboard's, read by the summary
