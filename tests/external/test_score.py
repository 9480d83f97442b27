"""Systems outside the atlas: `atlas export` items -> a predictions file -> `atlas score` -> a result cell.

The external system is the NegEx kit's own Python NegEx (Peter Kang's negex.py in the kit's folder), run in
its own process over the exported items, exactly as a user would; its file must score the same as the same
function handed to ``atlaslib.evaluate``. References: sklearn (macro F1, sensitivity), seqeval (entity F1),
the card's built-in TempEval baseline run.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

import atlaslib
from atlaslib import cli
from atlaslib.results import read_cell


KIT_SCRIPT = '''
import json, sys
sys.path.insert(0, sys.argv[1])
import negex
rules = negex.sortRules(open(sys.argv[1] + "/negex_triggers.txt").readlines())
with open(sys.argv[3], "w") as out:
    for line in open(sys.argv[2]):
        item = json.loads(line)
        tagger = negex.negTagger(sentence=item["sentence"], phrases=[item["concept"]], rules=rules, negP=False)
        label = "negated" if tagger.getNegationFlag() == "negated" else "affirmed"
        out.write(json.dumps({"item_id": item["item_id"], "label": label}) + "\\n")
'''


def atlas(capsys, *args) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def kit_dir(data_dir) -> Path:
    """The kit's Python NegEx folder, shipped with the kit's data."""
    return data_dir / "negex" / "negex.python"


@pytest.fixture(scope="module")
def kit(kit_dir):
    kit_py = kit_dir
    if not (kit_py / "negex.py").is_file():
        pytest.fail(f"the NegEx kit's Python NegEx is missing at {kit_py}")
    spec = importlib.util.spec_from_file_location("kit_negex", kit_py / "negex.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rules = mod.sortRules((kit_py / "negex_triggers.txt").read_text().splitlines(keepends=True))

    def predict(item):
        flag = mod.negTagger(sentence=item["sentence"], phrases=[item["concept"]], rules=rules,
                             negP=False).getNegationFlag()
        return "negated" if flag == "negated" else "affirmed"
    return predict


@pytest.fixture(scope="module")
def exported(tmp_path_factory, data_dir):
    out = tmp_path_factory.mktemp("export") / "negex"
    assert cli.main(["export", "--card", "negex", "--version", "atlas-n100-v1", "-o", str(out),
                     "--data-dir", str(data_dir)]) == 0
    return out


@pytest.fixture(scope="module")
def kit_file(exported, tmp_path_factory, kit_dir):
    """The kit's NegEx, run in its own Python process over the exported items."""
    work = tmp_path_factory.mktemp("kit")
    script, preds = work / "run_negex.py", work / "negex-kit.jsonl"
    script.write_text(KIT_SCRIPT)
    subprocess.run([sys.executable, str(script), str(kit_dir), str(exported / "items.jsonl"), str(preds)], check=True,
                   cwd=work)
    return preds


def test_export_writes_items_labels_and_manifest_hash(exported, data_dir):
    from atlaslib.cards import negex

    manifest = negex.split(negex.load_items(data_dir), "atlas-n100-v1")
    items = [json.loads(ln) for ln in (exported / "items.jsonl").read_text().splitlines()]
    assert [i["item_id"] for i in items] == manifest.test
    assert set(items[0]) == {"item_id", "concept", "sentence", "text"}  # inputs only: no gold on test
    task = json.loads((exported / "task.json").read_text())
    assert task["manifest_sha256"] == manifest.hash and task["n_items"] == 100
    assert (exported / "labels.txt").read_text().split() == ["affirmed", "negated"]


