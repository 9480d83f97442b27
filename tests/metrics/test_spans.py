"""Strict span metrics: equal to seqeval on the same tag sequences, repair, cluster bootstrap."""
from __future__ import annotations

import random

import numpy as np
import pytest
from seqeval.metrics import classification_report, f1_score, precision_score, recall_score
from sklearn.exceptions import UndefinedMetricWarning
from sklearn.metrics import precision_recall_fscore_support
from seqeval.metrics.sequence_labeling import get_entities
from seqeval.scheme import IOB2

from atlaslib.metrics import classification, spans
from atlaslib.metrics.bootstrap import cluster_indices


def span_scores(gold, pred, types=None) -> dict:
    """The library's span scoring on all items, by its parts (:func:`atlaslib.metrics.spans.span_counts`,
    ``scores_from_totals``, ``undefined_reasons``): ``{precision, recall, f1, macro_f1, per_type: {t: {precision,
    recall, f1, support, undefined}}, undefined}``; NaN where undefined, its reason under ``undefined``."""
    counts, types = spans.span_counts(gold, pred, types)
    total = counts.sum(0)
    s = spans.scores_from_totals(total)
    why = spans.undefined_reasons(total, types)
    per_type = {t: {"precision": float(s["type_precision"][k]), "recall": float(s["type_recall"][k]),
                    "f1": float(s["type_f1"][k]), "support": int(s["type_support"][k]),
                    "undefined": why["per_type"][t]}
                for k, t in enumerate(types)}
    return {"precision": float(s["precision"]), "recall": float(s["recall"]), "f1": float(s["f1"]),
            "macro_f1": float(s["macro_f1"]), "per_type": per_type,
            "undefined": {k: v for k, v in why.items() if k != "per_type"}}


TYPES = ["problem", "treatment", "test"]
ALL_TAGS = ["O"] + [f"{p}-{t}" for t in TYPES for p in "BI"]


def random_sequences(rng: random.Random, n: int, ill_formed: bool = True):
    """Random tag sequences; with ill_formed, I-X may follow O or another type (repair cases)."""
    out = []
    for _ in range(n):
        length = rng.randint(0, 12)
        seq, prev = [], "O"
        for _ in range(length):
            r = rng.random()
            if r < 0.5:
                t = "O"
            elif r < 0.75 or not ill_formed and prev == "O":
                t = "B-" + rng.choice(TYPES)
            elif not ill_formed:
                t = "I-" + prev[2:] if prev != "O" else "O"
            else:
                t = "I-" + rng.choice(TYPES)
            seq.append(t)
            prev = t
        out.append(seq)
    return out


def perturb(rng: random.Random, gold):
    """A prediction near the gold: some tags changed, some kept (so TP, FP and FN all occur)."""
    pred = []
    for seq in gold:
        p = [t if rng.random() < 0.7 else rng.choice(ALL_TAGS) for t in seq]
        pred.append(p)
    return pred


def test_hand_computed_example():
    gold = [["B-problem", "I-problem", "O", "B-test"], ["B-treatment", "O"]]
    pred = [["B-problem", "I-problem", "O", "B-problem"], ["B-treatment", "B-test"]]
    # gold: P(0,1) T(3,3) | Tr(0,0); pred: P(0,1) P(3,3) | Tr(0,0) T(1,1)
    # TP=2 (P(0,1), Tr(0,0)); FP=2 (P(3,3), T(1,1)); FN=1 (T(3,3))
    s = span_scores(gold, pred, TYPES)
    assert s["precision"] == pytest.approx(2 / 4)
    assert s["recall"] == pytest.approx(2 / 3)
    assert s["f1"] == pytest.approx(2 * 2 / (2 * 2 + 2 + 1))
    # per type: problem 2·1/(2+1+0)=2/3, treatment 1, test 0 (TP 0, FP 1, FN 1)
    assert s["per_type"]["problem"]["f1"] == pytest.approx(2 / 3)
    assert s["per_type"]["treatment"]["f1"] == pytest.approx(1.0)
    assert s["per_type"]["test"]["f1"] == 0.0
    assert s["macro_f1"] == pytest.approx((2 / 3 + 1 + 0) / 3)


