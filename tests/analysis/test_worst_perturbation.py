"""The leaderboard's worst perturbation under its declared rule (Holm-adjusted exact McNemar decides; the largest
loss among the perturbations it shows worse), and the robustness table's small-stratum mark: hand-computed
numbers on hand-built tables and cells."""
from __future__ import annotations

from fractions import Fraction
from math import comb
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from atlaslib.analysis.perturbed import COLUMNS, WORST_RULE, worst
from atlaslib.cards import get_card
from atlaslib.pages import robustness as page
from atlaslib.variants import of_cell, variant_cell, write_variant_cells

from .cells import negex_cell


# -- the rule on a constructed table ------------------------------------------------------------------------

def row(model, variant, difference, b, c, p_holm, n_read=100, n_applicable=100, protocol="zero_shot"):
    r = dict.fromkeys(COLUMNS)
    r.update(card="negex", version="v1", model=model, protocol=protocol, kind="perturbation", variant=variant,
             variant_version="v1", n_read=n_read, n_applicable=n_applicable, n_items=1432, unit="items",
             metric="macro_f1", default=0.9, variant_value=0.9 + difference, difference=difference,
             ci_low=difference - 0.05, ci_high=difference + 0.05, b=b, c=c, p_mcnemar=p_holm / 2, p_holm=p_holm,
             significant=p_holm < 0.05)
    return r


def table():
    return pd.DataFrame([
        # run A: the largest point drop (-0.182, 18 items, one flip) is not significant; a smaller one is
        row("A", "header-removed", -0.182, 1, 0, 1.0, n_read=18, n_applicable=18),
        row("A", "scope-distractor", -0.123, 10, 0, 0.002, n_read=100, n_applicable=1432),
        row("A", "typo", -0.050, 9, 0, 0.010),
        row("A", "helps", +0.200, 0, 12, 0.001),          # significant, but the perturbation helped: never "worst"
        # run B: none rejects
        row("B", "header-removed", -0.300, 2, 0, 0.5, n_read=18, n_applicable=18),
        row("B", "scope-distractor", -0.010, 3, 2, 1.0),
        row("B", "typo", -0.020, 5, 3, 1.0),
    ], columns=COLUMNS)


def test_the_rule_picks_the_largest_significant_loss_not_the_largest_point_drop():
    t = table()
    w = worst(t).set_index("model")
    assert list(w.index) == ["A"]                          # B: none shown worse, no row
    assert w.loc["A", "variant"] == "scope-distractor"    # not header-removed (-0.182, Holm p 1.0)
    assert t.loc[t["model"] == "A", "difference"].idxmin() == 0  # the old rule's pick was header-removed


def test_the_rule_reads_the_direction_and_breaks_ties_by_the_holm_p():
    t = table()
    t.loc[t["variant"] == "typo", ["difference", "variant_value"]] = [-0.123, 0.777]
    t.loc[(t["model"] == "A") & (t["variant"] == "typo"), "p_holm"] = 0.001  # same loss, smaller Holm p
    assert worst(t)["variant"].tolist() == ["typo"]
    # lower is better: a loss is a rise; only the significant rise with b > c qualifies
    low = table()
    low["difference"] = -low["difference"]
    assert worst(low, higher_is_better=False)["variant"].tolist() == ["scope-distractor"]
    # a significant drop whose test says the perturbation fixed more than it broke (b < c) is not worst
    t2 = table()
    t2.loc[(t2["model"] == "A") & (t2["variant"] != "scope-distractor"), "significant"] = False
    t2.loc[t2["variant"] == "scope-distractor", ["b", "c"]] = [0, 10]
    assert worst(t2).empty


def fake_card(**kw):
    return SimpleNamespace(name="negex", higher_is_better={"macro_f1": True}, primary_metric="macro_f1", **kw)