def test_kit_negex_file_scores_like_the_same_function_inside(kit, kit_file, tmp_path, capsys, data_dir, monkeypatch):
    from sklearn.metrics import f1_score, recall_score

    from atlaslib import runner

    # the key covers atlaslib's source too; hold it still so only the file can change it here
    monkeypatch.setattr(runner, "source_digest", lambda: "fixed")

    results_dir = tmp_path / "results"
    args = ["score", "--card", "negex", "--version", "atlas-n100-v1", "--predictions", kit_file,
            "--name", "negex-kit-python", "--description", "The kit's own Python NegEx", "--results-dir",
            results_dir, "--data-dir", data_dir]
    code, out, err = atlas(capsys, *args)
    assert code == 0, err
    printed = json.loads(out)
    assert printed["status"] == "scored"
    cell = read_cell(printed["result_cell"])
    assert cell["spec"]["capability"] == "external predictions"
    assert cell["spec"]["profile"]["revision"] == "sha256:" + hashlib.sha256(kit_file.read_bytes()).hexdigest()
    assert cell["model"] == "negex-kit-python" and len(cell["predictions"]) == 100
    # the same system as an adapter inside the atlas: identical metrics and intervals
    inside = atlaslib.evaluate("negex", "atlas-n100-v1", predict_fn=kit, name="negex-kit-python",
                               data_dir=data_dir)
    assert inside["metrics"] == cell["metrics"]
    # independent reference for the point estimates
    gold = [p["gold"] == "negated" for p in cell["predictions"]]
    pred = [p["pred"] == "negated" for p in cell["predictions"]]
    assert cell["metrics"]["macro_f1_zero_shot"]["value"] == pytest.approx(f1_score(gold, pred, average="macro"))
    assert cell["metrics"]["sensitivity_zero_shot"]["value"] == pytest.approx(recall_score(gold, pred))
    assert cell["metrics"]["roc_auc_zero_shot"]["value"] is None  # labels only
    # unchanged file: served from the cell; a changed file re-scores
    code, out, _ = atlas(capsys, *args)
    assert json.loads(out)["status"] == "cached"
    lines = kit_file.read_text().splitlines()
    first = json.loads(lines[0])
    first["label"] = "affirmed" if first["label"] == "negated" else "negated"
    changed = tmp_path / "changed.jsonl"
    changed.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    code, out, _ = atlas(capsys, *[changed if a == kit_file else a for a in args])
    again = read_cell(json.loads(out)["result_cell"])
    assert json.loads(out)["status"] == "scored"
    assert again["metrics"]["macro_f1_zero_shot"] != cell["metrics"]["macro_f1_zero_shot"]


# -- bad files: one clear error each, exit code 2, no cell -----------------------------------------------

def _bad(tmp_path, capsys, data_dir, text: str, version: str = "atlas-n100-v1", card: str = "negex",
         name: str = "bad.jsonl") -> str:
    f = tmp_path / name
    f.write_text(text)
    results_dir = tmp_path / "results"
    code, _, err = atlas(capsys, "score", "--card", card, "--version", version, "--predictions", f, "--name", "x",
                         "--results-dir", results_dir, "--data-dir", data_dir)
    assert code == 2
    assert not results_dir.exists() or not any(results_dir.rglob("*.json"))
    assert len(err.strip().splitlines()) == 1 and str(f) in err
    return err


def test_missing_id(kit_file, tmp_path, capsys, data_dir):
    lines = kit_file.read_text().splitlines()
    gone = json.loads(lines[4])["item_id"]
    err = _bad(tmp_path, capsys, data_dir, "\n".join(lines[:4] + lines[5:]) + "\n")
    assert "1 test item(s) have no prediction" in err and gone in err


def test_duplicate_id(kit_file, tmp_path, capsys, data_dir):
    lines = kit_file.read_text().splitlines()
    err = _bad(tmp_path, capsys, data_dir, "\n".join(lines + [lines[2]]) + "\n")
    assert f"row 101: item id {json.loads(lines[2])['item_id']!r} appears again (first at row 3)" in err


def test_unknown_label_names_row_and_id_without_input_text(kit_file, exported, tmp_path, capsys, data_dir):
    lines = kit_file.read_text().splitlines()
    row = json.loads(lines[6])
    row["label"] = "maybe"
    err = _bad(tmp_path, capsys, data_dir, "\n".join(lines[:6] + [json.dumps(row)] + lines[7:]) + "\n")
    assert f"row 7 (id {row['item_id']!r}): label 'maybe' is not one of affirmed, negated" in err
    item = json.loads((exported / "items.jsonl").read_text().splitlines()[6])
    assert item["sentence"] not in err and item["concept"] not in err


def test_malformed_line(kit_file, tmp_path, capsys, data_dir):
    lines = kit_file.read_text().splitlines()
    err = _bad(tmp_path, capsys, data_dir, "\n".join(lines[:9] + ['{"item_id": "negex-0001", label'] + lines[10:]))
    assert "row 10: not valid JSON" in err


def test_empty_file(tmp_path, capsys, data_dir):
    err = _bad(tmp_path, capsys, data_dir, "")
    assert "empty: expected one prediction per test item of negex atlas-n100-v1 (100 items)" in err


