"""The card summary (atlaslib.pages.summary) on hand-made NegEx cells whose answers are known by hand.

400 test items (6/400 units can detect the card's margin ±0.02), 120 negated; section header HISTORY (items
0-199) and PLAN (200-399):

- ``a`` is wrong on 8 PLAN items only, ``b`` is ``a`` with one more PLAN item wrong: they disagree on one item,
  and no paired test at 5 % can separate two rows that disagree on fewer than 6 units (2·½⁵ > 0.05), so ``b``
  is not distinguishable from ``a``; both are weakest on PLAN (every error is there);
- ``majority`` answers "affirmed" everywhere: its macro F1 is (280/340)/2 ≈ 0.412, far below (it is wrong on
  120 items ``a`` gets right, right on none ``a`` gets wrong);
- ``flagged`` is perfect but declares training data that overlap the kit: shown apart, not ranked, with its reason;
- ``tuned`` (finetune) is alone in its band.

A 30-item version cannot detect the card's margin (6/30 > ±0.02): it claims no best.
"""
from __future__ import annotations

import json
import re

import numpy as np
import pytest
from sklearn.metrics import f1_score

from atlaslib.cards import get_card

VERSION = "atlas-full-v1"           # the card's leaderboard version: the one its summary reads


def _cell(model, y, pred, protocol="zero_shot", version=VERSION, overlap=None):
    n = len(y)
    recs = [{"item_id": f"negex-{i:04d}", "gold": "negated" if t else "affirmed",
             "pred": "negated" if p else "affirmed", "score": None,
             "section": "HISTORY" if i < n // 2 else "PLAN"} for i, (t, p) in enumerate(zip(y, pred))]
    v = float(f1_score(y, pred, average="macro"))
    cell = {"card": "negex", "version": version, "model": model, "protocol": protocol, "status": "ok",
            "spec": {"model": model, "protocol": protocol}, "seeds": {"bootstrap": 11}, "predictions": recs,
            "metrics": {f"macro_f1_{protocol}": {"value": v, "ci_low": v - 0.011, "ci_high": min(1.0, v + 0.009)}},
            "split": {"n_test": n, "n_train": 500},
            "timing": {"phases": {"prediction": {"seconds": n / 50, "items": n}}}}     # 50 answers a second
    if overlap:
        cell["overlap"] = [overlap]
        cell["spec"]["profile"] = {"trained_on": [overlap]}
    return cell


def _data(n=400):
    y = np.zeros(n, int)
    y[::10] = 1
    y[1::10] = 1
    y[2::10] = 1                    # 120 of 400 negated, 60 in each half
    a = y.copy()
    plan = np.arange(n // 2, n)
    a[plan[3:27:3]] = 1 - a[plan[3:27:3]]          # 8 errors, all in PLAN
    b = a.copy()
    b[plan[-4]] = 1 - b[plan[-4]]                  # one more, in PLAN
    return y, a, b, plan


@pytest.fixture(scope="module")
def summary():
    from atlaslib.pages.summary import card_summary

    y, a, b, plan = _data()
    cells = [_cell("a", y, a), _cell("b", y, b), _cell("majority", y, np.zeros_like(y)),
             _cell("flagged", y, y, overlap="negex-kit-triggers"), _cell("tuned", y, a, protocol="finetune")]
    return card_summary(get_card("negex"), cells), y, a, plan


def _band(text, name):
    m = re.search(rf"^- \*\*{name}\.?\*\*(.*?)(?=^- \*\*|^\*Cannot tell)", text, flags=re.M | re.S)
    assert m, f"no band {name!r} in:\n{text}"
    return m.group(1)


def test_best_and_not_distinguishable_rows_are_named_with_their_intervals(summary):
    text, y, a, _ = summary
    assert text.startswith("## In brief\n")
    assert f"On `{VERSION}`, the split version the card ranks on" in text
    band = _band(text, "No training on the card's data")
    assert "Best: **a (zero_shot)**, and not distinguishable from it (Holm, 5 %): **b (zero_shot)**" in band
    va = f1_score(y, a, average="macro")
    assert f"**a (zero_shot)** {va:.3f} [{va - 0.011:.3f}, {va + 0.009:.3f}]" in band
    vm = f1_score(y, np.zeros_like(y), average="macro")
    assert vm == pytest.approx(280 / 340 / 2)
    assert re.search(rf"Below it, separated by the paired bootstrap on [^:]+: majority \(zero_shot\) {vm:.3f} "
                     r"\[[\d.]+, [\d.]+\] \(Holm p [\d.<]+", band), band


def test_each_listed_row_is_weakest_where_its_errors_are(summary):
    text, y, a, plan = summary
    band = _band(text, "No training on the card's data")
    on_plan = f1_score(y[plan], a[plan], average="macro")
    overall = f1_score(y, a, average="macro")
    line = next(ln for ln in band.splitlines() if ln.strip().startswith("- **a (zero_shot)**"))
    assert f"weakest on section header = PLAN (n = 200): macro f1 {on_plan:.3f} [" in line
    assert f"against its {overall:.3f} overall" in line
    assert line.endswith("; 50.0 items/s")


def test_an_overlap_row_is_shown_apart_not_ranked(summary):
    text, *_ = summary
    band = _band(text, "Not ranked")
    assert "**flagged (zero_shot)** 1.000" in band
    assert "negex-kit-triggers" in band
    assert "flagged" not in _band(text, "No training on the card's data")
    assert "The band's only run" in _band(text, "Trained on the card's train items")
    assert "*Cannot tell.* 400 test items" in text
    assert "*Licence of the data:* " in text and "local evaluation only" in text   # the kit's licence is unconfirmed


def test_too_few_units_claim_no_best():
    from atlaslib.pages.summary import card_summary

    y, a, b, _ = _data(30)
    text = card_summary(get_card("negex"), [_cell("a", y, a), _cell("b", y, b)])
    band = _band(text, "No training on the card's data")
    assert "Highest point estimate (too few units to tell): **a (zero_shot)**" in band
    assert "No row is called best: 30 " in band
    assert "Best:" not in text


def render_negex_page(tmp_path, cells: list[dict], source: str = "# NegEx\n\n<!-- leaderboard -->\n") -> str:
    """The NegEx card page rendered under ``tmp_path`` from ``cells`` (each written there as its JSON file, with no
    run notebook) and the page's ``source``: the page's text."""
    from atlaslib.pages.card_pages import render_card

    for c in cells:
        path = tmp_path / f"{c['model']}-{c['version']}.json"
        path.write_text(json.dumps(c), encoding="utf-8")
        c["_path"], c["_notebook_src"] = path, None
    card = get_card("negex")
    (tmp_path / "book/cards").mkdir(parents=True)
    (tmp_path / card.page).write_text(source, encoding="utf-8")
    render_card(card, cells, tmp_path, [])
    return (tmp_path / card.page).read_text(encoding="utf-8")


def test_the_card_page_starts_with_the_summary(tmp_path):
    y, a, b, _ = _data()
    cells = [_cell("a", y, a), _cell("b", y, b)]
    text = render_negex_page(tmp_path, cells, "# NegEx\n\nThe card's text.\n\n<!-- leaderboard -->\n")
    card = get_card("negex")
    head = text.split("\n", 1)[1].lstrip()
    head = re.sub(r"\A```\{warning\}\n.*?\n```\n", "", head, flags=re.S).lstrip()   # the licence banner stays first
    assert head.startswith("## In brief\n"), text[:600]
    assert text.index("## In brief") < text.index("The card's text.") < text.index("## Leaderboard")

    # the statements check reads the rendered page against its own tables: it holds, and it sees a changed figure
    from tests.statements.summary import check_card_summary_figures_are_the_leaderboards as check

    assert check(tmp_path, cells) == []
    va = f"{f1_score(y, a, average='macro'):.3f}"
    page = tmp_path / card.page
    page.write_text(text.replace(f"**a (zero_shot)** {va}", "**a (zero_shot)** 0.999", 1), encoding="utf-8")
    assert any(f"a (zero_shot) 0.999 [" in p and f"the leaderboard says {va} [" in p for p in check(tmp_path, cells))
    page.write_text(text.replace("## In brief", "## Summary"), encoding="utf-8")
    assert any("does not start with its summary" in p for p in check(tmp_path, cells))


def test_names_and_reasons_from_cells_are_escaped():
    from atlaslib.pages.summary import card_summary

    y, a, b, _ = _data()
    bad = "<img src=x onerror=alert(1)>*[x](y)|"
    text = card_summary(get_card("negex"), [_cell(bad, y, a), _cell("b", y, b),
                                            _cell("ov", y, y, overlap="negex-kit-<b>x</b>")])
    assert "<img" not in text and "<b>" not in text
    assert "**&lt;img src=x onerror=alert(1)&gt;\\*\\[x\\](y)\\| (zero_shot)** " in text
    assert "(negex-kit-&lt;b&gt;x&lt;/b&gt;)" in text


def test_a_version_with_no_pair_to_compare_says_so_and_a_not_held_out_best_gives_its_own_reason():
    """One row per band: nothing is said of differences (no "smaller than that" with nothing before it); a top
    row whose recipe the card declares chosen after a test score reads that reason, not "too few units"."""
    from dataclasses import replace

    from atlaslib.pages.summary import card_summary

    y, a, b, _ = _data()
    card = get_card("negex")
    text = card_summary(card, [_cell("a", y, a)])
    tell = text[text.index("*Cannot tell.*"):]
    assert "no band has two runs compared on them" in tell and "smaller than that" not in tell
    declared = replace(card, chosen_after_test={"zero_shot": "chosen after a test score, by hand"})
    text = card_summary(declared, [_cell("a", y, a), _cell("majority", y, np.zeros_like(y))])
    band = _band(text, "No training on the card's data")
    assert "not a held-out result: chosen after a test score, by hand" in band
    assert "No row is called best" not in band
