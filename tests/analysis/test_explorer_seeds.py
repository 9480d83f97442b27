"""The item explorer of rows trained with several seeds (``extra.seed_runs``): a seeded run's answer is the label
more than half of its seeds' models predict (else "no majority", counted wrong), so its pair filter counts are
the card page's McNemar b and c (:mod:`atlaslib.metrics.compare` decides a seeded row right when more than half
of its seeds are right); each seed's answer is its own column, which no count reads; cells without usable seed
runs give the table they gave before. Expected answers and counts are hand-counted from the tables below."""
from __future__ import annotations

import json
import re
from itertools import permutations

import pandas as pd
import pytest

from atlaslib.analysis import explorer as EX
from atlaslib.cards import get_card
from atlaslib.analysis.paired import paired_from_cells as paired
from atlaslib.metrics.compare import compare_paired
from atlaslib.pages import explorer as P

from .cells import cell

NM = "no majority"
N, A = "negated", "affirmed"
IDS = [f"i{k:02d}" for k in range(12)]
#            i00 i01 i02 i03 i04 i05 i06 i07 i08 i09 i10 i11
GOLD = [N, A, A, N, A, N, A, N, A, A, N, A]
ZS = [N, A, N, A, A, N, A, N, N, A, A, A]                 # a run of one model
ENC3 = {1: [N, N, A, A, N, N, A, A, A, N, N, A],           # three seeds
        2: [N, N, N, N, A, A, A, A, N, A, N, N],
        3: [A, A, N, A, A, A, N, N, A, N, N, A]}
ENC4 = {1: [N, A, A, N, A, N, N, A, A, A, N, A],           # four seeds: ties
        2: [N, A, N, N, A, A, N, A, N, A, N, A],
        3: [A, N, A, A, N, N, A, A, A, A, A, N],
        4: [A, A, N, A, A, A, N, N, A, N, N, A]}
# hand counts of the columns above: the label more than two of three (three of four) seeds predict
ENC3_MAJORITY = [N, N, N, A, A, A, A, A, A, N, N, A]
ENC4_MAJORITY = [NM, A, NM, NM, A, NM, N, A, A, A, N, A]
# P(negated) of the three-seed row: 0.8 / 0.7 / 0.6 for seeds 1 / 2 / 3 when they say negated, else 1 − that
ENC3_SCORE = {s: [(p if x == N else 1 - p) for x in ENC3[s]] for s, p in ((1, 0.8), (2, 0.7), (3, 0.6))}
ZS_L, ENC3_L, ENC4_L = "zs · zero_shot", "enc3 · finetune", "enc4 · finetune"


def seeded_cell(card, model, seeds: dict, gold, ids, scores=None, fields=None, protocol="finetune"):
    """A fine-tuned row as its card writes it: the first seed's records in ``predictions``, every seed's
    ``{item_id, pred[, score]}`` in ``extra.seed_runs`` (as tests/test_seeds_page.py's ``seeded_cell``)."""
    first = min(seeds)
    scored = card == "negex"

    def score(s, k):
        return {"score": None if scores is None else scores[s][k]} if scored else {}
    recs = [{"item_id": i, "gold": g, "pred": seeds[first][k], **score(first, k),
             **{f: v[k] for f, v in (fields or {}).items()}} for k, (i, g) in enumerate(zip(ids, gold))]
    c = cell(card, model, recs, protocol=protocol)
    c["extra"] = {"seed_runs": [{"seed": s, "metrics": {}, "predictions": [
        {"item_id": i, "pred": p, **score(s, k)} for k, (i, p) in enumerate(zip(ids, seeds[s]))]} for s in seeds]}
    return c


def negex_cells():
    plain = cell("negex", "zs", [{"item_id": i, "gold": g, "pred": p, "score": None}
                                 for i, g, p in zip(IDS, GOLD, ZS)])
    return [plain, seeded_cell("negex", "enc3", ENC3, GOLD, IDS, scores=ENC3_SCORE),
            seeded_cell("negex", "enc4", ENC4, GOLD, IDS)]


@pytest.fixture
def quick_aso(monkeypatch):
    """The comparison's almost-stochastic-order test of two seeded rows (deepsig, 1,000 bootstrap iterations)
    reads the seeds' metric values, never the McNemar counts these tests check: a stub keeps them quick."""
    from atlaslib.metrics import seeds

    monkeypatch.setattr(seeds, "almost_stochastic_order",
                        lambda a, b, **kw: {"eps_min": 1.0, "threshold": seeds.ASO_THRESHOLD})


