"""On-disk embedding cache: a text embedded once by a model is never embedded again by that model.

Key
    A *model key* is the sha256 of the canonical JSON of the fields that decide an embedding: cache
    format, adapter class, model class, model revision (hub commit, wheel archive sha256 or the sha256 of
    a local folder's files), pooling, layer, max_length, dtype, device type, the word-tokenisation
    option of word adapters, and the torch and transformers versions (an upgrade may change the
    numbers, so it starts a new cache instead of serving stale vectors). Each entry is then keyed by
    the sha256 of its input: the UTF-8 text for pooled embeddings, the JSON list of words for word
    embeddings. A profile without a pinned revision (a hub id that is not in the registry) has no
    reliable key and is not cached.

Layout
    ``$ATLAS_CACHE_DIR/embeddings/<model key>/<sha[:2]>/<sha>.emb`` (default cache directory
    ``~/.cache/clinical-nlp-atlas``; ``$ATLAS_EMBED_CACHE_DIR`` replaces ``$ATLAS_CACHE_DIR/embeddings``
    when set), plus ``key.json`` in each model key folder listing its fields
    for people reading the folder. One small file per input keeps concurrent runs simple: a file is
    written to a temporary name in the same folder and moved into place with :func:`os.replace`, so a
    reader sees either no entry or a complete one, and two processes writing the same key both leave
    a complete (and, for a deterministic model, identical) file. Reading 2,000 entries is 2,000 small
    reads: tens of milliseconds.

Entry format (version 1)
    ``b"ATLEMB1\\n"``, the 32-byte input sha256, ``<u4`` ndim, then ``ndim`` ``<u4`` dimensions, the
    float32 little-endian payload, and a trailing sha256 over all preceding bytes. An entry whose
    magic, input sha, length or checksum does not match (a truncated write, a flipped bit, a file
    copied under the wrong name) is counted as ``corrupt``, recomputed and overwritten; it is never
    used.

Switch
    ``ATLAS_EMBED_CACHE=off`` (or ``0``/``false``/``no``) disables the cache for every adapter; the
    adapters' ``embed_cache=False`` option disables it for one adapter.

A cached vector is the one computed the first time: with length-sorted batches, the same text in a
different batch can differ in the last bits (different padding, different kernel blocking), so a run
whose inputs were partly cached is reproducible from the cache, not bit-identical to a cold run with
other batch neighbours (differences are ~1e-7, far below any reported figure).
"""
from __future__ import annotations

import hashlib
import json
import os
import struct
import tempfile
import warnings
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from atlaslib import sources

ENV_SWITCH = "ATLAS_EMBED_CACHE"
FORMAT = 1
MAGIC = b"ATLEMB1\n"
_OFF = ("0", "off", "false", "no", "none", "disabled")


def env_enabled() -> bool:
    """False when ``$ATLAS_EMBED_CACHE`` says off (``off``, ``0``, ``false``, ``no``, ``none``)."""
    return os.environ.get(ENV_SWITCH, "on").strip().lower() not in _OFF


ENV_DIR = "ATLAS_EMBED_CACHE_DIR"


def root_dir() -> Path:
    """``$ATLAS_EMBED_CACHE_DIR`` when set, else ``<atlas cache dir>/embeddings`` (``$ATLAS_CACHE_DIR``,
    default ``~/.cache/clinical-nlp-atlas``). Read at each use."""
    explicit = os.environ.get(ENV_DIR, "").strip()
    return Path(explicit).expanduser() if explicit else sources.cache_dir() / "embeddings"