def test_the_leaderboard_text_is_the_tables_row_from_one_procedure(monkeypatch):
    t = table()
    monkeypatch.setattr(page, "table_for", lambda card, version, cells: t)
    text = page.worst_text(fake_card(), "v1", [], {"model": "A", "protocol": "zero_shot"})
    r = t[(t["model"] == "A") & (t["variant"] == "scope-distractor")].iloc[0]
    assert (r["b"], r["c"], r["n_read"], r["n_applicable"], r["p_holm"]) == (10, 0, 100, 1432, 0.002)
    assert text == "scope-distractor -0.123 · b 10 / c 0 of 100 items read (of 1,432 applicable) · Holm p 0.002"
    assert "[" not in text and "*" not in text          # no bootstrap interval, no star from another test

    none = page.worst_text(fake_card(), "v1", [], {"model": "B", "protocol": "zero_shot"})
    assert none == "none shown worse (3 perturbations, 18–100 items read each)"
    assert page.worst_text(fake_card(), "v1", [], {"model": "C", "protocol": "zero_shot"}) == page.MISSING

    # every perturbation read a sample of 100 of the 1,432 items it applies to: the cell says so
    sampled = pd.DataFrame([row("D", "x", -0.1, 3, 1, 0.6, n_read=100, n_applicable=1432),
                            row("D", "y", -0.2, 2, 1, 1.0, n_read=100, n_applicable=1432)], columns=COLUMNS)
    monkeypatch.setattr(page, "table_for", lambda card, version, cells: sampled)
    assert page.worst_text(fake_card(), "v1", [], {"model": "D", "protocol": "zero_shot"}) == \
        "none shown worse (2 perturbations, 100 items read of 1,432 applicable each)"


def test_a_variant_name_is_escaped(monkeypatch):
    t = table()
    t.loc[t["variant"] == "scope-distractor", "variant"] = "a*b|c"
    monkeypatch.setattr(page, "table_for", lambda card, version, cells: t)
    assert page.worst_text(fake_card(), "v1", [], {"model": "A", "protocol": "zero_shot"}).startswith(
        "a\\*b\\|c -0.123")


# -- hand-built cells: the rule end to end, and a stratum of one ---------------------------------------------

GOLD = ["negated"] * 30 + ["affirmed"] * 30


def base(model, wrong=()):
    pred = [("affirmed" if g == "negated" else "negated") if i in wrong else g for i, g in enumerate(GOLD)]
    c = negex_cell(model, GOLD, pred)
    c["run_key"] = f"key-{model}"
    return c


def variant(b, name, idx, flip=(), fix=()):
    """A variant over items ``idx``: the default run's predictions with ``flip`` made wrong and ``fix`` right."""
    recs = []
    for r in b["predictions"]:
        i = int(r["item_id"][1:])
        if i not in idx:
            continue
        r = dict(r)
        if i in flip:
            r["pred"] = "affirmed" if r["gold"] == "negated" else "negated"
        if i in fix:
            r["pred"] = r["gold"]
        recs.append(r)
    spec = {"kind": "perturbation", "name": name, "version": "v1", "key": f"{name}-v1"}
    return variant_cell(b, spec, metrics={}, predictions=recs, inputs_digest="x", n_items=60, n_applicable=len(idx))


def macro_f1(tp, fp, tn, fn):
    f_neg = Fraction(2 * tp, 2 * tp + fp + fn) if tp + fp + fn else Fraction(0)
    f_aff = Fraction(2 * tn, 2 * tn + fn + fp) if tn + fn + fp else Fraction(0)
    return (f_neg + f_aff) / 2


def mcnemar_p(b, c):
    n, k = b + c, min(b, c)
    return 1.0 if n == 0 else min(1.0, 2 * sum(comb(n, i) for i in range(k + 1)) / 2 ** n)


@pytest.fixture()
def book(tmp_path):
    """Run m1 (wrong on i00 only) with three perturbations, run m2 (right everywhere) with two, written where
    :func:`atlaslib.variants.of_cell` finds them."""
    m1 = base("m1", wrong={0})
    hdr = set([0] + list(range(30, 47)))                          # 1 negated + 17 affirmed items: 18 read
    v1 = [variant(m1, "header-removed", hdr, fix={0}),            # b 0, c 1: the stratum-of-one row
          variant(m1, "few", {1, 2, 31, 32, 33}, flip={1, 2, 31, 32, 33}),   # b 5, c 0: all five wrong
          variant(m1, "many", set(range(60)), flip=set(range(10, 15)) | set(range(50, 55)))]  # b 10, c 0
    m2 = base("m2")
    v2 = [variant(m2, "header-removed", hdr, flip={40}), variant(m2, "few", {1, 2, 31, 32, 33})]
    for c, vs in ((m1, v1), (m2, v2)):
        out = tmp_path / "negex" / "v1" / c["model"] / "zero_shot.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        c["_path"] = str(out)
        write_variant_cells(vs, out, "zero_shot")
    for c in (m1, m2):  # parameters the bootstrap reads: few resamples keep the test quick
        c["spec"]["parameters"] = {"n_resamples": 200}
    return [m1, m2]


