"""The card-page analysis sections: shown with two or more ok runs, each table also a CSV download."""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from atlaslib.analysis.disagreement import disagreement
from atlaslib.cards import get_card
from atlaslib.pages import analysis

from .cells import negex_cell


def _cells():
    rng = np.random.default_rng(2)
    gold = ["negated" if v else "affirmed" for v in rng.integers(0, 2, 40)]
    flip = {"negated": "affirmed", "affirmed": "negated"}
    fields = dict(sentence_words=list(rng.integers(1, 50, 40)), section=[None] * 40, n_concepts=[1] * 40,
                  trigger_side=["before"] * 20 + [None] * 20, trigger_gap=[0] * 20 + [None] * 20)
    ev = [{"trigger": "no", "category": "[PREN]", "span": [0, 2]} if g == "negated" else None for g in gold]
    return [negex_cell("rules", gold, [flip[g] if k % 7 == 0 else g for k, g in enumerate(gold)], evidence=ev, **fields),
            negex_cell("probe-model", gold, [flip[g] if k % 5 == 0 else g for k, g in enumerate(gold)],
                       score=list(rng.random(40)), **fields)]


def test_sections_and_csv_downloads(tmp_path):
    cells = _cells()
    md = analysis.render(get_card("negex"), "v1", cells, tmp_path, tmp_path)
    for heading in ("## Where models fail", "### Disagreement between runs", "### Slices", "### Calibration",
                    "### Why the rule systems decided"):
        assert heading in md
    links = re.findall(r"\{download\}`[^<]*<([^>]+)>`", md)
    assert links and all((tmp_path / link).is_file() for link in links)
    summary = pd.read_csv(tmp_path / "_downloads" / "analysis-negex-v1-disagreement-summary.csv")
    assert summary["count"].tolist() == disagreement(cells).summary["count"].tolist()
    assert "n/a (labels only)" in md
    assert (tmp_path / "_figures" / "reliability-negex-v1.png").is_file()
    assert not re.search(r"\b(issue|brief|helper)\b", md, re.I)


def test_nothing_with_fewer_than_two_ok_runs(tmp_path):
    one = _cells()[:1] + [{**_cells()[1], "status": "not_run"}]
    assert analysis.render(get_card("negex"), "v1", one, tmp_path, tmp_path) == ""
    assert not (tmp_path / "_downloads").exists()


def test_small_slices_are_pooled_and_zero_width_intervals_get_the_exact_one(tmp_path):
    """60 items: sections A (30 items) and B (24) large enough, C, D, E (2 each) pooled into one group whose
    macro F1 is sklearn's on their 6 items; on a section where a run is right on every item, its zero-width
    percentile interval gets the exact Clopper–Pearson interval (scipy) beside it."""
    from scipy.stats import binomtest
    from sklearn.metrics import f1_score

    from atlaslib.analysis import slices as SL

    section = ["A"] * 30 + ["B"] * 24 + ["C", "C", "D", "D", "E", "E"]
    gold = (["negated", "affirmed"] * 30)
    flip = {"negated": "affirmed", "affirmed": "negated"}
    perfect = list(gold)                                            # right on every item
    noisy = [flip[g] if (k % 4 == 0 and k >= 30) else g for k, g in enumerate(gold)]
    cells = [negex_cell(name, gold, pred, section=section) for name, pred in (("perfect", perfect), ("noisy", noisy))]
    card = get_card("negex")
    pooled_cells, specs = analysis.pool_small_slices(card, cells, SL.MIN_ITEMS)
    label = analysis.pooled_label(3, 6)
    assert specs["section header"]["order"] == ("A", "B", label)
    table = SL.slice_table(pooled_cells, "negex", specs)
    row = table[(table["group"] == label) & (table["run"] == "noisy (zero_shot)") & (table["metric"] == "macro_f1")]
    y = [g == "negated" for g in gold[54:]]
    p = [g == "negated" for g in noisy[54:]]
    assert row["value"].iloc[0] == f1_score(y, p, average="macro")
    assert row["n"].iloc[0] == 6
    md = analysis.slices_markdown(card, "v1", cells, analysis._Downloads(tmp_path, "negex", "v1"))
    assert label in md
    lo, _ = binomtest(30, 30).proportion_ci(0.95, method="exact")
    line = next(ln for ln in md.splitlines() if ln.startswith("| A "))
    assert f"1.000 [1.000, 1.000] exact [{lo:.3f}, 1.000]" in line.replace("\\", "")   # Markdown escapes
