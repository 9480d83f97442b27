"""The on-disk embedding cache (atlaslib.models.embed_cache) wired into the HF embedders.

Forward passes are counted by wrapping the loaded model's ``forward``; the uncached reference is the
same checkpoint with the cache switched off, so "equal" below means bit for bit (np.array_equal).
"""
from __future__ import annotations

import os
import threading

import numpy as np
import pytest

from atlaslib.models import Profile, get_profile, load_adapter
from atlaslib.models import embed_cache as ec
from tests import tiny_models as tm

TEXTS = [
    "No [entity] WEAKNESS [entity].",
    "Denies shortness of breath, stridor, or [entity] AIR HUNGER [entity].",
    "a",
    "The patient has chest pain and fever with cough; lungs clear, abdomen soft and non tender.",
    "No [entity] WEAKNESS [entity].",                       # a repeat
    " ".join(["fever"] * 100),                              # longer than max_length (64): truncated
]
WORDS = [
    ["No", "chest", "pain", "."],
    ["zzyzx", "\u200b", "is", "negative"],                  # a word without sub-words -> [UNK]
    [],
    ["fever"] * 70,                                          # chunked: 70 sub-words > 62
    ["No", "chest", "pain", "."],                            # a repeat
]


@pytest.fixture(scope="module")
def encoder(tmp_path_factory):
    return tm.tiny_encoder(tmp_path_factory.mktemp("tiny"))


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("ATLAS_CACHE_DIR", str(d))
    monkeypatch.delenv("ATLAS_EMBED_CACHE", raising=False)
    monkeypatch.delenv("ATLAS_EMBED_CACHE_DIR", raising=False)
    return d


def _counted(adapter):
    """Wrap the adapter's model so every forward pass adds its batch rows to ``adapter.rows``."""
    adapter.rows = []
    fwd = adapter.model.forward

    def forward(*args, **kw):
        ids = kw.get("input_ids", args[0] if args else None)
        adapter.rows.append(int(ids.shape[0]))
        return fwd(*args, **kw)

    adapter.model.forward = forward
    return adapter


def _pooled(path, **kw):
    return _counted(load_adapter(str(path), "embed.text.pooled", progress=False, batch_size=2, **kw))


def _tokens(path, **kw):
    return _counted(load_adapter(str(path), "embed.text.tokens", progress=False, batch_size=2, **kw))


def _entries(d):
    return sorted(p for p in d.rglob("*.emb"))


# ----------------------------------------------------------------------------------------- pooled

def test_second_call_and_second_adapter_compute_nothing_and_equal_uncached(encoder, cache_dir, monkeypatch):
    emb = _pooled(encoder)
    first = emb.embed(TEXTS)
    assert sum(emb.rows) == len(set(TEXTS)) == 5                # the repeat is embedded once
    info = emb.info["embed_cache"]
    assert info["enabled"] and (info["hits"], info["misses"], info["writes"]) == (0, 5, 5)
    assert len(_entries(cache_dir / "embeddings")) == 5
    assert emb.info["stats"]["n_truncated"] == 1                 # the long text
    np.testing.assert_array_equal(first[0], first[4])

    emb.rows.clear()
    again = emb.embed(TEXTS)
    assert emb.rows == [] and np.array_equal(again, first)
    assert emb.info["embed_cache"]["hits"] == 5
    assert emb.info["stats"]["n_truncated"] == 2                 # stats still count cached inputs

    other = _pooled(encoder)                                      # a re-run / a second protocol
    assert np.array_equal(other.embed(TEXTS[::-1])[::-1], first) and other.rows == []
    assert other.info["embed_cache"]["hits"] == 5 and other.info["embed_cache"]["misses"] == 0

    # bit for bit the uncached computation of the distinct texts (the same batches: the cache stores
    # exactly what was computed)
    monkeypatch.setenv("ATLAS_EMBED_CACHE", "off")
    off = _pooled(encoder)
    ref = off.embed(TEXTS)
    assert sum(off.rows) == len(TEXTS)                           # no cache: every row computed, repeats too
    assert off.info["embed_cache"]["enabled"] is False
    assert "ATLAS_EMBED_CACHE=off" in off.info["embed_cache"]["reason"]
    distinct = [0, 1, 2, 3, 5]
    np.testing.assert_array_equal(off.embed([TEXTS[i] for i in distinct]), first[distinct])
    np.testing.assert_allclose(ref, first, atol=1e-6)           # other batch neighbours: last bits only
    assert len(_entries(cache_dir / "embeddings")) == 5          # nothing new written while off


def test_truncation_stat_counts_each_input(encoder, cache_dir):
    emb = _pooled(encoder)
    emb.embed([TEXTS[5]])
    assert emb.info["stats"]["n_truncated"] == 1
    emb.embed([TEXTS[5], TEXTS[5]])
    assert emb.info["stats"]["n_truncated"] == 3


