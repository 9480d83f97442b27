import json
import subprocess
import sys

import pytest

from atlaslib.cards import negex
from atlaslib.metrics.classification import majority_macro_f1
from atlaslib.cards.run import CardRun


@pytest.fixture(scope="module")
def rows(data_dir):
    return negex.load_rows(data_dir)


@pytest.fixture(scope="module")
def items(rows):
    return negex.items_from_rows(rows)


def test_counts_and_dropped_rows(rows, items):
    assert len(rows) == 2376
    assert rows["decision"].value_counts().to_dict() == {"affirmed": 1885, "negated": 491}
    dropped = rows.loc[~rows["concept_found"], "number"].tolist()
    assert dropped == [562, 627, 700, 795, 831, 860, 1290, 1376, 2080, 2186, 2281]
    assert len(items) == 2365 and items["item_id"].is_unique


def test_card_examples(items):
    by_id = items.set_index("item_id")
    assert by_id.loc["negex-0003", "concept"] == "air hunger"
    assert by_id.loc["negex-0003", "text"] == "Denies shortness of breath, stridor, or [entity] AIR HUNGER [entity]."
    assert by_id.loc["negex-1663", "text"] == "No [entity] WEAKNESS [entity]."          # kit: 'No   WEAKNESS.'
    assert by_id.loc["negex-0002", "text"] == "There is trace [entity] PULMONIC REGURGITATION [entity]."
    assert negex.option_prompts(by_id.loc[["negex-0003"]].reset_index())[0] == (
        'Sentence: Denies shortness of breath, stridor, or AIR HUNGER.\n'
        'Question: In this sentence, is "air hunger" negated (stated as absent)?\nAnswer:')


@pytest.mark.parametrize("sentence,concept,expected", [
    # the upper-case occurrence wins over an earlier lower-case one
    ("pain in chest; no CHEST PAIN now", "chest pain", "pain in chest; no [entity] CHEST PAIN [entity] now"),
    ("chest pain, then no CHEST PAIN", "chest pain", "chest pain, then no [entity] CHEST PAIN [entity]"),
    # no upper-case occurrence: the first one
    ("Fever and fever again", "fever", "[entity] Fever [entity] and fever again"),
    # whitespace runs (incl. tabs/newlines) collapse, also inside the concept
    ("No \t  ACUTE\n  DISTRESS .", "acute  distress", "No [entity] ACUTE DISTRESS [entity] ."),
    # digits/punctuation only count as upper case when a letter is present
    ("T4 and t4", "t4", "[entity] T4 [entity] and t4"),
    # report headers stay
    ("IMPRESSION: No EFFUSION.", "effusion", "IMPRESSION: No [entity] EFFUSION [entity]."),
])
def test_marking_rule(sentence, concept, expected):
    assert negex.mark(sentence, concept) == expected


def test_marking_refuses_missing_concept():
    with pytest.raises(negex.NegexDataError, match="does not occur"):
        negex.mark("No fever.", "cough")


def test_sentence_key_groups_copies_of_a_sentence():
    a = negex.sentence_key("Denies SHORTNESS OF BREATH, stridor, or air hunger.")
    b = negex.sentence_key("Denies shortness of  breath, stridor, or AIR HUNGER. ")
    assert a == b != negex.sentence_key("Denies stridor.")


def test_bad_file_names_row_and_expectation(tmp_path):
    p = tmp_path / "kit.txt"
    p.write_text('1\tfever\tNo FEVER.\tNegated\r\n2\tcough\tCOUGH.\tMaybe\r\n', newline="")
    with pytest.raises(negex.NegexDataError, match=r"kit.txt: row 2: column 4 \(decision\).*'Maybe'"):
        negex.read_rows(p)
    p.write_text('1\tfever\tNo FEVER.\r\n', newline="")
    with pytest.raises(negex.NegexDataError, match="row 1: expected 4 TAB-separated columns"):
        negex.read_rows(p)


