"""MACCROBAT card: brat conversion (hand-made snippets and the real 200 reports), words, IOB2, split,
protocol orchestration and result cells."""
from __future__ import annotations

import json

import pandas as pd
import pytest
from seqeval.metrics import f1_score

from atlaslib.cards import maccrobat as mc
from atlaslib.metrics.spans import mentions
from atlaslib.splits import SplitManifest, group_disjoint_check, seed_hash


# ------------------------------------------------------------------------------- hand-made brat
TXT = "Severe abdominal pain.\n\nCT-guided biopsy was painless.\nNo fever\n"
#      0123456789012345678901 2 3456789012345678901234567890123 456789012
# line 0: 0-22 "Severe abdominal pain." ; line 1 empty (23) ; line 2: 24-54 ; line 3: 55-63
ANN = "\n".join([
    "T1\tSeverity 0 6\tSevere",
    "T2\tBiological_structure 7 16\tabdominal",
    "E1\tSign_symptom:T3 ",
    "T3\tSign_symptom 7 21\tabdominal pain",       # overlaps T2, starts at the same offset, later in file
    "T4\tSign_symptom 17 21\tpain",                 # inside T3
    "T5\tDiagnostic_procedure 24 26\tCT",
    "T6\tTherapeutic_procedure 34 40\tbiopsy",
    "T7\tSign_symptom 45 49\tpain",                 # cuts the word 'painless'
    "T8\tDisease_disorder 0 6;17 21\tSevere pain",  # discontinuous: dropped
    "T9\tSign_symptom 58 63\tfever",
    "R1\tMODIFY Arg1:T2 Arg2:E1\t",
    "A1\tPolarity E1 NEG",
    "#1\tAnnotatorNotes T1\tnote",
    "",
])


def test_parse_ann_drops_discontinuous_and_ignores_other_lines():
    ents, disc = mc.parse_ann(ANN, "x.ann", TXT)
    assert [e.tid for e in ents] == ["T1", "T2", "T3", "T4", "T5", "T6", "T7", "T9"]
    assert [d["tid"] for d in disc] == ["T8"]
    assert ents[2].line == 4 and ents[2].order == 2


def test_parse_ann_errors_name_file_and_line():
    with pytest.raises(mc.MaccrobatFormatError, match=r"x\.ann line 2: offsets 'a 5'"):
        mc.parse_ann("T1\tAge 0 1\tS\nT2\tAge a 5\tx", "x.ann")
    with pytest.raises(mc.MaccrobatFormatError, match=r"x\.ann line 1: span text 'Savere' differs"):
        mc.parse_ann("T1\tSeverity 0 6\tSavere", "x.ann", TXT)
    with pytest.raises(mc.MaccrobatFormatError, match=r"x\.ann line 1: expected"):
        mc.parse_ann("T1 Severity 0 6 Severe", "x.ann")


def test_overlap_rule_keeps_earliest_start_ties_in_file_order():
    ents, _ = mc.parse_ann(ANN, "x.ann", TXT)
    kept = [e.tid for e in mc.remove_overlaps(ents)]
    # T2 (anatomy) and T3 start together: T2 comes first in the file and wins, T3 overlaps it and is
    # dropped; T4 'pain' starts after T2 ends and stays (MACCROBAT's anatomy + 'pain' split)
    assert kept == ["T1", "T2", "T4", "T5", "T6", "T7", "T9"]
    # ties are by file order, not by T-number
    swapped = "\n".join(["T3\tSign_symptom 7 21\tabdominal pain", "T2\tBiological_structure 7 16\tabdominal"])
    assert [e.tid for e in mc.remove_overlaps(mc.parse_ann(swapped, "y.ann", TXT)[0])] == ["T3"]
    # adjacent (end == start) entities do not overlap
    adj = "T1\tSign_symptom 0 2\tSe\nT2\tSign_symptom 2 6\tvere"
    assert [e.tid for e in mc.remove_overlaps(mc.parse_ann(adj, "z.ann", TXT)[0])] == ["T1", "T2"]


def test_words_cut_at_runs_punctuation_and_mention_boundaries():
    text = "CT-guided biopsy (2x), painless"
    words = [text[a:b] for a, b in mc.words_of(text)]
    assert words == ["CT", "-", "guided", "biopsy", "(", "2x", ")", ",", "painless"]
    k = text.index("painless")
    words = [text[a:b] for a, b in mc.words_of(text, [k, k + 4])]
    assert words[-2:] == ["pain", "less"]
    odd = "a_b–c  d"
    assert [odd[a:b] for a, b in mc.words_of(odd)] == ["a", "_", "b", "–", "c", "d"]