def sklearn_reference(gold, pred, types=TYPES):
    """Per-type and micro precision, recall, F1 by scikit-learn with ``zero_division=np.nan``: each mention
    (item, type, first, last) of gold or predictions is one sample, labelled with its type where gold (or the
    prediction) has it and ``-`` where not; so per type TP = in both, FP = predicted only, FN = gold only."""
    g = {(i, *m) for i, tags in enumerate(gold) for m in get_entities(tags)}
    p = {(i, *m) for i, tags in enumerate(pred) for m in get_entities(tags)}
    keys = sorted(g | p)
    y_true = [k[1] if k in g else "-" for k in keys]
    y_pred = [k[1] if k in p else "-" for k in keys]
    per = precision_recall_fscore_support(y_true, y_pred, labels=list(types), average=None, zero_division=np.nan)
    micro = precision_recall_fscore_support(y_true, y_pred, labels=list(types), average="micro",
                                            zero_division=np.nan)
    return per, micro


def test_undefined_is_nan_with_its_reason_when_nothing_is_predicted():
    gold = [["B-problem", "O"], ["O", "B-test"]]
    pred = [["O", "O"], ["O", "O"]]
    s = span_scores(gold, pred, TYPES)
    # no mention predicted: precision has no value; recall and F1 have a denominator (2 gold mentions): 0
    assert np.isnan(s["precision"]) and (s["recall"], s["f1"]) == (0.0, 0.0)
    assert s["undefined"]["precision"] == "undefined: no mention predicted"
    assert "recall" not in s["undefined"] and "f1" not in s["undefined"]
    (p, r, f, _), (mp, mr, mf, _) = sklearn_reference(gold, pred)
    assert np.isnan(mp) and (mr, mf) == (0.0, 0.0)
    with pytest.warns(UndefinedMetricWarning):             # seqeval says it is ill-defined, and writes 0
        assert precision_score(gold, pred) == 0.0
    # per type: problem and test have gold mentions (recall, F1 = 0), treatment has no mention at all
    for k, t in enumerate(TYPES):
        e = s["per_type"][t]
        assert np.isnan(e["precision"]) and np.isnan(p[k])
        assert e["undefined"]["precision"] == f"undefined: no {t} mention predicted"
        if t == "treatment":
            assert np.isnan(e["recall"]) and np.isnan(e["f1"]) and np.isnan(r[k]) and np.isnan(f[k])
            assert e["undefined"]["f1"] == "undefined: no treatment mention in gold or predictions"
        else:
            assert (e["recall"], e["f1"]) == (0.0, 0.0) == (r[k], f[k])
    # macro F1 over the declared types: treatment has no F1, so neither has the macro (the binary cards' rule)
    assert np.isnan(s["macro_f1"])
    assert s["undefined"]["macro_f1"] == "undefined: an entity type has no mention in gold or predictions (treatment)"
    # over the types seen, every type has an F1: the macro is defined, 0, as seqeval's
    assert span_scores(gold, pred)["macro_f1"] == 0.0 == f1_score(gold, pred, average="macro", zero_division=0)


def test_nothing_in_gold_or_predictions_leaves_every_metric_undefined():
    gold = pred = [["O", "O"]]
    s = span_scores(gold, pred, TYPES)
    assert all(np.isnan(s[k]) for k in ("precision", "recall", "f1", "macro_f1"))
    assert s["undefined"] == {"precision": "undefined: no mention predicted", "recall": "undefined: no gold mention",
                              "f1": "undefined: no mention in gold or predictions",
                              "macro_f1": "undefined: an entity type has no mention in gold or predictions "
                                          "(problem, treatment, test)"}
    assert np.isnan(span_scores(gold, pred)["macro_f1"])       # no type at all: no mean
    out = spans.span_metrics_with_ci(gold * 4, pred * 4, ["a", "a", "b", "b"], types=TYPES, n_resamples=20)
    for name in ("f1", "precision", "recall", "macro_f1"):
        assert np.isnan([out[name]["value"], out[name]["ci_low"], out[name]["ci_high"]]).all()
        assert out[name]["reason"] == s["undefined"][name]


def test_interval_leaves_out_resamples_where_the_metric_is_undefined():
    # report a: one treatment mention found; report b: a problem mention missed, nothing predicted there. A
    # resample of b alone has no predicted mention (precision undefined), so precision's interval is over the
    # resamples that draw a: always 1 (the rule of 0 for undefined counted the b-only resamples as 0)
    gold = [["B-treatment", "O"], ["B-problem", "O"]]
    pred = [["B-treatment", "O"], ["O", "O"]]
    out = spans.span_metrics_with_ci(gold, pred, ["a", "b"], types=TYPES, n_resamples=200, seed=1)
    boot = out["resamples"]["precision"]
    idx = cluster_indices(["a", "b"], n_resamples=200, seed=1)
    only_b = np.array([set(row) == {1} for row in idx])
    assert only_b.any() and np.isnan(boot[only_b]).all() and (boot[~only_b] == 1.0).all()
    assert (out["precision"]["value"], out["precision"]["ci_low"], out["precision"]["ci_high"]) == (1.0, 1.0, 1.0)
    assert "reason" not in out["precision"]
    # problem's precision is undefined on the whole sample: no value, no interval, and the reason
    e = out["per_type"]["problem"]["precision"]
    assert np.isnan(e["value"]) and np.isnan(e["ci_low"]) and e["reason"] == "undefined: no problem mention predicted"