def _comparison_b_c(cells):
    """``{(explorer run A, explorer run B): (b, c)}`` of the comparison's pairs table on the primary metric,
    as the card page's comparison builds it (`atlaslib.analysis.paired.paired_from_cells` and ``compare_paired``)."""
    comp = compare_paired(paired([dict(c) for c in cells], n_resamples=30))
    prim = comp.pairs[comp.pairs["metric"] == comp.data.primary]
    name = {f"{c['model']} ({c['protocol']})": EX.explorer_run_label(c) for c in cells}
    return {(name[r.model_a], name[r.model_b]): (int(r.b), int(r.c)) for r in prim.itertuples()}


def test_seeded_item_runs_show_their_seeds_majority_hand_counted():
    ex = EX.explorer(negex_cells(), "negex")
    t = ex.table.set_index("item_id")
    assert t[ENC3_L].tolist() == ENC3_MAJORITY and t[ENC4_L].tolist() == ENC4_MAJORITY
    assert t[ZS_L].tolist() == ZS                                   # a run of one model: its own answers
    # each seed's column holds that seed's answers, after the run's own columns
    for run, seeds in ((ENC3_L, ENC3), (ENC4_L, ENC4)):
        assert ex.seeds[run] == [f"{run} · seed {s}" for s in seeds]
        for s, preds in seeds.items():
            assert t[f"{run} · seed {s}"].tolist() == preds
    cols = list(ex.table.columns)
    assert cols[cols.index(ENC4_L):cols.index(ENC4_L) + 6] == [
        ENC4_L, f"{ENC4_L} · right", *(f"{ENC4_L} · seed {s}" for s in (1, 2, 3, 4))]
    # right exactly when more than half of the seeds are right (hand count: 2 of 3, 3 of 4)
    for run, seeds in ((ENC3_L, ENC3), (ENC4_L, ENC4)):
        n_right = [sum(seeds[s][k] == GOLD[k] for s in seeds) for k in range(len(GOLD))]
        assert t[f"{run} · right"].tolist() == ["right" if 2 * n > len(seeds) else "wrong" for n in n_right]
    assert t[f"{ENC3_L} · right"].tolist() == ["right", "wrong", "wrong", "wrong", "right", "wrong", "right", "wrong",
                                               "right", "wrong", "right", "right"]
    # the mean of the seeds' scores, declared as such: i00 = (0.8 + 0.7 + 0.4) / 3, i02 = (0.2 + 0.7 + 0.6) / 3
    assert ex.scores == [f"{ENC3_L} · mean score"] and f"{ENC3_L} · score" not in ex.table
    assert t.loc["i00", f"{ENC3_L} · mean score"] == pytest.approx(1.9 / 3)
    assert t.loc["i02", f"{ENC3_L} · mean score"] == pytest.approx(1.5 / 3)
    # the counts over runs read the runs' answers, not the seeds' (hand count over zs, enc3, enc4)
    assert t["runs right"].tolist() == [2, 2, 0, 0, 3, 1, 2, 1, 2, 2, 2, 3]
    assert t.index[t["every run wrong"] == "yes"].tolist() == ["i02", "i03"]
    assert t.index[t["runs disagree"] == "no"].tolist() == ["i04", "i11"]


def test_a_tie_of_seeds_shows_no_majority_and_counts_wrong():
    ex = EX.explorer(negex_cells(), "negex")
    t = ex.table.set_index("item_id")
    # i00: gold negated; enc4's seeds say negated, negated, affirmed, affirmed: two of four right is not more
    # than half
    assert [ENC4[s][0] for s in (1, 2, 3, 4)] == [N, N, A, A]
    assert t.loc["i00", ENC4_L] == NM and t.loc["i00", f"{ENC4_L} · right"] == "wrong"
    assert "i00" in ex.right_wrong(ZS_L, ENC4_L)["item_id"].tolist()
    assert "i00" not in ex.right_wrong(ENC4_L, ZS_L)["item_id"].tolist()
    # three labels and three seeds: each says another label, no majority with an odd number of seeds either
    nli = EX.explorer(nli_cells(), "nli_negation").table.set_index("item_id")
    assert nli.loc["c0", "t3 · finetune"] == NM and nli.loc["c0", "t3 · finetune · right"] == "wrong"
    assert nli.loc["c1", "t5 · finetune"] == NM and nli.loc["c1", "t5 · finetune · right"] == "wrong"


