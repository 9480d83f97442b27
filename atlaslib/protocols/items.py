"""Item-level protocols: zero-shot (native assertion head, or option scoring) and the logistic probe.

Each function returns a dict with ``pred`` (0/1 per item, 1 = positive class), ``score`` (a probability
of the positive class, or None when the capability gives labels only) and ``details`` (what the run
spec must record: option strings and token ids, probe hyper-parameters, the adapter's info).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

#: The probe's head, declared. It is fit to convergence, not to sklearn's default stopping point: with lbfgs at
#: ``tol=1e-4`` (sklearn's default) a 1e-6 relative change of the features (another batch shape, thread count or
#: device) moved a SmolLM2 probe's probabilities by up to 2e-2 and flipped answers (NegEx atlas-n100-v1: 1 of 100
#: in two of three perturbed fits). Newton's method on the L2-regularised (strictly convex) loss stops when the
#: largest gradient entry is below ``tol`` (11 iterations on the NegEx probes); what is left of a 1e-6 feature
#: change is then the optimum's own sensitivity (probabilities within 6e-5, no answer flipped), not the solver's
#: slack. A fit that reaches ``max_iter`` is an error, never a silent answer; ``max_iter`` leaves room for
#: scikit-learn's lbfgs fallback, which takes over when a Hessian is too ill-conditioned to factor (a tiny random
#: model's nearly collinear features).
PROBE_SETTINGS = {
    "model": "sklearn.linear_model.LogisticRegression",
    "solver": "newton-cholesky",
    "tol": 1e-10,
    "C": 1.0,
    "max_iter": 10000,
    "penalty": "l2",
    "scaling": "sklearn.preprocessing.StandardScaler fit on the train features",
    "class_weight": None,
    "decision": "positive when P(positive) >= 0.5 (LogisticRegression.predict)",
}


def zero_shot_assertion(adapter, texts: Sequence[str], label_map: dict[str, int], gold=None) -> dict:
    """``predict.assertion`` on marked texts; ``label_map`` maps the adapter's labels (e.g. ABSENT) to 0/1.

    An answer the adapter could not parse (an LLM's free text; label ``UNPARSEABLE``) is never mapped to a
    label: it counts as wrong, i.e. the prediction is ``1 - gold`` for that item (so ``gold`` is required
    when such answers occur), and ``native`` keeps the adapter's label; ``details["unparseable"]`` counts
    them."""
    from ..models.openai_compat import UNPARSEABLE
    from ..phases import phase

    with phase("prediction", items=len(texts)):
        labels = adapter.predict_assertion(list(texts))
    unknown = sorted(set(labels) - set(label_map) - {UNPARSEABLE})
    if unknown:
        raise ValueError(f"assertion adapter returned labels {unknown}; the card maps only {sorted(label_map)}")
    bad = [i for i, lab in enumerate(labels) if lab == UNPARSEABLE]
    if bad and gold is None:
        raise ValueError(f"assertion adapter gave {len(bad)} unparseable answer(s) and no gold labels were "
                         f"passed to count them as wrong (zero_shot_assertion(..., gold=...))")
    gold_arr = None if gold is None else np.asarray(gold, dtype=int)
    pred = np.array([1 - gold_arr[i] if lab == UNPARSEABLE else label_map[lab] for i, lab in enumerate(labels)],
                    dtype=int)
    return {"pred": pred, "score": None, "native": list(labels),
            "details": {"capability": "predict.assertion", "label_map": label_map, "adapter": adapter.info,
                        "unparseable": len(bad)}}


def softmax_first(loglik: np.ndarray) -> np.ndarray:
    """P(option 0) under a softmax over the options' log-likelihoods (numerically stable)."""
    z = loglik - loglik.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e[:, 0] / e.sum(axis=1)


def zero_shot_options(adapter, prompts: Sequence[str], options: Sequence[str]) -> dict:
    """``score.options``: the positive class is ``options[0]``; predicted positive when its log-likelihood
    is the larger one (ties go to the other option); score = softmax over the log-likelihoods."""
    from ..phases import phase

    with phase("prediction", items=len(prompts)):
        out = adapter.score_options(list(prompts), list(options))
    ll = np.asarray(out["loglik"], dtype=float)
    pred = (ll[:, 0] > ll[:, 1:].max(axis=1)).astype(int)
    return {"pred": pred, "score": softmax_first(ll), "loglik": ll,
            "details": {"capability": "score.options", "options": list(options),
                        "option_token_ids": out.get("option_token_ids"), "adapter": adapter.info}}


def probe(adapter, train_texts: Sequence[str], train_y: Sequence[int], test_texts: Sequence[str],
          seed: int = 0) -> dict:
    """``embed.text.pooled`` features (frozen) + a logistic head fit on the train items (``head``: the fitted
    pipeline, for :func:`probe_predict` on other test texts)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from ..phases import phase

    with phase("training"):
        x_train = adapter.embed(list(train_texts))
        clf = make_pipeline(StandardScaler(), LogisticRegression(
            solver=PROBE_SETTINGS["solver"], tol=PROBE_SETTINGS["tol"], C=PROBE_SETTINGS["C"],
            max_iter=PROBE_SETTINGS["max_iter"], random_state=seed))
        fit_converged(clf, x_train, np.asarray(train_y, dtype=int), PROBE_SETTINGS)
    with phase("prediction", items=len(test_texts)):
        x_test = adapter.embed(list(test_texts))
        proba = clf.predict_proba(x_test)[:, list(clf.classes_).index(1)]
        pred = clf.predict(x_test).astype(int)
    return {"pred": pred, "score": proba, "head": clf,
            "details": {"capability": "embed.text.pooled", "probe": PROBE_SETTINGS,
                        "n_iter": int(clf[-1].n_iter_[0]), "feature_dim": int(x_train.shape[1]),
                        "adapter": adapter.info}}


def fit_converged(clf, x, y, settings) -> None:
    """Fit the pipeline ``clf`` (scaler + logistic head) and refuse a head that stopped at ``max_iter`` before
    its declared ``tol``: its answers would move with float noise in the features (see :data:`PROBE_SETTINGS`).
    sklearn's ConvergenceWarning is silenced during the fit: this check says it instead, as one error."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf.fit(x, y)
    n_iter = int(np.max(clf[-1].n_iter_))
    if n_iter >= settings["max_iter"]:
        raise RuntimeError(f"the probe's logistic head did not converge to tol={settings['tol']:g} within "
                           f"max_iter={settings['max_iter']} iterations ({settings['solver']}); its answers would "
                           f"depend on float noise in the features")


def probe_predict(adapter, head, texts: Sequence[str]) -> dict:
    """A fitted probe ``head`` (:func:`probe`'s) on the frozen features of other ``texts`` (a variant run: the
    head is never fit again). Returns ``{pred, score}`` as :func:`probe` does."""
    from ..phases import phase

    with phase("prediction", items=len(texts)):
        x = adapter.embed(list(texts))
        proba = head.predict_proba(x)[:, list(head.classes_).index(1)]
        return {"pred": head.predict(x).astype(int), "score": proba}
