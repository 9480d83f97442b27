"""Fourth round, the store's faults: the model-call store, the run cache's record and the build caches.

- a store entry that passes the codec's checks but is not what its key promises (an embedding cut to 10
  dimensions with its trailer hashed again, a log-likelihood per option too many, a label outside the declared
  set) is recomputed and named, never served; a header nested 100,000 deep is damaged, not a RecursionError; a
  header that is not an object, or has integer labels, is listed by ``atlas cache list``;
- a named pipe where a store entry or a run's ``.cell-sha256`` record belongs is named and passed over, never
  opened for reading (it would block forever);
- a folder where a build-cache entry belongs is logged as damaged, removed, and the build goes on.
"""
from __future__ import annotations

import hashlib
import json
import os
import struct
import threading
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from atlaslib import results
from atlaslib.models import calls
from atlaslib.models.registry import ASSERTION_LABELS

IDENTITY = {"source": "path", "repo": None, "revision": "sha256:" + "2" * 64, "model_class": "BertModel",
            "dtype": "float32", "device": "cpu", "code": "d" * 64, "versions": {"torch": "2.0"}}
DIM = 32
INPUTS = [{"input_ids": [101, i, 102]} for i in range(6)]


def _vec(i: int) -> np.ndarray:
    return (np.arange(DIM, dtype=np.float32) + i) / 7


def _embed(pos):
    return [{"v": _vec(pos_i)} for pos_i in pos]


def _space(root, kind="embed.text.pooled"):
    return calls.CallSpace(IDENTITY, kind, {"batch": [8, 16]}, root=root)


def _plant(sp, inp, value):
    """Store ``value`` for ``inp`` as a whole, well-formed entry (header and trailer as the codec writes them)."""
    key = sp.key(calls.digest(inp))
    path = sp.path(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(calls.encode_entry(key, value, sp.label))
    return path


def _answer(sp, inputs, compute):
    """``sp.answer``, with the positions computed and the entries named as damaged."""
    asked: list[int] = []
    before = calls.TALLY.snapshot()

    def counting(pos):
        asked.extend(pos)
        return compute(pos)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = sp.answer(inputs, counting)
    named = calls.Tally.since(before, calls.TALLY.snapshot())["corrupt"]
    return out, sorted(asked), named, [str(w.message) for w in caught]


# ------------------------------------------------------------------------ 2. values that break their promise

@pytest.mark.parametrize("record", ["kept", "none beside the entries"])
def test_embeddings_cut_to_ten_dimensions_are_recomputed_and_named(tmp_path, record):
    sp = _space(tmp_path)
    sp.answer(INPUTS, _embed)                                   # a warm store, as the team has it
    paths = [_plant(sp, x, {"v": _vec(i)[:10]}) for i, x in enumerate(INPUTS)]   # cut, trailer hashed again
    if record != "kept":                                        # a store written before templates were kept
        for f in (tmp_path / "spaces").glob("*"):
            f.unlink()
    out, asked, named, said = _answer(_space(tmp_path), INPUTS, _embed)
    assert all(v["v"].shape == (DIM,) and np.array_equal(v["v"], _vec(i)) for i, v in enumerate(out))
    assert asked == list(range(len(INPUTS)))                    # every cut vector asked of the model again
    assert sorted(named) == sorted(map(str, paths))              # and named, as the cell's corrupt list shows
    assert any("does not hold what its key promises" in s and "v has shape [10]" in s for s in said)
    # replaced: a third reader is served every vector without asking the model
    out, asked, named, _ = _answer(_space(tmp_path), INPUTS, lambda pos: pytest.fail("served, not computed"))
    assert not asked and not named and np.array_equal(out[3]["v"], _vec(3))


def test_option_logliks_not_one_per_option_and_labels_outside_the_declared_set_are_recomputed(tmp_path):
    opts = [[5], [6]]
    inputs = [{"prompt": [1, 2, i], "options": opts} for i in range(3)]
    sp = _space(tmp_path, "score.options")
    right = lambda pos: [{"loglik": np.array([-1.0 - p, -2.0], dtype=np.float64)} for p in pos]  # noqa: E731
    sp.answer(inputs, right)
    bad = _plant(sp, inputs[1], {"loglik": np.array([-1.0, -2.0, -3.0])})       # three values, two options
    out, asked, named, _ = _answer(_space(tmp_path, "score.options"), inputs, right)
    assert asked == [1] and named == [str(bad)] and [len(v["loglik"]) for v in out] == [2, 2, 2]

    texts = ["No [entity] fever [entity].", "[entity] Cough [entity] today."]
    rules = _space(tmp_path, "predict.assertion")
    said = {"label": "ABSENT", "evidence": {"category": "NEG", "span": [0, 2]}}
    label = lambda pos: [said] * len(pos)  # noqa: E731
    rules.answer(texts, label)
    bad = _plant(rules, texts[0], {"label": "MAYBE", "evidence": None})
    out, asked, named, _ = _answer(_space(tmp_path, "predict.assertion"), texts, label)
    assert asked == [0] and named == [str(bad)] and [v["label"] for v in out] == ["ABSENT", "ABSENT"]


def _entry_with_header(header: bytes) -> bytes:
    body = calls.MAGIC + struct.pack("<I", len(header)) + header
    return body + hashlib.sha256(body).digest()


def test_a_header_nested_100000_deep_is_damaged_not_a_recursion_error(tmp_path):
    sp = _space(tmp_path)
    sp.answer(INPUTS[:2], _embed)
    path = sp.path(sp.key(calls.digest(INPUTS[0])))
    path.write_bytes(_entry_with_header(b"[" * 100_000 + b"]" * 100_000))
    out, asked, named, _ = _answer(_space(tmp_path), INPUTS[:2], _embed)
    assert asked == [0] and named == [str(path)] and np.array_equal(out[0]["v"], _vec(0))


def test_cache_list_shows_headers_that_are_not_objects_or_have_integer_labels(tmp_path, monkeypatch, capsys):
    from atlaslib import cli

    monkeypatch.setenv("ATLAS_CACHE_DIR", str(tmp_path))
    root = tmp_path / "calls"
    (root / "ab").mkdir(parents=True)
    (root / "ab" / f"{'ab' + '0' * 62}.call").write_bytes(_entry_with_header(b"[1, 2]"))
    (root / "ab" / f"{'ab' + '1' * 62}.call").write_bytes(
        _entry_with_header(json.dumps({"key": "x", "space": {"model": 7, "capability": 9}}).encode()))
    (root / "ab" / f"{'ab' + '2' * 62}.call").write_bytes(_entry_with_header(b"[" * 100_000))
    assert cli.main(["cache", "list"]) == 0
    out = capsys.readouterr().out
    assert "3 entries" in out and " 7 " in out and " 9 " in out and "?" in out


# the property: any header and value the codec accepts is served only when it matches its key's promise
_DTYPES = ["<f4", "<f8", "<i8", "<i4", "|u1", "|b1"]
_arrays = st.builds(lambda dt, shape: np.zeros(shape, dtype=dt), st.sampled_from(_DTYPES),
                    st.lists(st.integers(0, 40), min_size=0, max_size=2).map(tuple))
_json = st.recursive(st.none() | st.booleans() | st.integers(-5, 40) | st.sampled_from([*ASSERTION_LABELS, "MAYBE"]),
                     lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.sampled_from(
                         ["category", "span", "x"]), kids, max_size=3), max_leaves=6)