def test_pair_filters_count_the_comparisons_mcnemar_b_and_c_for_every_pair(quick_aso):
    cells = negex_cells()
    ex = EX.explorer(cells, "negex")
    got = _comparison_b_c(cells)
    assert len(got) == 3
    for (a, b), (bb, cc) in got.items():
        assert (len(ex.right_wrong(a, b)), len(ex.right_wrong(b, a))) == (bb, cc), (a, b)
    # the hand counts (right sets: zs {00,01,04,05,06,07,09,11}, enc3 {00,04,06,08,10,11},
    # enc4 {01,04,08,09,10,11})
    hand = {(ZS_L, ENC3_L): (4, 2), (ZS_L, ENC4_L): (4, 2), (ENC3_L, ENC4_L): (2, 2)}
    for a, b in permutations([ZS_L, ENC3_L, ENC4_L], 2):
        want = hand[(a, b)] if (a, b) in hand else hand[(b, a)][::-1]
        assert (len(ex.right_wrong(a, b)), len(ex.right_wrong(b, a))) == want
        assert got.get((a, b), (got.get((b, a)) or (None, None))[::-1]) == want
    # the first seed alone would not give these counts: the defect this rule mends
    first = [r["pred"] for r in cells[1]["predictions"]]
    assert first != ENC3_MAJORITY


NLI_GOLD = ["contradiction", "contradiction", "entailment", "neutral", "contradiction", "entailment", "neutral",
            "contradiction"]
_L = {"C": "contradiction", "E": "entailment", "N": "neutral"}


def _labels(s):
    return [_L[x] for x in s.split()]


NLI_X = _labels("C E E N N E C C")
NLI_T3 = {1: _labels("C E N N C E E C"), 2: _labels("E C E C C N N N"), 3: _labels("N C E N E C N C")}
NLI_T5 = {1: _labels("C C E N C E N N"), 2: _labels("C E N N E E C C"), 3: _labels("E C E C C N N E"),
          4: _labels("N E E N E E C N"), 5: _labels("C N C E C C N N")}
NLI_T3_MAJORITY = [NM, *_labels("C E N C"), NM, *_labels("N C")]
NLI_T5_MAJORITY = [_L["C"], NM, *_labels("E N C E N N")]


def nli_cells():
    ids = [f"c{k}" for k in range(len(NLI_GOLD))]
    plain = cell("nli_negation", "x", [{"item_id": i, "gold": g, "pred": p} for i, g, p in zip(ids, NLI_GOLD, NLI_X)])
    return [plain, *(seeded_cell("nli_negation", m, seeds, NLI_GOLD, ids) for m, seeds in (("t3", NLI_T3),
                                                                                          ("t5", NLI_T5)))]


def test_labels_card_with_three_labels_and_odd_seeds_matches_the_comparison(quick_aso):
    cells = nli_cells()
    ex = EX.explorer(cells, "nli_negation")
    t = ex.table.set_index("item_id")
    assert t["t3 · finetune"].tolist() == NLI_T3_MAJORITY and t["t5 · finetune"].tolist() == NLI_T5_MAJORITY
    x, t3, t5 = "x · zero_shot", "t3 · finetune", "t5 · finetune"
    # right sets: x {0,2,3,5,7}, t3 {1,2,3,4,6,7}, t5 {0,2,3,4,5,6}
    hand = {(x, t3): (2, 3), (x, t5): (1, 2), (t3, t5): (2, 2)}
    got = _comparison_b_c(cells)
    assert set(got) == set(hand)
    for (a, b), want in hand.items():
        assert got[(a, b)] == want
        assert (len(ex.right_wrong(a, b)), len(ex.right_wrong(b, a))) == want


MGOLD = [["B-problem", "I-problem", "O", "B-test"], ["B-treatment", "O", "B-problem", "O"]]
MX = [["B-problem", "I-problem", "O", "O"], ["B-treatment", "O", "O", "B-test"]]
FT = {1: [["B-problem", "I-problem", "O", "O"], ["B-treatment", "O", "B-problem", "B-test"]],
      2: [["B-problem", "I-problem", "O", "B-test"], ["O", "O", "B-problem", "B-test"]],
      3: [["B-problem", "O", "O", "B-test"], ["B-treatment", "O", "O", "O"]]}
