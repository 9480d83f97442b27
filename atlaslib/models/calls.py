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

What a key promises
    A value that passes the codec's checks is served only when it is what its call gives: the same array names,
    dtypes and numbers of dimensions as a value the model computed in this space, the dimensions the model fixes
    (an embedding's width, a head's number of labels) equal to that value's, the dimensions the input fixes
    equal to the input's (one log-likelihood per answer option, a fine-tuned token head's row per token id, at
    most ``n_new`` continued ids), and fields within what the capability declares (an assertion label of
    :data:`atlaslib.models.registry.ASSERTION_LABELS`, evidence spans inside the text, a server's reply an
    object). The model's part is learned from the first value the model computes in a space and kept beside
    the entries (``calls/spaces/<space>.json``, :func:`template_of`); a space with no such record computes its
    first input again before it serves any other (one input a space, once). Anything else is damaged: it is
    recomputed, replaced and named like a torn entry. One mechanism for every adapter: :meth:`CallSpace.answer`
    (and :meth:`CallSpace.get`) check every value they serve with :func:`value_problem`.

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
import math
import os
import struct
import tempfile
import time
import warnings
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from atlaslib import fsio, sources, syntax
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
    from atlaslib.results.provenance import package_versions as _pv

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
    """The value stored in ``data`` for ``key``; None when anything does not check out (the header not a JSON
    object of the shape :func:`encode_entry` writes, nested too deeply, arrays of other dtypes than numbers,
    negative or impossible shapes, bytes left over or missing). ``meta``, when given, receives the entry's
    recorded ``seconds`` (None for an entry stored without them)."""
    m = len(MAGIC)
    if len(data) < m + 4 + 32 or data[:m] != MAGIC or hashlib.sha256(data[:-32]).digest() != data[-32:]:
        return None
    (n,) = struct.unpack_from("<I", data, m)
    if m + 4 + n > len(data) - 32:
        return None
    try:
        header = json.loads(data[m + 4:m + 4 + n].decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    if not isinstance(header, dict) or header.get("key") != key:
        return None
    fields, arrays = header.get("fields", {}), header.get("arrays")
    if not isinstance(fields, dict) or not isinstance(arrays, list):
        return None
    seconds = header.get("seconds")
    if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, (int, float))
                                or not math.isfinite(seconds) or seconds < 0):
        return None
    out = dict(fields)
    pos = m + 4 + n
    for spec in arrays:
        if not (isinstance(spec, list) and len(spec) == 3 and isinstance(spec[0], str) and spec[0] not in out
                and isinstance(spec[1], str) and isinstance(spec[2], list)
                and all(type(d) is int and d >= 0 for d in spec[2])):
            return None
        name, dtype, shape = spec
        try:
            dt = np.dtype(dtype)
        except (TypeError, ValueError):
            return None
        if dt.kind not in "fiub" or dt.str != dtype:
            return None
        end = pos + math.prod(shape) * dt.itemsize
        if end > len(data) - 32:
            return None
        count = math.prod(shape)
        out[name] = np.frombuffer(data, dtype=dt, count=count, offset=pos).reshape(shape).astype(dt.newbyteorder("="))
        pos = end
    if pos != len(data) - 32:
        return None
    if meta is not None:
        meta["seconds"] = seconds
    return out


# ------------------------------------------------------------------------------------ what a key promises

#: the labels a capability declares (a stored ``label`` field must be one of them)
def _declared_labels(kind: str):
    from atlaslib.models.registry import ASSERTION_LABELS, NLI_LABELS

    return {"predict.assertion": ASSERTION_LABELS, "predict.nli": NLI_LABELS}.get(kind)


def template_of(value: dict) -> dict:
    """What a computed value shows of its model: its arrays' dtypes and shapes, its fields' names."""
    return {"arrays": {k: [v.dtype.str, list(v.shape)] for k, v in value.items() if isinstance(v, np.ndarray)},
            "fields": sorted(k for k, v in value.items() if not isinstance(v, np.ndarray))}


