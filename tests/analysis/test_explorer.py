"""The item explorer: its frame from hand-made cells equals a direct construction, its filters' counts equal
the comparison's McNemar b and the disagreement counts, its CSV holds every run's predictions, its page
escapes what a user supplies and, in a publish build, holds ids only."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from atlaslib.analysis import disagreement as DIS
from atlaslib.analysis import explorer as EX
from atlaslib.cards import get_card
from atlaslib.analysis.paired import compare_cells as compare
from atlaslib.pages import explorer as P

from .cells import cell, negex_cell

GOLD = ["negated", "affirmed", "affirmed", "negated", "affirmed", "negated", "affirmed"]
RUNS = {
    "a": ["negated", "affirmed", "negated", "affirmed", "affirmed", "negated", "affirmed"],
    "b": ["negated", "negated", "affirmed", "affirmed", "affirmed", "negated", "affirmed"],
    "c": ["negated", "affirmed", "affirmed", "affirmed", "negated", "negated", "affirmed"],
}
SECTION = [None, "HISTORY", "HISTORY", None, "EXAM", None, "EXAM"]
WORDS = [3, 12, 25, 50, 8, 11, 9]
EVIDENCE = [{"trigger": "no", "category": "NEG", "span": [0, 2]}, None, {"trigger": "denies", "category": "NEG",
            "span": [0, 6]}, None, None, {"trigger": "without", "category": "NEG", "span": [3, 10]}, None]
IDS = [f"i{i:02d}" for i in range(len(GOLD))]
INPUTS = {i: {"concept": f"concept {k}", "text": f"sentence <b>{k}</b> about [entity] concept {k} [entity]"}
          for k, i in enumerate(IDS)}


def _negex_cells():
    fields = {"section": SECTION, "sentence_words": WORDS}
    cells = [negex_cell(m, GOLD, p, **fields) for m, p in RUNS.items()]
    cells[0] = negex_cell("a", GOLD, RUNS["a"], score=[0.9, 0.1, 0.8, 0.2, 0.3, 0.7, 0.4], **fields)
    for r, e in zip(cells[2]["predictions"], EVIDENCE):       # "c" is a rule system: it records its trigger
        r["evidence"] = e
    cells.append(negex_cell("majority", GOLD, ["affirmed"] * len(GOLD), **fields))   # constant
    cells.append({**negex_cell("broken", GOLD, GOLD, **fields), "status": "not_run"})   # not ok: not shown
    return cells


def _label(model, protocol):
    return f"{model} · {protocol}"


def test_item_frame_equals_a_direct_construction():
    cells = _negex_cells()
    ex = EX.explorer(cells, "negex", inputs=INPUTS)
    runs = [("a", "probe"), ("b", "zero_shot"), ("c", "zero_shot"), ("majority", "zero_shot")]
    preds = {**RUNS, "majority": ["affirmed"] * len(GOLD)}
    compared = ["a", "b", "c"]
    slices = get_card("negex").analysis.slices
    rows = []
    for k, i in enumerate(IDS):
        row = {"item_id": i, "concept": f"concept {k}", "text": INPUTS[i]["text"], "gold": GOLD[k]}
        for m, p in runs:
            lab = _label(m, p)
            row[lab] = preds[m][k]
            if m == "a":
                row[f"{lab} · score"] = cells[0]["predictions"][k]["score"]
            row[f"{lab} · right"] = "right" if preds[m][k] == GOLD[k] else "wrong"
            if m == "c":
                row[f"{lab} · trigger"] = (EVIDENCE[k] or {}).get("trigger", "")
                row[f"{lab} · category"] = (EVIDENCE[k] or {}).get("category", "")
        row["section header"] = SECTION[k] or slices["section header"]["missing"]
        w = WORDS[k]
        row["sentence length (words)"] = ("1–10" if w <= 10 else "11–20" if w <= 20 else "21–40" if w <= 40
                                          else "≥ 41")
        n_right = sum(preds[m][k] == GOLD[k] for m in compared)
        row["runs right"] = n_right
        row["every run wrong"] = "yes" if n_right == 0 else "no"
        row["runs disagree"] = "yes" if len({preds[m][k] for m in compared}) > 1 else "no"
        rows.append(row)
    expected = pd.DataFrame(rows)
    pd.testing.assert_frame_equal(ex.table, expected, check_dtype=False)
    assert ex.unit == "item" and ex.excluded == ["majority · zero_shot"]
    assert ex.compared == [_label(m, p) for m, p in runs[:3]] and ex.evidence == [_label("c", "zero_shot")]


def test_filters_count_what_the_comparison_and_the_disagreement_table_count():
    cells = _negex_cells()
    ok = [c for c in cells if c["status"] == "ok"]
    for c in ok:
        c["spec"] = {"model": c["model"], "protocol": c["protocol"]}
    ex = EX.explorer(cells, "negex")
    pairs = compare(ok, n_resamples=50)
    pairs = pairs[pairs["b"].notna()]
    assert len(pairs)
    for r in pairs.itertuples():
        a, b = (re.sub(r" \((\w+)\)$", r" · \1", x) for x in (r.model_a, r.model_b))
        assert len(ex.right_wrong(a, b)) == r.b and len(ex.right_wrong(b, a)) == r.c
    counts = dict(zip(*DIS.disagreement(cells).summary[["what", "count"]].T.values))
    assert (ex.table["every run wrong"] == "yes").sum() == counts["hard (every run wrong)"]
    assert (ex.table["runs disagree"] == "yes").sum() == counts["disputed (the runs do not all give the same answer)"]


def _mention_cells():
    gold = [["B-problem", "I-problem", "O", "B-test"], ["B-treatment", "O", "B-problem", "O"]]
    preds = {
        "x": [["B-problem", "I-problem", "O", "O"], ["B-treatment", "O", "O", "B-test"]],
        "y": [["B-problem", "O", "O", "B-test"], ["B-treatment", "O", "O", "B-test"]],
    }
    return gold, preds, [cell("maccrobat", m, [{"item_id": f"s{k}", "document": "d", "gold": g, "pred": p,
                                                "report_position": "first third"}
                                               for k, (g, p) in enumerate(zip(gold, ps))]) for m, ps in preds.items()]


def test_mention_frame_and_predicted_only_equal_a_direct_construction():
    gold, preds, cells = _mention_cells()
    words = {"s0": ["chest", "pain", "and", "ECG"], "s1": ["aspirin", "for", "fever", "today"]}
    ex = EX.explorer(cells, "maccrobat", inputs={i: {"words": w} for i, w in words.items()})
    g = {("s0", "problem", 0, 1), ("s0", "test", 3, 3), ("s1", "treatment", 0, 0), ("s1", "problem", 2, 2)}
    found = {"x": {("s0", "problem", 0, 1), ("s1", "treatment", 0, 0)},
             "y": {("s0", "test", 3, 3), ("s1", "treatment", 0, 0)}}
    got = {tuple(r) for r in ex.table[["item_id", "type", "first_word", "last_word"]].itertuples(index=False)}
    assert got == g and ex.unit == "mention"
    keys = list(ex.table[["item_id", "type", "first_word", "last_word"]].itertuples(index=False, name=None))
    for m in preds:
        lab = _label(m, "zero_shot")
        assert ex.table[f"{lab} · right"].tolist() == ["found" if k in found[m] else "missed" for k in keys]
        assert ex.table.loc[0, lab] == " ".join(preds[m][0][0:2])   # its tags on the first mention's words
    first = ex.table.iloc[0]
    assert first["mention"] == "chest pain" and first["words"] == "chest pain and ECG"
    assert first["entity type"] == "problem" and first["mention length (words)"] == "2"
    assert first["sentence position in the case report"] == "first third"
    by_none = g - found["x"] - found["y"]
    assert set(map(tuple, ex.table.loc[ex.table["every run wrong"] == "yes",
                                       ["item_id", "type", "first_word", "last_word"]].values.tolist())) == by_none
    only = ex.predicted_only
    assert [tuple(r) for r in only[["item_id", "type", "first_word", "last_word"]].itertuples(index=False)] == [
        ("s0", "problem", 0, 0), ("s1", "test", 3, 3)]       # y's cut "chest", and both runs' "today"
    assert only["mention"].tolist() == ["chest", "today"] and only["runs predicting it"].tolist() == [1, 2]
    assert only["x · zero_shot"].tolist() == ["no", "yes"] and only["y · zero_shot"].tolist() == ["yes", "yes"]
    summary = DIS.disagreement(cells).summary.set_index("type").loc["all"]
    assert (ex.table["runs disagree"] == "yes").sum() == summary["found by some"]
    assert (ex.table["every run wrong"] == "yes").sum() == summary["found by none"]


def test_relation_frame_counts_only_runs_that_address_the_kind():
    def tcell(model, bits, addresses):
        metrics = {f"{m}_phase2": {"value": 0.5 if m in addresses else None, "reason": "n/a"}
                   for m in ("event_span_f1", "timex_span_f1", "doctimerel_accuracy", "contains_f1")}
        values = {"doctimerel": {"doctimerel": ["BEFORE", "OVERLAP", "BEFORE", "AFTER"]},
                  "contains": {"contains_gap": ["0-20", "0-20", ">500", "21-100"]}}
        return cell("tempeval", model, [{"item_id": "doc1", "found": bits, "found_slices": values}],
                    protocol="phase2", metrics=metrics)
    cells = [tcell("closest", {"contains": "1100", "doctimerel": "0000"}, {"contains_f1"}),
             tcell("other", {"contains": "1010", "doctimerel": "0110"}, {"contains_f1", "doctimerel_accuracy"})]
    ex = EX.explorer(cells, "tempeval")
    kind = ex.table.groupby("kind", sort=False)
    assert kind["DocTimeRel class"].agg(list).to_dict() == {"doctimerel": ["BEFORE", "OVERLAP", "BEFORE", "AFTER"],
                                                           "contains": [""] * 4}
    assert kind.get_group("contains")["CONTAINS argument distance (characters)"].tolist() == [
        "0-20", "0-20", ">500", "21-100"]
    t = ex.table.set_index(["kind", "index"])
    closest, other = "closest · phase2", "other · phase2"
    assert t.loc[("contains", 1), closest] == "found" and t.loc[("contains", 1), other] == "missed"
    assert t.loc[("doctimerel", 1), closest] == "" and t.loc[("doctimerel", 1), other] == "found"   # not addressed
    assert t.loc[("doctimerel", 0), "every run wrong"] == "yes" and t.loc[("contains", 3), "every run wrong"] == "yes"
    assert (ex.table["runs disagree"] == "yes").sum() == 2


@pytest.mark.parametrize("which", ["negex", "maccrobat"])
def test_csv_columns_equal_every_runs_predictions(which, tmp_path, monkeypatch):
    monkeypatch.setattr(EX, "card_inputs", lambda card, version, data_dir=None: {})
    if which == "negex":
        cells = [c for c in _negex_cells() if c["status"] == "ok"]
    else:
        cells = _mention_cells()[2]
    card = get_card(which)
    for c in cells:
        c["version"] = card.versions[0]
    assert P.render(card, card.versions[0], cells, tmp_path) == str(P.explorer_doc(which, card.versions[0]))
    csv = tmp_path / P.explorer_doc(which, card.versions[0]).parent / f"explorer-{which}-{card.versions[0]}.csv"
    frame = pd.read_csv(csv, dtype=str, keep_default_na=False)
    for c in cells:
        col = frame[f"{c['model']} · {c['protocol']}"].tolist()
        if which == "negex":
            assert col == [r["pred"] for r in c["predictions"]]
        else:   # a gold mention's row holds the run's tags on the mention's words
            want = [" ".join(r["pred"][a:b + 1]) for r in c["predictions"]
                    for _, a, b in sorted(EX_mentions(r["gold"]), key=lambda m: (m[1], m[2], m[0]))]
            assert col == want


def EX_mentions(tags):
    from atlaslib.metrics.spans import mentions

    return mentions(tags)


def test_page_escapes_model_names_and_publish_shows_ids_only(tmp_path, monkeypatch):
    monkeypatch.setattr(EX, "card_inputs", lambda card, version, data_dir=None: INPUTS)
    cells = [c for c in _negex_cells() if c["status"] == "ok"]
    evil = '<img src=x onerror="alert(1)">'
    for c in cells:
        c["version"] = "atlas-n100-v1"
    cells[1]["model"] = evil
    card = get_card("negex")
    page = Path(tmp_path / "local") / P.explorer_doc("negex", "atlas-n100-v1").with_suffix(".md")
    P.render(card, "atlas-n100-v1", cells, tmp_path / "local")
    text = page.read_text()
    html_parts = re.sub(r"`[^`\n]*`", "", text)                  # Markdown code spans render as escaped text
    assert evil not in html_parts and "<b>0</b>" not in text      # names and item text never reach it as HTML
    assert "sentence &lt;b&gt;0&lt;/b&gt;" in text               # ... but as text, in a local build
    cfg = json.loads(re.search(r'atlas-explorer-config">(.*?)</script>', text).group(1))
    assert f"{evil} · zero_shot" in cfg["right"]
    P.render(card, "atlas-n100-v1", cells, tmp_path / "pub", publish=True)
    folder = tmp_path / "pub" / P.explorer_doc("negex", "atlas-n100-v1").parent
    published = "\n".join(f.read_text() for f in folder.iterdir())
    assert "i00" in published and "concept 0" not in published and "sentence" not in published.replace(
        "sentence length", "")
    assert "denies" not in published                              # a trigger phrase is a span of the text


def test_explorer_link_is_relative_with_its_filters(tmp_path):
    url = P.explorer_link("negex", "atlas-full-v1", tmp_path / "book" / "cards", tmp_path,
                          right="medspacy-context · zero_shot", wrong=["all-minilm-l6-v2 · probe"])
    assert url == ("../runs/negex/atlas-full-v1/explorer.html?right=medspacy-context+%C2%B7+zero_shot"
                   "&wrong=all-minilm-l6-v2+%C2%B7+probe")
    run_page = tmp_path / "book/runs/negex/v/m"
    assert P.explorer_link("negex", "v", run_page, tmp_path, hard=True) == "../explorer.html?hard=1"
    assert P.link_html("5 <b>", "x.html?a=1&b=2") == (
        '<a class="atlas-explorer-link" href="x.html?a=1&amp;b=2">5 &lt;b&gt;</a>')


def test_the_itables_bundle_becomes_a_classic_script():
    out = P.classic_bundle("var a=1;function f(){return a}export{f as ITable,a as jQuery};")
    assert "export" not in out and '"ITable": f' in out and out.startswith("(function () {")
    with pytest.raises(ValueError, match="2 export statements"):
        P.classic_bundle("export{a};export{b};")
    from itables import options

    real = P.classic_bundle(Path(options.dt_bundle).read_text(encoding="utf-8"))
    assert '"ITable": ' in real and '"jQuery": ' in real


def test_publish_explorer_holds_ids_only_and_gated_cells_never_read_text(tmp_path, monkeypatch):
    card = get_card("nli_negation")
    version = card.versions[0]
    inputs = EX.card_inputs(card.name, version)                    # the generated case set: premise, hypothesis
    ids = sorted(inputs)[:30]
    cells = [cell(card.name, m, [{"item_id": i, "gold": "contradiction", "pred": p, "pattern": "simple"}
                                 for i, p in zip(ids, preds)], version=version)
             for m, preds in (("x", ["contradiction", "entailment"] * 15), ("y", ["neutral"] * 29 + ["contradiction"]))]
    texts = {inputs[i]["premise"] for i in ids} | {inputs[i]["hypothesis"] for i in ids}

    def files(root):
        return "\n".join(f.read_text() for f in (root / P.explorer_doc(card.name, version)).parent.iterdir())
    P.render(card, version, cells, tmp_path / "local")
    P.render(card, version, cells, tmp_path / "pub", publish=True)
    assert all(t in files(tmp_path / "local") for t in texts)    # a local build shows the cases
    published = files(tmp_path / "pub")
    assert all(i in published for i in ids) and not [t for t in texts if t in published]

    def no_text(*a, **k):
        raise AssertionError("a gated cell's item text was read")
    monkeypatch.setattr(EX, "card_inputs", no_text)
    gated = [{**c, "extra": {"gated_text": True}} for c in cells]
    P.render(card, version, gated, tmp_path / "gated")
    assert not [t for t in texts if t in files(tmp_path / "gated")]


def test_the_disagreement_counts_link_to_their_filters(tmp_path):
    d = DIS.disagreement(_negex_cells())
    t = P.linked_summary(d, "negex", "atlas-n100-v1", tmp_path / "book" / "cards", tmp_path).set_index("what")
    base = "../runs/negex/atlas-n100-v1/explorer.html"
    assert t.loc["hard (every run wrong)", "count"] == f'<a class="atlas-explorer-link" href="{base}?hard=1">1</a>'
    assert t.loc["disputed (the runs do not all give the same answer)", "count"] == (
        f'<a class="atlas-explorer-link" href="{base}?disputed=1">3</a>')
    assert t.loc["items compared", "count"] == "7"
    # on the failures page the table escapes its text cells (run labels are user text); the links stay links:
    # six failures pages showed "<a class=…>422</a>" as text
    from atlaslib.pages.analysis import _table

    table = _table(t.reset_index())
    assert f'<a class="atlas-explorer-link" href="{base}?disputed=1">3</a>' in table and "&lt;a" not in table
    assert "&lt;script&gt;" in _table(pd.DataFrame({"what": ["<script>x</script>"], "count": ["1"]}))
