"""The vectorised bootstraps give the intervals of the naive loop on the same resample indices.

Naive references: scikit-learn's metric functions (NegEx: item-level, stratified resamples) and seqeval
(MACCROBAT: span F1, cluster resamples by document), called once per resample on the rows that
``stratified_indices`` / ``cluster_indices`` give. Percentiles of the loop values are taken with
``np.quantile`` (linear interpolation) at the levels ``percentile_ci`` uses for 95 %: ``(1 - 0.95) / 2``
and its complement (in floating point 0.025000000000000022, not 0.025: with the literal 0.025 the
interpolated percentiles can differ in the last bit).

Equality: the four label metrics (macro F1, sensitivity, specificity, precision) agree bit for bit on
every resample and so do their intervals. ROC-AUC and the span metrics are the same quantities by
other floating-point routes (the exact Mann-Whitney U against sklearn's trapezoid; 2·TP/(2·TP+FP+FN)
against seqeval's 2PR/(P+R)), so they agree to the last bit or two: checked to 1e-15, and the AUC is
checked to be the exactly rounded rational.
"""
from __future__ import annotations

import random
from fractions import Fraction

import numpy as np
import pytest
from seqeval.metrics import f1_score as seq_f1
from seqeval.metrics import precision_score as seq_p
from seqeval.metrics import recall_score as seq_r
from seqeval.metrics.sequence_labeling import precision_recall_fscore_support as seq_prfs
from sklearn.metrics import f1_score, precision_score, recall_score, roc_auc_score

from atlaslib.cards import record
from atlaslib.cards.negex import SCORING, counts
from atlaslib.metrics import bootstrap as B
from atlaslib.metrics import engine, spans

SKLEARN = {
    "macro_f1": lambda y, p: f1_score(y, p, average="macro", labels=[0, 1], zero_division=0),
    "sensitivity": lambda y, p: recall_score(y, p, pos_label=1, zero_division=0),
    "specificity": lambda y, p: recall_score(y, p, pos_label=0, zero_division=0),
    "precision": lambda y, p: precision_score(y, p, pos_label=1, zero_division=0),
}
TYPES = ("problem", "treatment", "test")
LEVELS = [(1 - 0.95) / 2, 1 - (1 - 0.95) / 2]


def _pct(values):
    v = np.asarray(values, dtype=float)
    return tuple(np.quantile(v[np.isfinite(v)], LEVELS))


def _negex_like(n, share, seed, flip=0.15):
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < share).astype(int)
    score = (0.3 * y + 0.7 * rng.random(n)).round(2)   # the classes overlap; rounded: many ties, across them too
    pred = np.where(rng.random(n) < flip, 1 - (score >= 0.5), score >= 0.5).astype(int)
    return y, pred, score


def _engine(y, p, s, n_resamples, seed):
    """The cell metrics a NegEx run gets: its records' per-item counts under the card's declared scoring."""
    word = ("affirmed", "negated")
    recs = [record(f"i{k}", word[a], word[b], None if s is None else float(s[k])) for k, (a, b) in enumerate(zip(y, p))]
    return engine.evaluate(SCORING, counts({"predictions": recs}), "zero_shot", n_resamples=n_resamples, seed=seed)


def _naive(y, p, s, idx):
    vals = {k: np.array([fn(y[r], p[r]) for r in idx]) for k, fn in SKLEARN.items()}
    vals["roc_auc"] = np.array([roc_auc_score(y[r], s[r]) for r in idx])
    return vals