def test_convert_document_sentences_ids_words_and_iob2():
    sents, ents = mc.convert_document("123", 7, TXT, ANN)
    assert [s["item_id"] for s in sents] == ["maccrobat-d007-s000", "maccrobat-d007-s001", "maccrobat-d007-s002"]
    assert [s["text"] for s in sents] == ["Severe abdominal pain.", "CT-guided biopsy was painless.", "No fever"]
    assert [s["offset"] for s in sents] == [0, 24, 55]
    s0, s1, s2 = sents
    # T3 'abdominal pain' lost to the anatomy entity T2 (unmapped -> O); only 'pain' (T4) is a problem
    assert s0["words"] == ["Severe", "abdominal", "pain", "."]
    assert s0["tags"] == ["O", "O", "B-problem", "O"]
    assert s1["words"] == ["CT", "-", "guided", "biopsy", "was", "pain", "less", "."]
    assert s1["tags"] == ["B-test", "O", "O", "B-treatment", "O", "B-problem", "O", "O"]
    assert s1["mentions"] == [("test", 0, 0), ("treatment", 3, 3), ("problem", 5, 5)]
    assert s2["tags"] == ["O", "B-problem"]
    f = pd.DataFrame(ents)
    assert f.set_index("tid").loc["T8", "discontinuous"]
    assert list(f[f.kept].tid) == ["T1", "T2", "T4", "T5", "T6", "T7", "T9"]
    assert f.set_index("tid").loc["T7", "sentence"] == 1


def test_multiword_mention_iob2_and_crossing_line_is_an_error():
    txt = "urine analysis normal\n"
    sents, _ = mc.convert_document("1", 0, txt, "T1\tDiagnostic_procedure 0 14\turine analysis")
    assert sents[0]["tags"] == ["B-test", "I-test", "O"]
    with pytest.raises(mc.MaccrobatFormatError, match="line 1: mention T1 .* crosses a sentence"):
        mc.convert_document("1", 0, "ab\ncd\n", "T1\tSign_symptom 0 5\tab cd")


# ------------------------------------------------------------------------------- the real data
# (the corpus and manifest fixtures are tests/cards/conftest.py's)
def test_pinned_files():
    assert len(mc.FILES) == 400 and len(mc.PMIDS) == 200
    assert mc.SHA256SUMS_DIGEST == "ec6efc081d435abe9d06144dcf987b7af31bedc0e8c898de76e6744d2950331a"
    f = next(f for f in mc.FILES if f.name.endswith("15939911.txt"))
    assert f.sha256 == "117f9cba85ff7a90129c2245436058823247556b67e435417d66ea65f83133cb"
    assert f.url == ("https://raw.githubusercontent.com/Saieiei/NLP/f2b522984cc621d5c7e00fbce02ddeee2a5b8077/"
                     "MACCROBAT2020/15939911.txt")


def test_real_counts_reproduce_the_reference(corpus):
    items = corpus.items
    assert len(items) == 4541
    assert items["item_id"].is_unique and items["document"].nunique() == 200
    counts = {t: sum(1 for ms in items["mentions"] for m in ms if m[0] == t) for t in mc.TYPES}
    assert counts == {"problem": 4656, "treatment": 2098, "test": 4574}
    a = mc.audit(corpus)
    assert a["summary"]["match"].all()
    g = a["groups"]
    assert list(g["before_overlap_rule"]) == [4738, 2116, 4587]      # PROVENANCE raw counts
    assert list(g["discontinuous_dropped"]) == [6, 0, 11]
    assert set(items["tags"].explode().dropna()) == {"O", "B-problem", "I-problem", "B-treatment", "I-treatment",
                                                     "B-test", "I-test"}
    # tags and mentions agree everywhere
    assert all(mentions(t) == m for t, m in zip(items["tags"], items["mentions"]))


