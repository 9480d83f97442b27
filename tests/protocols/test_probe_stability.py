"""The probes' answers do not move with float noise in their features.

A feature vector computed in another batch shape, with another thread count or on another device differs from
the original by about 1e-6 relative. The probes are fit to a declared tolerance (``PROBE_SETTINGS``) at which
such a change moves no answer: checked here on features whose covariance decays like a real encoder's (the
case where sklearn's default lbfgs stopping point, tol 1e-4, left probabilities 1e-3 away from the optimum and
flipped answers), on the tiny encoder's own features at batch shapes 1-64 and thread counts 1-2, and against a
hand-computed gradient of the regularised loss at the fitted head.
"""
from __future__ import annotations

import numpy as np
import pytest

from atlaslib.protocols import items as P
from atlaslib.protocols import tokens as T


class _Features:
    """An ``embed.text.pooled`` stand-in: texts are row numbers of a fixed feature matrix."""
    info: dict = {}

    def __init__(self, x):
        self.x = np.asarray(x, dtype=np.float64)

    def embed(self, texts):
        return self.x[[int(t) for t in texts]]


def _decaying(seed=0, n=300, m=200, d=192, a=1.5):
    """Features whose spectrum decays as k^-a in a random basis (an encoder's anisotropy), labels from the
    leading directions with noise."""
    r = np.random.default_rng(seed)
    s = np.arange(1, d + 1) ** -a
    q, _ = np.linalg.qr(r.standard_normal((d, d)))
    x = (r.standard_normal((n + m, d)) * s) @ q
    y = ((x @ q)[:, :8].sum(1) / s[:8].sum() * 3 + 0.5 * r.standard_normal(n + m) > 0).astype(int)
    return x, y, n


def _fit(x, y, n):
    texts = [str(i) for i in range(len(x))]
    return P.probe(_Features(x), texts[:n], y[:n], texts[n:])


@pytest.mark.parametrize("noise_seed", [1, 2])
def test_item_probe_answers_survive_relative_noise(noise_seed):
    x, y, n = _decaying()
    base = _fit(x, y, n)
    noisy = _fit(x * (1 + 1e-6 * np.random.default_rng(noise_seed).standard_normal(x.shape)), y, n)
    assert np.array_equal(base["pred"], noisy["pred"])
    # the optimum's own sensitivity, not the solver's slack (sklearn's default stopping point: about 1.5e-3 here)
    assert np.max(np.abs(base["score"] - noisy["score"])) < 1e-4


def _gradient(head, x, y):
    """The gradient of sklearn's L2-regularised binary log loss at the fitted head, by hand: the loss is
    C * sum(log-loss) + |w|^2 / 2 on the scaled features (sklearn >= 1.2 divides both by the sample count: the
    mean log-loss + |w|^2 / (2 C n))."""
    scaler, lr = head[0], head[-1]
    z = scaler.transform(x)
    p = 1 / (1 + np.exp(-(z @ lr.coef_[0] + lr.intercept_[0])))
    n = len(y)
    g_w = z.T @ (p - y) / n + lr.coef_[0] / (lr.C * n)
    g_b = np.sum(p - y) / n
    return np.concatenate([g_w, [g_b]])


def test_item_probe_converges_to_its_declared_tolerance():
    x, y, n = _decaying(seed=3)
    out = _fit(x, y, n)
    g = _gradient(out["head"], x[:n], y[:n])
    assert np.max(np.abs(g)) <= 10 * P.PROBE_SETTINGS["tol"]
    assert out["details"]["probe"]["tol"] == P.PROBE_SETTINGS["tol"]
    assert out["details"]["n_iter"] < P.PROBE_SETTINGS["max_iter"]


def test_a_probe_that_stops_before_its_tolerance_is_an_error(monkeypatch):
    monkeypatch.setitem(P.PROBE_SETTINGS, "max_iter", 1)
    x, y, n = _decaying()
    with pytest.raises(RuntimeError, match=r"did not converge to tol=1e-10 within max_iter=1"):
        _fit(x, y, n)


def test_token_probe_answers_survive_relative_noise():
    x, y, n = _decaying(seed=0, n=600, m=300, d=192)
    tags = np.array(["O", "B-problem", "I-problem"])[(y + (x[:, 0] > 0)).clip(0, 2)]
    noisy = x * (1 + 1e-6 * np.random.default_rng(1).standard_normal(x.shape))

    def fit(v):
        return T.fit_probe([v[i:i + 4] for i in range(0, n, 4)], [list(tags[i:i + 4]) for i in range(0, n, 4)])

    base, moved = fit(x), fit(noisy)
    assert np.array_equal(base.predict(x[n:]), moved.predict(noisy[n:]))
    # sklearn's default stopping point moves these probabilities by about 3e-3
    assert np.max(np.abs(base.predict_proba(x[n:]) - moved.predict_proba(noisy[n:]))) < 1e-4


@pytest.fixture(scope="module")
def tiny_pooled(tmp_path_factory):
    from atlaslib.models.adapters import load_adapter
    from tests import tiny_models as tm

    path = tm.tiny_encoder(tmp_path_factory.mktemp("probe-stability"))
    return lambda **kw: load_adapter(str(path), "embed.text.pooled", progress=False, embed_cache=False, **kw)


def test_item_probe_answers_equal_across_batch_shapes_and_threads(tiny_pooled):
    import torch

    from tests import tiny_models as tm

    words = list(tm._WORDS)
    r = np.random.default_rng(0)
    texts = [" ".join(r.choice(words, size=int(r.integers(3, 12)))) for _ in range(160)]
    y = np.array([int("no" in t.split() or "denies" in t.split()) for t in texts])
    answers, threads = {}, torch.get_num_threads()
    try:
        for n_threads in (1, 2):
            torch.set_num_threads(n_threads)
            for bs in (1, 7, 64):
                adapter = tiny_pooled(batch_size=bs)
                out = P.probe(adapter, texts[:100], y[:100], texts[100:])
                answers[(n_threads, bs)] = (out["pred"], out["score"])
    finally:
        torch.set_num_threads(threads)
    (p0, s0), *rest = answers.values()
    for pred, score in rest:
        assert np.array_equal(pred, p0)
        assert np.max(np.abs(score - s0)) < 1e-4
