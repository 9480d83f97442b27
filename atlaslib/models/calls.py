"""The model-call store: every call to a model is answered from one content-addressed store before the model
is asked.

What is a call
    One model output for one exact input: the pooled vector of a text, the word vectors of a sentence, the
    log-likelihoods of a prompt's answer options, the logits of a classifier head on a text (or a text pair),
    the tags of a sentence, a greedy continuation of token ids, a fine-tuned model's class probabilities, a
    server's reply. Adapters ask :meth:`CallSpace.answer` for a list of inputs; the inputs the store holds
    are read back, the rest are computed in one batch call of the model and stored.

Key
    sha256 of the canonical JSON of: the store's format; the model's identity (:meth:`CallSpace`'s ``model``:
    the weights' or file's sha256 or the hub commit, for a fine-tuned model its weight key and weights'
    sha256, the adapter class, the digest of the adapter module's code (its syntax tree without comments and
    docstrings: a comment changes nothing, a code change asks the model again), dtype, device and the
    versions of the packages that change the numbers (torch, transformers, tokenizers)); the capability; the
    settings of the call (options, decoding, max_length, pooling, batch shape); and the sha256 of the exact
    model input (its token ids, or its text). lm-eval's request cache keyed without the model's identity and
    served stale results after a model update (pytorch/ao#3073): here the identity is in every key.

Value
    The model's outputs only (named arrays and small JSON fields): never the input text, so nothing that the
    publish gate withholds can leave through the store.

Entries
    ``$ATLAS_CACHE_DIR/calls/<key[:2]>/<key>.call``: ``ATLCALL1``, a ``<u4`` header length, the header (JSON:
    the key, the arrays' names, dtypes and shapes, the JSON fields), the arrays' bytes, and a trailing sha256
    over everything before it. Written to a temporary file in the same folder and moved into place with
    :func:`os.replace`, so a reader sees no entry or a whole one and two processes writing the same key
    never leave a torn file. An entry that fails its checks (a truncated write, a flipped bit, a file under
    another key's name) is never used: it is recomputed, replaced, counted and named (:data:`TALLY`, which
    the run's cell records and the build report prints). A store that cannot be written (read-only, full)
    costs the cache, never the run: the outputs are used, a warning says so once.

Reproducible values
    An entry is computed once and then served to every version, protocol, variant, build and ``atlas run``,
    so its value must not depend on which call computed it first. The adapters therefore run the model on
    fixed-shape batches (:func:`fixed_batches`: inputs grouped by their length rounded up to a width bucket,
    every batch exactly ``rows`` rows, the last one filled with padding rows): the float32 sums of an input
    are then the same whatever its neighbours (checked: ``tests/models/test_calls.py``). The torch thread
    count may still change the last bits (about 1e-7); the atlas runs each worker with its share of the
    cores and records the thread count in each entry.

Switch
    ``ATLAS_MODEL_CALLS=off`` computes every call and stores nothing (``ATLAS_EMBED_CACHE=off`` does the same
    for embeddings alone, as before the store existed). ``atlas cache`` lists the store, its size, and clears it.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import struct
import tempfile
import time
import warnings
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from atlaslib import sources, syntax
from atlaslib.calltally import TALLY, Tally  # noqa: F401  (the process's tally: results.Timer reads it too)
from atlaslib.phases import CLOCK

FORMAT = 1
MAGIC = b"ATLCALL1"
ENV_SWITCH = "ATLAS_MODEL_CALLS"
_OFF = ("0", "off", "false", "no", "none", "disabled")
SUFFIX = ".call"
#: fixed batch shape of the adapters' model calls (see the module docstring): rows per batch, width bucket
ROWS, WIDTH = 8, 16


def env_enabled(switch: str = ENV_SWITCH) -> bool:
    return os.environ.get(switch, "on").strip().lower() not in _OFF


def root_dir() -> Path:
    """``<atlas cache dir>/calls`` (``$ATLAS_CACHE_DIR``), read at each use."""
    return sources.cache_dir() / "calls"


def digest(obj) -> str:
    """sha256 hex of the canonical JSON of ``obj`` (a text is hashed as its UTF-8 bytes)."""
    if isinstance(obj, str):
        data = obj.encode("utf-8", "surrogatepass")
    else:
        data = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                          default=_json_default).encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()


def _json_default(x):
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating):
        return float(x)
    if isinstance(x, np.ndarray):
        return x.tolist()
    return str(x)


#: members of an adapter that only describe it for the run's record (its ``info``): no output of a model call
#: passes through them, so an edit there keeps every stored entry (a whole-file digest made all of a model's
#: calls miss after a change to what its run spec records)
RECORD_ONLY = ("info",)


@functools.lru_cache(maxsize=None)
def code_digest(module_file: str) -> str:
    """sha256 of a module's syntax tree without docstrings (comments are not in the tree) and without the
    members of :data:`RECORD_ONLY`: the part of a model's identity that is the adapter's own code."""
    tree = syntax.dump(Path(module_file).read_text(encoding="utf-8"), docstrings=False, annotate_fields=False,
                       leave_out=RECORD_ONLY)
    return hashlib.sha256(tree.encode("utf-8")).hexdigest()


def package_versions(names=("torch", "transformers", "tokenizers")) -> dict:
    from atlaslib.results import package_versions as _pv

    return _pv(tuple(names))


# ------------------------------------------------------------------------------------------------ entries

def encode_entry(key: str, value: dict, space: dict | None = None, seconds: float | None = None) -> bytes:
    """The bytes of one entry: ``value`` maps names to numpy arrays or JSON-able fields; ``space`` (the model's
    short name and the capability, never an input) is what ``atlas cache list`` groups entries by; ``seconds``:
    the model's time for this answer when it was computed (its batch's time over the batch's answers), which a
    run served this entry counts as its prediction time (:mod:`atlaslib.phases`)."""
    arrays, fields = [], {}
    for name, v in value.items():
        if isinstance(v, np.ndarray):
            a = np.ascontiguousarray(v)
            if a.dtype.kind not in "fiub":
                raise TypeError(f"model-call store: array {name!r} has dtype {a.dtype}; expected numbers")
            arrays.append((name, a.dtype.newbyteorder("<").str, list(a.shape), a.astype(a.dtype.newbyteorder("<"))))
        else:
            fields[name] = v
    head = {"key": key, "arrays": [[n, d, s] for n, d, s, _ in arrays], "fields": fields, "space": space or {}}
    if seconds is not None:
        head["seconds"] = round(float(seconds), 6)
    header = json.dumps(head,
                        sort_keys=True, separators=(",", ":"), default=_json_default).encode("utf-8")
    body = MAGIC + struct.pack("<I", len(header)) + header + b"".join(a.tobytes() for *_, a in arrays)
    return body + hashlib.sha256(body).digest()


def decode_entry(data: bytes, key: str, meta: dict | None = None) -> dict | None:
    """The value stored in ``data`` for ``key``; None when anything does not check out. ``meta``, when given,
    receives the entry's recorded ``seconds`` (None for an entry stored without them)."""
    m = len(MAGIC)
    if len(data) < m + 4 + 32 or data[:m] != MAGIC or hashlib.sha256(data[:-32]).digest() != data[-32:]:
        return None
    (n,) = struct.unpack_from("<I", data, m)
    try:
        header = json.loads(data[m + 4:m + 4 + n].decode("utf-8"))
        if header.get("key") != key:
            return None
        out = dict(header.get("fields") or {})
        pos = m + 4 + n
        if meta is not None:
            meta["seconds"] = header.get("seconds")
        for name, dtype, shape in header["arrays"]:
            dt = np.dtype(dtype)
            count = int(np.prod(shape, dtype=np.int64)) if shape else 1
            end = pos + count * dt.itemsize
            if end > len(data) - 32:
                return None
            out[name] = np.frombuffer(data, dtype=dt, count=count, offset=pos).reshape(shape).astype(dt.newbyteorder("="))
            pos = end
        return out if pos == len(data) - 32 else None
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        return None