_values = st.dictionaries(st.sampled_from(["v", "loglik", "label", "evidence", "extra"]),
                          _arrays | _json, min_size=0, max_size=3)
_OPTS = [[5], [6], [7]]
_TEXT = "No [entity] fever [entity]."


def _promised(kind: str, value: dict) -> bool:
    """What each kind's key promises, written out here on its own (the store's rule is not reused)."""
    def arr(name, dtype, shape):
        a = value.get(name)
        return isinstance(a, np.ndarray) and a.dtype == np.dtype(dtype) and a.shape == shape

    if kind == "embed.text.pooled":
        return set(value) == {"v"} and arr("v", "<f4", (DIM,))
    if kind == "score.options":
        return set(value) == {"loglik"} and arr("loglik", "<f8", (len(_OPTS),))
    ev = value.get("evidence")
    ev_ok = ev is None or (isinstance(ev, dict) and isinstance(ev.get("category"), str)
                           and isinstance(ev.get("span"), list) and len(ev["span"]) == 2
                           and all(type(x) is int for x in ev["span"]) and 0 <= ev["span"][0] <= ev["span"][1]
                           <= len(_TEXT))
    return set(value) == {"label", "evidence"} and value["label"] in ASSERTION_LABELS and ev_ok


_TRUE = {"embed.text.pooled": ("x", {"v": np.ones(DIM, np.float32)}),
         "score.options": ({"prompt": [1, 2], "options": _OPTS}, {"loglik": np.zeros(3)}),
         "predict.assertion": (_TEXT, {"label": "PRESENT", "evidence": None})}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(sorted(_TRUE)), value=_values)
