"""Disagreement counts equal a direct set computation on hand-built cells."""
from __future__ import annotations

from atlaslib.analysis.disagreement import disagreement

from .cells import cell, negex_cell

GOLD = ["negated", "affirmed", "affirmed", "negated", "affirmed", "negated", "affirmed"]
RUNS = {
    "a": ["negated", "affirmed", "negated", "affirmed", "affirmed", "negated", "affirmed"],
    "b": ["negated", "negated", "affirmed", "affirmed", "affirmed", "negated", "affirmed"],
    "c": ["negated", "affirmed", "affirmed", "affirmed", "negated", "negated", "affirmed"],
}


def test_item_disagreement_equals_set_computation():
    cells = [negex_cell(m, GOLD, p) for m, p in RUNS.items()]
    cells.append(negex_cell("majority", GOLD, ["affirmed"] * len(GOLD)))          # constant: left out
    cells.append({**negex_cell("broken", GOLD, GOLD), "status": "not_run"})       # not ok: left out
    d = disagreement(cells)
    ids = [f"i{i:02d}" for i in range(len(GOLD))]
    disputed = {i for k, i in enumerate(ids) if len({RUNS[m][k] for m in RUNS}) > 1}
    hard = {i for k, i in enumerate(ids) if all(RUNS[m][k] != GOLD[k] for m in RUNS)}
    assert disputed == {"i01", "i02", "i04"} and hard == {"i03"}
    counts = dict(zip(d.summary["what"], d.summary["count"]))
    assert counts["items compared"] == 7
    assert counts["disputed (the runs do not all give the same answer)"] == len(disputed)
    assert counts["hard (every run wrong)"] == len(hard)
    assert set(d.hard["item_id"]) == hard
    assert set(d.disputed["item_id"]) == disputed - hard
    assert d.excluded == ["majority (zero_shot)"] and len(d.runs) == 3


def test_mention_disagreement_equals_set_computation():
    gold = [["B-problem", "I-problem", "O", "B-test"], ["B-treatment", "O", "B-problem", "O"]]
    preds = {
        "x": [["B-problem", "I-problem", "O", "O"], ["B-treatment", "O", "O", "O"]],
        "y": [["B-problem", "O", "O", "B-test"], ["B-treatment", "O", "O", "O"]],
    }
    cells = [cell("maccrobat", m, [{"item_id": f"s{k}", "document": "d", "gold": g, "pred": p}
                                   for k, (g, p) in enumerate(zip(gold, ps))]) for m, ps in preds.items()]
    d = disagreement(cells)
    # gold mentions: s0 problem 0-1, s0 test 3-3, s1 treatment 0-0, s1 problem 2-2
    found = {m: {("s0", "problem", 0, 1)} if m == "x" else {("s0", "test", 3, 3)} for m in preds}
    for m in found:
        found[m].add(("s1", "treatment", 0, 0))
    allg = {("s0", "problem", 0, 1), ("s0", "test", 3, 3), ("s1", "treatment", 0, 0), ("s1", "problem", 2, 2)}
    by_all = set.intersection(*found.values())
    by_none = allg - set.union(*found.values())
    row = d.summary.set_index("type").loc["all"]
    assert (row["found by all"], row["found by some"], row["found by none"], row["gold"]) == (
        len(by_all), len(allg) - len(by_all) - len(by_none), len(by_none), len(allg))
    assert set(map(tuple, d.hard[["item_id", "type", "first_word", "last_word"]].values.tolist())) == by_none


def test_relation_disagreement_counts_only_runs_that_address_the_kind():
    def tcell(model, bits, addresses):
        metrics = {f"{m}_phase2": {"value": 0.5 if m in addresses else None}
                   for m in ("event_span_f1", "timex_span_f1", "doctimerel_accuracy", "contains_f1")}
        return cell("tempeval", model, [{"item_id": "doc1", "found": bits}], protocol="phase2", metrics=metrics)
    cells = [tcell("closest", {"contains": "1100", "doctimerel": "0000"}, {"contains_f1"}),
             tcell("other", {"contains": "1010", "doctimerel": "0110"}, {"contains_f1", "doctimerel_accuracy"})]
    d = disagreement(cells)
    s = d.summary.set_index("kind")
    assert s.loc["contains", ["found by all", "found by some", "found by none"]].tolist() == [1, 2, 1]
    # doctimerel: only "other" addresses it, so its own bits decide
    assert s.loc["doctimerel", ["found by all", "found by some", "found by none"]].tolist() == [2, 0, 2]
    assert s.loc["doctimerel", "runs"] == 1
