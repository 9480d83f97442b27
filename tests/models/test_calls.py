"""The model-call store (atlaslib.models.calls) and its use by the Hugging Face adapters, on tiny random models.

"The model is not called" is checked by forward pre-hooks on the loaded model (and the module the embedders
read), counted per adapter; "made" / "served" are the store's own counts (the adapter's ``info["model_calls"]``
and :data:`calls.TALLY`). Outputs read back are compared bit for bit (np.array_equal) with what was computed.
"""
from __future__ import annotations

import errno
import hashlib
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from atlaslib.models import Profile, get_profile, load_adapter
from atlaslib.models import calls, hf
from tests import tiny_models as tm

REPO = Path(__file__).resolve().parents[2]
#: what a second process runs first: the store's module alone (the same file as this process's), without
#: atlaslib.models' package imports (pandas, transformers), so that the process starts in a second
CALLS_ONLY = f"""
import importlib.util
_spec = importlib.util.spec_from_file_location("calls_only", {calls.__file__!r})
calls = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(calls)
"""


def _second_process_env() -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    env.pop(calls.ENV_SWITCH, None)
    return env

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
OPTIONS = [" yes", " no"]
PROMPTS = ["Sentence: No weakness.\nAnswer:", "Sentence: The patient has chest pain.\nAnswer:", "Answer:"]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    import torch
    from transformers import BertModel

    d = tmp_path_factory.mktemp("tiny")
    enc = tm.tiny_encoder(d)
    other = BertModel.from_pretrained(enc)                    # the same architecture, other weights
    with torch.no_grad():
        other.embeddings.word_embeddings.weight.mul_(1.5)
    other.save_pretrained(d / "tiny-encoder-b")
    tm._bert_tokenizer().save_pretrained(d / "tiny-encoder-b")
    return {"encoder": enc, "encoder_b": d / "tiny-encoder-b", "gpt2": tm.tiny_causal_lm(d),
            "assertion": tm.tiny_assertion_classifier(d), "ner": tm.tiny_token_classifier(d)}


@pytest.fixture
def store(tmp_path, monkeypatch):
    """A fresh, empty store for the test: ``<ATLAS_CACHE_DIR>/calls``; every switch on."""
    monkeypatch.setenv("ATLAS_CACHE_DIR", str(tmp_path / "cache"))
    for sw in ("ATLAS_MODEL_CALLS", "ATLAS_EMBED_CACHE", "ATLAS_TORCH_THREADS"):
        monkeypatch.delenv(sw, raising=False)
    return tmp_path / "cache" / "calls"


def _counted(ad):
    """Count in ``ad.forwards`` every call of the loaded model and of the modules the adapters run on their own
    (an embedder's encoder, a causal LM's decoder stack)."""
    ad.forwards = 0

    def hook(module, args):
        ad.forwards += 1

    for m in {id(x): x for x in (ad.model, ad.encoder, ad.model.base_model)}.values():
        m.register_forward_pre_hook(hook)
    return ad


def _load(path, capability, **kw):
    kw.setdefault("progress", False)
    kw.setdefault("batch_size", 2)
    return _counted(load_adapter(path if isinstance(path, Profile) else str(path), capability, **kw))


def _calls_info(ad, kind):
    """The adapter's store space for ``kind``: on/off, and the calls made, served, found damaged, not written
    (``ad.info`` keeps only on/off: it goes into run specs)."""
    return {k[0]: sp.info for k, sp in ad._spaces.items()}[kind]


def _entries(root):
    return sorted(calls.entries(root))


def _tally_since(before):
    return calls.Tally.since(before, calls.TALLY.snapshot())


# ----------------------------------------------------------------------------------------- entries