class CallSpace:
    """The calls of one model under one capability and one set of settings.

    ``model``: the model's identity (a JSON-able dict; see the module docstring), or None when the model has
    none that can be pinned (a hub id without a revision): then every call is computed and nothing is stored,
    and ``reason`` says why. ``switch``: the environment variable that turns this space off besides
    :data:`ENV_SWITCH` (``ATLAS_EMBED_CACHE`` for embeddings). ``root``: the store's folder (default
    :func:`root_dir`, read at each use)."""

    def __init__(self, model: dict | None, capability: str, settings: dict | None = None, *,
                 enabled: bool = True, reason: str | None = None, switch: str | None = None,
                 root: str | os.PathLike | None = None):
        self.model = model
        self.capability = capability
        self.settings = dict(settings or {})
        self._option, self._switch = bool(enabled), switch
        self._reason = reason if reason is not None else (
            None if model is not None else "off: the model has no pinned identity (no revision)")
        self._root = Path(root) if root is not None else None
        self._base = digest({"format": FORMAT, "model": model, "capability": capability,
                             "settings": self.settings}) if model is not None else None
        self.made = self.served = self.corrupt = self.write_errors = 0

    # -- state
    @property
    def reason(self) -> str | None:
        if self._reason is not None:
            return self._reason
        if not self._option:
            return "off by the adapter's option"
        for sw in (ENV_SWITCH, self._switch):
            if sw and not env_enabled(sw):
                return f"off by {sw}={os.environ.get(sw)}"
        return None

    @property
    def enabled(self) -> bool:
        return self.reason is None

    @property
    def root(self) -> Path:
        return self._root if self._root is not None else root_dir()

    @property
    def label(self) -> dict:
        """The model's short name and the capability (what ``atlas cache list`` shows; no input)."""
        m = self.model or {}
        name = m.get("repo") or m.get("name") or m.get("source") or "model"
        pin = str(m.get("revision") or m.get("weights") or "")[:12]
        return {"model": f"{name}@{pin}" if pin else str(name), "capability": self.capability}

    def key(self, input_digest: str) -> str:
        """The key of one call: this space's model, capability and settings with the input's sha256."""
        return hashlib.sha256(f"{self._base}:{input_digest}".encode()).hexdigest()

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}{SUFFIX}"

    # -- reading and writing
    def get(self, key: str, meta: dict | None = None) -> dict | None:
        if not self.enabled:
            return None
        path = self.path(key)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            return None
        value = decode_entry(data, key, meta)
        if value is None:
            self.corrupt += 1
            TALLY.corrupt.append(str(path))
            warnings.warn(f"model-call store: {path} is damaged (it fails its checks); recomputed and replaced",
                          RuntimeWarning, stacklevel=3)
        return value

    def put(self, key: str, value: dict, seconds: float | None = None) -> None:
        if not self.enabled:
            return
        target = self.path(key)
        tmp = None
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{key[:12]}.", suffix=".tmp")
            with os.fdopen(fd, "wb") as f:
                f.write(encode_entry(key, value, self.label, seconds))
            os.replace(tmp, target)
            tmp = None
        except OSError as exc:
            self.write_errors += 1
            TALLY.write_errors += 1
            if self.write_errors == 1:
                warnings.warn(f"model-call store {self.root}: cannot write entries ({exc.strerror or exc}); the "
                              f"model's outputs are used but not stored", RuntimeWarning, stacklevel=3)
        finally:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass

    def answer(self, inputs: Sequence, compute: Callable[[list[int]], Sequence[dict]]) -> list[dict]:
        """The value of every input of ``inputs`` (each given by its exact model input: token ids, a text, or
        any JSON-able structure; it is hashed here, never stored): read from the store, or computed by
        ``compute(positions)`` (the positions in ``inputs`` of the distinct inputs the store lacks, in one
        call: the adapter batches them) and stored with their share of the call's time. Repeated inputs are
        computed once. The recorded time of the answers served goes to the open phase (:mod:`atlaslib.phases`)."""
        digests = [digest(x) for x in inputs]
        first: dict[str, int] = {}
        for i, d in enumerate(digests):
            first.setdefault(d, i)
        out: list = [None] * len(inputs)
        keys = {d: self.key(d) for d in first} if self.enabled else {}
        todo = []
        served_seconds, untimed = 0.0, 0
        for d, i in first.items():
            meta: dict = {}
            value = self.get(keys[d], meta) if self.enabled else None
            if value is None:
                todo.append(i)
            else:
                out[i] = value
                if meta.get("seconds") is None:
                    untimed += 1
                else:
                    served_seconds += float(meta["seconds"])
        n_served = len(first) - len(todo)
        if todo:
            t0 = time.perf_counter()
            values = list(compute(todo))
            share = (time.perf_counter() - t0) / len(todo)
            if len(values) != len(todo):
                raise RuntimeError(f"model-call store: {len(todo)} inputs asked, {len(values)} values computed")
            for i, v in zip(todo, values):
                out[i] = v
                if self.enabled:
                    self.put(keys[digests[i]], v, share)
        if n_served:
            CLOCK.served(served_seconds, untimed)
        for i, d in enumerate(digests):
            if out[i] is None:
                out[i] = out[first[d]]
        self.made += len(todo)
        self.served += n_served
        TALLY.made += len(todo)
        TALLY.served += n_served
        return out

    @property
    def spec(self) -> dict:
        """What a run spec records of the store: on or off, and why off. Not the counts (they depend on what
        earlier runs stored: the cell's ``timing.model_calls`` has them) nor the folder (a path of the machine)."""
        return {"enabled": self.enabled} if self.enabled else {"enabled": False, "reason": self.reason}

    @property
    def info(self) -> dict:
        """On/off (and why off), the store's folder and this space's counts (benchmarks, tests, a live look)."""
        out = {"enabled": self.enabled, "dir": str(self.root), "made": self.made, "served": self.served,
               "corrupt": self.corrupt, "write_errors": self.write_errors}
        if not self.enabled:
            out["reason"] = self.reason
        return out