@pytest.mark.parametrize("n,share,seed", [(160, 0.2, 1), (90, 0.5, 2), (60, 0.1, 3)])
def test_negex_intervals_equal_sklearn_loop_on_the_same_indices(n, share, seed):
    y, p, s = _negex_like(n, share, seed)
    fast = _engine(y, p, s, 150, seed)
    idx = B.stratified_indices(y, 150, seed)                  # the draws of the declared resampling
    loop = _naive(y, p, s, idx)
    for name in SKLEARN:
        m = fast[f"{name}_zero_shot"]
        ref = np.asarray(loop[name])
        lo, hi = _pct(ref)
        assert (m["ci_low"], m["ci_high"]) == (lo, hi), name                 # bit for bit
        assert m["value"] == SKLEARN[name](y, p), name
    assert fast["macro_f1_zero_shot"]["ci_low"] < fast["macro_f1_zero_shot"]["ci_high"]   # a real interval
    m = fast["roc_auc_zero_shot"]
    lo, hi = _pct(loop["roc_auc"])
    assert abs(m["ci_low"] - lo) <= 1e-15 and abs(m["ci_high"] - hi) <= 1e-15
    assert abs(m["value"] - roc_auc_score(y, s)) <= 1e-15


def test_negex_resample_values_row_by_row_and_auc_is_exact():
    from tests.metrics import reference as C

    from tests.metrics.reference import BINARY_LABEL_METRICS

    y, p, s = _negex_like(120, 0.25, 7)
    idx = B.stratified_indices(y, 100, 7)
    loop = _naive(y, p, s, idx)
    for name, fn in BINARY_LABEL_METRICS.items():
        assert np.array_equal(B.resampled(fn, idx, y, p), loop[name]), name
    auc = B.resampled(C.roc_auc, idx, y, s)
    np.testing.assert_allclose(auc, loop["roc_auc"], rtol=0, atol=1e-15)
    for b in (0, 50, 99):                                    # ours is the exactly rounded rational
        yt, st = y[idx[b]], s[idx[b]]
        pos, neg = st[yt == 1], st[yt == 0]
        u = sum(Fraction(int(a > c) * 2 + int(a == c), 2) for a in pos for c in neg)
        assert auc[b] == float(u / (len(pos) * len(neg)))


def test_negex_majority_predictor_degenerate_metrics_match():
    y, _, s = _negex_like(80, 0.3, 4)
    p = np.zeros_like(y)                                       # nothing called negated
    fast = _engine(y, p, None, 100, seed=4)
    loop = {k: [fn(y[r], p[r]) for r in B.stratified_indices(y, 100, 4)] for k, fn in SKLEARN.items()}
    for name in SKLEARN:
        if name == "precision":
            continue                                           # undefined: nothing predicted positive
        m = fast[f"{name}_zero_shot"]
        assert (m["ci_low"], m["ci_high"]) == _pct(loop[name]), name
    assert fast["precision_zero_shot"]["value"] is None and fast["roc_auc_zero_shot"]["value"] is None
    assert fast["precision_zero_shot"]["reason"].startswith("undefined: nothing predicted positive")


# ------------------------------------------------------------------------------------------ cluster

def _tags(rng, n_words):
    tags, k = [], 0
    while k < n_words:
        r = rng.random()
        if r < 0.6:
            tags.append("O")
            k += 1
        else:
            t = rng.choice(TYPES)
            length = min(rng.randint(1, 3), n_words - k)
            tags += [f"B-{t}"] + [f"I-{t}"] * (length - 1)
            k += length
    if rng.random() < 0.1:                                     # now and then an ill-formed I- start
        j = rng.randrange(n_words)
        tags[j] = "I-" + rng.choice(TYPES)
    return tags


def _perturb(rng, gold):
    out = []
    for g in gold:
        p = list(g)
        for j in range(len(p)):
            r = rng.random()
            if r < 0.08:
                p[j] = "O"
            elif r < 0.12:
                p[j] = "B-" + rng.choice(TYPES)
        out.append(p)
    return out


def _corpus(seed, n_docs=12):
    rng = random.Random(seed)
    gold, groups = [], []
    for d in range(n_docs):
        for _ in range(rng.randint(1, 6)):                    # documents of 1..6 sentences
            gold.append(_tags(rng, rng.randint(3, 15)))
            groups.append(f"PMID{1000 + d}")
    return gold, _perturb(rng, gold), groups