def test_item_id_convention_and_card_examples(corpus):
    idx = corpus.items.set_index("item_id")
    assert idx.loc["maccrobat-d002-s005", "text"].startswith("One month earlier he had undergone a laparotomy")
    assert idx.loc["maccrobat-d000-s005", "text"].startswith("The anterior tricuspid valve leaflet")
    assert idx.loc["maccrobat-d000-s000", "document"] == mc.PMIDS[0] == "15939911"

    def shown(iid):
        w = idx.loc[iid, "words"]
        return [(t, " ".join(w[a:b + 1])) for t, a, b in idx.loc[iid, "mentions"]]

    assert shown("maccrobat-d002-s005") == [("treatment", "laparotomy"), ("problem", "fistula"),
                                            ("treatment", "ileostomy"), ("problem", "pain")]
    assert shown("maccrobat-d002-s016") == [("test", "Urea"), ("test", "electrolytes"), ("test", "complement"),
                                            ("test", "urine analysis"), ("test", "microscopy")]
    assert shown("maccrobat-d000-s005") == [("problem", "elongated"), ("problem", "rudimentary")]


def test_split_invariants(corpus, manifest):
    items = corpus.items
    assert len(manifest.test) == 100 and len(manifest.train) == 500
    assert len(manifest.excluded) == len(items) - 600
    assert not group_disjoint_check(items, manifest.train, manifest.test, "document")
    assert all(i.startswith("maccrobat-d") for i in manifest.train + manifest.test)
    key = {i: seed_hash(20261006, i) for i in items["item_id"]}          # the card's documented split seed
    # test = the 100 smallest keys over all sentences
    assert max(key[i] for i in manifest.test) < min(key[i] for i in items["item_id"] if i not in manifest.test)
    # train = the 500 smallest keys among sentences of reports without a test sentence
    doc = items.set_index("item_id")["document"]
    test_docs = set(doc.loc[manifest.test])
    pool = [i for i in items["item_id"] if doc[i] not in test_docs]
    rest = [i for i in pool if i not in set(manifest.train)]
    assert max(key[i] for i in manifest.train) < min(key[i] for i in rest)
    assert mc.split(items, "atlas-n100-v1").hash == manifest.hash
    s = mc.split_summary(items, manifest)
    assert s.attrs["reports_on_both_sides"] == 0
    assert s.loc["test", "sentences"] == 100 and s.loc["train", "sentences"] == 500
    with pytest.raises(ValueError, match="unknown split version 'atlas-full-v9'"):
        mc.split(items, "atlas-full-v9")


def cell_of(out, manifest, items) -> dict:
    """The run's result cell as the notebook makes it (a CardRun finished with the card's cell parts)."""
    from atlaslib.cards.run import CardRun

    return CardRun("maccrobat", manifest.version, out.model, out.protocol).finish(**mc.outcome_parts(out, manifest, items))


def test_memorize_run_and_cell(corpus, manifest):
    out = mc.run_protocol(corpus.items, manifest, "memorize", "train_lookup", n_resamples=200)
    assert out.status == "ok" and len(out.pred) == 100
    # the card's scorer equals seqeval on the run's own tag sequences
    m = out.metrics()
    assert m["entity_f1_train_lookup"]["value"] == pytest.approx(f1_score(out.gold, out.pred))
    assert m["entity_macro_f1_train_lookup"]["value"] == pytest.approx(f1_score(out.gold, out.pred, average="macro"))
    for e in m.values():
        assert e["ci_low"] <= e["value"] <= e["ci_high"]
    cell = cell_of(out, manifest, corpus.items)
    assert set(cell["metrics"]) == {"entity_f1_train_lookup", "entity_precision_train_lookup",
                                    "entity_recall_train_lookup", "entity_macro_f1_train_lookup"}
    assert cell["split"]["hash"] == manifest.hash and cell["overlap"] == []
    assert list(mc.per_type_table(cell).index) == ["problem", "treatment", "test"]
    json.dumps(cell)
    for model, protocol in (("memorize", "zero_shot"), ("all-minilm-l6-v2", "train_lookup"), ("memorize", "x")):
        with pytest.raises(ValueError, match=f"'{model}' under protocol '{protocol}': the memorize baseline runs "
                                             f"under 'train_lookup' only, and only it does"):
            mc.run_protocol(corpus.items, manifest, model, protocol)