def test_entry_round_trip_and_checks():
    value = {"v": np.arange(12, dtype=np.float32).reshape(3, 4) / 7, "ids": np.array([3, 1], np.int64),
             "empty": np.zeros((0, 5), np.float32), "tags": ["O", "B-problem"], "n": 2}
    key = calls.digest("x")
    blob = calls.encode_entry(key, value)
    out = calls.decode_entry(blob, key)
    assert set(out) == set(value) and out["tags"] == ["O", "B-problem"] and out["n"] == 2
    for name in ("v", "ids", "empty"):
        assert out[name].dtype == value[name].dtype and np.array_equal(out[name], value[name])
    assert calls.decode_entry(blob, calls.digest("y")) is None            # another key's entry
    assert calls.decode_entry(blob[:-1], key) is None                       # truncated
    assert calls.decode_entry(b"junk", key) is None and calls.decode_entry(b"", key) is None
    flipped = bytearray(blob)
    flipped[len(flipped) // 2] ^= 0x01
    assert calls.decode_entry(bytes(flipped), key) is None
    with pytest.raises(TypeError, match="expected numbers"):
        calls.encode_entry(key, {"s": np.array(["text"])})               # no strings as arrays


def test_env_switch_values(monkeypatch):
    for v in ("off", "0", "FALSE", "no", " Off "):
        monkeypatch.setenv(calls.ENV_SWITCH, v)
        assert not calls.env_enabled()
    for v in ("on", "1", ""):
        monkeypatch.setenv(calls.ENV_SWITCH, v)
        assert calls.env_enabled()
    monkeypatch.delenv(calls.ENV_SWITCH)
    assert calls.env_enabled()


# ----------------------------------------------------------------------------------------- (a) the key

IDENTITY = {"source": "path", "repo": None, "revision": "sha256:" + "1" * 64, "model_class": "BertModel",
            "dtype": "float32", "device": "cpu", "code": "c" * 64,
            "versions": {"torch": "2.0", "transformers": "4.0", "tokenizers": "0.1"}}


def test_each_part_of_the_key_misses_when_changed_and_hits_when_equal(tmp_path):
    x = {"input_ids": [101, 7, 8, 102]}
    base = calls.CallSpace(IDENTITY, "embed.text.pooled", {"max_length": 64, "pooling": "mean"}, root=tmp_path)
    base.put(base.key(calls.digest(x)), {"v": np.ones(3, np.float32)})
    # equal parts, fields in another order, another CallSpace (another adapter, protocol or build): a hit
    same = calls.CallSpace(dict(reversed(list(IDENTITY.items()))), "embed.text.pooled",
                           {"pooling": "mean", "max_length": 64}, root=tmp_path)
    assert np.array_equal(same.get(same.key(calls.digest(dict(x))))["v"], np.ones(3, np.float32))

    def misses(model=IDENTITY, capability="embed.text.pooled", settings=None, inp=x):
        sp = calls.CallSpace(model, capability, settings or {"max_length": 64, "pooling": "mean"}, root=tmp_path)
        return sp.get(sp.key(calls.digest(inp))) is None

    assert not misses()
    for field, value in [("revision", "sha256:" + "2" * 64), ("model_class", "BertForMaskedLM"),
                         ("dtype", "bfloat16"), ("device", "cuda"), ("code", "d" * 64), ("source", "hub"),
                         ("versions", {**IDENTITY["versions"], "torch": "2.1"}),
                         ("versions", {**IDENTITY["versions"], "transformers": "4.1"})]:
        assert misses(model={**IDENTITY, field: value}), field
    assert misses(capability="embed.text.tokens")
    assert misses(settings={"max_length": 32, "pooling": "mean"})
    assert misses(settings={"max_length": 64, "pooling": "cls"})
    assert misses(settings={"max_length": 64, "pooling": "mean", "batch": [4, 16]})
    assert misses(inp={"input_ids": [101, 7, 9, 102]})
    assert misses(inp={"input_ids": [101, 7, 8, 102], "token_type_ids": [0, 0, 0, 0]})


def test_adapter_identity_holds_every_part(models, store):
    ad = load_adapter(str(models["encoder"]), "embed.text.pooled", progress=False)
    ident = ad.call_identity()
    assert ident["revision"] == get_profile(str(models["encoder"])).revision
    assert ident["model_class"] == "BertModel" and ident["dtype"] == "float32" and ident["device"] == "cpu"
    assert ident["code"] == calls.digest([calls.code_digest(f) for f in hf.CODE_FILES])
    assert set(ident["versions"]) == {"torch", "transformers", "tokenizers"}
    assert all(ident["versions"].values())


def test_the_identity_asks_the_profiles_source_what_it_holds(models, store):
    """What a model's identity holds besides its pin comes from its source's declaration, not from a source name
    compared: a source whose location is a hub repository (``from_hub``) puts it in; the packages a source
    declares (``packages``: the GGUF reader's) are versioned beside torch's. A source registered here for the test
    (a local folder that declares both) gets both; the atlas's local-folder source gets neither. The options its
    weight loader reads (``weight_options``, the wheel's archive name for pypi) never reach the adapter, which
    refuses an option it does not know."""
    from dataclasses import replace

    from atlaslib.models.registry import SOURCES, source
    from atlaslib.models.sources import LocalFolder

    folder = get_profile(str(models["encoder"]))
    assert folder.source == "path"
    plain = load_adapter(folder, "embed.text.pooled", progress=False).call_identity()
    assert plain["repo"] is None and set(plain["versions"]) == {"torch", "transformers", "tokenizers"}

    @source("test-mirror")
    class Mirror(LocalFolder):
        from_hub = True
        packages = ("numpy",)
        weight_options = ("mirror_dir",)

    mirrored = replace(folder, source="test-mirror", options={**folder.options, "mirror_dir": "/elsewhere"})
    try:
        ident = load_adapter(mirrored, "embed.text.pooled", progress=False).call_identity()
        with pytest.raises(TypeError, match="mirror_dir"):   # an option no source declares goes to the adapter
            load_adapter(replace(folder, options={**folder.options, "mirror_dir": "/elsewhere"}), "embed.text.pooled",
                         progress=False)
    finally:
        SOURCES.pop("test-mirror")
    assert ident["source"] == "test-mirror" and ident["repo"] == folder.location
    assert ident["versions"] == {**plain["versions"], "numpy": np.__version__}


def test_every_hf_adapter_is_keyed_by_the_code_of_the_three_hf_modules(models, store, monkeypatch):
    """The adapters stand in three modules (:mod:`atlaslib.models.hf`, the shared base, and its families
    :mod:`~atlaslib.models.hf_options` and :mod:`~atlaslib.models.hf_words`) and hold one code digest, of all three
    (so the adapters of a model share the store's entries): a change to any module changes every identity."""
    from atlaslib.models import hf_options, hf_words

    ads = [load_adapter(str(models["encoder"]), c, progress=False) for c in ("embed.text.pooled", "embed.text.tokens")]
    before, real = {ad.call_identity()["code"] for ad in ads}, calls.code_digest
    assert len(before) == 1 and sorted(hf.CODE_FILES) == sorted(m.__file__ for m in (hf, hf_options, hf_words))
    for module in (hf, hf_options, hf_words):
        monkeypatch.setattr(calls, "code_digest", lambda f, m=module: "0" * 64 if f == m.__file__ else real(f))
        assert all(ad.call_identity()["code"] not in before for ad in ads), module.__name__


def _variant_adapters(models, monkeypatch):
    """name -> a function loading a pooled embedder that differs from the base in one part of its key."""
    prof = get_profile(str(models["encoder"]))
    moved = Profile(**{**prof.to_dict(), "revision": "sha256:" + "0" * 64})

    def with_pooling():
        ad = _load(models["encoder"], "embed.text.pooled")
        ad.pooling = "cls"                                     # a setting of the call (read when it is keyed)
        return ad

    def with_versions():
        real = calls.package_versions
        monkeypatch.setattr(calls, "package_versions", lambda names=(): {**real(names), "torch": "0.0+other"})
        return _load(models["encoder"], "embed.text.pooled")

    def with_code():
        monkeypatch.setattr(calls, "code_digest", lambda f: "0" * 64)
        return _load(models["encoder"], "embed.text.pooled")

    return {
        "weights": lambda: _load(models["encoder_b"], "embed.text.pooled"),
        "revision": lambda: _load(moved, "embed.text.pooled"),
        "max_length": lambda: _load(models["encoder"], "embed.text.pooled", max_length=48),
        "batch rows": lambda: _load(models["encoder"], "embed.text.pooled", batch_size=4),
        "dtype": lambda: _load(models["encoder"], "embed.text.pooled", dtype="bfloat16"),
        "pooling": with_pooling,
        "package versions": with_versions,
        "adapter code": with_code,
    }


@pytest.mark.parametrize("part", ["weights", "revision", "max_length", "batch rows", "dtype", "pooling",
                                  "package versions", "adapter code"])
def test_an_embedder_differing_in_one_part_of_the_key_asks_its_model(models, store, monkeypatch, part):
    texts = TEXTS[:3]
    base = _load(models["encoder"], "embed.text.pooled")
    first = base.embed(texts)
    assert _calls_info(base, "embed.text.pooled")["made"] == 3 and base.forwards > 0
    n_entries = len(_entries(store))
    ad = _variant_adapters(models, monkeypatch)[part]()
    ad.embed(texts)
    info = _calls_info(ad, "embed.text.pooled")
    assert (info["made"], info["served"]) == (3, 0) and ad.forwards > 0
    assert len(_entries(store)) == n_entries + 3
    monkeypatch.undo()                                          # back to the base's key: served again
    monkeypatch.setenv("ATLAS_CACHE_DIR", str(store.parent))
    again = _load(models["encoder"], "embed.text.pooled")
    assert np.array_equal(again.embed(texts), first) and again.forwards == 0


def test_equal_key_is_served_to_a_second_adapter_and_the_model_is_not_called(models, store):
    emb = _load(models["encoder"], "embed.text.pooled")
    before = calls.TALLY.snapshot()
    first = emb.embed(TEXTS)
    assert _tally_since(before)["made"] == 5 and _tally_since(before)["served"] == 0   # the repeat once
    assert len(_entries(store)) == 5 and emb.info["stats"]["n_truncated"] == 1
    np.testing.assert_array_equal(first[0], first[4])
    emb.forwards = 0
    assert np.array_equal(emb.embed(TEXTS), first) and emb.forwards == 0
    assert emb.info["stats"]["n_truncated"] == 2                # stats count served inputs too
    before = calls.TALLY.snapshot()
    other = _load(models["encoder"], "embed.text.pooled")       # a re-run, another protocol, version or build
    assert np.array_equal(other.embed(TEXTS[::-1])[::-1], first) and other.forwards == 0
    assert _tally_since(before) == {"made": 0, "served": 5, "corrupt": [], "write_errors": 0}
    # the key is the exact model input (token ids), not the text: an uncased tokenizer gives the same ids
    assert np.array_equal(other.embed([TEXTS[0].upper()]), first[:1]) and other.forwards == 0
    assert other.embed([TEXTS[0] + " x"]).shape == (1, 32) and other.forwards > 0
    # only new texts are computed, and they equal what a store-less adapter computes
    other.forwards = 0
    before = calls.TALLY.snapshot()
    other.embed(TEXTS + ["mild fever"])
    assert _tally_since(before)["made"] == 1 and other.forwards > 0
    ref = _load(models["encoder"], "embed.text.pooled", embed_cache=False).embed(TEXTS)
    assert np.array_equal(ref, first)


def test_a_second_process_reading_the_same_store_is_served(models, store):
    """Another process (another ``atlas run``, build or worker) keys the same calls the same way: given the
    embedder's identity, settings and exact inputs it is served every vector from the store, bit for bit,
    without a model (its compute fails the test)."""
    emb = _load(models["encoder"], "embed.text.pooled")
    first = emb.embed(TEXTS)
    (space,) = emb._spaces.values()
    seen, answer = [], space.answer
    space.answer = lambda inputs, compute: seen.append(inputs) or answer(inputs, compute)
    emb.forwards = 0
    assert np.array_equal(emb.embed(TEXTS), first) and emb.forwards == 0 and len(seen) == 1
    job = {"model": space.model, "capability": space.capability, "settings": space.settings, "inputs": seen[0],
           "root": str(space.root)}
    code = CALLS_ONLY + """
import hashlib, json, sys
import numpy as np
job = json.load(sys.stdin)
sp = calls.CallSpace(job["model"], job["capability"], job["settings"], root=job["root"])
def compute(positions):
    raise SystemExit(f"asked the model for {len(positions)} inputs")
out = np.stack([v["v"] for v in sp.answer(job["inputs"], compute)])
print(json.dumps({"tally": calls.TALLY.snapshot(), "sha": hashlib.sha256(out.tobytes()).hexdigest()}))
"""
    env = {**_second_process_env(), "PYTHONHASHSEED": "12345"}
    res = subprocess.run([sys.executable, "-c", code], input=json.dumps(job), capture_output=True, text=True,
                         env=env, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    got = json.loads(res.stdout.strip().splitlines()[-1])
    assert got["tally"] == {"made": 0, "served": 5, "corrupt": [], "write_errors": 0}
    assert got["sha"] == hashlib.sha256(first.tobytes()).hexdigest()


def test_decoding_settings_and_options_are_in_the_key(models, store):
    lm = _load(models["gpt2"], "score.options")
    prefix = lm.token_ids("Denies shortness of breath")
    a = lm.greedy_continuations([prefix], [4])
    assert _calls_info(lm, "continue.greedy")["made"] == 1
    lm.forwards = 0
    assert lm.greedy_continuations([prefix], [4]) == a and lm.forwards == 0
    assert _calls_info(lm, "continue.greedy")["served"] == 1
    lm.greedy_continuations([prefix], [6])                                  # another length: asked again
    assert _calls_info(lm, "continue.greedy")["made"] == 2 and lm.forwards > 0
    lm.forwards = 0
    lm.greedy_continuations([prefix], [4], batch_size=2)                    # another batch shape
    assert lm.forwards > 0
    # another adapter of the same model (another capability: the embedders load a causal LM whole) shares
    # the continuations
    emb = _load(models["gpt2"], "embed.text.pooled")
    assert emb.greedy_continuations([prefix], [4]) == a and emb.forwards == 0

    ll = lm.score_options(PROMPTS, OPTIONS)["loglik"]
    lm.forwards = 0
    assert np.array_equal(lm.score_options(PROMPTS, OPTIONS)["loglik"], ll) and lm.forwards == 0
    other = lm.score_options(PROMPTS, [" yes", " maybe"])["loglik"]         # other options: asked again
    assert lm.forwards > 0 and np.array_equal(other[:, 0], ll[:, 0])        # (the same numbers, computed)


# ----------------------------------------------------------------------------------------- (b) damage

@pytest.mark.parametrize("damage", ["flip", "truncate", "empty", "swap"])
def test_a_damaged_entry_is_recomputed_replaced_and_named(models, store, damage):
    emb = _load(models["encoder"], "embed.text.pooled")
    first = emb.embed(TEXTS[:1])
    (path,) = _entries(store)
    emb.embed(TEXTS[1:2])
    (other,) = set(_entries(store)) - {path}
    data = bytearray(path.read_bytes())
    if damage == "flip":                                     # one bit of the payload
        data[len(data) // 2] ^= 0x01
    elif damage == "truncate":
        data = data[:-40]
    elif damage == "empty":
        data = bytearray()
    else:                                                    # a whole entry of another call under this name
        data = bytearray(other.read_bytes())
    path.write_bytes(bytes(data))
    emb.forwards = 0
    before = calls.TALLY.snapshot()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again = emb.embed(TEXTS[:2])
    said = [str(w.message) for w in caught if "damaged" in str(w.message)]
    assert len(said) == 1 and str(path) in said[0] and "recomputed and replaced" in said[0]
    assert _tally_since(before)["corrupt"] == [str(path)]
    assert (_tally_since(before)["made"], _tally_since(before)["served"]) == (1, 1) and emb.forwards > 0
    assert _calls_info(emb, "embed.text.pooled")["corrupt"] == 1
    np.testing.assert_array_equal(again[:1], first)
    key = path.name[:-len(calls.SUFFIX)]
    assert calls.decode_entry(path.read_bytes(), key) is not None   # rewritten whole
    emb.forwards = 0
    assert np.array_equal(emb.embed(TEXTS[:2]), again) and emb.forwards == 0


# ----------------------------------------------------------------------------------------- (c) concurrency

_WRITER = CALLS_ONLY + """
import os, sys, time
import numpy as np
root, key, k, go, stop = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
sp = calls.CallSpace({"model": "concurrency"}, "test.cap", root=root)
value = {"v": np.full(50_000 + 997 * k, k, dtype=np.float32), "writer": k}
print("ready", flush=True)
deadline = time.monotonic() + 60          # a writer never outlives a reader that failed to say stop
while not os.path.exists(go) and time.monotonic() < deadline:
    time.sleep(0.005)
puts = 0
while not os.path.exists(stop) and time.monotonic() < deadline:
    sp.put(key, value)
    puts += 1
print("stopped" if os.path.exists(stop) else "timed out", puts, sp.write_errors, flush=True)
"""

#: the reader's bounds: it reads until it has seen this many whole entries of each writer, or for at most this long
WHOLE_EACH, READ_SECONDS = 50, 30.0


def test_two_processes_writing_one_key_never_leave_a_torn_entry(tmp_path):
    """Two processes write the same key over and over (each its own value, about 200 kB) until told to stop, while
    this one reads the entry's file: every read is a whole valid entry of one writer, or no entry yet. The reads
    overlap the writes: both writers are still writing when the last read is done (they stop only when told, and
    say so), and the reads see each writer's entry replace the other's."""
    import time

    root = tmp_path / "calls"
    space = calls.CallSpace({"model": "concurrency"}, "test.cap", root=root)
    key = space.key(calls.digest("the same input"))
    go, stop = tmp_path / "go", tmp_path / "stop"
    env = _second_process_env()
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(root), key, str(k), str(go), str(stop)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for k in (1, 2)]
    whole, absent, torn, switches, last = {1: 0, 2: 0}, 0, 0, 0, None
    try:
        for p in procs:
            assert p.stdout.readline().strip() == "ready", p.stderr.read()
        go.touch()
        path = space.path(key)
        deadline = time.monotonic() + READ_SECONDS
        while min(whole.values()) < WHOLE_EACH and time.monotonic() < deadline:
            assert all(p.poll() is None for p in procs), "a writer stopped before it was told to"
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                absent += 1
                continue
            value = calls.decode_entry(data, key)
            if value is None:
                torn += 1
                continue
            k = value["writer"]
            assert k in whole and np.all(value["v"] == k) and len(value["v"]) == 50_000 + 997 * k
            whole[k] += 1
            switches += last is not None and k != last
            last = k
        stop.touch()
        outs = [p.communicate(timeout=60) for p in procs]
    finally:
        stop.touch()
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert [p.returncode for p in procs] == [0, 0], [o[1][-2000:] for o in outs]
    said = [o[0].split() for o in outs]
    assert [s[0] for s in said] == ["stopped", "stopped"], said     # still writing after the last read
    assert [s[-1] for s in said] == ["0", "0"], said                # no write errors
    assert torn == 0, (whole, absent, torn)
    assert min(whole.values()) >= WHOLE_EACH and switches >= 1, (whole, absent, switches)
    assert [p.name for p in root.rglob("*") if p.is_file()] == [path.name]   # no temporary file left


# ----------------------------------------------------------------------------------------- (d) no text

@pytest.fixture(scope="module")
def kit_sentence(data_dir):
    """A NegEx kit sentence of the tiny models' size (the first in kit order with 8 to 20 words)."""
    from atlaslib.cards.negex.data import load_items

    items = load_items(data_dir)
    for s in items["sentence"]:
        if 8 <= len(s.split()) <= 20 and s.isascii():
            return s
    pytest.fail("no NegEx kit sentence of 8 to 20 words")


def test_no_input_text_is_in_the_store(models, store, kit_sentence):
    words = kit_sentence.split()
    _load(models["encoder"], "embed.text.pooled").embed([kit_sentence, TEXTS[3]])
    _load(models["encoder"], "embed.text.tokens").embed_words([words, WORDS[0]])
    _load(models["ner"], "predict.ner").predict_words([words])
    _load(models["assertion"], "predict.assertion").predict_assertion([kit_sentence])
    lm = _load(models["gpt2"], "score.options", max_length=tm.MAX_POSITIONS)
    lm.score_options([f"Sentence: {kit_sentence}\nAnswer:"], OPTIONS)
    lm.greedy_continuations([lm.token_ids(kit_sentence)], [5])
    files = [p for p in store.rglob("*") if p.is_file()]
    # the entries, and each space's template (dtypes and shapes) beside them: both scanned
    assert len(files) >= 8 and all(p.name.endswith(calls.SUFFIX) or p.parent.name == "spaces" for p in files)
    blob = b"\n".join(p.read_bytes() for p in files) + b"\n".join(p.name.encode() for p in files)
    needles = {kit_sentence, kit_sentence.lower(), TEXTS[3]}
    needles |= {w.strip(".,;:()[]") for w in words + TEXTS[3].split()}
    needles = {n for n in needles if len(n) >= 4} | {n.lower() for n in needles if len(n) >= 4}
    found = sorted(n for n in needles if n.encode("utf-8") in blob)
    assert not found, f"input text in the model-call store: {found}"


# ----------------------------------------------------------------------------------------- (e) neighbours

NEIGHBOURS = ["Blood pressure and heart rate were normal; lungs clear.", "fever", "no cough",
              "There is no evidence of pneumonia. Fever and cough were present.", "left right acute",
              "The patient denies chest pain, shortness of breath and fever; abdomen soft, non tender.",
              "mild", "Heart rate was normal.", "ct scan showed no evidence of a mass", "cough"]


def test_an_input_has_the_same_outputs_whatever_its_neighbours(models, store, monkeypatch):
    """Computed (store off) alone and among other inputs of the same and other widths, before and after them,
    in batches of 4 rows: bit for bit equal."""
    monkeypatch.setenv(calls.ENV_SWITCH, "off")
    x, xw = TEXTS[1], TEXTS[1].split()
    crowd = NEIGHBOURS[:5] + [x] + NEIGHBOURS[5:]
    emb = _load(models["encoder"], "embed.text.pooled", batch_size=4)
    assert np.array_equal(emb.embed([x])[0], emb.embed(crowd)[5])
    words = _load(models["encoder"], "embed.text.tokens", batch_size=4)
    assert np.array_equal(words.embed_words([xw])[0], words.embed_words([s.split() for s in crowd])[5])
    clf = _load(models["assertion"], "predict.assertion", batch_size=4)
    assert np.array_equal(clf._logits([x], None, "t")[0], clf._logits(crowd, None, "t")[5])
    lm = _load(models["gpt2"], "score.options", batch_size=4)
    prompts = [f"Sentence: {s}\nAnswer:" for s in crowd]
    ll_alone = lm.score_options(prompts[5:6], OPTIONS)["loglik"][0]
    assert np.array_equal(ll_alone, lm.score_options(prompts, OPTIONS)["loglik"][5])
    two_token = [" yes", " absent"]                                 # an option of several tokens too
    assert np.array_equal(lm.score_options(prompts[5:6], two_token)["loglik"][0],
                          lm.score_options(prompts, two_token)["loglik"][5])
    ids = [lm.token_ids(s) for s in crowd]
    assert lm.greedy_continuations(ids[5:6], [6])[0] == lm.greedy_continuations(ids, [6] * len(ids))[5]


def test_fixed_batches_shapes_depend_only_on_each_input():
    lengths = [3, 17, 16, 40, 5, 1, 33, 16, 2, 4, 6, 7, 8, 9, 10]
    got = calls.fixed_batches(lengths, rows=4, width=16)
    assert sorted(i for _, m in got for i in m) == list(range(len(lengths)))
    for w, members in got:
        assert len(members) <= 4 and all(lengths[i] <= w and w - lengths[i] < 16 for i in members)
    assert [w for w, _ in got] == sorted((w for w, _ in got), reverse=True)
    assert calls.fixed_batches([70, 5], rows=4, width=16, cap=64) == [(70, [0]), (16, [1])]
    assert calls.fixed_batches([3, 5], rows=1) == [(5, [1]), (3, [0])]
    with pytest.raises(ValueError, match="positive"):
        calls.fixed_batches([1], rows=0)


# ----------------------------------------------------------------------------------------- (f) unwritable

def _unwritable(kind, tmp_path, monkeypatch):
    if kind == "root is a file":
        blocker = tmp_path / "not-a-dir"
        blocker.write_text("x")
        monkeypatch.setenv("ATLAS_CACHE_DIR", str(blocker))
    elif kind == "read-only folder":
        if os.geteuid() == 0:
            pytest.skip("root writes into a read-only folder; the read-only file system case stands in")
        ro = tmp_path / "ro"
        (ro / "calls").mkdir(parents=True)
        ro.joinpath("calls").chmod(0o500)
        monkeypatch.setenv("ATLAS_CACHE_DIR", str(ro))
    else:                                                          # a read-only file system
        def refuse(*a, **kw):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS))

        monkeypatch.setattr(calls.tempfile, "mkstemp", refuse)