def test_another_versions_ids(tmp_path, capsys, data_dir):
    from atlaslib.cards import negex

    items = negex.load_items(data_dir)
    full = negex.split(items, "atlas-full-v1").test
    text = "".join(json.dumps({"item_id": i, "label": "affirmed"}) + "\n" for i in full)
    err = _bad(tmp_path, capsys, data_dir, text)
    assert "are not test items of negex atlas-n100-v1 (they are test items of negex atlas-full-v1" in err


def test_wrong_number_of_tags(tmp_path, capsys, data_dir):
    from atlaslib.external.tasks import load_split

    s = load_split("maccrobat", "atlas-n100-v1", "test", data_dir)
    rows = [{"item_id": r["item_id"], "tags": ["O"] * len(r["words"])} for r in s.records]
    rows[3]["tags"].append("O")
    err = _bad(tmp_path, capsys, data_dir, "".join(json.dumps(r) + "\n" for r in rows), card="maccrobat")
    n = len(s.records[3]["words"])
    assert f"row 4 (id {rows[3]['item_id']!r}): {n + 1} tags for {n} words" in err


# -- the other cards ---------------------------------------------------------------------------------------

def test_maccrobat_conll_scores_like_seqeval(tmp_path, capsys, data_dir):
    from seqeval.metrics import f1_score
    from seqeval.scheme import IOB2

    out = tmp_path / "export"
    assert cli.main(["export", "--card", "maccrobat", "--version", "atlas-n100-v1", "-o", str(out),
                     "--data-dir", str(data_dir)]) == 0
    capsys.readouterr()
    # a toy system: every word seen as a problem in a training sentence is tagged B-problem
    train = out / "train"
    assert cli.main(["export", "--card", "maccrobat", "--version", "atlas-n100-v1", "--split", "train", "-o",
                     str(train), "--data-dir", str(data_dir)]) == 0
    capsys.readouterr()
    seen = {w for r in map(json.loads, (train / "items.jsonl").read_text().splitlines())
            for w, t in zip(r["words"], r["tags"]) if t == "B-problem"}
    blocks = (out / "items.conll").read_text().strip().split("\n\n")
    conll = "\n\n".join("\n".join([b.split("\n")[0]] + [f"{w}\t{'B-problem' if w in seen else 'O'}"
                                                         for w in b.split("\n")[1:]]) for b in blocks) + "\n"
    pred_file = tmp_path / "toy.conll"
    pred_file.write_text(conll)
    code, printed, err = atlas(capsys, "score", "--card", "maccrobat", "--version", "atlas-n100-v1", "--predictions",
                               pred_file, "--name", "toy", "--trained-on", "maccrobat-train", "--results-dir",
                               tmp_path / "results", "--data-dir", data_dir)
    assert code == 0, err
    cell = read_cell(json.loads(printed)["result_cell"])
    gold = [p["gold"] for p in cell["predictions"]]
    pred = [p["pred"] for p in cell["predictions"]]
    assert cell["metrics"]["entity_f1_zero_shot"]["value"] == pytest.approx(
        f1_score(gold, pred, mode="strict", scheme=IOB2))
    # trained on the card's data: flagged like a profile would be, with the dataset it names (Card.overlap)
    assert cell["overlap"] == ["maccrobat-train"]


def test_nli_csv_runs_through_the_challenge(tmp_path, capsys, data_dir):
    from atlaslib.cards import nli_negation

    cases = nli_negation.default_nli_negation_cases()
    f = tmp_path / "nli.csv"
    f.write_text("item_id,label\n" + "".join(f"{c.case_id},{'entailment' if i % 3 else 'abstention'}\n"
                                             for i, c in enumerate(cases)))
    code, printed, err = atlas(capsys, "score", "--card", "nli_negation", "--version", "builtin-v1",
                               "--predictions", f, "--name", "mostly-entailment", "--results-dir",
                               tmp_path / "results", "--data-dir", data_dir)
    assert code == 0, err
    cell = read_cell(json.loads(printed)["result_cell"])
    labels = ["entailment" if i % 3 else None for i in range(len(cases))]
    expected = nli_negation.score_predictions(cases, labels)
    assert cell["metrics"]["aggregate_accuracy_zero_shot"]["value"] == pytest.approx(expected.aggregate_accuracy.value)
    assert cell["metrics"]["false_entailment_rate_zero_shot"]["ci_high"] == pytest.approx(
        expected.false_entailment_rate.ci_high)
    assert cell["spec"]["capability"] == "external predictions"


