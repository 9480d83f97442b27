"""Token-level protocols: native-label mapping, zero-shot NER and the word probe, with stand-in
adapters (exact expectations) and through the real adapters on tiny random models."""
from __future__ import annotations

import numpy as np
import pytest

from atlaslib.metrics.spans import mentions, validate_tags
from atlaslib.protocols import tokens as tok

TABLE = {"problem": "problem", "treatment": "treatment", "test": "test",
         "Sign_symptom": "problem", "Disease_disorder": "problem", "Medication": "treatment",
         "Therapeutic_procedure": "treatment", "Diagnostic_procedure": "test"}
CARD_TAGS = {"O", "B-problem", "I-problem", "B-treatment", "I-treatment", "B-test", "I-test"}


@pytest.mark.parametrize("native,expected", [
    ("O", "O"),
    ("B-problem", "B-problem"),              # i2b2-style: identity
    ("I-test", "I-test"),
    ("B-Sign_symptom", "B-problem"),         # MACCROBAT-style
    ("I-Diagnostic_procedure", "I-test"),
    ("B-DISEASE_DISORDER", "B-problem"),     # case-insensitive keys
    ("B-Lab_value", "O"),                    # a result, not a test: unmapped
    ("I-Biological_structure", "O"),
    ("S-Medication", "B-treatment"),         # BIOES prefixes
    ("E-Medication", "I-treatment"),
    ("problem", "I-problem"),                # bare type (IO scheme)
    ("LABEL_3", "O"),
])
def test_map_native_tag(native, expected):
    assert tok.map_native_tag(native, TABLE) == expected


class StubTagger:
    info = {"profile": "stub", "trained_on": []}

    def __init__(self, labels):
        self.labels = labels

    def predict_words(self, words):
        return [self.labels[: len(w)] for w in words]


def test_zero_shot_maps_and_repairs():
    words = [["Pain", "in", "the", "abdomen", "and", "CT", "scan"]]
    native = ["I-Sign_symptom", "O", "O", "B-Biological_structure", "O", "I-Diagnostic_procedure",
              "I-Diagnostic_procedure"]
    out = tok.zero_shot_ner(StubTagger(native), words, TABLE)
    assert out["tags"] == [["B-problem", "O", "O", "O", "O", "B-test", "I-test"]]
    assert mentions(out["tags"][0]) == [("problem", 0, 0), ("test", 5, 6)]
    assert out["native"] == [native]
    assert out["details"]["capability"] == "predict.ner"


def test_zero_shot_checks_adapter_output():
    class Bad:
        def predict_words(self, words):
            return [["O"]]

    with pytest.raises(ValueError, match="sentence 0 has 2 words but 1 labels"):
        tok.zero_shot_ner(Bad(), [["a", "b"]], TABLE)


class StubEmbedder:
    """Word vectors that encode a hidden tag (one-hot + noise): a probe should recover the tags."""

    info = {"profile": "stub-embedder"}

    def __init__(self, tag_of, tags, d=16, seed=0):
        self.tag_of, self.tags, self.d = tag_of, list(tags), d
        self.rng = np.random.default_rng(seed)

    def embed_words(self, words, batch_size=32):
        out = []
        for w in words:
            v = self.rng.normal(0, 0.05, size=(len(w), self.d)).astype(np.float32)
            for k, word in enumerate(w):
                v[k, self.tags.index(self.tag_of[word])] += 1.0
            out.append(v)
        return out


def test_probe_recovers_separable_tags_and_repairs():
    tags = ["O", "B-problem", "I-problem", "B-test", "I-test"]
    tag_of = {"the": "O", "chest": "B-problem", "pain": "I-problem", "ct": "B-test", "scan": "I-test",
              "cough": "B-problem", "x": "O", "ray": "I-test"}
    train_words = [["the", "chest", "pain"], ["ct", "scan", "the"], ["cough", "x"], ["ct", "ray", "x"]] * 5
    train_tags = [[tag_of[w] for w in s] for s in train_words]
    test_words = [["chest", "pain", "ct", "scan"], ["pain", "x"], ["ray"]]
    out = tok.probe_ner(StubEmbedder(tag_of, tags), train_words, train_tags, test_words)
    # words are tagged independently; 'pain' alone (I-problem after O) is repaired to B-problem
    assert out["tags"] == [["B-problem", "I-problem", "B-test", "I-test"], ["B-problem", "O"], ["B-test"]]
    assert out["details"]["n_train_words"] == sum(len(s) for s in train_words)
    assert set(out["details"]["classes"]) == set(tags)


def test_probe_input_checks():
    with pytest.raises(ValueError, match="train sentence 0: 2 word vectors but 1 tags"):
        tok.fit_probe([np.zeros((2, 3))], [["O"]])
    with pytest.raises(ValueError, match="at least two tags"):
        tok.fit_probe([np.zeros((2, 3))], [["O", "O"]])


# ----------------------------------------------------------------------- real adapters, tiny models
SENTENCES = [["The", "patient", "has", "chest", "pain", "and", "fever", "."],
             ["CT", "scan", "showed", "no", "evidence", "of", "pneumothorax"],
             ["Blood", "pressure", "was", "normal", ";", "lung", "clear"]]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("tiny-token-models")


@pytest.mark.parametrize("schema", ["i2b2", "maccrobat"])
def test_zero_shot_through_real_ner_adapter(tiny_dir, schema):
    from atlaslib.models import load_adapter
    from tests.tiny_models import I2B2_LABELS, MACCROBAT_LABELS, tiny_token_classifier

    labels = I2B2_LABELS if schema == "i2b2" else MACCROBAT_LABELS
    path = tiny_token_classifier(tiny_dir, labels, name=f"ner-{schema}")
    adapter = load_adapter(str(path), "predict.ner")
    out = tok.zero_shot_ner(adapter, SENTENCES, TABLE)
    assert [len(t) for t in out["tags"]] == [len(s) for s in SENTENCES]
    for t in out["tags"]:
        validate_tags(t)
        assert set(t) <= CARD_TAGS
        assert not any(b.startswith("I-") and (a == "O" or a[2:] != b[2:]) for a, b in zip(["O"] + t, t))
    # the mapping is applied word by word to the adapter's own native labels (before repair)
    native = adapter.predict_words(SENTENCES)
    assert out["native"] == native
    assert all(n in labels for s in native for n in s)
    expected_types = [[tok.map_native_tag(n, TABLE)[2:] or "O" for n in s] for s in native]
    assert [[x[2:] or "O" for x in t] for t in out["tags"]] == expected_types


def test_probe_through_real_token_embedder(tiny_dir):
    from atlaslib.models import load_adapter
    from tests.tiny_models import tiny_encoder

    adapter = load_adapter(str(tiny_encoder(tiny_dir)), "embed.text.tokens")
    vecs = tok.word_vectors(adapter, SENTENCES)
    assert [v.shape[0] for v in vecs] == [len(s) for s in SENTENCES]
    train_tags = [["O", "O", "O", "B-problem", "I-problem", "O", "B-problem", "O"],
                  ["B-test", "I-test", "O", "O", "O", "O", "B-problem"],
                  ["B-test", "I-test", "O", "O", "O", "O", "O"]]
    out = tok.probe_ner(adapter, SENTENCES, train_tags, SENTENCES)
    assert [len(t) for t in out["tags"]] == [len(s) for s in SENTENCES]
    # 22 training words in 32 dimensions are separable: fit on the train words, the probe gives them back
    assert out["tags"] == train_tags
    assert out["details"]["adapter"]["pooling"] == "word_mean"