def test_quoted_fields_are_unquoted(tmp_path):
    p = tmp_path / "kit.txt"
    p.write_text('7\t"a ""quoted"" thing"\t"He said ""no A ""QUOTED"" THING""\tthen"\tAffirmed\r\n', newline="")
    r = negex.read_rows(p)
    assert r.loc[0, "concept"] == 'a "quoted" thing' and r.loc[0, "sentence"].endswith("\tthen")


@pytest.mark.parametrize("version", negex.VERSIONS)
def test_split_invariants(items, version):
    m = negex.split(items, version)
    keys = items.set_index("item_id")["sentence_key"]
    assert len(m.train) == 500
    assert not set(keys[m.train]) & set(keys[m.test])
    assert len(m.train) + len(m.test) + len(m.excluded) == 2365
    assert len(set(m.train) | set(m.test) | set(m.excluded)) == 2365
    train_counts = items.set_index("item_id").loc[m.train, "decision"].value_counts()
    assert abs(train_counts["negated"] / 500 - 491 / 2365) < 0.01  # stratified


def test_versions_relate_as_specified(items):
    n100, full = negex.split(items, "atlas-n100-v1"), negex.split(items, "atlas-full-v1")
    test_counts = items.set_index("item_id").loc[n100.test, "decision"].value_counts().to_dict()
    assert test_counts == {"negated": 21, "affirmed": 79}
    assert n100.train == full.train
    assert set(n100.test) <= set(full.test)
    keys = items.set_index("item_id")["sentence_key"]
    train_keys = set(keys[full.train])
    assert set(full.test) == {i for i in items["item_id"] if keys[i] not in train_keys}
    # frozen: the hashes of this implementation's draws
    assert (len(full.test), len(full.excluded)) == (1432, 433)


def test_majority_macro_f1_equals_closed_form(items):
    from tests.metrics.reference import macro_f1
    import numpy as np

    for version in negex.VERSIONS:
        m = negex.split(items, version)
        y = items.set_index("item_id").loc[m.test, "label"].to_numpy()
        assert macro_f1(y, np.zeros_like(y)) == pytest.approx(majority_macro_f1(int(y.sum()), int(len(y) - y.sum())))
    assert round(majority_macro_f1(21, 79), 2) == 0.44


def test_atlas_split_cli_prints_manifest(data_dir):
    out = subprocess.run([sys.executable, "-m", "atlaslib.cli", "split", "--card", "negex", "--version",
                          "atlas-n100-v1", "--data-dir", str(data_dir)], capture_output=True, text=True, check=True)
    m = json.loads(out.stdout)
    assert set(m) == {"card", "version", "seed", "hash", "train", "test", "excluded"}
    assert (m["card"], m["version"], m["seed"], len(m["test"]), len(m["train"])) == ("negex", "atlas-n100-v1", 20261006, 100, 500)


def test_phrase_cases_pick_the_phrase_and_report_predictions(items):
    import numpy as np

    frame = items.head(400)
    pred = np.ones(len(frame), int)
    got = negex.phrase_cases(frame, {"pred": pred}, "no ", n=1000)
    expected = frame[frame["sentence"].str.lower().str.contains("no ", regex=False)]
    assert got["item_id"].tolist() == expected["item_id"].tolist()
    assert set(got["predicted"]) == {"negated"}


def test_reproduction_predicts_each_item_once_and_reuses_known(rows, items):
    from atlaslib.models import load_adapter

    class Counting:
        info = {"name": "counting"}

        def __init__(self):
            self.inner, self.seen = load_adapter("negspacy-negex-kit", "predict.assertion"), []

        def predict_assertion(self, texts):
            self.seen.extend(texts)
            return self.inner.predict_assertion(texts)

    known_ids = items["item_id"].head(300).tolist()
    first = Counting()
    full = negex.reproduction(first, rows, items)
    assert len(first.seen) == 2365  # each marked item once (not once for the items and again for the rows)
    lm = {"ABSENT": 1, "PRESENT": 0, "POSSIBLE": 0}   # the kit's decisions: ABSENT is negated (1)
    known = dict(zip(known_ids, [lm[x] for x in first.inner.predict_assertion(items["text"].head(300).tolist())]))
    second = Counting()
    again = negex.reproduction(second, rows, items, known=known)
    assert len(second.seen) == 2365 - 300
    assert (full.values == again.values).all()
    assert full.loc["2,376 rows", "tn"] - full.loc["2,365 items", "tn"] == 11  # the 11 missing rows: affirmed