@pytest.mark.parametrize("kind", ["root is a file", "read-only folder", "read-only file system"])
def test_a_store_that_cannot_be_written_still_answers_and_warns_once(models, store, tmp_path, monkeypatch, kind):
    ref = _load(models["encoder"], "embed.text.pooled", embed_cache=False).embed(TEXTS)
    _unwritable(kind, tmp_path, monkeypatch)
    emb = _load(models["encoder"], "embed.text.pooled")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = emb.embed(TEXTS)
        again = emb.embed(TEXTS[:3])
    said = [str(w.message) for w in caught if "cannot write" in str(w.message)]
    assert len(said) == 1 and "outputs are used but not stored" in said[0]
    assert np.array_equal(out, ref) and np.array_equal(again, ref[:3])
    info = _calls_info(emb, "embed.text.pooled")
    assert info["write_errors"] == 5 + 3 and info["made"] == 8
    assert not list(store.rglob("*.call"))


# ----------------------------------------------------------------------------------------- (g) switched off

def test_model_calls_off_stores_nothing_and_asks_every_time(models, store, monkeypatch):
    monkeypatch.setenv("ATLAS_MODEL_CALLS", "off")
    emb = _load(models["encoder"], "embed.text.pooled")
    lm = _load(models["gpt2"], "score.options")
    clf = _load(models["assertion"], "predict.assertion")
    for _ in range(2):
        for ad in (emb, lm, clf):
            ad.forwards = 0
        emb.embed(TEXTS)
        lm.score_options(PROMPTS, OPTIONS)
        lm.greedy_continuations([lm.token_ids("no fever")], [3])
        clf.predict_assertion(TEXTS[:2])
        assert emb.forwards > 0 and lm.forwards > 0 and clf.forwards > 0
    assert not store.exists() or not any(store.rglob("*"))
    info = _calls_info(emb, "embed.text.pooled")
    assert info["enabled"] is False and "ATLAS_MODEL_CALLS=off" in info["reason"]
    assert info["served"] == 0 and info["made"] == 2 * 5                    # repeats within a call: once
    assert _calls_info(lm, "score.options")["served"] == 0