def test_end_to_end_the_rule_the_text_and_the_stratum_of_one(book, tmp_path, monkeypatch):
    card = get_card("negex")
    t = page.table_for(card, "v1", book)
    t = t.set_index(["model", "variant"])

    # McNemar by hand; Holm over the version's five perturbation rows (both runs)
    p = {("m1", "header-removed"): mcnemar_p(0, 1), ("m1", "few"): mcnemar_p(5, 0), ("m1", "many"): mcnemar_p(10, 0),
         ("m2", "header-removed"): mcnemar_p(1, 0), ("m2", "few"): mcnemar_p(0, 0)}
    assert p[("m1", "few")] == 0.0625 and p[("m1", "many")] == 2 / 1024
    order = sorted(p, key=p.get)
    holm, run = {}, 0.0
    for k, key in enumerate(order):
        run = max(run, min(1.0, (len(p) - k) * p[key]))
        holm[key] = run
    assert holm[("m1", "many")] == pytest.approx(5 * 2 / 1024) and holm[("m1", "few")] == pytest.approx(0.25)
    for key in p:
        assert t.loc[key, "p_holm"] == pytest.approx(holm[key])
    assert (t.loc[("m1", "many"), "b"], t.loc[("m1", "many"), "c"]) == (10, 0)

    # the largest point drop is "few" (-1.0 on five items, Holm p 0.25); the rule picks "many"
    assert t.loc[("m1", "few"), "difference"] == pytest.approx(-1.0)
    d_many = float(macro_f1(24, 5, 25, 6) - macro_f1(29, 0, 30, 1))
    assert t.loc[("m1", "many"), "difference"] == pytest.approx(d_many)
    assert t.loc[("m1", "few"), "difference"] < t.loc[("m1", "many"), "difference"]
    text = page.worst_text(card, "v1", book, book[0])
    assert text == f"many {d_many:+.3f} · b 10 / c 0 of 60 items read · Holm p {holm[('m1', 'many')]:.3f}"
    # m2: nothing rejects; the sizes are stated
    assert page.worst_text(card, "v1", book, book[1]) == "none shown worse (2 perturbations, 5–18 items read each)"

    # the stratum of one: 18 items read, one negated; the variant fixes it (the reviewer's row, by hand)
    r = t.loc[("m1", "header-removed")]
    base_f1 = macro_f1(0, 0, 17, 1)                       # 17/35 = 0.486
    assert r["default"] == pytest.approx(float(base_f1)) and r["variant_value"] == pytest.approx(1.0)
    assert r["ci_low"] == pytest.approx(float(1 - base_f1)) == r["ci_high"]   # zero width: +0.514 both ends
    assert (r["smallest_stratum"], r["stratum_minimum"], bool(r["small_stratum"])) == (1, 20, True)
    # marked, and no interval printed (the page showed "+0.514 [+0.514, +0.514] †": an interval that is none)
    assert page.difference_text(r) == "+0.514 † too few items in a stratum (1 < 20): no interval"
    # 30 / 30 strata over all 60 items: no mark
    m = t.loc[("m1", "many")]
    assert (m["smallest_stratum"], bool(m["small_stratum"])) == (30, False)
    assert "†" not in page.difference_text(m)
    # five items, 2 negated and 3 affirmed
    assert t.loc[("m1", "few"), "smallest_stratum"] == 2 and bool(t.loc[("m1", "few"), "small_stratum"])

    # the page: the mark, its sentence, the star beside the Holm p, the rule; the CSV says it too
    monkeypatch.setattr(page, "_samples", lambda *a, **k: "")
    body = page.render(card, "v1", book, tmp_path / "page", tmp_path)
    assert "† too few items in a stratum (1 < 20): no interval" in body and "the interval cannot show its uncertainty" in body
    assert "[+0.514, +0.514]" not in body
    assert WORST_RULE.replace("the primary metric", "macro f1") in body
    line = next(x for x in body.splitlines() if "`many`" in x and "m1" in x)
    assert line.rstrip(" |").endswith(f"{holm[('m1', 'many')]:.3f}\\*")
    csv = pd.read_csv(tmp_path / "page" / "_downloads" / "robustness-negex-v1.csv")
    c = csv.set_index(["model", "variant"]).loc[("m1", "header-removed")]
    assert (c["smallest_stratum"], c["stratum_minimum"], bool(c["small_stratum"])) == (1, 20, True)

    # a run page's table marks it too
    frame = page.run_frame([book[0]] + of_cell(book[0]))
    assert frame.loc["header-removed (perturbation)", "smallest stratum"] == "1"   # a count, not "1.0"
    assert "†" in frame.loc["header-removed (perturbation)", "difference [95 %]"]
    assert frame.loc["many (perturbation)", "smallest stratum"] == "30"