def test_hub_model_without_weights_is_not_run_with_overlap_marker(corpus, manifest, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from atlaslib import runner

    out = mc.run_protocol(corpus.items, manifest, "d4data/biomedical-ner-all", "zero_shot")
    # worded as the runner words the decision its stub cell records: the run is decided by one rule
    decided = runner.decide(runner.RunRequest("maccrobat", manifest.version, "d4data/biomedical-ner-all", "zero_shot"))
    assert not decided["run"] and decided["reason"].startswith("weights unavailable")
    assert (out.status, out.reason) == ("not_run", decided["reason"])
    cell = cell_of(out, manifest, corpus.items)
    assert cell["status"] == "not_run" and cell["overlap"] == ["maccrobat"]
    assert {m["reason"] for m in cell["metrics"].values()} == {f"not run: {decided['reason']}"}
    assert len(cell["metrics"]) == 4


def small_manifest(items, n_train=12, n_test=6):
    ids = items["item_id"].tolist()
    test = [i for i in ids if i.startswith("maccrobat-d000-")][:n_test]
    train = [i for i in ids if i.startswith("maccrobat-d001-")][:n_train]
    return SplitManifest(card="maccrobat", version="atlas-n100-v1", seed=mc.SEED, train=train, test=test)


def test_real_adapters_on_tiny_models(corpus, tmp_path):
    from tests.tiny_models import MACCROBAT_LABELS, tiny_encoder, tiny_token_classifier

    items = corpus.items
    m = small_manifest(items)
    ner = mc.run_protocol(items, m, str(tiny_token_classifier(tmp_path, MACCROBAT_LABELS)), "zero_shot",
                          n_resamples=50)
    assert ner.status == "ok" and len(ner.pred) == 6
    assert all(set(p) <= {"O", "B-problem", "I-problem", "B-treatment", "I-treatment", "B-test", "I-test"}
               for p in ner.pred)
    assert ner.metrics()["entity_f1_zero_shot"]["value"] == pytest.approx(f1_score(ner.gold, ner.pred))
    ner_cell = cell_of(ner, m, items)
    assert [len(r["native"]) for r in ner_cell["predictions"]] == [len(g) for g in ner.gold]
    probe = mc.run_protocol(items, m, str(tiny_encoder(tmp_path)), "probe", n_resamples=50)
    assert probe.status == "ok" and probe.details["n_train_words"] == sum(
        len(w) for w in items.set_index("item_id").loc[m.train, "words"])
    cell = cell_of(probe, m, items)
    assert set(cell["metrics"]) == {"entity_f1_probe", "entity_precision_probe", "entity_recall_probe",
                                    "entity_macro_f1_probe"}
    assert cell["spec"]["capability"] == "embed.text.tokens"


def test_card_definition():
    c = mc.CARD
    assert c.name == "maccrobat" and c.versions == ("atlas-n100-v1",)
    assert c.metrics == ("entity_f1", "entity_precision", "entity_recall", "entity_macro_f1")
    assert ("atlas-n100-v1", "memorize", "train_lookup") in c.default_matrix
    assert c.notebook == "notebooks/maccrobat.md"
    assert c.protocols == ("zero_shot", "probe", "train_lookup", "finetune")
    assert [c.metric_name(b, "probe") for b in c.metrics] == [
        "entity_f1_probe", "entity_precision_probe", "entity_recall_probe", "entity_macro_f1_probe"]


def test_reproduction_rows_match_the_reference_counts(data_dir):
    rows = mc.reproduction_rows(mc.audit(mc.load_corpus(data_dir)))
    got = {r["figure"]: (r["published"], r["ours"], r["match"]) for r in rows}
    assert got["sentences (non-empty lines)"] == (4541, 4541, True)
    assert got["problem mentions"] == (4656, 4656, True)
    assert got["treatment mentions"] == (2098, 2098, True)
    assert got["test mentions"] == (4574, 4574, True)


# --------------------------------------------------------------------------------- one run path
def test_cell_metrics_come_from_the_card_scoring_and_equal_a_resample_by_resample_seqeval(corpus, manifest):
    """The notebook's metrics (``CardRun.score`` on the run's records), the cell's and the contract's are one
    computation, and they equal seqeval applied to every cluster resample of whole case reports one by one
    (the engine sums counts with a matrix product; the reference rebuilds each resample's sentences)."""
    import numpy as np
    from seqeval.metrics import precision_score, recall_score

    from atlaslib.cards.run import CardRun
    from atlaslib.metrics.bootstrap import cluster_indices, percentile_ci

    out = mc.run_protocol(corpus.items, manifest, "memorize", "train_lookup", n_resamples=40)
    run = CardRun("maccrobat", manifest.version, "memorize", "train_lookup", parameters={"n_resamples": 40})
    scored = run.score(out.records())
    assert scored == out.metrics() == run.score(mc.predict(corpus.items, manifest, "memorize", "train_lookup"))
    assert not hasattr(mc, "score") and not hasattr(mc, "metrics_of")   # no card-level scorer
    assert mc.outcome_parts(out, manifest, corpus.items, metrics=scored)["metrics"] is scored
    ref = {"f1": f1_score, "precision": precision_score, "recall": recall_score,
           "macro_f1": lambda g, p: f1_score(g, p, average="macro")}
    for k, fn in ref.items():
        boot = [fn([out.gold[i] for i in idx], [out.pred[i] for i in idx])
                for idx in cluster_indices(out.documents, 40, mc.SEED)]
        e = scored[f"entity_{k}_train_lookup"]
        assert e["value"] == pytest.approx(fn(out.gold, out.pred))
        assert (e["ci_low"], e["ci_high"]) == pytest.approx(percentile_ci(np.asarray(boot)))
    samples = run.samples()
    assert set(samples) == set(scored) and all(len(v) == 40 for v in samples.values())


def test_a_run_that_predicts_nothing_has_no_precision_and_says_why(corpus, manifest):
    """The zero-division rule is the engine's: nothing predicted leaves precision undefined (null with the
    reason), while recall and F1 (gold mentions exist) are 0."""
    out = mc.run_protocol(corpus.items, manifest, "memorize", "train_lookup", n_resamples=20)
    out.pred = [["O"] * len(g) for g in out.gold]
    m = out.metrics()
    assert m["entity_precision_train_lookup"] == {"value": None, "ci_low": None, "ci_high": None,
                                                  "reason": "undefined: no mention predicted"}
    assert m["entity_recall_train_lookup"]["value"] == 0.0 and m["entity_f1_train_lookup"]["value"] == 0.0


def test_seeded_row_is_the_mean_of_each_seeds_card_scoring(corpus, manifest):
    """A row over training seeds: each seed's metrics are the card's scoring of its records (the same case-report
    resamples as a single run's), the row's value their mean (seqeval per seed as the reference)."""
    import numpy as np

    from atlaslib.cards.run import CardRun

    out = mc.run_protocol(corpus.items, manifest, "memorize", "train_lookup", n_resamples=30)
    tags = [out.pred, [["O"] * len(g) for g in out.gold][:50] + out.gold[50:]]
    out.seed_runs = [{"seed": 7, "pred": tags[0], "details": {}}, {"seed": 8, "pred": tags[1], "details": {}}]
    out.metrics()   # every seed's records scored now
    run = CardRun("maccrobat", manifest.version, "memorize", "train_lookup", parameters={"n_resamples": 30})
    for r, t in zip(out.seed_runs, tags):
        assert r["metrics"] == run.score([dict(x, pred=p) for x, p in zip(out.records(), t)])
    f1 = out.metrics()["entity_f1_train_lookup"]
    assert f1["value"] == pytest.approx(np.mean([f1_score(out.gold, t) for t in tags]))
    assert f1["seeds"]["n_seeds"] == 2 and f1["ci_low"] <= f1["value"] <= f1["ci_high"]


def test_overlap_marker_is_the_cells_by_the_card_rule(corpus, manifest):
    """The overlap marker is written by ``CardRun.finish`` from the run's profile (the card's one rule,
    ``CARD.overlap``: entries starting with "maccrobat", any case); the card computes none itself."""
    out = mc.run_protocol(corpus.items, manifest, "memorize", "train_lookup", n_resamples=20)
    assert cell_of(out, manifest, corpus.items)["overlap"] == []
    out.profile = dict(out.profile, trained_on=["i2b2-2010", "MACCROBAT2020"])
    assert cell_of(out, manifest, corpus.items)["overlap"] == ["MACCROBAT2020"]

def test_a_fine_tune_through_the_contract_is_the_books_row_over_its_seeds(corpus, data_dir, tmp_path, monkeypatch):
    """``cards.run.run`` of a MACCROBAT fine-tune gives the notebook's row: the mean over the training seeds with
    the two-level interval (the run's own :meth:`Outcome.metrics`), each seed's tags in ``extra.seed_runs``, not
    the first seed's metrics alone. A tiny encoder, three seeds of one epoch, on the small split."""
    import numpy as np

    from atlaslib.cards.run import run
    from atlaslib.protocols import finetune as ft
    from atlaslib.protocols import finetune_cache as ft_cache
    from tests.protocols.test_finetune import RECIPE
    from tests.tiny_models import tiny_encoder

    monkeypatch.setenv(ft_cache.CACHE_ENV, str(tmp_path / "ftcache"))
    monkeypatch.delenv(ft.RETRAIN_ENV, raising=False)
    monkeypatch.setenv("ATLAS_PROGRESS", "off")
    monkeypatch.setattr(mc.runs, "FINETUNE_RECIPE", {**RECIPE, "max_length": 64, "epochs": 1, "seeds": [7, 8, 9]})
    monkeypatch.setitem(mc.CARD.adapter_options, "finetune", {"max_length": 64, "embed_cache": False})  # its loading
    m = small_manifest(corpus.items)
    monkeypatch.setattr(mc, "split", lambda items, version: m)   # run() splits through the package
    encoder = str(tiny_encoder(tmp_path))

    cell = run("maccrobat", "atlas-n100-v1", encoder, "finetune", data_dir=data_dir, parameters={"n_resamples": 50})
    out = mc.run_protocol(corpus.items, m, encoder, "finetune", n_resamples=50)   # the notebook's path
    assert cell["status"] == "ok" and out.seed_runs and cell["metrics"] == out.metrics()
    per = [r["metrics"]["entity_f1_finetune"]["value"] for r in out.seed_runs]
    assert cell["metrics"]["entity_f1_finetune"]["value"] == pytest.approx(np.mean(per))
    assert [r["seed"] for r in cell["extra"]["seed_runs"]] == [7, 8, 9]
    for mine, theirs in zip(cell["extra"]["seed_runs"], out.seed_runs):
        assert [p["pred"] for p in mine["predictions"]] == theirs["pred"]


def test_the_per_type_table_is_the_engines_and_equals_the_index_by_index_span_bootstrap():
    """The per-type table (the cell's ``extra.per_type``, the run page's :func:`per_type_table`) comes from the card's
    per-type scoring through the engine; it equals ``span_metrics_with_ci``'s per-type entries (strict IOB2 mentions, whole case
    reports drawn index by index), interval bounds to the bit, on six sentences of three reports where one type
    is never predicted (its precision undefined, said why) and one is never in gold (its recall undefined)."""
    import math

    from atlaslib.metrics.spans import span_metrics_with_ci

    a, b, c = mc.TYPES
    gold = [["B-" + a, "O"], ["B-" + a, "I-" + a], ["B-" + b, "O"], ["O", "B-" + b], ["B-" + a, "O"], ["O", "O"]]
    pred = [["B-" + a, "O"], ["B-" + a, "O"], ["O", "B-" + c], ["O", "B-" + c], ["B-" + a, "O"], ["B-" + c, "O"]]
    docs = ["r1", "r1", "r2", "r2", "r3", "r3"]
    out = mc.runs.Outcome(model="m", protocol="probe", version="atlas-n100-v1", status="ok",
                          item_ids=[f"s{i}" for i in range(6)], documents=docs, gold=gold, pred=pred, n_resamples=200)
    ref = span_metrics_with_ci(gold, pred, docs, types=mc.TYPES, n_resamples=200, seed=mc.SEED)["per_type"]
    cell = {"status": "ok", "predictions": out.records(), "spec": {"parameters": {"n_resamples": 200}}}
    got = mc.counting.per_type(cell)   # the cell's extra.per_type
    table = mc.per_type_table(dict(cell, extra={"per_type": got}))
    assert table.loc[a, "f1_low"] == got[a]["f1"]["ci_low"] and table.loc[c, "support"] == got[c]["support"] == 0
    assert list(got) == list(ref) == list(mc.TYPES)
    for t in mc.TYPES:
        assert got[t]["support"] == ref[t]["support"]
        for k in ("precision", "recall", "f1"):
            want = {x: None if math.isnan(ref[t][k][x]) else ref[t][k][x] for x in ("value", "ci_low", "ci_high")}
            assert {x: got[t][k][x] for x in want} == want, (t, k)
            assert got[t][k].get("reason") == ref[t][k].get("reason"), (t, k)
    assert got[b]["precision"]["reason"] == f"undefined: no {b} mention predicted"
    assert got[c]["recall"]["reason"] == f"undefined: no gold {c} mention"
    # by hand: 2 exact problem mentions; the cut span of the second sentence is 1 spurious and 1 missed
    assert got[a]["f1"]["value"] == pytest.approx(2 * 2 / (2 * 2 + 1 + 1))
