"""``atlas import`` of lm-eval logs: every number of the report recomputed from the logs with scikit-learn,
scipy and statsmodels; prompt drift named; clusters; one line for each kind of bad input, nothing written."""
from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.stats import binomtest
from sklearn.metrics import accuracy_score, brier_score_loss
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import proportion_confint

from atlaslib.cli import main
from atlaslib.metrics.bootstrap import DEFAULT_SEED, cluster_draws

from .logs import docs, sample, write_run

N, B = 60, 200


def _runs(tmp_path, n=N, models=("org/alpha", "org/beta", "org/gamma")):
    rng = np.random.default_rng(7)
    ds = docs(n)
    gold = rng.integers(0, 2, n)
    folders, logliks = [], {}
    for k, m in enumerate(models):
        ll = -rng.gamma(2.0, 1.0, size=(n, 2))
        ll[np.arange(n), gold] += 0.6 * k       # later models a little better
        logliks[m] = ll
        folders.append(write_run(tmp_path / "logs", m, [sample(i, ds[i], ll[i].tolist(), int(gold[i]))
                                                        for i in range(n)]))
    return folders, gold, logliks


def _import(tmp_path, capsys, *args):
    code = main(["import", *map(str, args), "-o", str(tmp_path / "out"), "--resamples", str(B)])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def test_every_number_of_the_report_is_recomputed_from_the_logs(tmp_path, capsys):
    folders, gold, ll = _runs(tmp_path)
    code, out, err = _import(tmp_path, capsys, "lm-eval", *folders)
    assert code == 0, err
    rep = json.loads((tmp_path / "out" / "report.json").read_text())
    assert rep["n_units"] == N and rep["unit"] == "document" and rep["prompt_drift"] == []
    assert {p.name for p in (tmp_path / "out").iterdir()} == {"report.json", "report.md", "leaderboard.csv",
                                                            "comparisons.csv", "ranks.csv", "items.csv"}
    idx = np.random.default_rng(DEFAULT_SEED).integers(0, N, size=(B, N))   # rows drawn with replacement
    right = {m: (v.argmax(1) == gold).astype(float) for m, v in ll.items()}
    board = {(r["run"], r["metric"]): r for r in rep["leaderboard"]}
    for m, v in ll.items():
        acc = board[(m, "acc")]
        assert acc["value"] == accuracy_score(gold, v.argmax(1))
        lo, hi = np.quantile(right[m][idx].mean(1), [0.025, 0.975])
        assert (acc["ci_low"], acc["ci_high"]) == pytest.approx((lo, hi), abs=1e-12)
        k = int(right[m].sum())
        assert (acc["exact_low"], acc["exact_high"]) == pytest.approx(proportion_confint(k, N, method="beta"), abs=1e-9)
        gl = v[np.arange(N), gold]
        assert board[(m, "loglik_gold")]["value"] == pytest.approx(gl.mean(), abs=1e-6)
        lo, hi = np.quantile(gl[idx].mean(1), [0.025, 0.975])
        assert (board[(m, "loglik_gold")]["ci_low"], board[(m, "loglik_gold")]["ci_high"]) == pytest.approx((lo, hi),
                                                                                                           abs=1e-6)
    pairs = [r for r in rep["comparisons"] if r["metric"] == "acc"]
    assert len(pairs) == 3
    for r in pairs:
        a, b_ = right[r["model_a"]], right[r["model_b"]]
        b, c = int(((a == 1) & (b_ == 0)).sum()), int(((a == 0) & (b_ == 1)).sum())
        assert (r["b"], r["c"]) == (b, c) and r["test"] == "exact McNemar"
        assert r["p_mcnemar"] == pytest.approx(binomtest(b, b + c, 0.5).pvalue if b + c else 1.0)
        d = a[idx].mean(1) - b_[idx].mean(1)
        assert (r["ci_low"], r["ci_high"]) == pytest.approx(tuple(np.quantile(d, [0.025, 0.975])), abs=1e-12)
    holm = multipletests([r["p"] for r in pairs], method="holm")[1]
    assert [r["p_holm"] for r in pairs] == pytest.approx(list(holm))
    res = np.stack([right[m][idx].mean(1) for m in ll])                     # (models, B)
    ranks = 1 + (res[None, :, :] > res[:, None, :]).sum(1)
    for k, m in enumerate(ll):
        row = next(r for r in rep["ranks"] if r["model"] == m)
        assert row["p_rank1"] == pytest.approx(np.mean(ranks[k] == 1))
        assert (row["rank_low"], row["rank_high"]) == tuple(
            int(np.quantile(ranks[k], q, method="inverted_cdf")) for q in (0.025, 0.975))
    for cal in rep["calibration"]:                                           # option log-likelihoods in resps
        v = ll[cal["run"]]
        p = np.exp(v - v.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        assert cal["brier"] == pytest.approx(brier_score_loss(right[cal["run"]], p.max(1)))
    assert json.loads(out)["runs"] == list(ll)
    assert rep["runs"][0]["settings"]["num_fewshot"] == 0 and rep["runs"][0]["harness_version"] == "0.4.13"


def test_prompt_drift_is_named_before_any_test_and_clusters_are_drawn_whole(tmp_path, capsys):
    ds = docs(30, clusters=6)
    a = [sample(i, ds[i], [-1.0, -2.0 + (i % 3)], i % 2) for i in range(30)]
    b = [sample(i, ds[i], [-1.5, -1.0 - (i % 2)], i % 2, prompt="Other prompt" if i in (3, 11) else None)
         for i in range(30)]
    fa, fb = write_run(tmp_path / "logs", "m/a", a), write_run(tmp_path / "logs", "m/b", b)
    code, out, err = _import(tmp_path, capsys, fa, fb, "--cluster", "doc.patient_id")
    assert code == 0, err
    assert "prompt differs between runs on 2 of 30 documents (doc 3, 11)" in err
    rep = json.loads((tmp_path / "out" / "report.json").read_text())
    assert [d["document"] for d in rep["prompt_drift"]] == ["3", "11"]
    md = (tmp_path / "out" / "report.md").read_text()
    assert md.index("Prompt drift") < md.index("Paired comparisons")
    assert rep["unit"] == "cluster of documents (doc.patient_id)"
    right = np.array([float(s["acc"]) for s in a])
    draws, inverse = cluster_draws([d["patient_id"] for d in ds], B, DEFAULT_SEED)
    mult = np.stack([np.bincount(row, minlength=6) for row in draws])[:, inverse]   # (B, 30)
    lo, hi = np.quantile((mult * right).sum(1) / mult.sum(1), [0.025, 0.975])
    acc = next(r for r in rep["leaderboard"] if r["run"] == "m/a" and r["metric"] == "acc")
    assert (acc["ci_low"], acc["ci_high"]) == pytest.approx((lo, hi), abs=1e-12)


def _bad(tmp_path):
    ds = docs(6)
    ok = [sample(i, ds[i], [-1.0, -2.0], 0) for i in range(6)]
    return ds, ok


def _case(name, tmp_path):
    ds, ok = _bad(tmp_path)
    other = write_run(tmp_path / "logs", "m/ok", ok)
    if name == "not a sample":
        return [other, write_run(tmp_path / "logs", "m/x", ok[:3] + [json.dumps([1, 2])] + ok[4:])], \
            "samples_negex_toy_2026-12-05T08-00-00.000000.jsonl, row 4: not an lm-eval sample"
    if name == "not JSON":
        return [other, write_run(tmp_path / "logs", "m/x", ok[:2] + ['{"doc_id": 2, "doc":'])], "row 3: not valid JSON"
    if name == "duplicate doc id":
        return [other, write_run(tmp_path / "logs", "m/x", ok + [ok[2]], effective=6)], "row 7: doc_id 2 (filter none) also at row 3"
    if name == "missing doc id":
        return [other, write_run(tmp_path / "logs", "m/x", ok[:2] + ok[3:], effective=6)], "5 document(s) logged; results_"
    if name == "metric missing":
        bad = [dict(s) for s in ok]
        bad[4]["metrics"] = ["acc"]
        del bad[4]["loglik_gold"]
        return [other, write_run(tmp_path / "logs", "m/x", bad)], "row 5: metric(s) loglik_gold missing here"
    if name == "unknown version":
        return [other, write_run(tmp_path / "logs", "m/x", ok, version="0.9.1")], "written by lm-eval 0.9.1"
    if name == "different tasks":
        return [other, write_run(tmp_path / "logs", "m/x", ok, task="other_task")], "is task 'other_task' but"
    if name == "different documents":
        ds2 = docs(8)
        return [other, write_run(tmp_path / "logs", "m/x", [sample(i, ds2[i], [-1.0, -2.0], 0) for i in range(8)])], \
            "2 of its 8 documents are not in every other log (6 shared)"
    if name == "no document shared":
        alien = [sample(i, {"text": f"other {i}"}, [-1.0, -2.0], 0) for i in range(6)]
        return [other, write_run(tmp_path / "logs", "m/x", alien)], "shares no document with"
    raise AssertionError(name)


@pytest.mark.parametrize("name", ["not a sample", "not JSON", "duplicate doc id", "missing doc id", "metric missing",
                                  "unknown version", "different tasks", "different documents",
                                  "no document shared"])
def test_bad_logs_get_one_line_naming_the_file_and_nothing_is_written(tmp_path, capsys, name):
    paths, expected = _case(name, tmp_path)
    code, out, err = _import(tmp_path, capsys, *paths)
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("atlas import: ") and "Traceback" not in err
    assert expected in err, err
    assert not (tmp_path / "out").exists() and out == ""


def test_shared_only_compares_on_the_shared_documents_and_says_so(tmp_path, capsys):
    ds = docs(8)
    a = write_run(tmp_path / "logs", "m/a", [sample(i, ds[i], [-1.0, -2.0], i % 2) for i in range(6)])
    b = write_run(tmp_path / "logs", "m/b", [sample(i, ds[i], [-2.0, -1.0], i % 2) for i in range(8)])
    code, out, err = _import(tmp_path, capsys, a, b, "--shared-only")
    assert code == 0, err
    assert "compared on the 6 shared documents; left out: m/b 2" in err
    assert json.loads(out)["n_units"] == 6


class _Log:
    def __init__(self, version, inspect_version, status):
        from types import SimpleNamespace

        self.version, self.status, self.samples = version, status, []
        self.eval = SimpleNamespace(packages={"inspect_ai": inspect_version})


@pytest.mark.parametrize("log, expected", [
    (_Log(3, "0.3.285", "success"), "Inspect log format version 3; this atlas reads version 2"),
    (_Log(2, "0.9.0", "success"), "written by inspect-ai 0.9.0; this atlas reads logs of inspect-ai 0.3.x"),
    (_Log(2, "0.3.285", "error"), "the evaluation's status is 'error'; expected a finished log ('success')"),
])
def test_an_inspect_log_of_an_unknown_version_or_unfinished_is_one_line(tmp_path, capsys, monkeypatch, log, expected):
    from atlaslib.harness import logs

    monkeypatch.setattr(logs, "_inspect_reader", lambda p: lambda path: log)
    f = tmp_path / "run.eval"
    f.write_bytes(b"PK")
    code, out, err = _import(tmp_path, capsys, "inspect", f)
    assert code == 2 and err == f"atlas import: {f}: {expected}\n" and out == ""


def test_corpus_level_metrics_are_left_out_and_named(tmp_path, capsys):
    ds = docs(6)
    rows = [sample(i, ds[i], [-1.0, -2.0], i % 2, extra={"bleu": [["ref"], "pred"],
                                                         "metrics": ["acc", "loglik_gold", "bleu"]}) for i in range(6)]
    code, out, err = _import(tmp_path, capsys, write_run(tmp_path / "logs", "m/a", rows))
    assert code == 0, err
    rep = json.loads((tmp_path / "out" / "report.json").read_text())
    assert [m["name"] for m in rep["metrics"]] == ["acc", "loglik_gold"]
    assert rep["runs"][0]["settings"]["corpus_metrics_left_out"] == ["bleu"]
    only = [dict(r, metrics=["bleu"]) for r in rows]
    for r in only:
        del r["acc"], r["loglik_gold"]
    code, out, err = _import(tmp_path / "b", capsys, write_run(tmp_path / "logs2", "m/a", only))
    assert code == 2 and "every metric (bleu) is aggregated over the corpus" in err


def test_a_cluster_field_missing_in_a_document_and_a_card_without_options_are_one_line(tmp_path, capsys):
    ds = docs(6)
    run = write_run(tmp_path / "logs", "m/a", [sample(i, ds[i], [-1.0, -2.0], 0) for i in range(6)])
    code, out, err = _import(tmp_path, capsys, run, "--cluster", "doc.ward")
    assert code == 2 and "row 1: the document has no field 'ward' (--cluster doc.ward)" in err
    code = main(["export-task", "lm-eval", str(tmp_path / "task"), "--card", "maccrobat", "--version", "atlas-n100-v1"])
    err = capsys.readouterr().err
    assert code == 2 and err == ("atlas export-task: --card maccrobat: not an option-scoring card (no answer-option "
                                 "prompt); the lm-eval and Inspect tasks are for cards whose zero-shot run scores "
                                 "answer options\n")
    assert not (tmp_path / "task").exists()
