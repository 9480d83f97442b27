"""The fine-tune protocol's weight cache (:mod:`.finetune`): trained weights stored under a content key of
everything that decides them, loaded instead of trained when nothing changed.

The trained weights (safetensors) and the training record (loss per step, seconds, label order) are
stored under ``$ATLAS_FINETUNE_CACHE_DIR`` (default ``<atlas cache dir>/finetune``, i.e.
``~/.cache/clinical-nlp-atlas/finetune``) in a folder named by the *content key*: sha256 of the
canonical JSON of the encoder (profile name, source, location, revision, model class), the recipe,
the device type it trains on, the label list, the train item ids, the sha256 of the train inputs and labels, the card's data
sha256, the torch and transformers versions and the sha256 of the training code (:func:`code_sha256`).
A rebuild with nothing changed loads the weights and trains nothing; a change of any field trains anew. An encoder
without a pinned revision (a hub id not in the registry) has no reliable key and is never cached.
``retrain=True`` (the notebooks' ``retrain`` parameter, or ``ATLAS_FINETUNE_RETRAIN=1``:
:func:`.finetune.retrain_requested`) trains even when the weights are cached and replaces them. ``meta.json``
records the sha256 of ``model.safetensors``;
an entry whose weights do not match it (or that cannot be read) is never loaded: the weights are trained
again and replace it, and the run says so (``weight_cache["corrupt"]``, a warning, the run page's
fine-tuning paragraph). Entries are written to a temporary folder and renamed
into place; a lock file per key makes a second run of the same key (e.g. two split versions sharing
their train items) wait for the first and then load its weights instead of training again.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Mapping, Sequence

import torch
from torch import nn

from .. import sources
from .finetune_training import (SequenceHead, TokenHead, _collate, _encode_texts, _Head, _init_linear, _model_keys,
                                _pad, _word_examples, deterministic, epoch_batches, train_loop)

FORMAT = 2   # 2: meta.json records the sha256 of the weights file
CACHE_ENV = "ATLAS_FINETUNE_CACHE_DIR"


def versions() -> dict:
    """torch and transformers versions (part of the cache key and of the cell)."""
    out = {"torch": torch.__version__}
    try:
        out["transformers"] = metadata.version("transformers")
    except metadata.PackageNotFoundError:
        out["transformers"] = None
    return out


def cache_root() -> Path:
    """``$ATLAS_FINETUNE_CACHE_DIR`` when set, else ``<atlas cache dir>/finetune`` (read at each use)."""
    explicit = os.environ.get(CACHE_ENV, "").strip()
    return Path(explicit).expanduser() if explicit else sources.cache_dir() / "finetune"


def _sha256_json(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                                     default=str).encode("utf-8")).hexdigest()


def code_sha256() -> str:
    """sha256 of the source of everything that decides the trained weights (heads, their init, input
    encoding, batching, the training loop, the deterministic set-up): a change there trains anew; a
    change to prediction or page code does not."""
    import inspect

    parts = [_init_linear, _Head, SequenceHead, TokenHead, deterministic, _pad, _collate, _model_keys,
             epoch_batches, train_loop, _encode_texts, _word_examples]
    return hashlib.sha256("\n".join(inspect.getsource(f) for f in parts).encode("utf-8")).hexdigest()


def key_fields(adapter, task: str, recipe: Mapping, labels: Sequence[str], train_ids: Sequence[str],
               train_inputs, train_targets, data_sha256: Mapping | None, device: str = "cpu") -> dict:
    """Everything that decides the trained weights (see the module docstring); ``device`` the type of the device
    the weights are trained on (``cpu``, ``cuda``): kernels differ between devices, so weights trained on one are
    never served for another."""
    info = dict(getattr(adapter, "info", {}) or {})
    return {
        "format": FORMAT, "task": task,
        "encoder": {"profile": info.get("profile"), "source": info.get("source"), "location": info.get("location"),
                    "revision": info.get("revision"), "model_class": info.get("model_class"),
                    "add_prefix_space": info.get("add_prefix_space")},
        "recipe": dict(recipe), "labels": list(labels),
        "train_item_ids_sha256": _sha256_json(list(train_ids)), "n_train": len(train_ids),
        "train_data_sha256": _sha256_json({"inputs": train_inputs, "targets": train_targets}),
        "data_sha256": dict(data_sha256 or {}),
        "versions": versions(), "code_sha256": code_sha256(), "device": str(device).split(":")[0],
    }


class WeightCache:
    """One content key's folder: ``model.safetensors`` + ``meta.json`` (+ ``key.json`` for readers).

    ``meta.json`` carries ``weights_sha256``, the sha256 of ``model.safetensors`` as written; :meth:`load`
    checks it before using the weights, so a file changed after it was written (a flipped bit, a truncated
    copy) is never loaded: it is reported in :attr:`corrupt` and trained again."""

    def __init__(self, fields: dict):
        self.fields = fields
        self.enabled = bool(fields["encoder"].get("revision"))
        self.key = _sha256_json(fields)
        self.path = cache_root() / self.key
        self.corrupt: str | None = None   # why the stored entry was refused, after a failed load
        self.unwritable: str | None = None  # why trained weights could not be stored (the run goes on)

    def exists(self) -> bool:
        return self.enabled and (self.path / "model.safetensors").is_file() and (self.path / "meta.json").is_file()

    def load(self, model: nn.Module) -> dict | None:
        """Load the stored weights into ``model`` and return the stored training record; None when there is
        no entry, or when the entry fails its checks (unreadable meta, weights whose sha256 is not the one
        recorded, tensors that do not fit ``model``): then :attr:`corrupt` says why and ``model`` is untouched."""
        self.corrupt = None
        if not self.exists():
            return None
        from safetensors.torch import load as load_bytes

        try:
            meta = json.loads((self.path / "meta.json").read_text(encoding="utf-8"))
            data = (self.path / "model.safetensors").read_bytes()
        except (OSError, ValueError) as exc:
            self.corrupt = f"unreadable entry ({type(exc).__name__}: {exc})"
            return None
        expected = meta.get("weights_sha256") if isinstance(meta, dict) else None
        actual = hashlib.sha256(data).hexdigest()
        if not expected:
            self.corrupt = "meta.json records no weights_sha256"
            return None
        if actual != expected:
            self.corrupt = f"model.safetensors has sha256 {actual[:16]}…, its meta.json records {expected[:16]}…"
            return None
        try:
            state = load_bytes(data)
            missing, unexpected = model.state_dict().keys() - state.keys(), state.keys() - model.state_dict().keys()
            if missing or unexpected:
                raise ValueError(f"tensors missing {sorted(missing)[:3]}, unexpected {sorted(unexpected)[:3]}")
            model.load_state_dict(state, strict=True)
        except Exception as exc:  # a checksum-valid file that does not fit the model
            self.corrupt = f"weights do not fit the model ({type(exc).__name__}: {str(exc)[:200]})"
            return None
        model.eval()
        return meta

    def save(self, model: nn.Module, meta: dict) -> dict:
        """Store ``model``'s weights and ``meta`` (with the weights' sha256 added, which is also returned in
        the meta) atomically: written to a temporary folder, then renamed into place."""
        from safetensors.torch import save as save_bytes

        state = {k: v.detach().cpu().contiguous().clone() for k, v in model.state_dict().items()}
        data = save_bytes(state)
        meta = {**meta, "weights_sha256": hashlib.sha256(data).hexdigest()}
        if not self.enabled:
            return meta
        try:
            self._write(data, meta)
        except OSError as exc:  # a cache that cannot be written costs the next run its training, never this run
            import warnings

            self.unwritable = f"{type(exc).__name__}: {exc.strerror or exc}"
            warnings.warn(f"fine-tune weight cache {self.path.parent}: the trained weights cannot be stored "
                          f"({self.unwritable}); this run uses them, the next one trains again", RuntimeWarning,
                          stacklevel=3)
        return meta

    def _write(self, data: bytes, meta: dict) -> None:
        root = self.path.parent
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=root, prefix=f".{self.key[:12]}."))
        try:
            (tmp / "model.safetensors").write_bytes(data)
            (tmp / "meta.json").write_text(json.dumps(meta, indent=1, default=str), encoding="utf-8")
            (tmp / "key.json").write_text(json.dumps(self.fields, indent=1, default=str), encoding="utf-8")
            old = None
            if self.path.exists():       # retrain or a corrupt entry: move the old entry aside, then swap
                old = root / f".{self.key[:12]}.old.{os.getpid()}"
                os.replace(self.path, old)
            os.replace(tmp, self.path)
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)

    @contextlib.contextmanager
    def lock(self):
        """An exclusive lock on ``<key>.lock`` (POSIX flock; a no-op where unavailable or disabled)."""
        if not self.enabled:
            yield
            return
        try:
            import fcntl
        except ImportError:  # pragma: no cover - non-POSIX
            yield
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fh = open(self.path.parent / f"{self.key}.lock", "a+")
        except OSError:  # a cache that cannot be written: no lock to take (save() says what is lost)
            yield
            return
        with fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)


def _train_or_load(model: _Head, fields: dict, recipe: dict, retrain: bool, train_fn) -> tuple[dict, dict]:
    """``(training record, cache info)``: load the weights for ``fields`` or train (and store) them. An entry
    that fails its checks (:meth:`WeightCache.load`) is trained again and replaced; ``info["corrupt"]`` says
    why, and a warning says so where the run is shown."""
    import warnings

    from ..phases import phase

    cache = WeightCache(fields)
    asked = time.time()
    with cache.lock():
        meta = None
        if cache.exists():
            fresh = (cache.path / "meta.json").stat().st_mtime >= asked   # trained by another run meanwhile
            if not retrain or fresh:
                with phase("loading"):
                    meta = cache.load(model)
        hit = meta is not None
        if cache.corrupt:
            warnings.warn(f"fine-tune weight cache {cache.path}: {cache.corrupt}; the entry is not used, the "
                          "weights are trained again and replace it", RuntimeWarning, stacklevel=3)
        if not hit:
            meta = cache.save(model, train_fn())
    info = {"key": cache.key, "enabled": cache.enabled, "hit": hit, "retrain_requested": bool(retrain),
            "dir": str(cache.path) if cache.enabled else None, "corrupt": cache.corrupt,
            "unwritable": cache.unwritable,
            "weights_sha256": meta.get("weights_sha256"),
            "note": None if cache.enabled else "encoder without a pinned revision: weights not cached"}
    return meta, info