def test_tempeval_anafora_folder_scores_like_the_builtin_baseline(tmp_path, capsys, data_dir):
    from atlaslib.cards import run as card_run
    from atlaslib.cards.tempeval import anafora_io, baselines

    out = tmp_path / "export"
    assert cli.main(["export", "--card", "tempeval", "--version", "synthetic-v1", "-o", str(out)]) == 0
    capsys.readouterr()
    docs = anafora_io.read_corpus(out / "anafora", xml_name_regex=r"[.]xml$")
    system = [baselines.with_closest(d) for d in docs]  # what the built-in closest baseline does, done outside
    for d in system:
        d.annotator = "system"
    anafora_io.write_corpus(system, tmp_path / "pred")
    code, printed, err = atlas(capsys, "score", "--card", "tempeval", "--version", "synthetic-v1", "--protocol",
                               "phase2", "--predictions", tmp_path / "pred", "--name", "closest-outside",
                               "--results-dir", tmp_path / "results")
    assert code == 0, err
    cell = read_cell(json.loads(printed)["result_cell"])
    builtin = card_run.run("tempeval", "synthetic-v1", "closest", "phase2", data_dir=data_dir)   # the card's own run
    for m in ("contains_f1_phase2", "contains_closure_f1_phase2"):
        assert cell["metrics"][m] == builtin["metrics"][m]
    assert cell["metrics"]["event_span_f1_phase2"]["value"] is None  # given in phase 2
    # a document missing from the folder: one error, no cell
    (tmp_path / "results2").mkdir()
    import shutil
    shutil.rmtree(tmp_path / "pred" / system[0].doc_id)
    code, _, err = atlas(capsys, "score", "--card", "tempeval", "--version", "synthetic-v1", "--predictions",
                         tmp_path / "pred", "--name", "x", "--results-dir", tmp_path / "results2")
    assert code == 2 and system[0].doc_id in err and not any((tmp_path / "results2").iterdir())


def test_external_cells_render_in_the_book(kit_file, tmp_path, capsys, data_dir):
    from atlaslib import book
    from atlaslib.cards import get_card

    paths = book.BuildPaths(results=tmp_path / "results", runs=tmp_path / "runs", build=tmp_path / "_build")
    code, _, err = atlas(capsys, "score", "--card", "negex", "--version", "atlas-n100-v1", "--predictions", kit_file,
                         "--name", "kit-negex", "--results-dir", paths.results, "--data-dir", data_dir)
    assert code == 0, err
    src, _ = book.render_site(paths, cards=[get_card("negex")])
    page = (src / "book" / "cards" / "negex.md").read_text()
    row = next(ln for ln in page.splitlines() if ln.replace("<wbr>", "").startswith("| kit-negex |"))
    assert "results/negex/atlas-n100-v1/kit-negex/zero_shot.json" in row and "notebook" not in row
    assert "external predictions" in row
    assert "scored by `atlas score`" in (src / "book" / "models" / "kit-negex.md").read_text()


def test_scores_feed_roc_auc_and_names_stay_apart(tmp_path, data_dir):
    from sklearn.metrics import roc_auc_score

    from atlaslib.external import PredictionsError

    def scored(item):
        p = 0.9 if " no " in f" {item['sentence'].lower()} " else 0.2
        return ("negated" if p > 0.5 else "affirmed", p)

    cell = atlaslib.evaluate("negex", "atlas-n100-v1", predict_fn=scored, name="says-no", data_dir=data_dir)
    gold = [p["gold"] == "negated" for p in cell["predictions"]]
    assert cell["metrics"]["roc_auc_zero_shot"]["value"] == pytest.approx(
        roc_auc_score(gold, [p["score"] for p in cell["predictions"]]))
    with pytest.raises(PredictionsError, match="no score, while other rows have one"):
        atlaslib.evaluate("negex", "atlas-n100-v1", data_dir=data_dir,
                          predict_fn=lambda item: scored(item) if item["item_id"] != "negex-0014" else "affirmed")
    with pytest.raises(ValueError, match="'majority' is a model the atlas runs itself"):
        atlaslib.evaluate("negex", "atlas-n100-v1", predict_fn=scored, name="majority", data_dir=data_dir)


def test_a_card_without_an_external_loader_is_one_clear_error(tmp_path, capsys, toy_registered):
    """A registered card that declares no way to take outside predictions (the toy card): `atlas export`
    names the card and where a loader goes, exit 2, no traceback."""
    from tests import toy_card as toy

    code = cli.main(["export", "--card", "toy", "--version", toy.VERSION, "--output", str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "card toy takes no outside predictions" in err and "negex" in err
