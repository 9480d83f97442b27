import numpy as np
import pytest
from sklearn import metrics as skm

from atlaslib.metrics import classification as C


@pytest.fixture(params=range(6))
def case(request):
    rng = np.random.default_rng(request.param)
    n = 57
    y = rng.integers(0, 2, n)
    y[:2] = [0, 1]
    pred = np.where(rng.random(n) < 0.8, y, 1 - y)
    score = np.round(rng.random(n) * 0.5 + y * 0.3, 1)  # rounded: many ties
    return y, pred, score


def test_against_sklearn(case):
    y, pred, score = case
    assert C.sensitivity(y, pred) == pytest.approx(skm.recall_score(y, pred, pos_label=1))
    assert C.specificity(y, pred) == pytest.approx(skm.recall_score(y, pred, pos_label=0))
    assert C.precision(y, pred) == pytest.approx(skm.precision_score(y, pred, zero_division=0))
    assert C.macro_f1(y, pred) == pytest.approx(skm.f1_score(y, pred, average="macro", labels=[0, 1], zero_division=0))
    assert C.roc_auc(y, score) == pytest.approx(skm.roc_auc_score(y, score))


def test_batched_rows_equal_single_calls(case):
    y, pred, score = case
    rng = np.random.default_rng(1)
    idx = rng.integers(0, len(y), size=(20, len(y)))
    for fn, arg in [(C.macro_f1, pred), (C.sensitivity, pred), (C.specificity, pred), (C.precision, pred),
                    (C.roc_auc, score)]:
        batched = fn(y[idx], arg[idx])
        singles = [fn(y[r], arg[r]) for r in idx]
        np.testing.assert_allclose(batched, singles)


def test_edge_cases_by_hand():
    y = np.array([1, 1, 0, 0, 0])
    nothing = np.zeros(5, int)
    assert np.isnan(C.precision(y, nothing))       # nothing called positive -> undefined (the atlas's rule)
    assert np.isnan(skm.precision_score(y, nothing, zero_division=np.nan))
    assert C.sensitivity(y, nothing) == 0.0
    assert C.specificity(y, nothing) == 1.0
    # majority baseline: F1(neg) = 2*3/(2*3+2) = 0.75, F1(pos) = 0 -> 0.375
    assert C.macro_f1(y, nothing) == pytest.approx(0.375)
    assert C.majority_macro_f1(2, 3) == pytest.approx(0.375)
    assert np.isnan(C.sensitivity(np.zeros(3, int), np.zeros(3, int)))
    assert np.isnan(C.roc_auc(np.ones(3, int), [0.1, 0.2, 0.3]))
    assert np.isnan(C.macro_f1(np.zeros(3, int), np.zeros(3, int)))   # class 1 absent from gold and predictions


def test_majority_closed_form_on_negex_test_sets():
    # 21 negated / 79 affirmed: 2*79/(2*79+21)/2 = 0.4413...
    assert C.majority_macro_f1(21, 79) == pytest.approx(158 / 179 / 2)
    assert round(C.majority_macro_f1(21, 79), 2) == 0.44