def test_embed_cache_off_and_the_embed_cache_option_turn_off_the_embeddings_only(models, store, monkeypatch):
    emb = _load(models["encoder"], "embed.text.pooled", embed_cache=False)
    emb.embed(TEXTS[:3])
    emb.embed(TEXTS[:3])
    assert not store.exists() and "option" in _calls_info(emb, "embed.text.pooled")["reason"]
    monkeypatch.setenv("ATLAS_EMBED_CACHE", "off")
    words = _load(models["encoder"], "embed.text.tokens")
    words.embed_words(WORDS)
    assert "ATLAS_EMBED_CACHE=off" in _calls_info(words, "embed.text.tokens")["reason"]
    assert not store.exists()
    clf = _load(models["assertion"], "predict.assertion")                    # other calls are still stored
    clf.predict_assertion(TEXTS[:2])
    assert len(_entries(store)) == 2


def test_a_model_without_a_pinned_revision_is_never_stored(models, store):
    prof = get_profile(str(models["encoder"]))
    loose = Profile(**{**prof.to_dict(), "revision": None})
    emb = _load(loose, "embed.text.pooled")
    emb.embed(TEXTS[:2])
    emb.forwards = 0
    emb.embed(TEXTS[:2])
    assert emb.forwards > 0 and not store.exists()
    assert "no pinned identity" in _calls_info(emb, "embed.text.pooled")["reason"]