# 60 items: every metric defined; 2 items (seeds picked for it): recall, a type's precision or recall, a
# type's F1 and so the macro F1 undefined
@pytest.mark.parametrize("seed,n", [(0, 60), (1, 60), (2, 60), (3, 60), (1, 2), (2, 2), (5, 2), (12, 2), (16, 2)])
def test_equals_seqeval_and_sklearn_on_random_sequences_including_repair_cases(seed, n):
    rng = random.Random(seed)
    gold = random_sequences(rng, n, ill_formed=True)
    pred = perturb(rng, gold)
    s = span_scores(gold, pred, TYPES)
    # seqeval writes 0 or 1 (zero_division) where a metric is undefined: undefined exactly where the two differ
    for name, fn in (("precision", precision_score), ("recall", recall_score), ("f1", f1_score)):
        a, b = fn(gold, pred, zero_division=0), fn(gold, pred, zero_division=1)
        assert np.isnan(s[name]) if a != b else s[name] == pytest.approx(a)
    rep0 = classification_report(gold, pred, output_dict=True, zero_division=0)
    rep1 = classification_report(gold, pred, output_dict=True, zero_division=1)
    for t in TYPES:
        for k, col in (("precision", "precision"), ("recall", "recall"), ("f1", "f1-score")):
            ours = s["per_type"][t][k]
            if t not in rep0 or rep0[t][col] != rep1[t][col]:
                assert np.isnan(ours) and k in s["per_type"][t]["undefined"]
            else:
                assert ours == pytest.approx(rep0[t][col])
        assert s["per_type"][t]["support"] == (rep0[t]["support"] if t in rep0 else 0)
    # scikit-learn with zero_division=np.nan gives the same values, NaN included
    (p, r, f, _), (mp, mr, mf, _) = sklearn_reference(gold, pred)
    np.testing.assert_allclose([s["precision"], s["recall"], s["f1"]], [mp, mr, mf])
    for k, t in enumerate(TYPES):
        np.testing.assert_allclose([s["per_type"][t][x] for x in ("precision", "recall", "f1")], [p[k], r[k], f[k]])
    # macro F1: the plain mean of the declared types' F1 (NaN when one is NaN), equal to seqeval's macro when
    # every type occurs; over the types seen (the default) always equal to it
    np.testing.assert_allclose(s["macro_f1"], np.mean(f))
    if all(t in rep0 for t in TYPES):
        assert s["macro_f1"] == pytest.approx(f1_score(gold, pred, average="macro", zero_division=0))
    assert span_scores(gold, pred)["macro_f1"] == pytest.approx(f1_score(gold, pred, average="macro",
                                                                                zero_division=0))


def test_macro_over_declared_types_is_undefined_when_one_type_is_absent():
    # only 'problem' occurs anywhere: over the declared types, treatment and test have no F1, so the macro has
    # none, as the binary cards' macro F1 has none with a class absent from gold and predictions
    gold = [["B-problem", "O"]]
    pred = [["B-problem", "B-problem"]]
    s = span_scores(gold, pred, TYPES)
    assert np.isnan(s["macro_f1"]) and s["undefined"]["macro_f1"].endswith("(treatment, test)")
    assert np.isnan(classification.from_confusion(tp=0, fp=0, tn=3, fn=0)["macro_f1"])   # class 1 absent
    # scikit-learn's macro with zero_division=np.nan would average the defined types only; the atlas does not
    (_, _, f, _), _ = sklearn_reference(gold, pred)
    assert np.nanmean(f) == pytest.approx(2 / 3) and np.isnan(np.mean(f))
    # over the types seen (the default), problem is the only type: macro = its F1, as seqeval's
    assert span_scores(gold, pred)["macro_f1"] == pytest.approx(f1_score(gold, pred, average="macro"))
    assert span_scores(gold, pred)["macro_f1"] == pytest.approx(2 / 3)


