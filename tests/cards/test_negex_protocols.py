"""NegEx protocols end to end through the real adapters, on tiny random models built locally."""
import numpy as np
import pytest

from atlaslib.cards import negex
from tests.tiny_models import tiny_assertion_classifier, tiny_causal_lm, tiny_encoder


@pytest.fixture(scope="module")
def split_frames(data_dir):
    items = negex.load_items(data_dir)
    train, test = negex.split_frames(items, negex.split(items, "atlas-n100-v1"))
    return train.head(60), test.head(30)


def test_zero_shot_assertion_head(tmp_path, split_frames):
    train, test = split_frames
    out = negex.run_protocol(str(tiny_assertion_classifier(tmp_path)), "zero_shot", train, test)
    assert out["capability"] == "predict.assertion"
    assert set(out["native"]) <= {"PRESENT", "ABSENT", "POSSIBLE"}
    assert np.array_equal(out["pred"], [int(n == "ABSENT") for n in out["native"]])
    assert out["score"] is None
    from atlaslib.cards.run import CardRun

    m = CardRun("negex", "atlas-n100-v1", "m", "zero_shot").score(negex.scored_records(test, out), n_resamples=50)
    assert m["roc_auc_zero_shot"] == {"value": None, "ci_low": None, "ci_high": None, "reason": negex.NO_SCORE_REASON}


def test_zero_shot_option_scoring(tmp_path, split_frames):
    train, test = split_frames
    out = negex.run_protocol(str(tiny_causal_lm(tmp_path, max_positions=1024)), "zero_shot", train, test)
    assert out["capability"] == "score.options"
    ll = out["loglik"]
    assert ll.shape == (len(test), 2) and np.all(ll < 0)
    # negated when " yes" has the larger log-likelihood; score = softmax P(yes)
    assert np.array_equal(out["pred"], (ll[:, 0] > ll[:, 1]).astype(int))
    p_yes = np.exp(ll[:, 0]) / (np.exp(ll[:, 0]) + np.exp(ll[:, 1]))
    np.testing.assert_allclose(out["score"], p_yes, rtol=1e-6)
    assert out["details"]["options"] == [" yes", " no"] and len(out["details"]["option_token_ids"]) == 2


def test_probe_on_pooled_embeddings(tmp_path, split_frames):
    train, test = split_frames
    out = negex.run_protocol(str(tiny_encoder(tmp_path)), "probe", train, test)
    assert out["capability"] == "embed.text.pooled"
    assert out["score"].shape == (len(test),) and np.all((out["score"] >= 0) & (out["score"] <= 1))
    assert np.array_equal(out["pred"], (out["score"] >= 0.5).astype(int))
    assert out["details"]["probe"]["solver"] == "newton-cholesky" and out["details"]["probe"]["tol"] == 1e-10


def test_missing_capability_and_missing_weights_are_not_run(split_frames):
    train, test = split_frames
    with pytest.raises(negex.NotRun, match="capability missing"):
        negex.run_protocol("majority", "probe", train, test)
    with pytest.raises(negex.NotRun, match="weights unavailable"):
        negex.run_protocol("bvanaken/clinical-assertion-negation-bert", "zero_shot", train, test)


def test_unparseable_assertion_answers_count_as_wrong():
    """An LLM answer that does not parse is never mapped to a label: it is scored as the wrong decision."""
    from atlaslib.models.openai_compat import UNPARSEABLE
    from atlaslib.protocols.items import zero_shot_assertion

    class Answers:
        info = {"name": "fixed answers"}

        def predict_assertion(self, texts):
            return ["ABSENT", UNPARSEABLE, "PRESENT", UNPARSEABLE]

    import pandas as pd

    from atlaslib.cards.deciding import Loaded

    rows = pd.DataFrame({"text": ["a", "b", "c", "d"], "decision": ["negated", "negated", "affirmed", "affirmed"]})
    pred, score, out = negex.FAMILY.predictor(Loaded(Answers(), "predict.assertion", None), None, "zero_shot")(rows)
    assert pred == ["negated", "affirmed", "affirmed", "negated"] and score is None   # right, wrong, right, wrong
    assert out["pred"].tolist() == [1, 0, 0, 1]
    assert out["native"][1] == UNPARSEABLE and out["details"]["unparseable"] == 2
    with pytest.raises(ValueError, match="unparseable"):
        zero_shot_assertion(Answers(), ["a", "b", "c", "d"], {"ABSENT": 1, "PRESENT": 0, "POSSIBLE": 0})