# ----------------------------------------------------------------------------------------- words

def test_word_vectors_are_served_with_their_stats(models, store):
    emb = _load(models["encoder"], "embed.text.tokens")
    first = emb.embed_words(WORDS)
    assert [f.shape for f in first] == [(len(w), 32) for w in WORDS]
    info = _calls_info(emb, "embed.text.tokens")
    assert info["made"] == 4                                      # 4 distinct sentences (the empty one too)
    s1 = dict(emb.info["stats"])
    assert s1["n_unk_words"] == 1 and s1["n_chunked_sentences"] == 1
    emb.forwards = 0
    again = emb.embed_words(WORDS)
    assert emb.forwards == 0 and all(np.array_equal(a, b) for a, b in zip(first, again))
    s2 = emb.info["stats"]
    assert s2["n_unk_words"] == 2 and s2["n_chunked_sentences"] == 2      # counted when served too
    assert _calls_info(emb, "embed.text.tokens")["served"] == 4
    ref = _load(models["encoder"], "embed.text.tokens", embed_cache=False).embed_words(WORDS)
    assert all(np.array_equal(a, b) for a, b in zip(ref, first))
    with pytest.raises(TypeError, match=r"words\[1\]\[0\]"):
        emb.embed_words([["ok"], [5]])
    with pytest.raises(ValueError, match=r"words\[0\]\[1\].*max_length"):
        emb.embed_words([["ok", "z" * 100]])


