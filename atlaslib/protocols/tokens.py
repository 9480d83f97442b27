"""Token-level protocols: zero-shot NER heads and the word-level logistic probe.

Both tag the card's own words (a sentence is a list of words) with IOB2 tags over the card's types.

Zero-shot (capability ``predict.ner``)
    The adapter's token-classification head labels each word with its first sub-word's native label
    (``B-Sign_symptom``, ``I-problem``, ``O``, ...). :func:`map_native_tag` maps it onto the card's
    types with a fixed table (keys compared case-insensitively): the prefix is kept (``B``/``I``;
    ``S``/``U`` count as ``B``, ``E``/``L`` as ``I``, a bare type as ``I``), a type not in the table
    becomes ``O``. The mapped sequence is then repaired (an ``I-X`` after ``O`` or another type starts a
    mention, conlleval-style).

Probe (capability ``embed.text.tokens``, pooling ``word_mean``)
    One vector per word (mean of the last-layer states of its sub-words, from the adapter); a
    standardised multinomial logistic regression over the IOB2 tags is fit on the words of the train
    sentences (:data:`PROBE_SETTINGS`), and each test word is tagged independently (arg-max class);
    the sequence is repaired as above.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from ..metrics.spans import repair_iob2, validate_tags
from .items import PROBE_SETTINGS as _ITEM_PROBE
from .items import fit_converged

# The same logistic head as the item-level probe, over the 7 IOB2 tags of each word, fit to convergence by lbfgs
# (Newton's method on 7 x d coefficients and twelve thousand train words took 116 s against lbfgs's 28-31 s for
# MiniLM): sklearn's default stopping point, tol=1e-4, left a 1e-6 relative feature change flipping 9 of the 2,268
# test words' tags (MACCROBAT atlas-n100-v1, MiniLM); at tol=1e-8 none flipped and probabilities moved by under
# 1e-5. A fit that reaches max_iter first is an error (:func:`atlaslib.protocols.items.fit_converged`).
PROBE_SETTINGS = {
    **_ITEM_PROBE,
    "solver": "lbfgs",
    "tol": 1e-8,
    "max_iter": 20000,
    "multi_class": "multinomial (lbfgs default)",
    "scaling": "sklearn.preprocessing.StandardScaler fit on the train word vectors",
    "decision": "arg-max class per word, then conlleval repair",
    "pooling": "word_mean",
    "batch_size": 32,
}

_PREFIX = {"B": "B", "I": "I", "S": "B", "U": "B", "E": "I", "L": "I"}


def map_native_tag(label: str, table: Mapping[str, str]) -> str:
    """Map one native label (``B-Sign_symptom``, ``I-problem``, ``problem``, ``O``) onto the card's
    IOB2 tags with ``table`` (native type → card type, keys compared lower-case); unknown types → ``O``."""
    if not isinstance(label, str):
        raise ValueError(f"native NER label {label!r} is not a string")
    if label in ("O", "o", "") or label.upper() == "O":
        return "O"
    if len(label) > 2 and label[1] in "-_" and label[0].upper() in _PREFIX:
        prefix, typ = _PREFIX[label[0].upper()], label[2:]
    else:
        prefix, typ = "I", label
    lowered = {k.lower(): v for k, v in table.items()}
    target = lowered.get(typ.lower())
    return f"{prefix}-{target}" if target else "O"


def zero_shot_ner(adapter, words: Sequence[Sequence[str]], table: Mapping[str, str]) -> dict:
    """Tag ``words`` with the adapter's own head (``predict.ner``), mapped by ``table`` and repaired.

    Returns ``{tags, native, details}``: ``tags`` one IOB2 list per sentence, ``native`` the adapter's
    raw labels, ``details`` the mapping and the adapter's info for the run spec."""
    from ..phases import phase

    sentences = [list(w) for w in words]
    with phase("prediction", items=len(sentences)):
        native = adapter.predict_words(sentences)
    if len(native) != len(sentences):
        raise ValueError(f"predict_words returned {len(native)} sentences for {len(sentences)}")
    tags = []
    for i, (w, labs) in enumerate(zip(sentences, native)):
        if len(labs) != len(w):
            raise ValueError(f"predict_words: sentence {i} has {len(w)} words but {len(labs)} labels")
        tags.append(repair_iob2([map_native_tag(lab, table) for lab in labs]))
    return {"tags": tags, "native": [list(n) for n in native],
            "details": {"capability": "predict.ner", "label_table": dict(table),
                        "word_label": "first sub-word", "repair": "conlleval (I-X after O/other type → B-X)",
                        "adapter": getattr(adapter, "info", {})}}