def _template_ok(t) -> bool:
    """A template as :func:`template_of` writes it (what a record beside the entries must hold)."""
    if not (isinstance(t, dict) and set(t) == {"arrays", "fields"} and isinstance(t["arrays"], dict)
            and isinstance(t["fields"], list) and all(isinstance(f, str) for f in t["fields"])):
        return False
    for spec in t["arrays"].values():
        if not (isinstance(spec, list) and len(spec) == 2 and isinstance(spec[0], str) and isinstance(spec[1], list)
                and all(type(d) is int and d >= 0 for d in spec[1])):
            return False
        try:
            if np.dtype(spec[0]).kind not in "fiub":
                return False
        except (TypeError, ValueError):
            return False
    return True


_NO_INPUT = object()


def _dims(kind: str, name: str, model_shape: list, inp) -> list:
    """The dimensions a call's array must have: an int (exactly), ``("<=", n)`` (at most n) or None (any). The
    model fixes what its computed value shows; the input fixes the rest (see the module docstring)."""
    if inp is not _NO_INPUT:
        try:
            if kind == "score.options" and name == "loglik":
                return [len(inp["options"])]
            if kind == "continue.greedy" and name == "ids":
                return [("<=", int(inp["n_new"]))]
            if kind == "finetune.logits" and name == "logits" and len(model_shape) == 2:
                return [len(inp["input_ids"]), model_shape[1]]
        except (TypeError, KeyError, ValueError, IndexError):
            pass
    if kind in ("embed.text.tokens", "continue.greedy", "score.options") or (
            kind == "finetune.logits" and len(model_shape) == 2):
        return [None, *model_shape[1:]]                     # a row a word / id / option / token: the input's
    return list(model_shape)


def _field_problem(kind: str, name: str, v, inp) -> str | None:
    labels = _declared_labels(kind)
    if kind == "openai.reply" and name == "reply" and not isinstance(v, dict):
        return f"reply is {type(v).__name__}, not an object"
    if kind == "predict.ner" and name == "tags" and not (isinstance(v, list) and all(isinstance(t, str) for t in v)):
        return "tags are not a list of strings"
    if name == "label" and labels is not None and (not isinstance(v, str) or v not in labels):
        return f"label {str(v)[:40]!r} is not one of {', '.join(labels)}"
    if name == "evidence" and labels is not None and v is not None:
        span = v.get("span") if isinstance(v, dict) else None
        if not (isinstance(v, dict) and isinstance(v.get("category"), str) and isinstance(span, list)
                and len(span) == 2 and all(type(x) is int for x in span) and 0 <= span[0] <= span[1]
                and (not isinstance(inp, str) or span[1] <= len(inp))):
            return "evidence is not a category with a span inside the text"
    return None