@pytest.mark.parametrize("out, version, model, expected", [
    ({"capability": "predict.assertion"}, "atlas-full-v1", "medspacy-context", True),
    ({"capability": "predict.assertion"}, "atlas-n100-v1", "medspacy-context", False),   # full kit version only
    ({"capability": "predict.assertion"}, "atlas-full-v1", "majority", False),           # constant answer
    ({"capability": "embed.text.pooled"}, "atlas-full-v1", "all-minilm-l6-v2", False),   # a probe is not a system
    (None, "atlas-full-v1", "medspacy-context", False),                                  # not run
])
def test_which_runs_reproduce_the_whole_kit(out, version, model, expected):
    assert negex.reproduces(out, version, model) is expected


def test_outside_systems_and_variant_runs_are_scored_by_the_cards_declared_scoring(items, data_dir, monkeypatch):
    """An outside system's cell and a variant run's cells get their metrics from the one engine under the card's
    ``SCORING``, as a notebook run does: declare another bootstrap seed and their intervals follow it (each
    equal to the engine's on the cell's own per-item counts), not the default seed's."""
    import dataclasses

    import numpy as np

    import atlaslib
    from atlaslib.cards.negex import counting
    from atlaslib.metrics import engine

    default = counting.SCORING
    other = dataclasses.replace(default, resampling=dataclasses.replace(default.resampling, seed=123))
    monkeypatch.setattr(counting, "SCORING", other)
    monkeypatch.setattr(negex, "SCORING", other)     # what CardRun.score reads: the card package's declaration
    train, test = negex.split_frames(items, negex.split(items, "atlas-n100-v1"))

    def answer(frame):     # a stand-in system: negated when the sentence says "no", scores with ties
        said = np.array(["no " in s.lower() for s in frame["sentence"]])
        score = np.round(np.where(said, 0.6, 0.4) + 0.3 * np.cos(np.arange(len(frame))), 2)
        return said.astype(int), score

    pred, score = answer(test)
    outside = atlaslib.evaluate("negex", "atlas-n100-v1", name="no-rule", data_dir=data_dir, n_resamples=200,
                                predictions=[{"item_id": i, "label": "negated" if p else "affirmed", "score": float(s)}
                                             for i, p, s in zip(test["item_id"], pred, score)])
    cell = {"card": "negex", "version": "atlas-n100-v1", "model": "no-rule", "protocol": "zero_shot", "status": "ok",
            "spec": {"card": "negex", "version": "atlas-n100-v1", "model": "no-rule", "protocol": "zero_shot",
                     "parameters": {}}, "run_key": "k"}
    run = {"predict": lambda frame: dict(zip(("pred", "score"), answer(frame))), "capability": "predict.assertion"}
    made = negex.run_variants(CardRun.of_cell(cell), run, train, test, data_dir=data_dir, n_resamples=200)
    assert made
    moved = 0
    for c in [outside, *made]:
        uc = negex.counts(c)
        assert c["metrics"] == engine.evaluate(other, uc, "zero_shot", n_resamples=200)
        f1 = c["metrics"]["macro_f1_zero_shot"]
        if f1["ci_low"] < f1["ci_high"]:      # a real interval (a variant it answers perfectly has none)
            assert c["metrics"] != engine.evaluate(default, uc, "zero_shot", n_resamples=200)
            moved += 1
    assert moved >= 2 and outside["metrics"]["roc_auc_zero_shot"]["value"] is not None