def test_mentions_match_seqeval_chunker_and_repair_cases():
    seq = ["I-problem", "I-problem", "O", "I-test", "B-test", "I-treatment", "I-treatment", "B-problem"]
    assert spans.mentions(seq) == [tuple(e) for e in get_entities(seq)]
    # I-X after O starts a mention; I-Y after X starts a Y mention
    assert spans.mentions(seq) == [("problem", 0, 1), ("test", 3, 3), ("test", 4, 4),
                                   ("treatment", 5, 6), ("problem", 7, 7)]
    repaired = spans.repair_iob2(seq)
    assert repaired == ["B-problem", "I-problem", "O", "B-test", "B-test", "B-treatment", "I-treatment",
                        "B-problem"]
    assert spans.mentions(repaired) == spans.mentions(seq)


@pytest.mark.parametrize("seed", [5, 6])
def test_repair_gives_valid_iob2_with_same_mentions(seed):
    rng = random.Random(seed)
    gold = random_sequences(rng, 80, ill_formed=True)
    pred = perturb(rng, gold)
    rg = [spans.repair_iob2(s) for s in gold]
    rp = [spans.repair_iob2(s) for s in pred]
    for s, r in zip(gold, rg):
        assert spans.mentions(r) == spans.mentions(s)
    # after repair, seqeval's strict IOB2 mode (which rejects I-X after O) scores the same as conlleval mode
    assert f1_score(rg, rp, mode="strict", scheme=IOB2) == pytest.approx(f1_score(gold, pred))
    assert span_scores(rg, rp)["f1"] == pytest.approx(f1_score(gold, pred))


def test_tags_from_mentions_roundtrip_and_errors():
    tags = spans.tags_from_mentions(6, [("test", 0, 1), ("problem", 3, 3)])
    assert tags == ["B-test", "I-test", "O", "B-problem", "O", "O"]
    assert spans.mentions(tags) == [("test", 0, 1), ("problem", 3, 3)]
    with pytest.raises(ValueError, match="overlaps"):
        spans.tags_from_mentions(4, [("test", 0, 2), ("problem", 2, 3)])
    with pytest.raises(ValueError, match="outside"):
        spans.tags_from_mentions(2, [("test", 1, 2)])


def test_bad_input_raises_named_errors():
    with pytest.raises(ValueError, match=r"predicted item 0\[1\].*not IOB2"):
        spans.span_counts([["O", "O"]], [["O", "X-problem"]])
    with pytest.raises(ValueError, match="item 0: gold has 2 tags, prediction 1"):
        spans.span_counts([["O", "O"]], [["O"]])
    with pytest.raises(ValueError, match="not in types"):
        spans.span_counts([["B-disease"]], [["O"]], types=TYPES)


def test_cluster_bootstrap_resamples_whole_documents():
    groups = ["a", "a", "a", "b", "c", "c", "d"]
    idx = cluster_indices(groups, n_resamples=200, seed=7)
    members = {g: [i for i, x in enumerate(groups) if x == g] for g in set(groups)}
    for row in idx:
        drawn = [groups[i] for i in row]
        for g, m in members.items():
            k = drawn.count(g)
            assert k % len(m) == 0                       # a document comes whole, or not at all
            assert sorted(i for i in row if groups[i] == g) == sorted(m * (k // len(m)))


def test_bootstrap_values_equal_seqeval_on_each_resample():
    rng = random.Random(11)
    gold = random_sequences(rng, 30, ill_formed=True)
    pred = perturb(rng, gold)
    groups = [f"doc{i // 3}" for i in range(30)]
    out = spans.span_metrics_with_ci(gold, pred, groups, types=TYPES, n_resamples=50, seed=3)
    idx = cluster_indices(groups, n_resamples=50, seed=3)
    for b in (0, 17, 49):
        g = [gold[i] for i in idx[b]]
        p = [pred[i] for i in idx[b]]
        assert out["resamples"]["f1"][b] == pytest.approx(f1_score(g, p))
        assert out["resamples"]["precision"][b] == pytest.approx(precision_score(g, p))
        assert out["resamples"]["recall"][b] == pytest.approx(recall_score(g, p))
        assert out["resamples"]["macro_f1"][b] == pytest.approx(f1_score(g, p, average="macro"))
    for name in ("f1", "precision", "recall", "macro_f1"):
        e = out[name]
        vals = out["resamples"][name]
        lo, hi = np.percentile(vals[np.isfinite(vals)], [2.5, 97.5])
        assert (e["ci_low"], e["ci_high"]) == pytest.approx((lo, hi))
        assert e["value"] == pytest.approx(span_scores(gold, pred, TYPES)[name])
    # same seed, same interval
    again = spans.span_metrics_with_ci(gold, pred, groups, types=TYPES, n_resamples=50, seed=3)
    assert again["f1"] == out["f1"]