def test_the_leaderboard_column_names_its_test_and_the_intro_declares_the_rule(book):
    from atlaslib.metrics.compare import run_label
    from atlaslib.pages import leaderboard

    out = leaderboard._ranks_table(get_card("negex"), "v1", book, None, leaderboard.Footnotes(), run_label)
    assert "worst perturbation (exact McNemar, Holm)" in out and "worst perturbation [95 %]" not in out
    # how ties count in P(rank 1), which can sum above 1 over a band (n100: 0.714 + 0.364 + 0.003 read as an error)
    assert "Rows tied for first on a resample (no row strictly better) each count it" in out
    assert "can sum above 1" in out
    assert WORST_RULE.replace("the primary metric", "macro f1") in out
    m1 = next(x for x in out.splitlines() if x.startswith("| m1 "))
    m2 = next(x for x in out.splitlines() if x.startswith("| m2 "))
    assert m1.endswith("| many -0.167 · b 10 / c 0 of 60 items read · Holm p 0.010 |")
    assert m2.endswith("| none shown worse (2 perturbations, 5–18 items read each) |")


def test_a_difference_that_rounds_to_zero_prints_as_plus_zero():
    """A two-level interval's end of -1e-17 (a float sum of equal values) is +0.000, never -0.000."""
    from atlaslib.pages.robustness import difference_text

    row = {"difference": 0.0, "ci_low": -1.2e-17, "ci_high": 3e-17, "small_stratum": False}
    assert difference_text(row).startswith("+0.000 [+0.000, +0.000]")


def test_a_resampling_of_clusters_marks_a_variant_read_on_too_few_of_them():
    """MACCROBAT resamples case reports (clusters): a gold-cuts run that read 2 of them was shown
    "-0.018 [-0.289, +0.200]" with no mark. Under a resampling of rows or clusters the units drawn from are counted
    against the atlas's floor for a cluster bootstrap (intervals.FEW_CLUSTERS)."""
    from atlaslib.analysis.perturbed import smallest_draw
    from atlaslib.cards import scoring_of
    from atlaslib.metrics.engine import UnitCounts
    from atlaslib.metrics.intervals import FEW_CLUSTERS

    rs = scoring_of("maccrobat").resampling
    assert rs.rule == "clusters"
    two = UnitCounts(ids=["s1", "s2", "s3"], columns=("tp",), counts=[[1], [0], [2]],
                     groups={rs.by: ["d1", "d1", "d2"]})
    assert smallest_draw(two, rs, "maccrobat") == (2, FEW_CLUSTERS)
    row = {"card": "maccrobat", "difference": -0.018, "ci_low": -0.289, "ci_high": 0.2, "smallest_stratum": 2,
           "stratum_minimum": FEW_CLUSTERS, "small_stratum": True}
    assert page.difference_text(row, "gold mentions") == (
        f"-0.018 † too few case reports to resample (2 < {FEW_CLUSTERS}): no interval")
    rows = scoring_of("nli_negation").resampling
    assert smallest_draw(UnitCounts(ids=["a", "b"], columns=("x",), counts=[[1], [0]]), rows, "nli_negation") == (
        2, FEW_CLUSTERS)


def test_each_holm_column_names_its_family_and_a_collapsed_perturbation_is_marked(book, tmp_path, monkeypatch):
    """A run page adjusts over the run's own variants of a kind, the card's robustness page over the table of every
    run: the same "p (Holm)" header gave one variant 0.047 on a run page and 0.422 on the card's page. And a run that
    answers one label for every item a perturbation read (SmolLM2 under scope-distractor answered "affirmed" for all)
    is marked in the robustness table as the prompt table marks it."""
    card = get_card("negex")
    m2 = book[1]
    hdr = set([0] + list(range(30, 47)))
    one = variant(m2, "header-removed", hdr)
    for r in one["predictions"]:
        r["pred"] = "affirmed"                                   # every item read: one answer
    write_variant_cells([one, variant(m2, "few", {1, 2, 31, 32, 33})], m2["_path"], "zero_shot")
    monkeypatch.setattr(page, "_samples", lambda *a, **k: "")
    body = page.render(card, "v1", book, tmp_path / "page", tmp_path)
    assert "p (Holm over the table's perturbation runs: 5) |" in body and "| p (Holm) |" not in body
    row = next(x for x in body.splitlines() if x.startswith("| m2 ") and "`header-removed`" in x)
    assert "**collapsed: answers affirmed for all 18 items**" in row
    other = next(x for x in body.splitlines() if x.startswith("| m1 ") and "`header-removed`" in x)
    assert "collapsed" not in other
    frame = page.run_frame([book[0]] + of_cell(book[0]))
    assert "p (Holm over this run's variants of the same kind: 3 perturbations)" in frame.columns