def test_option_off_computes_everything(encoder, cache_dir):
    emb = _pooled(encoder, embed_cache=False)
    emb.embed(TEXTS[:3])
    emb.embed(TEXTS[:3])
    assert sum(emb.rows) == 6 and not (cache_dir / "embeddings").exists()
    assert "embed_cache=False" in emb.info["embed_cache"]["reason"]


def test_only_new_texts_are_embedded(encoder, cache_dir):
    emb = _pooled(encoder)
    a = emb.embed(TEXTS[:2])
    emb.rows.clear()
    b = emb.embed(TEXTS[:4])
    assert sum(emb.rows) == 2
    np.testing.assert_array_equal(a, b[:2])
    c = _pooled(encoder, embed_cache=False).embed(TEXTS[:4])
    np.testing.assert_allclose(b, c, atol=1e-5)


def test_key_changes_with_revision_pooling_max_length_dtype(encoder, cache_dir):
    base = _pooled(encoder)
    base.embed(TEXTS[:3])
    key = base.embed_cache.key

    shorter = _pooled(encoder, max_length=16)
    shorter.embed(TEXTS[:3])
    assert shorter.embed_cache.key != key and sum(shorter.rows) == 3

    prof = get_profile(str(encoder))
    moved = Profile(**{**prof.to_dict(), "revision": "sha256:" + "0" * 64})
    other_rev = _counted(load_adapter(moved, "embed.text.pooled", progress=False, batch_size=2))
    other_rev.embed(TEXTS[:3])
    assert other_rev.embed_cache.key != key and sum(other_rev.rows) == 3

    words = _tokens(encoder)                                       # word_mean pooling: its own key
    assert words.embed_cache.key not in (key, shorter.embed_cache.key)

    fields = dict(base.embed_cache.fields)
    assert fields["revision"] == prof.revision and fields["pooling"] == "mean" and fields["max_length"] == 64
    assert fields["layer"] == "last"
    for change in ({"pooling": "cls"}, {"layer": -2}, {"dtype": "bfloat16"}, {"revision": "x"},
                   {"max_length": 63}):
        assert ec.model_key({**fields, **change}) != key
    assert ec.model_key(dict(reversed(list(fields.items())))) == key    # order of fields is irrelevant


def test_revision_none_is_not_cached(encoder, cache_dir):
    prof = get_profile(str(encoder))
    loose = Profile(**{**prof.to_dict(), "revision": None})
    emb = _counted(load_adapter(loose, "embed.text.pooled", progress=False))
    emb.embed(TEXTS[:2])
    emb.embed(TEXTS[:2])
    assert sum(emb.rows) == 4 and "no pinned revision" in emb.info["embed_cache"]["reason"]