def test_a_fine_tune_through_the_contract_is_the_books_row_over_its_seeds(items, data_dir, tmp_path, monkeypatch):
    """``cards.run.run`` of a NegEx fine-tune gives the notebook's row: the mean over the training seeds with the
    two-level interval (:meth:`CardRun.score` of the notebook's records of the same run), every seed's predictions in
    ``extra.seed_runs``, not the first seed's metrics alone. A tiny encoder, three seeds of one epoch, on 24
    train and 10 test items of the n100 split."""
    import dataclasses

    import numpy as np

    from atlaslib.cards.run import CardRun, run
    from atlaslib.protocols import finetune as ft
    from atlaslib.protocols import finetune_cache as ft_cache
    from tests.protocols.test_finetune import RECIPE
    from tests.tiny_models import tiny_encoder

    monkeypatch.setenv(ft_cache.CACHE_ENV, str(tmp_path / "ftcache"))
    monkeypatch.delenv(ft.RETRAIN_ENV, raising=False)
    monkeypatch.setenv("ATLAS_PROGRESS", "off")
    monkeypatch.setattr(negex.FAMILY, "recipe", {**RECIPE, "max_length": 64, "epochs": 1, "seeds": [7, 8, 9]})
    full = negex.split(items, "atlas-n100-v1")
    train, test = negex.split_frames(items, full)
    train, test = train[train.text.str.len() < 90].head(24), test[test.text.str.len() < 90].head(10)
    small = dataclasses.replace(full, train=train["item_id"].tolist(), test=test["item_id"].tolist())
    monkeypatch.setattr(negex, "split", lambda items, version: small)   # run() splits through the package
    encoder = str(tiny_encoder(tmp_path))

    cell = run("negex", "atlas-n100-v1", encoder, "finetune", data_dir=data_dir, parameters={"n_resamples": 50})
    train, test = negex.split_frames(items, small)
    out = negex.run_protocol(encoder, "finetune", train, test, data_dir=data_dir)   # the notebook's path
    notebook = CardRun("negex", "atlas-n100-v1", encoder, "finetune", parameters={"n_resamples": 50})
    book = notebook.score(negex.scored_records(test, out, data_dir=data_dir))
    assert cell["status"] == "ok" and cell["metrics"] == book
    auc = cell["metrics"]["roc_auc_finetune"]
    per = [notebook.seed_scores[s]["metrics"]["roc_auc_finetune"]["value"] for s in (7, 8, 9)]
    assert per[0] != np.mean(per)   # the seeds disagree: the first seed alone is another number
    assert auc["seeds"]["n_seeds"] == 3 and auc["value"] == pytest.approx(np.mean(per))
    assert [r["seed"] for r in cell["extra"]["seed_runs"]] == [7, 8, 9]
    for mine, theirs in zip(cell["extra"]["seed_runs"], out["seed_runs"]):
        assert [p["pred"] for p in mine["predictions"]] == [negex.LABELS[int(p)] for p in theirs["pred"]]
        assert mine["unit_counts"] == notebook.seed_scores[theirs["seed"]]["unit_counts"]   # sentence groups too
    assert [p["item_id"] for p in cell["predictions"]] == test["item_id"].tolist()
    assert cell["seeds"] == {"split": full.seed, "bootstrap": 20261006, "finetune": [7, 8, 9]}


def test_the_cells_records_are_the_runs_records_rounded(items, data_dir):
    """The notebook builds a run's records once at full precision and stores them rounded (:func:`negex.rounded`):
    the same rows with each score rounded to six digits; a run without scores is unchanged."""
    import numpy as np

    full_m = negex.split(items, "atlas-n100-v1")
    _, test = negex.split_frames(items, full_m)
    rng = np.random.default_rng(5)
    out = {"pred": rng.integers(0, 2, len(test)), "score": rng.random(len(test)) / 3}
    full = negex.predictions(test, out, data_dir)
    assert [r["score"] for r in full] == out["score"].tolist()
    assert negex.rounded(full) == [dict(r, score=round(float(s), 6)) for r, s in zip(full, out["score"])]
    assert any(a["score"] != b["score"] for a, b in zip(full, negex.rounded(full)))
    labels_only = negex.predictions(test, {"pred": out["pred"]}, data_dir)
    assert negex.rounded(labels_only) == labels_only