@pytest.mark.parametrize("seed", [5, 6])
def test_cluster_intervals_equal_seqeval_loop_on_the_same_indices(seed):
    gold, pred, groups = _corpus(seed)
    fast = spans.span_metrics_with_ci(gold, pred, groups, types=TYPES, n_resamples=100, seed=seed)
    idx = B.cluster_indices(groups, n_resamples=100, seed=seed)
    ref = {"f1": [], "precision": [], "recall": [], "macro_f1": []}
    per_type = {t: {"precision": [], "recall": [], "f1": []} for t in TYPES}
    for r in idx:
        g = [gold[i] for i in r]
        p = [pred[i] for i in r]
        ref["f1"].append(seq_f1(g, p))
        ref["precision"].append(seq_p(g, p, zero_division=0))
        ref["recall"].append(seq_r(g, p, zero_division=0))
        ref["macro_f1"].append(seq_f1(g, p, average="macro", zero_division=0))
        labels = sorted({m[0] for s in g + p for m in spans.mentions(s)})
        pr, rc, f, _ = seq_prfs(g, p, average=None, zero_division=0)
        got = dict(zip(labels, zip(pr, rc, f)))
        for t in TYPES:                                       # a type absent from the resample: no value
            vals = got.get(t, (np.nan, np.nan, np.nan))
            for k, v in zip(("precision", "recall", "f1"), vals):
                per_type[t][k].append(v)
    for name, vals in ref.items():
        np.testing.assert_allclose(fast["resamples"][name], vals, rtol=0, atol=1e-15, err_msg=name)
        lo, hi = _pct(vals)
        assert abs(fast[name]["ci_low"] - lo) <= 1e-15 and abs(fast[name]["ci_high"] - hi) <= 1e-15, name
        assert fast[name]["ci_low"] < fast[name]["ci_high"]
    for t in TYPES:
        for k in ("precision", "recall", "f1"):
            v = np.asarray(per_type[t][k], dtype=float)
            lo, hi = _pct(v)
            e = fast["per_type"][t][k]
            assert abs(e["ci_low"] - lo) <= 1e-15 and abs(e["ci_high"] - hi) <= 1e-15, (t, k)


def test_cluster_totals_equal_summing_each_resample_exactly():
    gold, pred, groups = _corpus(9, n_docs=20)
    counts, _ = spans.span_counts(gold, pred, TYPES)
    idx = B.cluster_indices(groups, n_resamples=300, seed=11)
    loop = np.stack([counts[r].sum(0) for r in idx])
    assert np.array_equal(spans.cluster_totals(counts, groups, n_resamples=300, seed=11), loop)
    mult, inverse = B.cluster_multiplicities(groups, 300, 11)
    for b in (0, 150, 299):                                   # item i appears mult[b, group(i)] times
        assert np.array_equal(np.bincount(idx[b], minlength=len(groups)), mult[b, inverse])
    assert spans.cluster_totals(counts, groups, n_resamples=0).shape == (0, len(TYPES), 3)
    with pytest.raises(ValueError, match="groups has 3 entries"):
        spans.cluster_totals(counts, groups[:3])


def test_roc_auc_from_score_codes_equals_ranking_each_resample():
    """The engine's ``rank_auc`` with each resample's multiplicities (``reference.roc_auc_resampled``: AUC of all
    resamples from the original items' score codes; see the benchmarks README): scikit-learn's ``roc_auc_score``
    of each resample, to the last place or one unit in it."""
    from sklearn.metrics import roc_auc_score

    from tests.metrics import reference as C

    from tests.metrics.reference import roc_auc_resampled as fast

    for n, share, seed in [(150, 0.2, 1), (40, 0.5, 2)]:
        y, _, s = _negex_like(n, share, seed)
        idx = B.stratified_indices(y, 200, seed)
        reference = np.array([roc_auc_score(y[r], s[r]) for r in idx])
        np.testing.assert_allclose(fast(y, s, idx), reference, rtol=0, atol=2e-16)
        assert np.array_equal(C.roc_auc(y[idx], s[idx]), fast(y, s, idx))   # the 2-D form: each row the same
    assert np.isnan(fast(np.array([1, 1]), np.array([0.2, 0.3]), np.array([[0, 1]])))[0]