FT2 = {1: [["B-problem", "I-problem", "O", "B-test"], ["B-treatment", "O", "O", "O"]],
       2: [["B-problem", "O", "O", "B-test"], ["O", "O", "B-problem", "O"]]}


def mention_cells():
    doc = {"document": ["d", "d"]}
    plain = cell("maccrobat", "x", [{"item_id": f"s{k}", "document": "d", "gold": g, "pred": p}
                                    for k, (g, p) in enumerate(zip(MGOLD, MX))])
    return [plain, seeded_cell("maccrobat", "ft", FT, MGOLD, ["s0", "s1"], fields=doc),
            seeded_cell("maccrobat", "ft2", FT2, MGOLD, ["s0", "s1"], fields=doc)]


def test_span_card_seeded_run_finds_a_mention_when_more_than_half_of_its_seeds_do():
    from atlaslib.cards.maccrobat.counting import SCORING

    assert not SCORING.decisions      # no McNemar decision on span cards: the rule is carried over, not compared
    ex = EX.explorer(mention_cells(), "maccrobat")
    keys = list(ex.table[["item_id", "type", "first_word", "last_word"]].itertuples(index=False, name=None))
    assert keys == [("s0", "problem", 0, 1), ("s0", "test", 3, 3), ("s1", "treatment", 0, 0), ("s1", "problem", 2, 2)]
    x, ft, ft2 = "x · zero_shot", "ft · finetune", "ft2 · finetune"
    t = ex.table
    # ft: each gold mention predicted exactly by two or three of its three seeds; ft2: by both seeds only (s0 test)
    assert t[f"{ft} · right"].tolist() == ["found"] * 4
    assert t[f"{ft2} · right"].tolist() == ["missed", "found", "missed", "missed"]
    assert t[f"{x} · right"].tolist() == ["found", "missed", "found", "missed"]
    assert t[ft].tolist() == ["B-problem I-problem", "B-test", "B-treatment", "B-problem"]
    assert t[ft2].tolist() == [NM, "B-test", NM, NM]
    assert t[f"{ft} · seed 3"].tolist() == ["B-problem O", "B-test", "B-treatment", "O"]
    assert t[f"{ft2} · seed 1"].tolist() == ["B-problem I-problem", "B-test", "B-treatment", "O"]
    assert t["runs right"].tolist() == [2, 2, 2, 1]
    assert ex.seeds == {ft: [f"{ft} · seed {s}" for s in (1, 2, 3)], ft2: [f"{ft2} · seed {s}" for s in (1, 2)]}
    # predicted-only: the mentions some run predicts (a seeded run: more than half of its seeds); (s0, problem,
    # 0, 0) is one seed's of each seeded run only, so no run's
    only = ex.predicted_only
    assert only[["item_id", "type", "first_word", "last_word"]].values.tolist() == [["s1", "test", 3, 3]]
    row = only.iloc[0]
    assert (row[x], row[ft], row[ft2], row["runs predicting it"]) == ("yes", "yes", "no", 2)
    assert [row[f"{ft} · seed {s}"] for s in (1, 2, 3)] == ["yes", "yes", "no"]
    assert [row[f"{ft2} · seed {s}"] for s in (1, 2)] == ["no", "no"]


def _plain_negex():
    return [cell("negex", m, [{"item_id": i, "gold": g, "pred": p, "score": s}
                              for i, g, p, s in zip(IDS, GOLD, preds, scores)], protocol=proto)
            for m, proto, preds, scores in (("zs", "zero_shot", ZS, [None] * 12),
                                            ("pr", "probe", ENC3[1], ENC3_SCORE[1]))]


