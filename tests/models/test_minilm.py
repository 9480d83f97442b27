"""all-MiniLM-L6-v2 from the PyPI wheel, checked against sentence-transformers on the same folder.

sentence-transformers runs Transformer -> Pooling(mean) -> Normalize for this model. The atlas'
embed.text.pooled stops before Normalize, so the comparison is (a) both normalised, and (b) the atlas
vector unnormalised against the mean of sentence-transformers' own token embeddings (its pre-pooling
output), both within 1e-5.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from atlaslib.models import get_profile, load_adapter, resolve_weights

SENTENCES = [
    "No [entity] WEAKNESS [entity].",
    "Denies shortness of breath, stridor, or [entity] AIR HUNGER [entity].",
    "The anterior tricuspid valve leaflet was thickened.",
]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    d = tmp_path_factory.mktemp("atlas-cache")
    mp = pytest.MonkeyPatch()
    mp.setenv("ATLAS_CACHE_DIR", str(d))
    yield d
    mp.undo()


@pytest.fixture(scope="module")
def st_model(cache):
    from sentence_transformers import SentenceTransformer

    loc, _ = resolve_weights(get_profile("all-minilm-l6-v2"))
    return SentenceTransformer(loc, device="cpu")


def test_extracted_once_into_the_cache_by_sha256(cache):
    prof = get_profile("all-minilm-l6-v2")
    loc, kw = resolve_weights(prof)
    assert Path(loc) == cache / "models" / prof.revision and kw == {}
    assert (Path(loc) / "config.json").is_file() and (Path(loc) / "model.safetensors").is_file()
    mtime = os.stat(Path(loc) / "model.safetensors").st_mtime_ns
    assert resolve_weights(prof)[0] == loc                       # second call reuses it
    assert os.stat(Path(loc) / "model.safetensors").st_mtime_ns == mtime
    assert not [p for p in (cache / "models").iterdir() if p.name.startswith(".")]   # no temp dirs left


def test_pooled_equals_sentence_transformers(cache, st_model):
    emb = load_adapter("all-minilm-l6-v2", "embed.text.pooled", progress=False)
    assert emb.info["max_length"] == st_model.max_seq_length == 256
    ours = emb.embed(SENTENCES)
    assert ours.shape == (3, 384) and ours.dtype == np.float32
    ref = st_model.encode(SENTENCES, convert_to_numpy=True)                # normalised by ST
    np.testing.assert_allclose(ours / np.linalg.norm(ours, axis=1, keepdims=True), ref, atol=1e-5)
    tokens = st_model.encode(SENTENCES, output_value="token_embeddings")  # before pooling
    np.testing.assert_allclose(ours, np.stack([t.numpy().mean(0) for t in tokens]), atol=1e-5)


def test_word_mean_on_minilm_matches_subword_states(cache, st_model):
    from transformers import AutoTokenizer

    emb = load_adapter("all-minilm-l6-v2", "embed.text.tokens", progress=False)
    words = ["One", "month", "earlier", "he", "had", "undergone", "a", "laparotomy", "."]
    out = emb.embed_words([words])[0]
    assert out.shape == (len(words), 384)
    loc, _ = resolve_weights(get_profile("all-minilm-l6-v2"))
    tok = AutoTokenizer.from_pretrained(loc)
    enc = tok(words, is_split_into_words=True)
    states = st_model.encode([" ".join(words)], output_value="token_embeddings")[0].numpy()
    assert len(enc["input_ids"]) == states.shape[0]        # same tokens for the joined sentence
    wids = enc.word_ids()
    hand = np.stack([states[[t for t, w in enumerate(wids) if w == j]].mean(0) for j in range(len(words))])
    np.testing.assert_allclose(out, hand, atol=1e-5)