# ------------------------------------------------------------------------------------------- fixed batches

def fixed_batches(lengths: Sequence[int], rows: int = ROWS, width: int = WIDTH,
                  cap: int | None = None) -> list[tuple[int, list[int]]]:
    """``(padded width, input positions)`` per batch: inputs grouped by their length rounded up to a multiple
    of ``width`` (at most ``cap``, the model's longest input, when given), longest group first, ``rows``
    inputs a batch (the last batch of a group holds fewer; the caller fills it to exactly ``rows`` rows). A
    batch's shape then depends only on its inputs' own lengths, so an input's outputs do not depend on which
    other inputs share its call. ``rows=1`` gives one unpadded input a batch."""
    if rows < 1 or width < 1:
        raise ValueError(f"fixed_batches: rows and width must be positive, got {rows}, {width}")
    groups: dict[int, list[int]] = {}
    for i, n in enumerate(lengths):
        w = int(n) if rows == 1 else max(width, -(-int(n) // width) * width)
        if cap is not None and rows > 1:
            w = max(int(n), min(w, int(cap)))
        groups.setdefault(w, []).append(i)
    out = []
    for w in sorted(groups, reverse=True):
        members = groups[w]
        out.extend((w, members[k:k + rows]) for k in range(0, len(members), rows))
    return out


# ------------------------------------------------------------------------------------------------ the folder

def entries(root: Path | None = None):
    root = Path(root) if root is not None else root_dir()
    if not root.is_dir():
        return
    for sub in sorted(root.iterdir()):
        if sub.is_dir() and len(sub.name) == 2:
            for f in sub.iterdir():
                if f.name.endswith(SUFFIX):
                    yield f


def read_label(path: Path) -> dict:
    """The ``space`` of an entry's header (model, capability); {} when it cannot be read."""
    try:
        with open(path, "rb") as f:
            head = f.read(len(MAGIC) + 4)
            if head[:len(MAGIC)] != MAGIC:
                return {}
            (n,) = struct.unpack_from("<I", head, len(MAGIC))
            return json.loads(f.read(min(n, 1 << 20)).decode("utf-8")).get("space") or {}
    except (OSError, ValueError, struct.error):
        return {}


def listing(root: Path | None = None) -> list[dict]:
    """``[{"model", "capability", "entries", "bytes"}]`` of the store, largest first."""
    groups: dict = {}
    for f in entries(root):
        lab = read_label(f)
        k = (lab.get("model", "?"), lab.get("capability", "?"))
        g = groups.setdefault(k, {"model": k[0], "capability": k[1], "entries": 0, "bytes": 0})
        g["entries"] += 1
        try:
            g["bytes"] += f.stat().st_size
        except OSError:
            pass
    return sorted(groups.values(), key=lambda g: -g["bytes"])


def usage(root: Path | None = None) -> dict:
    """``{"dir", "entries", "bytes"}`` of the store."""
    root = Path(root) if root is not None else root_dir()
    n = size = 0
    for f in entries(root):
        try:
            size += f.stat().st_size
            n += 1
        except OSError:
            pass
    return {"dir": str(root), "entries": n, "bytes": size}


def clear(root: Path | None = None) -> int:
    """Remove every entry (and temporary file) of the store; returns how many entries went."""
    root = Path(root) if root is not None else root_dir()
    n = 0
    if not root.is_dir():
        return 0
    for sub in root.iterdir():
        if sub.is_dir() and len(sub.name) == 2:
            for f in sub.iterdir():
                if f.name.endswith(SUFFIX) or f.name.endswith(".tmp"):
                    try:
                        f.unlink()
                        n += f.name.endswith(SUFFIX)
                    except OSError:
                        pass
            try:
                sub.rmdir()
            except OSError:
                pass
    return n
