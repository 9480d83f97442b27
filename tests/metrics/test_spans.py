"""Strict span metrics: equal to seqeval on the same tag sequences, repair, cluster bootstrap."""
from __future__ import annotations

import random

import numpy as np
import pytest
from seqeval.metrics import classification_report, f1_score, precision_score, recall_score
from seqeval.metrics.sequence_labeling import get_entities
from seqeval.scheme import IOB2

from atlaslib.metrics import spans
from atlaslib.metrics.bootstrap import cluster_indices

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
    s = spans.span_scores(gold, pred, TYPES)
    assert s["precision"] == pytest.approx(2 / 4)
    assert s["recall"] == pytest.approx(2 / 3)
    assert s["f1"] == pytest.approx(2 * 2 / (2 * 2 + 2 + 1))
    # per type: problem 2·1/(2+1+0)=2/3, treatment 1, test 0 (TP 0, FP 1, FN 1)
    assert s["per_type"]["problem"]["f1"] == pytest.approx(2 / 3)
    assert s["per_type"]["treatment"]["f1"] == pytest.approx(1.0)
    assert s["per_type"]["test"]["f1"] == 0.0
    assert s["macro_f1"] == pytest.approx((2 / 3 + 1 + 0) / 3)


def test_precision_zero_when_nothing_predicted():
    gold = [["B-problem", "O"], ["O", "B-test"]]
    pred = [["O", "O"], ["O", "O"]]
    s = spans.span_scores(gold, pred, TYPES)
    assert (s["precision"], s["recall"], s["f1"], s["macro_f1"]) == (0.0, 0.0, 0.0, 0.0)
    assert precision_score(gold, pred) == 0.0  # seqeval agrees (zero_division -> 0)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_equals_seqeval_on_random_sequences_including_repair_cases(seed):
    rng = random.Random(seed)
    gold = random_sequences(rng, 60, ill_formed=True)
    pred = perturb(rng, gold)
    s = spans.span_scores(gold, pred, TYPES)
    assert s["precision"] == pytest.approx(precision_score(gold, pred))
    assert s["recall"] == pytest.approx(recall_score(gold, pred))
    assert s["f1"] == pytest.approx(f1_score(gold, pred))
    assert s["macro_f1"] == pytest.approx(f1_score(gold, pred, average="macro"))
    rep = classification_report(gold, pred, output_dict=True, zero_division=0)
    for t in TYPES:
        if t in rep:
            assert s["per_type"][t]["f1"] == pytest.approx(rep[t]["f1-score"])
            assert s["per_type"][t]["precision"] == pytest.approx(rep[t]["precision"])
            assert s["per_type"][t]["recall"] == pytest.approx(rep[t]["recall"])
            assert s["per_type"][t]["support"] == rep[t]["support"]


def test_macro_only_over_types_present():
    # only 'problem' occurs anywhere: macro = its F1, not diluted by absent types
    gold = [["B-problem", "O"]]
    pred = [["B-problem", "B-problem"]]
    s = spans.span_scores(gold, pred, TYPES)
    assert s["macro_f1"] == pytest.approx(f1_score(gold, pred, average="macro"))
    assert s["macro_f1"] == pytest.approx(2 / 3)


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
    assert spans.span_scores(rg, rp)["f1"] == pytest.approx(f1_score(gold, pred))


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
        lo, hi = np.percentile(out["resamples"][name], [2.5, 97.5])
        assert (e["ci_low"], e["ci_high"]) == pytest.approx((lo, hi))
        assert e["value"] == pytest.approx(spans.span_scores(gold, pred, TYPES)[name])
    # same seed, same interval
    again = spans.span_metrics_with_ci(gold, pred, groups, types=TYPES, n_resamples=50, seed=3)
    assert again["f1"] == out["f1"]