@pytest.mark.parametrize("damage", ["flip", "truncate", "empty", "swap"])
def test_corrupt_entry_is_recomputed_never_used(encoder, cache_dir, damage):
    emb = _pooled(encoder)
    first = emb.embed(TEXTS[:3])
    sha = ec.text_sha256(TEXTS[1])
    path = emb.embed_cache.path(sha)
    data = bytearray(path.read_bytes())
    if damage == "flip":                     # one bit of the payload
        data[len(data) // 2] ^= 0x01
    elif damage == "truncate":
        data = data[:-40]
    elif damage == "empty":
        data = bytearray()
    else:                                    # a valid entry of another text under this name
        data = bytearray(emb.embed_cache.path(ec.text_sha256(TEXTS[0])).read_bytes())
    path.write_bytes(bytes(data))
    emb.rows.clear()
    again = emb.embed(TEXTS[:3])
    assert emb.rows == [1]                                  # exactly the damaged one, recomputed
    np.testing.assert_array_equal(again, first)
    info = emb.info["embed_cache"]
    assert info["corrupt"] == 1 and info["hits"] == 2
    assert ec.decode_entry(path.read_bytes(), sha) is not None   # and rewritten whole
    emb.rows.clear()
    emb.embed(TEXTS[:3])
    assert emb.rows == []


def test_no_temporary_files_and_key_file(encoder, cache_dir):
    emb = _pooled(encoder)
    emb.embed(TEXTS)
    d = emb.embed_cache.dir
    assert not [p for p in d.rglob(".*")]
    assert (d / "key.json").is_file() and emb.embed_cache.fields["revision"] in (d / "key.json").read_text()


def test_unwritable_cache_warns_and_still_embeds(encoder, tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    monkeypatch.setenv("ATLAS_CACHE_DIR", str(blocker))
    emb = _pooled(encoder)
    with pytest.warns(RuntimeWarning, match="cannot write"):
        out = emb.embed(TEXTS[:3])
    assert out.shape == (3, 32) and emb.info["embed_cache"]["write_errors"] == 3


# ----------------------------------------------------------------------------------------- words

def test_word_embeddings_cached_with_stats(encoder, cache_dir):
    emb = _tokens(encoder)
    first = emb.embed_words(WORDS)
    assert [f.shape for f in first] == [(len(w), 32) for w in WORDS]
    computed = sum(emb.rows)
    assert computed == 4                                   # 3 distinct non-empty sentences, one in 2 chunks
    s1 = dict(emb.info["stats"])
    assert s1["n_unk_words"] == 1 and s1["n_chunked_sentences"] == 1
    emb.rows.clear()
    again = emb.embed_words(WORDS)
    assert emb.rows == []
    assert all(np.array_equal(a, b) for a, b in zip(first, again))
    s2 = emb.info["stats"]
    assert s2["n_unk_words"] == 2 and s2["n_chunked_sentences"] == 2      # counted on cache hits too
    assert emb.info["embed_cache"]["hits"] == 3

    off = _tokens(encoder, embed_cache=False)
    ref = off.embed_words(WORDS)
    assert sum(off.rows) == 5                                  # the repeat computed again
    for a, b in zip(ref, first):
        np.testing.assert_allclose(a, b, atol=1e-6)
    for a, b in zip(off.embed_words(WORDS[:4]), first[:4]):    # distinct sentences: the same batches
        np.testing.assert_array_equal(a, b)


def test_word_cache_rejects_bad_input_like_before(encoder, cache_dir):
    emb = _tokens(encoder)
    with pytest.raises(TypeError, match=r"words\[1\]\[0\]"):
        emb.embed_words([["ok"], [5]])
    with pytest.raises(ValueError, match=r"words\[0\]\[1\].*max_length"):
        emb.embed_words([["ok", "z" * 100]])


# ----------------------------------------------------------------------------------------- store

def test_entry_round_trip_and_checks():
    a = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
    sha = ec.text_sha256("x")
    blob = ec.encode_entry(sha, a)
    assert np.array_equal(ec.decode_entry(blob, sha), a)
    assert ec.decode_entry(blob, ec.text_sha256("y")) is None
    assert ec.decode_entry(blob[:-1], sha) is None
    assert ec.decode_entry(b"junk", sha) is None
    z = ec.encode_entry(sha, np.zeros((0, 5), np.float32))
    assert ec.decode_entry(z, sha).shape == (0, 5)


def test_concurrent_writers_of_the_same_key_leave_a_valid_entry(tmp_path):
    vec = np.linspace(0, 1, 384, dtype=np.float32)
    sha = ec.text_sha256("same text")
    caches = [ec.EmbeddingCache({"m": 1}, root=tmp_path) for _ in range(4)]
    errors = []

    def write(c):
        try:
            for _ in range(50):
                c.put(sha, vec)
        except Exception as exc:           # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(c,)) for c in caches]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert not errors and sum(c.writes for c in caches) == 200
    assert np.array_equal(caches[0].get(sha), vec)
    assert sorted(p.name for p in caches[0].dir.rglob("*") if p.is_file()) == sorted(["key.json", f"{sha}.emb"])


def test_reading_2000_entries_opens_each_entry_once_and_writes_nothing(tmp_path, monkeypatch):
    """What keeps a warm cache cheap, as behaviour (speed is for benchmarks/): a read of n entries opens the n
    entry files, each once, for reading, and nothing else; it writes nothing."""
    import builtins

    c = ec.EmbeddingCache({"m": 2}, root=tmp_path)
    rng = np.random.default_rng(0)
    vecs = rng.standard_normal((2000, 384)).astype(np.float32)
    shas = [ec.text_sha256(f"text {i}") for i in range(2000)]
    c.put_many(shas, vecs)
    files_before = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")}
    writes = c.writes
    opened = []

    def counting_open(file, mode="r", *a, **kw):
        opened.append((str(file), mode))
        return builtins.open(file, mode, *a, **kw)

    monkeypatch.setattr(ec, "open", counting_open, raising=False)
    got = c.get_many(shas, (384,))
    assert np.array_equal(np.stack(got), vecs) and c.hits == 2000 and c.misses == 0
    assert sorted(opened) == sorted((str(c.path(s)), "rb") for s in shas)
    assert c.writes == writes and {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")} == files_before


def test_embed_cache_dir_env_overrides_the_location(encoder, cache_dir, tmp_path, monkeypatch):
    emb = _pooled(encoder)
    monkeypatch.setenv("ATLAS_EMBED_CACHE_DIR", str(tmp_path / "elsewhere"))
    emb.embed(TEXTS[:2])
    assert len(_entries(tmp_path / "elsewhere")) == 2 and not (cache_dir / "embeddings").exists()
    assert emb.info["embed_cache"]["dir"].startswith(str(tmp_path / "elsewhere"))


def test_env_switch_values(monkeypatch):
    for v in ("off", "0", "FALSE", "no"):
        monkeypatch.setenv("ATLAS_EMBED_CACHE", v)
        assert not ec.env_enabled()
    for v in ("on", "1", ""):
        monkeypatch.setenv("ATLAS_EMBED_CACHE", v)
        assert ec.env_enabled()
    monkeypatch.delenv("ATLAS_EMBED_CACHE")
    assert ec.env_enabled() and os.environ.get("ATLAS_EMBED_CACHE") is None