def word_vectors(adapter, words: Sequence[Sequence[str]], batch_size: int = 32) -> list[np.ndarray]:
    """One ``(n_words, d)`` array per sentence from ``embed.text.tokens`` (checked shapes)."""
    sentences = [list(w) for w in words]
    vecs = adapter.embed_words(sentences, batch_size=batch_size)
    if len(vecs) != len(sentences):
        raise ValueError(f"embed_words returned {len(vecs)} arrays for {len(sentences)} sentences")
    out = []
    for i, (w, v) in enumerate(zip(sentences, vecs)):
        v = np.asarray(v, dtype=np.float32)
        if v.ndim != 2 or v.shape[0] != len(w):
            raise ValueError(f"embed_words: sentence {i} has {len(w)} words but vectors of shape {v.shape}")
        out.append(v)
    return out


def fit_probe(train_vectors: Sequence[np.ndarray], train_tags: Sequence[Sequence[str]],
              settings: Mapping = PROBE_SETTINGS):
    """Fit the word probe: StandardScaler + LogisticRegression on all train words."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    if len(train_vectors) != len(train_tags):
        raise ValueError(f"{len(train_vectors)} train sentences of vectors but {len(train_tags)} of tags")
    for i, (v, t) in enumerate(zip(train_vectors, train_tags)):
        if len(v) != len(t):
            raise ValueError(f"train sentence {i}: {len(v)} word vectors but {len(t)} tags")
        validate_tags(t, f"train sentence {i} tags")
    X = np.concatenate([np.asarray(v) for v in train_vectors], axis=0)
    y = np.array([tag for t in train_tags for tag in t])
    if len(set(y)) < 2:
        raise ValueError(f"the probe needs at least two tags among the train words, got {sorted(set(y))}")
    clf = make_pipeline(StandardScaler(),
                        LogisticRegression(C=settings["C"], max_iter=settings["max_iter"], tol=settings["tol"],
                                           solver=settings["solver"], class_weight=settings["class_weight"]))
    fit_converged(clf, X, y, settings)
    return clf


def predict_probe(clf, vectors: Sequence[np.ndarray]) -> list[list[str]]:
    """Tag each word independently (arg-max), then repair each sentence's sequence."""
    out = []
    for v in vectors:
        if len(v) == 0:
            out.append([])
            continue
        out.append(repair_iob2([str(t) for t in clf.predict(np.asarray(v))]))
    return out


def probe_ner(adapter, train_words, train_tags, test_words, settings: Mapping = PROBE_SETTINGS) -> dict:
    """The whole probe: vectors for train and test words, fit, tag. Returns ``{tags, details}``."""
    from ..phases import phase

    bs = int(settings.get("batch_size", 32))
    with phase("training"):
        clf = fit_probe(word_vectors(adapter, train_words, bs), train_tags, settings)
    with phase("prediction", items=len(test_words)):
        tags = predict_probe(clf, word_vectors(adapter, test_words, bs))
    lr = clf[-1]
    return {"tags": tags, "classifier": clf,
            "details": {"capability": "embed.text.tokens", "probe": dict(settings),
                        "classes": [str(c) for c in lr.classes_], "n_iter": int(np.max(lr.n_iter_)),
                        "n_train_words": int(sum(len(t) for t in train_tags)),
                        "adapter": getattr(adapter, "info", {})}}
