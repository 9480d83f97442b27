"""The binary metrics' formulas (:func:`atlaslib.metrics.classification.from_confusion`, the one place they are
written; the engine scores every card's counts with them) and the tests' per-array reference
(tests/metrics/reference.py) against scikit-learn."""
import numpy as np
import pytest
from sklearn import metrics as skm

from atlaslib.metrics import classification as C
from tests.metrics import reference as R


@pytest.fixture(params=range(6))
def case(request):
    rng = np.random.default_rng(request.param)
    n = 57
    y = rng.integers(0, 2, n)
    y[:2] = [0, 1]
    pred = np.where(rng.random(n) < 0.8, y, 1 - y)
    score = np.round(rng.random(n) * 0.5 + y * 0.3, 1)  # rounded: many ties
    return y, pred, score


def test_the_formulas_against_sklearn(case):
    y, pred, _ = case
    (tn, fp), (fn, tp) = skm.confusion_matrix(y, pred, labels=[0, 1])
    m = C.from_confusion(tp, fp, tn, fn)
    assert m["sensitivity"] == pytest.approx(skm.recall_score(y, pred, pos_label=1))
    assert m["specificity"] == pytest.approx(skm.recall_score(y, pred, pos_label=0))
    assert m["precision"] == pytest.approx(skm.precision_score(y, pred, zero_division=0))
    assert m["macro_f1"] == pytest.approx(skm.f1_score(y, pred, average="macro", labels=[0, 1], zero_division=0))


def test_the_reference_against_sklearn(case):
    y, pred, score = case
    assert R.sensitivity(y, pred) == pytest.approx(skm.recall_score(y, pred, pos_label=1))
    assert R.specificity(y, pred) == pytest.approx(skm.recall_score(y, pred, pos_label=0))
    assert R.precision(y, pred) == pytest.approx(skm.precision_score(y, pred, zero_division=0))
    assert R.macro_f1(y, pred) == pytest.approx(skm.f1_score(y, pred, average="macro", labels=[0, 1], zero_division=0))
    assert R.roc_auc(y, score) == pytest.approx(skm.roc_auc_score(y, score))


def test_batched_rows_equal_single_calls(case):
    y, pred, score = case
    rng = np.random.default_rng(1)
    idx = rng.integers(0, len(y), size=(20, len(y)))
    for fn, arg in [(R.macro_f1, pred), (R.sensitivity, pred), (R.specificity, pred), (R.precision, pred),
                    (R.roc_auc, score)]:
        batched = fn(y[idx], arg[idx])
        singles = [fn(y[r], arg[r]) for r in idx]
        np.testing.assert_allclose(batched, singles)
    tp, fp, tn, fn = (np.array([R.confusion_counts(y[r], pred[r])[k] for r in idx]) for k in ("tp", "fp", "tn", "fn"))
    np.testing.assert_array_equal(C.from_confusion(tp, fp, tn, fn)["macro_f1"], R.macro_f1(y[idx], pred[idx]))


def test_edge_cases_by_hand():
    y = np.array([1, 1, 0, 0, 0])
    nothing = C.from_confusion(tp=0, fp=0, tn=3, fn=2)        # always "0" on y
    assert np.isnan(nothing["precision"])                     # nothing called positive -> undefined (the atlas's rule)
    assert np.isnan(skm.precision_score(y, np.zeros(5, int), zero_division=np.nan))
    assert nothing["sensitivity"] == 0.0 and nothing["specificity"] == 1.0
    # majority baseline: F1(neg) = 2*3/(2*3+2) = 0.75, F1(pos) = 0 -> 0.375
    assert nothing["macro_f1"] == pytest.approx(0.375)
    assert C.majority_macro_f1(2, 3) == pytest.approx(0.375)
    assert np.isnan(C.from_confusion(tp=0, fp=0, tn=3, fn=0)["sensitivity"])
    assert np.isnan(C.from_confusion(tp=0, fp=0, tn=3, fn=0)["macro_f1"])   # class 1 absent from gold and predictions
    assert np.isnan(R.roc_auc(np.ones(3, int), [0.1, 0.2, 0.3]))
    with pytest.raises(ValueError, match="y_pred: 'affirmed' is not a binary label"):
        R.macro_f1([0, 1], ["affirmed", "negated"])


def test_majority_closed_form_on_negex_test_sets():
    # 21 negated / 79 affirmed: 2*79/(2*79+21)/2 = 0.4413...
    assert C.majority_macro_f1(21, 79) == pytest.approx(158 / 179 / 2)
    assert round(C.majority_macro_f1(21, 79), 2) == 0.44