def test_property_a_stored_value_is_served_only_when_it_is_what_its_key_promises(tmp_path_factory, kind, value):
    root = tmp_path_factory.mktemp("store")
    inp, true = _TRUE[kind]
    sp = _space(root, kind)
    sp.answer([inp, "other"], lambda pos: [true] * len(pos))     # the space's values as the model gives them
    path = _plant(sp, inp, value)                                  # then a well-formed entry of any shape
    assert calls.decode_entry(path.read_bytes(), sp.key(calls.digest(inp))) is not None   # the codec accepts it
    out, asked, named, _ = _answer(_space(root, kind), [inp], lambda pos: [true] * len(pos))
    if _promised(kind, value):
        assert not asked and not named and set(out[0]) == set(value)
    else:
        assert asked == [0] and named == [str(path)]
        assert all(np.array_equal(out[0][k], true[k]) if isinstance(true[k], np.ndarray) else out[0][k] == true[k]
                   for k in true)


# ------------------------------------------------------------------------------------ 3. pipes never block

def _within(seconds, fn, fifo):
    """``fn()`` in a thread; if it has not returned in ``seconds`` (blocked on the pipe) the pipe is opened for
    writing, which lets a blocked reader go, and the test fails."""
    box: dict = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 (handed to the test)
            box["error"] = exc

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(seconds)
    if t.is_alive():
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
        t.join(10)
        pytest.fail(f"blocked on the named pipe {fifo}")
    if "error" in box:
        raise box["error"]
    return box["value"]


def test_a_named_pipe_in_place_of_a_store_entry_is_named_and_recomputed(tmp_path):
    sp = _space(tmp_path)
    sp.answer(INPUTS[:3], _embed)
    path = sp.path(sp.key(calls.digest(INPUTS[1])))
    path.unlink()
    os.mkfifo(path)
    out, asked, named, said = _within(20, lambda: _answer(_space(tmp_path), INPUTS[:3], _embed), path)
    assert asked == [1] and named == [str(path)] and np.array_equal(out[1]["v"], _vec(1))
    assert any("named pipe" in s for s in said)
    assert path.is_file() and not path.is_symlink()                                  # replaced by the entry
    os.unlink(path)
    os.mkfifo(path)                                                                  # and atlas cache list
    groups = _within(20, lambda: calls.listing(tmp_path), path)
    assert sum(g["entries"] for g in groups) == 3


def test_a_named_pipe_in_place_of_the_run_record_is_no_record_and_never_blocks(tmp_path):
    nb = tmp_path / "book" / "runs" / "negex" / "zero_shot.ipynb"
    nb.parent.mkdir(parents=True)
    nb.write_text("{}")
    cell = tmp_path / "zero_shot.json"
    cell.write_text("{}")
    record = results.record_path(nb)
    assert record.name == "zero_shot.cell-sha256"
    os.mkfifo(record)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = _within(20, lambda: results.cell_as_recorded(nb, cell), record)
    assert got is None                                          # no record: the run is not served from the cache
    assert any(str(record) in str(w.message) and "named pipe" in str(w.message) for w in caught)


# ------------------------------------------------------------------------- 5. a build-cache entry is a folder

def test_a_folder_in_place_of_a_build_cache_entry_is_removed_and_the_build_goes_on(tmp_path, monkeypatch, capsys):
    from atlaslib.metrics import intervals
    from atlaslib.pages import comparisons

    src = tmp_path / "site"
    key = f"coverage-{'-'.join(map(str, comparisons.COVERAGE_ICC))}-{comparisons.COVERAGE_SIMS}.json"
    entry = tmp_path / "_atlas_cache" / key                     # beside the site tree, kept between builds
    (entry / "inside").mkdir(parents=True)
    (entry / "inside" / "x.json").write_text("[]")
    monkeypatch.setattr(intervals, "simulate_coverage",
                        lambda sims, icc, n_resamples: {"icc": icc, "cluster": 0.95, "item": 0.9 - icc})
    for _ in range(2):                                          # this build, and the next one served from it
        text = comparisons._coverage_block(src)
        assert "simulated test sets per point" in text
    assert entry.is_file() and len(json.loads(entry.read_text())) == len(comparisons.COVERAGE_ICC)
    logged = capsys.readouterr().out.splitlines()
    assert [line for line in logged if str(entry) in line] == [
        f"build cache {entry} is damaged (a folder, not a file); computing it again"]

    facts = tmp_path / "_build" / "facts-maccrobat.json"        # the same reader serves the facts' cache
    facts.mkdir(parents=True)
    assert results.read_cache_json(facts, log=logged.append) is None and not facts.exists()
    results.atomic_write_text(facts, json.dumps({"key": "k", "numbers": {}}))
    assert results.read_cache_json(facts) == {"key": "k", "numbers": {}}