def value_problem(kind: str, value: dict, template: dict | None, inp=_NO_INPUT) -> str | None:
    """Why ``value`` (decoded from an entry of a ``kind`` call for the input ``inp``) is not what its key
    promises, or None when it is. ``template``: what a value the model computed in this space showed
    (:func:`template_of`; None: not known yet, only what the capability and the input fix is checked)."""
    if not isinstance(value, dict):
        return "not a mapping of outputs"
    arrays = {k: v for k, v in value.items() if isinstance(v, np.ndarray)}
    if template is not None:
        want = template["arrays"]
        if set(arrays) != set(want) or sorted(set(value) - set(arrays)) != sorted(template["fields"]):
            return (f"outputs {sorted(value)}, expected {sorted([*want, *template['fields']])}")
        for name, a in arrays.items():
            dtype, shape = want[name]
            if a.dtype != np.dtype(dtype):
                return f"{name} is {a.dtype}, expected {np.dtype(dtype)}"
            if a.ndim != len(shape):
                return f"{name} has {a.ndim} dimensions, expected {len(shape)}"
            rules = _dims(kind, name, shape, inp)
            for got, rule in zip(a.shape, rules):
                if isinstance(rule, tuple) and got > rule[1]:
                    return f"{name} has shape {list(a.shape)}, expected at most {rule[1]} rows"
                if isinstance(rule, int) and got != rule:
                    want = [r if isinstance(r, int) else "*" for r in rules]
                    return f"{name} has shape {list(a.shape)}, expected {want}"
    elif inp is not _NO_INPUT:
        for name, a in arrays.items():
            rule = _dims(kind, name, list(a.shape), inp)
            if kind in ("score.options", "continue.greedy") and isinstance(rule[0], (int, tuple)):
                lim = rule[0] if isinstance(rule[0], int) else rule[0][1]
                if a.ndim != 1 or (a.shape[0] != lim if isinstance(rule[0], int) else a.shape[0] > lim):
                    return f"{name} has shape {list(a.shape)} for this input"
    for name, v in value.items():
        if not isinstance(v, np.ndarray):
            problem = _field_problem(kind, name, v, inp)
            if problem:
                return problem
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
        self._known: dict | None = None       # this space's template (:meth:`_template`)
        self._checked = False                 # its record read (once a process)

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
    def _damaged(self, path, why: str) -> None:
        self.corrupt += 1
        TALLY.corrupt.append(str(path))
        warnings.warn(f"model-call store: {path} {why}; recomputed and replaced", RuntimeWarning, stacklevel=4)

    def _read(self, path: Path) -> bytes | None:
        """The bytes of an entry (or record) that is a regular file; None when there is none. A pipe, a
        device, a folder or a socket in its place is never opened for reading (it could block forever): it
        is damaged, named, and replaced when the value is stored."""
        try:
            return fsio.read_bytes(path)
        except fsio.NotAFile as exc:
            self._damaged(path, f"is {exc.what}, not an entry")
            return None
        except OSError:
            return None

    def get(self, key: str, meta: dict | None = None, inp=_NO_INPUT) -> dict | None:
        """The stored value of ``key`` when there is one that passes the codec's checks and is what the key
        promises (:func:`value_problem`: what the capability, the input ``inp`` when given, and the values this
        model computed in this space fix); None otherwise (a damaged entry is counted and named)."""
        if not self.enabled:
            return None
        path = self.path(key)
        data = self._read(path)
        if data is None:
            return None
        value = decode_entry(data, key, meta)
        if value is None:
            self._damaged(path, "is damaged (it fails its checks)")
            return None
        problem = value_problem(self.capability, value, self._template(), inp)
        if problem is not None:
            self._damaged(path, f"does not hold what its key promises ({problem})")
            return None
        return value

    def _write(self, target: Path, data: bytes) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        fsio.remove_unless_regular(target)          # a folder or a pipe where the file goes: replaced
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name[:12]}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, target)
            tmp = None
        finally:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass

    def _write_failed(self, exc: OSError) -> None:
        self.write_errors += 1
        TALLY.write_errors += 1
        if self.write_errors == 1:
            warnings.warn(f"model-call store {self.root}: cannot write entries ({exc.strerror or exc}); the "
                          f"model's outputs are used but not stored", RuntimeWarning, stacklevel=4)

    def put(self, key: str, value: dict, seconds: float | None = None) -> None:
        if not self.enabled:
            return
        try:
            self._write(self.path(key), encode_entry(key, value, self.label, seconds))
        except OSError as exc:
            self._write_failed(exc)

    # -- what this space's values look like (the model's part of a key's promise)
    @property
    def record_path(self) -> Path:
        return self.root / "spaces" / f"{self._base}.json"

    def _template(self) -> dict | None:
        """What a value this model computed in this space showed (:func:`template_of`): learned in this process
        or read from the space's record; None when neither is known (a damaged record is named)."""
        if self._checked or self._base is None:
            return self._known
        self._checked = True
        path = self.record_path
        data = self._read(path)
        if data is not None:
            try:
                rec = json.loads(data.decode("utf-8"))
            except (ValueError, UnicodeDecodeError, RecursionError):
                rec = None
            if isinstance(rec, dict) and rec.get("space") == self._base and _template_ok(rec.get("template")):
                self._known = rec["template"]
            else:
                self._damaged(path, "is damaged (not this space's record)")
        return self._known

    def _learn(self, value: dict) -> None:
        """Take what a computed value shows as this space's template; record it beside the entries when it is
        new or differs from the record (which is then named as damaged)."""
        t = template_of(value)
        old = self._template()
        if old == t or (old is not None and value_problem(self.capability, value, old) is None):
            return
        if old is not None:
            self._damaged(self.record_path, "does not match what the model computes")
        self._known = t
        try:
            self._write(self.record_path, json.dumps({"space": self._base, "capability": self.capability,
                                                      "template": t}, sort_keys=True).encode("utf-8"))
        except OSError:
            pass                # a store that cannot be written stores no entries either (put says so once)

    def answer(self, inputs: Sequence, compute: Callable[[list[int]], Sequence[dict]]) -> list[dict]:
        """The value of every input of ``inputs`` (each given by its exact model input: token ids, a text, or
        any JSON-able structure; it is hashed here, never stored): read from the store, or computed by
        ``compute(positions)`` (the positions in ``inputs`` of the distinct inputs the store lacks, in one
        call: the adapter batches them) and stored with their share of the call's time. Repeated inputs are
        computed once. A stored value is served only when it is what its key promises (:func:`value_problem`);
        a space that has never computed a value computes its first input before serving any (its template).
        The recorded time of the answers served goes to the open phase (:mod:`atlaslib.phases`)."""
        digests = [digest(x) for x in inputs]
        first: dict[str, int] = {}
        for i, d in enumerate(digests):
            first.setdefault(d, i)
        out: list = [None] * len(inputs)
        keys = {d: self.key(d) for d in first} if self.enabled else {}
        held: dict[str, tuple[dict, dict]] = {}
        todo = []
        for d, i in first.items():
            meta: dict = {}
            value = self.get(keys[d], meta, inputs[i]) if self.enabled else None
            if value is None:
                todo.append(i)
            else:
                held[d] = (value, meta)
        witness = None
        if held and not todo and self._template() is None:   # nothing computed here yet: compute one to learn
            witness = next(iter(held))
            todo.append(first[witness])

        def run(positions):
            t0 = time.perf_counter()
            values = list(compute(positions))
            share = (time.perf_counter() - t0) / len(positions)
            if len(values) != len(positions):
                raise RuntimeError(f"model-call store: {len(positions)} inputs asked, {len(values)} values computed")
            if self.enabled and values:
                self._learn(values[0])
            for i, v in zip(positions, values):
                out[i] = v
                if self.enabled:
                    self.put(keys[digests[i]], v, share)

        if todo:
            run(todo)
        again = []
        if held and todo:                                   # served values checked against what was just learned
            template = self._template()
            for d in list(held):
                problem = value_problem(self.capability, held[d][0], template, inputs[first[d]])
                if problem is not None:
                    self._damaged(self.path(keys[d]), f"does not hold what its key promises ({problem})")
                    if d != witness:
                        again.append(first[d])
                if problem is not None or d == witness:
                    del held[d]
        if again:
            run(again)
        served_seconds, untimed = 0.0, 0
        for d, (value, meta) in held.items():
            out[first[d]] = value
            if meta.get("seconds") is None:
                untimed += 1
            else:
                served_seconds += float(meta["seconds"])
        n_made, n_served = len(todo) + len(again), len(held)
        if n_served:
            CLOCK.served(served_seconds, untimed)
        for i, d in enumerate(digests):
            if out[i] is None:
                out[i] = out[first[d]]
        self.made += n_made
        self.served += n_served
        TALLY.made += n_made
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
    """The ``space`` of an entry's header (model, capability, as text); {} when it cannot be read: not a regular
    file (a pipe is never opened for reading), not an entry, a header that is not a JSON object or nested too
    deeply."""
    try:
        with fsio.open_regular(path, "rb") as f:
            head = f.read(len(MAGIC) + 4)
            if len(head) < len(MAGIC) + 4 or head[:len(MAGIC)] != MAGIC:
                return {}
            (n,) = struct.unpack_from("<I", head, len(MAGIC))
            header = json.loads(f.read(min(n, 1 << 20)).decode("utf-8"))
    except (OSError, ValueError, struct.error, RecursionError):
        return {}
    space = header.get("space") if isinstance(header, dict) else None
    if not isinstance(space, dict):
        return {}
    return {k: str(space[k]) for k in ("model", "capability") if isinstance(space.get(k), (str, int, float))}


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
    spaces = root / "spaces"                  # the spaces' templates go with their entries
    if spaces.is_dir() and not spaces.is_symlink():
        for f in spaces.iterdir():
            try:
                f.unlink()
            except OSError:
                pass
        try:
            spaces.rmdir()
        except OSError:
            pass
    return n