def text_sha256(text: str) -> str:
    """sha256 hex of a text's UTF-8 bytes (the key of a pooled embedding)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def words_sha256(words: Sequence[str]) -> str:
    """sha256 hex of the JSON list of words (the key of one sentence's word embeddings)."""
    return text_sha256(json.dumps(list(words), ensure_ascii=False, separators=(",", ":")))


def model_key(fields: dict) -> str:
    """sha256 hex of the canonical JSON of ``fields`` (sorted keys)."""
    return hashlib.sha256(json.dumps({"format": FORMAT, **fields}, sort_keys=True,
                                     separators=(",", ":"), default=str).encode()).hexdigest()


def encode_entry(sha: str, array: np.ndarray) -> bytes:
    """The bytes of one entry (see the module docstring)."""
    a = np.ascontiguousarray(array, dtype="<f4")
    head = MAGIC + bytes.fromhex(sha) + struct.pack(f"<I{a.ndim}I", a.ndim, *a.shape)
    body = head + a.tobytes()
    return body + hashlib.sha256(body).digest()


def decode_entry(data: bytes, sha: str) -> np.ndarray | None:
    """The array stored in ``data`` for input ``sha``, or None when anything does not check out."""
    m = len(MAGIC)
    if len(data) < m + 32 + 4 + 32 or data[:m] != MAGIC or data[m:m + 32] != bytes.fromhex(sha):
        return None
    (ndim,) = struct.unpack_from("<I", data, m + 32)
    if ndim > 8:
        return None
    start = m + 36 + 4 * ndim
    if len(data) < start + 32:
        return None
    shape = struct.unpack_from(f"<{ndim}I", data, m + 36)
    n = int(np.prod(shape, dtype=np.int64)) if ndim else 1
    if len(data) != start + 4 * n + 32 or hashlib.sha256(data[:-32]).digest() != data[-32:]:
        return None
    return np.frombuffer(data, dtype="<f4", count=n, offset=start).reshape(shape).astype(np.float32)


class EmbeddingCache:
    """The cache of one model key. ``get``/``put`` work on input sha256 hex strings; counters
    ``hits``, ``misses``, ``corrupt``, ``writes`` and ``write_errors`` accumulate over the object's life.

    ``enabled=False`` (or the environment switch off) gives a cache that always misses and never writes.
    """

    def __init__(self, fields: dict, *, enabled: bool = True, root: str | os.PathLike | None = None,
                 reason: str | None = None):
        self.fields = dict(fields)
        self.key = model_key(self.fields)
        self._option = bool(enabled)
        self._reason = reason
        self._root = Path(root) if root is not None else None
        self.hits = self.misses = self.corrupt = self.writes = self.write_errors = 0
        self._key_written_in = None

    @property
    def dir(self) -> Path:
        """``<root>/<model key>``; the root is read from the environment at each use."""
        return (self._root if self._root is not None else root_dir()) / self.key

    @property
    def enabled(self) -> bool:
        """The option, the pinned revision and ``$ATLAS_EMBED_CACHE`` (read at each call) all allow it."""
        return self._option and self._reason is None and env_enabled()

    @property
    def reason(self) -> str | None:
        """Why the cache is off (None when it is on)."""
        if self._reason is not None:
            return self._reason
        if not self._option:
            return "off by the adapter option embed_cache=False"
        if not env_enabled():
            return f"off by {ENV_SWITCH}={os.environ.get(ENV_SWITCH)}"
        return None

    def path(self, sha: str) -> Path:
        return self.dir / sha[:2] / f"{sha}.emb"

    def get(self, sha: str, shape: tuple | None = None) -> np.ndarray | None:
        """The cached array for ``sha`` or None (a miss). An entry that fails its checks, or whose shape
        is not ``shape`` when given, counts as corrupt (and a miss) and is never returned."""
        if not self.enabled:
            self.misses += 1
            return None
        try:
            with open(self.path(sha), "rb") as f:
                data = f.read()
        except OSError:                    # absent (or unreadable): a miss
            self.misses += 1
            return None
        arr = decode_entry(data, sha)
        if arr is None or (shape is not None and arr.shape != tuple(shape)):
            self.corrupt += 1
            self.misses += 1
            return None
        self.hits += 1
        return arr

    def get_many(self, shas: Iterable[str], shape: tuple | None = None) -> list[np.ndarray | None]:
        return [self.get(s, shape) for s in shas]

    def put(self, sha: str, array: np.ndarray) -> None:
        """Write one entry atomically (temporary file in the same folder, then ``os.replace``). A
        failure to write (read-only or full disk) warns once per cache and is counted, never raised."""
        if not self.enabled:
            return
        target = self.path(sha)
        tmp = None
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            if self._key_written_in != self.dir:
                self._write_key_file()
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{sha[:12]}.", suffix=".tmp")
            with os.fdopen(fd, "wb") as f:
                f.write(encode_entry(sha, array))
            os.replace(tmp, target)
            tmp = None
            self.writes += 1
        except OSError as exc:
            self.write_errors += 1
            if self.write_errors == 1:
                warnings.warn(f"embedding cache {self.dir}: cannot write entries ({exc}); "
                              "embeddings are computed but not cached", RuntimeWarning, stacklevel=3)
        finally:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass

    def put_many(self, shas: Sequence[str], arrays: Sequence[np.ndarray]) -> None:
        for s, a in zip(shas, arrays):
            self.put(s, a)

    def _write_key_file(self) -> None:
        p = self.dir / "key.json"
        self._key_written_in = self.dir
        if p.is_file():
            return
        fd, tmp = tempfile.mkstemp(dir=self.dir, prefix=".key.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump({"format": FORMAT, **self.fields}, f, indent=1, sort_keys=True, default=str)
            os.replace(tmp, p)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    @property
    def info(self) -> dict:
        """What the run spec records: on/off (and why off), folder, key and the counters."""
        out = {"enabled": self.enabled, "dir": str(self.dir), "key": self.key, "hits": self.hits,
               "misses": self.misses, "corrupt": self.corrupt, "writes": self.writes,
               "write_errors": self.write_errors}
        if not self.enabled:
            out["reason"] = self.reason
        return out


def for_adapter(adapter, *, enabled: bool = True, extra: dict | None = None) -> EmbeddingCache:
    """The cache of a Hugging Face embedding adapter (its profile, model, pooling, max_length, dtype,
    device; ``extra`` adds adapter-specific fields). A profile without a revision is never cached."""
    import torch
    import transformers

    prof = adapter.profile
    fields = {
        "adapter": type(adapter).__name__,
        "model_class": type(adapter.model).__name__,
        "revision": prof.revision,
        "pooling": adapter.pooling,
        "layer": "last",
        "max_length": int(adapter.max_length),
        "dtype": str(adapter.dtype),
        "device": torch.device(adapter.device).type,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        **(extra or {}),
    }
    reason = None
    if not prof.revision:
        reason = f"off: model {prof.name!r} has no pinned revision, so cached vectors could go stale"
    return EmbeddingCache(fields, enabled=enabled, reason=reason)