def test_cells_without_seeds_give_the_table_they_gave_before():
    ex = EX.explorer(_plain_negex(), "negex")
    pr = "pr · probe"
    assert list(ex.table.columns) == ["item_id", "gold", pr, f"{pr} · score", f"{pr} · right", ZS_L,
                                      f"{ZS_L} · right", "runs right", "every run wrong", "runs disagree"]
    assert ex.table[pr].tolist() == ENC3[1] and ex.table[f"{pr} · score"].tolist() == ENC3_SCORE[1]
    assert ex.table[f"{ZS_L} · right"].tolist() == ["right" if p == g else "wrong" for p, g in zip(ZS, GOLD)]
    assert ex.seeds == {} and ex.scores == [f"{pr} · score"]
    # one seed, or seeds without their answers: the cell's own records, the same table
    for runs in ([{"seed": 1, "predictions": [{"item_id": i, "pred": N} for i in IDS]}],
                 [{"seed": 1, "unit_counts": None}, {"seed": 2, "unit_counts": None}]):
        cells = _plain_negex()
        cells[1]["extra"] = {"seed_runs": runs}
        pd.testing.assert_frame_equal(EX.explorer(cells, "negex").table, ex.table)
    # a seeded run beside them changes none of their columns
    both = EX.explorer([*_plain_negex(), seeded_cell("negex", "enc4", ENC4, GOLD, IDS)], "negex").table
    for c in ex.table.columns[:7]:
        pd.testing.assert_series_equal(both[c], ex.table[c])


def test_page_states_the_rule_escapes_names_and_offers_no_seed_to_the_filters(tmp_path, monkeypatch):
    monkeypatch.setattr(EX, "card_inputs", lambda card, version, data_dir=None: {})
    card = get_card("negex")
    version = card.versions[0]
    cells = negex_cells()
    evil = '<img src=x onerror="alert(1)">'
    cells[2]["model"] = cells[2]["spec"]["model"] = evil
    for c in cells:
        c["version"] = version
    P.render(card, version, cells, tmp_path)
    folder = tmp_path / P.explorer_doc("negex", version).parent
    text = (folder / "explorer.md").read_text()
    assert "shows the answer of the majority of its seeds' models" in text
    assert "otherwise *no majority*, counted wrong" in text and "the mean of the seeds' scores, not one model's" in text
    assert "Each seed's answer is in its own column" in text
    assert evil not in re.sub(r"`[^`\n]*`", "", text)
    cfg = json.loads(re.search(r'atlas-explorer-config">(.*?)</script>', text).group(1))
    assert set(cfg["right"]) == {ZS_L, ENC3_L, f"{evil} · finetune"}      # the runs only, never a seed
    csv = pd.read_csv(folder / f"explorer-negex-{version}.csv", dtype=str, keep_default_na=False)
    assert csv[f"{evil} · finetune"].tolist() == ENC4_MAJORITY
    assert csv[f"{evil} · finetune · seed 3"].tolist() == ENC4[3]
    # a page of runs of one model says nothing of seeds
    plain_cells = _plain_negex()
    for c in plain_cells:
        c["version"] = version
    P.render(card, version, plain_cells, tmp_path / "plain")
    plain = (tmp_path / "plain" / P.explorer_doc("negex", version).with_suffix(".md")).read_text()
    assert "seeds" not in plain


def test_a_seeded_runs_error_note_says_the_explorer_counts_its_seeds_majority(tmp_path):
    plain, enc3, _ = negex_cells()
    assert "several seeds" not in P.errors_markdown(plain, tmp_path, tmp_path)
    note = P.errors_markdown(enc3, tmp_path, tmp_path)
    assert "majority of its seeds' models (more than half)" in note and "wrong=enc3+%C2%B7+finetune" in note


def test_the_disagreement_table_counts_a_seeded_row_as_the_explorer_does():
    """The analysis page's disagreement table (hard items, disputed items; found by none / some) reads a seeded row
    by the same majority rule: its counts are the explorer's (hand counts above: i02 and i03 defeat every run; the
    runs agree on i04 and i11 only; on the span card the last gold mention is found by one run of three)."""
    from atlaslib.analysis.disagreement import disagreement

    d = disagreement(negex_cells(), "negex")
    assert sorted(d.hard["item_id"]) == ["i02", "i03"]
    # a disputed item every run gets wrong counts as hard there; the rest agree: the explorer's "runs disagree" no
    assert sorted(set(IDS) - set(d.disputed["item_id"]) - set(d.hard["item_id"])) == ["i04", "i11"]
    assert d.items.set_index("item_id")["n_correct"].tolist() == [2, 2, 0, 0, 3, 1, 2, 1, 2, 2, 2, 3]
    m = disagreement(mention_cells(), "maccrobat").items
    found = dict(zip(m[["item_id", "type", "first_word", "last_word"]].itertuples(index=False, name=None), m["n_found"]))
    assert found == {("s0", "problem", 0, 1): 2, ("s0", "test", 3, 3): 2, ("s1", "treatment", 0, 0): 2,
                     ("s1", "problem", 2, 2): 1}