# ----------------------------------------------------------------------------------------- (h) the folder

def test_usage_and_clear_count_and_remove_the_entries(models, store):
    assert calls.usage(store) == {"dir": str(store), "entries": 0, "bytes": 0} and calls.clear(store) == 0
    emb = _load(models["encoder"], "embed.text.pooled")
    first = emb.embed(TEXTS)
    _load(models["assertion"], "predict.assertion").predict_assertion(TEXTS[:2])
    files = [p for p in store.rglob("*.call")]
    assert len(files) == 5 + 2
    (files[0].parent / ".abc.tmp").write_bytes(b"left by a killed writer")
    (store / "notes.txt").write_text("not an entry")
    u = calls.usage()                                            # default: the environment's store
    assert u == {"dir": str(store), "entries": 7, "bytes": sum(p.stat().st_size for p in files)}
    assert calls.clear() == 7
    assert calls.usage(store)["entries"] == 0 and not list(store.rglob("*.call"))
    assert not list(store.rglob("*.tmp")) and (store / "notes.txt").is_file()
    emb.forwards = 0
    assert np.array_equal(emb.embed(TEXTS), first) and emb.forwards > 0      # asked again, same numbers
    assert calls.usage(store)["entries"] == 5


def test_reading_entries_opens_each_once_and_writes_nothing(tmp_path, monkeypatch):
    import builtins

    sp = calls.CallSpace(IDENTITY, "embed.text.pooled", root=tmp_path)
    rng = np.random.default_rng(0)
    inputs = [{"input_ids": [101, i, 102]} for i in range(300)]
    vecs = rng.standard_normal((300, 32)).astype(np.float32)
    sp.answer(inputs, lambda pos: [{"v": vecs[i]} for i in pos])
    before = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")}
    opened = []

    def counting_open(file, mode="r", *a, **kw):
        opened.append((str(file), mode))
        return builtins.open(file, mode, *a, **kw)

    from atlaslib import fsio

    real = fsio.open_regular

    def counting_open(file, mode="r", *a, **kw):
        opened.append((str(file), mode))
        return real(file, mode, *a, **kw)

    monkeypatch.setattr(calls, "open", counting_open, raising=False)
    monkeypatch.setattr(fsio, "open_regular", counting_open)
    got = sp.answer(inputs, lambda pos: pytest.fail("nothing to compute"))
    assert np.array_equal(np.stack([g["v"] for g in got]), vecs) and sp.served == 300
    assert sorted(opened) == sorted((str(sp.path(sp.key(calls.digest(x)))), "rb") for x in inputs)
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")} == before
